"""What sets a run's step time, and what to do about it first: the one diagnosis every face shows.

`diagnose(prof)` reads a Profile's frames (through the analyses that own each number: `steps` for the step
times and stages, the advisor for the findings) and returns a `Diagnosis`: the step time and where it comes
from, the run's stages in its own vocabulary (a MindSpore 2.x / Ascend ``step_trace_time.csv`` has
Computing, Communication (not overlapped), Free and Preparing; a legacy step trace MindInsight's step
interval, forward+backward and tail), a first sentence that names the stage that sets the step time, and the
advisor's findings ranked by the time per step they concern (`Suggestion.cost_ms`). The Overview, the report,
the summary JSON (``diagnosis``), the CLI and compare (each run's first sentence) show this object; none
recomputes it. `diagnose_cluster` does the same across the ranks of a Cluster (the cluster page, the
cluster report, ``Cluster.summary()["cluster"]``).

Findings whose premise the data contradicts are folded, not dropped: a MindData pipeline tuning rule says
"the device waits for data"; where the host queue was almost never empty and the step interval is a small
share of the step, the rule's advice is kept under ``folded`` with the reason.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..schema import STAGE_LABELS
from .steps import STEP_TRACE_SOURCE, profile_step_average, step_times
from .labels import fmt_ms

# The stage that sets the step time is the largest of the stages that stack up to the step.
# The MindData rules' premise (the device waits for data) is contradicted when the host queue was empty at
# no more than this share of the steps and the stages that wait for data take less than this share of the step.
DATA_WAIT_CONTRADICTED_PCT = 2.0

# What each stage means for the engineer, in the run's own vocabulary: (the sentence's subject, what it says
# about the step, where to look). Legacy stages are MindInsight's.
STAGE_MEANING = {
    "computing_ms": ("Computing", "device compute (kernels, including the part overlapped by communication)",
                     "the slowest operator types and kernels (Operators)"),
    "communication_not_overlapped_ms": ("Communication not overlapped by computation",
                                        "collectives the device waits for with nothing to compute",
                                        "communication overlap and fusion, and the other ranks' step (Cluster)"),
    "free_ms": ("Free time", "the device idles with neither compute nor communication",
                "host-side dispatch, the data pipeline and synchronisation (Timeline)"),
    "preparing_ms": ("Preparing", "host work before the step's first device task",
                     "data loading and graph dispatch (MindData, Timeline)"),
    "iteration_interval_ms": ("The step interval", "the device waits for the next batch between steps",
                              "the MindData queues and pipeline (MindData)"),
    "fp_and_bp_ms": ("Forward and backward", "the step's compute, with the communication inside it",
                     "the slowest operator types (Operators)"),
    "fp_ms": ("Forward", "the step's compute", "the slowest operator types (Operators)"),
    "tail_ms": ("The step tail", "gradient aggregation and the parameter update after backward",
                "AllReduce fusion and split points (Step trace)"),
}
# Stages in which the device waits for the data pipeline.
DATA_WAIT_STAGES = ("iteration_interval_ms", "preparing_ms")
# Without stages, a wait (for the next batch, for the host's launches) sets the step when it takes at least
# this share of the step.
SETS_THE_STEP_PCT = 50.0


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """``step_ms`` (the average step, or None), ``step_source`` (`steps.StepTimes.source`), ``steps``
    (how many), ``stages`` (the run's own stages: column -> average ms, stacking up to the step; empty
    without a step trace), ``limiter`` (the stage that sets the step, or None), ``headline`` (the first sentence every face shows), ``findings`` (advisor `Suggestion`s, most
    time per step first) and ``folded`` ((suggestion, why it is folded) whose premise the data contradicts)."""

    step_ms: float | None
    step_source: str | None
    steps: int
    stages: dict
    limiter: str | None
    headline: str
    findings: tuple = ()
    folded: tuple = ()

    def to_dict(self) -> dict:
        total = self.step_ms or 0.0
        return {"headline": self.headline, "step_ms": self.step_ms, "step_source": self.step_source,
                "steps": self.steps,
                "stages": [{"stage": k, "label": STAGE_LABELS.get(k, k), "ms": v,
                            "percent": round(v / total * 100, 2) if total else None}
                           for k, v in self.stages.items()],
                "limiter": self.limiter,
                "findings": [s.id for s in self.findings],
                "folded": [{"id": s.id, "why": why} for s, why in self.folded]}


def own_stages(prof) -> dict:
    """The run's stage averages in its own vocabulary (columns that stack up to ``total_ms``), from the
    comparable average of `steps` (the file's own average row where it is a real step, else the mean)."""
    stages = list(prof.step_stages or [])
    if not stages:
        return {}
    avg = profile_step_average(prof).comparable
    return {s: float(avg[s]) for s in stages if s in avg and np.isfinite(avg[s])}


def stage_sentence(stages: dict, step_ms: float, steps: int, source: str) -> tuple[str | None, str]:
    """(the limiting stage, the sentence naming it) for ``stages`` (column -> ms) of an average step."""
    if not stages or not step_ms or step_ms <= 0:
        return None, f"The average step takes {fmt_ms(step_ms or 0)} ms ({_steps(steps)}, from the {source})."
    limiter = max(stages, key=stages.get)
    name, meaning, look = STAGE_MEANING.get(limiter, (STAGE_LABELS.get(limiter, limiter), "", ""))
    share = stages[limiter] / step_ms * 100
    others = ", ".join(f"{STAGE_LABELS.get(k, k).lower()} {fmt_ms(v)} ms" for k, v in
                       sorted(stages.items(), key=lambda kv: -kv[1]) if k != limiter)
    text = (f"{name} sets the step time: {fmt_ms(stages[limiter])} of {fmt_ms(step_ms)} ms per step "
            f"({share:.0f} %, {meaning})" + (f"; {others}" if others else "") + f". Look at {look}.")
    return limiter, text


def _host_queue(prof) -> dict | None:
    """The host queue's digest (`minddata.queue_summary`), computed once per Profile for both data-wait rules."""
    from .minddata import queue_summary
    return prof.cached("host_queue_summary",
                       lambda: queue_summary(prof.host_queue, prof.device_queue).get("host_queue"))


def _data_wait_contradicted(prof, stages: dict, step_ms: float | None) -> str | None:
    """Why the MindData rules' premise (the device waits for data) does not hold here, or None."""
    hq = _host_queue(prof)
    if not hq or not hq.get("steps"):
        return None
    empty_pct = hq["empty_steps"] / hq["steps"] * 100
    wait = sum(stages.get(s, 0.0) for s in DATA_WAIT_STAGES)
    wait_pct = wait / step_ms * 100 if step_ms else 0.0
    if empty_pct <= DATA_WAIT_CONTRADICTED_PCT and wait_pct <= DATA_WAIT_CONTRADICTED_PCT * 5:
        return (f"the host queue was empty at only {hq['empty_steps']:,} of {hq['steps']:,} steps "
                f"({empty_pct:.1f} %)" + (f" and the device waited {wait_pct:.1f} % of the step for data"
                                          if stages and any(s in stages for s in DATA_WAIT_STAGES) else "")
                + ": the pipeline rarely holds training back")
    return None


# The MindData rules whose advice assumes the device waits for data.
_DATA_PREMISE_RULES = ("minddata.pipeline", "minddata.bottleneck", "minddata.queue_usage", "minddata.op_cpu",
                       "minddata.host_queue_empty", "minddata.device_queue_empty", "minddata.cpu_busy")


def diagnose(prof) -> Diagnosis:
    """The run's diagnosis (memoised on the Profile). See `Diagnosis`."""
    return prof.cached("diagnosis", lambda: _diagnose(prof))


def _diagnose(prof) -> Diagnosis:
    from .advisor import advise_profile
    times = step_times(prof)
    stages = own_stages(prof) if times.source == STEP_TRACE_SOURCE else {}
    step_ms = times.average_ms
    if times.source is None or not stages:
        limiter, headline = None, operator_sentence(prof, step_ms, times.count, times.source)
    else:
        limiter, headline = stage_sentence(stages, step_ms, times.count, times.source)
    suggestions = advise_profile(prof)
    why = _data_wait_contradicted(prof, stages, step_ms)
    kept, folded = [], []
    for s in suggestions:
        if why and s.rule in _DATA_PREMISE_RULES:
            folded.append((s, why))
        else:
            kept.append(s)
    return Diagnosis(step_ms, times.source, times.count, stages, limiter, headline, tuple(rank_by_cost(kept)),
                     tuple(folded))


def rank_by_cost(suggestions) -> list:
    """Most time per step first; findings without an estimate after those with one, by severity."""
    from .advisor import SEVERITIES
    return sorted(suggestions, key=lambda s: (s.cost_ms is None, -(s.cost_ms or 0.0),
                                              SEVERITIES.index(s.severity)))


def operator_sentence(prof, step_ms: float | None, steps: int, source: str | None) -> str:
    """The first sentence of a run without stages (CPU and PyNative runs, MindData-only runs): its step time
    where it has one, and the operator time of its busiest device kind, per step where steps are known."""
    if source is None:
        head = "No step timing was recorded (no step trace, no host-queue timestamps, no ProfilerStep#N events)"
    else:
        head = f"The average step takes {fmt_ms(step_ms)} ms ({_steps(steps)}, from the {source})"
    wait = _data_wait_clause(prof, step_ms) or _host_dispatch_clause(prof, step_ms)
    if wait:
        return f"{head}: {wait}"
    t = prof.op_types
    if t is None or not len(t):
        return head + "; no operator times were recorded."
    by_kind = t[t["kind"] != "communication"].groupby("kind", sort=False)["total_time_us"].sum()
    if not len(by_kind) or not by_kind.max() > 0:
        return head + "."
    kind = by_kind.idxmax()
    kind_ms = float(by_kind.max()) / 1000
    top = t[t["kind"] == kind].sort_values("total_time_us", ascending=False, kind="stable").iloc[0]
    top_ms = float(top["total_time_us"]) / 1000
    label = kind_label(kind)
    if steps and step_ms:
        per, top_per = kind_ms / steps, top_ms / steps
        return (f"{head}: {label} operators run {fmt_ms(per)} ms of it ({per / step_ms * 100:.0f} %), "
                f"{top['op_type']} alone {fmt_ms(top_per)} ms ({top_per / step_ms * 100:.0f} %). "
                "Look at the slowest operator types (Operators).")
    return (f"{head}; of {fmt_ms(kind_ms)} ms of {label} operator time, {top['op_type']} takes "
            f"{top_ms / kind_ms * 100:.0f} %.")


def _steps(n: int) -> str:
    return f"{n:,} step" if n == 1 else f"{n:,} steps"


def _data_wait_clause(prof, step_ms: float | None) -> str | None:
    """"it waits N ms (P %) for the next batch ..." where the host queue's get time is most of the step."""
    hq = _host_queue(prof)
    if not step_ms or not hq or hq.get("avg_get_ms") is None:
        return None
    share = hq["avg_get_ms"] / step_ms * 100
    if share < SETS_THE_STEP_PCT:
        return None
    return (f"it waits {fmt_ms(hq['avg_get_ms'])} ms of it ({share:.0f} %) for the next batch from the data "
            f"pipeline (the host queue was empty at {hq['empty_steps']:,} of {hq['steps']:,} steps). Look at the "
            "MindData pipeline (MindData).")


def _host_dispatch_clause(prof, step_ms: float | None) -> str | None:
    """"the device waits N ms of it (P %) for the host to launch its tasks ..." where the host-bound idle
    (`dispatch.profile_dispatch`, over the same step windows) is most of the step."""
    from .dispatch import profile_dispatch
    if not step_ms:
        return None
    d = profile_dispatch(prof)
    if not d.available or d.step_source == "none" or d.idle_share * 100 < SETS_THE_STEP_PCT:
        return None
    idle_ms = d.host_idle_per_step_us / 1000
    text = (f"the device waits {fmt_ms(idle_ms)} ms of it ({d.idle_share * 100:.0f} %) for the host to launch "
            "its tasks")
    if len(d.ops) and d.ops["host_idle_us"].iloc[0] > 0:
        text += f", most for {d.ops['responsible_op'].iloc[0]}"
    return text + ". Look at where the device waited for the host (Timeline)."


def kind_label(kind: str) -> str:
    from ..schema import KIND_LABELS
    return KIND_LABELS.get(kind, kind)


__all__ = ["Diagnosis", "diagnose", "ClusterDiagnosis", "ClusterFinding", "RankGroup", "diagnose_cluster",
           "rank_span", "split_groups", "MIN_COST_SHARE", "own_stages", "stage_sentence", "rank_by_cost", "fmt_ms", "STAGE_MEANING",
           "DATA_WAIT_CONTRADICTED_PCT"]


# -- clusters ---------------------------------------------------------------------------------------------
# A difference between ranks is a finding only when it costs at least this share of the step.
MIN_COST_SHARE = 0.01
# Ranks form groups where the gap between two groups' values is at least this many times the spread inside
# each group (and at least MIN_COST_SHARE of the step).
GROUP_GAP_FACTOR = 2.0
# hccl_raw writes link bandwidths without a unit (FORMATS.md: not the size/time ratio either).
LEGACY_BANDWIDTH_UNIT = "hccl_raw's own bandwidth unit, which the file does not name"
# The stage that holds a rank's own work, per stage vocabulary (first present wins).
WORK_STAGES = ("computing_ms", "fp_and_bp_ms", "fp_ms")


@dataclasses.dataclass(frozen=True)
class RankGroup:
    """Ranks that behave alike: ``ranks`` (keys, numeric order), ``label`` ("ranks 0–7"), ``named`` (what the
    profile calls such a set: "communication group 3 (p2p)", "pipeline stage 2"; empty when none), ``means``
    (stage -> mean ms over the group's ranks), ``ranges`` (stage -> (min, max) ms)."""

    ranks: tuple
    label: str
    named: str
    means: dict
    ranges: dict


@dataclasses.dataclass(frozen=True)
class ClusterFinding:
    """``id``, ``text`` (a sentence), ``cost_ms`` (time per step at stake, None where the data gives no
    estimate), ``ranks`` it is about, ``stage``, ``evidence`` (name -> number, ms unless the name says),
    ``view`` (the page that shows it)."""

    id: str
    text: str
    cost_ms: float | None
    ranks: tuple = ()
    stage: str | None = None
    evidence: dict = dataclasses.field(default_factory=dict)
    view: str = "Cluster"

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "cost_ms": self.cost_ms, "ranks": list(self.ranks),
                "stage": self.stage, "evidence": dict(self.evidence), "view": self.view}


@dataclasses.dataclass(frozen=True)
class ClusterDiagnosis:
    """What sets a cluster's step time: ``step_ms`` (the slowest rank's average step: synchronous ranks
    wait for it), ``headline`` (the first sentence of the cluster page and report), ``groups`` (`RankGroup`s,
    empty when the ranks form none), ``grouped_by`` (the stage whose values split them), ``findings``
    (`ClusterFinding`s, most time per step first; MindInsight's cluster proposals among them, with the
    cost where it can be stated)."""

    step_ms: float | None
    headline: str
    groups: tuple
    grouped_by: str | None
    findings: tuple

    def to_dict(self) -> dict:
        return {"headline": self.headline, "step_ms": self.step_ms, "grouped_by": self.grouped_by,
                "groups": [{"ranks": list(g.ranks), "label": g.label, "named": g.named, "means": g.means}
                           for g in self.groups],
                "findings": [f.to_dict() for f in self.findings]}


def rank_span(ranks) -> str:
    """"rank 3", "ranks 0–1", "ranks 0–7, 9": consecutive numeric ranks folded into ranges."""
    keys = [str(r) for r in ranks]
    if len(keys) == 1:
        return f"rank {keys[0]}"
    if not all(k.isdigit() for k in keys):
        return "ranks " + ", ".join(keys)
    nums = sorted(int(k) for k in keys)
    parts, start, prev = [], nums[0], nums[0]
    for n in nums[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(f"{start}–{prev}" if prev > start else f"{start}")
        if n is not None:
            start = prev = n
    return "ranks " + ", ".join(parts)


def _span(lo: float, hi: float) -> str:
    return fmt_ms(lo) if fmt_ms(lo) == fmt_ms(hi) else f"{fmt_ms(lo)}–{fmt_ms(hi)}"


def split_groups(values, step_ms: float) -> list[list] | None:
    """Split ``values`` (a Series: rank -> ms) into groups of alike ranks at the largest gaps between sorted
    values, as long as every gap used is at least `GROUP_GAP_FACTOR` times the widest group's spread and at
    least `MIN_COST_SHARE` of ``step_ms``, and every group holds two ranks or more; None when the ranks form
    no groups."""
    v = values.dropna().sort_values(kind="stable")
    if len(v) < 2:
        return None
    gaps = np.diff(v.to_numpy(float))
    best = None
    for k in range(1, min(len(v) - 1, 8) + 1):
        cut = sorted(np.argsort(-gaps, kind="stable")[:k])
        bounds = [0, *[c + 1 for c in cut], len(v)]
        groups = [v.iloc[a:b] for a, b in zip(bounds, bounds[1:])]
        widest = max(float(g.max() - g.min()) for g in groups)
        smallest_gap = float(gaps[cut].min())
        if min(len(g) for g in groups) < 2:
            break  # a group of one rank is an outlier, not a group: `slow_ranks` says those
        if smallest_gap >= max(GROUP_GAP_FACTOR * widest, MIN_COST_SHARE * step_ms) and smallest_gap > 0:
            best = [list(g.index) for g in groups]
    return best


def _group_names(cluster, groups: list[list]) -> list[str]:
    """What the profile calls each group of ranks: a communication group with exactly those ranks, else a
    pipeline stage of a legacy ``ascend_cluster_analyse_pipeline-parallel_*`` file."""
    from .cluster import _pipeline_shape, communication_summary
    names = ["" for _ in groups]
    try:
        comm = communication_summary(cluster)["groups"]  # gathered where the ranks are parsed
    except Exception:  # noqa: BLE001 - a cluster without group files
        comm = None
    if comm is not None and len(comm):
        known = {}
        for r in comm.drop_duplicates(["kind", "group"]).itertuples(index=False):
            known.setdefault(frozenset(str(x) for x in r.ranks), f"{r.kind} communication group {r.group}")
        names = [known.get(frozenset(str(x) for x in g), "") for g in groups]
    stages, size = _pipeline_shape(cluster)
    if stages and size and not any(names):
        per = size // stages
        for i, g in enumerate(groups):
            ids = {int(x) // per for x in g if str(x).isdigit()}
            if len(ids) == 1 and len(g) == per:
                names[i] = f"pipeline stage {ids.pop() + 1} of {stages}"
    return names


def diagnose_cluster(cluster) -> ClusterDiagnosis:
    """The cluster's diagnosis (memoised on it). See `ClusterDiagnosis`."""
    return cluster.cached("cluster_diagnosis", lambda: _diagnose_cluster(cluster))


def _diagnose_cluster(cluster) -> ClusterDiagnosis:
    from . import cluster as C
    summary = C.rank_summary(cluster)
    steps = C.rank_steps(summary)
    if "total_ms" not in steps.columns or steps["total_ms"].isna().all():
        return ClusterDiagnosis(None, "No rank of this cluster has a step trace, so what sets the step time "
                                      "across ranks cannot be said.", (), None, ())
    steps = steps[steps["total_ms"].notna()]
    stages = [c for c in summary["stages"] if c in steps.columns]
    extras = [c for c in ("bubble_ms",) if c in steps.columns and steps[c].fillna(0).max() > 0]
    step_ms = float(steps["total_ms"].max())
    work = next((c for c in WORK_STAGES if c in stages), None)

    # groups: the stage whose values split the ranks with the widest gap
    split, by = None, None
    for col in [*stages, *extras]:
        g = split_groups(steps[col], step_ms)
        if g is not None:
            gap = _group_gap(steps[col], g)
            if by is None or gap > _group_gap(steps[by], split):
                split, by = g, col
    names = _group_names(cluster, split) if split else []
    groups = tuple(_group(steps, g, [*stages, *extras, "total_ms"], n) for g, n in zip(split or [], names))

    findings = []
    critical = max(groups, key=lambda g: g.means["total_ms"]) if groups else None
    crit_rows = steps.loc[list(critical.ranks)] if critical else steps
    limiter = max(stages, key=lambda c: float(crit_rows[c].median())) if stages else None
    if limiter is not None:
        lo, hi = float(crit_rows[limiter].min()), float(crit_rows[limiter].max())
        tot_lo, tot_hi = float(crit_rows["total_ms"].min()), float(crit_rows["total_ms"].max())
        share = float((crit_rows[limiter] / crit_rows["total_ms"]).median()) * 100
        who = (f"on {critical.label}, the slowest" + (f" ({critical.named})" if critical.named else "")
               if critical else f"on every one of the {len(steps)} ranks")
        name, _, look = STAGE_MEANING.get(limiter, (STAGE_LABELS.get(limiter, limiter), "", "the Step trace"))
        bubble = ""
        if "bubble_ms" in extras and limiter in ("communication_not_overlapped_ms", "free_ms"):
            b = crit_rows["bubble_ms"].fillna(0.0)
            if b.max() > 0:
                bubble = f", with {_span(float(b.min()), float(b.max()))} ms of pipeline bubble in the step"
        findings.append(ClusterFinding(
            "cluster.limiter", f"{name} sets the step time {who}: {_span(lo, hi)} of {_span(tot_lo, tot_hi)} ms "
            f"per step (median {share:.0f} %){bubble}.", float(crit_rows[limiter].median()),
            tuple(crit_rows.index), limiter, {"median_ms": float(crit_rows[limiter].median()),
                                              "share_pct": share}, "Cluster"))

    if groups and work is not None:
        slow = max(groups, key=lambda g: g.means[work])
        fast = min(groups, key=lambda g: g.means[work])
        diff = slow.means[work] - fast.means[work]
        if slow is not fast and diff >= MIN_COST_SHARE * step_ms:
            waits = [c for c in stages if c != work and fast.means[c] - slow.means[c] > 0]
            wait = max(waits, key=lambda c: fast.means[c] - slow.means[c]) if waits else None
            wait_txt = (f"; {fast.label} wait meanwhile: {STAGE_LABELS.get(wait, wait).lower()} "
                        f"{_span(*fast.ranges[wait])} ms against {_span(*slow.ranges[wait])} ms on {slow.label}"
                        if wait else "")
            ratio = slow.means[work] / fast.means[work] if fast.means[work] else float("inf")
            findings.append(ClusterFinding(
                "cluster.work_imbalance",
                f"{slow.label.capitalize()}" + (f" ({slow.named})" if slow.named else "")
                + f" {'compute' if work == 'computing_ms' else 'spend'} {fmt_ms(slow.means[work])} ms a step"
                + ("" if work == "computing_ms" else f" in {STAGE_LABELS[work].lower()}") + f" against {fmt_ms(fast.means[work])} ms on {fast.label} "
                f"({ratio:.2f}×){wait_txt}. Balancing the work between them could save up to {fmt_ms(diff)} ms "
                f"a step ({diff / step_ms * 100:.0f} % of the {fmt_ms(step_ms)} ms step).",
                diff, tuple(slow.ranks), work,
                {"slow_ms": slow.means[work], "fast_ms": fast.means[work], "ratio": ratio}, "Cluster"))
        bubble_excess = 0.0
        for col in [c for c in [*extras, *stages] if c != work]:  # bubbles first: they lie inside the others
            hi_g = max(groups, key=lambda g: g.means[col])
            lo_g = min(groups, key=lambda g: g.means[col])
            excess = hi_g.means[col] - lo_g.means[col]
            if hi_g is fast and any(f.id == "cluster.work_imbalance" for f in findings):
                excess -= diff  # the fast ranks' wait for the slow ones is the imbalance, said above
            if col == "communication_not_overlapped_ms":
                excess -= bubble_excess  # a pipeline bubble is receive time the device waits in, said above
            if col == "bubble_ms":
                bubble_excess = max(excess, 0.0)
            if hi_g is lo_g or excess < MIN_COST_SHARE * step_ms:
                continue
            share = hi_g.means[col] / hi_g.means["total_ms"] * 100 if hi_g.means["total_ms"] else 0.0
            what = "pipeline bubbles" if col == "bubble_ms" else STAGE_LABELS.get(col, col).lower()
            findings.append(ClusterFinding(
                f"cluster.group.{col[:-3]}",
                f"{hi_g.label.capitalize()}" + (f" ({hi_g.named})" if hi_g.named else "")
                + f" spend {_span(*hi_g.ranges[col])} ms a step in {what} ({share:.0f} % of the step) against "
                f"{_span(*lo_g.ranges[col])} ms on {lo_g.label}: up to {fmt_ms(excess)} ms a step.",
                excess, tuple(hi_g.ranks), col, {"high_ms": hi_g.means[col], "low_ms": lo_g.means[col]}, "Cluster"))
    elif work is not None and len(steps) > 1:
        # no groups: a stage that varies widely across ranks while the work is even means ranks wait for
        # each other (synchronisation inside collectives)
        w = steps[work]
        even = float(w.max() - w.min()) <= 0.05 * float(w.median())
        for col in [c for c in stages if c == "communication_not_overlapped_ms"]:
            spread = float(steps[col].max() - steps[col].min())
            if even and spread >= 0.1 * step_ms:
                lo_r, hi_r = steps[col].idxmin(), steps[col].idxmax()
                findings.append(ClusterFinding(
                    f"cluster.spread.{col[:-3]}",
                    f"{STAGE_LABELS.get(col, col)} varies {fmt_ms(steps[col].min())}–{fmt_ms(steps[col].max())} "
                    f"ms across ranks (rank {lo_r} least, rank {hi_r} most) while {STAGE_LABELS[work].lower()} is "
                    f"even ({_span(float(w.min()), float(w.max()))} ms): the ranks wait for each other in "
                    "collectives rather than compute.", None, (str(hi_r),), col,
                    {"min_ms": float(steps[col].min()), "max_ms": float(steps[col].max())}, "Cluster"))

    # the slow rank's causes come before its outlier stages: at equal cost they say why
    findings += _slow_rank_findings(cluster)
    slow = C.slow_ranks(summary)
    for r in slow[slow["flagged"]].itertuples():
        if r.stage == "total_ms" or r.excess_ms < MIN_COST_SHARE * step_ms:
            continue
        findings.append(ClusterFinding(
            f"cluster.outlier.{r.rank}.{r.stage[:-3]}",
            f"Rank {r.rank} is an outlier in {STAGE_LABELS.get(r.stage, r.stage).lower()}: {fmt_ms(r.value_ms)} ms "
            f"against the ranks' median {fmt_ms(r.median_ms)} ms (robust z {r.z:.1f}), {fmt_ms(r.excess_ms)} ms a "
            "step.", float(r.excess_ms), (str(r.rank),), r.stage,
            {"value_ms": r.value_ms, "median_ms": r.median_ms, "z": r.z}, "Cluster"))
    findings += _mindinsight_proposals(cluster, summary)
    ranked = sorted(findings, key=lambda f: (f.cost_ms is None, -(f.cost_ms or 0.0)))
    headline = _cluster_headline(ranked, groups, by, step_ms)
    return ClusterDiagnosis(step_ms, headline, groups, by, tuple(ranked))


def _group_gap(values, groups) -> float:
    means = sorted(float(values.loc[g].mean()) for g in groups)
    return min(b - a for a, b in zip(means, means[1:])) if len(means) > 1 else 0.0


def _group(steps, ranks, cols, named) -> RankGroup:
    from .cluster import _rank_key
    ranks = sorted(ranks, key=_rank_key)
    rows = steps.loc[ranks]
    return RankGroup(tuple(str(r) for r in ranks), rank_span(ranks), named,
                     {c: float(rows[c].fillna(0.0).mean()) for c in cols},
                     {c: (float(rows[c].fillna(0.0).min()), float(rows[c].fillna(0.0).max())) for c in cols})


def _cluster_headline(findings, groups, by, step_ms) -> str:
    """The limiting stage's sentence, then the costliest other finding's."""
    first = next((f for f in findings if f.id == "cluster.limiter"), None)
    rest = next((f for f in findings if f.id != "cluster.limiter" and f.cost_ms is not None
                 and f.cost_ms >= MIN_COST_SHARE * step_ms), None)
    rest = rest or next((f for f in findings if f.id.startswith("cluster.spread.")), None)
    text = first.text if first else f"The slowest rank's average step takes {fmt_ms(step_ms)} ms."
    if rest is not None:
        text += " " + rest.text
    return text


def _slow_rank_findings(cluster) -> list[ClusterFinding]:
    """Each explained slow rank and its leading cause, costing what the rank's step takes over the ranks'
    median (the others wait that long for it; its causes may differ from the median by more, where the parts
    offset each other), then the slow links (`analysis.slow_rank_cause`), each costing the ms a step it costs
    the ranks it holds back."""
    from . import slow_rank_cause as S
    out = []
    for text, cause in S.leading_sentences(cluster):
        excess = max(cause["step_ms"] - cause["median_step_ms"], 0.0)
        out.append(ClusterFinding(
            f"cluster.slow_rank.{cause['rank']}", text, excess, (cause["rank"],), cause["part"],
            {"step_ms": cause["step_ms"], "median_step_ms": cause["median_step_ms"], "cause_ms": cause["ms"]},
            cause["view"]))
    links = S.link_speeds(cluster)
    for r in links[links["slow"]].head(S.TOP_LINKS).itertuples(index=False):
        bw = (f"at {r.bandwidth_gbps:,.3g} GB/s, {r.ratio * 100:.1f} % of the {r.transport} median "
              f"{r.expected_gbps:,.3g} GB/s" if r.bandwidth_gbps == r.bandwidth_gbps else
              f"at {r.ratio * 100:.1f} % of the {r.transport} median bandwidth ({LEGACY_BANDWIDTH_UNIT})")
        name = f"Link {r.src}→{r.dst}" if r.dst != "*" else f"Rank {r.src}'s {r.transport} traffic"
        out.append(ClusterFinding(
            f"cluster.slow_link.{r.src}.{r.dst}.{r.transport}",
            f"{name} ({r.transport}) runs {bw}; it holds back {rank_span(r.held_back.split(', '))}: "
            f"{fmt_ms(r.extra_ms)} ms a step against the median bandwidth for the {r.size_mb:,.3g} MB it moves."
            if r.size_mb == r.size_mb else
            f"{name} ({r.transport}) runs {bw}; it holds back {rank_span(r.held_back.split(', '))}: "
            f"{fmt_ms(r.extra_ms)} ms a step against the median bandwidth for the data it moves.",
            float(r.extra_ms), tuple(r.held_back.split(", ")), None,
            {"bandwidth_gbps": r.bandwidth_gbps, "expected_gbps": r.expected_gbps, "ratio": r.ratio}, "links"))
    return out


def _mindinsight_proposals(cluster, summary) -> list[ClusterFinding]:
    """MindInsight 2.3.1's cluster proposals, with their own numbers; a cost only where it is a time."""
    from . import cluster as C
    out = []
    p = C.step_interval_proposal(summary)
    if p:
        steps = C.rank_steps(summary)
        excess = p["val"] - float(steps[p["stage"]].mean())
        out.append(ClusterFinding(
            "mindinsight.step_interval", f"MindInsight's step-interval proposal: rank {p['rank_id']} has the "
            f"longest {STAGE_LABELS.get(p['stage'], p['stage']).lower()}, {p['val']} ms, {p['percent']} % above the "
            "ranks' mean.", max(excess, 0.0), (str(p["rank_id"]),), p["stage"],
            {"val_ms": p["val"], "percent": p["percent"]}, "Cluster"))
    f = C.pipeline_flops_imbalance(cluster)
    if f:
        out.append(ClusterFinding(
            "mindinsight.pipeline_flops", f"MindInsight's pipeline FLOPs proposal: stage {f['stage']} carries "
            f"{f['val']:,} MFLOPs of cube work per rank, {f['percent']} % above the stages' mean.", None,
            (), None, {"val_mflops": f["val"], "percent": f["percent"]}, "Cluster"))
    links = C.slow_links(cluster)
    for r in links[links["slowest"]].itertuples():
        out.append(ClusterFinding(
            f"mindinsight.slow_link.{r.src}.{r.dst}", f"MindInsight's slow-link proposal: link {r.src}→{r.dst} "
            f"({r.transport}) runs {r.below_mean_pct:.2f} % below its transport's mean bandwidth "
            f"({r.bandwidth:,.1f} against {r.mean_bandwidth:,.1f} in {LEGACY_BANDWIDTH_UNIT}).", None,
            (str(r.recorded_by),), None,
            {"bandwidth_gbps": r.bandwidth, "below_mean_pct": r.below_mean_pct}, "Cluster"))
    pc = C.pipeline_communication(cluster)
    if pc and pc.get("worst_stage"):
        out.append(ClusterFinding(
            "mindinsight.pipeline_communication", f"MindInsight's pipeline communication proposal: stage "
            f"{pc['worst_stage']} spends {pc['worst_stage_pct']:.2f} % of its time in collective communication.",
            None, (), None, {"worst_stage_pct": pc["worst_stage_pct"]}, "Cluster"))
    return out
