"""The advisor: findings with the evidence that produced them, in the order an engineer should act.

One home for every rule: `RULES` (step trace, host dispatch, operators, MindData; each a `Rule` with its thresholds named
once). `advise(**frames)` runs them on a Profile's DataFrames (pure: frames in, `Suggestion`s out);
`advise_profile(prof)` passes a Profile's frames. The summary, the dashboard's overview, the MindData view
and the report all show these suggestions, rendered by `nbprofiler.views.suggestions`.

Rules follow the tuning method of MindSpore's guides (step trace first: which stage dominates; then the
stage's own view: MindData queues and pipeline for the step interval, operators for forward and backward,
communication for the tail), MindInsight 2.3.1's proposers and MindSpore 2.x's dataset summary.

Findings of several rules about the same thing (one pipeline op) are folded into the first one (in `RULES`
order) as ``also``, so a reader never sees one problem twice; the result is sorted by severity, keeping
`RULES` order within a severity.
"""
from __future__ import annotations

import dataclasses

from .model import SEVERITIES, Context, Evidence, Rule, Suggestion, format_number, format_us
from .rules_dispatch import RULES as _DISPATCH
from .rules_minddata import RULES as _MINDDATA
from .rules_operators import RULES as _OPERATORS
from .rules_steps import RULES as _STEPS

RULES: tuple[Rule, ...] = (*_STEPS, *_DISPATCH, *_MINDDATA, *_OPERATORS)
RULES_BY_ID = {r.id: r for r in RULES}
FRAMES = Context.FRAMES


def run_rules(rules=None, **frames) -> list[Suggestion]:
    """Every rule's findings in rule order, before folding (what each rule says on its own)."""
    ctx = Context(**frames)
    return [s for rule in (RULES if rules is None else rules) for s in rule(ctx)]


def advise(rules=None, **frames) -> list[Suggestion]:
    """The suggestions for a profile given as frames by property name (``step_trace``,
    ``step_trace_average`` (dict), ``step_windows``, ``op_types``, ``minddata_pipeline``, ``minddata_queues``,
    ``host_queue``, ``device_queue``, ``cpu_utilization``, ``op_cpu_utilization``; ``dispatch``: an
    `analysis.dispatch.Dispatch`; absent = None).
    ``rules``: the rules to run, in priority order (default `RULES`; e.g. with one rule's thresholds changed:
    ``[r.with_thresholds(empty_pct=10) if r.id == "minddata.host_queue_empty" else r for r in RULES]``)."""
    kept: list[Suggestion] = []
    for s in run_rules(rules, **frames):
        home = next((i for i, k in enumerate(kept) if k.area == s.area and k.subjects & s.subjects), None)
        if home is None:
            kept.append(s)
        else:
            k = kept[home]
            kept[home] = dataclasses.replace(k, also=(*k.also, s), subjects=k.subjects | s.subjects)
    return sorted(kept, key=lambda s: SEVERITIES.index(s.severity))


def profile_frames(prof) -> dict:
    """The frames `advise` reads, from a Profile (``dispatch``: its `analysis.dispatch.Dispatch`)."""
    return {name: getattr(prof, name) for name in FRAMES}


def advise_profile(prof, rules=None) -> list[Suggestion]:
    """`advise` on a Profile's frames."""
    return advise(rules, **profile_frames(prof))


def rules_frame():
    """The rules as a table: ``rule``, ``area``, ``severity``, ``title``, ``origin``, ``thresholds`` (dict)."""
    import pandas as pd
    return pd.DataFrame([{"rule": r.id, "area": r.area, "severity": r.severity, "title": r.title,
                          "origin": r.origin, "thresholds": dict(r.thresholds)} for r in RULES])


__all__ = ["Evidence", "Suggestion", "Rule", "Context", "RULES", "RULES_BY_ID", "SEVERITIES", "advise",
           "advise_profile", "run_rules", "profile_frames", "rules_frame", "format_us", "format_number"]
