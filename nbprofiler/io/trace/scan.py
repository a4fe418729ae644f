"""The compiled reader of Chrome-trace event arrays (``_scan.c``): the record batches of the duckdb
reader's statement (`parse._READ_SQL`: kind, name, flow_name, ts, dur, cat, pid, tid, id, args), with the
same values, at about half of duckdb's CPU time, the file's reading included (its JSON reader parses each
event into a document and then transforms it; this one writes each field into its column as it passes).

The C scanner reads the text block by block and writes what it is sure duckdb would write. An event
holding anything else (a number duckdb would write in another form, an escape inside ``args``, a field
that holds an object, an escaped key) is marked, and re-read by duckdb itself (`_reread`), so that every
value is what the duckdb reader gives. Text that is not valid JSON raises `ScanError`: the caller then
reads the file with duckdb, whose errors (and the exact validator's) are the user's.

The same library gathers a track sorted by the trace's build from its runs' text (`gather_text`).

The library is built by the package's build hook (``hatch_build.py``); where it is missing (no C
compiler at install), `available` is False and traces are read by duckdb (and sorted tracks gathered by
Arrow's take).
"""
from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..._clib import load

# The text columns, in the C file's order (C_NAME ... C_ARG_TYPE), and the batch's columns in the statement's.
TEXT = ("name", "flow_name", "cat", "pid", "tid", "ts", "id", "args", "arg_type")
COLUMNS = ("kind", "name", "flow_name", "ts", "dur", "cat", "pid", "tid", "id", "args")
# What the scanner gives besides the statement's columns, for the digest (`parse.digest_batch`):
# ``arg_type`` (args.type where it is a string, else null) with ``arg_type_known`` (False where
# json_extract_string must say: a "type" that is not a string, or an event duckdb re-read), and ``ts_ns``
# (exact integer ns) with ``ts_known`` (False where the cast must say: an exponent, a fourth decimal...).
EXTRA = ("arg_type", "arg_type_known", "ts_ns", "ts_known")
_REREAD, _TYPE_UNKNOWN, _TS_UNKNOWN = 1, 2, 4
# The text columns written as dictionaries (the batch's distinct values, first seen first, and an index per
# row), in the C file's order (dict_cols): what the digest codes anyway.
DICTIONARY = ("name", "cat", "pid", "tid")
_ST_MORE, _ST_DONE, _ST_ERROR, _ST_TOO_SMALL = 0, 1, 2, 3
# The layout of nbp_scan's and nbp_gather_text's arguments this module passes (nbp_scan_abi): a library
# built from another version of _scan.c is not used.
ABI = 2
# Bytes of JSON read per block (an event larger than a block is read with as many more as it needs).
BLOCK_BYTES = 8 << 20
# An event larger than this is left to duckdb's reads, which charge the memory guard for it first (as
# duckdb's first read leaves it to its retry: `parse._MAX_EVENT`).
MAX_EVENT_BYTES = 16 << 20


class ScanError(ValueError):
    """The text is not an event array this reader takes (invalid JSON, a duplicate key...)."""


def _load(directory: Path | None = None):
    """The library built beside this module (or in ``directory``), None where there is none of this module's
    `ABI`."""
    return load(directory or Path(__file__).resolve().parent, "_scan", ABI)


def _scan_function(dll):
    """nbp_scan of ``dll``, or None."""
    if dll is None:
        return None
    fn = dll.nbp_scan
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                   ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int64,
                   ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                   ctypes.POINTER(ctypes.c_int)]
    return fn


def _gather_function(dll):
    """nbp_gather_text of ``dll``, or None."""
    if dll is None:
        return None
    fn = dll.nbp_gather_text
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return fn


_dll = _load()   # once: both functions come from it
_scan, _gather = _scan_function(_dll), _gather_function(_dll)


def gather_text(column: pa.ChunkedArray, take: np.ndarray) -> pa.Array | None:
    """Rows ``take`` of ``column`` (large strings, in chunks) as one array, each byte copied once. Arrow's
    take joins a text column's chunks into one array first: sorting a Kineto CPU thread's 191 MB of args
    held that copy beside the sorted one. None without the compiled library, or for another type."""
    if _gather is None or column.type != pa.large_string():
        return None
    take = np.ascontiguousarray(take, dtype=np.int64)
    n = len(take)
    chunks = column.chunks
    starts = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(c) for c in chunks], out=starts[1:])
    which = np.ascontiguousarray(np.searchsorted(starts, take, side="right") - 1, dtype=np.int32)
    rows = take - starts[which]
    offsets, data = [], []
    for c in chunks:
        buffers = c.buffers()
        if len(c) and buffers[1] is not None:
            offsets.append(np.frombuffer(buffers[1], np.int64)[c.offset:c.offset + len(c) + 1])
            data.append(buffers[2].address if buffers[2] is not None and buffers[2].size else 0)
        else:   # no row of an empty chunk is taken
            offsets.append(np.zeros(1, np.int64))
            data.append(0)
    valid = None
    if column.null_count:
        valid = np.ascontiguousarray(np.concatenate(
            [c.is_valid().to_numpy(zero_copy_only=False) for c in chunks])[take], dtype=np.uint8)
    offset_ptrs = (ctypes.c_void_p * max(len(chunks), 1))(*[o.ctypes.data for o in offsets])
    data_ptrs = (ctypes.c_void_p * max(len(chunks), 1))(*data)
    # from Arrow's pool, as its take's would be (jemalloc while a trace is built: pages it freed are reused)
    out_offsets = pa.allocate_buffer(8 * (n + 1))
    args = [n, which.ctypes.data, rows.ctypes.data, ctypes.addressof(offset_ptrs), ctypes.addressof(data_ptrs),
            None if valid is None else valid.ctypes.data, out_offsets.address]
    total = _gather(*args, None)
    out_data = pa.allocate_buffer(total)
    _gather(*args, out_data.address)
    nulls = 0 if valid is None else n - int(np.count_nonzero(valid))
    validity = None if not nulls else pa.py_buffer(np.packbits(valid.view(bool), bitorder="little"))
    return pa.Array.from_buffers(pa.large_string(), n, [validity, out_offsets, out_data], null_count=nulls)


def available() -> bool:
    """Whether the compiled reader is there (`NBPROFILER_NO_SCAN=1` turns it off: every trace is read by
    duckdb)."""
    return _scan is not None and not os.environ.get("NBPROFILER_NO_SCAN")


def batches(path, start: int, end: int, rows: int, reread):
    """Record batches of the event array in bytes ``start``..``end`` of ``path`` (``[`` to ``]``, blanks
    around it allowed), at most ``rows`` rows each. ``reread(text)``: the statement's batch of the
    newline-delimited events in ``text`` (bytes), for the events the scanner marked."""
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        buf = bytearray(2 * BLOCK_BYTES)
        held = 0            # bytes of buf holding text
        base = start        # the file offset of buf[0]
        pos = ctypes.c_int64(0)
        state = ctypes.c_int(0)
        status = ctypes.c_int(0)
        full = BLOCK_BYTES  # bytes a batch of ``rows`` events took (the last one), read ahead of each call
        need = 0            # at least this many bytes past pos (an event longer than what is held)
        pool = _Pool(rows)
        while True:
            if left and held - pos.value < max(full, need):
                # what is left of the text to the front of the buffer (grown for a long event), then more
                rest = held - pos.value
                if rest + max(need, BLOCK_BYTES) > len(buf):
                    grown = bytearray(rest + max(need, BLOCK_BYTES))
                    grown[:rest] = buf[pos.value:held]
                    buf = grown
                else:
                    buf[:rest] = buf[pos.value:held]
                base += pos.value
                pos.value = 0
                got = f.readinto(memoryview(buf)[rest:rest + min(left, len(buf) - rest)])
                if not got:
                    raise ScanError(f"{path} ended at byte {end - left:,} while it was read")
                held, left = rest + got, left - got
            text = (ctypes.c_char * len(buf)).from_buffer(buf)
            out = pool.take(held - pos.value)
            before = pos.value
            n = _scan(ctypes.addressof(text), held, ctypes.byref(pos), ctypes.byref(state), int(not left), rows,
                      out.ptrs, out.caps, base, ctypes.byref(status))
            del text   # the buffer may be moved or grown again
            if n:
                longest = int((out.end[:n] - out.start[:n]).max())
                if longest > MAX_EVENT_BYTES:
                    raise ScanError(f"{path}: an event of {longest:,} bytes is over {MAX_EVENT_BYTES:,} bytes")
                yield out.batch(n, buf, base, reread)
            if status.value == _ST_DONE:
                return
            if status.value == _ST_ERROR:
                raise ScanError(f"{path}: not a JSON event array this reader takes, at byte {base + pos.value:,}")
            if status.value == _ST_TOO_SMALL:  # cannot happen: a column's text is never longer than the event
                raise ScanError(f"{path}: an event at byte {base + pos.value:,} did not fit its buffers")
            if not left and n < rows:
                raise ScanError(f"{path}: the event array does not end")
            if n == rows:
                full = max(pos.value - before, 1)
            if not n and held - pos.value > MAX_EVENT_BYTES:
                raise ScanError(f"{path}: an event at byte {base + pos.value:,} is over {MAX_EVENT_BYTES:,} bytes")
            need = 0 if n else 2 * (held - pos.value) + BLOCK_BYTES


class _Pool:
    """The scanner's buffers (`_Rows`), reused from one batch to the next once nothing holds them: fresh
    ones each batch cost their pages again (on a 1 GB trace ~130k page faults, ~0.25 s of system time)."""

    # At most this many sets are kept: the batches in the reader's queue, the one being digested and the
    # one being scanned, with room for batches the digest holds a little longer.
    KEEP = 8

    def __init__(self, rows: int):
        self.rows = rows
        self.sets: list[_Rows] = []

    def take(self, text_bytes: int) -> "_Rows":
        """A set of buffers for ``rows`` rows read from ``text_bytes`` bytes of JSON."""
        for i, kept in enumerate(self.sets):
            if kept.free():
                if kept.cap >= text_bytes:
                    kept.reset()
                    return kept
                del self.sets[i]   # too small for this text: a larger one is made
                break
        fresh = _Rows(self.rows, text_bytes)
        self.sets.append(fresh)
        if len(self.sets) > self.KEEP:
            del self.sets[0]   # its memory goes once its batches do
        return fresh


class _Rows:
    """The buffers of one call of the scanner: ``rows`` rows, and for each text column as many bytes as
    the JSON text they are read from (a column's text is never longer: args are written compactly, and
    a number only loses trailing zeros). A batch made of them shares their memory (`batch`): they are
    `free` again once nothing holds any of its arrays."""

    def __init__(self, rows: int, text_bytes: int):
        self.kind = np.empty(rows, np.int8)
        self.dur = np.empty(rows, np.float64)
        self.dur_valid = np.empty(rows, np.uint8)
        self.flag = np.empty(rows, np.uint8)
        self.start = np.empty(rows, np.int64)
        self.end = np.empty(rows, np.int64)
        self.ts_ns = np.empty(rows, np.int64)
        self.ts_valid = np.empty(rows, np.uint8)
        self.cap = max(text_bytes, 1)
        # The text in anonymous maps of its own: their pages go back to the system with the set (an
        # allocator may keep a freed buffer's pages resident), and they are not asked for transparent huge
        # pages (numpy's arrays this large are: 2 MB for each column's first byte). A batch's text columns
        # are made from memoryviews of them, whose reference counts say whether an array still holds them
        # (Arrow holds the view).
        memory = [mmap.mmap(-1, self.cap) for _ in TEXT]
        self.text = [(np.empty(rows + 1, np.int32), np.empty(rows, np.uint8), memoryview(m)) for m in memory]
        arrays = [self.kind, self.dur, self.dur_valid, self.flag, self.start, self.end, self.ts_ns, self.ts_valid,
                  *(a for col in self.text for a in col)]
        slots = 1 << max(4, (2 * rows - 1).bit_length())   # a power of 2, at least twice the rows
        self.dicts = {name: (np.empty(rows, np.int32), np.zeros(slots, np.uint32), np.zeros(1, np.int64))
                      for name in DICTIONARY}
        arrays += [a for name in DICTIONARY for a in self.dicts[name]]
        self.ptrs = (ctypes.c_void_p * len(arrays))(*(pa.py_buffer(a).address if isinstance(a, memoryview)
                                                      else a.ctypes.data for a in arrays))
        self.caps = (ctypes.c_int64 * (len(TEXT) + 1))(*(self.cap for _ in TEXT), slots)
        self._arrays = arrays
        self._unheld = self._references()

    def _references(self) -> list[int]:
        return [sys.getrefcount(a) for a in self._arrays]

    def free(self) -> bool:
        """Whether no array made by `batch` holds any of these buffers."""
        return self._references() == self._unheld

    def reset(self) -> None:
        """Empty dictionaries, for the next call."""
        for _, slots, size in self.dicts.values():
            slots.fill(0)
            size[0] = 0

    def batch(self, n: int, buf: bytearray, base: int, reread) -> pa.RecordBatch:
        cols = {"kind": pa.array(self.kind[:n]),
                "dur": pa.array(self.dur[:n], mask=self.dur_valid[:n] == 0)}
        for name, (offsets, valid, view) in zip(TEXT, self.text):
            data = pa.py_buffer(view)
            if name in DICTIONARY:
                indices, _, size = self.dicts[name]
                k = int(size[0])
                values = pa.StringArray.from_buffers(k, pa.py_buffer(offsets[:k + 1]), data.slice(0, int(offsets[k])))
                idx = indices[:n]
                cols[name] = pa.DictionaryArray.from_arrays(pa.array(idx, mask=idx < 0), values)
                continue
            ok = valid[:n].astype(bool)
            every = bool(ok.all())
            cols[name] = pa.StringArray.from_buffers(
                n, pa.py_buffer(offsets[:n + 1]), data.slice(0, int(offsets[n])),
                null_bitmap=None if every else pa.py_buffer(np.packbits(ok, bitorder="little")),
                null_count=0 if every else -1)
        flag = self.flag[:n]
        reread_rows = np.flatnonzero(flag & _REREAD)
        cols["arg_type_known"] = pa.array((flag & (_REREAD | _TYPE_UNKNOWN)) == 0)
        ts_known = (flag & (_REREAD | _TS_UNKNOWN)) == 0
        cols["ts_ns"] = pa.array(self.ts_ns[:n], mask=self.ts_valid[:n] == 0)
        cols["ts_known"] = pa.array(ts_known)
        # the bytes of JSON read (for the progress bar)
        batch = pa.RecordBatch.from_pydict({c: cols[c] for c in (*COLUMNS, *EXTRA)},
                                           metadata={"nbytes": str(int(self.end[n - 1] - self.start[0]))})
        if len(reread_rows):
            batch = _patched(batch, reread_rows, buf, self.start[reread_rows] - base, self.end[reread_rows] - base,
                             reread)
        return batch


def _patched(batch: pa.RecordBatch, rows: np.ndarray, buf: bytearray, starts, ends, reread) -> pa.RecordBatch:
    """``batch`` with ``rows`` re-read by duckdb from their text (``buf[starts[i]:ends[i]]``)."""
    # one event per line: the blanks inside an event may be line breaks (a string holds none)
    text = b"\n".join(buf[s:e].replace(b"\n", b" ").replace(b"\r", b" ") for s, e in zip(starts, ends))
    fixed = reread(text)
    if fixed.num_rows != len(rows):
        raise ScanError(f"the re-read of {len(rows)} events gave {fixed.num_rows} rows")
    take = np.arange(batch.num_rows)
    take[rows] = batch.num_rows + np.arange(len(rows))
    index = pa.array(take)
    cols = []
    for c in COLUMNS:
        col = batch.column(c)
        if c in DICTIONARY:   # back to text: the digest codes the patched column itself
            col = col.cast(pa.string())
        cols.append(pa.concat_arrays([col, fixed.column(c).combine_chunks().cast(col.type)]).take(index))
    return pa.RecordBatch.from_arrays([*cols, *(batch.column(c) for c in EXTRA)], names=[*COLUMNS, *EXTRA],
                                      metadata=batch.schema.metadata)


__all__ = ["available", "batches", "gather_text", "ScanError", "BLOCK_BYTES"]
