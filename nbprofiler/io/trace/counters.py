"""Counters: the C events' args split into one sample per (event, args key), then ordered into the
counters frame."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...schema import FRAMES
from .frames import empty_frame, select_rows
from .parse import query, storage

COUNTER_COLUMNS = FRAMES["timeline_counters"].required

# One row per (C event, args key): each key of a C event's args is a series (Chrome trace format).
COUNTER_SQL = """
SELECT coalesce(c.pid, '') AS pid, coalesce(c.name, '') AS name, j.key AS series, c.ts_ns, c.row,
       TRY_CAST(j.value AS DOUBLE) AS value
FROM c, json_each(CAST(c.args AS JSON)) AS j
"""
COUNTER_ORDER = ("pid", "name", "series", "ts_ns", "row")


# Counter args as profilers write them, in duckdb's compact JSON: flat objects of plain keys (no quote or
# backslash) and numbers, e.g. {"Read(MB/s)":1.5,"Write(MB/s)":0}. There a comma before a quote only
# separates two keys, so these are split by Arrow string kernels; other args go through duckdb's json_each.
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_FLAT_ARGS = rf'^\{{"[^"\\]*":{_NUMBER}(?:,"[^"\\]*":{_NUMBER})*\}}$'


def counter_samples(events: pa.Table) -> pa.Table | None:
    """The samples of some placeable C events (``row`` = file order, ``pid``, ``name``, ``args``, ``ts_ns``
    = exact ns): one row per (event, args key), unordered (`counter_frame` orders them); None for no
    events."""
    if not len(events):
        return None
    events = events.select(["row", "pid", "name", "args", "ts_ns"])
    args = storage(events.column("args").combine_chunks())
    flat = pc.fill_null(pc.match_substring_regex(args, _FLAT_ARGS), False).to_numpy(zero_copy_only=False)
    samples = [query(COUNTER_SQL, c=events.filter(pa.array(~flat)))] if not flat.all() else []
    if flat.any():
        simple = events.filter(pa.array(flat))
        # {"a":1,"b":2} -> ['"a":1', 'b":2'] -> ['"a', '1', 'b', '2']: keys at even places, values at odd ones
        pairs = pc.split_pattern(pc.utf8_slice_codeunits(args.filter(pa.array(flat)), 1, -1), ',"')
        tokens = pc.list_flatten(pc.split_pattern(pc.list_flatten(pairs), '":', max_splits=1))
        try:
            value = pc.cast(tokens[1::2], pa.float64())
        except pa.ArrowInvalid:  # a number beyond float64: duckdb decides
            return query(COUNTER_SQL, c=events)
        of = simple.select(["pid", "name", "ts_ns", "row"]).take(pc.list_parent_indices(pairs))
        samples.append(pa.table({"pid": pc.fill_null(of.column("pid"), ""), "name": pc.fill_null(of.column("name"), ""),
                                 "series": pc.utf8_ltrim(tokens[0::2], '"'), "ts_ns": of.column("ts_ns"),
                                 "row": of.column("row"), "value": value}))
    return pa.concat_tables(samples, promote_options="permissive") if len(samples) > 1 else samples[0]


def counter_events(aux: pa.Table, is_counter: np.ndarray, ts_ns: np.ndarray) -> pa.Table:
    """``aux``: M and C events with their global ``row``; ``is_counter``: which of them are placeable C
    events; ``ts_ns``: each aux event's ts. The C events as `counter_samples` takes them."""
    return select_rows(aux, ["row", "pid", "name", "args"], is_counter) \
        .append_column("ts_ns", pa.array(ts_ns[is_counter]))


def counter_frame(samples: pa.Table | None, origin_ns: int) -> pd.DataFrame:
    """The counters frame of some counter samples (`counter_samples`, of one or more tables of C events):
    ordered by (pid, name, series, time, file order), times in us from ``origin_ns``; an empty frame when
    there are none."""
    if samples is None or not len(samples):
        return empty_frame(COUNTER_COLUMNS, {"start_us": np.float64, "value": np.float64})
    # the text keys by the rank of their value among the few distinct ones: a sort of integers, a third of
    # the time of Arrow's sort by the text (1.5M samples: 0.2 s against 0.6 s)
    keys = [_ranks(samples.column(c)) if c in ("pid", "name", "series") else samples.column(c).to_numpy()
            for c in COUNTER_ORDER]
    t = samples.take(pa.array(np.lexsort(keys[::-1])))
    out = t.select(["pid", "name", "series"]).to_pandas()
    for col in ("pid", "name", "series"):
        out[col] = out[col].astype(str)
    out["start_us"] = (t.column("ts_ns").to_numpy() - origin_ns).astype(np.float64) / 1000.0
    out["value"] = pc.fill_null(t.column("value").cast(pa.float64()), np.nan).to_numpy()
    return out


def _ranks(text: pa.ChunkedArray) -> np.ndarray:
    """Per row, the rank of its value in the sorted distinct values (null last, as Arrow sorts them)."""
    coded = pc.dictionary_encode(text.combine_chunks(), null_encoding="encode")
    rank = np.empty(len(coded.dictionary), np.int64)
    rank[pc.sort_indices(coded.dictionary).to_numpy()] = np.arange(len(coded.dictionary))
    return rank[coded.indices.to_numpy()]
