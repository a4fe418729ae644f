"""Resident memory of frames whose columns are memory-mapped files (a trace timeline loaded on disk,
`nbprofiler.io.trace.disk`): the loader registers a store's maps (`keep_maps`), and a pass over every
event lets their pages go afterwards (`release_pages`). It imports nothing from the package, so the
analyses that make such passes need not import io."""
from __future__ import annotations

import mmap
import weakref

# store -> weak references to the maps of its timeline's numeric columns (the frame's arrays keep them alive)
_MAPS: dict[str, list[weakref.ref]] = {}


def keep_maps(store, maps) -> None:
    """Remember the maps of the timeline frame of ``store`` (the frame's ``attrs["store"]``), weakly."""
    _MAPS[str(store)] = [weakref.ref(m) for m in maps]


def mapped(store) -> list:
    """The maps remembered for ``store`` (None for one already collected)."""
    return [ref() for ref in _MAPS.get(str(store), ())]


def release_pages(frame) -> None:
    """After a pass over every event of a timeline loaded on disk: drop the pages of its mapped columns
    from this process's resident memory. They stay in the page cache, so touching them again costs a
    minor fault, and the pages one pass touched do not add up with the next pass's. No-op for a frame
    held in memory."""
    for ref in _MAPS.get(frame.attrs.get("store"), ()):
        m = ref()
        if m is not None and hasattr(m, "_mmap") and hasattr(m._mmap, "madvise"):
            m._mmap.madvise(mmap.MADV_DONTNEED)
