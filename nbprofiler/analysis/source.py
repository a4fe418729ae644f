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


def _stacked_events(call_stacks: pd.DataFrame, timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per event with a stack: track, name, start_us, end_us, stack."""
    ev = call_stacks.drop_duplicates(["track", "start_us", "name"])[["track", "name", "start_us", "stack"]]
    durs = timeline[["track", "start_us", "dur_us"]].assign(name=timeline["name"].astype(str))
    ev = ev.merge(durs.drop_duplicates(["track", "start_us", "name"]), on=["track", "start_us", "name"], how="left")
    ev["end_us"] = ev["start_us"] + ev["dur_us"].fillna(0.0)
    return ev.drop(columns="dur_us")


def _enclosing(events: pd.DataFrame, track: int, t: float) -> pd.DataFrame:
    on = events[events["track"].to_numpy() == track]
    s, e = on["start_us"].to_numpy(), on["end_us"].to_numpy()
    return on[(s <= t + 1e-6) & (e >= t - 1e-6)]


def _launching_stacks(calls: pd.DataFrame, stacked: pd.DataFrame, timeline: pd.DataFrame, flows: pd.DataFrame,
                      tracks: pd.DataFrame | None) -> list[tuple[int, str]]:
    """(stack id, event name) of the launching event of each of ``calls`` (timeline rows), reached back
    through the flows. An arrow's tail is matched against the stacked events of every track of its thread
    (the writers file one host thread's framework and CANN calls under several processes)."""
    tl = timeline[["track", "start_us", "dur_us"]]
    tl = tl.assign(end_us=tl["start_us"] + tl["dur_us"])
    siblings: dict[int, list[int]] = {}
    if tracks is not None and not tracks.empty:
        for _, g in tracks.groupby("tid", sort=False):
            for t in g["track"]:
                siblings[int(t)] = [int(x) for x in g["track"]]
    out = []
    for call in calls.itertuples(index=False):
        points = [(int(call.track), float(call.start_us), float(call.start_us + call.dur_us))]
        found = None
        for _ in range(MAX_HOPS + 1):
            nxt = []
            for track, lo, hi in points:
                same = siblings.get(track, [track])
                own = pd.concat([_enclosing(stacked, t, lo) for t in same])
                if len(own):
                    inner = own.sort_values(["start_us", "end_us"], ascending=[True, False]).iloc[-1]  # innermost
                    found = (int(inner["stack"]), str(inner["name"]))
                    break
                # the calls around the point on its thread, and the arrows that lead into them
                outer = pd.concat([_enclosing(tl, t, lo) for t in same])
                if len(outer):
                    lo, hi = min(lo, outer["start_us"].min()), max(hi, outer["end_us"].max())
                arrows = flows[np.isin(flows["end_track"].to_numpy(), same) & (flows["end_us"].to_numpy() >= lo - 1e-6)
                               & (flows["end_us"].to_numpy() <= hi + 1e-6)]
                nxt += [(int(a.start_track), float(a.start_us), float(a.start_us)) for a in arrows.itertuples()]
            if found is not None or not nxt:
                break
            points = list(dict.fromkeys(nxt))
        if found is not None:
            out.append(found)
    return out


NO_STACKS = ("the profile holds no Python call stacks (recorded with torch_npu's with_stack=True; MindSpore's "
             "CPU profiler writes none)")


def _found(prof, calls: pd.DataFrame, own: pd.DataFrame, stacked: pd.DataFrame) -> tuple[list, str]:
    """(stack id, event name) per call and how they were found: the stacked events ``own`` where there are,
    else the launching ops of ``calls``."""
    if len(own):
        return [(int(k), str(n)) for k, n in zip(own["stack"], own["name"])], "own"
    flows, timeline = prof.timeline_flows, prof.timeline
    if flows is None or flows.empty or calls.empty:
        return [], "launch"
    return _launching_stacks(calls, stacked, timeline, flows, prof.timeline_tracks), "launch"


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
    timeline = prof.timeline
    stacked = _stacked_events(cs, timeline)
    own = stacked[stacked["name"].astype(str).to_numpy() == op_name]
    calls = timeline[timeline["name"].astype(str).to_numpy() == op_name].head(MAX_CALLS) if not len(own) else \
        timeline.iloc[:0]
    return _answer(op_name, *_found(prof, calls, own, stacked), cs)


def event_source(prof, track: int, start_us: float, name: str) -> OpSource:
    """The Python stack of one timeline event (``track``, ``start_us``, ``name``: a tapped bar): its own,
    else the one of the op that launched it (as `op_source` finds it, for this call alone)."""
    cs = prof.call_stacks
    if cs is None or cs.empty:
        return OpSource(name, [], None, NO_STACKS)
    timeline = prof.timeline
    stacked = _stacked_events(cs, timeline)
    at = lambda df: df[(df["track"].to_numpy() == track) & (df["start_us"].to_numpy() == start_us)  # noqa: E731
                       & (df["name"].astype(str).to_numpy() == name)]
    own = at(stacked)
    return _answer(name, *_found(prof, at(timeline).head(1) if not len(own) else timeline.iloc[:0], own, stacked), cs)


__all__ = ["op_source", "event_source", "OpSource", "SourceStack", "is_user_file", "local_file", "FRAMEWORK_PACKAGES"]
