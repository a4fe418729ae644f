"""Performance checks over a profile's summary: thresholds and regressions a CI job can fail on.

A check names one number of the summary (`Profile.summary()`, the JSON of ``nbprofiler summary``) by its
path — ``step_trace.average.total_ms``, ``minddata.host_queue.avg_get_ms``,
``op_types.ai_core[op_type=MatMul].total_time_us``, ``step_trace.steps[0].total_ms`` — or by one of the
short metric names in `METRICS` (``step_ms``, ``host_queue_empty_pct``, ...) for numbers that are derived
from the summary. A check is one of:

- ``max``: the value must be <= the limit;
- ``min``: the value must be >= the limit;
- ``max_regression_pct``: the value may grow by at most that many percent over the same number of a
  baseline profile (every number here is "lower is better" or a count, so growth is the regression).

A number the profile does not hold (no step trace, no such op type) fails its check with "not measured":
a CI job that asks for a check must not pass because the data was missing.

Pure functions on summary dicts; `nbprofiler.testing.check` and ``nbprofiler check`` are the faces.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

# Short names for the numbers a CI job checks most. Each is (meaning, function of the summary).
# The first three are also CLI options: --max-step-ms, --max-host-queue-empty-pct, --max-device-queue-empty-pct.


def _share_pct(section: str, part: str) -> Callable[[dict], float | None]:
    def get(summary: dict) -> float | None:
        q = (summary.get("minddata") or {}).get(section)
        if not q or not q.get("steps"):
            return None
        return 100.0 * q[part] / q["steps"]
    return get


METRICS: dict[str, tuple[str, Callable[[dict], float | None]]] = {
    "step_ms": ("average step time, ms (the step trace's, else the host queue's batch gaps)",
                lambda s: lookup(s, "step_time.average_ms")),
    "host_queue_empty_pct": ("steps whose host queue was empty, % of steps",
                             _share_pct("host_queue", "empty_steps")),
    "host_queue_full_pct": ("steps whose host queue was full, % of steps",
                            _share_pct("host_queue", "full_steps")),
    "device_queue_empty_pct": ("steps whose device queue was empty, % of steps",
                               _share_pct("device_queue", "empty_steps")),
    "timeline_span_ms": ("timeline span, ms",
                         lambda s: _span_ms(s.get("timeline"))),
}


def _span_ms(tl: dict | None) -> float | None:
    if not tl or tl.get("end_us") is None or tl.get("start_us") is None:
        return None
    return (tl["end_us"] - tl["start_us"]) / 1000.0


class CheckSpecError(ValueError):
    """A check that cannot be understood (bad path syntax, bad limit)."""


_TOKEN = re.compile(r"""
    (?P<key>[^.\[\]]+)                # a dict key
  | \[(?P<index>-?\d+)\]               # a list index
  | \[(?P<field>[^=\]]+)=(?P<value>[^\]]*)\]   # the list element whose field equals value
  | (?P<dot>\.)
""", re.VERBOSE)


def _tokens(path: str) -> list[tuple[str, object]]:
    out, pos = [], 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            raise CheckSpecError(f"cannot read the summary path {path!r} at character {pos + 1}")
        pos = m.end()
        if m.group("key") is not None:
            out.append(("key", m.group("key")))
        elif m.group("index") is not None:
            out.append(("index", int(m.group("index"))))
        elif m.group("field") is not None:
            out.append(("select", (m.group("field"), m.group("value"))))
    if not out:
        raise CheckSpecError("empty summary path")
    return out


def lookup(summary: dict, path: str):
    """The value at ``path`` in ``summary`` (see the module docstring for the syntax), or None when the
    summary does not hold it. A list index may also be written as a dotted number (``steps.0``)."""
    node = summary
    for kind, arg in _tokens(path):
        if node is None:
            return None
        if kind == "key":
            if isinstance(node, list) and str(arg).lstrip("-").isdigit():
                kind, arg = "index", int(arg)
            elif isinstance(node, dict):
                node = node.get(arg)
                continue
            else:
                return None
        if kind == "index":
            node = node[arg] if isinstance(node, list) and -len(node) <= arg < len(node) else None
        elif kind == "select":
            field, want = arg
            node = next((e for e in node if isinstance(e, dict) and str(e.get(field)) == want), None) \
                if isinstance(node, list) else None
    return node


def value_of(summary: dict, name: str) -> float | None:
    """The number a check reads: a `METRICS` name or a summary path; None when absent or not a number."""
    value = METRICS[name][1](summary) if name in METRICS else lookup(summary, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class Check:
    """One requirement: ``kind`` is "max", "min" or "max_regression_pct"; ``metric`` a `METRICS` name or
    a summary path; ``limit`` the threshold (a value, or a percentage for regressions)."""
    kind: str
    metric: str
    limit: float

    def __post_init__(self):
        if self.kind not in ("max", "min", "max_regression_pct"):
            raise CheckSpecError(f"unknown check kind {self.kind!r}")
        if not isinstance(self.limit, (int, float)) or isinstance(self.limit, bool):
            raise CheckSpecError(f"the limit of {self.metric} must be a number, not {self.limit!r}")
        if not math.isfinite(self.limit):  # inf could never fail, nan never pass: neither checks anything
            raise CheckSpecError(f"the limit of {self.metric} must be a finite number, not {self.limit!r}")
        if self.metric not in METRICS:
            _tokens(self.metric)  # raises on a malformed path

    @property
    def label(self) -> str:
        return {"max": f"{self.metric} <= {self.limit:g}", "min": f"{self.metric} >= {self.limit:g}",
                "max_regression_pct": f"{self.metric} grows <= {self.limit:g} % over the baseline"}[self.kind]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one `Check`: ``value`` measured (None: not measured), ``baseline`` (regressions),
    ``change_pct`` (regressions), ``passed`` and a one-line ``message`` that names value and threshold."""
    check: Check
    value: float | None
    passed: bool
    message: str
    baseline: float | None = None
    change_pct: float | None = None


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def evaluate(check: Check, summary: dict, baseline: dict | None = None) -> CheckResult:
    """Run one check on a summary (and the baseline's summary for regressions)."""
    value = value_of(summary, check.metric)
    name = check.metric
    if value is None:
        return CheckResult(check, None, False, f"{name}: not measured in this profile (needed for {check.label})")
    if check.kind == "max":
        ok = value <= check.limit
        return CheckResult(check, value, ok, f"{name} = {_fmt(value)} {'<=' if ok else '>'} {_fmt(check.limit)} (max)")
    if check.kind == "min":
        ok = value >= check.limit
        return CheckResult(check, value, ok, f"{name} = {_fmt(value)} {'>=' if ok else '<'} {_fmt(check.limit)} (min)")
    if baseline is None:
        return CheckResult(check, value, False, f"{name}: a regression check needs a baseline profile")
    base = value_of(baseline, check.metric)
    if base is None:
        return CheckResult(check, value, False, f"{name}: not measured in the baseline (needed for {check.label})")
    if base == 0:
        change = 0.0 if value == 0 else math.inf
    else:
        change = 100.0 * (value - base) / abs(base)
    ok = change <= check.limit
    return CheckResult(check, value, ok,
                       f"{name} = {_fmt(value)} vs baseline {_fmt(base)}: {change:+.2f} % "
                       f"{'<=' if ok else '>'} {_fmt(check.limit)} % (max regression)",
                       baseline=base, change_pct=change)


def evaluate_all(checks: list[Check], summary: dict, baseline: dict | None = None) -> list[CheckResult]:
    """Every check, in order."""
    return [evaluate(c, summary, baseline) for c in checks]
