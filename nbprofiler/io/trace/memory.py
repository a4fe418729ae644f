"""The in-memory build of several trace files merged (per-iteration CANN exports): every file parsed into
digested chunks (`nbprofiler.io.trace.parse`), their repeated events deduplicated, then the timeline
sorted globally. One file is built batch by batch instead (`nbprofiler.io.trace.disk`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import EmptyFileError
from .._util import check_size
from .counters import counter_events, counter_frame, counter_samples
from .exact import line_of_event
from .flows import flows_of_events
from .frames import (TraceData, bad_field, distinct_categorical, event_kinds, pair_begin_end, skipped_events,
                     warn_impossible_dur, warn_unplaced)
from .naming import meta_events, name_tracks, op_type_maps, op_type_of
from .parse import KIND_C, KIND_M, KIND_X, Chunk, parse_chunks
from .progress import Progress


def load_merged(paths: list[Path], legacy: bool, progress: bool = True) -> TraceData:
    """Parse several Chrome-trace files into one `TraceData` (their repeated metadata and events
    deduplicated). ``legacy``: name tracks by the legacy conventions where no ``M`` event names them."""
    gpu = any(p.name.startswith("gpu_") for p in paths)
    total = sum(check_size(p, "trace") for p in paths)
    with Progress(total, f"parsing {paths[0].name}" + (f" (+{len(paths) - 1})" if len(paths) > 1 else ""),
                  enabled=progress) as bar:
        chunks: list[Chunk] = []
        for p in paths:
            # parsing is ~80 % of a load: the bar moves with the bytes each batch came from, as estimated
            # from its text, and catches up with the file's share when it is done
            share = p.stat().st_size * 0.8
            moved = [0.0]

            def parsed(nbytes, share=share, moved=moved):
                step = min(nbytes * 0.8, share - moved[0])
                moved[0] += step
                bar.advance(step)
            chunks += parse_chunks(p, offset=sum(c.n for c in chunks), on_batch=parsed)
            bar.advance(share - moved[0])
        if not chunks:
            raise EmptyFileError(paths[0], "the trace holds no events")
        data = build(chunks, paths, legacy=legacy, gpu=gpu)
        bar.advance(total * 0.2)
    return data

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


def _unify(chunks: list[Chunk], column: str) -> tuple[np.ndarray, np.ndarray]:
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


def build(chunks: list[Chunk], paths: list[Path], legacy: bool, gpu: bool) -> TraceData:
    multi = len(paths) > 1
    kind = np.concatenate([c.kind for c in chunks])
    ts_ns = np.concatenate([c.ts_ns for c in chunks])
    ts_ok = np.concatenate([c.ts_ok for c in chunks])
    dur = np.concatenate([c.dur for c in chunks])
    flow = pa.concat_tables([c.flow for c in chunks])
    aux = pa.concat_tables([c.aux for c in chunks])
    n = len(kind)
    is_x, is_b, is_flow, is_counter = event_kinds(kind)

    bad, absurd = skipped_events(kind, ts_ok, dur)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        warn_unplaced(paths[0], int(bad.sum()), bad_field(kind, ts_ok, first),
                      line_of_event(paths[0], first) if not multi else None)
    if absurd.any():
        first = int(np.flatnonzero(absurd)[0])
        warn_impossible_dur(paths[0], int(absurd.sum()), float(dur[first]),
                            line_of_event(paths[0], first) if not multi else None)
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
    c_events = counter_events(aux, is_counter[aux_rows], ts_ns[aux_rows])
    del ts_ns
    meta = meta_events(aux, kind[aux_rows] == KIND_M)
    tracks = name_tracks(pid_names[pairs // n_tid], tid_names[pairs % n_tid], meta, legacy=legacy, gpu=gpu)
    display_of_pair = np.empty(len(tracks), dtype=np.int32)
    display_of_pair[tracks["_pair"].to_numpy()] = np.arange(len(tracks), dtype=np.int32)
    tracks = tracks.drop(columns="_pair")
    row_track = np.full(n, -1, dtype=np.int32)
    row_track[on_track] = display_of_pair[pair_inv]
    del pair_inv, on_track

    # flows and counters on the second core while this one builds the timeline
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nbprofiler-trace") as pool:
        side = pool.submit(lambda: (flows_of_events(flow, kind, is_flow, row_track, rel_us),
                                    counter_frame(counter_samples(c_events), origin_ns)))
        timeline = _timeline(chunks, kind, is_x, is_b, row_track, rel_us, dur, multi, paths)
        flows, counters = side.result()
    tracks["events"] = np.bincount(timeline["track"].to_numpy(), minlength=len(tracks)).astype(np.int64)
    # int / int is correctly rounded in Python; int / float would round the 19-digit ns first
    return TraceData(origin_us=origin_ns / 1000, timeline=timeline, tracks=tracks, flows=flows,
                     counters=counters)


def _categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """A Categorical of ``values[codes]`` with only the values that occur as categories."""
    used = np.bincount(codes, minlength=len(values)) > 0
    new_code = np.cumsum(used, dtype=np.int32) - 1
    return distinct_categorical(new_code[codes] if len(codes) else codes.astype(np.int32), values[used])


def _op_types(names: pd.Categorical, type_codes: np.ndarray, type_values: np.ndarray) -> pd.Categorical:
    """op_type per row: ``args.type`` where present and specific, else derived from the name. The
    derivation runs once per distinct name, and the choice once per distinct (name, type) code pair."""
    types = _categorical(type_codes, type_values)
    distinct: dict[str, int] = {}
    derived_of = np.array([distinct.setdefault(op_type_of(n), len(distinct)) for n in names.categories.tolist()],
                          dtype=np.int64)
    of_name, of_type, cats = op_type_maps(derived_of, list(distinct), np.asarray(types.categories, dtype=object))
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
        b_rows, b_start, b_dur = pair_begin_end(kind, np.flatnonzero(is_b), row_track, rel_us, paths)
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
