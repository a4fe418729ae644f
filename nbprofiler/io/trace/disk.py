"""The build of one trace file, batch by batch: in memory (`build_in_memory`, what
`nbprofiler.io.trace.load_trace` uses for one file), or on disk for a trace larger than memory (`load`,
`build`), the timeline's frame then memory-mapped from its files.

1. Each record batch of the streaming parse (`nbprofiler.io.trace.parse`) is digested, then reduced to
   its placeable X events, coded against running dictionaries (pid, tid, cat, args.type; the names against
   the batch's own, unified with the others' by Arrow, `_BatchNames`), sorted by (track, ts, file order)
   and kept (in memory, or spilled to two Arrow IPC files: the args text, and the other columns). What
   else is kept is small: the dictionaries, the M/C/flow/B/E events, and per batch one (track, first ts,
   last ts) segment per track. The reader parses the next batch meanwhile, so most of this work is
   hidden behind it. The flow events are keyed by integers (a code of their category, and their id
   where the ids are integers), only the start events keep their text: in memory (`_KeptFlows`), or on
   disk spilled to files by a hash of their flow (`nbprofiler.io.trace.flows.SpilledFlows`), each paired
   alone once every batch is read.
2. The timeline is assembled track by track in display order: a track whose segments run forward in
   time from batch to batch (a file written in time order) is the concatenation of its segments;
   otherwise (or with B/E pairs) that track alone is sorted. ``args`` is the kept runs' own text where
   a track is their concatenation (in memory their arrays, on disk the spilled args file, which the store
   keeps: the text is written once); a sorted track's args are a copy (and in memory, so are the runs left
   of a batch whose text went mostly to sorted tracks, so that no batch's text is held for a few runs).
   In memory, the flows are paired by a second thread afterwards, which the load does not wait for
   (reading them does).
3. On disk, the columns land in a store directory (numeric columns as ``.npy``, ``args`` as the slices of
   two Arrow IPC files an index lists, the small frames as Feather), the scope layers marked once into it
   (``is_scope``, and the op types, as `naming.mark_scope_layers` marks a frame): in the user cache dir
   (`nbprofiler.io.cache`, so a second open maps it again in well under a second), else a temporary dir
   removed at exit. The timeline frame's columns are zero-copy views of the mapped files: memory is spent
   on the pages a query touches, and ``args`` is read from disk only for the rows that are looked at (its
   text leaves the page cache as it is written, `nbprofiler.io._util.ColdFile`, and opening the store
   reads a page or two of each of its batches). A trace goes there when its in-memory build would not fit
   (the memory guard's ``trace`` row, `nbprofiler.io._util.EXPANSION`), or always with
   ``NBPROFILER_TRACE_ON_DISK=1``. The maps are registered with `nbprofiler._memory`, whose
   `release_pages` lets an analysis's pass over every event drop their pages without importing io.

On disk, peak memory is the spill writer's batch plus the largest out-of-order track, whatever the file
size (``benchmarks/bench_big_trace.py``). Merged multi-file sources (per-iteration CANN exports) are built
by `nbprofiler.io.trace.memory`: each of their files is small.
"""
from __future__ import annotations

import atexit
import dataclasses
import itertools
import json
import mmap
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..._memory import advise, keep_maps, release_heap
from ...errors import EmptyFileError, FileTooLargeError, MalformedFileError
from .. import _util, cache
from .counters import counter_events, counter_frame, counter_samples
from .exact import line_of_event
from .flows import (SpilledFlows, flow_ends, flow_frame, flow_frame_of_pairs, flow_hash, flow_ids, flow_key,
                    flow_pairs)
from .frames import (TraceData, bad_field, distinct_categorical, event_kinds, pair_begin_end, skipped_events,
                     warn_impossible_dur, warn_unplaced)
from .naming import meta_events, name_tracks, op_type_maps, op_types_of, scope_layer_codes
from .parse import (CODED, KIND_B, KIND_C, KIND_F, KIND_M, KIND_S, KIND_T, KIND_X, digest_batch, parse_chunks,
                    storage)
from .progress import Progress
from .scan import gather_text

# Bump when the store's layout changes, so stale stores are not mapped.
STORE_VERSION = 4
ENV_FORCE = "NBPROFILER_TRACE_ON_DISK"  # "1": every single-file trace loads this way (tests, benchmarks)
# The timeline's columns but args, each a .npy file; category columns hold their codes in the integer type
# pandas keeps for that many categories, so the frame maps them without a copy.
_COLUMNS = ("track", "name", "op_type", "ph", "cat", "start_us", "dur_us")
_CATEGORICAL = ("name", "op_type", "ph", "cat")
_OUT_ROWS = 1 << 20  # rows per batch of the sorted tracks' args; rows between releases of the spill's pages
# The store's args: the spilled runs' file (the X events' text, batch by batch, as the sink wrote it), the
# sorted tracks' file, and the index of the slices of theirs that make the column, in row order: one row
# (file, batch, first row, end row) per slice, file 0 or 1 of `_ARGS_FILES`.
_ARGS_FILES = ("timeline.args-runs.arrow", "timeline.args-sorted.arrow")
_ARGS_INDEX = "timeline.args-index.npy"
_ARGS_SCHEMA = pa.schema([("args", pa.large_string())])
# The timeline's ``is_scope`` column, marked once by the build (`_mark_scope_layers`).
_SCOPE_FILE = "timeline.is_scope.npy"


def _codes_dtype(n_categories: int) -> np.dtype:
    return np.dtype(np.int8 if n_categories < 128 else np.int16 if n_categories < 32768 else np.int32)


def wanted(paths: list[Path]) -> bool:
    """Whether ``paths`` should load on disk: one file, and either forced (``NBPROFILER_TRACE_ON_DISK=1``)
    or too large for the in-memory build (`EXPANSION["trace"]` x its size over the memory guard's share)."""
    if len(paths) != 1:
        return False
    if os.environ.get(ENV_FORCE, "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        size = paths[0].stat().st_size
    except OSError:
        return False
    return size * _util.EXPANSION["trace"] > _util.available_memory_bytes() * _util.MEMORY_FRACTION


def load(path: Path, legacy: bool, progress: bool = True) -> TraceData:
    """The trace's frames from its store, built first if there is none."""
    key = cache.key_for("trace-disk", [path])
    entry = cache.entry(key, [path])
    if entry is not None:
        data = _open(entry)
        if data is not None:
            return data
    _util.check_size(path, "trace_disk", extra_bytes=_util.TRACE_DISK_BASE_BYTES)
    dest = entry if entry is not None else _temp_store()
    _check_disk(path, dest)
    build(path, dest, legacy=legacy, progress=progress)
    data = _open(dest)
    if data is None:  # the store just written does not read back: a disk or filesystem problem
        raise MalformedFileError(path, f"the on-disk frames written to {dest} could not be read back")
    return data


def _temp_store() -> Path:
    root = Path(tempfile.mkdtemp(prefix="nbprofiler-trace-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root / "store"


def _check_disk(path: Path, dest: Path) -> None:
    """The store and its spill take up to about the file's size on disk (args text, written once, plus ~70
    bytes per event while the spill exists)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    need = path.stat().st_size
    free = shutil.disk_usage(dest.parent).free
    if need > free:
        raise FileTooLargeError(path, f"{need / 1e9:.1f} GB does not fit in memory and its on-disk frames "
                                      f"would need ~{need / 1e9:.1f} GB in {dest.parent}, "
                                      f"{free / 1e9:.1f} GB free; refused before loading")


# -- building a store -------------------------------------------------------------------------------
class _Dictionary:
    """What both kinds of growing dictionary share: the values in global code order (``values``: Arrow
    arrays taken from the batches' dictionaries, so a timeline column's categories are built without a
    Python string per value) and `final`. A global code is 1 + a value's place in order of first
    appearance; 0 stands for null."""

    def __init__(self):
        self.values: list[pa.Array] = []

    def _size(self) -> int:
        raise NotImplementedError

    def _empty_code(self) -> int | None:
        """The global code of the literal "", if it occurs."""
        raise NotImplementedError

    def final(self) -> tuple[np.ndarray, pa.Array]:
        """(global code -> position in the final values, the final values: a large_string array), ordered as
        Arrow's dictionary unification orders them for the in-memory build (first appearance, null as the
        literal "" where one occurs, else last)."""
        k = self._size()
        pos = np.arange(-1, k, dtype=np.int64)
        literal_empty = self._empty_code()
        if literal_empty is not None:
            pos[0] = literal_empty - 1
            return pos, pa.concat_arrays(self.values)
        pos[0] = k
        return pos, pa.concat_arrays([*self.values, pa.array([""], pa.large_string())])


class _Codes(_Dictionary):
    """A dictionary that grows batch by batch, each value looked up as it comes (`of`: a batch's own
    dictionary codes -> global codes). For the columns whose values are few (pid, tid, cat, args.type)."""

    def __init__(self):
        super().__init__()
        # A Python dict: matching a batch's dictionary against an Arrow array of every value seen would
        # hash that whole array again for each batch.
        self.index: dict[str, int] = {}

    def of(self, arr: pa.DictionaryArray) -> np.ndarray:
        values = arr.dictionary.to_numpy(zero_copy_only=False)
        index = self.index
        table = np.empty(len(values) + 1, dtype=np.int32)
        table[:-1] = np.fromiter(map(index.get, values, itertools.repeat(0)), np.int32, len(values))
        table[-1] = 0  # null
        new = np.flatnonzero(table[:-1] == 0)  # a dictionary holds each value once
        if len(new):
            codes = np.arange(len(index) + 1, len(index) + 1 + len(new), dtype=np.int32)
            table[new] = codes
            index.update(zip(values[new].tolist(), codes.tolist()))
            self.values.append(arr.dictionary.take(pa.array(new)).cast(pa.large_string()))
        return np.take(table, pc.fill_null(arr.indices, len(values)).to_numpy(zero_copy_only=False))

    def _size(self) -> int:
        return len(self.index)

    def _empty_code(self) -> int | None:
        return self.index.get("")


class _BatchNames(_Dictionary):
    """The names' dictionary: the global codes `_Codes` gives, but each batch coded against its own
    dictionary while it is read (`local`: 1 + the place in the batch's dictionary, 0 for null). Arrow unifies
    the batches' dictionaries, `_FOLD` at a time (`unify_dictionaries`), and gives each batch its map to
    the global codes (`global_of`): the values are hashed in C++, where `_Codes` makes a Python string of
    every value of every batch's dictionary and looks it up (a 1 GB trace's batches hold 1.1M names, 69k of
    them distinct). ``derive``: a function of the values first seen (a string array) giving one string per
    value, computed once per distinct value as each fold finds them (op types of names: derived while the
    reader thread parses, not after the last batch); its distinct results are numbered as they come."""

    def __init__(self, derive):
        super().__init__()
        self.derive = derive
        self.derived: dict[str, int] = {}  # derive's distinct results, first seen first -> their number
        self.derived_of: list[np.ndarray] = []  # per value, in code order: the number of its derived result
        self.unified: pa.Array | None = None  # the dictionary so far (string), in global code order
        self.pending: list[pa.Array] = []  # dictionaries of the batches read since the last fold
        self.global_of: list[np.ndarray] = []  # per batch folded: local code -> global code
        self.sizes: list[int] = []  # per batch: its dictionary's size
        self.counts: list[tuple[int, np.ndarray]] = []  # (batch, X events per local code) not added up yet
        self.used_counts = np.zeros(1, dtype=np.int64)  # X events per global code, of the batches added up

    def local(self, arr: pa.DictionaryArray) -> np.ndarray:
        """This batch's codes (int32) against its own dictionary; the batch is number ``batches - 1``."""
        # a copy: the batch's own (the compiled reader's buffers) is then free for the next batch
        self.pending.append(pa.concat_arrays([arr.dictionary]))
        self.sizes.append(len(arr.dictionary))
        codes = pc.fill_null(arr.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32) + 1
        if len(self.pending) >= _FOLD:
            self.fold()
        return codes

    @property
    def batches(self) -> int:
        return len(self.sizes)

    def use(self, codes: np.ndarray) -> None:
        """Count the X events of the last batch by their local code."""
        batch = self.batches - 1
        self.counts.append((batch, np.bincount(codes, minlength=self.sizes[batch] + 1)))

    def fold(self) -> None:
        """Unify the pending batches' dictionaries with the dictionary so far, and add up the counts of the
        batches unified."""
        if self.pending:
            self._unify()
        used = np.zeros(self._size() + 1, dtype=np.int64)
        used[:len(self.used_counts)] = self.used_counts
        for batch, counts in self.counts:
            used[self.global_of[batch]] += counts   # a batch's global codes are distinct (its null's 0 too)
        self.used_counts, self.counts = used, []

    def _unify(self) -> None:
        dicts = ([self.unified] if self.unified is not None else []) + self.pending
        whole = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array(np.arange(len(d), dtype=np.int32)), d)
                                  for d in dicts]).unify_dictionaries()
        for chunk in whole.chunks[len(dicts) - len(self.pending):]:
            to_global = np.zeros(len(chunk) + 1, dtype=np.int32)
            to_global[1:] = chunk.indices.to_numpy(zero_copy_only=False) + 1
            self.global_of.append(to_global)
        unified = whole.chunk(0).dictionary if len(whole.chunks) else pa.array([], pa.string())
        fresh = unified.slice(self._size())
        if len(fresh):
            self.values.append(fresh.cast(pa.large_string()))
            self.derived_of.append(self._numbered(self.derive(fresh)))
        self.unified, self.pending = unified, []

    def _numbered(self, results: pa.Array) -> np.ndarray:
        """The number of each of ``derive``'s ``results``, new results numbered in order of first appearance."""
        distinct = pc.dictionary_encode(results)  # its values in order of first appearance
        derived = self.derived
        numbers = np.array([derived.setdefault(d, len(derived)) for d in distinct.dictionary.to_pylist()],
                           dtype=np.int64)
        return numbers[distinct.indices.to_numpy(zero_copy_only=False)]

    def used(self) -> np.ndarray:
        """The X events per global code."""
        self.fold()
        return self.used_counts

    def _size(self) -> int:
        return len(self.unified) if self.unified is not None else 0

    def _empty_code(self) -> int | None:
        at = pc.index(self.unified, "").as_py() if self.unified is not None else -1
        return at + 1 if at >= 0 else None

    def final_derived(self) -> tuple[np.ndarray, list]:
        """(per `final` value, the number of its ``derive`` result; the distinct results, first seen first)."""
        numbers, results = list(self.derived_of), list(self.derived)
        if self._empty_code() is None:
            empty = self.derive(pa.array([""]))[0].as_py()
            number = self.derived.get(empty)
            if number is None:
                number = len(results)
                results.append(empty)
            numbers.append(np.array([number], dtype=np.int64))
        return (np.concatenate(numbers) if numbers else np.zeros(0, np.int64)), results


# Batches whose name dictionaries are unified at once: a fold hashes the dictionary so far again, and the
# batches' own dictionaries wait for it (~1 MB each at ~28k names).
_FOLD = 16


class _Sink:
    """Digests batches like `digest_batch` and keeps only what the store needs (see the module doc). The
    names are coded per batch (`_BatchNames`): the runs and the B/E events keep the batch's own codes,
    which the assembly maps to the global ones (``name_batch``: a run's batch of names)."""

    def __init__(self, spill: Path | None, trace_bytes: int = 0):
        self.spill_path = spill  # None: the runs and the flow events are kept in memory
        self.counters: list[pa.Table] = []  # the C events' samples, per batch
        self.kept: list[pa.RecordBatch] = []
        self.flows = _KeptFlows()  # in memory
        self.flow_cat = _Codes()  # the flow events' categories (with the ids, their key)
        self.writer = self.args_writer = self.args_file = None
        self.args_path = spill.with_name(spill.stem + "-args.arrow") if spill is not None else None
        self.codes = {c: _Codes() for c in CODED if c != "name"}
        self.codes["name"] = self.names = _BatchNames(op_types_of)
        self.name_batch: list[int] = []  # per run (spilled batch): its batch of names
        self.pairs: dict[int, int] = {}  # pid code << 32 | tid code -> pair id
        self.pair_pid: list[int] = []
        self.pair_tid: list[int] = []
        self.seg: list[np.ndarray] = []  # per batch: rows (pair, batch, lo, hi, first_ns, last_ns)
        self.batches = 0
        self.spans = 0
        self.origin_ns: int | None = None
        self.bad = [0, None, None]     # count, first global row, field
        self.absurd = [0, None, None]  # count, first global row, its dur
        self.be: list[pa.Table] = []
        self.spilled_flows = SpilledFlows(spill.with_name(spill.stem + "-flows"), trace_bytes) \
            if spill is not None else None
        self.meta: list[pa.Table] = []  # the M events (track names and sort keys)
        self.used = {c: np.zeros(0, np.int64) for c in ("name", "cat", "arg_type")}

    def __call__(self, batch: pa.RecordBatch, offset: int):
        c = digest_batch(batch, offset, spans=False)
        kind, ts_ns, ts_ok, dur = c.kind, c.ts_ns, c.ts_ok, c.dur
        is_x, is_b, is_flow, is_counter = event_kinds(kind)
        bad, absurd = skipped_events(kind, ts_ok, dur)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            if self.bad[1] is None:
                self.bad[1:] = [offset + first, bad_field(kind, ts_ok, first)]
            self.bad[0] += int(bad.sum())
        if absurd.any():
            first = int(np.flatnonzero(absurd)[0])
            if self.absurd[1] is None:
                self.absurd[1:] = [offset + first, float(dur[first])]
            self.absurd[0] += int(absurd.sum())
        timed = ((kind >= KIND_X) & (kind <= KIND_C)) & ~bad & ~absurd
        for m in (is_x, is_b, is_flow, is_counter):
            m &= ~bad
        is_x &= ~absurd
        if timed.any():
            low = int(ts_ns[timed].min())
            self.origin_ns = low if self.origin_ns is None else min(self.origin_ns, low)

        pid = self.codes["pid"].of(c.codes["pid"])
        tid = self.codes["tid"].of(c.codes["tid"])
        pair = np.full(len(kind), -1, dtype=np.int32)
        on_track = is_x | is_b | is_flow
        if on_track.any():
            uniq, inv = _distinct_pairs(pid[on_track], tid[on_track])
            ids = np.array([self._pair(int(k)) for k in uniq], dtype=np.int32)
            pair[on_track] = ids[inv]
        name = self.names.local(c.codes["name"])  # this batch's own codes (see `_BatchNames`)
        name_batch = self.names.batches - 1
        cat = self.codes["cat"].of(c.codes["cat"])
        typ = self.codes["arg_type"].of(c.codes["arg_type"])

        # X events: this batch's sorted run per track, to the spill. Their args are gathered once, in that
        # order (large_string: what the timeline frame holds).
        args = batch.column("args")
        args = storage(args).cast(pa.large_string())
        rows = np.flatnonzero(is_x)
        rows = rows[_by_track_and_time(pair[rows], ts_ns[rows])]
        if len(rows):
            # a run's track is in `seg`, and its rows' file order is (run's batch, ``row``): neither needs more
            self._write(pa.record_batch({
                "name": name[rows], "cat": cat[rows], "arg_type": typ[rows], "ts_ns": ts_ns[rows],
                "dur": dur[rows], "row": rows.astype(np.uint32), "args": args.take(pa.array(rows))}))
            p = pair[rows]
            cut = np.flatnonzero(np.diff(p)) + 1
            lo, hi = np.r_[0, cut], np.r_[cut, len(rows)]
            self.seg.append(np.stack([p[lo], np.full(len(lo), self.batches), lo, hi,
                                      ts_ns[rows[lo]], ts_ns[rows[hi - 1]]], axis=1).astype(np.int64))
            self.batches += 1
            self.name_batch.append(name_batch)
            self.spans += len(rows)
            for col, codes in (("cat", cat), ("arg_type", typ)):
                self._use(col, codes[rows])
            self.names.use(name[rows])

        # B/E events (rare): matched per track once every batch is read; a B's args come with its span
        if is_b.any():
            b_rows = np.flatnonzero(is_b)
            # an E event has no span (hence no args); nulls stand for them
            b_args = args.take(pa.array(b_rows, mask=kind[b_rows] != KIND_B))
            self.be.append(pa.table({"kind": kind[b_rows], "pair": pair[b_rows], "name": name[b_rows],
                                     "name_batch": np.full(len(b_rows), name_batch, dtype=np.int32),
                                     "cat": cat[b_rows], "arg_type": typ[b_rows], "ts_ns": ts_ns[b_rows],
                                     "args": b_args}))
        # flows and counters: their frames are built from these once the origin is known
        frows = c.flow.column("row").to_numpy() - offset
        ok = is_flow[frows]
        if ok.any():
            fl = c.flow.filter(pa.array(ok)).combine_chunks()  # one chunk per column (no copy when it has one)
            frows = frows[ok]
            # text: null reads "", as in `FLOW_SQL`
            text = {k: pc.fill_null(fl.column(k).chunk(0).cast(pa.string()), "") for k in ("cat", "id", "name")}
            fkind = kind[frows]
            coded = (fkind, pair[frows], ts_ns[frows], self.flow_cat.of(pc.dictionary_encode(text["cat"])),
                     flow_ids(text["id"]))
            if self.spilled_flows is None:
                self.flows.add(*coded, pa.table(text).filter(pa.array(fkind == KIND_S)))
            else:
                self.spilled_flows.add(*coded, text["name"], flow_hash(coded[3], coded[4]))
        if len(c.aux):
            arows = c.aux.column("row").to_numpy() - offset
            is_meta = kind[arows] == KIND_M
            if is_meta.any():
                self.meta.append(c.aux.filter(pa.array(is_meta)))
            counter = is_counter[arows]
            if counter.any():
                # split now, while the reader parses the next batch: only their order is left for the end
                self.counters.append(counter_samples(counter_events(c.aux, counter, ts_ns[arows])))
        return _Read(c.n)

    def _pair(self, key: int) -> int:
        pid = self.pairs.get(key)
        if pid is None:
            pid = self.pairs[key] = len(self.pair_pid)
            self.pair_pid.append(key >> 32)
            self.pair_tid.append(key & 0xFFFFFFFF)
        return pid

    def _use(self, col: str, codes: np.ndarray) -> None:
        counts = np.bincount(codes, minlength=len(self.used[col]))
        counts[:len(self.used[col])] += self.used[col]
        self.used[col] = counts

    def _write(self, batch: pa.RecordBatch) -> None:
        if self.spill_path is None:
            self.kept.append(batch)
            return
        # the args to a file of their own, which the store keeps as its args (`_ColumnFiles.add_run`); the
        # other columns are read once by the assembly, then removed
        numbers = batch.drop_columns(["args"])
        if self.writer is None:
            self.writer = pa.ipc.new_file(str(self.spill_path), numbers.schema)
            self.args_file = _util.ColdFile(self.args_path)
            self.args_writer = pa.ipc.new_file(self.args_file.file, _ARGS_SCHEMA)
        self.writer.write_batch(numbers)
        self.args_writer.write_batch(pa.record_batch([batch.column("args")], schema=_ARGS_SCHEMA))
        self.args_file.written()

    def discard(self) -> None:
        """Called when the read fails (a retry, or the exact parse that locates the error, comes next):
        what was kept goes now."""
        self._close_writers()
        if self.spill_path is not None:
            self.spill_path.unlink(missing_ok=True)
            self.args_path.unlink(missing_ok=True)
            self.spilled_flows.discard()
        self.kept, self.flows, self.meta, self.be, self.seg, self.counters = [], _KeptFlows(), [], [], [], []

    def close(self) -> None:
        """Called once every batch is read: the names' codes made global where they are counted (the X
        events) and for the B/E events (the runs' are mapped by the assembly)."""
        self.meta_table = pa.concat_tables(self.meta) if self.meta else None
        self._close_writers()
        self.used["name"] = self.names.used()
        self.be = [_global_names(t, self.names.global_of[t.column("name_batch")[0].as_py()])
                   .drop_columns(["name_batch"]) for t in self.be]

    def _close_writers(self) -> None:
        for writer in (self.writer, self.args_writer, self.args_file):
            if writer is not None:
                writer.close()
        self.writer = self.args_writer = self.args_file = None
        if self.spilled_flows is not None:
            self.spilled_flows.close()


# Up to this many (pid code, tid code) cells, a batch's distinct pairs are marked in a table of every cell
# (~4x faster than np.unique of the batch's keys; pids and tids are few).
_PAIR_CELLS = 1 << 16


def _distinct_pairs(pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ``pid << 32 | tid`` keys of the events, ascending; each event's index among them), as
    ``np.unique(key, return_inverse=True)`` gives them. ``pid``, ``tid``: global codes (small integers)."""
    width = int(tid.max()) + 1
    cells = (int(pid.max()) + 1) * width
    if cells > _PAIR_CELLS:
        return np.unique((pid.astype(np.int64) << 32) | tid, return_inverse=True)
    cell = pid.astype(np.int64) * width + tid
    present = np.zeros(cells, dtype=bool)
    present[cell] = True
    distinct = np.flatnonzero(present)
    rank = np.cumsum(present) - 1
    return ((distinct // width) << 32) | (distinct % width), rank[cell]


def _by_track_and_time(pair: np.ndarray, ts_ns: np.ndarray) -> np.ndarray:
    """The order of events (given in file order) by (track pair, ts, file order). A stable sort by pair
    alone (a radix sort for small ids) is enough where each pair's events already run forward in time,
    which is how profilers write them; else a full lexsort."""
    small = pair.astype(np.int16) if len(pair) and pair.max() < (1 << 15) else pair
    order = np.argsort(small, kind="stable")
    ts = ts_ns[order]
    p = pair[order]
    if np.any((ts[1:] < ts[:-1]) & (p[1:] == p[:-1])):
        order = np.lexsort((ts_ns, pair))  # lexsort is stable: file order breaks ties
    return order


class _Read:
    """What `nbprofiler.io.trace.parse._stream` keeps of a batch read on disk: its row count."""

    def __init__(self, n: int):
        self.n = n


def _parse(path: Path, spill_dir: Path | None, bar, share: float, family: str) -> _Sink:
    """Read ``path`` into a `_Sink` (spilling to ``spill_dir``, or kept in memory when None); the progress
    bar moves ``share`` of the file's size with the bytes parsed."""
    sinks: list[_Sink] = []

    def make_digest():  # a retried read starts a fresh sink (a failed read discards its own)
        sink = _Sink(spill_dir / f"spill-{len(sinks)}.arrow" if spill_dir is not None else None, size)
        sinks.append(sink)
        return sink

    size = path.stat().st_size
    moved = [0.0]

    def parsed(nbytes):
        step = min(nbytes * share, size * share - moved[0])
        moved[0] += step
        bar.advance(step)
    reads = parse_chunks(path, on_batch=parsed, make_digest=make_digest, family=family)
    bar.advance(size * share - moved[0])
    sinks[-1].close()
    if not reads:
        raise EmptyFileError(path, "the trace holds no events")
    return sinks[-1]


@_util.arrow_memory()
def build(path: Path, dest: Path, legacy: bool, progress: bool = True) -> None:
    """Parse ``path`` into a store at ``dest`` (written to a temp dir beside it, renamed into place)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    pairing: list = []   # the flows' pairing, once started
    try:
        size = path.stat().st_size
        with Progress(size, f"parsing {path.name} (on disk)", enabled=progress) as bar:
            sink = _parse(path, tmp, bar, 0.7, "trace_disk")

            def pair_flows(track_of_pair):
                # on a thread of its own while the timeline's columns are written: the assembly mostly waits
                # for its writes, and the pairing holds one file of flows at a time
                pairing.append(_PAIRING.submit(sink.spilled_flows.pair, track_of_pair, sink.origin_ns or 0,
                                               sink.flow_cat.values, tmp / "flows.arrow"))
            done = _assemble(sink, path, _ColumnFiles(tmp), legacy=legacy, gpu=path.name.startswith("gpu_"),
                             advance=lambda f: bar.advance(size * 0.3 * f), on_tracks=pair_flows)
            _mark_scope_layers(tmp, done)
        small = {"tracks": done.tracks, "counters": _counters(sink)}
        if not pairing[0].result():
            small["flows"] = flow_frame(None)
        release_heap()   # the pairing's temporaries (glibc keeps a freed array's pages under its mmap threshold)
        import pyarrow.feather as feather
        for name, df in small.items():
            feather.write_feather(df, tmp / f"{name}.arrow", compression="uncompressed")
        (tmp / "meta.json").write_text(json.dumps({
            "version": STORE_VERSION, "rows": int(done.n), "origin_ns": int(done.origin_ns), "source": str(path),
            "categories": {c: v.to_pylist() if isinstance(v, pa.Array) else v for c, v in done.categories.items()},
            "dtypes": {c: d.str for c, d in done.dtypes.items()}}))
        sink.spill_path.unlink(missing_ok=True)
        if sink.args_path.exists():   # the X events' args, as the store's index refers to them
            os.replace(sink.args_path, tmp / _ARGS_FILES[0])
        if dest.exists():
            shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    except BaseException:
        for job in pairing:   # done with its files before they are removed
            job.cancel() or wait([job])
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _mark_scope_layers(out: Path, done: _Assembled) -> None:
    """The store's ``is_scope`` column, and its ``op_type`` codes and categories with the scope layers
    marked (`naming.scope_layer_codes`, what `naming.mark_scope_layers` does to a frame): once here, where
    every open of the store would otherwise make that pass over every event (0.3-0.5 s of a 10 GB trace's
    re-open)."""
    track = np.load(out / "timeline.track.npy", mmap_mode="r")
    op_type = np.load(out / "timeline.op_type.npy", mmap_mode="r")
    scope, codes, cats = scope_layer_codes(track, op_type, pd.Index(done.categories["op_type"], dtype=str),
                                           done.tracks)
    del track, op_type
    np.save(out / _SCOPE_FILE, scope)
    if codes is not None:
        dtype = _codes_dtype(len(cats))
        part = out / "timeline.op_type.part"
        with open(part, "wb") as f:
            np.save(f, codes.astype(dtype))
        os.replace(part, out / "timeline.op_type.npy")
        done.categories["op_type"] = cats.tolist()
        done.dtypes["op_type"] = dtype


def build_in_memory(path: Path, legacy: bool, progress: bool = True) -> TraceData:
    """The same build with nothing written: the runs and the columns are kept in memory (how
    `nbprofiler.io.trace.load_trace` reads one file). The timeline's ``args`` is the runs' own text
    where the timeline keeps most of a batch's (`_ColumnArrays.compact_args`)."""
    size = path.stat().st_size
    # A second thread orders the counters' samples (split per batch as they were read) while this one
    # assembles the timeline and builds its frame; they are taken back here if that thread has not started
    # them by then.
    with Progress(size, f"parsing {path.name}", enabled=progress) as bar, \
            ThreadPoolExecutor(1, thread_name_prefix="nbprofiler-side") as side:
        sink = _parse(path, None, bar, 0.8, "trace")
        counters = side.submit(_counters, sink)
        # in memory the assembly is a small share of a load: the bar takes it in one step
        done = _assemble(sink, path, _ColumnArrays(), legacy=legacy, gpu=path.name.startswith("gpu_"),
                         advance=lambda f: None)
        columns = done.columns
        columns.compact_args()
        timeline = _timeline_frame(columns.arrays, pa.chunked_array(columns.args, type=pa.large_string()),
                                   done.categories, built=True)
        counters = _counters(sink) if counters.cancel() else counters.result()
        bar.advance(size * 0.2)
    release_heap()   # the read's and the assembly's temporaries, before the pairing's thread allocates its own
    # The flows are paired once the timeline is built, on a thread of their own, and the load returns
    # without waiting for them (`TraceData` waits where they are read): a timeline is looked at before
    # its arrows, and pairing them while the timeline was assembled took the GIL from it (the last ~15 ms
    # of a 100 MB trace's first open). It is given the flow events alone: the sink's batches, whose columns
    # the timeline no longer needs, go as this returns, not once the flows are paired.
    flows = _PAIRING.submit(_paired_flows, sink.flows, sink.origin_ns or 0, done.track_of_pair)
    return TraceData(origin_us=done.origin_ns / 1000, timeline=timeline, tracks=done.tracks,
                           flows=flows, counters=counters)


_PAIRING = ThreadPoolExecutor(1, thread_name_prefix="nbprofiler-flows")


@_util.arrow_memory()
def _paired_flows(kept: _KeptFlows, origin_ns: int, track_of_pair: np.ndarray) -> tuple[pd.DataFrame, object]:
    """The flows frame of the flow events an in-memory build kept, with its tracks, and its
    `cache.snapshot` (taken before anyone could edit the frame)."""
    flows = flow_frame_of_pairs(kept.pairs(origin_ns))
    for col in ("start_track", "end_track"):  # pair ids until the tracks were named
        flows[col] = track_of_pair[flows[col].to_numpy()].astype(np.int32)
    entry = cache.snapshot(flows)
    release_heap()
    return flows, entry


class _ColumnFiles:
    """The timeline's columns written to the store as they are assembled: numeric ones to ``.npy``
    files (header first, then appended); ``args`` as the index of its slices (`_ARGS_INDEX`): a run added
    whole is its slice of the spilled args file (not written again), a sorted track's args are written to
    the sorted tracks' file in batches of about `_OUT_ROWS`."""

    def __init__(self, out: Path):
        self.out = out

    def open(self, dtypes: dict, n: int) -> None:
        self.files = {c: open(self.out / f"timeline.{c}.npy", "wb") for c in _COLUMNS}
        for c, f in self.files.items():
            np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(dtypes[c]),
                                                     "fortran_order": False, "shape": (n,)})
        self.dtypes = dtypes
        self.args = pa.ipc.new_file(str(self.out / _ARGS_FILES[1]), _ARGS_SCHEMA)
        self.pending: list[pa.Array] = []
        self.pending_rows = 0
        self.sorted_batches = 0
        self.index: list[list[int]] = []

    def slot(self, k: int) -> dict:
        """Arrays for the next ``k`` rows of each numeric column, to be filled, then `add`-ed."""
        self.filled = {c: np.empty(k, dtype=self.dtypes[c]) for c in _COLUMNS}
        return self.filled

    def add_run(self, spill, batch: int, lo: int, hi: int) -> None:
        """Append the rows of the last `slot`, whose args are rows ``lo:hi`` of the spilled run ``batch``."""
        self._write_filled()
        self._index(0, batch, lo, hi)

    def add(self, args: pa.Array) -> None:
        """Append the rows of the last `slot` and their args (a sorted track's)."""
        self._write_filled()
        self._index(1, self.sorted_batches, self.pending_rows, self.pending_rows + len(args))
        self.pending.append(args)
        self.pending_rows += len(args)
        if self.pending_rows >= _OUT_ROWS:
            self._flush()

    def _write_filled(self) -> None:
        for c, f in self.files.items():
            f.write(self.filled[c].tobytes())

    def _index(self, file: int, batch: int, lo: int, hi: int) -> None:
        last = self.index[-1] if self.index else None
        if last is not None and last[0] == file and last[1] == batch and last[3] == lo:
            last[3] = hi   # the slice goes on where the last one ended
        else:
            self.index.append([file, batch, lo, hi])

    def _flush(self) -> None:
        if self.pending:
            self.args.write_batch(pa.record_batch([pa.concat_arrays(self.pending)], schema=_ARGS_SCHEMA))
            self.sorted_batches += 1
        self.pending, self.pending_rows = [], 0

    def close(self) -> None:
        try:
            self._flush()
            np.save(self.out / _ARGS_INDEX, np.array(self.index, dtype=np.int64).reshape(-1, 4))
        finally:
            self.args.close()
            for f in self.files.values():
                f.close()


class _ColumnArrays:
    """The timeline's columns kept in memory: numeric ones filled into arrays, ``args`` as the runs' own
    slices (no copy of the text, but where `compact_args` finds a batch's text mostly unused)."""

    def open(self, dtypes: dict, n: int) -> None:
        self.arrays = {c: np.empty(n, dtype=dtypes[c]) for c in _COLUMNS}
        self.args: list[pa.Array] = []
        self.at = 0

    def slot(self, k: int) -> dict:
        """The next ``k`` rows of each numeric column (views of the frame's arrays), to be filled."""
        return {c: arr[self.at:self.at + k] for c, arr in self.arrays.items()}

    def add_run(self, spill, batch: int, lo: int, hi: int) -> None:
        self.add(spill.args(batch, lo, hi))

    def add(self, args: pa.Array) -> None:
        self.args.append(args)
        self.at += len(args)

    def close(self) -> None:
        pass

    def compact_args(self) -> None:
        """Copy the runs' args out of a batch's text where the timeline keeps less than half of it. A batch's
        args hold every track's runs; a track sorted in memory takes a copy of its own, and the batch's
        text would stay whole for the runs left (a Kineto trace's threads are sorted: ~60 % of each
        batch's text, 0.17 GB of a 1 GB trace)."""
        slices: dict[int, list[int]] = {}   # a text buffer's address -> the chunks that are slices of it
        kept: dict[int, int] = {}            # -> the bytes of it those chunks hold
        size: dict[int, int] = {}
        for i, chunk in enumerate(self.args):
            _, offsets, data = chunk.buffers()   # large_string: int64 offsets
            if data is None or not data.size:
                continue
            at = np.frombuffer(offsets, np.int64)[[chunk.offset, chunk.offset + len(chunk)]]
            slices.setdefault(data.address, []).append(i)
            kept[data.address] = kept.get(data.address, 0) + int(at[1] - at[0])
            size[data.address] = data.size
        for address, chunks in slices.items():
            if 2 * kept[address] >= size[address]:
                continue
            copy = pa.concat_arrays([self.args[i] for i in chunks])
            at = 0
            for i in chunks:
                n = len(self.args[i])
                self.args[i] = copy.slice(at, n)
                at += n


class _Kept:
    """The runs of a build kept in memory, read like `_Spill`."""

    def __init__(self, batches: list[pa.RecordBatch]):
        self.batches = batches

    def rows(self, batch: int, lo: int, hi: int) -> pa.RecordBatch:
        """Rows ``lo:hi`` of run ``batch``, args included (as `_Spill.with_args`)."""
        return self.batches[batch].slice(lo, hi - lo)

    with_args = rows

    def args(self, batch: int, lo: int, hi: int) -> pa.Array:
        return self.batches[batch].column("args").slice(lo, hi - lo)

    def release(self) -> None:
        pass

    def close(self) -> None:
        # the timeline keeps only the args of these runs: their other columns can go now
        self.batches.clear()


@dataclasses.dataclass
class _Assembled:
    tracks: pd.DataFrame
    track_of_pair: np.ndarray
    origin_ns: int
    categories: dict  # column -> its categories: a list, or for "name" an Arrow string array
    dtypes: dict
    n: int
    columns: object


def _assemble(sink: _Sink, path: Path, columns, legacy: bool, gpu: bool, advance, on_tracks=None) -> _Assembled:
    """The timeline's columns, track by track in display order, into ``columns`` (`_ColumnFiles` or
    `_ColumnArrays`), and the small frames. ``on_tracks(track_of_pair)`` is called once the tracks are
    known, before the columns are written."""
    if sink.bad[0]:
        warn_unplaced(path, sink.bad[0], sink.bad[2], line_of_event(path, sink.bad[1]))
    if sink.absurd[0]:
        warn_impossible_dur(path, sink.absurd[0], sink.absurd[2],
                                  line_of_event(path, sink.absurd[1]))
    origin_ns = sink.origin_ns or 0
    final = {c: sink.codes[c].final() for c in CODED}
    # the values as Python strings where they are few; the names stay in Arrow (a 100 MB trace has ~55k)
    text = {c: final[c][1].to_numpy(zero_copy_only=False) for c in ("pid", "tid", "cat", "arg_type")}
    meta = meta_events(sink.meta_table) if sink.meta_table is not None else []
    # a track is a distinct (pid, tid) text: a null pid and a literal "" one are the same track
    pid_text = text["pid"][final["pid"][0][np.array(sink.pair_pid, np.int64)]]
    tid_text = text["tid"][final["tid"][0][np.array(sink.pair_tid, np.int64)]]
    seen: dict[tuple[str, str], int] = {}  # distinct pairs, first seen first (pairs are few: a dict, not pandas)
    canon = np.array([seen.setdefault(k, len(seen)) for k in zip(pid_text.astype(str).tolist(),
                                                                    tid_text.astype(str).tolist())], dtype=np.int64)
    first_of = np.unique(canon, return_index=True)[1]
    tracks = name_tracks(pid_text[first_of], tid_text[first_of], meta, legacy=legacy, gpu=gpu)
    track_of_unique = np.empty(len(tracks), dtype=np.int32)
    track_of_unique[tracks["_pair"].to_numpy()] = np.arange(len(tracks), dtype=np.int32)
    track_of_pair = track_of_unique[canon] if len(canon) else np.zeros(0, np.int32)
    tracks = tracks.drop(columns="_pair")
    if on_tracks is not None:
        on_tracks(track_of_pair)

    be = _pairs_of_be(sink, track_of_pair, origin_ns, path)
    has_b = be is not None and len(be) > 0
    for col in ("name", "cat", "arg_type") if has_b else ():
        sink._use(col, be.column(col).to_numpy())
    name_map, name_used = _used(sink.used["name"], final["name"][0], len(final["name"][1]))
    cat_map, cat_used = _used(sink.used["cat"], final["cat"][0], len(final["cat"][1]))
    type_map, type_used = _used(sink.used["arg_type"], final["arg_type"][0], len(final["arg_type"][1]))
    name_values, cat_values = final["name"][1].filter(pa.array(name_used)), text["cat"][cat_used]
    type_values = text["arg_type"][type_used]
    derived_of, derived = sink.codes["name"].final_derived()
    op_of_name, op_of_type, op_values = op_type_maps(derived_of[name_used], derived, type_values)

    segs = np.concatenate(sink.seg) if sink.seg else np.zeros((0, 6), np.int64)
    seg_track = track_of_pair[segs[:, 0]] if len(segs) else np.zeros(0, np.int32)
    order = np.lexsort((segs[:, 1], seg_track)) if len(segs) else np.zeros(0, np.int64)
    segs, seg_track = segs[order], seg_track[order]
    b_track = track_of_pair[be.column("pair").to_numpy()] if has_b else np.zeros(0, np.int32)
    n = sink.spans + (len(be) if has_b else 0)

    ph_values = [v for v, used in (("X", sink.spans > 0), ("B", has_b)) if used]
    ph_map = np.array([0, len(ph_values) - 1], dtype=np.int8)  # from_pair -> code among the used values
    categories = {"name": name_values, "op_type": op_values.tolist(), "ph": ph_values,
                  "cat": cat_values.tolist()}
    dtypes = {"track": np.dtype(np.int32), "start_us": np.dtype(np.float64), "dur_us": np.dtype(np.float64),
              **{c: _codes_dtype(len(categories[c])) for c in _CATEGORICAL}}
    columns.open(dtypes, n)
    # the maps in the columns' own code types; per args.type code the op type it gives, where specific
    name_map, cat_map = name_map.astype(dtypes["name"]), cat_map.astype(dtypes["cat"])
    op_of_name = op_of_name.astype(dtypes["op_type"])
    op_of_arg_type = op_of_type[type_map] if len(op_of_type) and (op_of_type >= 0).any() else None
    events = np.zeros(len(tracks), dtype=np.int64)
    spill = (_Spill(sink.spill_path, sink.args_path) if sink.spill_path is not None else _Kept(sink.kept)) \
        if sink.batches else None
    unreleased = 0   # rows read from the spill since its pages were last released
    try:
        bounds = np.flatnonzero(np.diff(seg_track)) + 1
        by_track = {int(seg_track[lo]): (lo, hi) for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(segs)])
                    if hi > lo}
        for t in range(len(tracks)):
            lo, hi = by_track.get(t, (0, 0))
            mine = segs[lo:hi]
            b_here = np.flatnonzero(b_track == t) if has_b else np.zeros(0, np.int64)
            # runs in time order: each starts at or after the one before ends, and strictly after where both
            # are of one batch (two pairs of one track: at an equal start, their file order interleaves)
            after = mine[1:, 4] - mine[:-1, 5]
            in_order = not len(b_here) and bool(np.all((after > 0) | ((after == 0) & (mine[1:, 1] != mine[:-1, 1]))))
            if in_order:  # the runs as they are, read lazily: a long track's pages are released as it goes
                runs = [(int(s[1]), int(s[2]), int(s[3])) for s in mine]
                parts = ((spill.rows(*run), run) for run in runs)
            else:  # this track alone, sorted in memory (its names made global first: its runs are of many batches)
                spans = [(int(s[1]), _global_names(spill.with_args(int(s[1]), int(s[2]), int(s[3])),
                                                   sink.names.global_of[sink.name_batch[int(s[1])]])) for s in mine]
                parts = [(_sorted_track(spans, be.take(pa.array(b_here)) if len(b_here) else None), None)]
            for part, run in parts:
                k = part.num_rows
                if not k:
                    continue
                # each column mapped straight into its place (no temporaries; mode="clip": unchecked)
                out = columns.slot(k)
                out["track"][:] = t
                names = name_map if run is None else name_map[sink.names.global_of[sink.name_batch[run[0]]]]
                np.take(names, part.column("name").to_numpy(), out=out["name"], mode="clip")
                np.take(op_of_name, out["name"], out=out["op_type"], mode="clip")
                if op_of_arg_type is not None:  # a specific args.type wins over the name's type
                    specific = op_of_arg_type[part.column("arg_type").to_numpy()]
                    np.copyto(out["op_type"], specific, where=specific >= 0, casting="unsafe")
                if "from_pair" in part.column_names:
                    np.take(ph_map, part.column("from_pair").to_numpy().astype(np.int8), out=out["ph"], mode="clip")
                else:
                    out["ph"][:] = 0
                np.take(cat_map, part.column("cat").to_numpy(), out=out["cat"], mode="clip")
                # exact ns offset first, then us (as the in-memory build of several files computes it)
                np.divide(part.column("ts_ns").to_numpy() - origin_ns, 1000.0, out=out["start_us"])
                out["dur_us"][:] = part.column("dur").to_numpy()
                events[t] += k
                if run is not None:
                    columns.add_run(spill, *run)
                else:
                    args = part.column("args")
                    if isinstance(args, pa.ChunkedArray):  # one chunk: that chunk itself (combine_chunks copies)
                        args = args.chunk(0) if args.num_chunks == 1 else args.combine_chunks()
                    columns.add(args)
                unreleased += k
                if unreleased >= _OUT_ROWS and spill is not None:
                    spill.release()
                    unreleased = 0
            if spill is not None:
                spill.release()
            advance(1 / max(len(tracks), 1))
    finally:
        columns.close()
        if spill is not None:
            spill.close()
    if events.sum() != n:  # every X event lands on its pair's track: a mismatch is a bug, not bad data
        raise AssertionError(f"on-disk timeline wrote {events.sum()} of {n} events")

    tracks["events"] = events
    return _Assembled(tracks=tracks, track_of_pair=track_of_pair,
                      origin_ns=origin_ns, categories=categories, dtypes=dtypes, n=n, columns=columns)


def _global_names(table, to_global: np.ndarray):
    """``table`` (runs' rows, or B/E events, of one batch) with its ``name`` codes made global."""
    at = table.schema.get_field_index("name")
    return table.set_column(at, "name", pa.array(to_global[table.column("name").to_numpy()]))


def _used(counts: np.ndarray, pos: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """(global code -> code among the used values, which of the final values are used), from the counts
    per global code and `_Dictionary.final`'s positions of ``n_values`` values."""
    used = np.zeros(n_values, dtype=bool)
    used[pos[:len(counts)][counts > 0]] = True
    return (np.cumsum(used, dtype=np.int32) - 1)[pos], used


def _pairs_of_be(sink: _Sink, track_of_pair: np.ndarray, origin_ns: int, path: Path) -> pa.Table | None:
    """The matched B/E pairs as rows like the spill's (the B event's fields, ``dur`` = E - B)."""
    if not sink.be:
        return None
    be = pa.concat_tables(sink.be)
    kind = be.column("kind").to_numpy()
    rel_us = (be.column("ts_ns").to_numpy() - origin_ns).astype(np.float64) / 1000.0
    track = track_of_pair[be.column("pair").to_numpy()]
    rows, _, dur = pair_begin_end(kind, np.arange(len(kind)), track, rel_us, [path])
    out = be.take(pa.array(rows)).drop_columns(["kind"])
    return out.append_column("dur", pa.array(dur, pa.float64())) \
        .append_column("matched", pa.array(np.arange(len(rows), dtype=np.int64)))


_TRACK_COLUMNS = ["name", "cat", "arg_type", "ts_ns", "dur", "args"]


def _sorted_track(spans: list[tuple[int, pa.RecordBatch]], b_pairs: pa.Table | None) -> pa.Table:
    """One track's X events (``spans``: runs' rows, each with its run's batch) and B/E pairs, sorted as the
    in-memory build sorts them: by start, X events before pairs at equal starts, X events in file order,
    pairs in the order they were matched."""
    parts = [pa.Table.from_batches([p.select(_TRACK_COLUMNS)]) for _, p in spans]
    flags = [np.zeros(p.num_rows, bool) for p in parts]
    # file order: the runs' batches are numbered in it, and ``row`` is the place in the batch
    keys = [(np.int64(b) << 32) | p.column("row").to_numpy().astype(np.int64) for b, p in spans]
    if b_pairs is not None and len(b_pairs):
        parts.append(b_pairs.select(_TRACK_COLUMNS))
        flags.append(np.ones(len(b_pairs), bool))
        keys.append(b_pairs.column("matched").to_numpy())
    table = pa.concat_tables(parts)   # the runs as chunks
    from_pair, key = np.concatenate(flags), np.concatenate(keys)
    order = np.lexsort((key, from_pair, table.column("ts_ns").to_numpy()))
    args = gather_text(table.column("args"), order)  # the text copied once, not joined first
    out = table.take(pa.array(order)) if args is None else \
        table.drop_columns(["args"]).take(pa.array(order)).append_column("args", args)
    return out.append_column("from_pair", pa.array(from_pair[order]))


class _Spill:
    """The spill's two files (the runs' columns but args, and their args), memory-mapped; `release` drops
    the pages read so far from this process's resident memory (they stay in the page cache), so reading a
    file larger than memory costs what one track holds, not the file."""

    def __init__(self, path: Path, args_path: Path):
        self.files = [open(p, "rb") for p in (path, args_path)]
        self.maps = [mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) for f in self.files]
        self.readers = [pa.ipc.open_file(pa.py_buffer(mm)) for mm in self.maps]

    def rows(self, batch: int, lo: int, hi: int) -> pa.RecordBatch:
        """Rows ``lo:hi`` of run ``batch``, without their args."""
        return self.readers[0].get_batch(batch).slice(lo, hi - lo)

    def args(self, batch: int, lo: int, hi: int) -> pa.Array:
        return self.readers[1].get_batch(batch).column(0).slice(lo, hi - lo)

    def with_args(self, batch: int, lo: int, hi: int) -> pa.RecordBatch:
        return self.rows(batch, lo, hi).append_column("args", self.args(batch, lo, hi))

    def release(self) -> None:
        for mm in self.maps:
            advise(mm, "MADV_DONTNEED")

    def close(self) -> None:
        self.readers = []
        for mm, f in zip(self.maps, self.files):
            try:
                mm.close()
            except BufferError:  # an Arrow buffer still points into it; closed when collected
                pass
            f.close()


def _counters(sink: _Sink) -> pd.DataFrame:
    """The counters frame from the samples a build kept."""
    samples = pa.concat_tables(sink.counters, promote_options="permissive") if sink.counters else None
    return counter_frame(samples, sink.origin_ns or 0)


# -- opening a store --------------------------------------------------------------------------------
def _timeline_frame(arrays: dict, args: pa.ChunkedArray, categories: dict, built: bool = False,
                    is_scope: np.ndarray | None = None) -> pd.DataFrame:
    """The timeline frame over these column arrays (category codes in `_codes_dtype`) and args, sharing
    their memory: no column is copied. ``built``: the categories are the build's own (distinct by
    construction), not read back from a store (pandas checks those). ``is_scope``: a store's marked scope
    layers, the last column, as `naming.mark_scope_layers` places it."""
    cols = {}
    for c in _COLUMNS:
        arr = arrays[c]
        if c in _CATEGORICAL:
            arr = distinct_categorical(arr, categories[c]) if built else \
                pd.Categorical.from_codes(arr, categories=pd.Index(categories[c], dtype=str), validate=False)
        cols[c] = pd.Series(arr, copy=False)
    # pandas' default string dtype, backed by the Arrow array (no copy)
    cols["args"] = pd.Series(pd.Series([], dtype=str).dtype.__from_arrow__(args), copy=False)
    if is_scope is not None:
        cols["is_scope"] = pd.Series(is_scope, copy=False)
    return pd.DataFrame(cols, copy=False)


class _KeptFlows:
    """The flow events of an in-memory build, kept batch by batch in the form `flow_ends` pairs:
    file order, kind, pair, ts, the category's code and the ids as `flow_ids` gives them. Only the start
    (s) events keep their text."""

    def __init__(self):
        self.batches: list[dict] = []

    def add(self, kind: np.ndarray, pair: np.ndarray, ts_ns: np.ndarray, cat: np.ndarray,
            ident: np.ndarray | pa.Array, start: pa.Table) -> None:
        """A batch's flow events in file order; ``start``: the text (cat, id, name) of its s events."""
        self.batches.append({"kind": kind, "pair": pair, "ts_ns": ts_ns, "cat": cat, "id": ident, "start": start})

    def pairs(self, origin_ns: int) -> pa.Table | None:
        """`nbprofiler.io.trace.flows.pair_flows`' result, with pair ids for tracks."""
        if not self.batches:
            return None
        col = {c: np.concatenate([b[c] for b in self.batches]) for c in ("kind", "pair", "ts_ns", "cat")}
        ids = [b["id"] for b in self.batches]
        if all(isinstance(i, np.ndarray) for i in ids):
            ident = np.concatenate(ids)
        else:  # some ids are text: number them all by their text
            text = pa.chunked_array([pc.cast(pa.array(i), pa.string()) if isinstance(i, np.ndarray) else i
                                     for i in ids], pa.string())
            ident = pc.dictionary_encode(text).combine_chunks().indices.to_numpy(zero_copy_only=False)
        start, end = flow_ends(col["kind"], flow_key(col["cat"], ident))
        s_rank = np.cumsum(col["kind"] == KIND_S) - 1  # a start event's row among the s events
        us = (col["ts_ns"] - origin_ns).astype(np.float64) / 1000.0
        return flow_pairs(pa.concat_tables([b["start"] for b in self.batches]), s_rank[start],
                                col["pair"][start], us[start], col["pair"][end], us[end])


def _copy_on_edit(df: pd.DataFrame) -> None:
    """Let ``df`` (columns over read-only maps) be edited in place: a second frame holding the same columns
    (kept on ``df``) makes pandas' copy-on-write copy a column before any in-place edit, where writing into
    the map would raise "assignment destination is read-only"."""
    object.__setattr__(df, "_nbprofiler_shares_maps", df.copy(deep=False))


def _mapped_table(path: Path) -> tuple[pa.Table, mmap.mmap]:
    """A store's Feather (Arrow IPC) file as a table over a read-only map of it, and the map."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return pa.ipc.open_file(pa.py_buffer(mm)).read_all(), mm


@_util.arrow_memory()  # see there: the small frames are converted from Arrow into fresh pages too
def _open(store: Path) -> TraceData | None:
    """The frames of a complete store (its meta is written last), or None. The columns are views of the
    mapped files, which are read-only: an in-place edit of a frame copies the edited column first
    (`_copy_on_edit`), and the files are never written."""
    try:
        meta = json.loads((store / "meta.json").read_text())
        if meta.get("version") != STORE_VERSION:
            return None
        n, cats = int(meta["rows"]), meta["categories"]
        arrays, maps = {}, []
        for c in _COLUMNS:
            maps.append(np.load(store / f"timeline.{c}.npy", mmap_mode="r"))
            arr = maps[-1].view(np.ndarray)  # a plain view of the map
            if arr.shape != (n,) or arr.dtype != np.dtype(meta["dtypes"][c]):
                return None
            if c in _CATEGORICAL and arr.dtype != _codes_dtype(len(cats[c])):
                return None
            arrays[c] = arr
        maps.append(np.load(store / _SCOPE_FILE, mmap_mode="r"))
        is_scope = maps[-1].view(np.ndarray)
        if is_scope.shape != (n,) or is_scope.dtype != np.bool_:
            return None
        args = _store_args(store)
        if len(args) != n:
            return None
        timeline = _timeline_frame(arrays, args, cats, is_scope=is_scope)
        timeline.attrs["store"] = str(store)
        small = {}
        for name in ("tracks", "flows", "counters"):
            table, mm = _mapped_table(store / f"{name}.arrow")
            small[name] = table.to_pandas(split_blocks=True)   # numbers and text stay views of the map
            maps.append(mm)
        # for `nbprofiler._memory.release_pages`: a pass over the timeline, or over its flows (8M on a 10 GB
        # trace), lets the pages it read of every file of the store go
        keep_maps(store, maps)
        for df in (timeline, *small.values()):
            _copy_on_edit(df)
        return TraceData(origin_us=int(meta["origin_ns"]) / 1000, timeline=timeline, **small)
    except (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException):
        return None


def _store_args(store: Path) -> pa.ChunkedArray:
    """The store's args column: the slices its index lists, each a view of its memory-mapped file."""
    index = np.load(store / _ARGS_INDEX)
    if index.ndim != 2 or index.shape[1] != 4:
        raise ValueError("bad args index")
    # Making the column reads each batch's metadata and each slice's validity bitmap: a page here and there,
    # but with the kernel's read-around of a mapped page (up to the device's readahead, 8 MB here) it read
    # the whole file, 2.7 GB on a 10 GB trace, which nothing reads whole but the call stacks' search. So
    # page by page until the column is made.
    maps, batches = [], {}
    for file in np.unique(index[:, 0]).tolist():
        with open(store / _ARGS_FILES[file], "rb") as f:
            maps.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        advise(maps[-1], "MADV_RANDOM")
        reader = pa.ipc.open_file(pa.py_buffer(maps[-1]))
        batches[file] = [reader.get_batch(b).column(0) for b in range(reader.num_record_batches)]
    args = pa.chunked_array([batches[f][b].slice(lo, hi - lo) for f, b, lo, hi in index.tolist()],
                            type=pa.large_string())
    for mm in maps:
        advise(mm, "MADV_NORMAL")
    return args
