"""Flows: the s/f/t events paired into arrows by (cat, id), one rule (`FLOW_SQL` states it) applied by
`flow_ends`: to every flow event at once in memory (`pair_flows`), or, for a trace built on disk, to the
events spilled to files by a hash of their (cat, id), one file at a time (`SpilledFlows`)."""
from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...schema import FRAMES
from .frames import empty_frame, select_rows
from .parse import KIND_F, KIND_S, KIND_T, query

FLOW_COLUMNS = FRAMES["timeline_flows"].required

# Flows pair by (cat, id): a flow starts at its first s event and ends at its first f event, or (the
# s/t pairs of CANN step trace) at its last t step; ``seq`` is the file order. This SQL states the rule
# (tests/test_trace_disk.py checks `pair_flows` against it); `flow_ends` applies it.
FLOW_SQL = """
WITH s AS (SELECT cat, id, arg_min(name, seq) AS name, arg_min(track, seq) AS track, arg_min(us, seq) AS us
           FROM fl WHERE kind = {s} GROUP BY cat, id),
     f AS (SELECT cat, id, arg_min(track, seq) AS track, arg_min(us, seq) AS us FROM fl WHERE kind = {f} GROUP BY cat, id),
     t AS (SELECT cat, id, arg_max(track, seq) AS track, arg_max(us, seq) AS us FROM fl WHERE kind = {t} GROUP BY cat, id),
     e AS (SELECT * FROM f UNION ALL SELECT * FROM t ANTI JOIN f USING (cat, id))
SELECT s.cat, s.id, s.name, s.track AS start_track, s.us AS start_us, e.track AS end_track, e.us AS end_us
FROM s JOIN e USING (cat, id)
ORDER BY start_us, cat, id
"""


def pair_flows(fl: pa.Table) -> pa.Table:
    """`FLOW_SQL`'s result from integer codes of cat and id and a sort (on a million flows, a tenth of the
    SQL's memory in half its time). ``fl`` as in `flow_frame`, without nulls."""
    fl = fl.combine_chunks()  # one chunk per column: a take from many chunks concatenates them first
    seq = fl.column("seq").to_numpy()
    if np.any(seq[1:] < seq[:-1]):
        fl = fl.take(pa.array(np.argsort(seq, kind="stable")))  # "first" and "last" are in file order
    codes = [pc.dictionary_encode(fl.column(c)).combine_chunks().indices.to_numpy(zero_copy_only=False)
             for c in ("cat", "id")]
    start, end = flow_ends(fl.column("kind").to_numpy(), flow_key(*codes))
    return flow_pairs(fl, start, *(fl.column(c).to_numpy()[rows] for rows in (start, end) for c in ("track", "us")))


def flow_key(cat: np.ndarray, ident: np.ndarray) -> np.ndarray:
    """One int64 per (cat, id), from integer codes of each (an id's code may be the id itself)."""
    if not len(cat):
        return np.zeros(0, np.int64)
    lo, hi = int(ident.min()), int(ident.max())
    span = hi - lo + 1
    if span * (int(cat.max()) + 1) >= 1 << 62:  # ids too far apart to pack beside the cat: number them first
        ident, span, lo = np.unique(ident, return_inverse=True)[1], len(ident), 0
    return cat.astype(np.int64) * span + (ident.astype(np.int64) - lo)


def flow_ends(kind: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`FLOW_SQL`'s rule over flow events in file order: the row of each flow's start (its key's first s)
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


def start_order(start_us: np.ndarray, keys_of) -> np.ndarray:
    """The order of pairs by (start time, cat, id), found from the times, and from the text only among
    pairs that start at the same time: ``keys_of(rows)``, the ``cat`` and ``id`` text of those rows."""
    order = np.argsort(start_us, kind="stable")
    us = start_us[order]
    tied = np.zeros(len(us), dtype=bool)
    tied[1:] = us[1:] == us[:-1]
    tied[:-1] |= tied[1:]
    if tied.any():  # each run of equal times is contiguous: sorting all of them by (time, cat, id) orders each
        sub = order[tied]
        keys = keys_of(sub).append_column("us", pa.array(us[tied]))
        order[tied] = sub[pc.sort_indices(keys, sort_keys=[("us", "ascending"), ("cat", "ascending"),
                                                           ("id", "ascending")]).to_numpy()]
    return order


def flow_pairs(text: pa.Table, rows: np.ndarray, start_track, start_us, end_track, end_us) -> pa.Table:
    """`FLOW_SQL`'s result from the pairs `flow_ends` found: the start events' ``cat``, ``id`` and
    ``name`` (rows ``rows`` of ``text``), and both ends' tracks and times, ordered by start, cat, id
    (`start_order`). The text is copied once, in that order."""
    order = start_order(start_us, lambda sub: text.select(["cat", "id"]).take(pa.array(rows[sub])))
    # one chunk first: a take from the chunks of every batch joins them for each column anyway, more slowly
    start = text.select(["cat", "id", "name"]).combine_chunks().take(pa.array(rows[order]))
    return pa.table({"cat": start.column("cat"), "id": start.column("id"), "name": start.column("name"),
                     "start_track": pa.array(start_track[order]), "start_us": pa.array(start_us[order], pa.float64()),
                     "end_track": pa.array(end_track[order]), "end_us": pa.array(end_us[order], pa.float64())})


def integer_ids(ids: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per flow id (text), whether it is an integer written as the integer prints ("7", not "07", "+7",
    "-0" or "7.0"), as profilers write them, and that integer (0 elsewhere): the text cast to int64 and
    printed back is the text."""
    try:   # every id an integer: Arrow's cast, all or nothing
        number = pc.cast(ids, pa.int64())
        ok = pc.fill_null(pc.equal(pc.cast(number, pa.string()), ids), False)
        return ok.to_numpy(zero_copy_only=False), pc.fill_null(number, 0).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):   # else id by id
        out = query("SELECT coalesce(TRY_CAST(id AS BIGINT)::VARCHAR = id, false) AS ok, "
                    "coalesce(TRY_CAST(id AS BIGINT), 0) AS n FROM f", f=pa.table({"id": ids}))
        ok = out.column("ok").to_numpy()
        return ok, np.where(ok, out.column("n").to_numpy(), 0)


def flow_ids(ids: pa.Array) -> np.ndarray | pa.Array:
    """A batch's flow ids as integers (int64) where every one is an integer written canonically
    (`integer_ids`); else their text (a pairing then numbers every id by its text)."""
    ok, number = integer_ids(ids)
    return number if ok.all() else ids


def flow_hash(cat: np.ndarray, ident: np.ndarray | pa.Array) -> np.ndarray:
    """Per flow event, a hash of its flow, which places it in the spilled file of its flow (`SpilledFlows`):
    of ``cat``, the category's code, and ``ident``, the ids as `flow_ids` gives a batch's. A text id
    written as an integer (`integer_ids`) hashes as the integer, so the events of a flow hash alike
    whichever form their batches took."""
    if isinstance(ident, np.ndarray):
        key = ident.astype(np.int64, copy=False).view(np.uint64)
    else:
        ok, number = integer_ids(ident)
        text = query("SELECT (hash(id) >> 1)::BIGINT AS k FROM f", f=pa.table({"id": ident})).column("k").to_numpy()
        key = np.where(ok, number, text).view(np.uint64)
    # splitmix64's finaliser: consecutive ids spread evenly over the files
    z = key + cat.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def flows_of_events(flow, kind, is_flow, row_track, rel_us) -> pd.DataFrame:
    """``flow``: the s/f/t events with their global ``row``; ``is_flow``: which rows are placeable."""
    keep = is_flow[flow.column("row").to_numpy()]
    rows = flow.column("row").to_numpy()[keep]
    if not len(rows):
        return flow_frame(None)
    fl = select_rows(flow, ["cat", "id", "name"], keep)
    return flow_frame(pa.table({"kind": pa.array(kind[rows]),
                                 **{c: pc.fill_null(fl.column(c), "") for c in ("cat", "id", "name")},
                                 "seq": pa.array(rows), "track": pa.array(row_track[rows]),
                                 "us": pa.array(rel_us[rows])}))


def flow_frame(fl: pa.Table | None) -> pd.DataFrame:
    """The flows frame from the placeable s/f/t events (``kind``, ``cat``, ``id``, ``name``, ``seq`` = file
    order, ``track``, ``us``), or an empty one."""
    return flow_frame_of_pairs(pair_flows(fl) if fl is not None and len(fl) else None)


def flow_frame_of_pairs(pairs: pa.Table | None) -> pd.DataFrame:
    """The flows frame from `pair_flows`' result, or an empty one."""
    if pairs is None or not len(pairs):
        return empty_frame(FLOW_COLUMNS, {"start_track": np.int32, "end_track": np.int32, "start_us": np.float64,
                                     "end_us": np.float64})
    # the text converts to pandas' string type as it is (str objects on pandas 2): no second pass over it
    return pairs.to_pandas().astype({"start_track": np.int32, "start_us": np.float64, "end_track": np.int32,
                                     "end_us": np.float64})


# -- a trace built on disk: the flows paired in bounded memory ------------------------------------------
# Bytes of trace per file of flow events: a file holds at most its share of the trace's events, so pairing
# one (integers, and the start events' names) takes a fraction of what the trace's JSON took.
_TRACE_BYTES_PER_PART = 256 << 20
# Files open at once at most (a 64 GB trace's share each beyond that), for the process's file limit.
_MAX_FILES = 256
# Pairs per file of pairs (by start time), ordered in memory one file at a time.
_PAIRS_PER_RANGE = 1 << 19
# Every this-many-th start event's time is kept to cut the pairs' start times in files of about as many.
_SAMPLE_EVERY = 16
# The write buffers of a set of bucket files, split between them (at most `_FILE_BUFFER` each): a batch's
# rows spread over tens of files are a few hundred per file, and Arrow writes each column's buffers with a
# call of its own (unbuffered: ~20 system calls per piece, 450k at 10 GB).
_BUFFER_BYTES = 32 << 20
_FILE_BUFFER = 1 << 20
_TEXT = ("cat", "id", "name")
_ENDS = ("start_track", "start_us", "end_track", "end_us")


# Writing the frame's file and removing the spilled ones once read wait on the file system more than they
# work (a spilled file's removal ~20 ms, a fifth of it CPU; the frame's writes, most of them the kernel
# finding pages): threads of their own do it while the pairing goes on.
_FILES = ThreadPoolExecutor(2, thread_name_prefix="nbprofiler-flows-io")


class _Buckets:
    """Arrow IPC files numbered by bucket (``prefix``: their path up to the number), written table by table:
    each table's rows go, in their order, to the file of their bucket, through a write buffer per file
    (`_BUFFER_BYTES` split between the ``n`` buckets)."""

    def __init__(self, prefix: Path):
        self.prefix = prefix
        self.writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
        self.sinks: dict[int, pa.NativeFile] = {}
        self.paths: dict[int, Path] = {}
        self.removing: list[Future] = []

    def add(self, table: pa.Table, bucket: np.ndarray, n: int) -> None:
        """``table``'s rows to their files; ``bucket``: per row, its bucket, in 0..``n`` − 1."""
        order = np.argsort(bucket, kind="stable")   # each file's rows stay in the order they came
        cuts = np.searchsorted(bucket[order], np.arange(n + 1, dtype=bucket.dtype))
        table = table.take(pa.array(order))
        for b in np.flatnonzero(np.diff(cuts)):
            if b not in self.writers:
                self.paths[b] = self.prefix.with_name(f"{self.prefix.name}-{b}.arrow")
                self.sinks[b] = pa.BufferedOutputStream(pa.OSFile(str(self.paths[b]), "wb"),
                                                        max(4096, min(_FILE_BUFFER, _BUFFER_BYTES // n)))
                self.writers[b] = pa.ipc.new_file(self.sinks[b], table.schema)
            self.writers[b].write_table(table.slice(int(cuts[b]), int(cuts[b + 1] - cuts[b])))

    def close(self) -> None:
        for w in self.writers.values():
            w.close()
        for sink in self.sinks.values():   # the writer leaves a stream it was given open
            sink.close()
        self.writers, self.sinks = {}, {}

    def take(self, b: int) -> pa.Table:
        """The rows of bucket ``b`` (call `close` first); its file is then removed on another thread. The file
        is mapped, not read: its batches are the page cache's pages until joined into one table (read, they
        would be copied into fresh memory first)."""
        with pa.memory_map(str(self.paths[b])) as source:
            table = pa.ipc.open_file(source).read_all().combine_chunks()
        self.removing.append(_FILES.submit(self.paths.pop(b).unlink))
        return table

    def remove(self) -> None:
        """Remove every file, and wait for those `take` left to remove."""
        self.close()
        for f in self.paths.values():
            f.unlink(missing_ok=True)
        self.paths = {}
        removing, self.removing = self.removing, []
        for f in removing:
            f.result()


class SpilledFlows:
    """The flow events of a trace built on disk (`nbprofiler.io.trace.disk`), spilled as they are read to
    files by a hash of their (cat, id): every event of a flow is in one file, in file order, so each file is
    paired alone by `flow_ends`, in memory of its size, as `pair_flows` pairs every event at once. The pairs
    go to files by their start time, and each of those, ordered by (start, cat, id) as `flow_pairs` orders
    them, is written out in turn: the same frame as `pair_flows` gives, in the memory of a file's share.
    The events travel as integers (the category's code, the id where it is an integer, the track's pair
    id, the time) with the text of the start events' names: the text of a category or of an integer id is
    written only into the frame.
    ``prefix``: the files' path up to a number; ``trace_bytes``: the trace's size, which sets how many files
    the events are spread over."""

    def __init__(self, prefix: Path, trace_bytes: int):
        self.prefix = prefix
        self.parts = min(_MAX_FILES, max(1, math.ceil(trace_bytes / _TRACE_BYTES_PER_PART)))
        self.events = _Buckets(prefix)
        self.starts = 0                      # s events spilled
        self.sample: list[np.ndarray] = []   # every _SAMPLE_EVERY-th s event's ts_ns

    def add(self, kind: np.ndarray, pair: np.ndarray, ts_ns: np.ndarray, cat: np.ndarray,
            ident: np.ndarray | pa.Array, name: pa.Array, hashes: np.ndarray) -> None:
        """A batch's flow events in file order: ``kind``, ``pair`` (the track's pair id), ``ts_ns``, ``cat``
        (a code of their category: 1 + its place in the ``cats`` given to `pair`), ``ident`` (the ids: int64
        where the batch's ids are integers, else their text), ``name`` (text, "" for none); ``hashes``:
        their `flow_hash` values."""
        n, is_s = len(kind), kind == KIND_S
        numbers = isinstance(ident, np.ndarray)
        self.events.add(pa.table({"kind": kind, "pair": pair, "ts_ns": ts_ns, "cat": cat,
                                  "id": ident if numbers else np.zeros(n, np.int64),
                                  "id_text": pa.nulls(n, pa.string()) if numbers else ident,
                                  "name": pc.if_else(pa.array(is_s), name, pa.scalar(None, pa.string()))}),
                        hashes % np.uint64(self.parts), self.parts)
        ts = ts_ns[is_s]
        self.starts += len(ts)
        self.sample.append(ts[::_SAMPLE_EVERY])

    def close(self) -> None:
        self.events.close()

    def discard(self) -> None:
        self.events.remove()
        self.sample, self.starts = [], 0

    def pair(self, track_of_pair: np.ndarray, origin_ns: int, cats: list[pa.Array], out: Path) -> bool:
        """Write the flows frame's table (`flow_pairs`' columns, text as large_string) to the Arrow IPC file
        ``out``; False when no flow pairs (nothing written). ``cats``: the categories in code order, as
        large_string arrays (``values`` of the build's dictionary of them). The spilled files are removed."""
        self.close()
        cuts = self._cuts(origin_ns)
        ranges = _Buckets(self.prefix.with_name(self.prefix.name + "-pairs"))
        cats = pa.concat_arrays([pa.array([""], pa.large_string()), *cats])  # code 0: none
        try:
            for p in sorted(self.events.paths):
                pairs = self._pairs_of(self.events.take(p), track_of_pair, origin_ns)
                if pairs is not None:
                    ranges.add(pairs, np.searchsorted(cuts, pairs.column("start_us").to_numpy(), side="right"),
                               len(cuts) + 1)
            ranges.close()
            if not ranges.paths:
                return False
            # large_string: what pandas' string columns hold, so the frame maps them without a copy
            schema = pa.schema([*((c, pa.large_string()) for c in _TEXT), ("start_track", pa.int32()),
                                ("start_us", pa.float64()), ("end_track", pa.int32()), ("end_us", pa.float64())])
            with pa.ipc.new_file(str(out), schema) as w:
                writing = None   # one range is written while the next is ordered: two in memory at most
                try:
                    for r in sorted(ranges.paths):   # in start order
                        t = _ordered(ranges.take(r), cats).cast(schema)
                        if writing is not None:
                            writing.result()
                        writing = _FILES.submit(w.write_table, t)
                finally:
                    if writing is not None:
                        writing.result()
            return True
        finally:
            ranges.remove()
            self.discard()

    def _cuts(self, origin_ns: int) -> np.ndarray:
        """Start times (us from ``origin_ns``) cutting the pairs into files of about `_PAIRS_PER_RANGE`."""
        n = min(_MAX_FILES, max(1, math.ceil(self.starts / _PAIRS_PER_RANGE)))
        sample = np.sort(np.concatenate(self.sample)) if self.sample else np.zeros(0, np.int64)
        if n == 1 or not len(sample):
            return np.zeros(0)
        at = sample[(np.arange(1, n) * len(sample)) // n]
        return np.unique((at - origin_ns).astype(np.float64) / 1000.0)

    @staticmethod
    def _pairs_of(fl: pa.Table, track_of_pair: np.ndarray, origin_ns: int) -> pa.Table | None:
        """The pairs of one file's flows (``fl``), unordered: the start events' ``cat``, ``id``, ``id_text``
        and ``name`` as spilled, and both ends' tracks and times."""
        kind, ident = fl.column("kind").to_numpy(), fl.column("id").to_numpy()
        id_text = fl.column("id_text")
        if id_text.null_count < len(id_text):  # some batch's ids are text: number every id by its text
            text = pc.if_else(pc.is_null(id_text), pc.cast(fl.column("id"), pa.string()), id_text)
            ident = pc.dictionary_encode(text).combine_chunks().indices.to_numpy(zero_copy_only=False)
        start, end = flow_ends(kind, flow_key(fl.column("cat").to_numpy(), ident))
        if not len(start):
            return None
        pair, ts = fl.column("pair").to_numpy(), fl.column("ts_ns").to_numpy()
        us = (ts - origin_ns).astype(np.float64) / 1000.0
        text = fl.select(["cat", "id", "id_text", "name"]).take(pa.array(start))
        return pa.table({**{c: text.column(c) for c in text.column_names},
                         "start_track": pa.array(track_of_pair[pair[start]].astype(np.int32)),
                         "start_us": pa.array(us[start]),
                         "end_track": pa.array(track_of_pair[pair[end]].astype(np.int32)),
                         "end_us": pa.array(us[end])})


def _ordered(pairs: pa.Table, cats: pa.Array) -> pa.Table:
    """Spilled pairs as the frame has them (`flow_pairs`' columns), ordered by (start, cat, id)."""
    order = start_order(pairs.column("start_us").to_numpy(),
                        lambda rows: _text(pairs.take(pa.array(rows)), cats).select(["cat", "id"]))
    pairs = pairs.take(pa.array(order))
    return pa.table({**dict(zip(_TEXT, _text(pairs, cats).columns)), **{c: pairs.column(c) for c in _ENDS}})


def _text(pairs: pa.Table, cats: pa.Array) -> pa.Table:
    """The ``cat``, ``id`` and ``name`` of spilled pairs: a category from its code, an id from its number
    where it has no text."""
    return pa.table({"cat": cats.take(pairs.column("cat")),
                     "id": pc.coalesce(pairs.column("id_text"), pc.cast(pairs.column("id"), pa.string())),
                     "name": pairs.column("name")})
