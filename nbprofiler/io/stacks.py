"""Python call stacks of framework events (``call_stacks``): torch_npu's ``with_stack`` writes them as
``"Call stack"`` args of trace_view.json's ``cpu_op`` events and as PYTORCH_CALLCHAINS rows of its .db;
both spell a frame ``file(line): function``, innermost first (the text joins frames with ``";\\r\\n"``).

The stacks are kept apart from the timeline's rows: one row per frame, keyed by the event's track, name and
start (the timeline's clock), so a view or an analysis joins them to the events it shows.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ..errors import MalformedFileError
from ._util import warn_partial

COLUMNS = ["track", "name", "start_us", "stack", "depth", "file", "line", "function"]
_FRAME = re.compile(r"\s*(?P<file>.+?)\((?P<line>\d+)\): (?P<function>.*?)\s*")
_SEPARATOR = re.compile(r";\s*(?:\r?\n|$)")
STACK_KEY = "Call stack"


def parse_frame(text: str) -> tuple[str, int, str] | None:
    """``"file.py(12): func"`` -> ``("file.py", 12, "func")``; None when the text is not a frame."""
    m = _FRAME.fullmatch(text)
    if m is None or not m["file"].strip():
        return None
    return m["file"], int(m["line"]), m["function"]


def parse_stack(text) -> list[tuple[str, int, str]] | None:
    """A stack as written (frames joined by ``;`` and a line break, innermost first; or a tuple of frame
    texts, innermost first, as the .db lists them) -> its frames; None when any frame is malformed (a stack
    is kept whole or not at all)."""
    if isinstance(text, tuple):
        parts = list(text)
    elif isinstance(text, str):
        parts = [p for p in _SEPARATOR.split(text) if p.strip()]
    else:
        return None
    frames = [parse_frame(p) for p in parts]
    if not frames or any(f is None for f in frames):
        return None
    return frames


def empty() -> pd.DataFrame:
    return pd.DataFrame({"track": pd.Series(dtype="int32"), "name": pd.Series(dtype=object),
                         "start_us": pd.Series(dtype="float64"), "stack": pd.Series(dtype="int64"),
                         "depth": pd.Series(dtype="int64"), "file": pd.Series(dtype=object),
                         "line": pd.Series(dtype="Int64"), "function": pd.Series(dtype=object)})


def frames(events: pd.DataFrame, path, field: str = STACK_KEY) -> pd.DataFrame:
    """The ``call_stacks`` rows of ``events`` (columns ``track``, ``name``, ``start_us`` and ``text``, the
    stack as written): ``stack`` numbers the distinct stacks in the order of the events (by track, then
    start). A stack that does not parse is dropped with a `ProfilerDataWarning` naming ``path`` and the
    event; the others load."""
    events = events.sort_values(["track", "start_us"], kind="stable")
    events = events.assign(stack=pd.factorize(pd.Series(events["text"].to_numpy(), dtype=object))[0])
    parsed: dict[str, list | None] = {}
    bad = []
    rows = {c: [] for c in COLUMNS}
    for ev in events.itertuples(index=False):
        text = ev.text
        if text not in parsed:
            parsed[text] = parse_stack(text)
            if parsed[text] is None:
                bad.append(ev)
        for depth, (file, line, function) in enumerate(parsed[text] or ()):
            for col, v in zip(COLUMNS, (ev.track, ev.name, ev.start_us, ev.stack, depth, file, line, function)):
                rows[col].append(v)
    if bad:
        first = bad[0]
        warn_partial(MalformedFileError(
            path, f"{len(bad)} call stack(s) not in the `file(line): function` form were dropped (the first: "
                  f"event {first.name!r} at {first.start_us:.3f} us: {str(first.text)[:120]!r})", field=field))
    if not rows["track"]:
        return empty()
    out = pd.DataFrame(rows)
    out["track"] = out["track"].astype("int32")
    out["start_us"] = out["start_us"].astype("float64")
    out["stack"] = out["stack"].astype("int64")
    out["depth"] = out["depth"].astype("int64")
    out["line"] = out["line"].astype("Int64")
    return out.sort_values(["track", "start_us", "depth"], kind="stable").reset_index(drop=True)


def from_timeline(timeline: pd.DataFrame | None, path=None) -> pd.DataFrame | None:
    """The ``call_stacks`` of a trace's timeline: its events whose args hold ``"Call stack"`` (``path``: the
    trace file, for the warnings; default the timeline's ``attrs['path']``). None when no event has one."""
    if timeline is None or timeline.empty or "args" not in timeline:
        return None
    args = timeline["args"]
    has = args.str.contains(f'"{STACK_KEY}"', regex=False, na=False).to_numpy()
    if not has.any():
        return None
    ev = timeline.loc[has, ["track", "name", "start_us", "args"]]
    texts = []
    for a in ev["args"]:
        try:
            texts.append(json.loads(a).get(STACK_KEY))
        except (ValueError, AttributeError):
            texts.append(None)
    ev = pd.DataFrame({"track": ev["track"].to_numpy(), "name": ev["name"].astype(str).to_numpy(),
                       "start_us": ev["start_us"].to_numpy(), "text": texts})
    return frames(ev, path or timeline.attrs.get("path"))


def attach_tracks(stacks: pd.DataFrame, tracks: pd.DataFrame | None, path: Path) -> pd.DataFrame:
    """Rows keyed by ``process``/``thread`` labels (the .db reader's) -> keyed by the timeline's track
    ids; rows whose thread has no track are dropped (there is no event to attach them to)."""
    if tracks is None or tracks.empty or stacks.empty:
        return empty()
    keys = tracks[["process", "thread", "track"]]
    m = stacks.merge(keys, on=["process", "thread"], how="inner")
    m = m.drop(columns=["process", "thread"])
    return frames(m, path, "*_CALLCHAINS.stack")


__all__ = ["parse_frame", "parse_stack", "frames", "from_timeline", "attach_tracks", "STACK_KEY", "COLUMNS",
           "empty"]
