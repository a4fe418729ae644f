"""The advisor's types: `Evidence` (one measured number and where it comes from), `Suggestion` (what to
do, with its evidence), `Rule` (a named check with its thresholds) and `Context` (the frames a rule reads,
with the derived numbers several rules share computed once).

Everything here is plain data: views render it (`nbprofiler.views.suggestions`), the summary serialises it
(`Suggestion.to_dict`), nothing here formats HTML.
"""
from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from typing import Callable, Iterable, Mapping

import pandas as pd

# Severity, most urgent first: "high" names the run's main limiter, "medium" a likely gain, "info" a fact
# worth knowing before comparing or tuning (first step, consumer-bound pipeline).
SEVERITIES = ("high", "medium", "info")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One number a suggestion rests on.

    ``key``: stable name (unique within a suggestion); ``label``: what it is, for a person ("Host queue
    empty"); ``value`` in ``unit`` ("%" = 0..100, "ms", "us", "" for counts, "bool" for yes/no);
    ``threshold``/``compare``: the rule's limit in the same unit and how ``value`` passed it (">", "<",
    ">=", "<="); ``detail``: the count behind a share ("62 of 62 steps").

    Where it comes from: ``frame`` and ``column`` of the Profile (``minddata_pipeline.output_queue_usage_rate``),
    ``steps`` (first, last step it covers), ``window_us`` (the time window on the timeline's clock, relative
    to ``prof.origin_us``), ``op_id`` (the pipeline op whose output queue it measures), ``op_type`` and
    ``kind`` (an operator type of the operator tables)."""

    key: str
    label: str
    value: float | int | str | bool
    unit: str = ""
    threshold: float | None = None
    compare: str | None = None
    detail: str = ""
    frame: str | None = None
    column: str | None = None
    steps: tuple[int, int] | None = None
    window_us: tuple[float, float] | None = None
    op_id: int | None = None
    op_type: str | None = None
    kind: str | None = None

    def source(self) -> dict:
        """Where the number lives, as plain data (only the fields that are set)."""
        out = {"frame": self.frame, "column": self.column,
               "steps": list(self.steps) if self.steps else None,
               "window_us": list(self.window_us) if self.window_us else None,
               "op_id": self.op_id, "op_type": self.op_type, "kind": self.kind}
        return {k: v for k, v in out.items() if v is not None}

    def to_dict(self) -> dict:
        out = {"label": self.label, "value": self.value, "unit": self.unit}
        if self.threshold is not None:
            out["threshold"], out["compare"] = self.threshold, self.compare
        if self.detail:
            out["detail"] = self.detail
        out["source"] = self.source()
        return out


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """A finding and what to do about it.

    ``id``: stable per finding (``operators.ai_core.top_type``); ``rule``: the `Rule` that produced it;
    ``severity``: one of `SEVERITIES`; ``area``: the part of the profile it is about ("step_trace",
    "operators", "minddata"); ``text``: plain text (views escape it); ``evidence``: the numbers, in the order
    a reader checks them; ``subjects``: what it is about ("pipeline_op:1"), so findings of other rules about
    the same thing fold into it; ``also``: those folded findings (whole suggestions, with their evidence);
    ``cost_ms``: the time per average step the finding concerns (the most acting on it could save: the
    stage, the operator type's time per step, the wait for data), None where the data gives no estimate.
    `nbprofiler.analysis.diagnosis` ranks findings by it."""

    id: str
    rule: str
    severity: str
    area: str
    text: str
    evidence: tuple[Evidence, ...]
    subjects: frozenset = frozenset()
    also: tuple["Suggestion", ...] = ()
    cost_ms: float | None = None

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {SEVERITIES}")
        keys = [e.key for e in self.evidence]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{self.id}: evidence keys repeat: {keys}")

    def get(self, key: str) -> Evidence:
        """The evidence item named ``key``."""
        for e in self.evidence:
            if e.key == key:
                return e
        raise KeyError(f"{self.id} has no evidence {key!r}; it has {[e.key for e in self.evidence]}")

    def to_dict(self) -> dict:
        """The summary JSON form: ``id``, ``rule``, ``severity``, ``area``, ``text``, ``evidence`` (an object:
        evidence key -> {label, value, unit, threshold, compare, detail, source}) and ``also`` (the folded
        findings in the same form)."""
        return {"id": self.id, "rule": self.rule, "severity": self.severity, "area": self.area, "text": self.text,
                "cost_ms": self.cost_ms, "evidence": {e.key: e.to_dict() for e in self.evidence},
                "also": [a.to_dict() for a in self.also]}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Suggestion":
        """Back from `to_dict` (a summary JSON read from disk)."""
        ev = []
        for key, e in (d.get("evidence") or {}).items():
            src = e.get("source") or {}
            ev.append(Evidence(key=key, label=e.get("label", key), value=e.get("value"), unit=e.get("unit", ""),
                               threshold=e.get("threshold"), compare=e.get("compare"), detail=e.get("detail", ""),
                               frame=src.get("frame"), column=src.get("column"),
                               steps=tuple(src["steps"]) if src.get("steps") else None,
                               window_us=tuple(src["window_us"]) if src.get("window_us") else None,
                               op_id=src.get("op_id"), op_type=src.get("op_type"), kind=src.get("kind")))
        return cls(id=d["id"], rule=d.get("rule", d["id"]), severity=d.get("severity", "medium"),
                   area=d.get("area", ""), text=d.get("text", ""), evidence=tuple(ev), cost_ms=d.get("cost_ms"),
                   also=tuple(cls.from_dict(a) for a in d.get("also") or []))


@dataclasses.dataclass(frozen=True)
class Rule:
    """A check: ``id``, ``area``, ``severity`` of what it finds, ``title`` (what it looks for, for a person),
    ``origin`` (whose rule it is: "MindInsight 2.3.1", "MindSpore 2.x dataset summary", "nbprofiler"),
    ``thresholds`` (name -> value, the only place the numbers are written) and ``check`` (Context ->
    suggestions; it reads ``rule.thresholds``)."""

    id: str
    area: str
    severity: str
    title: str
    origin: str
    thresholds: Mapping[str, float]
    check: Callable[["Rule", "Context"], Iterable[Suggestion]]

    def with_thresholds(self, **thresholds: float) -> "Rule":
        """A copy of this rule with some thresholds changed (names as in ``thresholds``)."""
        unknown = set(thresholds) - set(self.thresholds)
        if unknown:
            raise KeyError(f"{self.id} has no threshold {sorted(unknown)}; it has {sorted(self.thresholds)}")
        return dataclasses.replace(self, thresholds={**self.thresholds, **thresholds})

    def __call__(self, ctx: "Context") -> list[Suggestion]:
        return list(self.check(self, ctx))

    def suggestion(self, id: str, text: str, evidence: Iterable[Evidence], subjects: Iterable[str] = (),
                   cost_ms: float | None = None) -> Suggestion:
        """A suggestion of this rule (its id, area and severity); ``cost_ms``: see `Suggestion`."""
        cost = float(cost_ms) if cost_ms is not None and math.isfinite(float(cost_ms)) else None
        return Suggestion(id=id, rule=self.id, severity=self.severity, area=self.area, text=text,
                          evidence=tuple(evidence), subjects=frozenset(subjects), cost_ms=cost)


def _present(frame) -> bool:
    return frame is not None and len(frame) > 0


class Context:
    """The frames the rules read (a Profile's frames by property name, and ``dispatch``: its
    `analysis.dispatch.Dispatch`; absent ones are None) and the
    derived numbers several rules share, each computed once by its one home in `nbprofiler.analysis`."""

    FRAMES = ("step_trace", "step_trace_average", "step_windows", "op_types", "minddata_pipeline",
              "minddata_queues", "host_queue", "device_queue", "cpu_utilization", "op_cpu_utilization",
              "dispatch")

    def __init__(self, **frames):
        unknown = set(frames) - set(self.FRAMES)
        if unknown:
            raise TypeError(f"advise() got unknown frames {sorted(unknown)}; it reads {list(self.FRAMES)}")
        for name in self.FRAMES:
            setattr(self, name, frames.get(name))

    def has(self, name: str) -> bool:
        return _present(getattr(self, name))

    @cached_property
    def queue_summary(self) -> dict:
        from .. import minddata as md
        return md.queue_summary(self.host_queue, self.device_queue)

    @cached_property
    def bottleneck(self):
        from .. import minddata as md
        return md.bottleneck_ops(self.minddata_pipeline)

    @cached_property
    def cpu_summary(self) -> dict | None:
        from .. import minddata as md
        return md.cpu_summary(self.cpu_utilization) if self.has("cpu_utilization") else None

    @cached_property
    def op_cpu_summary(self) -> pd.DataFrame | None:
        from .. import minddata as md
        return md.op_cpu_summary(self.op_cpu_utilization, self.minddata_pipeline) \
            if self.has("op_cpu_utilization") else None

    @cached_property
    def step_times(self) -> pd.DataFrame:
        """``step``, ``total_ms`` of the run's steps (`steps.step_frame`: the step trace, else the host
        queue's batch gaps, else the trace's ``ProfilerStep#N`` spans)."""
        from ..steps import step_frame
        return step_frame(self.step_trace, self.host_queue, lambda: self.step_windows)[0]

    @property
    def step_count(self) -> int:
        return int(len(self.step_times))

    @cached_property
    def data_wait_ms(self) -> float | None:
        """How long an average step waits for data: the step trace's step interval or preparing stage, else
        the host queue's mean time to get a batch; None without either."""
        st = self.step_trace
        if self.has("step_trace"):
            col = next((c for c in ("iteration_interval_ms", "preparing_ms") if c in st), None)
            if col is not None:
                return float(pd.to_numeric(st[col], errors="coerce").mean())
        hq = self.host_queue
        if self.has("host_queue") and "get_ms" in hq:
            return float(pd.to_numeric(hq["get_ms"], errors="coerce").mean())
        return None

    def per_step_ms(self, total_us: float) -> float | None:
        """A run total in us spread over the run's steps, in ms per step; None without steps."""
        return float(total_us) / 1000.0 / self.step_count if self.step_count else None

    def step_window(self, step: int) -> tuple[float, float] | None:
        """The step's (start_us, end_us) on the timeline's clock, where ``step_windows`` places it."""
        w = self.step_windows
        if not _present(w):
            return None
        hit = w[w["step"] == int(step)]
        if hit.empty:
            return None
        return float(hit["start_us"].iloc[0]), float(hit["end_us"].iloc[0])


def format_us(us: float) -> str:
    """A duration in the unit a person reads it in: 812 us, 35.9 ms, 35.92 s."""
    us = float(us)
    if abs(us) >= 1e6:
        return f"{us / 1e6:.4g} s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.4g} ms"
    return f"{us:.4g} us"


def format_number(v, digits: int = 2) -> str:
    """A number as a person reads it: thousands separated, at most ``digits`` decimals, no trailing
    zeros (31.25, 100, 0.03, 1,234.5); booleans as yes/no."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v != 0 and abs(v) < 10 ** -digits:
            return f"{v:.2g}"
        text = f"{v:,.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(v)
