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

Each side may be several runs: a list of paths, Profiles or summary dicts, a summary JSON file
(``nbprofiler summary --json``) or a folder of them. Regressions over several runs are decided by a
one-sided Mann-Whitney U test with its effect sizes; a threshold inside the baseline's run-to-run noise is
reported flaky (`PerformanceCheckFlaky`, an AssertionError too). ``history=DIR`` appends each checked run to
a history folder and ``baseline_history=N`` takes the baseline from its last N runs; `trend` draws it.
"""
from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.checks import (ALPHA, METRICS, Check, CheckResult, CheckSpecError, evaluate_all, history_baseline,
                               history_record, lookup, value_of, verdict)
from ..io.history import (HistoryError, looks_like_summary_file, read_history, read_summary, summary_files,
                          write_history)
from ..errors import ProfilerDataWarning

__all__ = ["check", "build_checks", "CheckReport", "PerformanceCheckFailed", "PerformanceCheckFlaky",
           "write_junit_xml", "trend", "read_history", "Check", "CheckResult", "CheckSpecError", "HistoryError",
           "METRICS", "lookup", "value_of"]

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
        failed = [r for r in report.results if r.status == "fail"]
        flaky = [r for r in report.results if r.status == "flaky"]
        head = f"{len(failed)} of {len(report.results)} performance checks failed"
        if flaky:
            head += f", {len(flaky)} flaky"
        lines = [f"{head} on {report.source}:"] + [f"  {_TAG[r.status]} {r.message}" for r in failed + flaky]
        super().__init__("\n".join(lines))


class PerformanceCheckFlaky(PerformanceCheckFailed):
    """Raised by `check` when no check failed but one was flaky: its threshold lies inside the baseline's
    run-to-run noise, so the runs given can neither pass nor fail it."""


_TAG = {"pass": "PASS", "fail": "FAIL", "flaky": "FLAKY"}


@dataclass
class CheckReport:
    """The results of one run of checks on ``source`` (against ``baseline_source`` when given); with
    several runs ``sources`` / ``baseline_sources`` list them; ``history_paths`` are the history records
    written."""
    source: str
    results: list[CheckResult]
    baseline_source: str | None = None
    sources: list[str] = field(default_factory=list)
    baseline_sources: list[str] = field(default_factory=list)
    history_paths: list[Path] = field(default_factory=list)

    @property
    def failures(self) -> list[CheckResult]:
        """Every check that did not pass: failed or flaky."""
        return [r for r in self.results if not r.passed]

    @property
    def flaky(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "flaky"]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def verdict(self) -> str:
        """"fail", "flaky" or "pass" (`nbprofiler.analysis.checks.verdict`)."""
        return verdict(self.results)

    def lines(self) -> list[str]:
        return [f"{_TAG[r.status]} {r.message}" for r in self.results]

    def tally(self) -> str:
        """"N passed, M failed" (and ", K flaky" when any was)."""
        n_fail = sum(r.status == "fail" for r in self.results)
        text = f"{sum(r.passed for r in self.results)} passed, {n_fail} failed"
        return text + (f", {len(self.flaky)} flaky" if self.flaky else "")


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
    """The summary of a Profile, a Cluster (its smallest rank, as ``nbprofiler summary``), a path to a
    profile or to a summary JSON file, or a summary dict itself."""
    if isinstance(obj, dict):
        return obj, str(obj.get("source") or "<summary>")
    if isinstance(obj, (str, Path)) and looks_like_summary_file(obj):
        return read_summary(obj), str(obj)
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


def _runs_of(side, device: str | None) -> list[tuple[dict, str]]:
    """Every run of one side: a list of runs, a folder of summary JSON files, or one run."""
    items = list(side) if isinstance(side, (list, tuple)) else [side]
    out = []
    for item in items:
        files = summary_files(item) if isinstance(item, (str, Path)) else []
        out += [_summary_of(f, device) for f in files] if files else [_summary_of(item, device)]
    return out


def check(profile, *, baseline=None, device: str | None = None, raise_on_failure: bool = True,
          alpha: float = ALPHA, history=None, baseline_history: int | None = None, label: str | None = None,
          max: dict | None = None, min: dict | None = None, max_regression_pct: float | dict | None = None,
          **shortcuts) -> CheckReport:
    """Check a profile (a path, `Profile`, `Cluster`, summary dict or summary JSON file; a list of them or a
    folder of summary JSON files for several runs) against thresholds and, with ``baseline`` (the same
    kinds), against other runs. ``alpha``: the significance level of the regression test over several runs.
    ``history``: a folder (never inside profiler output) where each checked run is appended as one JSON
    record, labelled ``label`` (default: its source); ``baseline_history=N`` takes the baseline from that
    history's last N runs that did not fail, instead of ``baseline``.

    Raises `PerformanceCheckFailed` when a check fails, `PerformanceCheckFlaky` when none failed but one was
    flaky (unless ``raise_on_failure`` is False), `CheckSpecError` / TypeError when no check or a malformed
    one is given, `HistoryError` for a history folder that cannot be used."""
    checks = build_checks(max=max, min=min, max_regression_pct=max_regression_pct, **shortcuts)
    if not checks:
        raise CheckSpecError("no checks given: pass max_step_ms=..., max={path: value}, ... ")
    if not 0 < alpha < 1:
        raise CheckSpecError(f"alpha must lie between 0 and 1, not {alpha!r}")
    if baseline_history is not None and history is None:
        raise CheckSpecError("baseline_history needs a history folder")
    if baseline_history is not None and baseline is not None:
        raise CheckSpecError("give the baseline as runs or as the history's last runs, not both")
    past = read_history(history) if history is not None else []  # refuses a folder inside profiler output
    runs = _runs_of(profile, device)
    if baseline_history is not None:
        base_runs = history_baseline(past, int(baseline_history))
        base_sources = [f"{r.get('label')} ({r.get('timestamp')})" for r in base_runs]
    elif baseline is not None:
        pairs = _runs_of(baseline, None)
        base_runs, base_sources = [s for s, _ in pairs], [src for _, src in pairs]
    else:
        base_runs, base_sources = None, []
    summaries = [s for s, _ in runs]
    results = evaluate_all(checks, summaries, base_runs, alpha=alpha)
    sources = [src for _, src in runs]
    report = CheckReport(sources[0] if len(sources) == 1 else f"{len(sources)} runs ({sources[0]}, ...)",
                         results, _side_name(base_sources, baseline_history), sources, base_sources)
    if history is not None:
        records = [history_record(s, results, label=_label(label, src, i, len(runs)), source=src)
                   for i, (s, src) in enumerate(runs)]
        report.history_paths = write_history(history, records)
    if raise_on_failure and not report.ok:
        raise (PerformanceCheckFailed if report.verdict == "fail" else PerformanceCheckFlaky)(report)
    return report


def _side_name(sources: list[str], from_history: int | None) -> str | None:
    if from_history is not None:
        return f"the last {len(sources)} runs of the history"
    if not sources:
        return None
    return sources[0] if len(sources) == 1 else f"{len(sources)} runs ({sources[0]}, ...)"


def _label(label: str | None, source: str, i: int, n: int) -> str:
    if label is None:
        return source
    return label if n == 1 else f"{label} #{i + 1}"


def trend(history, **kwargs):
    """The trend of every checked number over a history folder (or its records): a Bokeh layout, one
    figure per number with its thresholds (`nbprofiler.views.trend.trend_layout`); ``show`` it in a
    notebook."""
    from ..views.trend import trend_layout
    records = read_history(history) if isinstance(history, (str, Path)) else list(history)
    return trend_layout(records, **kwargs)


def write_trend_html(history, path: str | Path, title: str = "nbprofiler check history") -> Path:
    """Write `trend` of ``history`` as one offline HTML file (BokehJS inline)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE
    path = Path(path)
    text = file_html(trend(history), resources=INLINE, title=title)  # the template escapes the title
    path.write_text(text, encoding="utf-8")
    return path


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
            kind = r.check.kind if r.status == "fail" else "flaky"
            ET.SubElement(case, "failure", message=r.message, type=kind).text = r.message
        else:
            ET.SubElement(case, "system-out").text = r.message
    path = Path(path)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
