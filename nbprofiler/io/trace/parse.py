"""The streaming parse of Chrome-trace JSON: one file -> digested record batches (`Chunk`), without a
Python object per event.

The compiled reader (`nbprofiler.io.trace.scan`), where it is built, reads an event array into the Arrow
record batches of duckdb's statement below, with its values, for less CPU time (and gives the digest
``ts`` in exact ns and ``args.type`` as it passes); text it does not take is read by duckdb. duckdb's
``read_json`` with an explicit column list parses the file in C++ straight into Arrow record
batches (``ts`` is read as text, ``dur`` as a number or, on a retry, as text; ``tid``/``id`` strings or
ints are read as text), and the same statement turns ``ph`` into an int ``kind`` and ``ts`` into
DECIMAL(38,3), i.e. exact integer nanoseconds (epoch microseconds in float64 keep only ~0.25 us). The
reader uses one thread per file, so it runs in a background thread and this thread digests each batch
while the next one is parsed: ``args.type``, dictionary codes of pid/tid/name/cat, and (for
`nbprofiler.io.trace.memory`'s multi-file build) the batch's X events sorted by (pid, tid, ts) with their args
text gathered in that order. Everything is vectorised numpy/Arrow/duckdb work. An
object-form trace's event array is read like an array file when its byte range can be placed
(`nbprofiler.io.json_slice`). When duckdb rejects a file, the exact validator
(`nbprofiler.io.trace.exact`) finds the line of the error, so the user gets `TruncatedFileError` /
`MalformedFileError` with a line number; data after the end of the JSON document is ignored with a
warning. The frames are assembled from the batches by `nbprofiler.io.trace.memory` (several files merged) or
`nbprofiler.io.trace.disk` (one file, batch by batch, in memory or on disk).
"""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import EmptyFileError, MalformedFileError, ProfilerDataError
from .. import json_slice
from .._util import EXPANSION, check_size
from . import scan
from .exact import document_end, exact_check, warn_trailing

# Fields read from every event. MindSpore writes ts/dur as strings or numbers and tid/id as strings or
# ints (FORMATS 4.5, 3.14). ts is read as text and cast to a decimal by the digest (`_ts_decimal`): the
# JSON reader would turn a numeric ts into a double first and lose its sub-us digits. dur is read as DOUBLE
# directly (the reader casts numeric strings itself, which is cheaper than a text column plus a cast); a file
# where some dur is not a number fails that read and is re-read with dur as text and TRY_CAST (`_DUR_AS_TEXT`).
_COLUMNS = {"ph": "VARCHAR", "name": "VARCHAR", "cat": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR",
            "ts": "VARCHAR", "dur": "DOUBLE", "id": "VARCHAR", "args": "JSON"}
_DUR_AS_TEXT = {**_COLUMNS, "dur": "VARCHAR"}

# Event kinds (the `kind` column): ph as a small int, so masks are integer compares, not string ones.
KIND_NO_PH, KIND_M, KIND_X, KIND_B, KIND_E, KIND_S, KIND_F, KIND_T, KIND_C, KIND_OTHER = -1, 0, 1, 2, 3, 4, 5, 6, 7, 8


def parse_events(path: Path) -> pa.Table:
    """One Chrome-trace file -> Arrow table, one row per event in file order (what the frames are
    built from; flow ids are not included). Columns: ``kind`` (int8: `KIND_M`, `KIND_X`, ... from
    ``ph``; -1 where ``ph`` is missing), ``pid``, ``tid``, ``name`` (null for flow events), ``cat``,
    ``arg_type`` (``args.type`` of X/B events) as strings, ``ts_ns`` (int64 ns, exact; null where
    missing or not a number), ``dur`` (float64 us; null where missing or not a number). Raises
    `ProfilerDataError` subclasses."""
    chunks = parse_chunks(Path(path))
    if not chunks:
        return pa.table({"kind": pa.array([], pa.int8())})
    coded = {col: pa.chunked_array([c.codes[col] for c in chunks]).cast(pa.string()) for col in CODED}
    ts_ns = np.concatenate([c.ts_ns for c in chunks])
    ts_ok = np.concatenate([c.ts_ok for c in chunks])
    dur = np.concatenate([c.dur for c in chunks])
    return pa.table({"kind": np.concatenate([c.kind for c in chunks]), **{c: coded[c] for c in CODED},
                     "ts_ns": pa.array(ts_ns, mask=~ts_ok), "dur": pa.array(dur, mask=np.isnan(dur))})


# -- streaming parse ----------------------------------------------------------------------------------
# The JSON reader is one thread per file (a JSON array cannot be split), so the second core is free while
# it runs: the reader runs in a background thread and hands over record batches, and this thread
# digests each batch meanwhile (casts, dictionary codes, and the per-batch sort and gather of the
# timeline's args), so that little is left once the last batch arrives.

# The reader's statement: what is cheapest in the reader's own pipeline (not a second query per batch):
# ``ph`` -> kind; flow names (often one per flow) kept out of ``name`` so its dictionary stays small. The
# reader is the slower thread, so what costs it most is left to the digest: ts's cast from its text
# (`_ts_decimal`; in the statement, ~7 % of the reader's time at 10 GB), args.type (`_arg_types`) and, for a
# trace built on disk, the flows' hash (`nbprofiler.io.trace.flows.flow_hash`, ~6 %).
_READ_SQL = """
SELECT CAST(CASE ph WHEN 'M' THEN 0 WHEN 'X' THEN 1 WHEN 'B' THEN 2 WHEN 'E' THEN 3 WHEN 's' THEN 4
                    WHEN 'f' THEN 5 WHEN 't' THEN 6 WHEN 'C' THEN 7
                    ELSE (CASE WHEN ph IS NULL THEN -1 ELSE 8 END) END AS TINYINT) AS kind,
       CASE WHEN ph IN ('s', 'f', 't') THEN NULL ELSE name END AS name,
       CASE WHEN ph = 's' THEN name END AS flow_name,
       ts, {dur} AS dur,
       cat, pid, tid, id, args{extra}
FROM {source}
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
class Chunk:
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


CODED = ("pid", "tid", "name", "cat", "arg_type")


def digest_batch(batch: pa.RecordBatch, offset: int, spans: bool = True) -> Chunk:
    """One batch of the reader's statement (`_READ_SQL`) as a `Chunk`; with ``spans=False`` its
    ``spans`` and ``span_args`` are None (a caller that orders the events its own way)."""
    kind = batch.column("kind").to_numpy()
    scanned = batch.schema.get_field_index("ts_known") >= 0  # read by the compiled reader (`scan`)
    if scanned and pc.all(batch.column("ts_known")).as_py():
        ts_col = batch.column("ts_ns")
        ts_ok = ts_col.is_valid().to_numpy(zero_copy_only=False)
        ts_ns = pc.fill_null(ts_col, 0).to_numpy(zero_copy_only=False).copy()
    else:
        ts_ns, ts_ok = _ts_ns(_ts_decimal(batch.column("ts")))
    dur = pc.fill_null(batch.column("dur"), np.nan).to_numpy()
    codes = {c: _dict_chunk(batch.column(c)) for c in ("pid", "tid", "name", "cat")}
    codes["arg_type"] = _scanned_arg_types(kind, batch) if scanned else _arg_types(kind, batch.column("args"))
    span_rows = span_args = None
    if spans:
        placed = ((kind == KIND_X) & ~np.isnan(dur)) | (kind == KIND_B)
        span_rows = np.flatnonzero(placed & ts_ok)
        pid_i = codes["pid"].indices.to_numpy(zero_copy_only=False)
        tid_i = codes["tid"].indices.to_numpy(zero_copy_only=False)
        span_rows = span_rows[np.lexsort((ts_ns[span_rows], tid_i[span_rows], pid_i[span_rows]))]
        args = batch.column("args")
        span_args = args.take(pa.array(span_rows)) if len(span_rows) else pa.array([], pa.string())
    aux_mask = (kind == KIND_M) | (kind == KIND_C)
    aux = pa.table({"row": pa.array(np.flatnonzero(aux_mask) + offset),
                    **{c: _text(batch.column(c).filter(pa.array(aux_mask))) for c in ("name", "pid", "tid", "args")}})
    is_flow = pa.array((kind >= KIND_S) & (kind <= KIND_T))
    flow = pa.table({"row": pa.array(np.flatnonzero(is_flow) + offset),
                     **{c: _text(batch.column(c).filter(is_flow)) for c in ("cat", "id")},
                     "name": batch.column("flow_name").filter(is_flow)})
    # Everything kept is a copy: an Arrow array imported from duckdb keeps its whole batch alive (args
    # included), so keeping a view of one column would keep every batch of the file in memory.
    return Chunk(offset, batch.num_rows, kind.copy(), ts_ns, ts_ok, dur.copy(), codes, flow, aux, span_rows,
                  span_args)


# duckdb writes args back as compact JSON (no blanks), escapes decoded: where "type" is its first key and
# the value has no escapes, the value is read off the text; other args with a "type" key (a first one with
# another value, or a later one, which a comma precedes) go through json_extract.
_FIRST_TYPE = r'^\{"type":"(?P<type>[^"\\]*)"'


def storage(col):
    """``col`` with its extension type taken off: duckdb's JSON type arrives as an extension of string."""
    return col.storage if isinstance(col.type, pa.ExtensionType) else col


def _arg_types(kind: np.ndarray, args) -> pa.DictionaryArray:
    """``args.type`` of the X and B events (null for others, and where there is none), as a dictionary
    array whose values are in order of first appearance (as `_dict_chunk` of the text would order them).
    Only the args that can hold a type are looked at: those that start with it (read off the text) and
    those with a later "type" key (json_extract)."""
    args = storage(args)
    timed = (kind == KIND_X) | (kind == KIND_B)
    first = pc.fill_null(pc.starts_with(args, '{"type":'), False).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(timed & first)
    found = pc.struct_field(pc.extract_regex(args.take(pa.array(rows)), _FIRST_TYPE), 0).cast(pa.string())
    fast = pc.is_valid(found).to_numpy(zero_copy_only=False)
    rows, found = rows[fast], found.filter(pa.array(fast))
    rest = timed & (first | _holds(args, b',"type":'))
    rest[rows] = False
    if rest.any():
        rows = np.concatenate([rows, np.flatnonzero(rest)])
        found = pa.concat_arrays([found, _extracted_types(args.filter(pa.array(rest)))])
        order = np.argsort(rows, kind="stable")
        rows, found = rows[order], found.take(pa.array(order))
    types = pc.dictionary_encode(found)
    codes = np.zeros(len(kind), dtype=np.int32)
    valid = np.zeros(len(kind), dtype=bool)
    codes[rows] = pc.fill_null(types.indices, 0).to_numpy(zero_copy_only=False)
    valid[rows] = pc.is_valid(types.indices).to_numpy(zero_copy_only=False)
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=~valid), types.dictionary)


def _extracted_types(args: pa.Array) -> pa.Array:
    """``args.type`` of each of ``args`` (JSON text) as duckdb's json_extract_string gives it (string)."""
    return query("SELECT json_extract_string(a, '$.type') AS t FROM x",
                 x=pa.table({"a": args})).column("t").combine_chunks().cast(pa.string())


def _scanned_arg_types(kind: np.ndarray, batch: pa.RecordBatch) -> pa.DictionaryArray:
    """`_arg_types` of a batch the compiled reader read: its ``arg_type`` column, json_extract_string's answer
    where it says the type is something else than a string (``arg_type_known`` False)."""
    timed = (kind == KIND_X) | (kind == KIND_B)
    types = batch.column("arg_type")
    rest = timed & ~batch.column("arg_type_known").to_numpy(zero_copy_only=False)
    if rest.any():
        rows = np.flatnonzero(rest)
        extracted = _extracted_types(storage(batch.column("args")).take(pa.array(rows)))
        fill = np.full(len(kind), -1, np.int64)
        fill[rows] = np.arange(len(rows))
        index = np.where(rest, len(kind) + fill, np.arange(len(kind)))
        types = pa.concat_arrays([types, extracted]).take(pa.array(index))
    if not timed.all():
        types = pc.if_else(pa.array(timed), types, pa.scalar(None, pa.string()))
    return pc.dictionary_encode(types)


def _holds(texts: pa.Array, needle: bytes) -> np.ndarray:
    """Which of ``texts`` (a string array) contain ``needle``: one search of the batch's text buffer
    (bytes.find), ~3x faster than a search per string."""
    out = np.zeros(len(texts), dtype=bool)
    if not len(texts) or texts.null_count == len(texts):
        return out
    offsets = _offsets(texts)
    data = texts.buffers()[2]
    text = data[int(offsets[0]):int(offsets[-1])].to_pybytes() if data is not None else b""
    at, found = 0, []
    while (at := text.find(needle, at)) >= 0:
        found.append(at)
        at += 1
    if found:
        first = np.asarray(found, dtype=np.int64) + int(offsets[0])
        row = np.searchsorted(offsets, first, side="right") - 1
        inside = first + len(needle) <= offsets[row + 1]  # not across two values
        out[row[inside]] = True
    return out


# JSON syntax around an event's values: keys, quotes, separators and braces (MindSpore and torch_npu
# write about this many bytes per event besides the values themselves).
_EVENT_SYNTAX_BYTES = 70


def _text_sizes(batch: pa.RecordBatch) -> tuple[int, int]:
    """(about how many bytes of JSON ``batch`` was read from: its text values plus the syntax around them,
    or what the compiled reader says it read; bytes of its longest string value)."""
    total, longest = batch.num_rows * _EVENT_SYNTAX_BYTES, 0
    for col in map(storage, batch.columns):
        if pa.types.is_dictionary(col.type):
            col = col.dictionary
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            if len(col):  # read off the offsets (duckdb gives a null value none)
                offsets = _offsets(col)
                total += int(offsets[-1] - offsets[0])
                longest = max(longest, int(np.diff(offsets).max()))
        else:
            total += 8 * batch.num_rows
    metadata = batch.schema.metadata or {}
    return (int(metadata[b"nbytes"]) if b"nbytes" in metadata else total), longest


def _offsets(texts: pa.Array) -> np.ndarray:
    """The value offsets of a string array (n + 1 of them), as a view of its buffer."""
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    return np.frombuffer(texts.buffers()[1], dtype=width)[texts.offset:texts.offset + len(texts) + 1]


def _text(col):
    """``col`` as text: a column the compiled reader wrote as a dictionary, decoded."""
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


def _dict_chunk(col) -> pa.DictionaryArray:
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):  # the compiled reader's: the batch's values, first seen first
        return col
    return pc.dictionary_encode(col.cast(pa.string()) if col.type != pa.string() else col)


def _stream(path: Path, first: bytes, columns: dict, dur_sql: str, offset: int, max_event: int,
            span: tuple[int, int] | None = None, on_batch=None, checked_size: int | None = None,
            limit: int | None = None, stats: dict | None = None, make_digest=None,
            copy: json_slice.ArrayCopy | None = None, native: bool = False) -> list[Chunk]:
    """Read ``path`` in a background thread and digest its batches here as they arrive. ``max_event``:
    duckdb's maximum_object_size for the events of an array file; duckdb's read buffer grows to it, so
    a huge value costs that much memory (2 GB: ~1 GB more peak RSS on a 1 GB file). ``span``: the byte
    range of an event array (of an object-form file, `json_slice.array_span`, or the array a file starts
    with when other data follows it), read as an array file: from ``copy`` (a `json_slice.ArrayCopy` of
    the span) when it is given and complete, else through `json_slice.slice_url`. ``limit``: an
    object-form file read as one document is read up to this byte. ``stats`` (a dict) receives
    ``longest`` (bytes of the longest string value read) and, for a document read, ``docs`` (how many
    JSON documents the file holds; only the first one's events are read). ``make_digest``: returns the
    function that digests each batch (default `digest_batch`); called once per read, so a read that fails and
    is retried starts a fresh one, and a failed read calls its ``discard()`` where it has one (what it
    kept is not held through the retry). ``native``: the array in ``span`` is read by the compiled reader
    (`nbprofiler.io.trace.scan`), not by duckdb."""
    import queue
    digest = digest_batch if make_digest is None else make_digest()
    stats = {} if stats is None else stats
    stats["longest"] = 0
    copied = copy.path() if copy is not None and span else None
    url = None if copied or native else json_slice.slice_url(path, *span) if span else \
        json_slice.slice_url(path, 0, limit) if limit is not None else None
    as_document = not (first == b"[" or span)
    if not as_document:
        source = _read_json(url or copied or str(path), "array", columns, max_event)
    else:  # one object holding the event list, not placed by array_span: read as one JSON document
        # duckdb reads every JSON document of the file: only the first one's events are taken, and the
        # count of the others tells that data follows the document (the caller reports it)
        struct = "STRUCT(" + ", ".join(f"{k} {v}" for k, v in columns.items()) + ")[]"
        lit = _literal(url or copied or str(path))
        source = (f"(SELECT unnest(traceEvents, recursive := true), docs FROM (SELECT traceEvents, count(*) OVER () "
                  f"AS docs FROM read_json({lit}, format='unstructured', columns={{traceEvents: '{struct}'}}, "
                  f"maximum_object_size={_MAX_OBJECT}) QUALIFY row_number() OVER () = 1))")
    sql = _READ_SQL.format(source=source, dur=dur_sql,
                           extra=", docs" if as_document else "")
    size = path.stat().st_size if checked_size is None else checked_size
    rows = min(_BATCH_ROWS, max(_MIN_BATCH_ROWS, size // _BYTES_PER_EVENT // _BATCHES_PER_FILE))
    batches: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    done = object()
    reading: dict = {}  # the reader's connection, and whether it is to be interrupted

    def grown() -> bool:
        """Whether the file is now past the size the memory guard checked; then the read is interrupted
        (duckdb reads a file by path to its end, wherever that is by then)."""
        if checked_size is None or _size_now(path) <= checked_size:
            return False
        reading["interrupt"] = True
        return True

    if grown():
        raise _grew(path, checked_size)  # already larger: the memory guard checked another file

    def hand(item) -> bool:
        """Queue ``item`` for the digesting thread; False once it stopped taking them (it raised), so the
        reader never blocks on a full queue nobody empties."""
        while not stop.is_set():
            try:
                batches.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read():
        if native:
            try:
                for b in scan.batches(path, *span, rows, _reread):
                    if reading.get("interrupt") or not hand(b):
                        return
                hand(done)
            except BaseException as e:  # handed to the digesting thread, which raises it
                hand(e)
            return
        try:
            con = reading["con"] = _connection()
            if url:
                _register_slices(con)
            rel = con.sql(sql)
            reader = rel.to_arrow_reader(rows) if hasattr(rel, "to_arrow_reader") \
                else rel.fetch_record_batch(rows)
            for b in reader:
                if not hand(b):
                    return
            hand(done)
        except BaseException as e:  # handed to the digesting thread, which raises it
            _local.con = None
            hand(e)

    reader_thread = threading.Thread(target=read, name="nbprofiler-trace-reader", daemon=True)
    reader_thread.start()
    chunks = []
    try:
        while True:
            try:
                item = batches.get(timeout=_GROWTH_POLL_S)
            except queue.Empty:
                # blank space appended after the closing bracket makes no batch: growth is watched between them
                if grown():
                    raise _grew(path, checked_size) from None
                continue
            if item is done:
                if grown():
                    raise _grew(path, checked_size)  # read to an end the memory guard did not check
                break
            if isinstance(item, BaseException):
                raise item
            if item.num_rows:
                if as_document and "docs" not in stats:
                    stats["docs"] = int(item.column("docs")[0].as_py())
                nbytes, longest = _text_sizes(item)
                stats["longest"] = max(stats["longest"], longest)
                chunks.append(digest(item, offset))
                offset += item.num_rows
                if on_batch is not None:
                    on_batch(nbytes)
                if grown():
                    # the memory guard checked a smaller file: stop before reading what it did not allow
                    raise _grew(path, checked_size)
    except BaseException:
        if hasattr(digest, "discard"):
            digest.discard()  # what a failed read kept goes before the retry or the exact parse
        chunks.clear()
        raise
    finally:
        stop.set()
        while reading.get("interrupt") and reader_thread.is_alive():
            # an interrupt that comes before the query starts is lost: repeated until the reader ends
            if "con" in reading:
                reading["con"].interrupt()
            reader_thread.join(_GROWTH_POLL_S)
        reader_thread.join()
        if url:
            json_slice.release(url)
    return chunks


def _reread(text: bytes) -> pa.Table:
    """The reader's statement over newline-delimited events (those the compiled reader leaves to
    duckdb), from a temporary file: dur read as text and cast where it casts, as the retry of a file with
    a dur that is not a number does."""
    import tempfile
    with tempfile.NamedTemporaryFile(prefix="nbprofiler-reread-", suffix=".json") as f:
        f.write(text)
        f.flush()
        source = _read_json(f.name, "newline_delimited", _DUR_AS_TEXT, _MAX_OBJECT)
        return query(_READ_SQL.format(source=source, dur="TRY_CAST(dur AS DOUBLE)", extra=""))


def _literal(location: str) -> str:
    return "'" + location.replace("'", "''") + "'"


def _read_json(location: str, fmt: str, columns: dict, max_object: int) -> str:
    """duckdb's read_json of the events at ``location`` (a path or URL), ``columns`` read as their types."""
    cols = "{" + ", ".join(f"{k}: '{v}'" for k, v in columns.items()) + "}"
    return f"read_json({_literal(location)}, format='{fmt}', columns={cols}, maximum_object_size={max_object})"


# How often a read waiting for its next batch looks at the file's size (a stat costs ~2 us).
_GROWTH_POLL_S = 0.01


def _grew(path: Path, checked_size: int) -> ProfilerDataError:
    return ProfilerDataError(path, f"the file grew while it was read (from {checked_size:,} bytes; is the profiler "
                                   "still writing it?); load it once it is complete")


def parse_chunks(path: Path, offset: int = 0, on_batch=None, make_digest=None, family: str = "trace") -> list[Chunk]:
    """One Chrome-trace file -> its digested batches (file order). Raises `ProfilerDataError`s.
    ``on_batch(nbytes)``: called after each batch with an estimate of the JSON bytes it was read from.
    Data after the end of the JSON document is ignored with a warning naming its byte offset and line;
    the document's events load. ``make_digest``: see `_stream`; ``family``: the memory guard's row for
    what the digests keep (`EXPANSION`)."""
    path = Path(path)
    # Every read below reads at most the `checked` bytes the memory guard allowed: a file that grows while
    # it is read (a profiler still writing it, blank space appended after the closing bracket) is not read
    # further (the exact parse reads that many bytes, duckdb a copy or a slice of them, `_read_attempts`).
    # What those bytes lack (the end of the document) is then the file's growth, said as such.
    checked = check_size(path, family)
    try:
        return _parse_checked(path, checked, offset, on_batch, make_digest, family)
    except ProfilerDataError as e:
        if "grew while it was read" not in str(e) and _size_now(path) > checked:
            raise _grew(path, checked) from None
        raise


def _size_now(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _parse_checked(path: Path, checked: int, offset: int, on_batch, make_digest, family: str) -> list[Chunk]:
    """`parse_chunks` of a file whose first ``checked`` bytes the memory guard allowed."""
    first = _first_byte(path)
    if first not in (b"[", b"{"):
        exact_check(path, size=checked)  # raises with the line of the first bad byte
        raise MalformedFileError(path, "not a Chrome trace: expected a JSON array or an object with "
                                       "'traceEvents'", line=1)
    end = None  # the end of the JSON document, when other data follows it
    if not _ends_like(path, first, checked):
        # something other than the closing bracket ends the file: the exact parse says what, and where
        end = document_end(path, size=checked)
    stats: dict = {}
    while True:
        chunks, error = _read_attempts(path, first, offset, on_batch, checked, end, stats, make_digest)
        if chunks is not None:
            break
        if end is None:
            # raises the error that made every read fail, if not data after it
            end = document_end(path, size=checked)
        else:  # the document alone cannot be read either
            exact_check(path, upto=end, size=checked)
            end = None
        if end is None:
            raise MalformedFileError(path, f"not a readable Chrome trace: {str(error).splitlines()[0]}")
    if stats.get("docs", 1) > 1 and end is None:
        # read as one document: more documents follow the first one (only its events were taken)
        try:
            end = document_end(path, size=checked)
        except ProfilerDataError:  # too large for the exact parse, or an error only it sees
            warn_trailing(path, None)
    if first == b"{" and not chunks:
        exact_check(path, need_trace_events=True, upto=end, size=checked)
    if stats.get("longest", 0) > _BIG_VALUE:
        # a huge string costs several copies of itself in the frames built next
        check_size(path, family, extra_bytes=int(stats["longest"] * EXPANSION["trace_big_event"]))
    return chunks


def _read_attempts(path: Path, first: bytes, offset: int, on_batch, checked: int, end: int | None,
                   stats: dict, make_digest=None) -> tuple[list[Chunk] | None, Exception | None]:
    """The fast reads of ``path`` (up to byte ``end`` when given, else up to the ``checked`` bytes the
    memory guard allowed), in order, until one succeeds: (its chunks, None), or (None, the last read's
    error) when all of them fail.

    An array file that ends with its closing bracket is read by path, as it is: a copy of its checked bytes
    would bound that read too, but costs every load a kernel copy (~50 ms per 100 MB, and a slower Python
    slice past 2 GB); a file that grows while it is read is stopped soon after (`_stream` watches its size
    between batches and interrupts the read: 18-50 MB read while a 2 MB file grew by 1 GB), and the exact
    parse reads no further than the checked bytes. An object-form file's event array is read from a copy
    of its checked bytes.

    First of all, where it is built, the compiled reader (`nbprofiler.io.trace.scan`) reads the event array
    in place (an object-form file's where `json_slice.array_span` places it), with duckdb's values. Text
    it does not take (it is stricter than duckdb, which takes a trailing comma, for one) goes to the reads
    below, whose errors are the user's."""
    if scan.available():
        native = (0, checked if end is None else end) if first == b"[" else \
            json_slice.array_span(path, end=checked if end is None else end)
        if native is not None:
            try:
                return _stream(path, first, _COLUMNS, "dur", offset, _MAX_EVENT, native, on_batch, checked,
                               stats=stats, make_digest=make_digest, native=True), None
            except scan.ScanError:
                pass
    span = copy = None
    if end is not None and first == b"[":
        span = (0, end)  # the array, without what follows it
        copy = json_slice.ArrayCopy.start(path, *span, directory=_copy_directory(path))
    elif first == b"{":
        # An object-form trace's event array is read like an array file when its bytes can be placed.
        span, copy = json_slice.copied_span(path, end=checked if end is None else end,
                                            directory=_copy_directory(path))
    try:
        import duckdb  # while the span is copied (a first load spends ~80 ms on this import)
        # a reader error reaches here as duckdb's own, or through Arrow's stream interface as an Arrow error
        read_errors = (duckdb.Error, pa.ArrowException, OSError)
        return _read_span(path, first, offset, on_batch, checked, end, stats, make_digest, span, copy,
                          read_errors)
    finally:
        if copy is not None:
            copy.close()


def _copy_directory(path: Path) -> Path | None:
    """Where `json_slice.ArrayCopy` puts its copy of ``path``'s array: the cache root (on disk, where the
    cached frames go too; never in the profile's folder), else the system's temporary directory (None)."""
    from ..cache import root_for
    root = root_for([path])
    if root is None:
        return None
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root


def _read_span(path, first, offset, on_batch, checked, end, stats, make_digest, span, copy, read_errors):
    """`_read_attempts`' reads of ``span`` (copied to ``copy``, when given), then the slower ones."""
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
                           limit=end, stats=stats, make_digest=make_digest, copy=copy), None
        except read_errors as e:
            too_big, error = too_big or "maximum_object_size" in str(e), e
    return None, error


def _ends_like(path: Path, first: bytes, size: int) -> bool:
    """Whether the last non-blank byte of the file's first ``size`` bytes (its size when checked) is the
    bracket that closes a document opened by ``first``."""
    with open(path, "rb") as f:
        f.seek(max(0, size - 4096))
        tail = f.read(min(size, 4096)).rstrip(b" \t\r\n")
    if not tail and size > 4096:
        return True  # 4 KB of blank space at the end: let the reads decide
    return tail[-1:] == (b"]" if first == b"[" else b"}")


# -- duckdb, and helpers of the reads and digests -----------------------------------------------------
_local = threading.local()
_database = None  # one in-memory duckdb database per process, a cursor per thread
_database_lock = threading.Lock()
_slices_registered = False


def _connection():
    """This thread's cursor on the process's duckdb database (opening a database costs ~20 ms, a tenth of
    parsing 20 MB; a cursor ~20 us, and every load reads in a new thread): file order kept, nothing
    spilled to disk (duckdb's default spill directory is relative to the working directory, which may be a
    profiler directory), and no worker threads: a query runs on the thread that reads its result.

    duckdb parses a JSON file on one thread either way (two files read by two threads still run side by
    side). With workers, the memory they read with stayed resident after the read in about half the first
    opens of a 100 MB trace: 40 MB more when the parse ended, and a peak of 320-330 MB instead of
    285-295 MB once the frames were built on top of it. Read on the reading thread, it is returned when
    the read ends.

    A streamed result is buffered up to 1 MB, not duckdb's 10 MB: the reader then hands over record
    batches two at a time, where it otherwise held them back three at a time, so the digest of a 100 MB
    trace's first batch starts after ~0.10 s instead of ~0.125 s, and the last digest ends ~30 ms earlier
    (with workers, it had handed over each batch as soon as it was full, and interleaved runs were 1-2 %
    faster at 10 MB to 1 GB)."""
    global _database
    con = getattr(_local, "con", None)
    if con is None:
        with _database_lock:
            if _database is None:
                import duckdb
                _database = duckdb.connect(config={"preserve_insertion_order": True, "temp_directory": "",
                                                    "threads": 1})
        con = _database.cursor()
        con.execute("SET enable_progress_bar = false")
        con.execute("SET streaming_buffer_size = '1MB'")
        _local.con = con
    return con


def _register_slices(con) -> None:
    """Let the process's duckdb database read `json_slice` URLs (once: it is the database's file system)."""
    global _slices_registered
    with _database_lock:
        if not _slices_registered:
            json_slice.register(con)
            _slices_registered = True


def query(sql: str, **tables) -> pa.Table:
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


def _ts_decimal(ts: pa.Array) -> pa.Array | pa.ChunkedArray:
    """ts as the reader reads it (text; a JSON number's own digits) -> decimal128(38,3) us, null where it is
    not a number, as duckdb casts it. Arrow's cast where it takes every value of the batch (it gives what
    duckdb gives: plain and exponent forms; 0.6x duckdb's time); else duckdb's, which also takes blanks around
    the number and rounds a fourth decimal, and gives null for what is not one."""
    try:
        return pc.cast(ts, pa.decimal128(38, 3))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return query("SELECT TRY_CAST(ts AS DECIMAL(38, 3)) AS ts FROM b", b=pa.table({"ts": ts})).column("ts")


def _ts_ns(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """decimal128(38,3) us -> (int64 ns, valid mask) without Python objects: a decimal128 value is a
    128-bit integer scaled by 10**3, stored as (low, high) 64-bit words; a timestamp that fits in int64
    ns (|ts| < ~292 years) has a high word that is the sign extension of the low one. Others are invalid."""
    parts, valid = [], []
    for chunk in col.chunks if isinstance(col, pa.ChunkedArray) else [col]:
        words = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[2 * chunk.offset: 2 * (chunk.offset + len(chunk))]
        low, high = words[0::2], words[1::2]
        parts.append(low.copy())
        valid.append(chunk.is_valid().to_numpy(zero_copy_only=False) & (high == (low >> 63)))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    return np.concatenate(parts), np.concatenate(valid)
