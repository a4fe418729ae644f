"""Operator tables for every device kind in one frame: ``op_types`` (per type) and ``ops`` (per op).

Kinds and sources (FORMATS.md 3.3-3.5, 3.7, 3.8, 3.16, 3.17, 4.2, 4.3, 5.2, 5.3):
- ``ai_core``: ``aicore_intermediate_{id}_type.csv`` / ``_detail.csv`` (detail joined to
  ``framework_raw_{id}.csv`` and ``flops_{id}.txt`` by full op name);
- ``ai_cpu``: ``aicpu_intermediate_{id}.csv`` (one row per execution, grouped here);
- ``cpu``: ``cpu_op_type_info_{id}.csv`` / ``cpu_op_detail_info_{id}.csv`` (via `framework`);
- ``gpu``: ``gpu_op_type_info_{id}.csv`` / ``gpu_op_detail_info_{id}.csv``;
- ``npu``: ``kernel_details.csv`` or a profiler database (the device tasks) grouped by type / name, or
  ``op_statistic.csv``.

Every time is converted to us; ``count`` is the number of executions. A row of a type/detail file whose
time is impossible (negative, or over `_util.MAX_DURATION_US`) is skipped with the trace readers' warning
(`_util.drop_impossible_times`). ``percent`` in ``op_types`` is
recomputed from the times (the type's share of its kind's total, 0..100), because the files' own
percent columns changed scale between writers (0..100 or 0..1) and MindInsight 2.3.1 multiplies an
already-percent column by 100; ``file_percent`` keeps the file's value as written.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import MalformedFileError, MissingColumnError, ProfilerDataError
from . import framework
from ._util import drop_impossible_times, line_of, numeric, read_csv, snake, too_many_bad, warn_partial
from .discover import RunFiles
from ..schema import FRAMES, OP_KINDS

US_PER_MS = 1000.0
TYPE_COLUMNS = FRAMES["op_types"].required  # as declared in nbprofiler.schema
OP_COLUMNS = FRAMES["ops"].required


def _first(df: pd.DataFrame, names, path: Path, what: str) -> str:
    """The first of ``names`` present in ``df`` (header variants), else `MissingColumnError`."""
    for n in names:
        if n in df.columns:
            return n
    raise MissingColumnError(path, f"missing {what} column (one of {list(names)}); header is {list(df.columns)}",
                             line=1, field=names[0])


def _short_type(name: str) -> str:
    """Type from an op name: ``Default/net/Conv2D-op12`` -> ``Conv2D``; ``GetNext`` -> ``GetNext``."""
    return name.rsplit("/", 1)[-1].split("-op", 1)[0]


def _avg(total: pd.Series, count: pd.Series) -> pd.Series:
    return total / count.astype("float64").replace(0, np.nan)


# -- AI Core ----------------------------------------------------------------------------------------
def aicore_types(path: Path) -> pd.DataFrame:
    """``aicore_intermediate_{id}_type.csv``: any header generation (``op_type``/``kernel_type``,
    ``execution_time``/``total_time``). Time = the type's summed time in ms -> ``total_time_us``;
    ``count`` = ``execution_frequency`` (may be written as a float such as ``6.0``)."""
    df = read_csv(path)
    type_col = _first(df, ["op_type", "kernel_type"], path, "operator type")
    time_col = _first(df, ["total_time", "execution_time"], path, "time")
    freq_col = _first(df, ["execution_frequency"], path, "execution frequency")
    out = pd.DataFrame({"op_type": df[type_col].str.strip(),
                        "total_time_us": numeric(df, time_col, path, allow_missing=False) * US_PER_MS,
                        "count": numeric(df, freq_col, path, allow_missing=False).round().astype("int64")})
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    out["file_percent"] = numeric(df, "percent", path) if "percent" in df else np.nan
    return drop_impossible_times(out, df, path, {"total_time_us": (time_col, 1.0)})


def framework_info(path: Path) -> pd.DataFrame:
    """``framework_raw_{id}.csv`` keyed by full op name (first row kept where a name repeats).

    Header generations mapped by name (FORMATS 3.5): the full name is ``full_op_name`` (1.x, 2.2) or
    ``full_kernel_name`` (2.3-era, where ``op_name`` is the full name too); the short name is
    ``kernel_name`` if present, else the 1.x ``op_name``; the type is ``op_type`` if present (2.2 also has
    ``kernel_type`` = task type AI_CORE/AI_CPU, kept as ``task_type``), else ``kernel_type``.
    Columns: ``op_name`` (full), ``short_name``, ``op_type``, ``task_id``, ``stream_id``, ``block_dim``
    (Int64), ``subgraph``, ``op_info`` (str JSON as written), ``task_type``, ``graph_id`` where present.
    """
    df = read_csv(path)
    full = _first(df, ["full_op_name", "full_kernel_name"], path, "full operator name")
    out = pd.DataFrame({"op_name": df[full].str.strip()})
    if "kernel_name" in df:
        out["short_name"] = df["kernel_name"].str.strip()
    elif full == "full_op_name" and "op_name" in df:
        out["short_name"] = df["op_name"].str.strip()
    if "op_type" in df:
        out["op_type"] = df["op_type"].str.strip()
        if "kernel_type" in df:
            out["task_type"] = df["kernel_type"].str.strip()
    elif "kernel_type" in df:
        out["op_type"] = df["kernel_type"].str.strip()
    for col in ("task_id", "stream_id", "block_dim", "graph_id"):
        if col in df:
            out[col] = numeric(df, col, path, dtype=int).astype("Int64")
    if "subgraph" in df:
        out["subgraph"] = df["subgraph"]
    if "op_info" in df:
        keep = df["op_info"].str.strip() != ""
        bad = []
        for i, cell in enumerate(df["op_info"]):
            if keep.iloc[i]:
                try:
                    json.loads(cell)
                except (ValueError, RecursionError) as e:  # costs that cell only (see `numeric`)
                    bad.append(i)
                    if len(bad) == 1:
                        first = (line_of(df, i), e.msg if isinstance(e, json.JSONDecodeError)
                                 else "nested too deep" if isinstance(e, RecursionError) else "a number too long")
        if bad:
            if too_many_bad(len(bad), int(keep.sum())):
                raise MalformedFileError(path, f"op_info is not JSON: {first[1]} ({len(bad)} of {int(keep.sum())} "
                                               "cells)", line=first[0], field="op_info")
            warn_partial(MalformedFileError(path, f"op_info is not JSON: {first[1]}; that cell left empty"
                                                  + (f", {len(bad) - 1} more" if len(bad) > 1 else ""),
                                            line=first[0], field="op_info"))
            keep.iloc[bad] = False
        out["op_info"] = df["op_info"].where(keep, None)
    return out.drop_duplicates("op_name", keep="first").reset_index(drop=True)


def _execution_counts(path: Path | None) -> pd.Series | None:
    """Executions per full op name from ``output_timeline_data_{id}.txt`` (one line per execution)."""
    if path is None:
        return None
    df = read_csv(path, skipinitialspace=True)
    name = _first(df, ["op_name"], path, "op_name")
    return df[name].str.strip().value_counts()


def aicore_ops(run: RunFiles) -> pd.DataFrame:
    """``aicore_intermediate_{id}_detail.csv`` joined to framework_raw and flops (left joins).

    Header variants: name ``full_op_name`` / ``full_kernel_name`` / ``full_kernel_time`` (sic); time
    ``execution_time`` / ``task_duration``; ``execution_frequency`` optional.

    Time semantics (chosen and checked on the real files): the detail time is the **average duration
    per call** in ms, in every generation. With ``execution_frequency`` (``run_1_widedeep``), time x
    frequency summed per type equals the type file's total. Without it (1.x, ``run_2_lenet``) the value
    is also an average: ``Default/AssignAdd-op142`` has 0.00219 ms and ran twice in
    ``output_timeline_data_1.txt`` (0.0031 + 0.00128 ms). So ``avg_time_us`` = time x 1000 always;
    ``count`` = execution_frequency, else the op's executions in ``output_timeline_data_{id}.txt`` when
    that file exists, else <NA>; ``total_time_us`` = avg x count (NaN when the count is unknown).
    """
    path = run.get("aicore_detail")
    df = read_csv(path)
    name_col = _first(df, ["full_op_name", "full_kernel_name", "full_kernel_time", "op_name"], path,
                      "full operator name")
    time_col = _first(df, ["execution_time", "task_duration", "avg_execution_time"], path, "time")
    out = pd.DataFrame({"kind": "ai_core", "op_name": df[name_col].str.strip()})
    out["avg_time_us"] = numeric(df, time_col, path, allow_missing=False).to_numpy() * US_PER_MS
    if "execution_frequency" in df:
        out["count"] = numeric(df, "execution_frequency", path).round().astype("Int64").to_numpy()
    else:
        counts = _execution_counts(run.get("output_timeline_data"))
        out["count"] = (out["op_name"].map(counts) if counts is not None
                        else pd.Series(pd.NA, index=out.index)).astype("Int64")
    out["total_time_us"] = out["avg_time_us"] * out["count"].astype("float64")
    if "task_type" in df:
        out["task_type"] = df["task_type"].to_numpy()
    out = drop_impossible_times(out, df, path, {"avg_time_us": (time_col, 1.0)})
    fw_path = run.get("framework")
    if fw_path is not None:
        fw = framework_info(fw_path)
        out = out.merge(fw, on="op_name", how="left")
    if "op_type" not in out:
        out["op_type"] = None
    out["op_type"] = out["op_type"].where(out["op_type"].notna(), out["op_name"].map(_short_type))
    if "short_name" not in out:
        out["short_name"] = None
    out["short_name"] = out["short_name"].where(out["short_name"].notna(),
                                                out["op_name"].map(lambda n: n.rsplit("/", 1)[-1]))
    if run.has("flops"):
        from .legacy import flops
        fl = flops(run).drop_duplicates("op_name", keep="first")
        out = out.merge(fl, on="op_name", how="left")
    return out


# -- AI CPU -----------------------------------------------------------------------------------------
def _aicpu_rows(path: Path) -> pd.DataFrame:
    """``aicpu_intermediate_{id}.csv``: one row per execution. Columns ``op_name`` (as written in the
    ``op_type``/``kernel_type`` column), ``op_type`` (the part before the first ``-``), ``total_ms``,
    ``dispatch_ms`` (``execution_time`` is not used: pre-2021 files lack it and it is a constant 0.22 in
    the real file)."""
    df = read_csv(path)
    name_col = _first(df, ["op_type", "kernel_type", "node_type_name"], path, "operator")
    names = df[name_col].str.strip()
    out = pd.DataFrame({"op_name": names, "op_type": names.str.split("-", n=1).str[0],
                        "total_ms": numeric(df, _first(df, ["total_time"], path, "total_time"), path),
                        "dispatch_ms": numeric(df, "dispatch_time", path) if "dispatch_time" in df else np.nan})
    return drop_impossible_times(out, df, path, {"total_ms": ("total_time", US_PER_MS),
                                                 "dispatch_ms": ("dispatch_time", US_PER_MS)})


def aicpu_types(path: Path) -> pd.DataFrame:
    """AI CPU types as MindInsight computes them: total = sum(total_time) x 1000 us, count = rows."""
    rows = _aicpu_rows(path)
    g = rows.groupby("op_type", sort=False).agg(total_ms=("total_ms", "sum"), count=("total_ms", "size"))
    out = pd.DataFrame({"op_type": g.index, "total_time_us": g["total_ms"].to_numpy() * US_PER_MS,
                        "count": g["count"].to_numpy(dtype="int64")})
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    out["file_percent"] = np.nan
    return out


def aicpu_ops(path: Path) -> pd.DataFrame:
    """AI CPU ops grouped by name: ``total_time_us`` (sum), ``count`` (rows), ``avg_time_us`` (mean, what
    MindInsight shows as avg_execution_time), ``dispatch_time_us`` (mean dispatch time per call)."""
    rows = _aicpu_rows(path)
    g = rows.groupby("op_name", sort=False).agg(op_type=("op_type", "first"), total_ms=("total_ms", "sum"),
                                                count=("total_ms", "size"), dispatch_ms=("dispatch_ms", "mean"))
    out = pd.DataFrame({"kind": "ai_cpu", "op_name": g.index, "op_type": g["op_type"].to_numpy(),
                        "total_time_us": g["total_ms"].to_numpy() * US_PER_MS,
                        "count": pd.array(g["count"].to_numpy(), dtype="Int64")})
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    out["dispatch_time_us"] = g["dispatch_ms"].to_numpy() * US_PER_MS
    return out


# -- GPU --------------------------------------------------------------------------------------------
def _gpu_csv(path: Path) -> pd.DataFrame:
    """GPU CSVs may carry unit suffixes (``total_time(us)``): strip them to the bare names."""
    df = read_csv(path, skipinitialspace=True)
    df.columns = [c.split("(", 1)[0].strip() for c in df.columns]
    return df


def gpu_types(path: Path) -> pd.DataFrame:
    """``gpu_op_type_info_{id}.csv``: ``op_type, type_occurrences, total_time, proportion, avg_time``
    (times us, proportion a fraction; FORMATS 3.17, units inferred)."""
    df = _gpu_csv(path)
    count_col = _first(df, ["type_occurrences", "occurrences", "op_occurrences"], path, "occurrences")
    out = pd.DataFrame({"op_type": df[_first(df, ["op_type"], path, "op_type")].str.strip(),
                        "total_time_us": numeric(df, _first(df, ["total_time"], path, "total_time"), path),
                        "count": numeric(df, count_col, path, dtype=int, allow_missing=False)})
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    out["file_percent"] = numeric(df, "proportion", path) if "proportion" in df else np.nan
    return drop_impossible_times(out, df, path, {"total_time_us": ("total_time", 1.0)})


def gpu_ops(path: Path) -> pd.DataFrame:
    """``gpu_op_detail_info_{id}.csv``: ``op_side, op_type, op_name, op_full_name, op_occurrences,
    op_total_time, op_avg_time, proportion, cuda_activity_cost_time, cuda_activity_call_count`` (us)."""
    df = _gpu_csv(path)
    full = _first(df, ["op_full_name", "full_op_name", "op_name"], path, "operator name")
    out = pd.DataFrame({"kind": "gpu", "op_name": df[full].str.strip(),
                        "op_type": df[_first(df, ["op_type"], path, "op_type")].str.strip(),
                        "total_time_us": numeric(df, _first(df, ["op_total_time"], path, "op_total_time"), path),
                        "count": numeric(df, _first(df, ["op_occurrences"], path, "op_occurrences"), path,
                                         dtype=int).astype("Int64")})
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    if "op_name" in df and full != "op_name":
        out["short_name"] = df["op_name"].str.strip()
    if "op_side" in df:
        out["op_side"] = df["op_side"].str.strip()
    if "cuda_activity_cost_time" in df:
        out["cuda_activity_cost_time_us"] = numeric(df, "cuda_activity_cost_time", path)
    if "cuda_activity_call_count" in df:
        out["cuda_activity_call_count"] = numeric(df, "cuda_activity_call_count", path, dtype=int)
    return drop_impossible_times(out, df, path, {"total_time_us": ("op_total_time", 1.0),
                                                 "cuda_activity_cost_time_us": ("cuda_activity_cost_time", 1.0)})


# -- NPU (new format) -------------------------------------------------------------------------------
def npu_types_from_statistic(path: Path) -> pd.DataFrame:
    """CANN ``op_statistic.csv`` (``OP Type, Core Type, Count, Total Time(us), ..., Ratio(%)``), by name.
    Types listed once per core type are summed over core types."""
    df = read_csv(path)
    df.columns = [snake(c) for c in df.columns]
    type_col = _first(df, ["op_type"], path, "OP Type")
    t = pd.DataFrame({"op_type": df[type_col].str.strip(),
                      "total_time_us": numeric(df, _first(df, ["total_time_us"], path, "Total Time(us)"), path),
                      "count": numeric(df, _first(df, ["count"], path, "Count"), path, dtype=int,
                                       allow_missing=False),
                      "file_percent": numeric(df, "ratio_pct", path) if "ratio_pct" in df else np.nan})
    t = drop_impossible_times(t, df, path, {"total_time_us": ("Total Time(us)", 1.0)})
    g = t.groupby("op_type", sort=False).agg(total_time_us=("total_time_us", "sum"), count=("count", "sum"),
                                             file_percent=("file_percent", "sum"))
    out = g.reset_index()
    out["count"] = out["count"].astype("int64")
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    return out


COMMUNICATION_CORES = {"HCCL", "COMMUNICATION", "COMM"}


def is_communication(k: pd.DataFrame) -> pd.Series:
    """Kernels that are collective-communication tasks (accelerator core HCCL, or ``hcom_*`` names): the
    ``communication`` kind, never operators in the NPU operator tables."""
    core = k["accelerator_core"].astype(str).str.upper() if "accelerator_core" in k else pd.Series("", index=k.index)
    return core.isin(COMMUNICATION_CORES) | k["name"].astype(str).str.startswith(("hcom_", "hccl_"))


def _task_rows(run: RunFiles, kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    """The device tasks: ``kernels`` (the kernels frame, where it is already built); else read for their
    durations only, start times on the file's own origin (the profile's origin is the trace's earliest
    event: reading it would parse the whole trace, and no total needs it)."""
    if kernels is not None:
        return kernels
    from . import ascend_ms, db
    if run.has("kernel_details"):
        return ascend_ms.kernels(run)
    return db.kernels(run) if db.has_db(run) else None


def _npu_part(run: RunFiles, kernels: pd.DataFrame | None, build, communication: bool | None = None,
              **assign) -> pd.DataFrame | None:
    """``build(device tasks)``; None without tasks. ``communication``: True builds from the communication
    kernels only, False from the others, None from all (``build`` then splits)."""
    k = _task_rows(run, kernels)
    if k is None or k.empty or not {"name", "type", "dur_us"} <= set(k.columns):
        return None
    if communication is not None:
        k = k[is_communication(k) == communication]
        if k.empty:
            return None
    return build(k).assign(**assign)


def npu_types_from_kernels(k: pd.DataFrame) -> pd.DataFrame:
    """kernel_details rows grouped by kind (``communication`` for HCCL tasks, else ``npu``) and ``type``:
    total = sum of ``dur_us``, count = rows; ``accelerator_core``: the type's most frequent core."""
    k = k.assign(kind=np.where(is_communication(k), "communication", "npu"))
    keys = ["kind", "type"]
    g = k.groupby(keys, sort=False, dropna=False).agg(total_time_us=("dur_us", "sum"), count=("dur_us", "size"))
    out = pd.DataFrame({"kind": g.index.get_level_values(0).astype(str),
                        "op_type": g.index.get_level_values(1).astype(str),
                        "total_time_us": g["total_time_us"].to_numpy(dtype="float64"),
                        "count": g["count"].to_numpy(dtype="int64")})
    if "accelerator_core" in k:
        core = k.groupby(keys, sort=False, dropna=False)["accelerator_core"].agg(
            lambda c: c.value_counts().index[0] if len(c) else "")
        out["accelerator_core"] = core.to_numpy(dtype=object)
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    out["file_percent"] = np.nan
    return out


def npu_types_from_kernel_file(path: Path) -> pd.DataFrame | None:
    """`npu_types_from_kernels` reading only the type and duration columns of ``kernel_details.csv``:
    op-type totals without building the whole kernels frame (its ~30 PMU columns cost ~90 % of the
    parse; a cluster-wide reduce of many ranks needs only these totals). None for a file that does not
    end with a newline (it may be cut inside any column; only the full kernels frame detects that)."""
    from .ascend_ms import KERNEL_COLUMNS
    from .legacy import _ends_with_newline
    if not _ends_with_newline(path):
        return None
    wanted = {raw for raw, col in KERNEL_COLUMNS.items() if col in ("name", "type", "dur_us", "accelerator_core")}
    df = read_csv(path, usecols=lambda c: c.strip() in wanted)
    df = df.rename(columns={c: KERNEL_COLUMNS[c.strip()] for c in df.columns})
    for col in ("name", "type", "dur_us"):
        if col not in df.columns:
            raw = [k for k, v in KERNEL_COLUMNS.items() if v == col]
            raise MissingColumnError(path, f"missing column {raw[0]!r} (or a synonym {raw[1:]})", line=1,
                                     field=raw[0])
    from .trace import fill_kernel_types
    name = df["name"].astype(str).str.strip()
    cols = {"name": name, "type": fill_kernel_types(name, df["type"].astype(str).str.strip()),
            "dur_us": numeric(df, "dur_us", path)}
    if "accelerator_core" in df:
        cols["accelerator_core"] = df["accelerator_core"].astype(str).str.strip()
    return npu_types_from_kernels(pd.DataFrame(cols))


def _npu_types(run: RunFiles, kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    # reuse the kernels frame when it is already parsed; else read just the two columns needed
    if kernels is not None:
        return _npu_part(run, kernels, npu_types_from_kernels)
    types = npu_types_from_kernel_file(run.get("kernel_details"))
    if types is None:
        return _npu_part(run, None, npu_types_from_kernels)
    return types if len(types) else None


def _db_types(run: RunFiles, kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    # the kernels frame when it is already built; else the totals aggregated inside the database
    if kernels is not None:
        return _npu_part(run, kernels, npu_types_from_kernels)
    from . import db
    return db.op_type_totals(run)


def npu_ops(k: pd.DataFrame) -> pd.DataFrame:
    """kernel_details rows grouped by ``name``: total/count/avg of ``dur_us``, the accelerator core."""
    agg = {"op_type": ("type", "first"), "total_time_us": ("dur_us", "sum"), "count": ("dur_us", "size")}
    if "accelerator_core" in k:
        agg["accelerator_core"] = ("accelerator_core", "first")
    g = k.groupby("name", sort=False, dropna=False).agg(**agg)
    out = g.reset_index().rename(columns={"name": "op_name"})
    comm = out["op_name"].isin(set(k.loc[is_communication(k), "name"]))
    out.insert(0, "kind", np.where(comm, "communication", "npu"))
    out["total_time_us"] = out["total_time_us"].astype("float64")
    out["count"] = pd.array(out["count"].to_numpy(), dtype="Int64")
    out["avg_time_us"] = _avg(out["total_time_us"], out["count"])
    return out


# -- builders ---------------------------------------------------------------------------------------
def _finish(parts: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame | None:
    parts = [p for p in parts if p is not None and len(p)]
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True)
    out["kind"] = pd.Categorical(out["kind"], categories=OP_KINDS)
    out = out.sort_values(["kind", "total_time_us"], ascending=[True, False], na_position="last", kind="stable")
    out["kind"] = out["kind"].astype(str)
    rest = [c for c in out.columns if c not in columns]
    return out[columns + rest].reset_index(drop=True)


def _collect(loaders) -> list[pd.DataFrame]:
    """Run each kind's loader; a kind whose file is bad is skipped with a warning (recorded in
    ``prof.problems``) so the other kinds still load. If every kind fails, the first error is raised."""
    parts, errors = [], []
    for load in loaders:
        try:
            parts.append(load())
        except ProfilerDataError as err:
            errors.append(err)
    if errors and not parts:
        raise errors[0]
    for err in errors:
        warn_partial(err)
    return parts


def op_types(run: RunFiles, kernels: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """One row per (kind, operator type): see `nbprofiler.schema.FRAMES["op_types"]` for the columns.
    ``kernels``: the kernels frame where it is already built (the NPU kinds are grouped from it then).

    ``percent`` = this type's ``total_time_us`` / the kind's total x 100 (0..100, unrounded). For
    ``ai_core`` the totals are the type file's, so the share is of the listed types (the real 0-100
    files list types covering only 90.48 % / 71.1 % of their own total, FORMATS 3.3).
    """
    loaders = []
    if run.has("aicore_type"):
        loaders.append(lambda: aicore_types(run.get("aicore_type")).assign(kind="ai_core"))
    if run.has("aicpu"):
        loaders.append(lambda: aicpu_types(run.get("aicpu")).assign(kind="ai_cpu"))
    if run.has("cpu_op_type"):
        loaders.append(lambda: framework.cpu_op_types(run.get("cpu_op_type")).assign(kind="cpu"))
    if run.has("gpu_op_type"):
        loaders.append(lambda: gpu_types(run.get("gpu_op_type")).assign(kind="gpu"))
    if run.has("op_statistic"):
        loaders.append(lambda: npu_types_from_statistic(run.get("op_statistic")).assign(kind="npu"))
        if run.has("kernel_details", "profiler_db", "msprof_db"):
            # op_statistic.csv leaves communication out: its kind comes from the HCCL kernels
            loaders.append(lambda: _npu_part(run, kernels, npu_types_from_kernels, communication=True))
    elif run.has("kernel_details"):
        loaders.append(lambda: _npu_types(run, kernels))
    elif run.has("profiler_db", "msprof_db"):
        loaders.append(lambda: _db_types(run, kernels))
    parts = [p for p in _collect(loaders) if p is not None]
    for p in parts:
        # a part may hold two kinds (npu and communication from the same kernels): share of its own kind
        kind_total = p.groupby("kind")["total_time_us"].transform("sum")
        p["percent"] = (p["total_time_us"] / kind_total.where(kind_total != 0) * 100).fillna(0.0)
    out = _finish(parts, TYPE_COLUMNS)
    if out is not None:
        out["count"] = out["count"].astype("int64")
        out["file_percent"] = out["file_percent"].astype("float64")
    return out


def ops(run: RunFiles, kernels: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """One row per (kind, operator): see `nbprofiler.schema.FRAMES["ops"]` for the columns and the per-kind
    functions here for how each file's time columns become ``total_time_us``/``count``/``avg_time_us``.
    ``kernels``: the kernels frame where it is already built (the NPU operators are grouped from it then)."""
    loaders = []
    if run.has("aicore_detail"):
        loaders.append(lambda: aicore_ops(run))
    if run.has("aicpu"):
        loaders.append(lambda: aicpu_ops(run.get("aicpu")))
    if run.has("cpu_op_detail"):
        loaders.append(lambda: framework.cpu_ops(run.get("cpu_op_detail")).assign(kind="cpu"))
    if run.has("gpu_op_detail"):
        loaders.append(lambda: gpu_ops(run.get("gpu_op_detail")))
    if run.has("kernel_details", "profiler_db", "msprof_db"):
        loaders.append(lambda: _npu_part(run, kernels, npu_ops))
    out = _finish(_collect(loaders), OP_COLUMNS)
    if out is not None:
        out["count"] = out["count"].astype("Int64")
    return out


__all__ = ["op_types", "ops", "aicore_types", "aicore_ops", "framework_info", "aicpu_types", "aicpu_ops",
           "gpu_types", "gpu_ops", "npu_types_from_kernels", "npu_types_from_statistic", "npu_ops"]
