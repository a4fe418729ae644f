"""Flows: the s/f/t events paired into arrows by (cat, id), as one rule (`FLOW_SQL`) applied in memory
(`pair_flows`, `flow_ends`) or by duckdb under a memory limit (a trace built on disk)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...schema import FRAMES
from .frames import empty_frame, select_rows
from .parse import KIND_F, KIND_S, KIND_T

FLOW_COLUMNS = FRAMES["timeline_flows"].required

# Flows pair by (cat, id): a flow starts at its first s event and ends at its first f event, or (the
# s/t pairs of CANN step trace) at its last t step; ``seq`` is the file order. `pair_flows` applies this
# rule in memory; a trace built on disk (`nbprofiler.io.trace.disk`) applies it with this SQL, in duckdb
# under a memory limit. tests/test_trace_disk.py checks that both give the same frame.
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


def flow_pairs(text: pa.Table, rows: np.ndarray, start_track, start_us, end_track, end_us) -> pa.Table:
    """`FLOW_SQL`'s result from the pairs `flow_ends` found: the start events' ``cat``, ``id`` and
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
