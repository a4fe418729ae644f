"""Performance checks for a training repository's tests: the documented import path of
`nbprofiler.faces.testing` (``import nbprofiler.testing as nbt; nbt.check(...)``)."""
from __future__ import annotations

from .faces.testing import (METRICS, Check, CheckReport, CheckResult, CheckSpecError, HistoryError,
                            PerformanceCheckFailed, PerformanceCheckFlaky, build_checks, check, lookup,
                            read_history, trend, value_of, write_junit_xml)

__all__ = ["check", "build_checks", "CheckReport", "PerformanceCheckFailed", "PerformanceCheckFlaky",
           "write_junit_xml", "trend", "read_history", "Check", "CheckResult", "CheckSpecError", "HistoryError",
           "METRICS", "lookup", "value_of"]
