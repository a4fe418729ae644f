"""Resident memory of frames whose columns are memory-mapped files (a trace timeline loaded on disk,
`nbprofiler.io.trace.disk`): the loader registers a store's maps (`keep_maps`), and a pass over every
event lets their pages go afterwards (`release_pages`); such a pass runs in slices (`row_slices`), and the
C heap its temporaries leave behind is given back (`release_heap`); `advise` is madvise where the platform
has it. It imports nothing from the package, so the analyses that make such passes need not import io."""
from __future__ import annotations

import ctypes
import functools
import mmap
import sys
import weakref

# Rows per pass of a computation over a long column (a step scan of every event, a walk over the device's
# tasks): its temporaries stay ~100 MB whatever the timeline's length.
PASS_ROWS = 1 << 20

# store -> weak references to the maps of its files (the frames' arrays keep them alive)
_MAPS: dict[str, list[weakref.ref]] = {}


def keep_maps(store, maps) -> None:
    """Remember the maps of the files of ``store`` (the timeline frame's ``attrs["store"]``: its columns, its
    flows, ...), weakly: numpy memmaps or `mmap.mmap` objects."""
    _MAPS[str(store)] = [weakref.ref(m) for m in maps]


def mapped(store) -> list:
    """The maps remembered for ``store`` (None for one already collected)."""
    return [ref() for ref in _MAPS.get(str(store), ())]


def release_pages(frame) -> None:
    """After a pass over every event of a timeline loaded on disk: drop the pages of its store's mapped files
    (the timeline's columns, its flows, tracks and counters) from this process's resident memory. They stay in the page cache, so touching them again costs a
    minor fault, and the pages one pass touched do not add up with the next pass's. No-op for a frame
    held in memory."""
    for ref in _MAPS.get(frame.attrs.get("store"), ()):
        m = ref()
        m = getattr(m, "_mmap", m)   # a numpy memmap's map, or a map itself
        if m is not None:
            advise(m, "MADV_DONTNEED")


def advise(mm: mmap.mmap, advice: str) -> None:
    """``mm.madvise`` of the `mmap` constant named ``advice``, where the platform has both."""
    if hasattr(mm, "madvise") and hasattr(mmap, advice):
        mm.madvise(getattr(mmap, advice))


def row_slices(n: int, rows: int | None = None) -> list[slice]:
    """Slices of ``rows`` (default `PASS_ROWS`) rows covering ``n`` rows, in order: a pass over every event
    done slice by slice."""
    rows = max(1, int(PASS_ROWS if rows is None else rows))
    return [slice(a, min(a + rows, n)) for a in range(0, n, rows)]


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (another C library, another system)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_heap() -> None:
    """Give the C heap's free pages back to the system after a computation in slices: glibc serves arrays
    under its mmap threshold (up to 32 MB: a slice's temporaries) from the heap and keeps their pages once
    they are freed, so a session would go on holding the largest slice's worth of temporaries (on a 10 GB
    trace, the host-dispatch walk left 260 MB). No-op off glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
