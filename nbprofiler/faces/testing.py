"""Performance checks for a training repository's tests (pytest or any runner).

    import nbprofiler.testing as nbt

    def test_step_time_did_not_regress():
        nbt.check("output/profiler", baseline="baselines/profiler",
                  max_step_ms=30, max_host_queue_empty_pct=10, max_regression_pct=5)

`check` raises `PerformanceCheckFailed` (an AssertionError, so pytest shows it as a failure) naming every
failed check with its measured value and threshold, and returns the `CheckReport` when all pass. The
numbers are those of `Profile.summary()`; any of them can be checked by its path (``max={...}``,
``min={...}``, ``max_regression_pct={...}``); see `nbprofiler.analysis.checks`. The ``nbprofiler check``
command runs the same checks from a shell and can write JUnit XML (`write_junit_xml`).
"""
from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ..analysis.checks import METRICS, Check, CheckResult, CheckSpecError, evaluate_all, lookup, value_of
from ..errors import ProfilerDataWarning

__all__ = ["check", "build_checks", "CheckReport", "PerformanceCheckFailed", "write_junit_xml",
           "Check", "CheckResult", "CheckSpecError", "METRICS", "lookup", "value_of"]

# Keyword shortcuts: keyword -> (check kind, metric).
SHORTCUTS = {
    "max_step_ms": ("max", "step_ms"),
    "max_host_queue_empty_pct": ("max", "host_queue_empty_pct"),
    "max_device_queue_empty_pct": ("max", "device_queue_empty_pct"),
}


class PerformanceCheckFailed(AssertionError):
    """Raised by `check` when a check fails; ``report`` holds every result."""

    def __init__(self, report: "CheckReport"):
        self.report = report
        lines = [f"{len(report.failures)} of {len(report.results)} performance checks failed on {report.source}:"]
        lines += [f"  FAIL {r.message}" for r in report.failures]
        super().__init__("\n".join(lines))


@dataclass
class CheckReport:
    """The results of one run of checks on ``source`` (against ``baseline_source`` when given)."""
    source: str
    results: list[CheckResult]
    baseline_source: str | None = None

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        return [f"{'PASS' if r.passed else 'FAIL'} {r.message}" for r in self.results]


def build_checks(*, max: dict | None = None, min: dict | None = None,
                 max_regression_pct: float | dict | None = None, **shortcuts) -> list[Check]:
    """Checks from keyword arguments: ``max={"step_trace.average.total_ms": 30}``, ``min={...}``,
    ``max_regression_pct=5`` (the average step time) or ``{"path": pct, ...}``, and the shortcuts
    ``max_step_ms``, ``max_host_queue_empty_pct``, ``max_device_queue_empty_pct``."""
    checks = []
    for key, limit in shortcuts.items():
        if key not in SHORTCUTS:
            raise TypeError(f"unknown check {key!r}; known: {', '.join(SHORTCUTS)}, max, min, max_regression_pct")
        if limit is not None:
            kind, metric = SHORTCUTS[key]
            checks.append(Check(kind, metric, float(limit)))
    checks += [Check("max", k, float(v)) for k, v in (max or {}).items()]
    checks += [Check("min", k, float(v)) for k, v in (min or {}).items()]
    if isinstance(max_regression_pct, dict):
        checks += [Check("max_regression_pct", k, float(v)) for k, v in max_regression_pct.items()]
    elif max_regression_pct is not None:
        checks.append(Check("max_regression_pct", "step_ms", float(max_regression_pct)))
    return checks


def _summary_of(obj, device: str | None) -> tuple[dict, str]:
    """The summary of a Profile, a Cluster (its smallest rank, as ``nbprofiler summary``) or a path."""
    if isinstance(obj, (str, Path)):
        from ..model.loader import load
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ProfilerDataWarning)
            obj = load(obj, device=device)
    if hasattr(obj, "profiles"):
        obj = obj[obj.ranks[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)
        return obj.summary(), str(obj.source)


def check(profile, *, baseline=None, device: str | None = None, raise_on_failure: bool = True,
          max: dict | None = None, min: dict | None = None, max_regression_pct: float | dict | None = None,
          **shortcuts) -> CheckReport:
    """Check a profile (a path, `Profile` or `Cluster`) against thresholds and, with ``baseline``, against
    another profile. Raises `PerformanceCheckFailed` when a check fails (unless ``raise_on_failure`` is
    False) and `CheckSpecError` / TypeError when no check or a malformed one is given."""
    checks = build_checks(max=max, min=min, max_regression_pct=max_regression_pct, **shortcuts)
    if not checks:
        raise CheckSpecError("no checks given: pass max_step_ms=..., max={path: value}, ... ")
    summary, source = _summary_of(profile, device)
    base_summary, base_source = _summary_of(baseline, None) if baseline is not None else (None, None)
    report = CheckReport(source, evaluate_all(checks, summary, base_summary), base_source)
    if raise_on_failure and not report.ok:
        raise PerformanceCheckFailed(report)
    return report


def write_junit_xml(report: CheckReport, path: str | Path) -> Path:
    """Write the report as JUnit XML (one testcase per check) for CI systems that collect test results."""
    suite = ET.Element("testsuite", name="nbprofiler check", tests=str(len(report.results)),
                       failures=str(len(report.failures)), errors="0", skipped="0")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="profile", value=report.source)
    if report.baseline_source:
        ET.SubElement(props, "property", name="baseline", value=report.baseline_source)
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname="nbprofiler.check", name=r.check.label)
        if not r.passed:
            ET.SubElement(case, "failure", message=r.message, type=r.check.kind).text = r.message
        else:
            ET.SubElement(case, "system-out").text = r.message
    path = Path(path)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
