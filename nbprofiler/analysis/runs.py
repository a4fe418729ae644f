"""`compare_many(runs)`: many runs side by side — a sweep of ``num_parallel_workers``, a series of
nightly runs, before/after/after-again.

Every number comes from each run's `Profile.summary()` (the same numbers the dashboard, the report and
``nbprofiler check`` show), and each run is compared with the baseline by `compare` (the same verdict a
two-run comparison gives). Pure over the Profiles (paths go through `nbprofiler.load`).
"""
from __future__ import annotations

import dataclasses
import html
import warnings

import pandas as pd

from ..errors import ProfilerDataWarning
from ..schema import STAGE_LABELS, STAGE_SETS
from .checks import value_of
from .compare import Comparison, _label, _profile, compare

# The headline numbers: column -> (short title with unit, how it is read from a summary: a `checks`
# metric name or a summary path). Lower is better for every one of them.
HEADLINE = {
    "step_ms": ("Step (ms)", "step_ms"),
    # each run's own stages (a view shows only the columns some run has)
    **{stage: (f"{label} (ms)", f"step_trace.stages.{stage}") for stage, label in STAGE_LABELS.items()
       if stage in {s for stages in STAGE_SETS for s in stages}},
    "host_queue_empty_pct": ("Host queue empty (% of steps)", "host_queue_empty_pct"),
    "device_queue_empty_pct": ("Device queue empty (% of steps)", "device_queue_empty_pct"),
    "host_get_ms": ("Host queue get (ms)", "minddata.host_queue.avg_get_ms"),
    "timeline_span_ms": ("Timeline span (ms)", "timeline_span_ms"),
}


@dataclasses.dataclass
class RunSet:
    """Many runs compared.

    - ``headline``: one row per run, in the order given: ``run`` (label), ``source``, ``generation``,
      ``steps`` (the steps timed: the step trace's, else the host queue's; 0 without either), the `HEADLINE` numbers (NaN where a run
      does not hold one), ``bottleneck_ops`` (MindData ops the pipeline rule names, e.g. "MapOp_1"),
      ``top_op_type`` / ``top_op_type_pct`` (the longest op type of the run's main kind, 0..100 of it),
      ``suggestions`` (how many findings the advisor has), ``baseline`` (bool).
    - ``change_pct``: the same numbers as % change relative to the baseline run (NaN where either side
      lacks it).
    - ``comparisons``: label -> the `Comparison` baseline -> run, for every other run.
    - ``verdicts``: one row per non-baseline run: ``run``, ``verdict`` (the comparison's sentences, "; ").
    """

    labels: list[str]
    baseline: str
    headline: pd.DataFrame
    change_pct: pd.DataFrame
    comparisons: dict[str, Comparison]
    verdicts: pd.DataFrame

    def show(self, **kwargs):
        from ..views.runs import RunSetView
        return RunSetView(self, **kwargs).display()

    def _repr_html_(self) -> str:
        items = "".join(f"<li><b>{html.escape(r.run)}</b>: {html.escape(r.verdict)}</li>"
                        for r in self.verdicts.itertuples())
        return (f"<div><b>nbprofiler: {len(self.labels)} runs</b> against {html.escape(self.baseline)}"
                f"<ul>{items}</ul></div>")

    def __repr__(self) -> str:
        return f"<nbprofiler.RunSet {len(self.labels)} runs, baseline {self.baseline!r}>"


def _unique_labels(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} ({seen[lab]})")
    return out


def _headline_row(label: str, prof, summary: dict) -> dict:
    row = {"run": label, "source": str(prof.source), "generation": summary.get("generation"),
           "steps": int((summary.get("step_time") or {}).get("steps") or 0)}
    for col, (_, metric) in HEADLINE.items():
        row[col] = value_of(summary, metric)
    md = summary.get("minddata") or {}
    names = {p["op_id"]: f"{p['op_type']}_{p['op_id']}" for p in md.get("pipeline") or []}
    row["bottleneck_ops"] = ", ".join(names.get(i, str(i)) for i in md.get("bottleneck_op_ids") or [])
    kinds = summary.get("op_types") or {}
    main_kind = max(kinds, key=lambda k: sum(r["total_time_us"] for r in kinds[k]), default=None)
    top = kinds[main_kind][0] if main_kind and kinds[main_kind] else None
    row["top_op_type"] = top["op_type"] if top else ""
    row["top_op_type_pct"] = top["percent"] if top else None
    row["suggestions"] = len(summary.get("suggestions") or [])
    return row


def compare_many(runs, baseline: int | str = 0, labels: list[str] | None = None) -> RunSet:
    """Compare many runs (Profiles or paths, in the order of the sweep). ``baseline``: the index or label
    of the run the others are compared with (default: the first). ``labels``: one per run (default: the
    folder names), e.g. ``["workers=1", "workers=2", "workers=4"]``. See `RunSet`."""
    profs = [_profile(r) for r in runs]
    if len(profs) < 2:
        raise ValueError(f"compare_many needs at least two runs, got {len(profs)}")
    if labels is not None and len(labels) != len(profs):
        raise ValueError(f"{len(labels)} labels for {len(profs)} runs")
    labels = _unique_labels([str(x) for x in labels] if labels is not None else [_label(p) for p in profs])
    if isinstance(baseline, str):
        if baseline not in labels:
            raise ValueError(f"baseline {baseline!r} is not one of the runs: {labels}")
        base_i = labels.index(baseline)
    else:
        base_i = int(baseline)
        if not -len(profs) <= base_i < len(profs):
            raise ValueError(f"baseline index {baseline} out of range for {len(profs)} runs")
        base_i %= len(profs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)  # problems are on each Profile
        summaries = [p.summary() for p in profs]
    head = pd.DataFrame([_headline_row(lab, p, s) for lab, p, s in zip(labels, profs, summaries)])
    head["baseline"] = [i == base_i for i in range(len(profs))]
    numbers = list(HEADLINE)
    head[numbers] = head[numbers].astype("float64")
    base = head.loc[base_i, numbers].astype("float64")
    change = (head[numbers] - base) / base.abs() * 100.0
    change.loc[:, (base == 0).to_numpy()] = float("nan")  # no percentage of a zero baseline
    change.insert(0, "run", head["run"])
    comparisons = {labels[i]: compare(profs[base_i], profs[i], labels=(labels[base_i], labels[i]))
                   for i in range(len(profs)) if i != base_i}
    verdicts = pd.DataFrame({"run": list(comparisons), "verdict": [c.text for c in comparisons.values()]})
    return RunSet(labels, labels[base_i], head, change, comparisons, verdicts)
