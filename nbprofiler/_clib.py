"""The package's compiled kernels: plain C libraries, each built beside its source by the build hook
(``hatch_build.py``) and loaded with ctypes. A library is used only where it was built from the source its
caller was written against: its ``nbp<stem>_abi`` function returns the number the caller asks for (a library
of another layout, a stale build beside newer Python, would be passed buffers it reads wrongly)."""
from __future__ import annotations

import ctypes
from pathlib import Path


def load(directory: Path, stem: str, abi: int) -> ctypes.CDLL | None:
    """The library ``<stem>*.so`` in ``directory`` whose ``nbp<stem>_abi()`` is ``abi``, or None."""
    for lib in sorted(directory.glob(f"{stem}*.so")):
        try:
            dll = ctypes.CDLL(str(lib))
        except OSError:
            continue
        try:
            if getattr(dll, f"nbp{stem}_abi")() == abi:
                return dll
        except AttributeError:
            continue
    return None
