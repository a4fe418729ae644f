"""nbprofiler: MindSpore performance profiling inside Jupyter.

>>> import nbprofiler
>>> prof = nbprofiler.load("path/to/profiler/output")
>>> prof.step_trace.head()          # tidy pandas DataFrames, units in the column names
>>> prof.show()                     # the interactive dashboard

``%load_ext nbprofiler`` adds the ``%nbprofiler`` magic.
"""
from __future__ import annotations

from ._version import __version__  # noqa: F401
from .errors import (EmptyFileError, FileTooLargeError, MalformedFileError, MissingColumnError,  # noqa: E402
                     NoProfilerDataError, Problem, ProfilerDataError, ProfilerDataWarning, TruncatedFileError)
from .model.loader import load  # noqa: E402
from .model.profile import Cluster, Profile  # noqa: E402


def show(prof, **kwargs):
    """Display the dashboard of a `Profile` (or the cluster view of a `Cluster`)."""
    return prof.show(**kwargs)


def compare(a, b, *more, **kwargs):
    """Differences between two profiles (paths or loaded objects): a `Comparison`, see
    `nbprofiler.analysis.compare`. With three or more runs, `compare_many` (a `RunSet`)."""
    if more:
        return compare_many([a, b, *more], **kwargs)
    from .analysis.compare import compare as _compare
    return _compare(a, b, **kwargs)


def compare_many(runs, baseline=0, labels=None):
    """Many runs side by side (a parameter sweep, nightly runs): headline numbers per run, their change
    against the baseline run, and each run's verdict against it. See `nbprofiler.analysis.runs`."""
    from .analysis.runs import compare_many as _compare_many
    return _compare_many(runs, baseline=baseline, labels=labels)


def __getattr__(name):
    # `nbprofiler.samples` without importing it first: the bundled profiles load only when asked for
    if name == "samples":
        import importlib
        return importlib.import_module(".samples", __name__)
    raise AttributeError(f"module 'nbprofiler' has no attribute {name!r}")


# Where IPython and Jupyter look for an extension: the package itself (`%load_ext nbprofiler`,
# `jupyter labextension develop .`, and the server config that enables "nbprofiler").

def load_ipython_extension(ipython):
    from .faces.magics import register
    register(ipython)


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "nbprofiler"}]


def _jupyter_server_extension_points():
    return [{"module": "nbprofiler.faces.lab"}]


__all__ = ["load", "show", "compare", "compare_many", "Profile", "Cluster", "ProfilerDataError", "EmptyFileError",
           "TruncatedFileError", "MalformedFileError", "MissingColumnError", "FileTooLargeError",
           "NoProfilerDataError", "ProfilerDataWarning", "Problem", "__version__"]
