"""Deprecated path of `nbprofiler.faces.report`, kept for one release: report notebooks written by earlier
versions import ``report_layout`` from here."""
from __future__ import annotations

import warnings

from .faces.report import *  # noqa: F401,F403
from .faces.report import report_layout  # noqa: F401

warnings.warn("nbprofiler.report moved to nbprofiler.faces.report; this path goes in the next release",
              FutureWarning, stacklevel=2)
