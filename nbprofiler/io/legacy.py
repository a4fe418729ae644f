"""Parsers for the legacy (MindSpore 1.x - 2.2, MindInsight-era) profiler files other than operators.

Step trace (``step_trace_raw_*_detail_time.csv``), its anchor ops (``step_trace_point_info*.json``),
FLOPs (``flops_*.txt``, ``flops_summary_*.json``), communication (``hccl_raw_*.csv``), cluster metrics
(``ascend_cluster_analyse_*.csv``) and the timeline summary (``*timeline_summary_*.json``).
FORMATS.md sections 3.2, 3.8, 3.14, 3.18, 3.20 and 5.1 describe the files; the frame contracts are the
builder docstrings in `nbprofiler.model.build`.
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import MalformedFileError, MissingColumnError, ProfilerDataWarning, TruncatedFileError
from ._util import line_of, numeric, read_csv, read_json, read_text, require_keys, skipped_rows, warn_partial
from .discover import RunFiles

# Ascend step-trace points are 10 ns syscnt ticks: 100 000 ticks per millisecond (FORMATS 1.2).
TICKS_PER_MS = 100_000
# MindInsight rounds every converted step-trace value to 4 decimals.
MS_DECIMALS = 4

STEP_POINTS = {"start_point": "start_ms", "fp_point": "fp_start_ms", "bp_point": "bp_end_ms",
               "end_point": "end_ms"}
TRAIN_STAGES = {"iteration_interval": "iteration_interval_ms", "fp_and_bp": "fp_and_bp_ms", "tail": "tail_ms"}
INFER_STAGES = {"iteration_interval": "iteration_interval_ms", "fp": "fp_ms"}


def ticks_to_ms(ticks: pd.Series | np.ndarray) -> np.ndarray:
    """10 ns ticks -> ms rounded to 4 decimals, exactly as MindInsight converts them.

    Python's ``round`` (correctly rounded from the binary value) rather than numpy's scale-and-rint:
    19378115 ticks is 193.78114999... ms, which MindInsight shows as 193.7811 and numpy rounds to 193.7812.
    """
    ms = np.asarray(ticks, dtype="float64") / TICKS_PER_MS
    return np.array([round(v, MS_DECIMALS) for v in ms.tolist()], dtype="float64")



# -- step trace -------------------------------------------------------------------------------------
def _is_step_column(name: str) -> bool:
    return not name.strip().startswith("stream_")


def _ends_with_newline(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            f.seek(-1, 2)
            return f.read(1) in (b"\n", b"\r")
    except OSError:
        return False  # empty or unreadable: the full read reports it


def _read_step_trace(path: Path, steps_only: bool = False) -> tuple[pd.DataFrame, pd.Series | None]:
    """(step rows, average row or None) of a ``step_trace_raw_*`` file, every cell still a str.

    The average row is the last row when its ``step_num`` is not the next step number (``-`` in most
    files, ``0`` in the single-step ``run_2_lenet``). A file cut in the middle of a row loses that row;
    the warning says whether it was a step or the average row. ``steps_only``: skip the ``stream_*``
    reduce columns (only `step_trace_reduce` needs them).
    """
    # A pipeline-parallel file has ~1000 stream_* columns: reading them as text is ~90 % of the parse,
    # so the step frame leaves them to the tokenizer. Only for a file that ends with a newline: one
    # without may be cut inside any column, which only a read of every column detects.
    usecols = _is_step_column if steps_only and _ends_with_newline(path) else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ProfilerDataWarning)
        df = read_csv(path, required=["step_num", "total", "iteration_interval"], usecols=usecols)
    truncated = None
    for w in caught:
        err = getattr(w.message, "error", None)
        if isinstance(err, TruncatedFileError):
            truncated = err
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not {"fp_and_bp", "tail"} <= set(df.columns) and "fp" not in df.columns:
        missing = [c for c in ("fp_and_bp", "tail") if c not in df.columns]
        raise MissingColumnError(path, f"missing column(s) {missing} (and no inference column 'fp'); "
                                       f"header is {list(df.columns)}", line=1, field=missing[0])
    average = None
    if len(df):
        steps = pd.to_numeric(df["step_num"].str.strip(), errors="coerce")
        last = steps.iloc[-1]
        prev = steps.iloc[-2] if len(df) > 1 else 0
        if df["step_num"].iloc[-1].strip() == "-" or (len(df) > 1 and last != prev + 1) or \
                (len(df) == 1 and last != 1):
            average = df.iloc[-1]
            df = df.iloc[:-1]
    if truncated is not None:
        raw_tail = _last_line(path)
        lost_average = raw_tail.split(b",", 1)[0].strip() == b"-"
        n_steps = len(df)
        what = ("the average row was cut off (all steps kept)" if lost_average else
                f"1 step dropped (the partial row after step {df['step_num'].iloc[-1] if n_steps else 'none'}); "
                "no average row")
        warn_partial(TruncatedFileError(path, f"file ends in the middle of a row: {what}; "
                                              f"{n_steps} complete steps loaded", line=truncated.line))
    elif average is None and len(df) > 1:
        warn_partial(TruncatedFileError(
            path, f"no average row after the last step ({df['step_num'].iloc[-1]}): the file may be cut short; "
                  f"{len(df)} steps loaded, the average is recomputed", line=len(df) + 1))
    return df, average


def _stage_map(df: pd.DataFrame) -> dict[str, str]:
    return INFER_STAGES if "fp" in df.columns and "fp_and_bp" not in df.columns else TRAIN_STAGES


def _last_line(path: Path, window: int = 1 << 16) -> bytes:
    """The file's last non-empty line (at most its last ``window`` bytes: never the whole file again)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - window))
        return f.read().rstrip(b"\r\n").rsplit(b"\n", 1)[-1]


def step_trace(run: RunFiles) -> pd.DataFrame:
    """Legacy ``step_trace_raw_{id}_detail_time.csv`` -> one row per real step (the schema's `step_trace`).

    Columns: ``step`` (int64), ``total_ms``, ``iteration_interval_ms`` and ``fp_and_bp_ms``/``tail_ms``
    (inference files: ``fp_ms``), ``start_ms``, ``fp_start_ms``, ``bp_end_ms``, ``end_ms`` (float64 ms:
    ticks / 100 000 rounded to 4 decimals). The file's own average row (as written, whatever it holds)
    goes to ``attrs["file_average"]`` as ``{"iteration_interval_ms", "fp_and_bp_ms",
    "tail_ms", "total_ms"}`` (inference: ``fp_ms`` instead of the last two stages); recomputed means are
    in ``attrs["mean_all_steps"]`` and ``attrs["mean_excluding_step1"]`` (None for a single step).
    """
    path = run.get("step_trace")
    df, average = _read_step_trace(path, steps_only=True)
    stages = _stage_map(df)
    out = pd.DataFrame({"step": numeric(df, "step_num", path, dtype=int, allow_missing=False)})
    out["total_ms"] = ticks_to_ms(numeric(df, "total", path, allow_missing=False))
    for col, name in stages.items():
        out[name] = ticks_to_ms(numeric(df, col, path, allow_missing=False))
    for col, name in STEP_POINTS.items():
        if col in df.columns:
            out[name] = ticks_to_ms(numeric(df, col, path))
    # A step written twice (a re-run writer, files merged by hand) would count twice in every mean and
    # make the per-step views ambiguous: keep its first row and say which lines were dropped.
    repeated = out["step"].duplicated(keep="first")
    if repeated.any():
        first_line = int(out.index[repeated][0]) + 2
        warn_partial(MalformedFileError(
            path, f"step {int(out.loc[repeated, 'step'].iloc[0])} written more than once: {int(repeated.sum())} "
                  f"repeated row(s) dropped, the first at line {first_line}", line=first_line, field="step_num"))
        out = out[~repeated]
    if not out["step"].is_monotonic_increasing:
        first_line = int(out.index[np.flatnonzero(np.diff(out["step"].to_numpy()) < 0)[0] + 1]) + 2
        warn_partial(MalformedFileError(path, "steps are out of order; sorted by step", line=first_line,
                                        field="step_num"))
        out = out.sort_values("step", kind="stable")
    out = out.reset_index(drop=True)
    if average is not None:
        avg = {}
        for col, name in {**stages, "total": "total_ms"}.items():
            cell = str(average[col]).strip()
            try:
                avg[name] = float(ticks_to_ms([float(cell)])[0])
            except ValueError:
                raise MalformedFileError(path, f"average row: not a number: {cell!r}", line=len(df) + 2,
                                         field=col) from None
        out.attrs["file_average"] = avg
    value_cols = ["total_ms", *stages.values()]
    out.attrs["mean_all_steps"] = {c: round(float(out[c].mean()), MS_DECIMALS) for c in value_cols} \
        if len(out) else None
    out.attrs["mean_excluding_step1"] = {c: round(float(out[c].iloc[1:].mean()), MS_DECIMALS)
                                         for c in value_cols} if len(out) > 1 else None
    out.attrs["path"] = str(path)
    return out


def _reduce_prefixes(columns) -> list[str]:
    """Reduce-event prefixes in file order: every ``stream_*`` column not ending in ``point``."""
    return [c for c in columns if c.startswith("stream_") and not c.endswith("point")]


def _stream_id(prefix: str, path: Path) -> int:
    token = prefix.split("_")[1] if prefix.count("_") >= 1 else ""
    if not token.isdigit():
        raise MalformedFileError(path, f"reduce column {prefix!r} has no stream id as its second token",
                                 line=1, field=prefix)
    return int(token)


def _numeric_block(df: pd.DataFrame, columns: list[str], path: Path) -> np.ndarray:
    """Many all-numeric columns at once (a pipeline step trace has ~600): one float conversion of the
    block; only if it fails, the column-wise `numeric` finds and names the bad cell."""
    block = df[columns].to_numpy(dtype=object)
    try:
        return np.array([[float(v) if str(v).strip() else np.nan for v in row] for row in block],
                        dtype="float64").reshape(len(df), len(columns))
    except ValueError:
        for col in columns:
            numeric(df, col, path)
        raise  # unreachable: numeric raised for the bad cell


def _reduce_events(df: pd.DataFrame, path: Path, steps: np.ndarray, step_start: np.ndarray) -> pd.DataFrame:
    prefixes = _reduce_prefixes(df.columns)
    for prefix in prefixes:
        for suffix in ("_start_point", "_end_point"):
            if prefix + suffix not in df.columns:
                raise MissingColumnError(path, f"reduce event {prefix!r} has no {prefix + suffix!r} column",
                                         line=1, field=prefix + suffix)
    cols = [c for p in prefixes for c in (p, p + "_start_point", p + "_end_point")]
    values = _numeric_block(df, cols, path) if cols else np.empty((len(df), 0))
    n_rows, n_events = len(df), len(prefixes)
    # event-major order (all steps of the first reduce column, then the next), as in the file
    dur = values[:, 0::3].T.ravel()
    start = values[:, 1::3].T.ravel()
    end = values[:, 2::3].T.ravel()
    step = np.tile(np.asarray(steps, dtype="int64"), n_events)
    step_start = np.tile(np.asarray(step_start, dtype="float64"), n_events)
    name = np.repeat(np.array(prefixes, dtype=object), n_rows)
    stream = np.repeat(np.array([_stream_id(p, path) for p in prefixes], dtype="int64"), n_rows)
    # MindInsight skips events with any zero among start/end/duration (missing events are all 0).
    keep = (dur != 0) & (start != 0) & (end != 0) & ~np.isnan(dur) & ~np.isnan(start) & ~np.isnan(end)
    return pd.DataFrame({
        "step": step[keep], "stream_id": stream[keep], "name": pd.array(name[keep], dtype="str"),
        # as MindInsight: the difference of the rounded absolute points (the step's own start_ms)
        "start_ms": np.round(ticks_to_ms(start[keep]) - ticks_to_ms(step_start[keep]), MS_DECIMALS),
        "dur_ms": ticks_to_ms(dur[keep])})


def step_trace_reduce(run: RunFiles) -> pd.DataFrame:
    """Reduce/communication events of each step from the ``stream_*`` columns (the schema's `step_trace_reduce`).

    Columns ``step``, ``stream_id``, ``name``, ``start_ms`` (relative to the step's start point; may be
    negative: a Receive can start before the step's start point, which MindInsight then hides),
    ``dur_ms``. Columns are mapped by name, so both orders (``<p>_start_point,<p>_end_point,<p>`` and
    ``<p>,<p>_start_point,<p>_end_point``) work. Events with a 0 start, end or duration (missing) are
    dropped. The average row's events are in ``attrs["average"]`` (list of dicts, same keys but step).
    """
    path = run.get("step_trace")
    df, average = _read_step_trace(path)
    steps = numeric(df, "step_num", path, dtype=int, allow_missing=False).to_numpy()
    start = numeric(df, "start_point", path).to_numpy() if "start_point" in df else np.zeros(len(df))
    out = _reduce_events(df, path, steps, start)
    if average is not None and _reduce_prefixes(df.columns):
        avg = average.to_frame().T.reset_index(drop=True)
        avg_start = numeric(avg, "start_point", path).to_numpy() if "start_point" in avg else np.zeros(1)
        ev = _reduce_events(avg, path, np.zeros(1, dtype="int64"), avg_start)
        out.attrs["average"] = ev.drop(columns="step").to_dict("records")
    return out


def step_point_info(run: RunFiles) -> dict | list | None:
    """FP-start / BP-end anchor operators: ``step_trace_point_info_{id}.json`` (preferred, as MindInsight)
    else ``step_trace_point_info.json``. A dict ``{"fp_start", "bp_end"}`` or a list of such dicts (one
    per step, index = step - 1), as written. None when neither file exists."""
    paths = run.all("step_trace_point_info")
    if not paths:
        return None
    path = sorted(paths, key=lambda p: p.name == "step_trace_point_info.json")[0]
    data = read_json(path)
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        require_keys(item, ["fp_start", "bp_end"], path, where=f" (entry {i})" if isinstance(data, list) else "")
    return data


# -- FLOPs ------------------------------------------------------------------------------------------
def _flops_column(header: str) -> str:
    """Map a flops_*.txt header to a column name (three header generations, FORMATS 3.8)."""
    h = header.strip()
    low = h.lower()
    if low in ("full_kernel_name", "full_op_name", "op_name"):
        return "op_name"
    unit = "_cube" if "cube" in low else "_vector" if "vec" in low else ""
    if "utilization" in low:
        return f"utilization{unit}_pct"
    if h.startswith("MFLOPs") or h == "FLOPs":
        return f"mflops{unit}"
    if h.startswith("GFLOPS") or h == "FLOPS":
        return f"gflops{unit}"
    return re.sub(r"\W+", "_", low).strip("_")


def flops(run: RunFiles) -> pd.DataFrame:
    """``flops_{id}.txt`` (comma + space separated): ``op_name`` and the numeric columns by header name
    (the schema's `flops`). Rows with an empty second field are skipped, as MindInsight skips them."""
    path = run.get("flops")
    df = read_csv(path, skipinitialspace=True)
    df.columns = [_flops_column(c) for c in df.columns]
    if "op_name" not in df.columns:
        raise MissingColumnError(path, f"no operator name column (full_kernel_name / full_op_name); header is "
                                       f"{list(df.columns)}", line=1, field="full_kernel_name")
    if len(df.columns) > 1:
        df = df[df[df.columns[1]].str.strip() != ""]
    out = pd.DataFrame({"op_name": df["op_name"].str.strip()})
    for c in df.columns:
        if c != "op_name":
            out[c] = numeric(df, c, path).to_numpy()
    return out.reset_index(drop=True)


def flops_summary(run: RunFiles) -> dict:
    """``flops_summary_{id}.json`` as written: ``{"FLOPs", "FLOPS", "FLOPS_Utilization"}`` or
    ``{"cube_FLOPs", "vec_FLOPs", "cube_FLOPS", "vec_FLOPS", "cube_FLOPS_Utilization",
    "vec_FLOPS_Utilization"}`` (MFLOPs, GFLOPS, percent)."""
    path = run.get("flops_summary")
    data = read_json(path)
    if not isinstance(data, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(data).__name__}")
    for k, v in data.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise MalformedFileError(path, f"not a number: {v!r}", field=k)
    return data


# -- communication and cluster ----------------------------------------------------------------------
def _hccl_rows(run: RunFiles) -> tuple[Path, pd.DataFrame, pd.Series | None]:
    path = run.get("hccl_raw")
    df = read_csv(path, required=["step_num", "communication_cost", "wait_cost"])
    average = None
    if len(df) and df["step_num"].iloc[-1].strip() == "-":
        average = df.iloc[-1]
        df = df.iloc[:-1]
    return path, df, average


def hccl(run: RunFiles) -> pd.DataFrame:
    """``hccl_raw_{id}.csv`` per step (the schema's `hccl`): ``step``, ``communication_cost_ms``,
    ``wait_cost_ms``; the ``-`` average row as written in ``attrs["average"]`` (dict, same keys)."""
    path, df, average = _hccl_rows(run)
    out = pd.DataFrame({"step": numeric(df, "step_num", path, dtype=int, allow_missing=False),
                        "communication_cost_ms": numeric(df, "communication_cost", path),
                        "wait_cost_ms": numeric(df, "wait_cost", path)}).reset_index(drop=True)
    if average is not None:
        avg = average.to_frame().T.reset_index(drop=True)
        avg.index = [len(df)]  # so an error names the average row's line
        out.attrs["average"] = {"communication_cost_ms": float(numeric(avg, "communication_cost", path).iloc[0]),
                                "wait_cost_ms": float(numeric(avg, "wait_cost", path).iloc[0])}
    return out


def hccl_links(run: RunFiles) -> pd.DataFrame:
    """``link_info`` of ``hccl_raw_{id}.csv`` per step and link (the schema's `hccl_links`): ``step``, ``src``,
    ``dst`` (int64 ranks from the ``"src-dst"`` key), ``transport`` (SDMA, RDMA ...), ``time_ms``,
    ``size``, ``bandwidth`` (float64; units not labelled in the file, FORMATS 3.18). The ``-`` average
    row's links, as written, in ``attrs["average"]`` (a list of dicts with the columns but ``step``)."""
    path, df, _ = _hccl_rows(run)
    if "link_info" not in df.columns:
        raise MissingColumnError(path, "missing column 'link_info'", line=1, field="link_info")
    rows, bad, n = [], [], 0
    steps = numeric(df, "step_num", path, dtype=int, allow_missing=False)
    for i, (step, cell) in enumerate(zip(steps, df["link_info"])):
        line = line_of(df, i)
        if not cell.strip():
            continue
        n += 1
        try:
            rows.extend((int(step), *link) for link in _link_cell(cell))
        except ValueError as e:  # a damaged cell costs its row's links (see `skipped_rows`)
            bad.append((line, f"link_info: {e}"))
    skipped_rows(path, bad, n)
    columns = ["step", "src", "dst", "transport", "time_ms", "size", "bandwidth"]
    dtypes = {"step": "int64", "src": "int64", "dst": "int64", "time_ms": "float64", "size": "float64",
              "bandwidth": "float64"}
    out = pd.DataFrame(rows, columns=columns).astype(dtypes)
    average = _hccl_rows(run)[2]
    if average is not None and str(average.get("link_info", "")).strip():
        try:  # the writer's own average of each link (what MindInsight's cluster link analysis reads)
            # records, not a DataFrame: pandas compares attrs when frames are combined
            out.attrs["average"] = [dict(zip(columns[1:], link)) for link in _link_cell(average["link_info"])]
        except ValueError as e:
            skipped_rows(path, [(len(steps) + 2, f"link_info of the average row: {e}")], n + 1)
    return out


def _link_cell(cell: str) -> list[tuple]:
    """The links of one link_info cell: (src, dst, transport, time, size, bandwidth); ValueError says
    what is wrong."""
    try:
        links = json.loads(cell)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg}") from None
    except (ValueError, RecursionError):  # past the parser's limits: a number too long, nesting too deep
        raise ValueError("not JSON that can be read (a number too long or nesting too deep)") from None
    if not isinstance(links, dict):
        raise ValueError("not a JSON object")
    out = []
    for pair, by_transport in links.items():
        src, _, dst = str(pair).partition("-")
        if not (src.isdigit() and dst.isdigit()) or not isinstance(by_transport, dict):
            raise ValueError(f"link key {pair!r} is not 'src-dst' with an object value")
        for transport, values in by_transport.items():
            if not (isinstance(values, list) and len(values) >= 3
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values[:3])):
                raise ValueError(f"link {pair} {transport}: expected [time, size, bandwidth], found {values!r}")
            out.append((int(src), int(dst), str(transport), *map(float, values[:3])))
    return out


_CLUSTER_NAME = re.compile(r"(?P<device>ascend|gpu)_cluster_analyse_(?P<mode>[A-Za-z-]+)_(?P<stages>\d+)_"
                           r"(?P<ranks>\d+)_(?P<rank>\d+)\.csv")
# Data-parallel files hold step-trace stages in ticks; the other modes hold ms (FORMATS 3.18).
_TICK_COLUMNS = {"iteration_interval", "fp_and_bp", "tail", "total"}


def cluster_analyse(run: RunFiles) -> pd.DataFrame:
    """``ascend_cluster_analyse_{mode}_{stages}_{ranks}_{rank}.csv`` (the schema's `cluster_analyse`).

    Columns: ``step`` (int64, 1-based row number: the file has no step column) and ``<column>_ms`` for
    each file column (data-parallel tick columns converted ÷1e5 and rounded to 4 decimals; pipeline
    columns are ms already). With more than one row the last row is the average MindInsight shows
    (``attrs["average"]``, dict) and not a step; a single-row file is step 1 and also the average.
    ``attrs``: ``parallel_mode``, ``stage_num``, ``rank_size`` from the file name.
    """
    path = run.get("cluster_analyse")
    df = read_csv(path, skipinitialspace=True)
    if not len(df.columns) or not len(df):
        raise MalformedFileError(path, "no data rows", line=1)
    values = {}
    for col in df.columns:
        v = numeric(df, col, path)
        values[f"{col}_ms"] = ticks_to_ms(v) if col in _TICK_COLUMNS else v.to_numpy()
    table = pd.DataFrame(values)
    average_row = table.iloc[-1]
    steps = table.iloc[:-1] if len(table) > 1 else table
    out = steps.copy()
    out.insert(0, "step", np.arange(1, len(out) + 1, dtype="int64"))
    out.attrs["average"] = {k: float(v) for k, v in average_row.items()}
    m = _CLUSTER_NAME.fullmatch(path.name)
    if m:
        out.attrs.update(parallel_mode=m.group("mode"), stage_num=int(m.group("stages")),
                         rank_size=int(m.group("ranks")))
    return out.reset_index(drop=True)


# -- timeline summary -------------------------------------------------------------------------------
def timeline_summary(run: RunFiles) -> dict:
    """``ascend_timeline_summary_{id}.json`` (else the older ``timeline_summary_{id}.json``, else
    ``gpu_timeline_summary_{id}.json``) as written: ``total_time`` (us in the shipped files: the sum of
    op durations), ``num_of_streams``, ``num_of_ops``, ``op_exe_times`` and, in newer files,
    ``max_scope_name_num`` (MindInsight's default 0 is NOT added: absent means the writer did not say)."""
    paths = run.all("timeline_summary")
    order = {"ascend": 0, "timeline": 1, "gpu": 2}
    path = sorted(paths, key=lambda p: order.get(p.name.split("_", 1)[0], 3))[0]
    data = read_json(path)
    require_keys(data, ["total_time"], path)
    for k, v in data.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise MalformedFileError(path, f"not a number: {v!r}", field=k)
    return data


def timeline_device_origin_ms(run: RunFiles) -> float | None:
    """Device-clock time (ms) of the earliest AI Core op, so step-trace points (device ticks) can be
    placed on the legacy timeline: ``min_cycle_counter_*.txt`` (that start in 10 ns ticks), else the
    earliest start in ``output_timeline_data_*.txt`` (ms; us in the 2.2 writer, said by its header).
    None when neither file is there."""
    path = run.get("min_cycle_counter")
    if path is not None:
        text = read_text(path).strip()
        try:
            return float(ticks_to_ms(np.array([float(text)]))[0])
        except ValueError:
            raise MalformedFileError(path, f"not a tick count: {text[:40]!r}", line=1) from None
    path = run.get("output_timeline_data")
    if path is not None:
        df = read_csv(path, skipinitialspace=True)
        start = next((c for c in df.columns if c.startswith("start_time")), None)
        if start is None:
            raise MissingColumnError(path, f"missing column 'start_time'; header is {list(df.columns)}",
                                     line=1, field="start_time")
        values = numeric(df, start, path)
        return float(values.min()) / (1000.0 if "(us)" in start else 1.0)
    return None
