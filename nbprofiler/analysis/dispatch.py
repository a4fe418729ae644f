"""Host dispatch: which device tasks waited for the host to launch them, and the host ops behind the wait.

`host_dispatch(timeline, timeline_tracks, timeline_flows, step_windows)` joins each device task to the host
call that launched it, through the timeline's flow arrows (trace_view.json's ``HostToDevice`` flows from a
CANN thread to a hardware stream, and ``async_npu`` flows from the framework op; the profiler database's
CANN_API -> TASK and PYTORCH_API -> CONNECTION_IDS -> TASK ``connectionId``, which `nbprofiler.io.db` reads
as the same two kinds of flow). The frame
``dispatch`` (declared in `nbprofiler.schema.ANALYSIS_FRAMES`) has one row per launched device task:

* ``launch_us``: the launch, the tail of the task's ``HostToDevice`` flow (else of its framework flow);
  ``launch_latency_us`` = task start − launch. It can be a little negative: the host's and the device's
  clocks are aligned by the profiler, not shared (in trace_view_torch_npu 218 of 274 tasks start up to 19
  us before the flow's tail, inside the ``AscendCL@`` call that launched them).
* ``host_op``: the outermost event enclosing the launch on its thread (the ACL API call: ``AscendCL@...`` in
  a trace, ``aclopCompileAndExecute`` around the database's ``launch`` node); ``framework_op``: the innermost
  event enclosing the framework flow's tail (the op that queued the task, ``aclnnInplaceZero`` under
  ``aten::zero_``). ``responsible_op`` is the framework op where there is one, else the host op. A launch is
  the flow's tail, not the end of the host call: the call returns after its task has started (an
  ``AscendCL@aclnnInplaceZero`` of 21 us ends 14 us after its task began), so "started right after the
  host call ended" would miss the very tasks that waited.
* ``gap_us``: the device idle right before the task: its start − the latest end of every task of the
  device's streams (``Ascend Hardware``) that started before it, or − the start of the task's step when that
  is later (the first task of a step counts the idle from the step's start, as the step trace's Preparing
  does). ``host_idle_us`` is that gap when the task **waited for its launch**: the launch came after the
  device had run out of work (``launch_us >= gap start − tolerance_us``), so the device had nothing queued
  and sat idle until the host submitted this task. A task launched before the device went idle, yet started
  after a gap, waited for something else (a dependency, a synchronisation), not for the host: 0.

Per step (``step_windows``, else the timeline's ``ProfilerStep#N`` spans, else the whole run as one window):
the host-bound idle, its share of the step, all device idle in the step (the gaps before every device task,
launched or not, so the host's part can be read against it) and the op that caused most of it; per
responsible op, the idle it caused. The rank breakdown's ``host_bound_ms`` (`analysis.breakdown`) is the step
trace's Preparing, the idle before the step's first task only; this analysis covers every gap of the step
and names the op behind each.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from ..schema import ANALYSIS_FRAMES
from .op_steps import _place_in_steps

SPEC = ANALYSIS_FRAMES["dispatch"]
COLUMNS = SPEC.column_names
# The flow that carries a task's launch (the CANN API call), and the framework's flow to the same task.
LAUNCH_FLOW = "HostToDevice"
FRAMEWORK_FLOW = "async_npu"
# The processes whose threads are the device's streams.
DEVICE_PROCESS = re.compile(r"^Ascend Hardware\b")
# How far before the device ran idle a launch still counts as late: the disagreement of the host's and the
# device's clocks seen in real traces (tasks starting up to 19 us before their own launch).
TOLERANCE_US = 20.0
STEP_EVENT = re.compile(r"^ProfilerStep#(\d+)$")
# The innermost event enclosing a time is looked for among this many events starting before it.
NESTING_DEPTH = 64
# Under this share of the device's tasks joined to a launch, the sentence says the rest are not counted.
COVERAGE = 0.9
STEP_COLUMNS = {"step": "Int64", "start_us": "float64", "end_us": "float64", "step_us": "float64",
                "tasks": "int64", "waited_tasks": "int64", "host_idle_us": "float64", "idle_share": "float64",
                "device_idle_us": "float64", "top_op": "str"}
OP_COLUMNS = {"responsible_op": "str", "host_idle_us": "float64", "waited_tasks": "int64",
              "idle_per_step_us": "float64", "share_of_host_idle": "float64"}


@dataclasses.dataclass
class Dispatch:
    """The result of `host_dispatch`: ``tasks`` (the ``dispatch`` frame), ``steps`` (one row per step:
    ``step`` (<NA>: the whole run, no steps known), window ``start_us``/``end_us``, ``step_us``, ``tasks``,
    ``waited_tasks``, ``host_idle_us``, ``idle_share`` (0-1 of the step), ``device_idle_us``, ``top_op``),
    ``ops`` (per responsible op: ``host_idle_us``, ``waited_tasks``, ``idle_per_step_us``,
    ``share_of_host_idle`` 0-1, most idle first), ``why`` (None when available, else why not),
    ``step_source`` (where the steps come from), ``tolerance_us`` and ``device_tasks`` (every task of the device's
    streams, launched or not: the tasks no flow joins to a launch are not counted as waiting)."""

    tasks: pd.DataFrame
    steps: pd.DataFrame
    ops: pd.DataFrame
    why: str | None = None
    step_source: str = ""
    tolerance_us: float = TOLERANCE_US
    device_tasks: int = 0

    @property
    def available(self) -> bool:
        return self.why is None

    @property
    def host_idle_per_step_us(self) -> float:
        """The mean host-bound device idle per step (per window without steps)."""
        return float(self.steps["host_idle_us"].mean()) if len(self.steps) else 0.0

    @property
    def idle_share(self) -> float:
        """The host-bound idle over the steps' total time (0-1)."""
        total = float(self.steps["step_us"].sum())
        return float(self.steps["host_idle_us"].sum()) / total if total > 0 else 0.0

    def worst_step(self) -> pd.Series | None:
        """The step with the most host-bound idle, or None."""
        if self.steps.empty:
            return None
        return self.steps.loc[self.steps["host_idle_us"].idxmax()]

    def sentence(self) -> str:
        """The finding in one sentence: how long the device waited for the host per step, the share of the
        step, and after which op most of it came; or why it cannot be said."""
        if not self.available:
            return f"Host dispatch is not available: {self.why}."
        per = "per step" if self.step_source != "none" else "over the run"
        text = (f"The device waited {self.host_idle_per_step_us / 1000:,.3f} ms {per} for the host "
                f"({self.idle_share * 100:.1f}% of the {'step' if per == 'per step' else 'run'})")
        if len(self.ops) and self.ops["host_idle_us"].iloc[0] > 0:
            top = self.ops.iloc[0]
            text += (f"; most of it for launches of {top['responsible_op']} ({top['share_of_host_idle'] * 100:.0f}% "
                     f"of the wait, {int(top['waited_tasks']):,} launches)")
        text += "."
        if len(self.tasks) < COVERAGE * self.device_tasks:
            text += (f" {len(self.tasks):,} of {self.device_tasks:,} device tasks have a flow from the host call "
                     "that launched them (a launch's further tasks and communication tasks have none): the waits "
                     "before the others are not counted.")
        return text

    def to_dict(self, top: int = 5) -> dict:
        """The summary JSON's ``dispatch`` section."""
        if not self.available:
            return {"available": False, "why": self.why}
        lat = self.tasks["launch_latency_us"]
        return {"available": True, "sentence": self.sentence(), "tasks": int(len(self.tasks)),
                "device_tasks": self.device_tasks,
                "waited_tasks": int((self.tasks["host_idle_us"] > 0).sum()), "steps": int(len(self.steps)),
                "step_source": self.step_source, "tolerance_us": self.tolerance_us,
                "host_idle_ms_per_step": self.host_idle_per_step_us / 1000, "idle_share": self.idle_share,
                "latency_us": {"median": float(lat.median()), "p90": float(lat.quantile(0.9)),
                               "max": float(lat.max()), "negative": int((lat < 0).sum())},
                "per_step": [{"step": None if pd.isna(r.step) else int(r.step), "host_idle_ms": r.host_idle_us / 1000,
                              "step_ms": r.step_us / 1000, "idle_share": r.idle_share, "top_op": r.top_op}
                             for r in self.steps.itertuples()],
                "top_ops": [{"op": r.responsible_op, "host_idle_ms": r.host_idle_us / 1000,
                             "waited_tasks": int(r.waited_tasks), "share_of_host_idle": r.share_of_host_idle}
                            for r in self.ops.head(top).itertuples()]}


def _frame(columns: dict, rows: dict | None = None) -> pd.DataFrame:
    rows = rows or {}
    return pd.DataFrame({c: pd.Series(rows.get(c, []), dtype=("object" if t == "str" else t))
                         for c, t in columns.items()})


def _empty_tasks() -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.Series(dtype=("object" if c.dtype == "str" else c.dtype)) for c in SPEC.columns})


def not_available(why: str) -> Dispatch:
    return Dispatch(_empty_tasks(), _frame(STEP_COLUMNS), _frame(OP_COLUMNS), why=why, step_source="none")


def _enclosing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray, innermost: bool) -> np.ndarray:
    """Per time in ``t``, the position of the event (``starts`` sorted) enclosing it, −1 where none: the
    innermost (latest start among the `NESTING_DEPTH` events starting before it) or the outermost
    (earliest start)."""
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(starts):
        return out
    last = np.searchsorted(starts, t, side="right") - 1
    if innermost:
        todo = np.ones(len(t), dtype=bool)
        for k in range(NESTING_DEPTH):
            at = last - k
            hit = todo & (at >= 0) & (ends[np.clip(at, 0, None)] >= t)
            out[hit] = at[hit]
            todo &= ~hit
            if not todo.any():
                break
        return out
    reach = np.maximum.accumulate(ends)  # the first event whose end reaches t starts earliest among those
    first = np.searchsorted(reach, t, side="left")
    ok = (first < len(starts)) & (first <= last)
    out[ok] = first[ok]
    return out


def _tail_events(timeline: pd.DataFrame, tracks: np.ndarray, t: np.ndarray, innermost: bool) -> pd.DataFrame:
    """The events enclosing each (track, time): ``name``, ``start_us``, ``end_us`` ("" / NaN where none)."""
    names = np.full(len(t), "", dtype=object)
    start, end = np.full(len(t), np.nan), np.full(len(t), np.nan)
    track_col = timeline["track"].to_numpy()
    for tr in np.unique(tracks):
        lo, hi = np.searchsorted(track_col, tr, side="left"), np.searchsorted(track_col, tr, side="right")
        ev = timeline.iloc[lo:hi]
        s = ev["start_us"].to_numpy(float)
        e = s + np.nan_to_num(ev["dur_us"].to_numpy(float))
        mine = np.flatnonzero(tracks == tr)
        at = _enclosing(s, e, t[mine], innermost)
        hit = at >= 0
        names[mine[hit]] = ev["name"].iloc[at[hit]].astype(str).to_numpy(dtype=object)
        start[mine[hit]], end[mine[hit]] = s[at[hit]], e[at[hit]]
    return pd.DataFrame({"name": names, "start_us": start, "end_us": end})


def _task_at(flows: pd.DataFrame, dev_track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per flow, the position (in ``start`` order) of the device task its head lands in: the task of the
    head's track that encloses it (a flow's end binds to the enclosing slice; the writers put it at the
    task's start), −1 where none."""
    out = np.full(len(flows), -1, dtype=np.int64)
    head_track, head_us = flows["end_track"].to_numpy(), flows["end_us"].to_numpy(float)
    for tr in np.unique(head_track):
        mine = np.flatnonzero(head_track == tr)
        pos = np.flatnonzero(dev_track == tr)   # ``start`` is sorted, so is each track's share of it
        at = _enclosing(start[pos], end[pos], head_us[mine], innermost=True)
        out[mine[at >= 0]] = pos[at[at >= 0]]
    return out


def _steps(step_windows, timeline, tracks) -> tuple[pd.DataFrame, str]:
    """The step windows on the timeline's clock and where they come from: ``step_windows``, else the
    host's ``ProfilerStep#N`` events, else none (an empty frame)."""
    if step_windows is not None and len(step_windows):
        source = f"step_windows ({step_windows['source'].iloc[0]})" if "source" in step_windows else "step_windows"
        return step_windows[["step", "start_us", "end_us"]].astype({"step": "int64"}), source
    # matched on the names' categories, not on a text per event
    names = timeline["name"]
    values = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else pd.Index(names.unique())
    number = pd.Series(values.astype(str)).str.extract(STEP_EVENT, expand=False)
    if number.notna().any():
        step_of = dict(zip(values[number.notna().to_numpy()], number.dropna().astype("int64")))
        hit = names.isin(list(step_of)).to_numpy()
        ev = timeline[hit]
        w = pd.DataFrame({"step": ev["name"].map(step_of).astype("int64").to_numpy(),
                          "start_us": ev["start_us"].to_numpy(float),
                          "end_us": (ev["start_us"] + ev["dur_us"].fillna(0)).to_numpy(float)})
        return w.drop_duplicates("step").sort_values("start_us").reset_index(drop=True), "ProfilerStep#N events"
    return pd.DataFrame({"step": pd.Series(dtype="int64"), "start_us": pd.Series(dtype=float),
                         "end_us": pd.Series(dtype=float)}), "none"


def host_dispatch(timeline: pd.DataFrame | None, timeline_tracks: pd.DataFrame | None,
                  timeline_flows: pd.DataFrame | None, step_windows=None,
                  tolerance_us: float = TOLERANCE_US) -> Dispatch:
    """The launches of a profile's device tasks and the device idle the host caused (module docstring).
    ``step_windows``: the step windows frame, or a function returning it (called only when there are
    launches to place: a run without them answers "not available" without its steps being worked out)."""
    if timeline is None or timeline.empty or timeline_tracks is None or timeline_tracks.empty:
        return not_available("the run has no timeline (trace_view.json or a profiler database)")
    tracks = timeline_tracks
    device = tracks.loc[tracks["process"].astype(str).str.match(DEVICE_PROCESS), "track"].to_numpy()
    if not len(device):
        procs = ", ".join(sorted(set(tracks["process"].astype(str))))
        return not_available(f"the timeline has no device streams (no 'Ascend Hardware' process; it has "
                             f"{procs}): a host-only run launches no device tasks")
    flows = timeline_flows if timeline_flows is not None else pd.DataFrame()
    into = flows[flows["end_track"].isin(device)] if len(flows) else flows
    launches = into[into["cat"] == LAUNCH_FLOW] if len(into) else into
    framework = into[into["cat"] == FRAMEWORK_FLOW] if len(into) else into
    if not len(launches) and not len(framework):
        return not_available("no flow joins a host call to a device task (the trace has no HostToDevice or "
                             "async_npu flows, the database no CANN_API/TASK connectionId)")

    # every device task, in start order, with the device idle before it
    dev = timeline[timeline["track"].isin(device).to_numpy()]
    dev = dev[(dev["ph"] == "X").to_numpy()] if "ph" in dev else dev
    start = dev["start_us"].to_numpy(float)
    end = start + np.nan_to_num(dev["dur_us"].to_numpy(float))
    order = np.argsort(start, kind="stable")
    dev, start, end = dev.iloc[order], start[order], end[order]
    busy = np.concatenate([[-np.inf], np.maximum.accumulate(end)[:-1]])  # latest end of the earlier tasks
    windows, step_source = _steps(step_windows() if callable(step_windows) else step_windows, timeline, tracks)
    if len(windows):
        step = _place_in_steps(start, windows)
        w_start = windows.set_index("step")["start_us"].reindex(step).to_numpy(float)
        busy = np.where(step >= 0, np.fmax(busy, w_start), busy)
    else:
        step = np.full(len(start), -1)
    gap = np.where(np.isfinite(busy), np.clip(start - busy, 0, None), np.nan)

    # the launch and framework flows of each task (the first of each kind that lands in it)
    dev_track = dev["track"].to_numpy()
    ln = launches.assign(_i=_task_at(launches, dev_track, start, end))
    fw = framework.assign(_i=_task_at(framework, dev_track, start, end))
    ln, fw = ln[ln["_i"] >= 0].drop_duplicates("_i"), fw[fw["_i"] >= 0].drop_duplicates("_i")
    if ln.empty and fw.empty:
        return not_available("the flows' heads match no device task on the timeline")
    idx = np.union1d(ln["_i"].to_numpy(), fw["_i"].to_numpy()).astype(np.int64)
    ln, fw = ln.set_index("_i").reindex(idx), fw.set_index("_i").reindex(idx)
    launch_us = ln["start_us"].fillna(fw["start_us"]).to_numpy(float)
    launch_track = ln["start_track"].fillna(fw["start_track"]).to_numpy(np.int64)
    thread_of = dict(zip(tracks["track"].to_numpy(), (tracks["process"].astype(str) + " / "
                                                       + tracks["thread"].astype(str)).to_numpy()))
    host = _tail_events(timeline, launch_track, launch_us, innermost=False)
    has_fw = fw["start_us"].notna().to_numpy()
    fw_ev = _tail_events(timeline, fw["start_track"].fillna(-1).to_numpy(np.int64)[has_fw],
                         fw["start_us"].to_numpy(float)[has_fw], innermost=True)
    framework_op = np.full(len(idx), "", dtype=object)
    framework_op[has_fw] = fw_ev["name"].to_numpy(dtype=object)
    host_op = host["name"].to_numpy(dtype=object)
    responsible = np.where(framework_op != "", framework_op, host_op)
    flow_name = ln["name"].fillna(fw["name"]).astype(str).to_numpy(dtype=object)
    responsible = np.where(responsible != "", responsible, flow_name)

    t_start, t_end, t_gap, t_busy = start[idx], end[idx], gap[idx], busy[idx]
    waited = np.isfinite(t_busy) & (launch_us >= t_busy - tolerance_us) & (np.nan_to_num(t_gap) > 0)
    t_step = step[idx]
    tasks = pd.DataFrame({
        "step": pd.array(np.where(t_step >= 0, t_step, 0), dtype="Int64"),
        "task": dev["name"].iloc[idx].astype(str).to_numpy(dtype=object),
        "stream": np.array([thread_of.get(t, "") for t in dev["track"].to_numpy()[idx]], dtype=object),
        "task_start_us": t_start, "task_end_us": t_end,
        "launch_flow": np.where(ln["start_us"].notna().to_numpy(), LAUNCH_FLOW, FRAMEWORK_FLOW).astype(object),
        "launch_us": launch_us, "launch_latency_us": t_start - launch_us,
        "host_op": host_op, "host_thread": np.array([thread_of.get(t, "") for t in launch_track], dtype=object),
        "host_start_us": host["start_us"].to_numpy(float), "host_end_us": host["end_us"].to_numpy(float),
        "framework_op": framework_op, "responsible_op": responsible.astype(object),
        "gap_us": t_gap, "waited": waited, "host_idle_us": np.where(waited, t_gap, 0.0)})
    tasks.loc[t_step < 0, "step"] = pd.NA
    tasks = tasks[COLUMNS]

    # per step: the windows (or the run as one), their host-bound and total device idle
    if len(windows):
        win = windows.sort_values("start_us").reset_index(drop=True)
        in_step = step >= 0
        dev_idle = pd.Series(np.nan_to_num(gap[in_step])).groupby(step[in_step]).sum()
    else:
        win = pd.DataFrame({"step": [pd.NA], "start_us": [float(start.min())], "end_us": [float(end.max())]})
        dev_idle = pd.Series([float(np.nansum(gap))], index=[-1])
    key_steps = tasks["step"].fillna(-1).astype("int64")
    by_step = tasks.groupby(key_steps.to_numpy())
    sums = by_step["host_idle_us"].sum()
    counts, waits = by_step.size(), by_step["waited"].sum()
    per_op = tasks.groupby([key_steps.to_numpy(), tasks["responsible_op"].to_numpy()])["host_idle_us"].sum()
    rows = []
    for r in win.itertuples():
        k = -1 if pd.isna(r.step) else int(r.step)
        idle = float(sums.get(k, 0.0))
        span = float(r.end_us - r.start_us)
        top = ""
        if idle > 0:
            top = str(per_op.loc[k].idxmax())
        rows.append({"step": None if k < 0 else k, "start_us": float(r.start_us), "end_us": float(r.end_us),
                     "step_us": span, "tasks": int(counts.get(k, 0)), "waited_tasks": int(waits.get(k, 0)),
                     "host_idle_us": idle, "idle_share": idle / span if span > 0 else np.nan,
                     "device_idle_us": float(dev_idle.get(k, 0.0)), "top_op": top})
    steps = _frame(STEP_COLUMNS, {c: [row[c] for row in rows] for c in STEP_COLUMNS})

    counted = tasks[tasks["step"].notna()] if len(windows) else tasks
    g = counted.groupby("responsible_op", sort=False)
    ops = pd.DataFrame({"host_idle_us": g["host_idle_us"].sum(), "waited_tasks": g["waited"].sum()})
    ops = ops[ops["waited_tasks"] > 0].sort_values("host_idle_us", ascending=False, kind="stable")
    total = float(ops["host_idle_us"].sum())
    ops = ops.reset_index().rename(columns={"index": "responsible_op"})
    ops["idle_per_step_us"] = ops["host_idle_us"] / max(len(steps), 1)
    ops["share_of_host_idle"] = ops["host_idle_us"] / total if total > 0 else 0.0
    ops = _frame(OP_COLUMNS, {c: ops[c].tolist() for c in OP_COLUMNS})
    return Dispatch(tasks.reset_index(drop=True), steps, ops, None, step_source, float(tolerance_us), len(dev))


def profile_dispatch(prof, tolerance_us: float = TOLERANCE_US) -> Dispatch:
    """`host_dispatch` of a `Profile`'s frames (cached on it for the default tolerance)."""
    def build():
        return host_dispatch(prof.timeline, prof.timeline_tracks, prof.timeline_flows, lambda: prof.step_windows,
                             tolerance_us)
    return prof.cached("dispatch", build) if tolerance_us == TOLERANCE_US else build()


__all__ = ["Dispatch", "host_dispatch", "profile_dispatch", "not_available", "TOLERANCE_US", "LAUNCH_FLOW",
           "FRAMEWORK_FLOW"]
