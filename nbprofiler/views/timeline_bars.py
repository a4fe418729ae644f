"""The timeline's bars as the page gets them: tracks in display order, and `lod_query` bars with codes
turned into numeric columns, with the `Dictionary` (names, op types, colours) the page decodes them with.
Shared by the notebook's `TimelineView` and the report's tiles (`timeline_tiles`)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..analysis.timeline import BLOCK_ROWS, row_passes
from . import theme

AGGREGATE_MIN_ALPHA = 0.6     # merged bars: opaque enough to see at one pixel wide
_SOURCE_COLUMNS = ["y", "left", "right", "dur_us", "busy_us", "count", "name_code", "type_code", "alpha", "row"]


# -- tracks -----------------------------------------------------------------------------------------
def track_table(tracks_df: pd.DataFrame, order: list[int] | None = None) -> pd.DataFrame:
    """Tracks in display order: ``track`` (int), ``row`` (int, 0 = top), ``label`` (str "process / thread").

    Default order: by ``process_sort``, ``process``, ``thread_sort``, ``thread`` where present (the trace's
    own sort metadata), else by track id. ``order``: track ids to put first, in that order (pinned
    tracks); the rest follow in default order.
    """
    df = tracks_df.copy()
    keys = [c for c in ("process_sort", "process", "thread_sort", "thread", "track") if c in df.columns]
    df = df.sort_values(keys, kind="stable", na_position="last") if keys else df
    default = [int(t) for t in df["track"]]
    pinned = [int(t) for t in (order or []) if int(t) in set(default)]
    pinned = list(dict.fromkeys(pinned))
    ordered = pinned + [t for t in default if t not in set(pinned)]
    labels = {int(r.track): _track_label(r) for r in df.itertuples()}
    return pd.DataFrame({"track": ordered, "row": range(len(ordered)), "label": [labels[t] for t in ordered]})


def track_rows(tracks: pd.DataFrame, track_ids) -> np.ndarray:
    """The display row (`track_table`'s ``row``) of each id in ``track_ids`` (int32; -1 for an id that is
    not a shown track, or NaN)."""
    return rows_of(row_lookup(tracks), track_ids)


def row_lookup(tracks: pd.DataFrame) -> np.ndarray:
    """`track_table`'s rows as an array by track id, for `rows_of` (a view keeps it per track order: reading
    the frame's columns costs more than the lookup itself)."""
    row_of = np.full(int(tracks["track"].max()) + 2 if len(tracks) else 1, -1, np.int32)
    row_of[tracks["track"].to_numpy(dtype=np.int64)] = tracks["row"].to_numpy(dtype=np.int64)
    return row_of


def rows_of(row_of: np.ndarray, track_ids) -> np.ndarray:
    """The display row of each id in ``track_ids`` from a `row_lookup` (-1: not shown, or NaN)."""
    ids = np.asarray(track_ids)
    if ids.dtype.kind == "i":   # an id off the table is clipped onto its last entry, -1 (-1 itself is it)
        return row_of[np.clip(ids, -1, len(row_of) - 1).astype(np.intp)]   # (an intp index is gathered faster)
    inside = (ids >= 0) & (ids < len(row_of) - 1)  # NaN is neither
    return row_of[np.where(inside, ids, len(row_of) - 1).astype(np.int64)]


def _track_label(r) -> str:
    process = str(getattr(r, "process", "") or getattr(r, "pid", ""))
    thread = str(getattr(r, "thread", "") or getattr(r, "tid", ""))
    return f"{process} / {thread}" if thread and thread != process else process


# -- data for the bars ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Dictionary:
    """What the page is sent once and the bars' codes point into: ``names`` and ``types`` (text by
    `lod_query`'s ``name_code`` / ``type_code``) and ``colors``, the colour of each type code (index 0:
    no type, code k at k + 1)."""
    names: list
    types: list
    colors: list

    def name(self, code: int, count: int = 1) -> str:
        return f"{count} events" if count > 1 else self.names[code] if 0 <= code < len(self.names) else ""

    def type(self, code: int) -> str:
        return self.types[code] if 0 <= code < len(self.types) else ""


def dictionary_of(index) -> Dictionary:
    """The `Dictionary` of a `TimelineIndex`. Colours go to the types with the most busy time first, over
    the whole timeline, so the types that fill the view are the most distinct and keep their colour
    through every zoom."""
    n = len(index.type_values)
    busy = np.zeros(n + 1)
    for p in row_passes(index.n):
        # np.add.at adds one event at a time in their order, as np.bincount does (the same sums), a block at a
        # time: the codes' int64 copy stays in the CPU's cache instead of a whole pass's going to memory
        part = np.zeros(n + 1)
        for a in range(p.start, p.stop, BLOCK_ROWS):
            b = min(a + BLOCK_ROWS, p.stop)
            np.add.at(part, index.type_codes[a:b].astype(np.intp) + 1, index.dur[a:b])
        busy += part
    index._release()
    types = [str(t) for t in index.type_values]
    order = np.argsort(-busy[1:], kind="stable")
    by_busy = theme.op_type_colors([types[k] for k in order])
    colors = [theme.AXIS] + [""] * n
    for k, color in zip(order, by_busy):
        colors[int(k) + 1] = color
    return Dictionary(names=[str(x) for x in index.name_values], types=types, colors=colors)


def bar_data(bars, tracks: pd.DataFrame, min_width_us: float = 0.0, row_of: np.ndarray | None = None) -> dict:
    """Column data of ``timeline_src`` from `lod_query` bars with codes (``codes=True``, or `lod_columns`'
    arrays): numbers only, sent to the page as binary arrays. ``y`` (the track's row), ``left``, ``right``, ``dur_us``,
    ``busy_us`` (µs), ``count``, ``name_code`` (the event's name code; for a bar of several merged
    events, minus their count), ``type_code`` (the event's or the run's dominant op type; -1: none),
    ``alpha`` and ``row`` (the event's row in the timeline frame, -1 for a merged bar). Bars of tracks not
    in ``tracks`` are dropped. A merged bar is as opaque as its events keep it busy, never paler than
    `AGGREGATE_MIN_ALPHA` (a sub-pixel bar at low alpha all but vanishes). Every bar is drawn at least
    ``min_width_us`` wide (a pixel at the query's detail: the bars have no outline, which cost the page
    as much as their fill), ``dur_us`` keeping its true length. ``row_of``: ``tracks``' `row_lookup`, where
    the caller keeps it."""
    if not len(bars["track"]) or not len(tracks):
        return {c: np.zeros(0) for c in _SOURCE_COLUMNS}
    col = {c: np.asarray(bars[c]) for c in ("track", "start_us", "end_us", "count", "busy_us", "name_code",
                                            "type_code", "row")}
    y = rows_of(row_lookup(tracks) if row_of is None else row_of, col["track"].astype(np.int64, copy=False))
    keep = y >= 0
    if not keep.all():
        col, y = {c: v[keep] for c, v in col.items()}, y[keep]
    start = col["start_us"].astype(np.float64, copy=False)
    dur = col["end_us"].astype(np.float64, copy=False) - start
    count = col["count"].astype(np.int64, copy=False)
    busy = col["busy_us"].astype(np.float64, copy=False)
    merged = count > 1
    alpha = np.where(merged, np.clip(busy / np.maximum(dur, 1e-9), AGGREGATE_MIN_ALPHA, 1.0), 0.9)
    return {"y": y.astype(np.int32), "left": start, "right": start + np.maximum(dur, min_width_us), "dur_us": dur,
            "busy_us": busy, "count": count.astype(np.int32),
            "name_code": np.where(merged, -count, col["name_code"]).astype(np.int32),
            "type_code": col["type_code"].astype(np.int32), "alpha": alpha.astype(np.float32),
            "row": col["row"].astype(np.int64)}


def bar_table(data: dict, dictionary: Dictionary, tracks: pd.DataFrame) -> pd.DataFrame:
    """`bar_data`'s columns as the page shows them: ``name`` ("<count> events" for merged bars),
    ``op_type``, ``track_label``, ``color``, ``start_us``, ``dur_us``, ``busy_us``, ``count``, ``row``."""
    count = np.asarray(data["count"], dtype=np.int64)
    code = np.asarray(data["name_code"], dtype=np.int64)
    types = np.asarray(data["type_code"], dtype=np.int64)
    labels = tracks.set_index("row")["label"]
    return pd.DataFrame({
        "name": [dictionary.name(int(c), int(n)) for c, n in zip(code, count)],
        "op_type": [dictionary.type(int(t)) for t in types],
        "track_label": labels.reindex(np.asarray(data["y"], dtype=np.int64)).fillna("").astype(str).to_numpy(),
        "color": [dictionary.colors[int(t) + 1] if -1 <= t < len(dictionary.colors) - 1 else theme.AXIS
                  for t in types],
        "start_us": np.asarray(data["left"], dtype=np.float64), "dur_us": np.asarray(data["dur_us"], dtype=np.float64),
        "busy_us": np.asarray(data["busy_us"], dtype=np.float64), "count": count,
        "row": np.asarray(data["row"], dtype=np.int64)})
