"""Small real profiles shipped with the package, for the quickstart, demos and tests.

Recorded with MindSpore 2.10 on a CPU machine (copies of ``shared/data/mindspore2`` and
``shared/data/minddata``, MindSpore's own ``logs/`` folders left out):

- ``lenet_pynative``: a LeNet5 PyNative run, 300 steps (``*_ascend_ms`` layout: FRAMEWORK/cpu_op_*,
  memory record, trace_view.json, MindData raw files and MindSpore's derived pipeline files).
- ``md_bottleneck_map``: MindData only; Generator -> slow map -> batch, the map op is the bottleneck.
- ``md_fast``: MindData only; every pipeline op is fast and the consumer (the training step) is slow.

>>> import nbprofiler, nbprofiler.samples
>>> prof = nbprofiler.load(nbprofiler.samples.path("lenet_pynative"))

Treat these folders as read-only: nbprofiler never writes into a profiler directory.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ("lenet_pynative", "md_bottleneck_map", "md_fast")


def path(name: str = "lenet_pynative") -> Path:
    """Folder of the bundled sample ``name`` (one of `NAMES`), ready for `nbprofiler.load`."""
    if name not in NAMES:
        raise ValueError(f"no bundled sample {name!r}; choose one of {', '.join(NAMES)}")
    return HERE / name


def names() -> list[str]:
    return list(NAMES)
