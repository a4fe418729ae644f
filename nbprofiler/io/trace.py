"""Chrome-trace JSON -> timeline frames, without a Python object per event.

Sources, by role (first found wins): ``trace_view`` (MindSpore 2.3+ / torch_npu ``trace_view.json``),
``timeline`` (legacy ``ascend_``/``gpu_``/older ``timeline_display_{id}.json``), ``cann_timeline``
(CANN ``msprof_*.json``, one file per iteration, merged), else ``cann_task_time`` + ``cann_hccl``; with
none of them, the FRAMEWORK ``cpu_op_execute_timestamp`` records (``framework.cpu_op_executions``).

The fast path: duckdb's ``read_json`` with an explicit column list parses the file in C++ straight into
Arrow record batches (``ts`` is read as text, ``dur`` as a number or, on a retry, as text; ``tid``/``id``
strings or ints are read as text). The reader uses one thread per file, so it runs in a background
thread and this thread digests each batch while the next one is parsed: ``ph`` -> an int ``kind``,
``ts`` -> DECIMAL(38,3), i.e. exact integer nanoseconds (epoch microseconds in float64 keep only
~0.25 us), ``args.type``, dictionary codes of pid/tid/name/cat, and the batch's X events sorted by
(pid, tid, ts) with their args text gathered in that order. When every track runs forward in time
from batch to batch (files are written in time order), the timeline is the concatenation of those
sorted runs; otherwise it is sorted globally. Everything is vectorised numpy/Arrow/duckdb work; only
metadata (``M``) and ``B``/``E`` events, a tiny fraction, are touched one by one. When duckdb rejects a
file, a slower exact parse (stdlib json, one element at a time) finds the line of the error, so the
user gets `TruncatedFileError` / `MalformedFileError` with a line number.

Parsed frames are cached (LZ4 Arrow IPC files) in the user cache dir (`nbprofiler.io.cache`), keyed by
path, size and mtime of every source file, so a second open of a big trace reads them instead of JSON.
"""
from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (EmptyFileError, MalformedFileError, MissingColumnError, ProfilerDataError,
                      TruncatedFileError)
from ..schema import FRAMES
from . import cache, json_slice
from ._util import EXPANSION, check_size, decode, read_bytes, warn_partial
from .discover import RunFiles

# Roles that hold Chrome-trace JSON, in order of preference.
TRACE_ROLES = ("trace_view", "timeline", "cann_timeline", "cann_task_time", "cann_hccl")

# Inputs smaller than this load in well under the progress bar's 1 s delay.
PROGRESS_MIN_BYTES = 50_000_000
# The longest event a trace can hold: 30 days in microseconds (a profiled job runs hours, not months).
MAX_DURATION_US = 30 * 24 * 3600 * 1e6

# Fields read from every event. MindSpore writes ts/dur as strings or numbers and tid/id as strings or
# ints (FORMATS 4.5, 3.14). ts is read as text and cast in SQL (`_SELECT`): the JSON reader would turn a
# numeric ts into a double first and lose its sub-us digits. dur is read as DOUBLE directly (the reader
# casts numeric strings itself, which is cheaper than a text column plus a cast); a file where some dur
# is not a number fails that read and is re-read with dur as text and TRY_CAST (`_DUR_AS_TEXT`).
_COLUMNS = {"ph": "VARCHAR", "name": "VARCHAR", "cat": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR",
            "ts": "VARCHAR", "dur": "DOUBLE", "id": "VARCHAR", "args": "JSON"}
_DUR_AS_TEXT = {**_COLUMNS, "dur": "VARCHAR"}

# Event kinds (the `kind` column): ph as a small int, so masks are integer compares, not string ones.
KIND_NO_PH, KIND_M, KIND_X, KIND_B, KIND_E, KIND_S, KIND_F, KIND_T, KIND_C, KIND_OTHER = -1, 0, 1, 2, 3, 4, 5, 6, 7, 8

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


@dataclasses.dataclass
class TraceData:
    """Everything parsed from a run's trace source(s): the four frames and the absolute origin."""

    origin_us: float
    timeline: pd.DataFrame
    tracks: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame

    def frames(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in TRACE_FRAMES}


TRACE_FRAMES = ("timeline", "tracks", "flows", "counters")  # what a trace's cache entry must hold


# -- scope layers -----------------------------------------------------------------------------------------
SCOPE_LAYER_TYPE = "Scope Layer"


def scope_tracks(tracks: pd.DataFrame) -> set[int]:
    """Tracks that hold scope-layer bars, not operators: MindSpore's "Scope Layer" process (2.x) and the
    legacy "Scope Name" thread (tid 100001)."""
    if tracks is None or tracks.empty:
        return set()
    proc = tracks["process"].astype(str).str.lower()
    thread = tracks["thread"].astype(str).str.lower()
    is_scope = proc.str.contains("scope layer") | thread.str.contains("scope name") | \
        (tracks["tid"].astype(str) == "100001")
    return set(tracks.loc[is_scope, "track"].astype(int))


def mark_scope_layers(timeline: pd.DataFrame, tracks: pd.DataFrame) -> pd.DataFrame:
    """``is_scope`` (bool): the event is a scope-layer bar ("Default", "network-WithLossCell", ...) that
    spans the operators under it; its ``op_type`` becomes ``"Scope Layer"`` so scope names never mix
    with operator types (their time is the time of the ops inside them, counted again)."""
    if "is_scope" in timeline.columns:
        return timeline
    scope = timeline["track"].isin(scope_tracks(tracks)).to_numpy()
    out = timeline.copy(deep=False)
    out["is_scope"] = scope
    if scope.any():
        cats = out["op_type"].cat.categories
        if SCOPE_LAYER_TYPE not in cats:
            cats = cats.append(pd.Index([SCOPE_LAYER_TYPE], dtype=cats.dtype))
        codes = np.where(scope, cats.get_loc(SCOPE_LAYER_TYPE), out["op_type"].cat.codes.to_numpy())
        # the categories still used, in their order (a count per code: no sort of every row)
        used = np.bincount(codes + 1, minlength=len(cats) + 1)[1:] > 0
        new_code = np.r_[-1, np.cumsum(used) - 1]
        out["op_type"] = pd.Categorical.from_codes(new_code[codes + 1], categories=cats[used], validate=False)
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
    cache.store(key, paths, data.frames(), {"origin_us": data.origin_us}, background=True)
    return data


# -- parsing ------------------------------------------------------------------------------------------
def load_trace(paths: list[Path] | Path, legacy: bool | None = None, progress: bool = True) -> TraceData:
    """Parse one or more Chrome-trace JSON files into `TraceData` (several files are merged and their
    repeated metadata deduplicated). ``legacy``: name tracks by the legacy conventions where no ``M``
    event names them (default: when the file name is a ``*timeline_display_*``)."""
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if legacy is None:
        legacy = any("timeline_display" in p.name for p in paths)
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


def parse_events(path: Path) -> pa.Table:
    """One Chrome-trace file -> Arrow table, one row per event in file order (what the frames are
    built from; flow ids are not included). Columns: ``kind`` (int8: `KIND_M`, `KIND_X`, ... from
    ``ph``; -1 where ``ph`` is missing), ``pid``, ``tid``, ``name`` (null for flow events), ``cat``,
    ``arg_type`` (``args.type`` of X/B events) as strings, ``ts_ns`` (int64 ns, exact; null where
    missing or not a number), ``dur`` (float64 us; null where missing or not a number). Raises
    `ProfilerDataError` subclasses."""
    chunks = _parse_chunks(Path(path))
    if not chunks:
        return pa.table({"kind": pa.array([], pa.int8())})
    coded = {col: pa.chunked_array([c.codes[col] for c in chunks]).cast(pa.string()) for col in _CODED}
    ts_ns = np.concatenate([c.ts_ns for c in chunks])
    ts_ok = np.concatenate([c.ts_ok for c in chunks])
    dur = np.concatenate([c.dur for c in chunks])
    return pa.table({"kind": np.concatenate([c.kind for c in chunks]), **{c: coded[c] for c in _CODED},
                     "ts_ns": pa.array(ts_ns, mask=~ts_ok), "dur": pa.array(dur, mask=np.isnan(dur))})


# -- streaming parse ----------------------------------------------------------------------------------
# The JSON reader is one thread per file (a JSON array cannot be split), so the second core is free while
# it runs: the reader runs in a background thread and hands over record batches, and this thread
# digests each batch meanwhile (casts, dictionary codes, and the per-batch sort and gather of the
# timeline's args), so that little is left once the last batch arrives.

_RAW_SELECT = "SELECT ph, name, cat, pid, tid, id, ts, dur, args{extra} FROM {source}"

# Per batch, on the digesting thread. ts is cast from its text: the JSON reader would turn a numeric
# ts into a double first and lose its sub-us digits. args.type is extracted only where the text can
# hold a "type" key (json_extract on every event costs ~10% of the parse; a key spelled with \u
# escapes is caught by the second test). Flow names (often one per flow) are kept out of ``name`` so
# its dictionary stays small.
_DIGEST_SQL = """
SELECT CAST(CASE ph WHEN 'M' THEN 0 WHEN 'X' THEN 1 WHEN 'B' THEN 2 WHEN 'E' THEN 3 WHEN 's' THEN 4
                    WHEN 'f' THEN 5 WHEN 't' THEN 6 WHEN 'C' THEN 7
                    ELSE (CASE WHEN ph IS NULL THEN -1 ELSE 8 END) END AS TINYINT) AS kind,
       CASE WHEN ph IN ('s', 'f', 't') THEN NULL ELSE name END AS name,
       CASE WHEN ph = 's' THEN name END AS flow_name,
       TRY_CAST(ts AS DECIMAL(38, 3)) AS ts,
       {dur} AS dur,
       CASE WHEN ph IN ('X', 'B') AND (contains(args, '"type"') OR contains(args, '\\u'))
            THEN json_extract_string(args, '$.type') END AS arg_type
FROM b
"""

# Rows per record batch: at most _BATCH_ROWS, and about _BATCHES_PER_FILE batches (at least
# _MIN_BATCH_ROWS rows) so that a small file is digested while it is read rather than after.
_BATCH_ROWS = 131072
_MIN_BATCH_ROWS = 32768
_BATCHES_PER_FILE = 32
_BYTES_PER_EVENT = 200  # typical of MindSpore / torch_npu trace events
# duckdb's maximum_object_size: first try (one event of an array file; real events are < 1 KB), and the
# retry / the size of a whole {"traceEvents": [...]} document. duckdb reads no less than 16 MB and accepts
# objects up to about twice the size it is given; an event larger than that (a hostile one) fails the first
# read, and the retry is charged the memory guard's ``trace_big_event`` factor first.
_MAX_EVENT = 16 * 1024 * 1024
_MAX_OBJECT = 2147483647
# A string value longer than this (no real one is) makes the memory guard check the file again, charging
# the value ``trace_big_event`` times its length on top (a huge name costs ~8 copies of itself).
_BIG_VALUE = 1 << 20


@dataclasses.dataclass
class _Chunk:
    """One digested record batch. Row numbers are local (0..n-1); ``offset`` is the global row of row 0.
    ``spans``: rows of the X/B events that can be placed (numeric ts, X with a numeric dur), sorted by
    (pid, tid, ts, row); ``span_args``: their args text in that order."""

    offset: int
    n: int
    kind: np.ndarray
    ts_ns: np.ndarray
    ts_ok: np.ndarray
    dur: np.ndarray
    codes: dict           # column -> pa.DictionaryArray (this batch's own dictionary)
    flow: pa.Table        # the s/f/t events: row (global), cat, id, name (of s events) as read
    aux: pa.Table         # M and C events: row (global), name, pid, tid, args
    spans: np.ndarray
    span_args: pa.Array


_CODED = ("pid", "tid", "name", "cat", "arg_type")


def _digest(batch: pa.RecordBatch, offset: int, dur_sql: str) -> _Chunk:
    d = _query(_DIGEST_SQL.format(dur=dur_sql), b=pa.Table.from_batches([batch]))
    kind = d.column("kind").to_numpy()
    ts_ns, ts_ok = _ts_ns(d.column("ts"))
    dur = pc.fill_null(d.column("dur"), np.nan).to_numpy()
    src = {"pid": batch.column("pid"), "tid": batch.column("tid"), "cat": batch.column("cat"),
           "name": d.column("name"), "arg_type": d.column("arg_type")}
    codes = {c: _dict_chunk(src[c]) for c in _CODED}
    placed = ((kind == KIND_X) & ~np.isnan(dur)) | (kind == KIND_B)
    spans = np.flatnonzero(placed & ts_ok)
    pid_i = codes["pid"].indices.to_numpy(zero_copy_only=False)
    tid_i = codes["tid"].indices.to_numpy(zero_copy_only=False)
    spans = spans[np.lexsort((ts_ns[spans], tid_i[spans], pid_i[spans]))]
    args = batch.column("args")
    span_args = args.take(pa.array(spans)) if len(spans) else pa.array([], pa.string())
    aux_mask = (kind == KIND_M) | (kind == KIND_C)
    aux = pa.table({"row": pa.array(np.flatnonzero(aux_mask) + offset),
                    **{c: batch.column(c).filter(pa.array(aux_mask)) for c in ("name", "pid", "tid", "args")}})
    is_flow = pa.array((kind >= KIND_S) & (kind <= KIND_T))
    flow = pa.table({"row": pa.array(np.flatnonzero(is_flow) + offset),
                     **{c: batch.column(c).filter(is_flow) for c in ("cat", "id")},
                     "name": d.column("flow_name").filter(is_flow)})
    # Everything kept is a copy: an Arrow array imported from duckdb keeps its whole batch alive (args
    # included), so keeping a view of one column would keep every batch of the file in memory.
    return _Chunk(offset, batch.num_rows, kind.copy(), ts_ns, ts_ok, dur.copy(), codes, flow, aux, spans, span_args)


# JSON syntax around an event's values: keys, quotes, separators and braces (MindSpore and torch_npu
# write about this many bytes per event besides the values themselves).
_EVENT_SYNTAX_BYTES = 70


def _json_bytes(batch: pa.RecordBatch) -> int:
    """About how many bytes of JSON ``batch`` was read from: its text values plus the syntax around them."""
    n = batch.num_rows * _EVENT_SYNTAX_BYTES
    for col in batch.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            n += int(pc.sum(pc.binary_length(col)).as_py() or 0)
        else:
            n += 8 * batch.num_rows
    return n


def _dict_chunk(col) -> pa.DictionaryArray:
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return pc.dictionary_encode(col.cast(pa.string()) if col.type != pa.string() else col)


def _stream(path: Path, first: bytes, columns: dict, dur_sql: str, offset: int, max_event: int,
            span: tuple[int, int] | None = None, on_batch=None, checked_size: int | None = None,
            limit: int | None = None, stats: dict | None = None, make_digest=None) -> list[_Chunk]:
    """Read ``path`` in a background thread and digest its batches here as they arrive. ``max_event``:
    duckdb's maximum_object_size for the events of an array file; duckdb's read buffer grows to it, so
    a huge value costs that much memory (2 GB: ~1 GB more peak RSS on a 1 GB file). ``span``: the byte
    range of an event array (of an object-form file, `json_slice.array_span`, or the array a file starts
    with when other data follows it), read as an array file. ``limit``: an object-form file read as one
    document is read up to this byte. ``stats`` (a dict) receives ``longest`` (bytes of the longest string
    value read) and, for a document read, ``docs`` (how many JSON documents the file holds; only the
    first one's events are read). ``make_digest``: returns the function that digests each batch (default
    `_digest`); called once per read, so a read that fails and is retried starts a fresh one."""
    import queue
    digest = _digest if make_digest is None else make_digest()
    stats = {} if stats is None else stats
    stats["longest"] = 0
    url = json_slice.slice_url(path, *span) if span else \
        json_slice.slice_url(path, 0, limit) if limit is not None else None
    lit = "'" + (url or str(path)).replace("'", "''") + "'"
    as_document = not (first == b"[" or span)
    if not as_document:
        cols = "{" + ", ".join(f"{k}: '{v}'" for k, v in columns.items()) + "}"
        source = f"read_json({lit}, format='array', columns={cols}, maximum_object_size={max_event})"
    else:  # one object holding the event list, not placed by array_span: read as one JSON document
        # duckdb reads every JSON document of the file: only the first one's events are taken, and the
        # count of the others tells that data follows the document (the caller reports it)
        struct = "STRUCT(" + ", ".join(f"{k} {v}" for k, v in columns.items()) + ")[]"
        source = (f"(SELECT unnest(traceEvents, recursive := true), docs FROM (SELECT traceEvents, count(*) OVER () "
                  f"AS docs FROM read_json({lit}, format='unstructured', columns={{traceEvents: '{struct}'}}, "
                  f"maximum_object_size={_MAX_OBJECT}) QUALIFY row_number() OVER () = 1))")
    sql = _RAW_SELECT.format(source=source, extra=", docs" if as_document else "")
    size = path.stat().st_size
    batches: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    done = object()

    def read():
        try:
            con = _connection()
            if url and not getattr(_local, "slices", False):
                json_slice.register(con)
                _local.slices = True
            rel = con.sql(sql)
            rows = min(_BATCH_ROWS, max(_MIN_BATCH_ROWS, size // _BYTES_PER_EVENT // _BATCHES_PER_FILE))
            reader = rel.to_arrow_reader(rows) if hasattr(rel, "to_arrow_reader") \
                else rel.fetch_record_batch(rows)
            for b in reader:
                while not stop.is_set():
                    try:
                        batches.put(b, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            batches.put(done)
        except BaseException as e:  # handed to the digesting thread, which raises it
            _local.con = None
            _local.slices = False
            batches.put(e)

    reader_thread = threading.Thread(target=read, name="nbprofiler-trace-reader", daemon=True)
    reader_thread.start()
    chunks = []
    try:
        while True:
            item = batches.get()
            if item is done:
                break
            if isinstance(item, BaseException):
                raise item
            if item.num_rows:
                if as_document and "docs" not in stats:
                    stats["docs"] = int(item.column("docs")[0].as_py())
                stats["longest"] = max(stats["longest"], _longest(item))
                chunks.append(digest(item, offset, dur_sql))
                offset += item.num_rows
                if on_batch is not None:
                    on_batch(_json_bytes(item))
                if checked_size is not None and path.stat().st_size > checked_size:
                    # the memory guard checked a smaller file: stop before reading what it did not allow
                    raise ProfilerDataError(path, f"the file grew while it was read (from {checked_size:,} bytes; "
                                                  "is the profiler still writing it?); load it once it is complete")
    finally:
        stop.set()
        reader_thread.join()
        if url:
            json_slice.release(url)
    return chunks


def _longest(batch: pa.RecordBatch) -> int:
    """Bytes of the longest string value in ``batch``."""
    n = 0
    for col in batch.columns:
        if isinstance(col.type, pa.ExtensionType):  # duckdb's JSON type arrives as an extension of string
            col = col.storage
        if (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) and len(col):
            n = max(n, int(pc.max(pc.binary_length(col)).as_py() or 0))
    return n


def _parse_chunks(path: Path, offset: int = 0, on_batch=None, make_digest=None, family: str = "trace") -> list[_Chunk]:
    """One Chrome-trace file -> its digested batches (file order). Raises `ProfilerDataError`s.
    ``on_batch(nbytes)``: called after each batch with an estimate of the JSON bytes it was read from.
    Data after the end of the JSON document is ignored with a warning naming its byte offset and line;
    the document's events load. ``make_digest``: see `_stream`; ``family``: the memory guard's row for
    what the digests keep (`EXPANSION`)."""
    path = Path(path)
    checked = check_size(path, family)
    first = _first_byte(path)
    if first not in (b"[", b"{"):
        _exact_check(path)  # raises with the line of the first bad byte
        raise MalformedFileError(path, "not a Chrome trace: expected a JSON array or an object with "
                                       "'traceEvents'", line=1)
    import duckdb
    # a reader error reaches here as duckdb's own, or through Arrow's stream interface as an Arrow error
    read_errors = (duckdb.Error, pa.ArrowException, OSError)
    end = None  # the end of the JSON document, when other data follows it
    if not _ends_like(path, first):
        # something other than the closing bracket ends the file: the exact parse says what, and where
        end = _document_end(path)
    stats: dict = {}
    while True:
        chunks, error = _read_attempts(path, first, offset, on_batch, checked, end, stats, read_errors, make_digest)
        if chunks is not None:
            break
        if end is None:
            end = _document_end(path)  # raises the error that made every read fail, if not data after it
        else:  # the document alone cannot be read either
            _exact_check(path, upto=end)
            end = None
        if end is None:
            raise MalformedFileError(path, f"not a readable Chrome trace: {str(error).splitlines()[0]}")
    if stats.get("docs", 1) > 1 and end is None:
        # read as one document: more documents follow the first one (only its events were taken)
        try:
            end = _document_end(path)
        except ProfilerDataError:  # too large for the exact parse, or an error only it sees
            _warn_trailing(path, None)
    if first == b"{" and not chunks:
        _exact_check(path, need_trace_events=True, upto=end)
    if stats.get("longest", 0) > _BIG_VALUE:
        # a huge string costs several copies of itself in the frames built next
        check_size(path, family, extra_bytes=int(stats["longest"] * EXPANSION["trace_big_event"]))
    return chunks


def _read_attempts(path: Path, first: bytes, offset: int, on_batch, checked: int, end: int | None,
                   stats: dict, read_errors, make_digest=None) -> tuple[list[_Chunk] | None, Exception | None]:
    """The fast reads of ``path`` (up to byte ``end`` when given), in order, until one succeeds:
    (its chunks, None), or (None, the last read's error) when all of them fail."""
    if end is not None and first == b"[":
        span = (0, end)  # the array, without what follows it
    else:
        # An object-form trace's event array is read like an array file when its bytes can be placed.
        span = json_slice.array_span(path, end=end) if first == b"{" else None
    # Then, if that fails (some dur is not a number, an event is larger than _MAX_EVENT, or the file is
    # broken): dur read as text (cast what casts) with no practical size limit; an object as one document.
    attempts = [(_COLUMNS, "dur", _MAX_EVENT, span), (_DUR_AS_TEXT, "TRY_CAST(dur AS DOUBLE)", _MAX_OBJECT, span)]
    if span and first == b"{":
        attempts.append((_DUR_AS_TEXT, "TRY_CAST(dur AS DOUBLE)", _MAX_OBJECT, None))
    too_big, error = False, None
    for columns, dur_sql, max_event, where in attempts:
        if where is None and first == b"{":
            check_size(path, "trace_document")  # duckdb holds the whole document
        elif too_big and max_event == _MAX_OBJECT:
            check_size(path, "trace_big_event")  # an event larger than the first read allows
        try:
            return _stream(path, first, columns, dur_sql, offset, max_event, where, on_batch, checked,
                           limit=end, stats=stats, make_digest=make_digest), None
        except read_errors as e:
            too_big, error = too_big or "maximum_object_size" in str(e), e
    return None, error


def _ends_like(path: Path, first: bytes) -> bool:
    """Whether the file's last non-blank byte is the bracket that closes a document opened by ``first``."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - 4096))
        tail = f.read().rstrip(b" \t\r\n")
    if not tail and size > 4096:
        return True  # 4 KB of blank space at the end: let the reads decide
    return tail[-1:] == (b"]" if first == b"[" else b"}")


class _TrailingData(MalformedFileError):
    """The JSON document ends at byte ``end`` and other data starts at byte ``at`` (on line ``line``)."""

    def __init__(self, path, end: int, at: int, line: int):
        super().__init__(path, f"invalid JSON: data after the end of the document (byte {at:,})", line=line)
        self.end, self.at = end, at


def _document_end(path: Path) -> int | None:
    """The byte offset where the JSON document ends when data that is not blank follows it (reported
    with `_warn_trailing`); None when the whole file is one valid document. Raises the error of a file
    that is invalid otherwise."""
    try:
        _exact_check(path)
    except _TrailingData as t:
        _warn_trailing(path, t)
        return t.end
    return None


def _warn_trailing(path: Path, t: _TrailingData | None) -> None:
    where = f" at byte {t.at:,}" if t is not None else " (a second JSON document; its offset was not located)"
    warn_partial(MalformedFileError(path, f"data after the end of the JSON document{where} was ignored (the file "
                                          "is not valid JSON past that point); the document's events loaded",
                                    line=t.line if t is not None else None))


_local = threading.local()


def _connection():
    """This thread's duckdb connection (opening one costs ~20 ms, a fifth of parsing 10 MB): all
    cores, file order kept, nothing spilled to disk (duckdb's default spill directory is relative to
    the working directory, which may be a profiler directory)."""
    con = getattr(_local, "con", None)
    if con is None:
        import duckdb
        con = duckdb.connect(config={"preserve_insertion_order": True, "temp_directory": ""})
        con.execute("SET enable_progress_bar = false")
        _local.con = con
    return con


def _query(sql: str, **tables) -> pa.Table:
    """Run one statement and return its result as one Arrow table; ``tables`` (Arrow) are visible to
    it under their keyword names. A failed statement drops the connection, so a broken one is not
    reused."""
    import duckdb
    con = _connection()
    try:
        for name, t in tables.items():
            con.register(name, t)
        rel = con.sql(sql)
        table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
        return table.read_all() if hasattr(table, "read_all") else table
    except duckdb.Error:
        _local.con = None
        con.close()
        raise
    finally:
        if getattr(_local, "con", None) is con:
            for name in tables:
                con.unregister(name)


def _first_byte(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise ProfilerDataError(path, f"cannot read: {e.strerror or e}") from None
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if not stripped:
        if not head or not head.strip():
            raise EmptyFileError(path, "file is empty")
    return stripped[:1]


_WS = re.compile(r"[ \t\r\n]*")


def exact_events(path: Path) -> list[dict]:
    """The slow exact reference parse (stdlib json): the list of events. Used to locate errors (line
    numbers) and by the tests to check the fast path. Data after the document is an error here."""
    doc = _exact_check(path, keep=True)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _exact_check(path: Path, need_trace_events: bool = False, keep: bool = False, upto: int | None = None):
    """Parse ``path`` exactly and raise the typed error (with its line) for whatever is wrong with it;
    `_TrailingData` (a `MalformedFileError`) when the only thing wrong is data after a valid document.

    Array files are decoded one element at a time so a huge file needs no more than its text in memory
    (events are kept only with ``keep``). ``upto``: check only the file's first ``upto`` bytes. Returns
    the document (with ``keep`` or for an object-form file; else an empty list) when nothing is wrong."""
    data = read_bytes(path, "trace_exact")
    if upto is not None:
        data = data[:upto]
    if not data.strip():
        raise EmptyFileError(path, "file is empty")
    bom = 0
    while data.startswith(b"\xef\xbb\xbf", bom):
        bom += 3
    text = decode(path, data)
    del data
    dec = json.JSONDecoder()
    end = len(text.rstrip())

    def fail(e: json.JSONDecodeError):
        if e.pos >= end - 1 or "Unterminated" in e.msg:
            raise TruncatedFileError(path, f"JSON ends early ({e.msg})", line=e.lineno) from None
        raise MalformedFileError(path, f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def byte_of(pos: int) -> int:
        return bom + (pos if text.isascii() else len(text[:pos].encode("utf-8")))

    def after(doc_end: int) -> None:
        """Raise `_TrailingData` when anything but blank space follows the document ending at ``doc_end``."""
        rest = _WS.match(text, doc_end).end()
        if rest < len(text):
            raise _TrailingData(path, byte_of(doc_end), byte_of(rest), line_of(rest))

    i = _WS.match(text, 0).end()
    if text.startswith("{", i):
        try:
            doc, doc_end = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            fail(e)
        except RecursionError:
            raise MalformedFileError(path, "JSON nested deeper than it can be read") from None
        if "traceEvents" not in doc:
            raise MissingColumnError(path, "a JSON object without 'traceEvents'", line=1, field="traceEvents")
        if not isinstance(doc["traceEvents"], list):
            raise MalformedFileError(path, "'traceEvents' is not a list", field="traceEvents")
        for n, e in enumerate(doc["traceEvents"]):
            if not isinstance(e, dict):
                raise MalformedFileError(path, f"event {n} is not an object", field="traceEvents")
        after(doc_end)
        return doc
    if not text.startswith("[", i):
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            fail(e)
        except RecursionError:
            raise MalformedFileError(path, "JSON nested deeper than it can be read") from None
        raise MalformedFileError(path, "not a Chrome trace: expected a JSON array or an object with "
                                       "'traceEvents'", line=line_of(i))
    events = []
    n = 0
    i = _WS.match(text, i + 1).end()
    if not text.startswith("]", i):
        while True:
            start = i
            try:
                obj, i = dec.raw_decode(text, i)
            except json.JSONDecodeError as e:
                fail(e)
            if not isinstance(obj, dict):
                raise MalformedFileError(path, f"event {n} is not an object", line=line_of(start))
            if keep:
                events.append(obj)
            n += 1
            i = _WS.match(text, i).end()
            if i >= len(text):
                raise TruncatedFileError(path, "JSON ends early (the event array is not closed)", line=line_of(i))
            if text[i] == "]":
                break
            if text[i] != ",":
                raise MalformedFileError(path, f"invalid JSON: expected ',' or ']' after event {n - 1}",
                                         line=line_of(i))
            i = _WS.match(text, i + 1).end()
    after(i + 1)
    return events


def _line_of_event(path: Path, index: int) -> int | None:
    """Line (1-based) where event number ``index`` (0-based, file order) starts; exact but slow."""
    try:
        text = decode(path, read_bytes(path, "trace"))
    except ProfilerDataError:
        return None
    dec = json.JSONDecoder()
    i = _WS.match(text, 0).end()
    if text.startswith("{", i):
        k = text.find("[", text.find('"traceEvents"'))
        if k < 0:
            return None
        i = k
    i = _WS.match(text, i + 1).end()
    n = 0
    try:
        while n < index:
            _, i = dec.raw_decode(text, i)
            i = _WS.match(text, i).end() + 1  # the comma
            i = _WS.match(text, i).end()
            n += 1
    except (json.JSONDecodeError, IndexError):
        return None
    return text.count("\n", 0, i) + 1


# -- building the frames ------------------------------------------------------------------------------
def _ts_ns(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """decimal128(38,3) us -> (int64 ns, valid mask) without Python objects: a decimal128 value is a
    128-bit integer scaled by 10**3, stored as (low, high) 64-bit words; a timestamp that fits in int64
    ns (|ts| < ~292 years) has a high word that is the sign extension of the low one. Others are invalid."""
    parts, valid = [], []
    for chunk in col.chunks:
        words = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[2 * chunk.offset: 2 * (chunk.offset + len(chunk))]
        low, high = words[0::2], words[1::2]
        parts.append(low.copy())
        valid.append(chunk.is_valid().to_numpy(zero_copy_only=False) & (high == (low >> 63)))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    return np.concatenate(parts), np.concatenate(valid)


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


def _meta_events(table: pa.Table, is_meta: np.ndarray) -> list[dict]:
    """The M events (few: one per process/thread name or sort key) as dicts with ``m_name`` /
    ``m_sort`` taken from their args."""
    out = []
    for m in _rows(table, ["name", "pid", "tid", "args"], is_meta).to_pylist():
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

    # Events that cannot be placed: no/non-numeric ts, or an X without a numeric dur. Skipped, reported.
    timed = (kind >= KIND_X) & (kind <= KIND_C)
    no_ph = kind == KIND_NO_PH
    bad = (timed & ~ts_ok) | (is_x & np.isnan(dur)) | no_ph
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        field = "ph" if no_ph[first] else ("ts" if not ts_ok[first] else "dur")
        line = _line_of_event(paths[0], first) if not multi else None
        warn_partial(MalformedFileError(paths[0], f"{int(bad.sum())} event(s) without a numeric {field!r} or "
                                                  "'ph' skipped (the first is shown)", line=line, field=field))
        for m in (is_x, is_b, is_flow, is_counter, timed):
            m &= ~bad

    # Durations no profiler writes (negative, not finite, or over MAX_DURATION_US) would stretch the
    # timeline and every sum over it: those events are skipped, reported.
    absurd = is_x & ~np.isnan(dur) & ((dur < 0) | ~np.isfinite(dur) | (dur > MAX_DURATION_US))
    if absurd.any():
        first = int(np.flatnonzero(absurd)[0])
        line = _line_of_event(paths[0], first) if not multi else None
        warn_partial(MalformedFileError(paths[0], f"{int(absurd.sum())} event(s) with an impossible 'dur' "
                                                  f"({float(dur[first])!r} us: negative, not finite or over "
                                                  f"{MAX_DURATION_US:.0e} us) skipped (the first is shown)",
                                        line=line, field="dur"))
        for m in (is_x, timed):
            m &= ~absurd

    origin_ns = int(ts_ns[timed].min()) if timed.any() else 0
    rel_ns = ts_ns - origin_ns
    rel_us = rel_ns.astype(np.float64) / 1000.0
    del ts_ns

    # Track = (pid, tid) of every slice and flow end, via dictionary codes (no per-row Python work).
    on_track = np.flatnonzero(is_x | is_b | is_flow)
    pid_code, pid_names = _unify(chunks, "pid")
    tid_code, tid_names = _unify(chunks, "tid")
    n_tid = max(len(tid_names), 1)
    pairs, pair_inv = _pair_codes(pid_code[on_track], len(pid_names), tid_code[on_track], n_tid)
    del pid_code, tid_code
    aux_rows = aux.column("row").to_numpy()
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
                                    _counters(aux, is_counter[aux_rows], rel_us)))
        timeline = _timeline(chunks, kind, is_x, is_b, row_track, rel_ns, rel_us, dur, multi, paths)
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
    out = pd.DataFrame(rows, columns=["_pair", "pid", "tid", "process", "thread", "process_sort",
                                      "thread_sort", "_pnum", "_tnum"])
    out = out.sort_values(["process_sort", "_pnum", "pid", "thread_sort", "_tnum", "tid"], kind="stable")
    out = out.drop(columns=["_pnum", "_tnum"]).reset_index(drop=True)
    out.insert(0, "track", np.arange(len(out), dtype=np.int32))
    for c in ("process_sort", "thread_sort"):
        out[c] = out[c].astype(np.int64)
    for c in ("pid", "tid", "process", "thread"):
        out[c] = out[c].astype(str)
    return out


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


def _categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """A Categorical of ``values[codes]`` with only the values that occur as categories."""
    used = np.bincount(codes, minlength=len(values)) > 0
    new_code = np.cumsum(used, dtype=np.int32) - 1
    return pd.Categorical.from_codes(new_code[codes] if len(codes) else codes.astype(np.int32),
                                     categories=pd.Index(values[used], dtype=str))


def _op_types(names: pd.Categorical, type_codes: np.ndarray, type_values: np.ndarray) -> pd.Categorical:
    """op_type per row: ``args.type`` where present and specific, else derived from the name. The
    derivation runs once per distinct name, and the choice once per distinct (name, type) code pair."""
    types = _categorical(type_codes, type_values)
    derived = np.array([op_type_of(n) for n in names.categories.tolist()], dtype=object)
    type_vals = np.asarray(types.categories, dtype=object)
    usable = np.array([bool(t) and t not in GENERIC_ARG_TYPES for t in type_vals], dtype=bool)
    cats = pd.Index(pd.unique(np.concatenate([derived, type_vals[usable]])), dtype=str)
    derived_code = cats.get_indexer(derived)
    type_code = np.where(usable, cats.get_indexer(type_vals), -1)
    tc = type_code[types.codes] if len(type_vals) else np.full(len(names), -1)
    codes = np.where(tc >= 0, tc, derived_code[names.codes] if len(derived) else -1)
    return pd.Categorical.from_codes(codes.astype(np.int32), categories=cats)


def _timeline(chunks, kind, is_x, is_b, row_track, rel_ns, rel_us, dur, multi, paths) -> pd.DataFrame:
    name_code, name_values = _unify(chunks, "name")
    cat_code, cat_values = _unify(chunks, "cat")
    type_code, type_values = _unify(chunks, "arg_type")
    fast = None if (multi or is_b.any()) else _presorted(chunks, row_track, rel_ns)
    if fast is not None:
        rows, args, from_pair = fast[0], fast[1], np.zeros(len(fast[0]), dtype=bool)
        track, start, length = row_track[rows], rel_us[rows], dur[rows]
    else:
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


def _presorted(chunks, row_track, rel_ns):
    """(rows, args) of the X events in (track, start, file order) from the batches' own sorted spans,
    with no gather: each batch's spans are grouped by track, and when every track's events run forward
    in time from one batch to the next (a file written in time order), the timeline is the
    concatenation, track by track and batch by batch, of those groups. None when some track goes back
    in time across batches (then the caller sorts globally)."""
    seg_track, seg_chunk, seg_lo, seg_hi, seg_first, seg_last = [], [], [], [], [], []
    spans, span_args = [], []
    for i, c in enumerate(chunks):
        g = c.spans + c.offset
        placed = row_track[g] >= 0  # events skipped since the batch was read (an impossible dur) have none
        if not placed.all():
            g = g[placed]
            spans.append(c.spans[placed])
            span_args.append(c.span_args.filter(pa.array(placed)))
        else:
            spans.append(c.spans)
            span_args.append(c.span_args)
        if not len(g):
            continue
        t = row_track[g]
        cut = np.flatnonzero(np.diff(t)) + 1
        lo = np.concatenate([[0], cut])
        hi = np.concatenate([cut, [len(g)]])
        seg_track.append(t[lo])
        seg_chunk.append(np.full(len(lo), i))
        seg_lo.append(lo)
        seg_hi.append(hi)
        seg_first.append(rel_ns[g[lo]])
        seg_last.append(rel_ns[g[hi - 1]])
    if not seg_track:
        return np.zeros(0, np.int64), pa.chunked_array([], pa.string())
    track, chunk, lo, hi, first, last = (np.concatenate(a) for a in
                                         (seg_track, seg_chunk, seg_lo, seg_hi, seg_first, seg_last))
    order = np.lexsort((chunk, track))
    track, chunk, lo, hi, first, last = (a[order] for a in (track, chunk, lo, hi, first, last))
    same = track[1:] == track[:-1]
    if (same & (last[:-1] > first[1:])).any() or (same & (chunk[1:] == chunk[:-1])).any():
        return None
    rows = np.concatenate([spans[c][a:b] + chunks[c].offset for c, a, b in zip(chunk, lo, hi)])
    args = pa.chunked_array([span_args[c].slice(a, b - a) for c, a, b in zip(chunk, lo, hi)],
                            type=pa.string())
    # one contiguous column: a column of many small chunks makes every later take concatenate it
    return rows, pa.chunked_array([args.combine_chunks()])


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
# s/t pairs of CANN step trace) at its last t step; ``seq`` is the file order.
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
    if fl is None or not len(fl):
        return _empty(FLOW_COLUMNS, {"start_track": np.int32, "end_track": np.int32, "start_us": np.float64,
                                     "end_us": np.float64})
    out = _query(_FLOW_SQL.format(s=KIND_S, f=KIND_F, t=KIND_T), fl=fl).to_pandas()
    return pd.DataFrame({"cat": out["cat"].astype(str), "id": out["id"].astype(str), "name": out["name"].astype(str),
                         "start_track": out["start_track"].astype(np.int32),
                         "start_us": out["start_us"].astype(np.float64),
                         "end_track": out["end_track"].astype(np.int32), "end_us": out["end_us"].astype(np.float64)})


_COUNTER_SQL = """
SELECT coalesce(c.pid, '') AS pid, coalesce(c.name, '') AS name, j.key AS series, c.start_us,
       TRY_CAST(j.value AS DOUBLE) AS value
FROM c, json_each(CAST(c.args AS JSON)) AS j
ORDER BY pid, name, series, c.start_us, c.row
"""


def _counters(aux, is_counter, rel_us) -> pd.DataFrame:
    """``aux``: the M and C events with their global ``row``; ``is_counter``: which of them are
    placeable C events."""
    rows = aux.column("row").to_numpy()[is_counter]
    if not len(rows):
        return _counter_frame(None)
    return _counter_frame(_rows(aux, ["row", "pid", "name", "args"], is_counter)
                          .append_column("start_us", pa.array(rel_us[rows])))


def _counter_frame(c: pa.Table | None) -> pd.DataFrame:
    """The counters frame from the placeable C events (``row`` = file order, ``pid``, ``name``, ``args``,
    ``start_us``), or an empty one. One row per (sample, series): each key of a C event's args is a series
    (Chrome trace format)."""
    if c is None or not len(c):
        return _empty(COUNTER_COLUMNS, {"start_us": np.float64, "value": np.float64})
    out = _query(_COUNTER_SQL, c=c).to_pandas()
    for col in ("pid", "name", "series"):
        out[col] = out[col].astype(str)
    out["start_us"] = out["start_us"].astype(np.float64)
    out["value"] = out["value"].astype(np.float64)
    return out.reset_index(drop=True)


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
                     flows=_flow_frame(None), counters=_counter_frame(None))


# -- progress -----------------------------------------------------------------------------------------
class _Progress:
    """A tqdm.auto bar over input bytes that appears only when a load takes longer than a second.
    duckdb parses a file in one call, so a ticker thread keeps the elapsed time moving meanwhile."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.bar = None
        self._stop = threading.Event()

    def __enter__(self):
        # below this size the load ends before the bar's 1 s delay: skip even importing tqdm
        if self.enabled and self.total >= PROGRESS_MIN_BYTES:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=self.total, desc=self.desc, unit="B", unit_scale=True, delay=1.0, leave=False)
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self):
        start = time.monotonic()
        while not self._stop.wait(0.5):
            if time.monotonic() - start > 1.0:
                self.bar.refresh()

    def advance(self, n: float) -> None:
        if self.bar is not None:
            self.bar.update(int(n))

    def __exit__(self, *exc):
        self._stop.set()
        if self.bar is not None:
            self._thread.join()
            self.bar.close()
        return False


__all__ = ["mark_scope_layers", "trace_sources",
           "trace_data", "load_trace", "parse_events", "exact_events", "op_type_of", "TraceData"]
