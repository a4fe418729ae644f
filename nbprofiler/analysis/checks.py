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

Each side may be several runs (a list of summaries; the baseline side may also hold `history` records).
``max`` and ``min`` then read the median of the runs. ``max_regression_pct`` with two or more runs on a
side is decided by a one-sided Mann-Whitney U test (`mann_whitney_greater`: exact without ties for up to
2,500 run pairs, else the normal approximation with tie and continuity corrections) at ``alpha`` (default
0.05) together with its effect size: the change of the medians in %, the Hodges-Lehmann shift in % of the
baseline median and Cliff's delta (`compare_samples`). It fails only when the current runs are
significantly slower (p < alpha) *and* their median grew by more than the threshold. When the sizes
cannot give a p below alpha at all (3 runs against 3: the smallest exact p is 1/20), the medians alone
decide and the message says so. One run per side is decided as a single-run comparison and says it has
no noise estimate.

A regression threshold is *flaky* (status ``"flaky"``, not a pass) when the baseline's run-to-run
coefficient of variation is larger than the threshold and the runs given are too few to resolve a change
of that size (`runs_needed`); the message gives the runs per side that would, and the smallest threshold
above the noise. A significant regression beyond the threshold still fails.

`history_record` is what a check history keeps of one checked run (the numbers checked, the verdicts, a
label and a UTC timestamp; `nbprofiler.io.history` writes one JSON file per run in a folder the user
names and reads them back); `history_baseline` picks the baseline sample of the next check from it.

Pure functions on summary dicts; `nbprofiler.testing.check` and ``nbprofiler check`` are the faces.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from statistics import NormalDist
from typing import Callable

import numpy as np

from ..io.history import HISTORY_FORMAT

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


ALPHA = 0.05      # significance level of the regression test unless told otherwise
POWER = 0.8       # the chance of detecting a regression of the threshold's size `runs_needed` plans for
# Asymptotic relative efficiency of the Mann-Whitney test against the t-test under normal noise (3/pi).
_MW_EFFICIENCY = 3 / math.pi
_EXACT_PAIRS = 2500  # exact U distribution up to this many run pairs; the normal approximation beyond


@dataclass(frozen=True)
class SampleComparison:
    """Two samples of one number, current against baseline: sizes, medians, ``change_pct`` (the medians'
    change in % of the baseline median), the Hodges-Lehmann shift (median of all current - baseline
    differences) in % of the baseline median, Cliff's delta (P(current > baseline) - P(current < baseline),
    -1..1), the one-sided Mann-Whitney ``u`` and ``p_value`` with its ``method`` ("exact" or "normal"),
    ``min_p`` (the smallest p these sizes can give), and ``spread_pct``: the baseline's run-to-run
    coefficient of variation in % (None with one baseline run)."""
    n_current: int
    n_baseline: int
    median_current: float
    median_baseline: float
    change_pct: float
    hl_shift_pct: float
    cliffs_delta: float
    u: float
    p_value: float
    method: str
    min_p: float
    spread_pct: float | None


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one `Check`: ``value`` measured (None: not measured; the median with several runs),
    ``baseline`` (regressions; the baseline median), ``change_pct`` (regressions), ``passed``, ``status``
    ("pass", "fail" or "flaky") and a one-line ``message`` that names value and threshold; ``stats`` holds
    the `SampleComparison` of a regression decided on several runs, ``samples`` the values read per side."""
    check: Check
    value: float | None
    passed: bool
    message: str
    baseline: float | None = None
    change_pct: float | None = None
    status: str = ""
    stats: SampleComparison | None = None
    samples: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if not self.status:
            object.__setattr__(self, "status", "pass" if self.passed else "fail")
        elif self.passed != (self.status == "pass"):
            raise ValueError(f"status {self.status!r} contradicts passed={self.passed}")


def _fmt(x: float) -> str:
    return f"{x:.6g}"


# -- statistics over run samples ----------------------------------------------------------------------------

def _u_counts(m: int, n: int) -> np.ndarray:
    """How many orderings of m current and n baseline values (no ties) give each U = 0..m*n, where U counts
    the (current, baseline) pairs with current > baseline. The largest value is a current one (U grows by n,
    one per baseline value below it) or a baseline one (U unchanged): f(i, j) = f(i-1, j) shifted by j
    + f(i, j-1)."""
    prev = [np.ones(1)] * (m + 1)  # j = 0 baseline values: U = 0 in the one ordering
    for j in range(1, n + 1):
        row = [np.ones(1)]
        for i in range(1, m + 1):
            out = np.zeros(i * j + 1)
            a, b = row[i - 1], prev[i]
            out[j:j + len(a)] += a
            out[:len(b)] += b
            row.append(out)
        prev = row
    return prev[m]


def mann_whitney_greater(current, baseline) -> tuple[float, float, str]:
    """The one-sided Mann-Whitney U test of "current tends to be larger than baseline": (U, p, method).
    U counts the pairs with current > baseline (a tie counts one half). Without ties and with at most
    2,500 pairs p is exact, P(U >= observed) over all orderings; otherwise it is the normal approximation
    with the tie-corrected variance and a continuity correction (as ``scipy.stats.mannwhitneyu`` with
    ``alternative="greater"``)."""
    x, y = np.asarray(current, float), np.asarray(baseline, float)
    m, n = len(x), len(y)
    if not m or not n:
        raise ValueError("the Mann-Whitney test needs at least one value on each side")
    diff = x[:, None] - y[None, :]
    u = float((diff > 0).sum() + 0.5 * (diff == 0).sum())
    both = np.concatenate([x, y])
    _, counts = np.unique(both, return_counts=True)
    ties = bool((counts > 1).any())
    if not ties and m * n <= _EXACT_PAIRS:
        counts_u = _u_counts(m, n)
        p = float(counts_u[int(round(u)):].sum() / counts_u.sum())
        return u, min(p, 1.0), "exact"
    total = m + n
    tie_term = float((counts ** 3 - counts).sum()) / (total * (total - 1))
    sigma = math.sqrt(m * n / 12.0 * ((total + 1) - tie_term))
    if sigma == 0:
        return u, 1.0, "normal"
    z = (u - m * n / 2.0 - 0.5) / sigma
    return u, 0.5 * math.erfc(z / math.sqrt(2.0)), "normal"


def min_p_value(n_current: int, n_baseline: int) -> float:
    """The smallest one-sided exact Mann-Whitney p these sizes can give (every current run above every
    baseline run): 1 / C(n_current + n_baseline, n_current)."""
    return 1.0 / math.comb(n_current + n_baseline, n_current)


def spread_pct(values) -> float | None:
    """Run-to-run variation of a sample: its coefficient of variation (sample standard deviation over the
    absolute mean) in %; None for fewer than two values or a zero mean."""
    v = np.asarray(values, float)
    if len(v) < 2 or v.mean() == 0:
        return None
    return float(100.0 * v.std(ddof=1) / abs(v.mean()))


def runs_needed(spread: float, threshold_pct: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Runs per side for the Mann-Whitney test to detect, with probability ``power`` at level ``alpha``, a
    regression of ``threshold_pct`` % when runs vary by ``spread`` % (coefficient of variation): the normal
    sample-size formula 2 (z_(1-alpha) + z_power)^2 (spread / threshold)^2 divided by the test's efficiency
    3/pi, and at least the size whose smallest exact p is below ``alpha``. None for a threshold <= 0."""
    if threshold_pct <= 0:
        return None
    z = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)
    n = math.ceil(2 * z * z * (spread / threshold_pct) ** 2 / _MW_EFFICIENCY)
    floor = next(k for k in range(1, 64) if min_p_value(k, k) < alpha)
    return max(n, floor)


def _pct(delta: float, base: float) -> float:
    if base == 0:
        return 0.0 if delta == 0 else math.copysign(math.inf, delta)
    return 100.0 * delta / abs(base)


def compare_samples(current, baseline) -> SampleComparison:
    """The test and effect sizes of one number's current runs against its baseline runs."""
    x, y = np.asarray(current, float), np.asarray(baseline, float)
    mx, my = float(np.median(x)), float(np.median(y))
    diff = x[:, None] - y[None, :]
    u, p, method = mann_whitney_greater(x, y)
    return SampleComparison(
        n_current=len(x), n_baseline=len(y), median_current=mx, median_baseline=my,
        change_pct=_pct(mx - my, my), hl_shift_pct=_pct(float(np.median(diff)), my),
        cliffs_delta=float(((diff > 0).sum() - (diff < 0).sum()) / diff.size), u=u, p_value=p,
        method=method, min_p=min_p_value(len(x), len(y)), spread_pct=spread_pct(y))


# -- checks ------------------------------------------------------------------------------------------------

def run_value(run: dict, metric: str) -> float | None:
    """The number ``metric`` of one run: a summary dict, or a `history` record (its stored value)."""
    if run.get("format") == HISTORY_FORMAT:
        value = (run.get("values") or {}).get(metric)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value) else None
    return value_of(run, metric)


def _runs(side) -> list[dict]:
    if side is None:
        return []
    return [side] if isinstance(side, dict) else list(side)


def _sample(runs: list[dict], metric: str) -> list[float]:
    return [v for v in (run_value(r, metric) for r in runs) if v is not None]


def _of_runs(n: int) -> str:
    return "" if n == 1 else f" (median of {n} runs)"


def evaluate(check: Check, summary, baseline=None, *, alpha: float = ALPHA) -> CheckResult:
    """Run one check on a run's summary, or on several runs (a list of summaries), against the baseline's
    summary or runs (summaries or `history` records) for regressions."""
    if not 0 < alpha < 1:
        raise CheckSpecError(f"alpha must lie between 0 and 1, not {alpha!r}")
    runs = _runs(summary)
    cur = _sample(runs, check.metric)
    name = check.metric
    if not cur:
        return CheckResult(check, None, False, f"{name}: not measured in this profile (needed for {check.label})")
    samples = {"current": cur}
    value = float(np.median(cur))
    if len(cur) < len(runs):
        # a run that lacks the number cannot be left out quietly: the median would describe other runs
        return CheckResult(check, value, False, f"{name}: not measured in {len(runs) - len(cur)} of "
                           f"{len(runs)} runs (needed for {check.label})", samples=samples)
    if check.kind == "max":
        ok = value <= check.limit
        return CheckResult(check, value, ok, f"{name} = {_fmt(value)}{_of_runs(len(cur))} "
                           f"{'<=' if ok else '>'} {_fmt(check.limit)} (max)", samples=samples)
    if check.kind == "min":
        ok = value >= check.limit
        return CheckResult(check, value, ok, f"{name} = {_fmt(value)}{_of_runs(len(cur))} "
                           f"{'>=' if ok else '<'} {_fmt(check.limit)} (min)", samples=samples)
    base_runs = _runs(baseline)
    if not base_runs:
        return CheckResult(check, value, False, f"{name}: a regression check needs a baseline profile",
                           samples=samples)
    base = _sample(base_runs, check.metric)
    if not base:
        return CheckResult(check, value, False, f"{name}: not measured in the baseline (needed for {check.label})",
                           samples=samples)
    samples["baseline"] = base
    if len(cur) == 1 and len(base) == 1:
        return _single_run(check, value, base[0], samples)
    return _several_runs(check, compare_samples(cur, base), alpha, samples)


def _single_run(check: Check, value: float, base: float, samples: dict) -> CheckResult:
    change = _pct(value - base, base)
    ok = change <= check.limit
    return CheckResult(check, value, ok,
                       f"{check.metric} = {_fmt(value)} vs baseline {_fmt(base)}: {change:+.2f} % "
                       f"{'<=' if ok else '>'} {_fmt(check.limit)} % (max regression; single run per side, "
                       "no noise estimate)", baseline=base, change_pct=change, samples=samples)


def _several_runs(check: Check, st: SampleComparison, alpha: float, samples: dict) -> CheckResult:
    limit, name = check.limit, check.metric
    head = (f"{name} = {_fmt(st.median_current)} (median of {st.n_current} runs) vs baseline "
            f"{_fmt(st.median_baseline)} (median of {st.n_baseline}): {st.change_pct:+.2f} % "
            f"(Hodges-Lehmann {st.hl_shift_pct:+.2f} %, Cliff's delta {st.cliffs_delta:+.2f}")
    beyond = st.change_pct > limit
    testable = st.min_p < alpha
    if testable:
        significant = st.p_value < alpha
        head += (f"; Mann-Whitney one-sided p = {st.p_value:.3g} {'<' if significant else '>='} alpha {alpha:g}, "
                 f"{st.method})")
        failed = significant and beyond
        if failed:
            why = f"a significant regression over the {_fmt(limit)} % threshold"
        elif beyond:
            why = f"above the {_fmt(limit)} % threshold but not significant"
        else:
            why = f"<= the {_fmt(limit)} % threshold"
    else:
        head += (f"; too few runs for the Mann-Whitney test to reach alpha {alpha:g}: the smallest p with "
                 f"{st.n_current} and {st.n_baseline} runs is {st.min_p:.3g}, so the medians alone decide)")
        failed = beyond
        why = f"{'>' if beyond else '<='} the {_fmt(limit)} % threshold"
    spread = st.spread_pct
    need = runs_needed(spread, limit, alpha) if spread is not None else None
    flaky = (spread is not None and spread > limit and not (testable and failed)
             and (need is None or min(st.n_current, st.n_baseline) < need))
    common = dict(baseline=st.median_baseline, change_pct=st.change_pct, stats=st, samples=samples)
    if flaky:
        advice = (f"telling a {_fmt(limit)} % regression apart needs about {need} runs per side (have "
                  f"{st.n_current} and {st.n_baseline})" if need is not None else
                  "no number of runs resolves a threshold of 0 %")
        return CheckResult(check, st.median_current, False,
                           f"{head}: flaky: the baseline varies by {spread:.1f} % between runs, more than the "
                           f"{_fmt(limit)} % threshold; {advice}, or use a threshold of at least "
                           f"{math.ceil(spread)} %", status="flaky", **common)
    return CheckResult(check, st.median_current, not failed, f"{head}: {why} (max regression)", **common)


def evaluate_all(checks: list[Check], summary, baseline=None, *, alpha: float = ALPHA) -> list[CheckResult]:
    """Every check, in order."""
    return [evaluate(c, summary, baseline, alpha=alpha) for c in checks]


def verdict(results: list[CheckResult]) -> str:
    """"fail" when a check failed, else "flaky" when one was flaky, else "pass"."""
    statuses = {r.status for r in results}
    return "fail" if "fail" in statuses else "flaky" if "flaky" in statuses else "pass"


# -- history records -----------------------------------------------------------------------------------------------

def history_record(summary: dict, results: list[CheckResult], *, label: str, source: str,
                   timestamp: datetime | None = None) -> dict:
    """The history record of one checked run: the numbers its checks read from ``summary``, each check
    with its limit, status and (regressions) the baseline median, the run's verdict, ``label``, ``source``
    and a UTC ``timestamp``."""
    ts = (timestamp or datetime.now(timezone.utc)).astimezone(timezone.utc)
    metrics = list(dict.fromkeys(r.check.metric for r in results))
    return {"format": HISTORY_FORMAT, "version": 1, "timestamp": ts.isoformat(timespec="microseconds"),
            "label": str(label), "source": str(source),
            "values": {m: value_of(summary, m) for m in metrics},
            "checks": [{"kind": r.check.kind, "metric": r.check.metric, "limit": r.check.limit,
                        "status": r.status, "baseline_median": r.baseline} for r in results],
            "verdict": verdict(results)}


def history_baseline(records: list[dict], last: int) -> list[dict]:
    """The baseline sample a history gives: its ``last`` records that did not fail a regression check
    against a measured baseline (a regression that was caught does not become the norm the next run is held
    to). Runs that failed only for want of a baseline (the first runs of a new history) are kept."""
    if last < 1:
        raise CheckSpecError(f"the number of history runs for the baseline must be at least 1, not {last}")

    def regressed(rec: dict) -> bool:
        return any(c.get("kind") == "max_regression_pct" and c.get("status") == "fail"
                   and c.get("baseline_median") is not None for c in rec.get("checks") or [])
    return [r for r in records if not regressed(r)][-last:]
