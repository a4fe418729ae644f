"""Performance checks for a training repository's tests: the documented import path of
`nbprofiler.faces.testing` (``import nbprofiler.testing as nbt; nbt.check(...)``)."""
from __future__ import annotations

from .faces.testing import (METRICS, Check, CheckReport, CheckResult, CheckSpecError, PerformanceCheckFailed,
                            build_checks, check, lookup, value_of, write_junit_xml)

__all__ = ["check", "build_checks", "CheckReport", "PerformanceCheckFailed", "write_junit_xml",
           "Check", "CheckResult", "CheckSpecError", "METRICS", "lookup", "value_of"]
