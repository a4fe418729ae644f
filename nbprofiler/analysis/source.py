"""Where an operator was called from: the Python stacks of its calls (`call_stacks`), the first frame of each
in the user's own code, and whether that file is on this machine.

An operator's stacks are its own events' where they carry one (a framework op or API call recorded with
``with_stack``). A device kernel carries none: its stack is the one of the framework op that launched it,
found by following the timeline's flow arrows back from the kernel (``async_npu``, ``HostToDevice``,
``async_task_queue``, at most `MAX_HOPS` arrows) to the innermost event with a stack enclosing the
arrow's tail on its thread.

User code is decided by the path alone (`is_user_file`): a frame is *not* the user's when its file is in an
installed package (a ``site-packages`` or ``dist-packages`` folder), in Python's standard library (under
``lib/pythonX.Y/``, ``lib/pythonXY.zip`` or a ``<frozen ...>``/``<string>`` pseudo-file), or inside a
framework's own package folder (`FRAMEWORK_PACKAGES`: ``torch``, ``torch_npu``, ``mindspore``, e.g. a
source checkout of PyTorch). Everything else is the user's.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd

FRAMEWORK_PACKAGES = ("torch", "torch_npu", "mindspore", "mindspore_lite", "torchvision", "apex")
MAX_HOPS = 3
MAX_CALLS = 200     # the op's calls followed back to their stacks (the first ones; later calls repeat them)

_INSTALLED = re.compile(r"(^|[\\/])(site-packages|dist-packages)([\\/]|$)")
_STDLIB = re.compile(r"(^|[\\/])lib(64)?[\\/]python\d+(\.\d+)?[tdm]*([\\/]|\.zip)", re.I)
_SEPARATORS = re.compile(r"[\\/]")


def is_user_file(path: str) -> bool:
    """True for a frame file in the user's own code (see the module's docstring for the rule)."""
    if not path or path.startswith("<"):
        return False
    if _INSTALLED.search(path) or _STDLIB.search(path):
        return False
    parts = [p for p in _SEPARATORS.split(path) if p]
    return not any(p in FRAMEWORK_PACKAGES for p in parts[:-1])


def local_file(path: str) -> str | None:
    """The file on this machine a frame names (absolute; a relative path is taken from the current folder),
    or None where there is none."""
    if not path or path.startswith("<"):
        return None
    try:
        p = Path(path).expanduser()
        return str(p.resolve()) if p.is_file() else None
    except (OSError, ValueError):   # a name no file system can hold (NUL, too long, a loop)
        return None


@dataclasses.dataclass
class SourceStack:
    """One distinct stack the op was called with: ``calls`` (how many of the op's calls had it, among the
    ones followed), ``frames`` (depth, file, line, function, ``user``: in user code, ``local``: the file
    on this machine or None), ``user_depth`` (the first user frame's depth, None if none)."""

    stack: int
    calls: int
    event: str
    frames: pd.DataFrame
    user_depth: int | None

    @property
    def user_frame(self) -> dict | None:
        """The first frame in user code (where to look), as a dict of the frame's columns; None if none."""
        if self.user_depth is None:
            return None
        return self.frames[self.frames["depth"] == self.user_depth].iloc[0].to_dict()


@dataclasses.dataclass
class OpSource:
    """`op_source`'s answer: the op's ``stacks`` (most frequent first), ``via`` ("own": the op's events
    carry them; "launch": the framework op that launched the kernel does), ``reason`` why there are
    none (None when there are)."""

    op_name: str
    stacks: list[SourceStack]
    via: str | None
    reason: str | None = None

    @property
    def user_frame(self) -> dict | None:
        """The user frame of the most frequent stack that has one."""
        return next((s.user_frame for s in self.stacks if s.user_depth is not None), None)


class _Spans:
    """Intervals (``track``, ``start``, ``end``) sorted by track then start, for "which enclose time t on
    track k" in two binary searches (the scan is bounded by the track's longest interval)."""

    def __init__(self, track, start, end, payload: pd.DataFrame | None = None):
        order = np.lexsort((start, track))
        self.track = np.asarray(track, dtype="int64")[order]
        self.start = np.asarray(start, dtype="float64")[order]
        self.end = np.asarray(end, dtype="float64")[order]
        self.payload = None if payload is None else payload.iloc[order].reset_index(drop=True)
        keys, first = np.unique(self.track, return_index=True)
        bounds = np.append(first, len(self.track))
        self.bounds = {int(k): (int(a), int(b)) for k, a, b in zip(keys, bounds[:-1], bounds[1:])}
        self.longest = {k: float(np.max(self.end[a:b] - self.start[a:b])) if b > a else 0.0
                        for k, (a, b) in self.bounds.items()}

    def enclosing(self, track: int, t: float) -> np.ndarray:
        """Row positions of the intervals on ``track`` that hold ``t``."""
        if track not in self.bounds:
            return np.empty(0, dtype="int64")
        a, b = self.bounds[track]
        lo = a + int(np.searchsorted(self.start[a:b], t - self.longest[track] - _EPS, "left"))
        hi = a + int(np.searchsorted(self.start[a:b], t + _EPS, "right"))
        rows = np.arange(lo, hi)
        return rows[self.end[lo:hi] >= t - _EPS]

    def within(self, track: int, lo: float, hi: float) -> np.ndarray:
        """Row positions of the intervals on ``track`` that start in [lo, hi]."""
        if track not in self.bounds:
            return np.empty(0, dtype="int64")
        a, b = self.bounds[track]
        return np.arange(a + int(np.searchsorted(self.start[a:b], lo - _EPS, "left")),
                         a + int(np.searchsorted(self.start[a:b], hi + _EPS, "right")))


_EPS = 1e-6   # us: the times are exact to the ns, compared as floats


class _Walk:
    """What `op_source` reads of a profile, indexed once per profile: the stacked events, the timeline's
    events and arrows (by the track of their head), and the tracks of each host thread."""

    def __init__(self, prof):
        cs, timeline = prof.call_stacks, prof.timeline
        self.call_stacks = cs
        self.timeline = timeline
        ev = cs.drop_duplicates(["track", "start_us", "name"])[["track", "name", "start_us", "stack"]]
        on = timeline[timeline["track"].isin(ev["track"].unique())]
        durs = pd.DataFrame({"track": on["track"].to_numpy(), "start_us": on["start_us"].to_numpy(),
                             "dur_us": on["dur_us"].to_numpy(), "name": on["name"].astype(str).to_numpy()})
        ev = ev.merge(durs.drop_duplicates(["track", "start_us", "name"]), on=["track", "start_us", "name"],
                      how="left").reset_index(drop=True)
        self.stacked = _Spans(ev["track"], ev["start_us"], ev["start_us"] + ev["dur_us"].fillna(0.0),
                              ev[["name", "stack"]])
        self.events = _Spans(timeline["track"], timeline["start_us"], timeline["start_us"] + timeline["dur_us"])
        flows = prof.timeline_flows
        if flows is None or flows.empty:
            flows = pd.DataFrame({c: pd.Series(dtype="float64") for c in
                                  ("start_track", "start_us", "end_track", "end_us")})
        flows = flows.dropna(subset=["start_track", "end_track"])
        self.arrows = _Spans(flows["end_track"], flows["end_us"], flows["end_us"],
                             flows[["start_track", "start_us"]])
        self.siblings: dict[int, list[int]] = {}
        tracks = prof.timeline_tracks
        if tracks is not None and not tracks.empty:
            for _, g in tracks.groupby("tid", sort=False):
                for t in g["track"]:
                    self.siblings[int(t)] = [int(x) for x in g["track"]]

    def own(self, names=None, track: int | None = None, start_us: float | None = None) -> list[tuple[int, str]]:
        """(stack id, name) of the stacked events named ``names`` (or the one at ``track``/``start_us``)."""
        p = self.stacked.payload
        mask = np.ones(len(p), dtype=bool)
        if names is not None:
            mask &= p["name"].astype(str).isin(names).to_numpy()
        if track is not None:
            mask &= (self.stacked.track == track) & (self.stacked.start == start_us)
        return [(int(k), str(n)) for k, n in zip(p["stack"][mask], p["name"][mask])]

    def launched(self, track: int, start_us: float, dur_us: float) -> tuple[int, str] | None:
        """(stack id, name) of the innermost stacked event found back along the arrows from the event at
        ``track``/``start_us``: on its host thread's tracks, the stacked events holding the point; else the
        arrows whose heads fall in the events around the point, followed to their tails (`MAX_HOPS`)."""
        points = [(track, start_us, start_us + dur_us)]
        for _ in range(MAX_HOPS + 1):
            nxt = []
            for track, lo, hi in points:
                same = self.siblings.get(track, [track])
                found = [(t, r) for t in same for r in self.stacked.enclosing(t, lo)]
                if found:
                    # the innermost: the latest start, the shortest of those
                    r = max((r for _, r in found), key=lambda r: (self.stacked.start[r], -self.stacked.end[r]))
                    row = self.stacked.payload.iloc[r]
                    return int(row["stack"]), str(row["name"])
                for t in same:   # the calls around the point on its thread, and the arrows into them
                    around = self.events.enclosing(t, lo)
                    if len(around):
                        lo = min(lo, float(self.events.start[around].min()))
                        hi = max(hi, float(self.events.end[around].max()))
                for t in same:
                    for r in self.arrows.within(t, lo, hi):
                        a = self.arrows.payload.iloc[r]
                        nxt.append((int(a["start_track"]), float(a["start_us"]), float(a["start_us"])))
            if not nxt:
                return None
            points = list(dict.fromkeys(nxt))
        return None


def _walk(prof) -> _Walk:
    cached = getattr(prof, "cached", None)
    return cached("analysis.source.walk", lambda: _Walk(prof)) if cached else _Walk(prof)


NO_STACKS = ("the profile holds no Python call stacks (recorded with torch_npu's with_stack=True; MindSpore's "
             "CPU profiler writes none)")


def _answer(op_name: str, found: list, via: str, cs: pd.DataFrame) -> OpSource:
    """The `OpSource` of the (stack id, event) pairs ``found``: one `SourceStack` per distinct stack, the most
    frequent first, with its frames, the user frame and the files on this machine."""
    if not found:
        return OpSource(op_name, [], None, f"no call stack for {op_name!r}: neither its events nor the framework "
                                           "ops the timeline's arrows lead back to carry one")
    ids = [k for k, _ in found]
    counts = pd.Series(ids).value_counts(sort=False)
    order = sorted(counts.index, key=lambda k: (-counts[k], ids.index(k)))
    first_event = dict(reversed(found))   # stack -> the first event found with it
    stacks = []
    for k in order:
        fr = cs[cs["stack"].to_numpy() == k]
        fr = fr[(fr["track"] == fr["track"].iloc[0]) & (fr["start_us"] == fr["start_us"].iloc[0])]
        fr = fr[["depth", "file", "line", "function"]].reset_index(drop=True)
        fr["user"] = np.array([is_user_file(str(f)) for f in fr["file"]], dtype=bool)
        fr["local"] = pd.Series([local_file(str(f)) for f in fr["file"]], dtype=object)
        user = fr.loc[fr["user"], "depth"]
        stacks.append(SourceStack(int(k), int(counts[k]), first_event[k], fr,
                                  int(user.iloc[0]) if len(user) else None))
    return OpSource(op_name, stacks, via)


def op_source(prof, op_name: str) -> OpSource:
    """The Python stacks ``op_name`` was called with (`OpSource`), from the profile's ``call_stacks``,
    ``timeline`` and ``timeline_flows``: its events' own stacks, else (a kernel) those of the ops that
    launched its first `MAX_CALLS` calls; with the first user frame of each and the file on this machine."""
    cs = prof.call_stacks
    if cs is None or cs.empty:
        return OpSource(op_name, [], None, NO_STACKS)
    walk = _walk(prof)
    found = walk.own(names=[op_name])
    if found:
        return _answer(op_name, found, "own", cs)
    tl = walk.timeline
    calls = tl[(tl["name"] == op_name).to_numpy()].head(MAX_CALLS)
    found = [f for f in (walk.launched(int(c.track), float(c.start_us), float(c.dur_us))
                         for c in calls.itertuples(index=False)) if f is not None]
    return _answer(op_name, found, "launch", cs)


def event_source(prof, track: int, start_us: float, name: str) -> OpSource:
    """The Python stack of one timeline event (``track``, ``start_us``, ``name``: a tapped bar): its own,
    else the one of the op that launched it (as `op_source` finds it, for this call alone)."""
    cs = prof.call_stacks
    if cs is None or cs.empty:
        return OpSource(name, [], None, NO_STACKS)
    walk = _walk(prof)
    found = walk.own(names=[name], track=int(track), start_us=float(start_us))
    if found:
        return _answer(name, found[:1], "own", cs)
    tl = walk.timeline
    at = tl[((tl["track"] == track) & (tl["start_us"] == start_us) & (tl["name"] == name)).to_numpy()]
    hit = walk.launched(int(track), float(start_us), float(at["dur_us"].iloc[0])) if len(at) else None
    return _answer(name, [hit] if hit else [], "launch", cs)


__all__ = ["op_source", "event_source", "OpSource", "SourceStack", "is_user_file", "local_file", "FRAMEWORK_PACKAGES"]
