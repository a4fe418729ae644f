"""Timeline analyses: level of detail (LOD) for drawing, search, range statistics, minimap density.

All functions take the ``prof.timeline`` frame (columns ``track``, ``name``, ``op_type``, ``start_us``,
``dur_us``; declared in `nbprofiler.schema`) or a `TimelineIndex` built from it once, and return
DataFrames. Nothing here reads files or draws.

Level of detail: a view of [t0, t1] us that is W pixels wide cannot show more than about W bars per track
row, so `lod_query` returns, per track, every event at least one pixel wide as it is, and merges runs of
sub-pixel events (consecutive ones less than a pixel apart) into one aggregate bar that carries how many
events it stands for, their dominant op type and their total busy time. Every event that intersects the
window is drawn or counted in exactly one bar, and nothing outside the window is returned.

Window cut: per track the events are sorted by start and cut with ``np.searchsorted``. Events that start
before t0 but still reach into the window are found exactly: the few longest events of each track
(`LONG_EVENTS_PER_TRACK`) are tested directly, so every other event is at most ``short_max_us`` long and
can only intersect the window if it starts after ``t0 - short_max_us``.

Levels: each busy track's runs merged at pixels a factor of 2 apart (`LEVEL_BINS`), so a window merges
about twice its pixels' worth of entries instead of every event. A run of the level that crosses the
window's edge is cut there, not opened whole: the entries of a finer level inside the window, and the
events of the finest level's runs at the edge, found by binary search (`_run_in_window`).

Memory: the index reads the frame's own columns in place when the frame is sorted by (track, start), as
``prof.timeline`` is (on a trace larger than memory they are memory-mapped files), and adds only the
levels, a few numbers per merged run and per op type in it (at 5M events, 1.1M entries and 3.4M votes,
~130 MB, half of it the finest level).
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from .._memory import release_pages, row_slices

# At most this many of a track's longest events are tested one by one instead of through the sorted cut.
LONG_EVENTS_PER_TRACK = 256
MAX_GLYPHS = 20_000

LOD_COLUMNS = ["track", "start_us", "end_us", "count", "name", "op_type", "busy_us", "row"]
# `lod_query(..., codes=True)`: the index's codes in place of the texts (what a view sends to the page)
LOD_CODE_COLUMNS = ["track", "start_us", "end_us", "count", "name_code", "type_code", "busy_us", "row"]
# An event's vote for its run's op type is its duration plus this, so zero-length events still vote.
VOTE_EPS = 1e-12
# Coarse levels: each track's sub-pixel runs merged once at a pixel of the timeline's span / bins, so a
# wide window merges a few thousand runs per track instead of every event. A level serves any window whose
# pixel is at least the level's: inside a level run every gap is under the level's pixel, so merging at a
# coarser pixel only joins whole level runs, and the result equals merging the events themselves. A window
# takes the coarsest level that serves it, so with a level at every factor of 2 it merges at most about
# twice its pixels' worth of entries; the finest serves a window of 1600 px down to ~0.6 % of the run.
LEVEL_BINS = tuple(2_048 * 2 ** k for k in range(8))   # 2,048 to 262,144
# Tracks with fewer events than this get no level (merging them is already cheap).
LEVEL_MIN_EVENTS = 4_096
# A run of a level that crosses a window's edge is cut from the events themselves when it has at most this
# many, else from the entries of a finer level with at most about this many pixels inside the window.
CUT_ENTRIES = 1_024
# Up to this many (run, type) pairs, a level sums its votes in a table instead of sorting them.
_DENSE_VOTES = 4_000_000
# Rows a block of a pass over events that keeps only small temporaries (`row_slices` at this size, a
# track's events merged in place by `_merge_span`): they stay in the CPU's cache, where a whole column's
# would go to memory and back.
BLOCK_ROWS = 65_536


@dataclasses.dataclass
class _Track:
    lo: int               # this track's slice [lo, hi) of the index's arrays, sorted by start
    hi: int
    short_max_us: float   # the longest of the track's events that are not in ``long``
    long: np.ndarray      # positions of the track's longest events, ascending


@dataclasses.dataclass
class _LevelTrack:
    """One track's entries at a level, in the order of their first events (so by start): an event at least
    the level's pixel long (as itself), or a run of shorter events merged at that pixel."""
    start: np.ndarray
    end: np.ndarray
    end_max: np.ndarray   # the largest end up to each entry (ascending: the window's first entry is a search)
    count: np.ndarray     # events in the entry
    busy: np.ndarray      # their summed duration
    single: np.ndarray    # the event's position for a one-event entry, else -1
    first: np.ndarray     # the position of the entry's first event (ascending)
    last: np.ndarray      # a run's events: the positions in [first, last) shorter than ``px``
    px: float
    vote_at: np.ndarray   # the op-type votes of entry k: vote_type/vote_weight[vote_at[k]:vote_at[k + 1]]
    vote_entry: np.ndarray   # (int32: the entry of each vote)
    vote_type: np.ndarray
    vote_weight: np.ndarray   # the summed weight of the entry's events of that type


def _level_track(index: "TimelineIndex", lo: int, hi: int, px: float) -> _LevelTrack:
    """The entries of one track (its events: positions ``lo`` to ``hi``, sorted by start) at pixel ``px``."""
    small = index.dur[lo:hi] < px
    big, sp = np.flatnonzero(~small) + lo, np.flatnonzero(small) + lo
    del small
    # (temporaries are freed as soon as they are used: a busy track can hold tens of millions of events)
    s, e = index.start[sp], index.end_of(sp)
    if len(sp):
        new_run = np.r_[True, s[1:] - np.maximum.accumulate(e)[:-1] > px]
        firsts = np.flatnonzero(new_run)
        run_of = np.cumsum(new_run) - 1
        del new_run
        r_count = np.diff(np.r_[firsts, len(sp)])
        r_start, r_end = s[firsts], np.maximum.reduceat(e, firsts)
        del s, e
        r_busy = np.add.reduceat(index.dur[sp], firsts)
        r_single = np.where(r_count == 1, sp[firsts], -1)
    else:
        firsts = run_of = r_count = np.zeros(0, np.int64)
        r_start = r_end = r_busy = np.zeros(0)
        r_single = np.zeros(0, np.int64)
    n_runs = len(firsts)
    # entries: the long events, then the runs, put in the order of their first events (distinct positions;
    # entry_of: combined index -> entry)
    first = np.r_[big, sp[firsts] if n_runs else np.zeros(0, np.int64)]
    order = np.argsort(first)
    entry_of = np.empty(len(order), np.int64)
    entry_of[order] = np.arange(len(order))
    entry_of_big, entry_of_run = entry_of[:len(big)], entry_of[len(big):]
    # votes: one per (run, op type) with the runs' summed weight, one per long event
    n_types = len(index.type_values) + 1
    keys = run_of * n_types + (index.type_codes[sp] + 1)
    del run_of
    if n_runs * n_types <= _DENSE_VOTES:  # a table of every (run, type): no sort of the events
        table = np.bincount(keys, weights=index.dur[sp] + VOTE_EPS, minlength=n_runs * n_types)
        uniq = np.flatnonzero(table)  # every event's weight is > 0, so these are the pairs that occur
        w = table[uniq]
    else:
        uniq, inv = np.unique(keys, return_inverse=True)
        w = np.bincount(inv.ravel(), weights=index.dur[sp] + VOTE_EPS) if len(uniq) else np.zeros(0)
    del keys
    vote_entry = np.r_[entry_of_big, entry_of_run[uniq // n_types]]
    vote_type = np.r_[index.type_codes[big], (uniq % n_types) - 1]
    vote_weight = np.r_[index.dur[big] + VOTE_EPS, w]
    last = np.r_[big + 1, sp[np.r_[firsts[1:], len(sp)] - 1] + 1 if n_runs else np.zeros(0, np.int64)][order]
    by_entry = np.argsort(vote_entry, kind="stable")  # an entry's votes are then one slice
    vote_at = np.r_[0, np.cumsum(np.bincount(vote_entry, minlength=len(order)))]
    end = np.r_[index.end_of(big), r_end][order]
    return _LevelTrack(start=np.r_[index.start[big], r_start][order], end=end, end_max=np.maximum.accumulate(end),
                       count=np.r_[np.ones(len(big), np.int64), r_count][order],
                       busy=np.r_[index.dur[big], r_busy][order], single=np.r_[big, r_single][order],
                       first=first[order].astype(np.int64), last=last.astype(np.int64), px=px,
                       vote_at=vote_at.astype(np.int64), vote_entry=vote_entry[by_entry].astype(np.int32),
                       vote_type=vote_type[by_entry].astype(np.int16 if n_types < 2 ** 15 else np.int32),
                       vote_weight=vote_weight[by_entry])


def _coarser_track(index: "TimelineIndex", fine: _LevelTrack, px: float) -> _LevelTrack:
    """A track's entries at pixel ``px`` from its entries at a finer pixel: what `_level_track` makes of the
    events, as the runs' gaps are the same (an entry of the finer level lies inside one entry of this one),
    with each run's votes summed from its entries'."""
    big = np.flatnonzero((fine.count == 1) & (fine.busy >= px))   # events drawn as themselves at px too
    sm = np.flatnonzero((fine.count > 1) | (fine.busy < px))      # (entries in start order)
    s, e = fine.start[sm], fine.end[sm]
    firsts = np.flatnonzero(_runs(s, e, px))
    n_runs = len(firsts)
    ends = np.r_[firsts[1:], len(sm)] if n_runs else firsts
    r_count = np.add.reduceat(fine.count[sm], firsts) if n_runs else np.zeros(0, np.int64)
    r_first = fine.first[sm[firsts]]
    runs = {"start": s[firsts], "end": np.maximum.reduceat(e, firsts) if n_runs else np.zeros(0),
            "count": r_count, "busy": np.add.reduceat(fine.busy[sm], firsts) if n_runs else np.zeros(0),
            "single": np.where(r_count == 1, r_first, -1), "first": r_first,
            "last": np.maximum.reduceat(fine.last[sm], firsts) if n_runs else np.zeros(0, np.int64)}
    # entries: the long events, then the runs, put in the order of their first events
    order = np.argsort(np.r_[fine.first[big], r_first])
    cols = {k: np.r_[getattr(fine, k)[big], v][order] for k, v in runs.items()}
    entry_of = np.empty(len(order), np.int64)
    entry_of[order] = np.arange(len(order))
    # votes: a long event's own; per (run, type) the sum of its entries' (a vote's entry -> its run)
    n_types = len(index.type_values) + 1
    run_of = np.full(len(fine.start), -1, np.int64)
    run_of[sm] = np.repeat(np.arange(n_runs), ends - firsts)
    v_run = run_of[fine.vote_entry]
    mine = np.flatnonzero(v_run >= 0)
    keys = v_run[mine] * n_types + (fine.vote_type[mine] + 1)
    if n_runs * n_types <= _DENSE_VOTES:
        table = np.bincount(keys, weights=fine.vote_weight[mine], minlength=n_runs * n_types)
        uniq = np.flatnonzero(table)
        w = table[uniq]
    else:
        uniq, inv = np.unique(keys, return_inverse=True)
        w = np.bincount(inv.ravel(), weights=fine.vote_weight[mine]) if len(uniq) else np.zeros(0)
    big_votes = fine.vote_at[big]   # a one-event entry has one vote
    vote_entry = np.r_[entry_of[:len(big)], entry_of[len(big):][uniq // n_types]]
    vote_type = np.r_[fine.vote_type[big_votes], (uniq % n_types) - 1]
    vote_weight = np.r_[fine.vote_weight[big_votes], w]
    by_entry = np.argsort(vote_entry, kind="stable")
    end = cols["end"]
    return _LevelTrack(start=cols["start"], end=end, end_max=np.maximum.accumulate(end),
                       count=cols["count"].astype(np.int64), busy=cols["busy"], single=cols["single"].astype(np.int64),
                       first=cols["first"].astype(np.int64), last=cols["last"].astype(np.int64), px=px,
                       vote_at=np.r_[0, np.cumsum(np.bincount(vote_entry, minlength=len(order)))].astype(np.int64),
                       vote_entry=vote_entry[by_entry].astype(np.int32),
                       vote_type=vote_type[by_entry].astype(fine.vote_type.dtype), vote_weight=vote_weight[by_entry])


class TimelineIndex:
    """Per-track sorted arrays of a timeline frame, built once and queried many times.

    ``events`` is ``prof.timeline`` (or any frame with ``track``, ``start_us``, ``dur_us``, ``name``,
    ``op_type``). ``row`` values returned by queries are positions in that frame (``events.iloc[row]``).
    """

    def __init__(self, events: pd.DataFrame, long_per_track: int = LONG_EVENTS_PER_TRACK, levels: bool = True):
        track = events["track"].to_numpy()
        start = events["start_us"].to_numpy(dtype=np.float64)
        dur = events["dur_us"].to_numpy(dtype=np.float64)
        if not _all_blocks(dur, lambda d: (d >= 0).all()):   # (a NaN is not >= 0)
            dur = np.maximum(np.nan_to_num(dur, nan=0.0), 0.0)
        names = _as_categorical(events["name"]) if "name" in events else pd.Categorical([""] * len(events))
        types = _as_categorical(events["op_type"]) if "op_type" in events else names
        name_codes, type_codes = names.codes, types.codes
        self._row = None  # position -> row of the frame, where the frame was not sorted by (track, start)
        if not _is_sorted(track, start):
            order = np.lexsort((start, track))
            track, start, dur = track[order], start[order], dur[order]
            name_codes, type_codes = name_codes[order], type_codes[order]
            self._row = order.astype(np.int64)
        self.tracks: dict[int, _Track] = {}
        bounds = np.flatnonzero(track[1:] != track[:-1]) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(track)]):
            if hi <= lo:
                continue
            d = dur[lo:hi]
            if hi - lo > long_per_track:
                long, short_max = _longest(d, long_per_track)
                long += lo
            else:
                long, short_max = np.arange(lo, hi, dtype=np.int64), 0.0
            self.tracks[int(track[lo])] = _Track(int(lo), int(hi), short_max, long.astype(np.int64))
        self.n = len(events)
        self.start = start
        self.dur = dur
        self.name_codes = name_codes
        self.name_values = np.asarray(names.categories, dtype=object)
        self.type_codes = type_codes
        self.type_values = np.asarray(types.categories, dtype=object)
        self.t_min = float(self.start.min()) if self.n else 0.0
        self.t_max = max((float((self.start[p] + self.dur[p]).max()) for p in row_slices(self.n, BLOCK_ROWS)),
                         default=0.0)
        # (pixel, {track: entries}), coarsest first; only tracks with many events get one. Until
        # `build_levels` has run, every query merges the events (the same bars, slower on wide windows).
        self.levels: list[tuple[float, dict[int, _LevelTrack]]] = []
        self._release = lambda: release_pages(events)  # on disk, the passes' pages are not kept resident
        if levels:
            self.build_levels()
        self._release()

    def end_of(self, pos: np.ndarray) -> np.ndarray:
        """End times (us) of index positions (not kept per event: 8 bytes each on a timeline of millions)."""
        return self.start[pos] + self.dur[pos]

    def rows(self, pos: np.ndarray) -> np.ndarray:
        """The frame's rows (``events.iloc`` positions) of index positions."""
        pos = np.asarray(pos, dtype=np.int64)
        return pos if self._row is None else self._row[pos]

    def build_levels(self) -> None:
        """Merge each busy track's sub-pixel runs at the `LEVEL_BINS` pixels: the finest from the events
        (~0.1 s per million), each coarser one from the entries of the one below it. The finished levels
        replace ``levels`` at once, so queries running meanwhile stay correct."""
        span = self.t_max - self.t_min
        busy = {trk: tr for trk, tr in self.tracks.items() if tr.hi - tr.lo >= LEVEL_MIN_EVENTS}
        if span <= 0 or not busy:
            return
        built = []
        for bins in sorted(set(LEVEL_BINS), reverse=True):
            px = span / bins
            lvl = {}
            for trk, tr in busy.items():
                if built:
                    lvl[trk] = _coarser_track(self, built[-1][1][trk], px)
                else:
                    lvl[trk] = _level_track(self, tr.lo, tr.hi, px)
                    self._release()  # one track's pages at a time
            built.append((px, lvl))
        self.levels = built[::-1]

    def density(self, bins: int) -> tuple[np.ndarray, np.ndarray]:
        """Events starting in each of ``bins`` equal time bins of the whole timeline, every track together:
        (the ``bins + 1`` edges in us, the counts). Found by searching each track's sorted starts for the
        edges, not by a pass over the events (an event on an edge counts in the bin it opens; the last bin
        holds its end)."""
        lo = self.t_min
        hi = self.t_max if self.t_max > lo else lo + 1.0
        edges = np.linspace(lo, hi, bins + 1)
        counts = np.zeros(bins, np.int64)
        for tr in self.tracks.values():
            s = self.start[tr.lo:tr.hi]
            at = np.searchsorted(s, edges, side="left")
            at[-1] = np.searchsorted(s, hi, side="right")
            counts += np.diff(at)
        return edges, counts

    def cut(self, track: int, t0: float, t1: float) -> np.ndarray | slice:
        """`window`'s positions, as a slice of the index's arrays where the window opens before the track's
        first event (every event of the track that starts by t1 is in it, as in a whole-run window): the
        merge then reads the events in place instead of gathering millions of them."""
        tr = self.tracks.get(int(track))
        if tr is None or not t0 <= self.start[tr.lo]:
            return self.window(track, t0, t1)
        return slice(tr.lo, tr.lo + int(np.searchsorted(self.start[tr.lo:tr.hi], t1, side="right")))

    def window(self, track: int, t0: float, t1: float) -> np.ndarray:
        """Positions (into the index arrays) of the events of ``track`` that intersect [t0, t1], sorted
        by start. An event intersects when ``start <= t1`` and ``end >= t0`` (zero-length events at an
        edge count)."""
        tr = self.tracks.get(int(track))
        if tr is None:
            return np.zeros(0, dtype=np.int64)
        s = self.start[tr.lo:tr.hi]
        a = tr.lo + int(np.searchsorted(s, t0 - tr.short_max_us, side="left"))
        m = tr.lo + int(np.searchsorted(s, t0, side="left"))   # from here on every event starts in the window
        b = tr.lo + int(np.searchsorted(s, t1, side="right"))
        head = np.arange(a, min(m, b), dtype=np.int64)
        cand = _cat(head[self.end_of(head) >= t0], np.arange(max(m, a), b, dtype=np.int64))
        # long events that start before the cut and still reach into the window (positions are in
        # start order, so they go first)
        lg = tr.long[:int(np.searchsorted(tr.long, a))]
        lg = lg[self.end_of(lg) >= t0]
        return np.concatenate([lg, cand]) if len(lg) else cand


def _as_categorical(s: pd.Series) -> pd.Categorical:
    return s.array if isinstance(s.dtype, pd.CategoricalDtype) else pd.Categorical(s.astype(str))


def _is_sorted(track: np.ndarray, start: np.ndarray) -> bool:
    """True when rows are already ordered by (track, start), as ``prof.timeline`` is (checked a block of
    `BLOCK_ROWS` rows at a time: whole-column temporaries would cost more than the index)."""
    for p in row_slices(len(track) - 1, BLOCK_ROWS):
        a, b = p.start, p.stop
        t0, t1 = track[a:b], track[a + 1:b + 1]
        if not ((t1 > t0) | ((t1 == t0) & (start[a + 1:b + 1] >= start[a:b]))).all():
            return False
    return True


def _all_blocks(values: np.ndarray, test) -> bool:
    """``test`` (an array -> bool) true of every block of `BLOCK_ROWS` of ``values``."""
    return all(test(values[p]) for p in row_slices(len(values), BLOCK_ROWS))


def _longest(d: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """The positions of ``k`` of the longest durations ``d`` (ascending; len(d) > k) and the longest of the
    others: `np.argpartition` of the durations at least the (k + 1)-th longest of every 64th, a few
    thousand where the whole track holds millions (all of them when that threshold lets through a
    quarter or more)."""
    sample = d[::64]
    cand = None
    if len(sample) > k + 1:
        threshold = np.partition(sample, -k - 1)[-k - 1]   # at least k + 1 of d are >= it
        cand = np.flatnonzero(d >= threshold)
        if len(cand) > len(d) // 4:
            cand = None
    if cand is None:
        cand = np.arange(len(d))
    top = cand[np.argpartition(d[cand], -k - 1)]
    return np.sort(top[-k:]).astype(np.int64), float(d[top[-k - 1]])


def build_index(events: pd.DataFrame, levels: bool = True) -> TimelineIndex:
    """The per-track index `lod_query` needs; build it once per timeline frame. ``levels=False`` leaves
    the coarse levels for a later `TimelineIndex.build_levels` (a view builds them in the background)."""
    return TimelineIndex(events, levels=levels)


def lod_query(index: TimelineIndex, t0: float, t1: float, width_px: int, tracks=None,
              max_glyphs: int = MAX_GLYPHS, levels: bool = True, codes: bool = False) -> pd.DataFrame:
    """The bars to draw for the window [t0, t1] (us) at ``width_px`` pixels.

    One row per bar, sorted by track and start. Columns: ``track`` (int32), ``start_us``, ``end_us``
    (float64, the event's or the merged run's extent, not clipped to the window), ``count`` (int64:
    1 for an event drawn as is, else how many events the aggregate bar stands for), ``name`` (str: the
    event's name, or ``"<count> events"``), ``op_type`` (str: the event's op type, or the run's dominant
    one by busy time), ``busy_us`` (float64: summed duration of the events in the bar), ``row`` (int64:
    position of the event in the timeline frame, -1 for an aggregate). At most about ``max_glyphs`` rows:
    when a window would need more, the merge threshold grows until it fits. ``levels=False`` merges the
    events themselves even where a coarse level would serve (the same bars, slower: for tests).
    ``codes=True``: ``name_code`` and ``type_code`` (int32 positions in ``index.name_values`` and
    ``index.type_values``; ``name_code`` -1 for an aggregate, ``type_code`` -1 for no type) in place of
    ``name`` and ``op_type``, with no text made per bar.
    """
    out = pd.DataFrame(lod_columns(index, t0, t1, width_px, tracks, max_glyphs, levels), copy=False)
    return out if codes else decode(index, out)


def lod_columns(index: TimelineIndex, t0: float, t1: float, width_px: int, tracks=None,
                max_glyphs: int = MAX_GLYPHS, levels: bool = True) -> dict[str, np.ndarray]:
    """`lod_query`'s bars with codes as a dict of arrays (`LOD_CODE_COLUMNS`), no frame made: what a view
    re-querying on every zoom needs."""
    if t1 < t0:
        t0, t1 = t1, t0
    width_px = max(int(width_px), 1)
    track_ids = sorted(index.tracks) if tracks is None else [int(t) for t in tracks]
    px = (t1 - t0) / width_px if t1 > t0 else 0.0
    built = index.levels if levels else []  # one set of levels for the whole query (they may be replaced)
    # a track merged from a level needs no cut of its events; the others are cut once
    picks = [None if _level_for(built, t, px) is not None else index.cut(t, t0, t1) for t in track_ids]
    for _ in range(8):
        out = _merge(index, built, track_ids, picks, px, t0, t1)
        if len(out["track"]) <= max_glyphs or px <= 0:
            break
        px *= 2.0 * len(out["track"]) / max_glyphs
    return out


def decode(index: TimelineIndex, bars: pd.DataFrame) -> pd.DataFrame:
    """`lod_query` bars with codes -> with texts: ``name`` (an aggregate's "<count> events") and
    ``op_type`` ("" for no type)."""
    name_code = bars["name_code"].to_numpy()
    type_code = bars["type_code"].to_numpy()
    names = np.where(name_code >= 0, _lookup(index.name_values, name_code),
                     np.char.add(bars["count"].to_numpy().astype(str), " events").astype(object))
    types = _lookup(index.type_values, type_code)
    out = bars.drop(columns=["name_code", "type_code"])
    out.insert(4, "name", names.astype(str))
    out.insert(5, "op_type", types.astype(str))
    return out


def _lookup(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    if not len(values):
        return np.full(len(codes), "", dtype=object)
    return np.where(codes >= 0, values[np.maximum(codes, 0)], "").astype(object)


def _level_for(levels: list, track: int, px: float) -> int | None:
    """The place in ``levels`` of the coarsest level of ``track`` whose pixel is at most ``px`` (None: merge
    the events)."""
    for j, (level_px, lvl) in enumerate(levels):
        if level_px <= px and track in lvl:
            return j
    return None


# A level's bars are merged from elements: parallel arrays ``start``, ``end``, ``count``, ``busy`` and
# ``single`` (the event's position where the element is one event, else -1), and the op-type votes
# ``v_elem`` (the element voted for; -1: none of them), ``v_type``, ``v_weight``. An element is a level's
# entry, or a run's events inside the window summed into one; every gap inside an element is less than the
# pixel the bars are merged at, so merging elements gives the bars of their events.


def _level_elements(index: TimelineIndex, levels: list, j: int, track: int, t0: float, t1: float) -> tuple:
    """The elements of ``track`` in [t0, t1] from level ``j``: its entries inside the window as they are, and
    each run that crosses an edge (at most one per edge: a level's runs do not overlap) cut to the window
    (`_run_in_window`). The entries are found by two searches, not a pass over the level."""
    lt = levels[j][1][track]
    b = int(np.searchsorted(lt.start, t1, side="right"))
    a = int(np.searchsorted(lt.end_max[:b], t0, side="left"))
    start, end, count = lt.start[a:b], lt.end[a:b], lt.count[a:b]
    hit = end >= t0
    cut = hit & (count > 1) & ((start < t0) | (end > t1))
    keep = np.flatnonzero(hit & ~cut)
    # each vote of the entries [a, b) -> its element (-1: an entry not kept)
    elem_of = np.full(b - a, -1, np.int64)
    elem_of[keep] = np.arange(len(keep))
    va, vb = int(lt.vote_at[a]), int(lt.vote_at[b])
    v_elem = elem_of[lt.vote_entry[va:vb] - a]
    parts = [(start[keep], end[keep], count[keep], lt.busy[a:b][keep], lt.single[a:b][keep], v_elem,
              lt.vote_type[va:vb], lt.vote_weight[va:vb])]
    n = len(keep)
    for k in np.flatnonzero(cut) + a:
        s, e, c, busy, single, v_type, v_weight = _run_in_window(index, levels, j, track, int(k), t0, t1)
        if c:
            parts.append((np.array([s]), np.array([e]), np.array([c]), np.array([busy]), np.array([single]),
                          np.full(len(v_type), n, np.int64), v_type, v_weight))
            n += 1
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(p) for p in zip(*parts))


def _run_in_window(index: TimelineIndex, levels: list, j: int, track: int, k: int, t0: float, t1: float):
    """Run ``k`` of level ``j`` cut to [t0, t1]: its events that intersect the window, summed into one
    element: (start, end, count, busy, single, its op types, their summed votes). They are one run at the level's
    pixel (an event of the run that ends before t0 is covered by an earlier one that reaches the window),
    so at any coarser pixel too. The sums come from the finer levels' entries inside the window, and from
    events only where the finest level's runs cross an edge, found by a binary search of their starts:
    a run is never opened whole (a coarse run can hold most of a track)."""
    lo_s, hi_e, n, busy, single = np.inf, -np.inf, 0, 0.0, -1
    n_types = len(index.type_values) + 1   # a vote's column: its type code + 1 (0: no type)
    votes = np.zeros(n_types)
    todo = [(j, k)]
    while todo:
        j, k = todo.pop()
        lt = levels[j][1][track]
        lo, hi = int(lt.first[k]), int(lt.last[k])
        f = _finer(levels, j, track, float(min(lt.end[k], t1) - max(lt.start[k], t0)), int(lt.count[k]))
        fine = levels[f][1][track] if f is not None else None
        if fine is None:  # the events: shorter than the level's pixel, so ending in the window means
            s = index.start[lo:hi]  # starting less than a pixel before it
            a = lo + int(np.searchsorted(s, t0 - lt.px, side="left"))
            b = lo + int(np.searchsorted(s, t1, side="right"))
            pos = np.arange(a, b)
            pos = pos[(index.dur[pos] < lt.px) & (index.end_of(pos) >= t0)]
            if not len(pos):
                continue
            dur = index.dur[pos]
            lo_s, hi_e = min(lo_s, float(index.start[pos[0]])), max(hi_e, float(index.end_of(pos).max()))
            n, busy = n + len(pos), busy + float(dur.sum())
            single = int(pos[0])
            votes += np.bincount(index.type_codes[pos] + 1, weights=dur + VOTE_EPS, minlength=n_types)
            continue
        # the finer level's entries of this run: those whose first event lies in it, less the events at
        # least this level's pixel long (entries of this level of their own)
        a, b = (int(x) for x in np.searchsorted(fine.first, [lo, hi]))
        b = a + int(np.searchsorted(fine.start[a:b], t1, side="right"))
        a = a + int(np.searchsorted(fine.end_max[a:b], t0, side="left"))
        start, end, count = fine.start[a:b], fine.end[a:b], fine.count[a:b]
        mine = (end >= t0) & ((count > 1) | (fine.busy[a:b] < lt.px))
        cut = mine & (count > 1) & ((start < t0) | (end > t1))
        whole = mine & ~cut
        todo.extend((f, int(c)) for c in np.flatnonzero(cut) + a)
        w = np.flatnonzero(whole)
        if not len(w):
            continue
        lo_s, hi_e = min(lo_s, float(start[w[0]])), max(hi_e, float(end[w].max()))
        n, busy = n + int(count[w].sum()), busy + float(fine.busy[a:b][w].sum())
        single = int(fine.single[a + w[0]])
        va, vb = int(fine.vote_at[a]), int(fine.vote_at[b])
        voted = whole[fine.vote_entry[va:vb] - a]   # (a vote of weight 0 adds nothing to its type's sum)
        votes += np.bincount(fine.vote_type[va:vb] + 1, weights=np.where(voted, fine.vote_weight[va:vb], 0.0),
                             minlength=n_types)
    voted = np.flatnonzero(votes)
    return lo_s, hi_e, n, busy, single if n == 1 else -1, voted - 1, votes[voted]


def _finer(levels: list, j: int, track: int, extent: float, count: int) -> int | None:
    """The level a run of level ``j`` that crosses the window's edge is cut with, given the span of it inside
    the window (``extent``) and its events (``count``): None (its events, searched) when they are few or
    there is no finer level, else the finest level that still has at most ~`CUT_ENTRIES` pixels in that
    span (each level down costs a few searches; each entry of a finer level a few operations)."""
    if count <= CUT_ENTRIES or j + 1 >= len(levels) or track not in levels[j + 1][1]:
        return None
    f = j + 1
    while f + 1 < len(levels) and levels[f + 1][0] * CUT_ENTRIES >= extent and track in levels[f + 1][1]:
        f += 1
    return f


def _runs(s: np.ndarray, e: np.ndarray, px: float) -> np.ndarray:
    """Where runs begin among sub-pixel spans (``s``, ``e``) in start order: a new run starts where a span
    begins more than ``px`` after every earlier one ended. A bool per span."""
    new_run = np.empty(len(s), bool)
    if len(s):
        new_run[0] = True
        np.greater(s[1:] - np.maximum.accumulate(e)[:-1], px, out=new_run[1:])
    return new_run


def _merge_events(index: TimelineIndex, pos: np.ndarray | slice, px: float) -> dict:
    """One track's bars from its events at ``pos`` (in start order; a slice: the events from one position to
    another): an event at least a pixel long drawn as itself, the rest merged into runs (`_runs`)."""
    dur = index.dur[pos]
    if isinstance(pos, slice):
        if dur.max() < px:   # every event under a pixel: merged from the arrays themselves
            return _merge_span(index, pos.start, dur, px)
        pos = np.arange(pos.start, pos.stop, dtype=np.int64)
    small = dur < px
    big, sp = pos[~small], pos[small]
    s, e = index.start[sp], index.end_of(sp)
    new_run = _runs(s, e, px)
    firsts = np.flatnonzero(new_run)
    bounds = np.empty(len(firsts) + 1, np.int64)   # (np.diff with append= costs ~40 µs a call)
    bounds[:-1], bounds[-1] = firsts, len(sp)
    r_count = bounds[1:] - bounds[:-1]
    r_type = _dominant(np.cumsum(new_run) - 1, index.type_codes[sp], dur[small] + VOTE_EPS, len(firsts),
                       len(index.type_values))
    runs = (s[firsts], np.maximum.reduceat(e, firsts) if len(sp) else np.zeros(0), r_count,
            np.add.reduceat(dur[small], firsts) if len(sp) else np.zeros(0),
            np.where(r_count == 1, sp[firsts], -1), r_type)
    return _bar_columns(index, big, index.start[big], index.end_of(big), index.dur[big], runs)


def _merge_span(index: TimelineIndex, lo: int, dur: np.ndarray, px: float) -> dict:
    """`_merge_events` of the events from position ``lo`` on, ``dur`` their durations, every one under a
    pixel: the same runs, read from views of the index's arrays a block of `BLOCK_ROWS` events at a time
    (no positions made, nothing gathered, each block's temporaries in the CPU's cache)."""
    n = len(dur)
    start = index.start[lo:lo + n]
    new_run = np.zeros(n, bool)
    block_firsts, ends = [], []
    latest = -np.inf   # the latest end of the events before the block
    for a in range(0, n, BLOCK_ROWS):
        b = min(a + BLOCK_ROWS, n)
        s = start[a:b]
        e = s + dur[a:b]
        # A run can only begin where an event starts more than a pixel after the one before it ends (the
        # latest end before it is at least that end): the latest end is found at those events alone, as
        # the running maximum of the ends between them.
        at = np.flatnonzero(s[1:] - e[:-1] > px) + 1
        at = np.concatenate((np.zeros(1, np.int64), at))
        before = np.empty(len(at) + 1)   # the latest end before each of them, then before the next block
        before[0] = latest
        np.maximum(latest, np.maximum.accumulate(np.maximum.reduceat(e, at)), out=before[1:])
        new = s[at] - before[:-1] > px
        if not a:
            new[0] = True
        at = at[new]
        new_run[a + at] = True
        block_firsts.append(at + a)
        ends.append(before[:-1][new])   # where a run begins, the end of the one before it
        latest = float(before[-1])
    if np.isnan(latest):   # (a NaN start: the runs' ends as the events' own merge finds them)
        return _merge_events(index, np.arange(lo, lo + n, dtype=np.int64), px)
    firsts = np.concatenate(block_firsts)
    n_runs = len(firsts)
    bounds = np.empty(n_runs + 1, np.int64)
    bounds[:-1], bounds[-1] = firsts, n
    r_count = bounds[1:] - bounds[:-1]
    # a run's first event ends after every event before it, so the latest end before the next run's
    # first event is this run's end
    r_end = np.r_[np.concatenate(ends)[1:], latest]
    n_values = len(index.type_values)
    n_types = n_values + 1
    types = index.type_codes[lo:lo + n]
    if not n_values:
        r_type = np.full(n_runs, -1, dtype=np.int32)
    elif (n_runs + 1) * n_types <= _DENSE_VOTES:
        # the (run, type) table of `_dominant`, summed block by block in the events' order (np.add.at
        # adds one by one, as np.bincount does: the same sums)
        table = np.zeros(n_runs * n_types)
        runs_before = 0
        for a, begin in zip(range(0, n, BLOCK_ROWS), block_firsts):
            b = min(a + BLOCK_ROWS, n)
            if len(begin) == 0 or (len(begin) == 1 and begin[0] == a):   # the block is in one run
                row = table[(runs_before + len(begin) - 1) * n_types:][:n_types]
                np.add.at(row, (types[a:b] + 1).astype(np.intp), dur[a:b] + VOTE_EPS)
                runs_before += len(begin)
                continue
            run = np.cumsum(new_run[a:b]) + (runs_before - 1)
            np.add.at(table, run * n_types + (types[a:b] + 1), dur[a:b] + VOTE_EPS)
            runs_before = int(run[-1]) + 1
        r_type = (table.reshape(n_runs, n_types).argmax(axis=1) - 1).astype(np.int32)
    else:
        r_type = _dominant(np.cumsum(new_run) - 1, types, dur + VOTE_EPS, n_runs, n_values)
    runs = (start[firsts], r_end, r_count, np.add.reduceat(dur, firsts), np.where(r_count == 1, firsts + lo, -1),
            r_type)
    none = np.zeros(0, np.int64)
    return _bar_columns(index, none, np.zeros(0), np.zeros(0), np.zeros(0), runs)


def _merge_elements(index: TimelineIndex, el: tuple, px: float) -> dict:
    """One track's bars from a level's elements (as `_merge_events` merges events: a one-event element at
    least a pixel long drawn as itself, the rest merged into runs)."""
    start, end, count, busy, single, v_elem, v_type, v_weight = el
    big = (single >= 0) & (busy >= px)   # (a single event's busy time is its duration)
    sm = np.flatnonzero(~big)
    s = start[sm]
    if len(s) > 1 and not (s[1:] >= s[:-1]).all():   # elements come in start order, but for cut runs
        sm = sm[np.argsort(s, kind="stable")]
        s = start[sm]
    e = end[sm]
    new_run = _runs(s, e, px)
    firsts = np.flatnonzero(new_run)
    n_runs = len(firsts)
    # element -> its run; the last slot (a vote's element -1) and the events drawn as themselves: n_runs,
    # a row of votes that is dropped
    run_of = np.full(len(start) + 1, n_runs, np.int64)
    run_of[sm] = np.cumsum(new_run) - 1
    r_count = np.add.reduceat(count[sm], firsts) if n_runs else np.zeros(0, np.int64)
    runs = (s[firsts], np.maximum.reduceat(e, firsts) if n_runs else np.zeros(0), r_count,
            np.add.reduceat(busy[sm], firsts) if n_runs else np.zeros(0),
            np.where(r_count == 1, single[sm[firsts]], -1),
            _dominant(run_of[v_elem], v_type, v_weight, n_runs, len(index.type_values)))
    bg = np.flatnonzero(big)
    return _bar_columns(index, single[bg], start[bg], end[bg], busy[bg], runs)


def _bar_columns(index: TimelineIndex, one: np.ndarray, start: np.ndarray, end: np.ndarray, dur: np.ndarray,
                 runs: tuple) -> dict:
    """The bar columns of a track in start order: the events drawn as themselves (their positions ``one``,
    extents and durations) and the ``runs`` (start, end, count, busy, the event of a one-event run else -1,
    dominant type code)."""
    r_start, r_end, r_count, r_busy, r_single, r_type = runs
    in_one = r_single >= 0
    r_event = np.maximum(r_single, 0)
    runs = {"start_us": r_start, "end_us": r_end, "count": r_count.astype(np.int64, copy=False),
            "name_code": np.where(in_one, _name_codes(index, r_event), -1).astype(np.int32, copy=False),
            "type_code": r_type.astype(np.int32, copy=False), "busy_us": r_busy,
            "row": np.where(in_one, index.rows(r_event), -1)}
    if not len(one):   # the runs are in start order already
        return runs
    ones = {"start_us": start, "end_us": end, "count": np.ones(len(one), np.int64),
            "name_code": _name_codes(index, one).astype(np.int32, copy=False),
            "type_code": _type_codes(index, one).astype(np.int32, copy=False), "busy_us": dur,
            "row": index.rows(one)}
    if not len(r_start):
        return ones
    order = np.argsort(np.concatenate((start, r_start)), kind="stable")
    return {k: np.concatenate((v, runs[k]))[order] for k, v in ones.items()}


def _cat(*parts) -> np.ndarray:
    """``np.r_[parts]`` for arrays and scalars, without its indexing machinery (~20 µs a call: a query
    makes hundreds)."""
    return np.concatenate([p if isinstance(p, np.ndarray) else np.atleast_1d(p) for p in parts])


def _name_codes(index: TimelineIndex, pos: np.ndarray) -> np.ndarray:
    return index.name_codes[pos] if len(index.name_values) else np.full(len(pos), -1, np.int32)


def _type_codes(index: TimelineIndex, pos: np.ndarray) -> np.ndarray:
    return index.type_codes[pos] if len(index.type_values) else np.full(len(pos), -1, np.int32)


_LOD_DTYPES = {"track": np.int32, "start_us": np.float64, "end_us": np.float64, "count": np.int64,
               "name_code": np.int32, "type_code": np.int32, "busy_us": np.float64, "row": np.int64}


def _merge(index: TimelineIndex, levels: list, track_ids, picks, px: float, t0: float, t1: float) -> dict:
    cols = {c: [] for c in LOD_CODE_COLUMNS}
    for trk, pos in zip(track_ids, picks):
        j = _level_for(levels, trk, px)
        if j is not None:
            el = _level_elements(index, levels, j, trk, t0, t1)
            if not len(el[0]):
                continue
            bars = _merge_elements(index, el, px)
        else:
            pos = index.cut(trk, t0, t1) if pos is None else pos
            if (pos.stop <= pos.start) if isinstance(pos, slice) else not len(pos):
                continue
            bars = _merge_events(index, pos, px)
        cols["track"].append(np.full(len(bars["start_us"]), trk, dtype=np.int32))
        for name, v in bars.items():
            cols[name].append(v)
    return {c: (np.concatenate(v) if v else np.zeros(0, _LOD_DTYPES[c])).astype(_LOD_DTYPES[c], copy=False)
            for c, v in cols.items()}


def _dominant(run: np.ndarray, type_codes: np.ndarray, weight: np.ndarray, n_runs: int, n_values: int):
    """Per run, the code of the op type with the largest summed vote ``weight`` (an event's duration +
    `VOTE_EPS`; ties: the smaller code); -1 where the run has no typed event. A vote of run ``n_runs``
    counts for none."""
    if not n_values:
        return np.full(n_runs, -1, dtype=np.int32)
    n_types = n_values + 1  # code -1 (no type) gets column 0
    key = run * n_types + (type_codes + 1)
    if (n_runs + 1) * n_types <= _DENSE_VOTES:
        table = np.bincount(key, weights=weight, minlength=(n_runs + 1) * n_types)[:n_runs * n_types]
        codes = table.reshape(n_runs, n_types).argmax(axis=1) - 1
    else:  # many runs and many types: sum over the (run, type) pairs that occur
        ours = run < n_runs
        uniq, inv = np.unique(key[ours], return_inverse=True)
        w = np.bincount(inv.ravel(), weights=weight[ours])
        run_of = uniq // n_types
        order = np.lexsort((-w, run_of))
        first = _cat(True, run_of[order][1:] != run_of[order][:-1])
        codes = np.full(n_runs, -1, dtype=np.int64)
        codes[run_of[order][first]] = (uniq[order][first] % n_types) - 1
    return codes.astype(np.int32)


def search(events: pd.DataFrame, pattern: str, column: str = "name", case: bool = False) -> pd.DataFrame:
    """Rows of ``events`` whose ``column`` (``name`` or ``op_type``) matches the regular expression
    ``pattern`` (``re.search``; case-insensitive unless ``case``). The match runs once per distinct
    value, so it is fast on category columns of millions of events. Index and columns are kept."""
    rx = re.compile(pattern, 0 if case else re.IGNORECASE)
    col = events[column]
    cat = _as_categorical(col)
    hit = np.array([bool(rx.search(str(v))) for v in cat.categories], dtype=bool)
    mask = hit[cat.codes] & (cat.codes >= 0) if len(hit) else np.zeros(len(events), dtype=bool)
    return events[mask]


def range_stats(events: pd.DataFrame, t0: float, t1: float, tracks=None, by_track: bool = False) -> pd.DataFrame:
    """Per op type, within the window [t0, t1] (us): ``op_type``, ``count`` (events intersecting the
    window), ``total_us`` (their time inside the window: each event clipped to [t0, t1]), ``share_pct``
    (``total_us`` as a percentage of the summed clipped time of all types), ``avg_us`` (total/count).
    Sorted by ``total_us`` descending. ``tracks`` limits the statistics to those tracks.

    ``by_track``: one row per (``track``, op type) instead, ``share_pct`` within its track, tracks in
    order. Tracks overlap in time (a stream and the HCCL plane that waits on it record the same tasks),
    so summing types over all tracks counts such work twice; per track it does not."""
    if t1 < t0:
        t0, t1 = t1, t0
    start = events["start_us"].to_numpy(dtype=np.float64)
    end = start + np.nan_to_num(events["dur_us"].to_numpy(dtype=np.float64))
    mask = (start <= t1) & (end >= t0)
    if tracks is not None:
        mask &= events["track"].isin(list(tracks)).to_numpy()
    clipped = np.minimum(end, t1) - np.maximum(start, t0)
    df = pd.DataFrame({"op_type": events["op_type"].astype(str).to_numpy()[mask], "clipped": clipped[mask]})
    keys = ["op_type"]
    if by_track:
        df.insert(0, "track", events["track"].to_numpy()[mask])
        keys = ["track", "op_type"]
    out = df.groupby(keys, sort=False).agg(count=("clipped", "size"), total_us=("clipped", "sum")).reset_index()
    if by_track:
        total = out.groupby("track")["total_us"].transform("sum")
        out["share_pct"] = np.where(total > 0, out["total_us"] / total.where(total > 0, 1) * 100.0, 0.0)
    else:
        total = out["total_us"].sum()
        out["share_pct"] = out["total_us"] / total * 100.0 if total > 0 else 0.0
    out["avg_us"] = out["total_us"] / out["count"]
    order = (["track"] if by_track else []) + ["total_us", "op_type"]
    out = out.sort_values(order, ascending=[True] * by_track + [False, True], kind="stable")
    out["count"] = out["count"].astype(np.int64)
    return out.reset_index(drop=True)[keys + ["count", "total_us", "share_pct", "avg_us"]]


# Rows per pass of a computation over every event (`density`, the index's end): its temporaries stay
# ~100 MB whatever the timeline's length.
_PASS_ROWS = 4_000_000


def row_passes(n: int) -> list[slice]:
    """Slices of `_PASS_ROWS` rows covering ``n`` rows: a computation over every event done pass by pass."""
    return row_slices(n, _PASS_ROWS)


def events_end(start: np.ndarray, dur: np.ndarray) -> float:
    """When the last of some events ends (us; a missing duration counts as 0), pass by pass. At least one
    event."""
    return max(float((start[p] + finite(dur[p])).max()) for p in row_passes(len(start)))


def finite(x: np.ndarray) -> np.ndarray:
    """``np.nan_to_num(x)`` (NaN -> 0, ±inf -> the largest finite float); ``x`` itself where every value is
    finite, as durations almost always are (one pass to find out, where the replacement takes three)."""
    ok = np.isfinite(x)
    if ok.all():
        return x
    big = np.finfo(np.float64).max
    return np.where(ok, x, np.where(np.isnan(x), 0.0, np.copysign(big, x)))


def density(events: pd.DataFrame, bins: int = 400, t0: float | None = None, t1: float | None = None
            ) -> pd.DataFrame:
    """Minimap density: events starting in each of ``bins`` equal time bins per track.

    Columns: ``track`` (int32), ``bin`` (int64), ``start_us``, ``end_us`` (float64 bin edges),
    ``count`` (int64). Every (track, bin) pair is present (zeros included), so it draws as an image.
    The range defaults to the whole timeline."""
    start = events["start_us"].to_numpy(dtype=np.float64)
    dur = events["dur_us"].to_numpy(dtype=np.float64)
    track = events["track"].to_numpy()
    n = len(start)
    pieces = row_passes(n)
    lo = float(start.min()) if t0 is None and n else float(t0 or 0.0)
    hi = events_end(start, dur) if t1 is None and n else float(t1 if t1 is not None else lo + 1.0)
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    if not n:
        tracks = np.zeros(0, np.int64)
    elif track.min() < 0:  # track ids are display rows (>= 0); any other frame: the slower unique
        tracks = np.unique(track)
    else:
        tracks = np.flatnonzero(np.bincount(track))
    counts = np.zeros(len(tracks) * bins, dtype=np.int64)
    for p in pieces:  # a pass per block of rows: the whole timeline's temporaries would be GBs on a huge trace
        s, t = start[p], track[p]
        sel = (s >= lo) & (s <= hi)
        b = np.clip(((s[sel] - lo) / (hi - lo) * bins).astype(np.int64), 0, bins - 1)
        counts += np.bincount(np.searchsorted(tracks, t[sel]) * bins + b, minlength=len(counts))
    return pd.DataFrame({"track": np.repeat(tracks, bins).astype(np.int32),
                         "bin": np.tile(np.arange(bins, dtype=np.int64), len(tracks)),
                         "start_us": np.tile(edges[:-1], len(tracks)), "end_us": np.tile(edges[1:], len(tracks)),
                         "count": counts.astype(np.int64)})


__all__ = ["TimelineIndex", "build_index", "lod_query", "lod_columns", "decode", "search", "range_stats", "density",
           "LOD_COLUMNS", "LOD_CODE_COLUMNS"]
