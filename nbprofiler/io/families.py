"""Parsers for the ASCEND_PROFILER_OUTPUT / cluster files that are not operators, steps or timelines:
communication matrices, communication groups, CANN module memory, API statistics, operator details,
L2 cache, static operator memory, AI CPU preprocessing, dataset ranges, and the operator input shapes of
``FRAMEWORK/cpu_framework_*`` (FORMATS.md 4.5, 4.6, 4.9, 4.10, 4.12, 4.13).

CANN copies most of these CSVs from its own summaries, and their headers vary with the CANN version, so
`cann_csv` maps them by header name: every column snake_cased with its unit (``Time(us)`` ->
``time_us``), numeric where the column holds numbers, text otherwise.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import MalformedFileError
from ..schema import FRAMES
from ._util import numeric, read_csv, read_json, read_text, skipped_rows, snake
from . import shared
from .discover import RunFiles

_MISSING = ("", "N/A", "NA", "nan", "-", "None", "NULL")


def cann_csv(path: Path, text_columns=(), time_columns=(), origin_us: float = 0.0) -> pd.DataFrame:
    """A CANN-style CSV, columns snake_cased with units; a column is numeric when every non-blank cell
    is a number (one damaged cell costs that value, see `numeric`), else text. ``text_columns`` (snake
    names) stay text; ``time_columns`` (absolute us timestamps) become relative to ``origin_us``."""
    df = read_csv(path)
    out = pd.DataFrame(index=df.index)
    for raw in df.columns:
        col = snake(raw)
        if col in out.columns:
            col = f"{col}_{list(df.columns).index(raw)}"
        cells = df[raw].astype(str).str.strip().str.strip('"').str.strip()
        if col in text_columns:
            out[col] = cells
            continue
        filled = ~cells.isin(_MISSING)
        parsed = pd.to_numeric(cells.where(filled, None), errors="coerce")
        if not filled.any():
            out[col] = np.nan  # every cell N/A (e.g. hit_rate when the metric was not collected)
        elif parsed[filled].notna().mean() >= 0.9:
            # numeric when (nearly) all filled cells are numbers: a stray bad cell is reported by `numeric`
            vals = numeric(df, raw, path)
            whole = vals.dropna()
            if col not in time_columns and len(whole) and (whole == whole.round()).all() \
                    and not cells[filled].str.contains(r"[.eE]").any():
                vals = vals.astype("Int64")
            out[col] = vals - origin_us if col in time_columns else vals
        else:
            out[col] = cells
    out.attrs["path"] = str(path)
    return out.reset_index(drop=True)


# -- communication matrix ---------------------------------------------------------------------------
MATRIX_COLUMNS = FRAMES["communication_matrix"].required
_STEP = re.compile(r"step\d*")
_LINK = re.compile(r"(\d+)-(\d+)")


def read_matrix(path: Path) -> pd.DataFrame:
    """A (cluster_)communication_matrix.json -> one row per op and link: ``step`` ("step2"), ``group``
    (the group key: "collective"/"p2p" in the per-rank file, the rank tuple or "p2p" in the cluster
    file), ``op_name`` (``Total Op Info`` rows, aggregates of the others, are left out), ``src``, ``dst``
    (str ranks), ``transport`` (LOCAL, HCCS, RDMA, SDMA, PCIE, SIO), ``size_mb``, ``transit_ms``,
    ``bandwidth_gbps``. The levels above the op are a step and a group in either order (the per-rank
    file nests step/group, the cluster file group/step)."""
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    rows, bad = [], []
    for k1, v1 in obj.items():
        if not isinstance(v1, dict):
            raise MalformedFileError(path, "expected an object", field=k1)
        for k2, ops in v1.items():
            step, group = (k1, k2) if _STEP.fullmatch(k1) else (k2, k1)
            if not isinstance(ops, dict):
                raise MalformedFileError(path, "expected an object of operators", field=f"{k1}.{k2}")
            for op, links in ops.items():
                if op == "Total Op Info" or not isinstance(links, dict):
                    continue
                for pair, link in links.items():
                    m = _LINK.fullmatch(pair)
                    where = f"{k1}.{k2}.{op}.{pair}"
                    if not m or not isinstance(link, dict):
                        bad.append((None, f"{where}: not a 'src-dst' link object"))
                        continue
                    try:
                        rows.append((step, group, op, m.group(1), m.group(2), str(link.get("Transport Type", "")),
                                     float(link.get("Transit Size(MB)", np.nan)),
                                     float(link.get("Transit Time(ms)", np.nan)),
                                     float(link.get("Bandwidth(GB/s)", np.nan))))
                    except (TypeError, ValueError):
                        bad.append((None, f"{where}: a value is not a number"))
    skipped_rows(path, bad, len(rows) + len(bad), what="link")
    out = pd.DataFrame(rows, columns=MATRIX_COLUMNS)
    out.attrs["path"] = str(path)
    return out


def communication_matrix(run: RunFiles) -> pd.DataFrame | None:
    """Links of this rank: its communication_matrix.json, else the rows of cluster_communication_matrix.json
    whose source is this rank (each link once over the cluster's ranks); None without either file."""
    path = run.get("communication_matrix")
    if path is not None:
        return read_matrix(path)
    path = run.get("cluster_communication_matrix")
    if path is None:
        return None
    if run.device == "*":
        out = read_matrix(path)
    else:  # every rank's links from one parse of the cluster file
        out = shared.rows_of(path, "communication_matrix", lambda: read_matrix(path), "src", str(run.device))
    out.attrs["path"] = str(path)
    return out


def communication_groups(run: RunFiles) -> pd.DataFrame | None:
    """communication_group.json ``{"collective"|"p2p": [[ranks...], ...]}`` -> one row per group:
    ``kind``, ``group`` (int, position in the file), ``ranks`` (tuple of str), ``size`` (int)."""
    path = run.get("communication_group")
    if path is None:
        return None
    full, _ = shared.whole(path, "communication_groups", lambda: _read_groups(path))  # one parse per process
    out = full.copy()
    out.attrs = dict(full.attrs)
    return out


def _read_groups(path: Path) -> pd.DataFrame:
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    rows = []
    for kind, groups in obj.items():
        if not isinstance(groups, list):
            raise MalformedFileError(path, "expected a list of rank lists", field=kind)
        for i, ranks in enumerate(groups):
            if not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks):
                raise MalformedFileError(path, "expected a list of integer ranks", field=f"{kind}[{i}]")
            rows.append((kind, i, tuple(str(r) for r in sorted(ranks)), len(ranks)))
    out = pd.DataFrame(rows, columns=["kind", "group", "ranks", "size"])
    out.attrs["path"] = str(path)
    return out


# -- CANN summaries ---------------------------------------------------------------------------------
def npu_module_mem(run: RunFiles, origin_us: float = 0.0) -> pd.DataFrame | None:
    """npu_module_mem.csv (CANN per-module reserved memory): ``component`` (the CANN module: SLOG, APP,
    ...), ``time_us`` (relative to ``origin_us``), ``reserved_mb`` (float64), ``device`` (str); None
    without the file."""
    path = run.get("npu_module_mem")
    if path is None:
        return None
    df = read_csv(path, required=["Component", "Timestamp(us)"])
    out = pd.DataFrame({"component": df["Component"].str.strip(),
                        "time_us": numeric(df, "Timestamp(us)", path, allow_missing=False) - float(origin_us)})
    reserved = next((c for c in df.columns if c.startswith("Total Reserved")), None)
    scale = 1 / 1024.0 if reserved and reserved.endswith("(KB)") else 1.0
    out["reserved_mb"] = numeric(df, reserved, path) * scale if reserved else np.nan
    dev = next((c for c in ("Device", "Device_id", "Device Type") if c in df.columns), None)
    out["device"] = df[dev].str.strip() if dev else ""
    out.attrs["path"] = str(path)
    return out.reset_index(drop=True)


def api_statistic(run: RunFiles) -> pd.DataFrame | None:
    """api_statistic.csv (CANN API calls, Level1/2): ``level``, ``api_name``, ``time_us``, ``count``,
    ``avg_us``, ``min_us``, ``max_us``, ``variance`` and any other column, by header name."""
    path = run.get("api_statistic")
    return None if path is None else cann_csv(path, text_columns=("level", "api_name", "device_id"))


def operator_details(run: RunFiles) -> pd.DataFrame | None:
    """operator_details.csv (framework operators, torch_npu/MindSpore): ``name``, ``input_shapes``,
    ``call_stack`` (text), host/device self and total durations in us (``host_self_duration_us`` ...)."""
    path = run.get("operator_details")
    return None if path is None else cann_csv(path, text_columns=("name", "input_shapes", "call_stack"))


def l2_cache(run: RunFiles) -> pd.DataFrame | None:
    """l2_cache.csv: ``stream_id``, ``task_id``, ``hit_rate``, ``victim_rate`` (0..1, NaN for N/A),
    ``op_name``."""
    path = run.get("l2_cache")
    return None if path is None else cann_csv(path, text_columns=("op_name", "device_id"))


def static_op_mem(run: RunFiles) -> pd.DataFrame | None:
    """static_op_mem.csv (graph-mode static memory per operator): the file's columns by header name
    (``op_name``, ``node_index_start``, ``node_index_end``, ``size_kb`` ...)."""
    path = run.get("static_op_mem")
    return None if path is None else cann_csv(path, text_columns=("op_name", "graph_name", "device_id"))


def data_preprocess(run: RunFiles) -> pd.DataFrame | None:
    """data_preprocess.csv (CANN AI CPU preprocessing, Level2): the file's columns by header name."""
    path = run.get("data_preprocess")
    return None if path is None else cann_csv(path, text_columns=("node", "op_name", "device_id"))


def dataset(run: RunFiles) -> pd.DataFrame | None:
    """dataset.csv (MindSpore dataset ranges / CPU activity): the file's columns by header name, e.g.
    ``operation``, ``stage``, ``occurrences``, ``avg_time_us`` (FORMATS 4.6)."""
    path = run.get("dataset")
    return None if path is None else cann_csv(path, text_columns=("operation", "stage", "op_name", "name"))


# -- FRAMEWORK/cpu_framework_* ----------------------------------------------------------------------
def input_shapes(run: RunFiles) -> pd.DataFrame | None:
    """``FRAMEWORK/cpu_framework_{id}.txt`` (one line per op execution, ``<type>;<op name>;<n>;input_1:[..];``)
    -> one row per operator and distinct input shapes: ``op_name`` (short name, e.g. ``Conv2D-op0``),
    ``op_type``, ``input_shapes`` (``[32, 1, 32, 32];[6, 1, 5, 5]``), ``count`` (executions). Placeholder
    lines (``;;<n>;``: executions of bare-named ops, FORMATS 4.12) carry nothing and are skipped."""
    path = run.get("cpu_framework")
    if path is None:
        return None
    text = read_text(path)
    # A run executes the same few ops thousands of times: each distinct line is parsed once, and counted.
    lines = Counter(text.splitlines())
    counts, bad_lines, n = {}, {}, 0
    for line, times in lines.items():
        if not line.strip():
            continue
        n += times
        parts = line.rstrip().rstrip(";").split(";")
        if len(parts) < 3:
            bad_lines[line] = f"{line[:40]!r} is not '<type>;<op name>;<n>;input_1:[...];'"
            continue
        if not parts[0] and not parts[1]:
            continue
        shapes = ";".join(p.split(":", 1)[1] if ":" in p else p for p in parts[3:])
        key = (parts[1].strip(), parts[0].strip(), shapes)
        counts[key] = counts.get(key, 0) + times
    if bad_lines:
        skipped_rows(path, [(ln, bad_lines[line]) for ln, line in enumerate(text.splitlines(), start=1)
                            if line in bad_lines], n)
    out = pd.DataFrame(list(counts), columns=["op_name", "op_type", "input_shapes"])
    out["count"] = np.fromiter(counts.values(), dtype="int64", count=len(counts))
    out.attrs["path"] = str(path)
    return out


__all__ = ["cann_csv", "read_matrix", "communication_matrix", "communication_groups", "npu_module_mem",
           "api_statistic", "operator_details", "l2_cache", "static_op_mem", "data_preprocess", "dataset",
           "input_shapes"]
