"""What both builds of a trace share: `TraceData` (the four frames and the origin), the frames' declared
columns, the rule for events that cannot be placed (and its warnings), the matching of B/E events, and
the small frame helpers."""
from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ...errors import MalformedFileError
from ...schema import FRAMES
from .._util import MAX_DURATION_US, warn_partial
from .parse import KIND_B, KIND_C, KIND_E, KIND_NO_PH, KIND_S, KIND_T, KIND_X

# The longest event a trace can hold, `MAX_DURATION_US`: 30 days in microseconds (a profiled job runs
# hours, not months); the table readers bound operator times by it too (`_util.drop_impossible_times`).

# The frames' columns as declared (nbprofiler.schema)
TIMELINE_COLUMNS = FRAMES["timeline"].required
TRACK_COLUMNS = FRAMES["timeline_tracks"].required

class TraceData:
    """Everything parsed from a run's trace source(s): the four frames and the absolute origin.
    ``flows`` may still be paired on a background thread when a load returns (`disk.build_in_memory`):
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


# -- events that cannot be placed ----------------------------------------------------------------------
def event_kinds(kind: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(complete X, begin/end B/E, flow s/t/f, counter C) masks of the events' ``kind`` codes: the split both
    builds (`memory.build`, `disk`'s batch digest) make before anything else."""
    return kind == KIND_X, (kind == KIND_B) | (kind == KIND_E), (kind >= KIND_S) & (kind <= KIND_T), kind == KIND_C


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


def pair_begin_end(kind, rows, row_track, rel_us, paths):
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


# -- small helpers ----------------------------------------------------------------------------------------
def distinct_categorical(codes: np.ndarray, categories) -> pd.Categorical:
    """The Categorical of ``codes`` (valid, -1 for missing) into ``categories`` (a sequence of str, or an
    Arrow string array, which becomes the categories without a copy per value), values that are distinct
    by construction (a dictionary's keys): pandas' public constructor hashes every category to check
    that, ~9 ms for the 55k names of a 100 MB trace, on the thread the load waits for."""
    categories = pd.Index(categories, dtype=str)
    return pd.Categorical._simple_new(codes, pd.CategoricalDtype._from_fastpath(categories, ordered=False))


def select_rows(table: pa.Table, columns: list[str], mask: np.ndarray) -> pa.Table:
    """The rows of ``mask`` (file order) of some columns. A filter, not a take: Arrow's take on a
    chunked column first concatenates all of it, even for a handful of rows."""
    return table.select(columns).filter(pa.array(mask))


def empty_frame(columns, dtypes) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, str)) for c in columns})
