"""Chrome-trace JSON -> timeline frames (`TraceData`): the entry points, and the frames assembled from
the parsed events.

Sources, by role (first found wins): ``trace_view`` (MindSpore 2.3+ / torch_npu ``trace_view.json``),
``timeline`` (legacy ``ascend_``/``gpu_``/older ``timeline_display_{id}.json``), ``cann_timeline``
(CANN ``msprof_*.json``, one file per iteration, merged), else ``cann_task_time`` + ``cann_hccl``; with
none of them, the FRAMEWORK ``cpu_op_execute_timestamp`` records (``framework.cpu_op_executions``).

The work is split by job:

- `nbprofiler.io.trace_parse`, the streaming parse: duckdb reads each file into Arrow record batches in
  a background thread while this thread digests them (``ph`` -> an int ``kind``, exact integer-ns
  ``ts``, ``args.type``, dictionary codes, each batch's X events sorted by (pid, tid, ts)).
- `nbprofiler.io.trace_exact`, the exact validator: when duckdb rejects a file, a slower exact parse
  (stdlib json, one element at a time) finds the line of the error, so the user gets
  `TruncatedFileError` / `MalformedFileError` with a line number.
- `nbprofiler.io.trace_disk`, the build of one file: each digested batch coded against running
  dictionaries and its X events sorted per track as it is read; the timeline then assembled track by
  track (a track that runs forward in time from batch to batch, as files written in time order do, is
  the concatenation of its runs). The runs and the columns are kept in memory (`load_trace` of one file),
  or, for a trace too large for memory, spilled to disk and memory-mapped.
- this module: the entry points, the track naming (from the ``M`` events, else by the legacy
  conventions), flows and counters, and the build of several files merged (per-iteration CANN exports:
  their repeated events are deduplicated, then the timeline is sorted globally). Everything is vectorised
  numpy/Arrow/duckdb work; only metadata (``M``) and ``B``/``E`` events, a tiny fraction, are touched one
  by one.
Parsed frames are cached (LZ4 Arrow IPC files) in the user cache dir (`nbprofiler.io.cache`), keyed by
path, size and mtime of every source file, so a second open of a big trace reads them instead of JSON.
"""
from __future__ import annotations

import json
import re
import threading
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EmptyFileError, MalformedFileError
from ..schema import FRAMES
from . import cache
from ._util import arrow_memory, check_size, warn_partial
from .discover import RunFiles
from .trace_exact import _line_of_event, exact_events
from .trace_parse import (KIND_B, KIND_C, KIND_E, KIND_F, KIND_M, KIND_NO_PH, KIND_S, KIND_T, KIND_X, _Chunk,
                          _parse_chunks, _query, _storage, parse_events)

# Roles that hold Chrome-trace JSON, in order of preference.
TRACE_ROLES = ("trace_view", "timeline", "cann_timeline", "cann_task_time", "cann_hccl")

# Inputs smaller than this load in well under the progress bar's 1 s delay.
PROGRESS_MIN_BYTES = 50_000_000
# The longest event a trace can hold: 30 days in microseconds (a profiled job runs hours, not months).
MAX_DURATION_US = 30 * 24 * 3600 * 1e6

# args.type values that name a category of ops rather than the op's type: MindSpore 2.10 puts
# "HostCpuOps" on every CPU op, the GPU writer "cuLaunchKernel" on every kernel. For these the type is
# derived from the name, as MindInsight's CPU op tables do (their types are Conv2D, MatMul, ...).
GENERIC_ARG_TYPES = {"HostCpuOps", "cuLaunchKernel", "cuLaunchKernelEx", "Kernel", "kernel", ""}

# Legacy timelines carry no M events; FORMATS 3.14 / 5.8 name the special pids and tids.
LEGACY_PROCESSES = {"9000": "AI CPU", "10000": "Communication", "11000": "Host CPU"}
LEGACY_THREADS = {"100000": ("Steps", -4), "100001": ("Scope Name", -3), "100002": ("GpuOps", -2),
                  "100003": ("HostCpuOps", -1)}

# The frames' columns as declared (nbprofiler.schema)
TIMELINE_COLUMNS = FRAMES["timeline"].required
TRACK_COLUMNS = FRAMES["timeline_tracks"].required
FLOW_COLUMNS = FRAMES["timeline_flows"].required
COUNTER_COLUMNS = FRAMES["timeline_counters"].required


class TraceData:
    """Everything parsed from a run's trace source(s): the four frames and the absolute origin.
    ``flows`` may still be paired on a background thread when a load returns (`trace_disk.build_in_memory`):
    given as a `concurrent.futures.Future` of (the frame, its `cache.snapshot`), and reading ``flows``
    waits for it."""

    def __init__(self, origin_us: float, timeline: pd.DataFrame, tracks: pd.DataFrame, flows, counters: pd.DataFrame):
        self.origin_us, self.timeline, self.tracks, self.counters = origin_us, timeline, tracks, counters
        self._flows = flows

    @property
    def flows(self) -> pd.DataFrame:
        pending = self._flows
        if isinstance(pending, Future):
            self._flows = pending.result()[0]
        return self._flows

    def frames(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in TRACE_FRAMES}

    def frames_to_cache(self) -> dict:
        """`frames` for `cache.store`, without waiting for flows still being paired: those are a function
        the cache's writing thread calls."""
        pending = self._flows
        return {name: (lambda: pending.result()[1]) if name == "flows" and isinstance(pending, Future)
                else getattr(self, name) for name in TRACE_FRAMES}


TRACE_FRAMES = ("timeline", "tracks", "flows", "counters")  # what a trace's cache entry must hold


# -- scope layers -----------------------------------------------------------------------------------------
SCOPE_LAYER_TYPE = "Scope Layer"


def scope_tracks(tracks: pd.DataFrame) -> set[int]:
    """Tracks that hold scope-layer bars, not operators: MindSpore's "Scope Layer" process (2.x) and the
    legacy "Scope Name" thread (tid 100001)."""
    if tracks is None or tracks.empty:
        return set()
    # tracks are few: plain Python (pandas' string methods cost ~5 ms of every first open)
    text = (tracks[c].astype(str) for c in ("process", "thread", "tid"))
    return {int(track) for track, process, thread, tid in zip(tracks["track"], *text)
            if "scope layer" in process.lower() or "scope name" in thread.lower() or tid == "100001"}


def mark_scope_layers(timeline: pd.DataFrame, tracks: pd.DataFrame) -> pd.DataFrame:
    """``is_scope`` (bool): the event is a scope-layer bar ("Default", "network-WithLossCell", ...) that
    spans the operators under it; its ``op_type`` becomes ``"Scope Layer"`` so scope names never mix
    with operator types (their time is the time of the ops inside them, counted again)."""
    if "is_scope" in timeline.columns:
        return timeline
    track = timeline["track"].to_numpy()
    marked = sorted(scope_tracks(tracks))
    if marked:  # a lookup per event (isin hashes every event's track)
        lookup = np.zeros(max(marked[-1], int(track.max(initial=0))) + 1, dtype=bool)
        lookup[marked] = True
        scope = lookup[track]
    else:
        scope = np.zeros(len(track), dtype=bool)
    out = timeline.copy(deep=False)
    out["is_scope"] = scope
    if scope.any():
        # every step in the codes' own small integer type: a timeline of 33M events is 33 MB of int8 codes,
        # and each int64 temporary of them (bincount's input, a lookup's result) costs 265 MB of fresh pages
        cats = out["op_type"].cat.categories
        if SCOPE_LAYER_TYPE not in cats:
            cats = cats.append(pd.Index([SCOPE_LAYER_TYPE], dtype=cats.dtype))
        k = cats.get_loc(SCOPE_LAYER_TYPE)
        old = out["op_type"].cat.codes.to_numpy()
        codes = old.astype(np.promote_types(old.dtype, np.min_scalar_type(-k - 1)), copy=True)  # signed, holds k
        codes[scope] = k
        # the categories still used, in their order (-1, a missing value, marks the extra last slot)
        present = np.zeros(len(cats) + 1, dtype=bool)
        present[codes] = True
        used = present[:-1]
        if not used.all():
            new_code = np.full(len(cats) + 1, -1, dtype=codes.dtype)
            new_code[:-1][used] = np.arange(int(used.sum()))
            codes = new_code[codes]
        out["op_type"] = pd.Categorical.from_codes(codes, categories=cats[used], validate=False)
    return out


def trace_sources(run: RunFiles) -> tuple[str, list[Path]] | None:
    """(role, files) of the timeline source of ``run``, or None when it has no trace JSON."""
    if run.has("trace_view"):
        return "trace_view", [run.get("trace_view")]
    if run.has("timeline"):
        files = run.all("timeline")
        # A folder may hold an Ascend and a GPU display file for one id (fixtures_mixed_ids): they are
        # different runs on different clocks, so take one, preferring the Ascend file.
        ascend = [p for p in files if not p.name.startswith("gpu_")]
        return "timeline", [(ascend or files)[0]]
    if run.has("cann_timeline"):
        return "cann_timeline", run.all("cann_timeline")
    if run.has("cann_task_time", "cann_hccl"):
        return "cann_task_time", run.all("cann_task_time") + run.all("cann_hccl")
    return None


def trace_data(run: RunFiles) -> TraceData | None:
    """The parsed trace of ``run``: from the frame cache, else parsed (in memory, or on disk when the file
    would not fit, `nbprofiler.io.trace_disk`); None when the run has no trace."""
    src = trace_sources(run)
    if src is None:
        if run.has("cpu_op_timestamp"):
            return _from_cpu_ops(run)
        return None
    role, paths = src
    from . import trace_disk
    if trace_disk.wanted(paths):
        return trace_disk.load(paths[0], legacy=(role == "timeline"))
    key = cache.key_for("trace", paths)
    cached = cache.load(key, paths)
    if cached is not None and "origin_us" in cached[1] and set(cached[0]) == set(TRACE_FRAMES):
        frames, meta = cached
        return TraceData(origin_us=float(meta["origin_us"]), **frames)
    data = load_trace(paths, legacy=(role == "timeline"))
    # the entry is written by a background thread: the frames are ready now, the cache is for later
    cache.store(key, paths, data.frames_to_cache(), {"origin_us": data.origin_us}, background=True)
    return data


# -- loading ------------------------------------------------------------------------------------------
@arrow_memory()
def load_trace(paths: list[Path] | Path, legacy: bool | None = None, progress: bool = True) -> TraceData:
    """Parse one or more Chrome-trace JSON files into `TraceData` (several files are merged and their
    repeated metadata deduplicated). ``legacy``: name tracks by the legacy conventions where no ``M``
    event names them (default: when the file name is a ``*timeline_display_*``)."""
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if legacy is None:
        legacy = any("timeline_display" in p.name for p in paths)
    if len(paths) == 1:
        # one file: the build that codes and sorts each batch as it is read (`trace_disk`), in memory
        from . import trace_disk
        return trace_disk.build_in_memory(paths[0], legacy=legacy, progress=progress)
    gpu = any(p.name.startswith("gpu_") for p in paths)
    total = sum(check_size(p, "trace") for p in paths)
    with _Progress(total, f"parsing {paths[0].name}" + (f" (+{len(paths) - 1})" if len(paths) > 1 else ""),
                   enabled=progress) as bar:
        chunks: list[_Chunk] = []
        for p in paths:
            # parsing is ~80 % of a load: the bar moves with the bytes each batch came from, as estimated
            # from its text, and catches up with the file's share when it is done
            share = p.stat().st_size * 0.8
            moved = [0.0]

            def parsed(nbytes, share=share, moved=moved):
                step = min(nbytes * 0.8, share - moved[0])
                moved[0] += step
                bar.advance(step)
            chunks += _parse_chunks(p, offset=sum(c.n for c in chunks), on_batch=parsed)
            bar.advance(share - moved[0])
        if not chunks:
            raise EmptyFileError(paths[0], "the trace holds no events")
        data = _build(chunks, paths, legacy=legacy, gpu=gpu)
        bar.advance(total * 0.2)
    return data


# -- building the frames ------------------------------------------------------------------------------
def _strings(arr) -> np.ndarray:
    """A small Arrow string array as a numpy object array ("" for null)."""
    return np.asarray(pc.fill_null(arr, "").to_pylist(), dtype=object)


def _pair_codes(a: np.ndarray, n_a: int, b: np.ndarray, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) code pairs as ``a * n_b + b`` (ascending) and each row's index into them. A lookup
    table over the small code space instead of np.unique's sort of every row."""
    pair = a.astype(np.int64) * n_b + b
    space = n_a * n_b
    if space > 1 << 24:  # many pids x many tids: sorting is cheaper than a huge table
        return np.unique(pair, return_inverse=True)
    present = np.zeros(space, dtype=bool)
    present[pair] = True
    pairs = np.flatnonzero(present)
    lookup = np.empty(space, dtype=np.int32)
    lookup[pairs] = np.arange(len(pairs), dtype=np.int32)
    return pairs, lookup[pair]


def _meta_events(table: pa.Table, is_meta: np.ndarray | None = None) -> list[dict]:
    """The M events (few: one per process/thread name or sort key; the rows ``is_meta`` of ``table``, or all
    of them) as dicts with ``m_name`` / ``m_sort`` taken from their args."""
    columns = ["name", "pid", "tid", "args"]
    out = []
    for m in (table.select(columns) if is_meta is None else _rows(table, columns, is_meta)).to_pylist():
        try:
            args = json.loads(m.pop("args")) if m.get("args") else {}
        except (ValueError, RecursionError):
            args = {}
        args = args if isinstance(args, dict) else {}
        name, sort = args.get("name"), args.get("sort_index")
        m["m_name"] = None if name is None else name if isinstance(name, str) else json.dumps(name)
        m["m_sort"] = _as_sort_key(sort)
        out.append(m)
    return out


def _rows(table: pa.Table, columns: list[str], mask: np.ndarray) -> pa.Table:
    """The rows of ``mask`` (file order) of some columns. A filter, not a take: Arrow's take on a
    chunked column first concatenates all of it, even for a handful of rows."""
    return table.select(columns).filter(pa.array(mask))


def _as_sort_key(v) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        return int(round(float(v)))
    except (TypeError, ValueError, OverflowError):
        return None


def _unify(chunks: list[_Chunk], column: str) -> tuple[np.ndarray, np.ndarray]:
    """The per-batch dictionary codes of ``column`` as one int32 code per row over one dictionary
    (values as an object array; null is "")."""
    if not chunks:
        return np.zeros(0, np.int32), np.array([], dtype=object)
    unified = pa.chunked_array([c.codes[column] for c in chunks]).unify_dictionaries()
    values = _strings(unified.chunk(0).dictionary)
    codes = np.concatenate([ch.indices.to_numpy(zero_copy_only=False) for ch in unified.chunks]) \
        if unified.null_count == 0 else None
    if codes is None:
        empty = np.flatnonzero(values == "")
        if len(empty):
            null_code = int(empty[0])
        else:
            null_code, values = len(values), np.append(values, np.array([""], dtype=object))
        codes = np.concatenate([pc.fill_null(ch.indices, null_code).to_numpy(zero_copy_only=False)
                                for ch in unified.chunks])
    return codes.astype(np.int32, copy=False), values


# -- events that cannot be placed ----------------------------------------------------------------------
def skipped_events(kind: np.ndarray, ts_ok: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bad, absurd) masks of the events skipped and reported. ``bad``: no ``ph``, a timed event without a
    numeric ts, or an X without a numeric dur. ``absurd``: the other X events with a duration no profiler
    writes (negative, not finite, or over `MAX_DURATION_US`), which would stretch the timeline and every
    sum over it."""
    timed = (kind >= KIND_X) & (kind <= KIND_C)
    is_x = kind == KIND_X
    bad = (timed & ~ts_ok) | (is_x & np.isnan(dur)) | (kind == KIND_NO_PH)
    with np.errstate(invalid="ignore"):
        absurd = is_x & ~bad & ((dur < 0) | ~np.isfinite(dur) | (dur > MAX_DURATION_US))
    return bad, absurd


def bad_field(kind: np.ndarray, ts_ok: np.ndarray, row: int) -> str:
    """The field that makes ``row`` (a `skipped_events` bad one) unplaceable."""
    return "ph" if kind[row] == KIND_NO_PH else ("ts" if not ts_ok[row] else "dur")


def warn_unplaced(path: Path, count: int, field: str, line: int | None) -> None:
    warn_partial(MalformedFileError(path, f"{count} event(s) without a numeric {field!r} or 'ph' skipped (the "
                                          "first is shown)", line=line, field=field))


def warn_impossible_dur(path: Path, count: int, first_dur: float, line: int | None) -> None:
    warn_partial(MalformedFileError(path, f"{count} event(s) with an impossible 'dur' ({first_dur!r} us: negative, "
                                          f"not finite or over {MAX_DURATION_US:.0e} us) skipped (the first is "
                                          "shown)", line=line, field="dur"))


def _build(chunks: list[_Chunk], paths: list[Path], legacy: bool, gpu: bool) -> TraceData:
    multi = len(paths) > 1
    kind = np.concatenate([c.kind for c in chunks])
    ts_ns = np.concatenate([c.ts_ns for c in chunks])
    ts_ok = np.concatenate([c.ts_ok for c in chunks])
    dur = np.concatenate([c.dur for c in chunks])
    flow = pa.concat_tables([c.flow for c in chunks])
    aux = pa.concat_tables([c.aux for c in chunks])
    n = len(kind)
    is_x = kind == KIND_X
    is_b = (kind == KIND_B) | (kind == KIND_E)
    is_flow = (kind >= KIND_S) & (kind <= KIND_T)
    is_counter = kind == KIND_C

    bad, absurd = skipped_events(kind, ts_ok, dur)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        warn_unplaced(paths[0], int(bad.sum()), bad_field(kind, ts_ok, first),
                      _line_of_event(paths[0], first) if not multi else None)
    if absurd.any():
        first = int(np.flatnonzero(absurd)[0])
        warn_impossible_dur(paths[0], int(absurd.sum()), float(dur[first]),
                            _line_of_event(paths[0], first) if not multi else None)
    timed = ((kind >= KIND_X) & (kind <= KIND_C)) & ~bad & ~absurd
    for m in (is_x, is_b, is_flow, is_counter):
        m &= ~bad
    is_x &= ~absurd

    origin_ns = int(ts_ns[timed].min()) if timed.any() else 0
    rel_us = (ts_ns - origin_ns).astype(np.float64) / 1000.0

    # Track = (pid, tid) of every slice and flow end, via dictionary codes (no per-row Python work).
    on_track = np.flatnonzero(is_x | is_b | is_flow)
    pid_code, pid_names = _unify(chunks, "pid")
    tid_code, tid_names = _unify(chunks, "tid")
    n_tid = max(len(tid_names), 1)
    pairs, pair_inv = _pair_codes(pid_code[on_track], len(pid_names), tid_code[on_track], n_tid)
    del pid_code, tid_code
    aux_rows = aux.column("row").to_numpy()
    counter_events = _counter_events(aux, is_counter[aux_rows], ts_ns[aux_rows])
    del ts_ns
    meta = _meta_events(aux, kind[aux_rows] == KIND_M)
    tracks = _name_tracks(pid_names[pairs // n_tid], tid_names[pairs % n_tid], meta, legacy=legacy, gpu=gpu)
    display_of_pair = np.empty(len(tracks), dtype=np.int32)
    display_of_pair[tracks["_pair"].to_numpy()] = np.arange(len(tracks), dtype=np.int32)
    tracks = tracks.drop(columns="_pair")
    row_track = np.full(n, -1, dtype=np.int32)
    row_track[on_track] = display_of_pair[pair_inv]
    del pair_inv, on_track

    # flows and counters on the second core while this one builds the timeline
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nbprofiler-trace") as pool:
        side = pool.submit(lambda: (_flows(flow, kind, is_flow, row_track, rel_us),
                                    _counter_frame(_counter_samples(counter_events), origin_ns)))
        timeline = _timeline(chunks, kind, is_x, is_b, row_track, rel_us, dur, multi, paths)
        flows, counters = side.result()
    tracks["events"] = np.bincount(timeline["track"].to_numpy(), minlength=len(tracks)).astype(np.int64)
    # int / int is correctly rounded in Python; int / float would round the 19-digit ns first
    return TraceData(origin_us=origin_ns / 1000, timeline=timeline, tracks=tracks, flows=flows,
                     counters=counters)


def _name_tracks(track_pid: np.ndarray, track_tid: np.ndarray, meta: list[dict], *, legacy: bool,
                 gpu: bool) -> pd.DataFrame:
    """One row per (pid, tid): names and sort keys from the M events (the last of repeated ones, as
    Chrome does), else the legacy conventions of FORMATS 3.14, else the ids. Sorted for display."""
    proc_name, proc_sort, thr_name, thr_sort = {}, {}, {}, {}
    for m in meta:
        p, t, m_name, m_sort = m["pid"] or "", m["tid"] or "", m["m_name"], m["m_sort"]
        if m["name"] == "process_name" and m_name is not None:
            proc_name[p] = m_name
        elif m["name"] == "process_sort_index" and m_sort is not None:
            proc_sort[p] = int(m_sort)
        elif m["name"] == "thread_name" and m_name is not None:
            thr_name[(p, t)] = m_name
        elif m["name"] == "thread_sort_index" and m_sort is not None:
            thr_sort[(p, t)] = int(m_sort)
    rows = []
    for i, (p, t) in enumerate(zip(track_pid, track_tid)):
        p, t = str(p), str(t)
        pnum, tnum = _as_int(p), _as_int(t)
        if p in proc_name:
            process = proc_name[p]
        elif legacy and p in LEGACY_PROCESSES:
            process = LEGACY_PROCESSES[p]
        elif legacy:
            process = f"GPU {p}" if gpu else f"Ascend Device {p}"
        else:
            process = f"Process {p}"
        special = LEGACY_THREADS.get(t) if legacy else None
        if (p, t) in thr_name:
            thread = thr_name[(p, t)]
        elif special:
            thread = special[0]
        elif legacy and tnum is not None:
            thread = f"Stream #{t}" if gpu else f"Stream {t}"
        else:
            thread = t if tnum is None else f"Thread {t}"
        psort = proc_sort.get(p, pnum if pnum is not None else 0)
        tsort = thr_sort.get((p, t), special[1] if special else (tnum if tnum is not None else 0))
        rows.append((i, p, t, process, thread, psort, tsort, pnum if pnum is not None else 0,
                     tnum if tnum is not None else 0))
    # Tracks are few: sorted and laid out in Python (a stable sort, as pandas' would be), then one frame
    # built from whole columns; pandas' sort and per-column casts took ~6 ms of every first open.
    rows.sort(key=lambda r: (r[5], r[7], r[1], r[6], r[8], r[2]))
    column = list(zip(*rows)) if rows else [()] * 7
    return pd.DataFrame({
        "track": np.arange(len(rows), dtype=np.int32),
        "_pair": np.array(column[0], dtype=np.int64),
        **{c: pd.array(list(column[k]), dtype=str) for c, k in (("pid", 1), ("tid", 2), ("process", 3),
                                                              ("thread", 4))},
        "process_sort": np.array(column[5], dtype=np.int64),
        "thread_sort": np.array(column[6], dtype=np.int64)})


def _as_int(s: str) -> int | None:
    try:
        return int(s)
    except ValueError:
        return None


_OP_SUFFIX = re.compile(r"-op\d+(?:_\d+)*$")
_NUMBERED = re.compile(r"(?:[ _#]\d+)+$")
_LONG_ID = re.compile(r"\d{3,}$")


def op_type_of(name: str) -> str:
    """Operator type from an event name: last path component without ``-opN``; names without ``-opN``
    also lose a trailing instance number (``_N``, `` N``, ``#N``, or a bare run of 3+ digits), while
    short digit runs that belong to type names stay (``GatherV2``, ``Conv3D``).
    ``Default/net/Conv2D-op12`` -> ``Conv2D``; ``AllReduce-op534_0`` -> ``AllReduce``;
    ``HostToDevice38654705663`` -> ``HostToDevice``; ``Iteration 3`` -> ``Iteration``;
    ``trans_TransData_33`` -> ``trans_TransData``. A name that would become empty is kept."""
    base = name.rsplit("/", 1)[-1].strip() if "/" in name.strip("/") else name.strip()
    without_op = _OP_SUFFIX.sub("", base)
    if without_op == base:
        without_op = _LONG_ID.sub("", _NUMBERED.sub("", base)).rstrip(" _#")
    return without_op or base or name


def kernel_type_of(name: str) -> str:
    """Operator type of a device kernel whose file names none (kernel_details.csv / the database write
    ``N/A`` at profiler level 0): an ``aclnn<Api>_<Kernel>_<OpType>`` kernel is of its last part
    (``aclnnMuls_MulAiCore_Mul`` -> ``Mul``); any other name as `op_type_of` reads it."""
    parts = name.split("_")
    if name.startswith("aclnn") and len(parts) >= 3 and parts[-1]:
        return parts[-1]
    return op_type_of(name)


def fill_kernel_types(names: pd.Series, types: pd.Series) -> pd.Series:
    """``types`` with every missing one (empty, ``N/A``, ``NULL``) read from its kernel's name
    (`kernel_type_of`), so a profile without op types is not one "N/A" type at 100 %."""
    missing = types.isna() | types.astype(str).str.strip().isin(["", "N/A", "NULL"])
    if not missing.any():
        return types
    derived = names[missing].astype(str)
    return types.where(~missing, derived.map({n: kernel_type_of(n) for n in derived.unique()}))


def distinct_categorical(codes: np.ndarray, categories) -> pd.Categorical:
    """The Categorical of ``codes`` (valid, -1 for missing) into ``categories`` (a sequence of str, or an
    Arrow string array, which becomes the categories without a copy per value), values that are distinct
    by construction (a dictionary's keys): pandas' public constructor hashes every category to check
    that, ~9 ms for the 55k names of a 100 MB trace, on the thread the load waits for."""
    categories = pd.Index(categories, dtype=str)
    return pd.Categorical._simple_new(codes, pd.CategoricalDtype._from_fastpath(categories, ordered=False))


def _categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """A Categorical of ``values[codes]`` with only the values that occur as categories."""
    used = np.bincount(codes, minlength=len(values)) > 0
    new_code = np.cumsum(used, dtype=np.int32) - 1
    return distinct_categorical(new_code[codes] if len(codes) else codes.astype(np.int32), values[used])


def _op_type_maps(derived_of: np.ndarray, derived: list, types: np.ndarray):
    """The op types of names and of args.type values: per name its derived type (``derived_of``: the
    number in ``derived`` of `op_type_of` of each name), per args.type value its own type's code where it
    is specific, else -1 (a specific args.type wins over the name's type); categories = the derived types,
    then the specific args types, in first-seen order."""
    # the used names' types renumbered in the order they first occur among them (as pd.factorize would)
    numbers, first = np.unique(derived_of, return_index=True)
    seen = numbers[np.argsort(first, kind="stable")]
    renumber = np.zeros(len(derived), dtype=np.int32)
    renumber[seen] = np.arange(len(seen), dtype=np.int32)
    of_name = renumber[derived_of]
    cats = [derived[i] for i in seen.tolist()]
    usable = [bool(t) and t not in GENERIC_ARG_TYPES for t in types.tolist()]
    code = {c: i for i, c in enumerate(cats)}
    for t, ok in zip(types.tolist(), usable):
        if ok and t not in code:
            code[t] = len(cats)
            cats.append(t)
    of_type = np.array([code[t] if ok else -1 for t, ok in zip(types.tolist(), usable)], dtype=np.int32)
    return of_name, of_type, np.array(cats, dtype=object)


def _op_types(names: pd.Categorical, type_codes: np.ndarray, type_values: np.ndarray) -> pd.Categorical:
    """op_type per row: ``args.type`` where present and specific, else derived from the name. The
    derivation runs once per distinct name, and the choice once per distinct (name, type) code pair."""
    types = _categorical(type_codes, type_values)
    distinct: dict[str, int] = {}
    derived_of = np.array([distinct.setdefault(op_type_of(n), len(distinct)) for n in names.categories.tolist()],
                          dtype=np.int64)
    of_name, of_type, cats = _op_type_maps(derived_of, list(distinct), np.asarray(types.categories, dtype=object))
    tc = of_type[types.codes] if len(of_type) else np.full(len(names), -1)
    codes = np.where(tc >= 0, tc, of_name[names.codes] if len(of_name) else -1)
    return pd.Categorical.from_codes(codes.astype(np.int32), categories=pd.Index(cats, dtype=str))


def _timeline(chunks, kind, is_x, is_b, row_track, rel_us, dur, multi, paths) -> pd.DataFrame:
    name_code, name_values = _unify(chunks, "name")
    cat_code, cat_values = _unify(chunks, "cat")
    type_code, type_values = _unify(chunks, "arg_type")
    rows, track, start, length, from_pair = _sorted_rows(kind, is_x, is_b, row_track, rel_us, dur,
                                                         name_code, multi, paths)
    args = _gather_args(chunks, rows, len(kind))
    names = _categorical(name_code[rows], name_values)
    del name_code
    ph = pd.Categorical.from_codes(from_pair.astype(np.int8), categories=pd.Index(["X", "B"], dtype=str))
    return pd.DataFrame({
        "track": track.astype(np.int32),
        "name": names,
        "op_type": _op_types(names, type_code[rows], type_values),
        "ph": ph.remove_unused_categories(),
        "cat": _categorical(cat_code[rows], cat_values),
        "start_us": start.astype(np.float64),
        "dur_us": length.astype(np.float64),
        "args": args.to_pandas(),
    })


def _sorted_rows(kind, is_x, is_b, row_track, rel_us, dur, name_code, multi, paths):
    """The general path: rows (X events and the B of each B/E pair) sorted by (track, start, file
    order), with track, start, duration and whether each came from a B/E pair."""
    src_rows = np.flatnonzero(is_x)
    start = rel_us[src_rows]
    length = dur[src_rows]
    from_pair = np.zeros(len(src_rows), dtype=bool)
    if is_b.any():
        b_rows, b_start, b_dur = _pair_begin_end(kind, np.flatnonzero(is_b), row_track, rel_us, paths)
        src_rows = np.concatenate([src_rows, b_rows])
        start = np.concatenate([start, b_start])
        length = np.concatenate([length, b_dur])
        from_pair = np.concatenate([from_pair, np.ones(len(b_rows), dtype=bool)])
    track = row_track[src_rows]
    if multi:
        # The per-iteration CANN files repeat some events (metadata, step-trace bars): keep one.
        keep = ~pd.DataFrame({"t": track, "s": start, "d": length, "n": name_code[src_rows]}).duplicated().to_numpy()
        src_rows, start, length, track, from_pair = (a[keep] for a in (src_rows, start, length, track, from_pair))
    order = np.lexsort((start, track))  # stable: equal starts keep file order
    return src_rows[order], track[order], start[order], length[order], from_pair[order]


def _gather_args(chunks, rows, n) -> pa.ChunkedArray:
    """args text of ``rows`` (global), gathered from the batches' spans."""
    span_rows = np.concatenate([c.spans + c.offset for c in chunks]) if chunks else np.zeros(0, np.int64)
    where = np.full(n, -1, dtype=np.int64)
    where[span_rows] = np.arange(len(span_rows))
    texts = pa.concat_arrays([c.span_args.cast(pa.string()) for c in chunks]) if chunks else pa.array([], pa.string())
    return pa.chunked_array([texts.take(pa.array(where[rows]))])


def _pair_begin_end(kind, rows, row_track, rel_us, paths):
    """B/E events -> (row of the B event, start, duration), matched per track with a stack, in time
    order. Unmatched ones are skipped with a warning."""
    order = rows[np.lexsort((rel_us[rows], row_track[rows]))]
    kinds = kind[order]
    stacks: dict[int, list[int]] = {}
    out_rows, out_start, out_dur = [], [], []
    unmatched = 0
    for r, k in zip(order, kinds):
        trk = int(row_track[r])
        if k == KIND_B:
            stacks.setdefault(trk, []).append(r)
        elif stacks.get(trk):
            b = stacks[trk].pop()
            out_rows.append(b)
            out_start.append(rel_us[b])
            out_dur.append(rel_us[r] - rel_us[b])
        else:
            unmatched += 1
    unmatched += sum(len(s) for s in stacks.values())
    if unmatched:
        warn_partial(MalformedFileError(paths[0], f"{unmatched} B/E event(s) without a partner skipped",
                                        field="ph"))
    return (np.asarray(out_rows, dtype=np.int64), np.asarray(out_start, dtype=np.float64),
            np.asarray(out_dur, dtype=np.float64))


# Flows pair by (cat, id): a flow starts at its first s event and ends at its first f event, or (the
# s/t pairs of CANN step trace) at its last t step; ``seq`` is the file order. `_pair_flows` applies this
# rule in memory; a trace built on disk (`nbprofiler.io.trace_disk`) applies it with this SQL, in duckdb
# under a memory limit. tests/test_trace_disk.py checks that both give the same frame.
_FLOW_SQL = """
WITH s AS (SELECT cat, id, arg_min(name, seq) AS name, arg_min(track, seq) AS track, arg_min(us, seq) AS us
           FROM fl WHERE kind = {s} GROUP BY cat, id),
     f AS (SELECT cat, id, arg_min(track, seq) AS track, arg_min(us, seq) AS us FROM fl WHERE kind = {f} GROUP BY cat, id),
     t AS (SELECT cat, id, arg_max(track, seq) AS track, arg_max(us, seq) AS us FROM fl WHERE kind = {t} GROUP BY cat, id),
     e AS (SELECT * FROM f UNION ALL SELECT * FROM t ANTI JOIN f USING (cat, id))
SELECT s.cat, s.id, s.name, s.track AS start_track, s.us AS start_us, e.track AS end_track, e.us AS end_us
FROM s JOIN e USING (cat, id)
ORDER BY start_us, cat, id
"""


def _pair_flows(fl: pa.Table) -> pa.Table:
    """`_FLOW_SQL`'s result from integer codes of cat and id and a sort (on a million flows, a tenth of the
    SQL's memory in half its time). ``fl`` as in `_flow_frame`, without nulls."""
    fl = fl.combine_chunks()  # one chunk per column: a take from many chunks concatenates them first
    seq = fl.column("seq").to_numpy()
    if np.any(seq[1:] < seq[:-1]):
        fl = fl.take(pa.array(np.argsort(seq, kind="stable")))  # "first" and "last" are in file order
    codes = [pc.dictionary_encode(fl.column(c)).combine_chunks().indices.to_numpy(zero_copy_only=False)
             for c in ("cat", "id")]
    start, end = _flow_ends(fl.column("kind").to_numpy(), _flow_key(*codes))
    return _flow_pairs(fl, start, *(fl.column(c).to_numpy()[rows] for rows in (start, end) for c in ("track", "us")))


def _flow_key(cat: np.ndarray, ident: np.ndarray) -> np.ndarray:
    """One int64 per (cat, id), from integer codes of each (an id's code may be the id itself)."""
    if not len(cat):
        return np.zeros(0, np.int64)
    lo, hi = int(ident.min()), int(ident.max())
    span = hi - lo + 1
    if span * (int(cat.max()) + 1) >= 1 << 62:  # ids too far apart to pack beside the cat: number them first
        ident, span, lo = np.unique(ident, return_inverse=True)[1], len(ident), 0
    return cat.astype(np.int64) * span + (ident.astype(np.int64) - lo)


def _flow_ends(kind: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_FLOW_SQL`'s rule over flow events in file order: the row of each flow's start (its key's first s)
    and of its end (the first f, else the last t), for the keys that have both. One stable sort by key
    (each key's events stay in file order), then a pass over the sorted events."""
    order = np.argsort(key, kind="stable")
    k, kd = key[order], kind[order]
    group = np.cumsum(np.r_[True, k[1:] != k[:-1]]) - 1 if len(k) else np.zeros(0, np.int64)
    n = int(group[-1]) + 1 if len(group) else 0

    def pick(event_kind: int, last: bool = False) -> np.ndarray:
        """Per key, the row of its first (or last) ``event_kind`` event, or -1."""
        at = np.flatnonzero(kd == event_kind)
        g = group[at]
        out = np.full(n, -1, dtype=np.int64)
        if len(at):
            keep = np.r_[g[1:] != g[:-1], True] if last else np.r_[True, g[1:] != g[:-1]]
            out[g[keep]] = order[at[keep]]
        return out
    s, f, t = pick(KIND_S), pick(KIND_F), pick(KIND_T, last=True)
    e = np.where(f >= 0, f, t)
    both = (s >= 0) & (e >= 0)
    return s[both], e[both]


def _flow_pairs(text: pa.Table, rows: np.ndarray, start_track, start_us, end_track, end_us) -> pa.Table:
    """`_FLOW_SQL`'s result from the pairs `_flow_ends` found: the start events' ``cat``, ``id`` and
    ``name`` (rows ``rows`` of ``text``), and both ends' tracks and times, ordered by start, cat, id. The
    text is copied once, in that order: the order is found from the times, and from the text only among
    flows that start at the same time."""
    order = np.argsort(start_us, kind="stable")
    us = start_us[order]
    tied = np.zeros(len(us), dtype=bool)
    tied[1:] = us[1:] == us[:-1]
    tied[:-1] |= tied[1:]
    if tied.any():  # each run of equal times is contiguous: sorting all of them by (time, cat, id) orders each
        sub = order[tied]
        keys = text.select(["cat", "id"]).take(pa.array(rows[sub])).append_column("us", pa.array(start_us[sub]))
        order[tied] = sub[pc.sort_indices(keys, sort_keys=[("us", "ascending"), ("cat", "ascending"),
                                                           ("id", "ascending")]).to_numpy()]
    # one chunk first: a take from the chunks of every batch joins them for each column anyway, more slowly
    start = text.select(["cat", "id", "name"]).combine_chunks().take(pa.array(rows[order]))
    return pa.table({"cat": start.column("cat"), "id": start.column("id"), "name": start.column("name"),
                     "start_track": pa.array(start_track[order]), "start_us": pa.array(us, pa.float64()),
                     "end_track": pa.array(end_track[order]), "end_us": pa.array(end_us[order], pa.float64())})


def _flows(flow, kind, is_flow, row_track, rel_us) -> pd.DataFrame:
    """``flow``: the s/f/t events with their global ``row``; ``is_flow``: which rows are placeable."""
    keep = is_flow[flow.column("row").to_numpy()]
    rows = flow.column("row").to_numpy()[keep]
    if not len(rows):
        return _flow_frame(None)
    fl = _rows(flow, ["cat", "id", "name"], keep)
    return _flow_frame(pa.table({"kind": pa.array(kind[rows]),
                                 **{c: pc.fill_null(fl.column(c), "") for c in ("cat", "id", "name")},
                                 "seq": pa.array(rows), "track": pa.array(row_track[rows]),
                                 "us": pa.array(rel_us[rows])}))


def _flow_frame(fl: pa.Table | None) -> pd.DataFrame:
    """The flows frame from the placeable s/f/t events (``kind``, ``cat``, ``id``, ``name``, ``seq`` = file
    order, ``track``, ``us``), or an empty one."""
    return _flow_frame_of_pairs(_pair_flows(fl) if fl is not None and len(fl) else None)


def _flow_frame_of_pairs(pairs: pa.Table | None) -> pd.DataFrame:
    """The flows frame from `_pair_flows`' result, or an empty one."""
    if pairs is None or not len(pairs):
        return _empty(FLOW_COLUMNS, {"start_track": np.int32, "end_track": np.int32, "start_us": np.float64,
                                     "end_us": np.float64})
    # the text converts to pandas' string type as it is (str objects on pandas 2): no second pass over it
    return pairs.to_pandas().astype({"start_track": np.int32, "start_us": np.float64, "end_track": np.int32,
                                     "end_us": np.float64})


# One row per (C event, args key): each key of a C event's args is a series (Chrome trace format).
_COUNTER_SQL = """
SELECT coalesce(c.pid, '') AS pid, coalesce(c.name, '') AS name, j.key AS series, c.ts_ns, c.row,
       TRY_CAST(j.value AS DOUBLE) AS value
FROM c, json_each(CAST(c.args AS JSON)) AS j
"""
_COUNTER_ORDER = ("pid", "name", "series", "ts_ns", "row")


# Counter args as profilers write them, in duckdb's compact JSON: flat objects of plain keys (no quote or
# backslash) and numbers, e.g. {"Read(MB/s)":1.5,"Write(MB/s)":0}. There a comma before a quote only
# separates two keys, so these are split by Arrow string kernels; other args go through duckdb's json_each.
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_FLAT_ARGS = rf'^\{{"[^"\\]*":{_NUMBER}(?:,"[^"\\]*":{_NUMBER})*\}}$'


def _counter_samples(events: pa.Table) -> pa.Table | None:
    """The samples of some placeable C events (``row`` = file order, ``pid``, ``name``, ``args``, ``ts_ns``
    = exact ns): one row per (event, args key), unordered (`_counter_frame` orders them); None for no
    events."""
    if not len(events):
        return None
    events = events.select(["row", "pid", "name", "args", "ts_ns"])
    args = _storage(events.column("args").combine_chunks())
    flat = pc.fill_null(pc.match_substring_regex(args, _FLAT_ARGS), False).to_numpy(zero_copy_only=False)
    samples = [_query(_COUNTER_SQL, c=events.filter(pa.array(~flat)))] if not flat.all() else []
    if flat.any():
        simple = events.filter(pa.array(flat))
        # {"a":1,"b":2} -> ['"a":1', 'b":2'] -> ['"a', '1', 'b', '2']: keys at even places, values at odd ones
        pairs = pc.split_pattern(pc.utf8_slice_codeunits(args.filter(pa.array(flat)), 1, -1), ',"')
        tokens = pc.list_flatten(pc.split_pattern(pc.list_flatten(pairs), '":', max_splits=1))
        try:
            value = pc.cast(tokens[1::2], pa.float64())
        except pa.ArrowInvalid:  # a number beyond float64: duckdb decides
            return _query(_COUNTER_SQL, c=events)
        of = simple.select(["pid", "name", "ts_ns", "row"]).take(pc.list_parent_indices(pairs))
        samples.append(pa.table({"pid": pc.fill_null(of.column("pid"), ""), "name": pc.fill_null(of.column("name"), ""),
                                 "series": pc.utf8_ltrim(tokens[0::2], '"'), "ts_ns": of.column("ts_ns"),
                                 "row": of.column("row"), "value": value}))
    return pa.concat_tables(samples, promote_options="permissive") if len(samples) > 1 else samples[0]


def _counter_events(aux: pa.Table, is_counter: np.ndarray, ts_ns: np.ndarray) -> pa.Table:
    """``aux``: M and C events with their global ``row``; ``is_counter``: which of them are placeable C
    events; ``ts_ns``: each aux event's ts. The C events as `_counter_samples` takes them."""
    return _rows(aux, ["row", "pid", "name", "args"], is_counter).append_column("ts_ns", pa.array(ts_ns[is_counter]))


def _counter_frame(samples: pa.Table | None, origin_ns: int) -> pd.DataFrame:
    """The counters frame of some counter samples (`_counter_samples`, of one or more tables of C events):
    ordered by (pid, name, series, time, file order), times in us from ``origin_ns``; an empty frame when
    there are none."""
    if samples is None or not len(samples):
        return _empty(COUNTER_COLUMNS, {"start_us": np.float64, "value": np.float64})
    t = samples.sort_by([(c, "ascending") for c in _COUNTER_ORDER])
    out = t.select(["pid", "name", "series"]).to_pandas()
    for col in ("pid", "name", "series"):
        out[col] = out[col].astype(str)
    out["start_us"] = (t.column("ts_ns").to_numpy() - origin_ns).astype(np.float64) / 1000.0
    out["value"] = pc.fill_null(t.column("value").cast(pa.float64()), np.nan).to_numpy()
    return out


def _empty(columns, dtypes) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, str)) for c in columns})


# -- FRAMEWORK fallback -------------------------------------------------------------------------------
def _from_cpu_ops(run: RunFiles) -> TraceData | None:
    try:
        from .framework import cpu_op_executions
    except ImportError:
        return None
    ex = cpu_op_executions(run)
    if ex is None or ex.empty:
        return None
    origin = float(ex["start_us"].min())
    tids = ex["tid"].astype(str)
    uniq = sorted(tids.unique(), key=lambda t: (_as_int(t) is None, _as_int(t) or 0, t))
    tracks = pd.DataFrame({"track": np.arange(len(uniq), dtype=np.int32), "pid": "0", "tid": uniq,
                           "process": "CPU OP", "thread": [f"Thread {t}" for t in uniq],
                           "process_sort": np.int64(0), "thread_sort": np.arange(len(uniq), dtype=np.int64)})
    track = tids.map({t: i for i, t in enumerate(uniq)}).to_numpy(dtype=np.int32)
    start = ex["start_us"].to_numpy(dtype=np.float64) - origin
    order = np.lexsort((start, track))
    sub = ex.iloc[order]
    timeline = pd.DataFrame({
        "track": track[order], "name": pd.Categorical(sub["op_name"].astype(str)),
        "op_type": pd.Categorical(sub["op_type"].astype(str)),
        "ph": pd.Categorical(np.full(len(order), "X", dtype=object)), "cat": pd.Categorical(np.full(len(order), "")),
        "start_us": start[order], "dur_us": sub["dur_us"].to_numpy(dtype=np.float64),
        "args": pd.Series([None] * len(order), dtype=object)})
    tracks["events"] = np.bincount(timeline["track"], minlength=len(tracks)).astype(np.int64)
    return TraceData(origin_us=origin, timeline=timeline, tracks=tracks,
                     flows=_flow_frame(None), counters=_counter_frame(None, 0))


# -- progress -----------------------------------------------------------------------------------------
class _Progress:
    """A tqdm.auto bar over input bytes that appears only when a load takes longer than a second (a
    shorter load never imports tqdm). duckdb parses a file in one call, so a ticker thread keeps the
    elapsed time moving meanwhile."""

    DELAY_S = 1.0

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.bar = None
        self.done = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        # below this size the load ends before the bar would appear: no ticker either
        if self.enabled and self.total >= PROGRESS_MIN_BYTES:
            self._thread = threading.Thread(target=self._tick, daemon=True, name="nbprofiler-progress")
            self._thread.start()
        return self

    def _tick(self):
        if self._stop.wait(self.DELAY_S):
            return
        from tqdm.auto import tqdm
        with self._lock:
            self.bar = tqdm(total=self.total, initial=int(self.done), desc=self.desc, unit="B", unit_scale=True,
                            leave=False)
        while not self._stop.wait(0.5):
            self.bar.refresh()

    def advance(self, n: float) -> None:
        with self._lock:
            self.done += n
            if self.bar is not None:
                self.bar.update(int(n))

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar is not None:
            self.bar.close()
        return False


__all__ = ["mark_scope_layers", "trace_sources",
           "trace_data", "load_trace", "parse_events", "exact_events", "op_type_of", "TraceData"]
