"""`compare(a, b)`: what changed between two runs, as DataFrames and one plain-language verdict.

``a`` is the baseline, ``b`` the new run; deltas are ``b - a`` and percentages relative to ``a``.
Pure over the two Profiles' frames (loading a path goes through `nbprofiler.load`).
"""
from __future__ import annotations

import dataclasses
import html
import math

import numpy as np
import pandas as pd

from .labels import run_label as _label
from .memory_peak import MemoryDiff, memory_diff
from .steps import HOST_QUEUE_SOURCE, step_average, step_times

TOP_OPS = 10


@dataclasses.dataclass
class Comparison:
    """The differences between run ``a`` (baseline) and run ``b``.

    Frames (every time in the unit its name says; ``delta_*`` = b - a, ``delta_pct`` relative to a):
    - ``steps``: one row per stage (+ ``total_ms``): ``stage``, ``a_ms``, ``b_ms`` (the average each run
      shows: MindInsight's average row as written, else the mean of the steps), ``delta_ms``,
      ``delta_pct``, ``a_mean_ms``, ``b_mean_ms``, ``a_median_ms``, ``b_median_ms``, ``a_p90_ms``,
      ``b_p90_ms`` (over the real steps), ``a_steps``, ``b_steps``.
    - ``op_types``: outer join on (``kind``, ``op_type``): ``a_time_us``, ``b_time_us``, ``delta_us``,
      ``delta_pct``, ``a_count``, ``b_count``, ``a_share_pct``, ``b_share_pct`` (0..100 of the kind's
      time), ``status`` ("both", "new": only in b, "vanished": only in a); sorted by |delta_us|.
    - ``top_ops``: the ``TOP_OPS`` longest operators of either run: ``kind``, ``op_name``, ``op_type``,
      ``a_time_us``, ``b_time_us``, ``delta_us``, ``a_rank``, ``b_rank`` (1 = longest; NaN if absent).
    - ``minddata``: per pipeline op (joined on ``op_id`` and ``op_type``): ``a_usage_rate``,
      ``b_usage_rate`` (0..1), ``delta_usage``, ``a_bottleneck``, ``b_bottleneck`` (bool), ``change``
      ("resolved", "new", "still", "" — or "only_a" / "only_b": a bottleneck whose op the other run's
      pipeline does not have, so nothing can be said about it).
    - ``queues``: ``queue`` ("host", "device"), ``a_steps``, ``a_empty``, ``a_empty_rate``, ``b_steps``,
      ``b_empty``, ``b_empty_rate``.
    - ``memory``: a `nbprofiler.analysis.memory_peak.MemoryDiff`: each run's memory peak and what is alive
      at it, the peak's change, and its ``operators`` frame (``memory_peak_diff``: per operator the size
      alive at each peak and the change, largest first); ``memory.available`` False with ``why`` when a
      run has no memory record.
    ``headlines`` holds each run's diagnosis sentence (``"a"``, ``"b"``). ``stage_set`` says which stages
    were compared: the runs' own when they match, else none (runs of two
    stage vocabularies compare their step totals only); a run without a step trace contributes its
    step totals from the host queue's batch timestamps (``step_sources`` says which). ``verdict`` is a
    list of sentences.
    """

    a_label: str
    b_label: str
    steps: pd.DataFrame
    step_values: pd.DataFrame
    op_types: pd.DataFrame
    top_ops: pd.DataFrame
    minddata: pd.DataFrame
    queues: pd.DataFrame
    stage_set: list[str]
    verdict: list[str]
    # where each run's step times come from: "step trace", or "host-queue batch timestamps" for a run
    # without one (CPU runs), or None when the run holds no step timing at all
    step_sources: dict = dataclasses.field(default_factory=dict)
    # each run's first sentence ("a", "b"): what sets its step time (`analysis.diagnosis`)
    headlines: dict = dataclasses.field(default_factory=dict)
    # the two Profiles compared, for the event-level diff (`timeline_diff`)
    a: object = dataclasses.field(default=None, repr=False, compare=False)
    b: object = dataclasses.field(default=None, repr=False, compare=False)
    memory: MemoryDiff | None = None

    @property
    def text(self) -> str:
        return "; ".join(self.verdict)

    def show(self, **kwargs):
        from ..views.compare import CompareView
        return CompareView(self, **kwargs).display()

    def timeline_diff(self, step="first", b_step: int | None = None, top_n: int | None = None):
        """The event-level diff of the two runs (`nbprofiler.analysis.timeline_diff`): b's timeline on
        a's clock, step-aligned, and the op types and operators whose time in the step changed most."""
        from .timeline_diff import TOP_CHANGED, timeline_diff
        if self.a is None or self.b is None:
            raise ValueError("this Comparison does not hold its two runs (made from frames): call "
                             "nbprofiler.analysis.timeline_diff.timeline_diff(a, b) with the Profiles")
        return timeline_diff(self.a, self.b, step=step, b_step=b_step, top_n=top_n or TOP_CHANGED,
                             labels=(self.a_label, self.b_label))

    def timeline(self, step="first", b_step: int | None = None, top_n: int | None = None, **kwargs):
        """The two timelines stacked on one step-aligned clock with the operators that changed most
        outlined and listed: a `TimelineDiffView` of `timeline_diff` (``kwargs`` go to the view)."""
        from ..views.timeline_diff import TimelineDiffView
        return TimelineDiffView(self.timeline_diff(step, b_step, top_n), **kwargs)

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(s)}</li>" for s in self.verdict)
        return (f"<div><b>nbprofiler comparison</b>: {html.escape(self.a_label)} &rarr; "
                f"{html.escape(self.b_label)}<ul>{items}</ul></div>")

    def __repr__(self) -> str:
        return f"<nbprofiler.Comparison {self.a_label!r} -> {self.b_label!r}: {self.text}>"


def compare(a, b, top_n: int = TOP_OPS, labels: tuple[str, str] | None = None) -> Comparison:
    """Compare two runs (Profiles, or paths loaded with `nbprofiler.load`). See `Comparison`."""
    a, b = _profile(a), _profile(b)
    la, lb = labels or (_label(a), _label(b))
    stage_set, step_values = _step_values(a, b)
    sources = step_values.attrs.get("sources", {})
    steps = _steps_table(a, b, stage_set, step_values)
    op_types = _op_types(a.op_types, b.op_types)
    top = _top_ops(a.ops, b.ops, top_n)
    md, queues = _minddata(a, b)
    mem = memory_diff(a, b)
    verdict = _verdict(steps, op_types, md, queues, sources, mem)
    from .diagnosis import diagnose
    headlines = {"a": diagnose(a).headline, "b": diagnose(b).headline}
    return Comparison(la, lb, steps, step_values, op_types, top, md, queues, stage_set, verdict, sources, headlines,
                      a, b, mem)


def _profile(x):
    from ..model.profile import Cluster, Profile
    if isinstance(x, Profile):
        return x
    if isinstance(x, Cluster):
        raise TypeError("compare() takes two single-rank profiles; pick a rank: cluster['0']")
    from ..model.loader import load
    p = load(x)
    if isinstance(p, Cluster):
        raise TypeError(f"{x!s} holds several devices/ranks {p.ranks}; pass nbprofiler.load(path, device=...)")
    return p


# -- step trace -----------------------------------------------------------------------------------
def _step_values(a, b) -> tuple[list[str], pd.DataFrame]:
    """Long frame ``run`` ("a"/"b"), ``step``, ``stage``, ``ms`` over the stages both runs share."""
    sa, sb = a.step_stages, b.step_stages
    frames = {}
    if sa and sa == sb:
        stages = sa
        frames = {"a": a.step_trace, "b": b.step_trace}
    else:
        # Different stage vocabularies (a legacy step trace against a step_trace_time.csv) share no stage:
        # only the step totals are compared, never one run's stages forced into the other's.
        stages = []
        for k, p in (("a", a), ("b", b)):
            st = p.step_trace
            frames[k] = st[["step", "total_ms"]] if len(st) and "total_ms" in st.columns else \
                pd.DataFrame(columns=["step", "total_ms"])
    sources = {}
    for k, p in (("a", a), ("b", b)):
        st = frames.get(k)
        if st is not None and len(st):
            sources[k] = "step trace"
        else:  # no step trace (a CPU run): the run's one step-time source (`steps.step_times`)
            times = step_times(p)
            frames[k] = times.frame[["step", "total_ms"]]
            sources[k] = times.source
    rows = []
    for k, st in frames.items():
        cols = [c for c in stages + ["total_ms"] if c in st.columns]
        if not len(st) or not cols:
            continue
        long = st[["step"] + cols].melt(id_vars="step", var_name="stage", value_name="ms")
        long.insert(0, "run", k)
        rows.append(long)
    values = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["run", "step", "stage", "ms"])
    values["ms"] = values["ms"].astype(float)
    values.attrs["sources"] = sources
    return stages, values


def _shown_average(p, stages: list[str], values: pd.DataFrame) -> dict:
    """The run's comparable average (`nbprofiler.analysis.steps`) over ``stages``: its file's average row
    where that is a real step, else the mean of the step values compared."""
    steps = values.pivot_table(index="step", columns="stage", values="ms").reset_index() if len(values) else \
        pd.DataFrame(columns=["step", *stages, "total_ms"])
    return step_average(steps, stages, p.step_trace_average).comparable


def _steps_table(a, b, stages, values) -> pd.DataFrame:
    stats = values.groupby(["run", "stage"])["ms"].agg(
        mean="mean", median="median", p90=lambda s: s.quantile(0.9), n="count")
    avgs = {k: _shown_average(p, stages, values[values["run"] == k]) for k, p in (("a", a), ("b", b))}
    rows = []
    for stage in stages + ["total_ms"]:
        r = {"stage": stage}
        for k in ("a", "b"):
            r[f"{k}_ms"] = avgs[k].get(stage, np.nan)
            for stat in ("mean", "median", "p90"):
                r[f"{k}_{stat}_ms"] = stats[stat].get((k, stage), np.nan)
            r[f"{k}_steps"] = int(stats["n"].get((k, stage), 0))
        r["delta_ms"] = r["b_ms"] - r["a_ms"]
        r["delta_pct"] = r["delta_ms"] / r["a_ms"] * 100 if r["a_ms"] else np.nan
        rows.append(r)
    cols = ["stage", "a_ms", "b_ms", "delta_ms", "delta_pct", "a_mean_ms", "b_mean_ms", "a_median_ms",
            "b_median_ms", "a_p90_ms", "b_p90_ms", "a_steps", "b_steps"]
    return pd.DataFrame(rows)[cols]


# -- operators ------------------------------------------------------------------------------------
def _op_types(ta: pd.DataFrame, tb: pd.DataFrame) -> pd.DataFrame:
    keys = ["kind", "op_type"]
    cols = keys + ["total_time_us", "count", "percent"]

    def prep(t):
        t = t[[c for c in cols if c in t.columns]].copy() if len(t) else pd.DataFrame(columns=cols)
        return t.groupby(keys, as_index=False).agg(total_time_us=("total_time_us", "sum"), count=("count", "sum"),
                                                   percent=("percent", "sum")) if len(t) else t
    m = prep(ta).merge(prep(tb), on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    out = pd.DataFrame({"kind": m["kind"], "op_type": m["op_type"],
                        "a_time_us": m["total_time_us_a"].astype(float), "b_time_us": m["total_time_us_b"].astype(float)})
    out["delta_us"] = out["b_time_us"].fillna(0) - out["a_time_us"].fillna(0)
    out["delta_pct"] = out["delta_us"] / out["a_time_us"] * 100
    out["a_count"] = m["count_a"].astype("Float64").astype("Int64")
    out["b_count"] = m["count_b"].astype("Float64").astype("Int64")
    out["a_share_pct"] = m["percent_a"].astype(float)
    out["b_share_pct"] = m["percent_b"].astype(float)
    out["status"] = m["_merge"].map({"both": "both", "left_only": "vanished", "right_only": "new"}).astype(str)
    return out.sort_values("delta_us", key=lambda s: s.abs(), ascending=False, ignore_index=True)


def _top_ops(oa: pd.DataFrame, ob: pd.DataFrame, n: int) -> pd.DataFrame:
    keys = ["kind", "op_name"]
    cols = ["kind", "op_name", "op_type", "total_time_us"]

    def prep(o):
        if not len(o) or not all(c in o.columns for c in cols):
            return pd.DataFrame(columns=cols + ["rank"])
        o = o[cols].groupby(keys, as_index=False).agg(op_type=("op_type", "first"), total_time_us=("total_time_us", "sum"))
        o["rank"] = o["total_time_us"].rank(ascending=False, method="first")
        return o
    pa, pb = prep(oa), prep(ob)
    m = pa.merge(pb, on=keys, how="outer", suffixes=("_a", "_b"))
    m = m[(m["rank_a"] <= n) | (m["rank_b"] <= n)]
    out = pd.DataFrame({"kind": m["kind"], "op_name": m["op_name"],
                        "op_type": m["op_type_b"].fillna(m["op_type_a"]) if len(m) else m.get("op_type_a"),
                        "a_time_us": m["total_time_us_a"].astype(float), "b_time_us": m["total_time_us_b"].astype(float),
                        "a_rank": m["rank_a"].astype(float), "b_rank": m["rank_b"].astype(float)})
    out["delta_us"] = out["b_time_us"].fillna(0) - out["a_time_us"].fillna(0)
    cols_out = ["kind", "op_name", "op_type", "a_time_us", "b_time_us", "delta_us", "a_rank", "b_rank"]
    return out[cols_out].sort_values(["a_rank", "b_rank"], ignore_index=True)


# -- MindData ---------------------------------------------------------------------------------------
def _bottlenecks(pipeline: pd.DataFrame) -> set[int]:
    if pipeline is None or not len(pipeline) or "op_id" not in pipeline.columns:
        return set()
    from .minddata import bottleneck_ops
    return {int(i) for i in bottleneck_ops(pipeline).op_ids}


def _minddata(a, b) -> tuple[pd.DataFrame, pd.DataFrame]:
    cols = ["op_id", "op_type", "a_usage_rate", "b_usage_rate", "delta_usage", "a_bottleneck", "b_bottleneck",
            "change"]
    pa, pb = a.minddata_pipeline, b.minddata_pipeline
    ba, bb = _bottlenecks(pa), _bottlenecks(pb)
    if len(pa) or len(pb):
        keep = ["op_id", "op_type", "output_queue_usage_rate"]
        sel = lambda p: p[keep] if len(p) and all(c in p.columns for c in keep) else pd.DataFrame(columns=keep)  # noqa: E731
        m = sel(pa).merge(sel(pb), on=["op_id", "op_type"], how="outer", suffixes=("_a", "_b"), indicator=True)
        md = pd.DataFrame({"op_id": m["op_id"].astype(int), "op_type": m["op_type"],
                           "a_usage_rate": m["output_queue_usage_rate_a"].astype(float),
                           "b_usage_rate": m["output_queue_usage_rate_b"].astype(float)})
        md["delta_usage"] = md["b_usage_rate"] - md["a_usage_rate"]
        # an op id flags a bottleneck only on the side where this op (same id and type) exists
        md["a_bottleneck"] = md["op_id"].isin(ba) & m["_merge"].isin(["both", "left_only"]).to_numpy()
        md["b_bottleneck"] = md["op_id"].isin(bb) & m["_merge"].isin(["both", "right_only"]).to_numpy()
        # "resolved"/"new" need the op in both pipelines; a bottleneck whose op the other run does not have
        # is not comparable (a run without that op, or without MindData files, resolved nothing)
        both = (m["_merge"] == "both").to_numpy()
        md["change"] = np.select(
            [md["a_bottleneck"] & ~md["b_bottleneck"] & both, ~md["a_bottleneck"] & md["b_bottleneck"] & both,
             md["a_bottleneck"] & md["b_bottleneck"], md["a_bottleneck"] & ~both, md["b_bottleneck"] & ~both],
            ["resolved", "new", "still", "only_a", "only_b"], "")
        md = md[cols].sort_values("op_id", ignore_index=True)
    else:
        md = pd.DataFrame(columns=cols)
    rows = []
    for name, fa, fb in (("host", a.host_queue, b.host_queue), ("device", a.device_queue, b.device_queue)):
        ra, rb = _queue_stats(fa), _queue_stats(fb)
        if ra or rb:
            rows.append({"queue": name, **{f"a_{k}": v for k, v in (ra or {}).items()},
                         **{f"b_{k}": v for k, v in (rb or {}).items()}})
    qcols = ["queue", "a_steps", "a_empty", "a_empty_rate", "b_steps", "b_empty", "b_empty_rate"]
    return md, pd.DataFrame(rows, columns=qcols)


def _queue_stats(q: pd.DataFrame) -> dict | None:
    if q is None or not len(q) or "size" not in q.columns:
        return None
    size = pd.to_numeric(q["size"], errors="coerce").dropna()
    if not len(size):
        return None
    empty = int((size == 0).sum())
    return {"steps": int(len(size)), "empty": empty, "empty_rate": empty / len(size)}


# -- verdict ----------------------------------------------------------------------------------------
STAGE_WORDS = {"iteration_interval_ms": "step interval", "fp_and_bp_ms": "forward+backward", "fp_ms": "forward",
               "tail_ms": "step tail", "preparing_ms": "preparing", "computing_ms": "computing",
               "communication_not_overlapped_ms": "exposed communication", "free_ms": "free time"}


def _fmt(ms: float) -> str:
    if ms == 0:
        return "0"
    return f"{ms:.3g}" if abs(ms) < 100 else f"{ms:,.0f}"


def _verdict(steps: pd.DataFrame, op_types: pd.DataFrame, md: pd.DataFrame, queues: pd.DataFrame,
             sources: dict | None = None, memory: MemoryDiff | None = None) -> list[str]:
    out = []
    tot = steps.set_index("stage").loc["total_ms"] if "total_ms" in set(steps["stage"]) else None
    if tot is not None and not (math.isnan(tot["a_ms"]) or math.isnan(tot["b_ms"])):
        stage_rows = steps[steps["stage"] != "total_ms"].dropna(subset=["delta_ms"])
        head = (f"step time {tot['delta_pct']:+.0f}% ({_fmt(tot['a_ms'])} -> {_fmt(tot['b_ms'])} ms)"
                if tot["a_ms"] else f"step time {_fmt(tot['a_ms'])} -> {_fmt(tot['b_ms'])} ms")
        used = sorted({v for v in (sources or {}).values() if v and v != "step trace"})
        if used:
            head += f", from the {' and '.join(used)}"
        if len(stage_rows):
            big = stage_rows.loc[stage_rows["delta_ms"].abs().idxmax()]
            head += (f": {STAGE_WORDS.get(big['stage'], big['stage'])} {_fmt(big['a_ms'])} -> "
                     f"{_fmt(big['b_ms'])} ms")
        out.append(head)
    elif tot is not None and (steps["a_steps"].sum() > 0 or steps["b_steps"].sum() > 0):
        out.append("step time: not comparable (only one run has a step trace)")
    if len(op_types):
        both = op_types[op_types["status"] == "both"]
        if len(both):
            r = both.iloc[0]
            pct = f" ({r['delta_pct']:+.0f}%)" if not math.isnan(r["delta_pct"]) else ""
            out.append(f"{r['op_type']} {r['delta_us'] / 1000:+.3g} ms{pct}, the largest op-type change")
        new, gone = op_types[op_types["status"] == "new"], op_types[op_types["status"] == "vanished"]
        if len(new) or len(gone):
            parts = []
            if len(new):
                parts.append(f"{len(new)} new op type{'s' if len(new) > 1 else ''} (e.g. {new.iloc[0]['op_type']})")
            if len(gone):
                parts.append(f"{len(gone)} vanished (e.g. {gone.iloc[0]['op_type']})")
            out.append(", ".join(parts))
    for _, r in md.iterrows():
        name = f"{r['op_type']}_{r['op_id']}"
        if r["change"] == "resolved":
            out.append(f"{name} no longer the bottleneck")
        elif r["change"] == "new":
            out.append(f"{name} became the bottleneck")
        elif r["change"] == "only_a":
            out.append(f"{name} was the bottleneck; b's pipeline has no such op (not comparable)")
        elif r["change"] == "only_b":
            out.append(f"{name} is the bottleneck; a's pipeline has no such op (not comparable)")
    for _, q in queues.iterrows():
        if not (pd.isna(q["a_empty_rate"]) or pd.isna(q["b_empty_rate"])) and q["a_empty_rate"] != q["b_empty_rate"]:
            out.append(f"{q['queue']} queue empty at {q['a_empty_rate']:.0%} -> {q['b_empty_rate']:.0%} of steps")
    # a memory line when the runs can be compared, or when one has a memory record the other lacks
    if memory is not None and (memory.available or memory.a.available or memory.b.available):
        out.append(memory.sentence)
    return out or ["no differences found in the frames both runs have"]


__all__ = ["compare", "Comparison", "TOP_OPS", "HOST_QUEUE_SOURCE"]
