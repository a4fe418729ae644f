"""Event-level diff of two runs: run B's timeline on run A's clock, step by step, stacked with A's for one
`TimelineView`, and the op types and operators whose time in the step changed most.

``a`` is the baseline, ``b`` the new run (deltas are ``b - a``, percentages relative to ``a``), as in
`nbprofiler.analysis.compare`. Steps are the runs' ``step_windows`` (each step's span on its timeline);
operators in a step are `nbprofiler.analysis.op_steps.step_operators` (kernels' step ids, else the
timeline's device operators placed in the step windows).

The compared step pair (``TimelineDiff.a_step``, ``b_step``): ``step="first"`` (default), the first step
number both runs have (else each run's first step); ``step="median"``, A's step of median duration among
the steps both have (the lower one of an even count); or a step number of A. ``b_step`` defaults to the
same number where B has it (else B's step chosen by the same rule), and may name any of B's steps: step N
against step M of one run is a pair too (``timeline_diff(p, p, step=N, b_step=M)``).

Alignment: when the pair has the same step number, every step number both runs have is aligned (each of
B's steps starts where the same step of A starts); otherwise the chosen pair alone. A B event inside an
aligned step window moves by that step's shift; any other B event by the shift of the last aligned step
that started before it (the first one's before them all).

Operators are matched across the runs by name and, where a name repeats in a step, by its occurrence (the
k-th execution of the name in the step, in start order). Times are per step: summed over the compared
step pair.
"""
from __future__ import annotations

import dataclasses
import html
import math

import numpy as np
import pandas as pd

from .cluster_timeline import stack_timelines
from .labels import run_label
from .op_steps import step_operators

TOP_CHANGED = 10
STEP_CHOICES = ("first", "median")
# A kernel's start in kernel_details.csv and its event's in trace_view.json differ by rounding (~0.1 µs);
# an operator is drawn by the timeline event of its name that starts nearest to it, within this.
MATCH_TOLERANCE_US = 1.0
# A collective's kernel name, hcom_<op>__<group hash>_<index>_<...>: the group hash is drawn anew by each
# recording of a job (hcom_allReduce__868_0_1 in one, hcom_allReduce__576_0_1 in the next), so operators
# are matched with it left out.
COLLECTIVE_GROUP = r"^(hcom_[A-Za-z]+__)\d+(_)"

STEP_COLUMNS = ["a_step", "b_step", "a_start_us", "b_start_us", "a_ms", "b_ms", "delta_ms", "shift_us",
                "start_us", "chosen"]
OP_TYPE_COLUMNS = ["op_type", "a_time_us", "b_time_us", "delta_us", "delta_pct", "a_count", "b_count", "status"]
OP_COLUMNS = ["op_name", "b_name", "occurrence", "op_type", "a_time_us", "b_time_us", "delta_us", "delta_pct", "a_count",
              "b_count", "a_start_us", "b_start_us", "status", "flagged"]
HIGHLIGHT_COLUMNS = ["run", "op_name", "occurrence", "track", "start_us", "dur_us", "delta_us"]


@dataclasses.dataclass
class TimelineDiff:
    """Two runs' timelines on one step-aligned clock, and what changed in the compared step.

    - ``frames``: the stacked timeline (``timeline``, ``timeline_tracks`` with a ``run`` column "a"/"b"
      and processes prefixed "A · " / "B · ", ``timeline_flows``, ``timeline_counters``) on A's clock
      (µs from A's ``origin_us``): what `TimelineView` draws.
    - ``steps`` (`schema.ANALYSIS_FRAMES` ``timeline_diff_steps``): the aligned step pairs, each with
      both runs' starts on their own clocks, durations, B's shift and the start on the shared clock.
    - ``op_types`` (``timeline_diff_op_types``) and ``ops`` (``timeline_diff_ops``): time in the compared
      step per op type / per operator (name and occurrence), ranked by |delta_us|; ``ops.flagged`` marks
      the ``top_n`` first, the operators the view highlights.
    - ``highlights`` (``timeline_diff_highlights``): the flagged operators' executions in the compared
      step of both runs, on the shared clock, with their stacked ``track`` (-1 where the timeline has no
      event for the operator).
    ``headline``: the first sentence: how much slower (faster) B's step is and which op type carries it.
    """

    a_label: str
    b_label: str
    a_step: int
    b_step: int
    frames: dict
    steps: pd.DataFrame
    op_types: pd.DataFrame
    ops: pd.DataFrame
    highlights: pd.DataFrame
    headline: str
    source: str | None = None   # where the steps' operators come from (`op_steps`)

    @property
    def step_pair(self) -> pd.Series:
        """The compared pair's row of ``steps``."""
        return self.steps[self.steps["chosen"]].iloc[0]

    @property
    def flagged(self) -> pd.DataFrame:
        """The operators the view highlights: the first ``top_n`` rows of ``ops``."""
        return self.ops[self.ops["flagged"]]

    def window(self, pad: float = 0.02) -> tuple[float, float]:
        """The compared step on the shared clock (the longer of the two runs' durations), padded by
        ``pad`` of its length each side."""
        r = self.step_pair
        length = max(float(r["a_ms"]), float(r["b_ms"])) * 1000.0
        return float(r["start_us"]) - pad * length, float(r["start_us"]) + (1 + pad) * length

    def show(self, **kwargs):
        from ..views.timeline_diff import TimelineDiffView
        return TimelineDiffView(self, **kwargs).display()

    def _repr_html_(self) -> str:
        return f"<div><b>nbprofiler timeline diff</b>: {html.escape(self.headline)}</div>"

    def __repr__(self) -> str:
        return f"<nbprofiler.TimelineDiff {self.a_label!r} -> {self.b_label!r}: {self.headline}>"


def timeline_diff(a, b, step="first", b_step: int | None = None, top_n: int = TOP_CHANGED,
                  labels: tuple[str, str] | None = None) -> TimelineDiff:
    """The event-level diff of runs ``a`` and ``b`` (Profiles) at a step pair (see the module docstring).
    Raises ValueError when a run has no steps on its timeline, or a step asked for does not exist."""
    la, lb = labels or (run_label(a), run_label(b))
    wa, wb = _windows(a, "a"), _windows(b, "b")
    sa, sb = _choose_pair(wa, wb, step, b_step)
    pairs = _aligned_pairs(wa, wb, sa, sb)
    steps = _steps_frame(wa, wb, pairs, sa)
    ra, source = _step_ops(a, sa)
    rb, _ = _step_ops(b, sb)
    rb = rb.assign(start_us=rb["start_us"] + float(steps.loc[steps["chosen"], "shift_us"].iloc[0]))
    op_types = _op_types(ra, rb)
    ops = _ops(ra, rb, top_n)
    frames = stack_timelines([("a", "A", a, 0.0), ("b", "B", b, _shift_of(steps))])
    frames["timeline_tracks"] = _with_run(frames["timeline_tracks"], a)
    highlights = _highlights(ops, ra, rb, frames)
    head = headline(steps[steps["chosen"]].iloc[0], op_types, la, lb)
    return TimelineDiff(la, lb, sa, sb, frames, steps, op_types, ops, highlights, head, source)


# -- steps ------------------------------------------------------------------------------------------
def _windows(prof, key: str) -> pd.DataFrame:
    if prof.timeline.empty:
        raise ValueError(f"run {key} ({prof.source}) has no timeline: nothing to align")
    w = prof.step_windows
    if w is None or w.empty:
        raise ValueError(f"run {key} ({prof.source}) has no steps placed on its timeline (no step ids on "
                         "its kernels and no step trace sharing its clock): nothing to align")
    w = w.sort_values("start_us", kind="stable").drop_duplicates("step")
    return w.assign(step=w["step"].astype("int64"), ms=(w["end_us"] - w["start_us"]) / 1000.0).set_index("step")


def _choose_pair(wa: pd.DataFrame, wb: pd.DataFrame, step, b_step) -> tuple[int, int]:
    shared = [s for s in wa.index if s in wb.index]

    def pick(w, among):
        if step == "first":
            return int(among[0]) if among else int(w.index[0])
        among = among or list(w.index)
        durations = w.loc[among, "ms"].sort_values(kind="stable")
        return int(durations.index[(len(durations) - 1) // 2])   # the lower median

    if isinstance(step, str):
        if step not in STEP_CHOICES:
            raise ValueError(f"step must be a step number or one of {STEP_CHOICES}, not {step!r}")
        sa = pick(wa, shared)
    else:
        sa = int(step)
        if sa not in wa.index:
            raise ValueError(f"run a has no step {sa} on its timeline (its steps: {_few(wa.index)})")
    if b_step is None:
        sb = sa if sa in wb.index else pick(wb, [])
    else:
        sb = int(b_step)
        if sb not in wb.index:
            raise ValueError(f"run b has no step {sb} on its timeline (its steps: {_few(wb.index)})")
    return sa, sb


def _few(index) -> str:
    steps = [str(int(s)) for s in index]
    return ", ".join(steps) if len(steps) <= 8 else f"{', '.join(steps[:4])} … {', '.join(steps[-2:])}"


def _aligned_pairs(wa, wb, sa: int, sb: int) -> list[tuple[int, int]]:
    if sa == sb:
        return [(int(s), int(s)) for s in wa.index if s in wb.index]
    return [(sa, sb)]


def _steps_frame(wa, wb, pairs, sa: int) -> pd.DataFrame:
    rows = []
    for pa, pb in pairs:
        a0, b0 = float(wa.at[pa, "start_us"]), float(wb.at[pb, "start_us"])
        a_ms, b_ms = float(wa.at[pa, "ms"]), float(wb.at[pb, "ms"])
        rows.append({"a_step": pa, "b_step": pb, "a_start_us": a0, "b_start_us": b0, "a_ms": a_ms, "b_ms": b_ms,
                     "delta_ms": b_ms - a_ms, "shift_us": a0 - b0, "start_us": a0, "chosen": pa == sa})
    out = pd.DataFrame(rows, columns=STEP_COLUMNS).sort_values("b_start_us", kind="stable", ignore_index=True)
    return out.astype({"a_step": "int64", "b_step": "int64", "chosen": "bool"})


def _shift_of(steps: pd.DataFrame):
    """µs to add to each of B's times (its own clock): the shift of the aligned step it lies in, else of
    the last aligned step that started before it (the first step's before them all)."""
    starts = steps["b_start_us"].to_numpy(float)
    shifts = steps["shift_us"].to_numpy(float)

    def shift(t: np.ndarray) -> np.ndarray:
        at = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(starts) - 1)
        return shifts[at]
    return shift


# -- operators --------------------------------------------------------------------------------------
def _step_ops(prof, step: int) -> tuple[pd.DataFrame, str | None]:
    """The step's operator executions with their occurrence index (k-th of the name in the step, by start)."""
    rows = step_operators(prof.step_windows, kernels=prof.kernels, timeline=prof.timeline,
                          tracks=prof.timeline_tracks, step=step)
    source = rows.attrs.get("source")
    rows = rows[["name", "op_type", "start_us", "dur_us"]].astype(
        {"name": str, "op_type": str}).sort_values("start_us", kind="stable", ignore_index=True)
    rows["key"] = _key(rows["name"])
    rows["occurrence"] = rows.groupby("key", sort=False).cumcount().astype("int64")
    return rows, source


def _key(names: pd.Series) -> pd.Series:
    """The name operators are matched by across the runs: the name, a collective's group hash left out."""
    return names.astype(str).str.replace(COLLECTIVE_GROUP, r"\1*\2", regex=True)


def _status(m: pd.Series) -> pd.Series:
    return m.map({"both": "both", "left_only": "vanished", "right_only": "new"}).astype(str)


def _ranked(out: pd.DataFrame) -> pd.DataFrame:
    out["delta_us"] = out["b_time_us"].fillna(0.0) - out["a_time_us"].fillna(0.0)
    # relative to a's time: NaN where a has none (or a zero-length execution), not an infinite change
    a = out["a_time_us"].where(out["a_time_us"] > 0)
    out["delta_pct"] = out["delta_us"] / a * 100.0
    return out.sort_values("delta_us", key=lambda s: -s.abs(), kind="stable", ignore_index=True)


def _op_types(ra: pd.DataFrame, rb: pd.DataFrame) -> pd.DataFrame:
    agg = lambda r: r.groupby("op_type", sort=False).agg(time_us=("dur_us", "sum"), count=("dur_us", "size"))  # noqa: E731
    m = agg(ra).add_suffix("_a").join(agg(rb).add_suffix("_b"), how="outer").reset_index()
    out = pd.DataFrame({"op_type": m["op_type"].astype(str), "a_time_us": m["time_us_a"].astype(float),
                        "b_time_us": m["time_us_b"].astype(float)})
    out["a_count"] = m["count_a"].fillna(0).astype("int64")
    out["b_count"] = m["count_b"].fillna(0).astype("int64")
    out["status"] = np.select([m["count_a"].isna(), m["count_b"].isna()], ["new", "vanished"], "both")
    return _ranked(out)[OP_TYPE_COLUMNS]


def _ops(ra: pd.DataFrame, rb: pd.DataFrame, top_n: int) -> pd.DataFrame:
    keys = ["key", "occurrence"]
    m = ra.merge(rb, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    # each run's own name: a's where a ran the operator, else b's (the key differs only in a group hash)
    out = pd.DataFrame({"op_name": m["name_a"].fillna(m["name_b"]).astype(str),
                        "b_name": m["name_b"].fillna(m["name_a"]).astype(str),
                        "occurrence": m["occurrence"].astype("int64"),
                        "op_type": m["op_type_a"].fillna(m["op_type_b"]).astype(str),
                        "a_time_us": m["dur_us_a"].astype(float), "b_time_us": m["dur_us_b"].astype(float)})
    out["a_count"] = m["dur_us_a"].notna().astype("int64")
    out["b_count"] = m["dur_us_b"].notna().astype("int64")
    out["a_start_us"] = m["start_us_a"].astype(float)
    out["b_start_us"] = m["start_us_b"].astype(float)
    out["status"] = _status(m["_merge"])
    out = _ranked(out)
    out["flagged"] = np.arange(len(out)) < top_n
    return out[OP_COLUMNS]


# -- drawing aids -----------------------------------------------------------------------------------
def _with_run(tracks: pd.DataFrame, a) -> pd.DataFrame:
    n_a = int(a.timeline_tracks["track"].max()) + 1 if len(a.timeline_tracks) else 0
    return tracks.assign(run=np.where(tracks["track"].to_numpy(np.int64) < n_a, "a", "b"))


def _highlights(ops: pd.DataFrame, ra: pd.DataFrame, rb: pd.DataFrame, frames: dict) -> pd.DataFrame:
    """The flagged operators' executions in both runs (shared clock), each with the stacked timeline's
    event of its name that starts nearest to it (within `MATCH_TOLERANCE_US`) for its track."""
    flagged = ops[ops["flagged"]]
    tl = frames["timeline"]
    run_of = dict(zip(frames["timeline_tracks"]["track"].astype(int), frames["timeline_tracks"]["run"]))
    names = sorted(set(flagged["op_name"]) | set(flagged["b_name"]))
    cand = tl[tl["name"].isin(names)]   # on the categories: no text made of every event
    cand = pd.DataFrame({"name": cand["name"].astype(str), "start_us": cand["start_us"].astype(float),
                         "track": cand["track"].astype("int64"),
                         "run": cand["track"].astype(int).map(run_of).astype(str)})
    parts = []
    flagged = flagged.assign(key=_key(flagged["op_name"]))
    for run, rows in (("a", ra), ("b", rb)):
        sel = rows.merge(flagged[["key", "occurrence", "op_name", "delta_us"]], on=["key", "occurrence"])
        if not len(sel):
            continue
        sel = sel.sort_values("start_us", kind="stable")
        ev = cand[cand["run"] == run].sort_values("start_us", kind="stable")
        hit = pd.merge_asof(sel[["start_us", "name"]].reset_index(), ev[["start_us", "name", "track"]], on="start_us",
                            by="name", direction="nearest", tolerance=MATCH_TOLERANCE_US).set_index("index")
        parts.append(pd.DataFrame({"run": run, "op_name": sel["op_name"], "occurrence": sel["occurrence"],
                                   "track": hit["track"].reindex(sel.index).fillna(-1).astype("int64"),
                                   "start_us": sel["start_us"].astype(float), "dur_us": sel["dur_us"].astype(float),
                                   "delta_us": sel["delta_us"].astype(float)}))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=HIGHLIGHT_COLUMNS)
    return out[HIGHLIGHT_COLUMNS].astype({"occurrence": "int64", "track": "int64"})


# -- the first sentence -----------------------------------------------------------------------------
def _ms(us_or_ms: float) -> str:
    v = abs(us_or_ms)
    return f"{v:.3g}" if v < 100 else f"{v:,.0f}"


def headline(pair: pd.Series, op_types: pd.DataFrame, a_label: str = "A", b_label: str = "B") -> str:
    """"B's step is X ms slower than A's; most of it in <op type> (+Y ms)": the step pair's duration
    change (``pair``: a `TimelineDiff.steps` row) and the op type whose time moved most the same way
    ("most of it" where that type's change is at least half the step's, "more than all of it" where it
    exceeds the step's: other time moved the other way; else it is named as the op type that changed most
    that way)."""
    delta = float(pair["delta_ms"])
    sa, sb = int(pair["a_step"]), int(pair["b_step"])
    who = (f"{b_label}'s step {sb}", f"{a_label}'s") if sa == sb else \
        (f"step {sb} of {b_label}", f"step {sa} of {a_label}")
    if delta == 0 or math.isnan(delta):
        return f"{who[0]} takes as long as {who[1]} ({_ms(float(pair['a_ms']))} ms)"
    word = "slower" if delta > 0 else "faster"
    head = (f"{who[0]} is {_ms(delta)} ms {word} than {who[1]} ({_ms(float(pair['a_ms']))} -> "
            f"{_ms(float(pair['b_ms']))} ms)")
    same = op_types[np.sign(op_types["delta_us"]) == np.sign(delta)]
    if not len(same):
        return head + f"; no op type's time {'grew' if delta > 0 else 'shrank'}: the gaps between operators changed"
    top = same.iloc[0]
    dms = float(top["delta_us"]) / 1000.0
    change = f"{top['op_type']} ({'+' if dms > 0 else '-'}{_ms(dms)} ms)"
    if abs(dms) > abs(delta):
        return head + f"; more than all of it in {change}: other time moved the other way"
    if abs(dms) >= abs(delta) / 2:
        return head + f"; most of it in {change}"
    return head + f"; of the op types, {change} changed most that way"


__all__ = ["timeline_diff", "TimelineDiff", "headline", "TOP_CHANGED", "STEP_CHOICES"]
