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
from typing import Callable

import numpy as np
import pandas as pd

from .._memory import release_pages
from ..model.derive import profiler_step_windows
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
    """The result of `host_dispatch`: ``tasks`` (the ``dispatch`` frame, made when first read: the summary
    and the advisor need only the counts below), ``steps`` (one row per step:
    ``step`` (<NA>: the whole run, no steps known), window ``start_us``/``end_us``, ``step_us``, ``tasks``,
    ``waited_tasks``, ``host_idle_us``, ``idle_share`` (0-1 of the step), ``device_idle_us``, ``top_op``),
    ``ops`` (per responsible op: ``host_idle_us``, ``waited_tasks``, ``idle_per_step_us``,
    ``share_of_host_idle`` 0-1, most idle first), ``why`` (None when available, else why not),
    ``step_source`` (where the steps come from), ``tolerance_us`` and ``device_tasks`` (every task of the device's
    streams, launched or not: the tasks no flow joins to a launch are not counted as waiting); ``launched``
    (the tasks joined to a launch: the frame's rows), ``waited_tasks`` (those that waited for it) and
    ``latency_us`` (their launch latencies, in the frame's order)."""

    table: pd.DataFrame | Callable[[], pd.DataFrame]
    steps: pd.DataFrame
    ops: pd.DataFrame
    why: str | None = None
    step_source: str = ""
    tolerance_us: float = TOLERANCE_US
    device_tasks: int = 0
    launched: int = 0
    waited_tasks: int = 0
    latency_us: np.ndarray | None = None

    @property
    def tasks(self) -> pd.DataFrame:
        """The ``dispatch`` frame: one row per launched device task."""
        if callable(self.table):
            self.table = self.table()
        return self.table

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
        if self.launched < COVERAGE * self.device_tasks:
            text += (f" {self.launched:,} of {self.device_tasks:,} device tasks have a flow from the host call "
                     "that launched them (a launch's further tasks and communication tasks have none): the waits "
                     "before the others are not counted.")
        return text

    def to_dict(self, top: int = 5) -> dict:
        """The summary JSON's ``dispatch`` section."""
        if not self.available:
            return {"available": False, "why": self.why}
        lat = pd.Series(self.latency_us, dtype="float64")
        return {"available": True, "sentence": self.sentence(), "tasks": self.launched,
                "device_tasks": self.device_tasks, "waited_tasks": self.waited_tasks, "steps": int(len(self.steps)),
                "step_source": self.step_source, "tolerance_us": self.tolerance_us,
                "host_idle_ms_per_step": self.host_idle_per_step_us / 1000, "idle_share": self.idle_share,
                "latency_us": {"median": float(lat.median()), "p90": float(lat.quantile(0.9)),
                               "max": float(lat.max()), "negative": int((lat < 0).sum())},
                "per_step": [{"step": step, "host_idle_ms": idle, "step_ms": span, "idle_share": share, "top_op": top}
                             for step, idle, span, share, top in zip(
                                 [None if pd.isna(k) else int(k) for k in self.steps["step"]],
                                 (self.steps["host_idle_us"] / 1000).tolist(), (self.steps["step_us"] / 1000).tolist(),
                                 self.steps["idle_share"].tolist(), self.steps["top_op"].tolist())],
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
    return Dispatch(_empty_tasks(), _frame(STEP_COLUMNS), _frame(OP_COLUMNS), why=why, step_source="none",
                    latency_us=np.zeros(0))


def _labels(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A text column as (codes, labels): per row the position of its text in ``labels``, an object array of
    str whose last entry (code −1, a missing value) is "nan", as ``astype(str)`` writes it. A categorical's
    own codes: no text per row is made."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, values = col.cat.codes.to_numpy(), col.cat.categories
    else:
        codes, values = pd.factorize(col)
    return codes, np.append(np.asarray(pd.Index(values).astype(str), dtype=object), "nan")


def _enclosing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray, innermost: bool) -> np.ndarray:
    """Per time in ``t``, the position of the event (``starts`` sorted) enclosing it, −1 where none: the
    innermost (latest start among the `NESTING_DEPTH` events starting before it) or the outermost
    (earliest start)."""
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(starts):
        return out
    last = np.searchsorted(starts, t, side="right") - 1
    if innermost:
        todo = np.arange(len(t))   # the times not placed yet: each pass looks one event further back
        for k in range(NESTING_DEPTH):
            at = last[todo] - k
            hit = (at >= 0) & (ends[np.clip(at, 0, None)] >= t[todo])
            out[todo[hit]] = at[hit]
            todo = todo[~hit & (at > 0)]
            if not len(todo):
                break
        return out
    reach = np.maximum.accumulate(ends)  # the first event whose end reaches t starts earliest among those
    first = np.searchsorted(reach, t, side="left")
    ok = (first < len(starts)) & (first <= last)
    out[ok] = first[ok]
    return out


def _tail_rows(track_col: np.ndarray, start_col: np.ndarray, end_col, tracks: np.ndarray, t: np.ndarray,
               innermost: bool) -> np.ndarray:
    """Per (track, time), the timeline row (the timeline is in track order) of the event enclosing it, −1
    where none. ``end_col``: the rows' ends, a function of a row range."""
    rows = np.full(len(t), -1, dtype=np.int64)
    for tr in pd.unique(tracks):
        # in the column's own type: an int64 key would have the whole int32 column converted to search it
        key = track_col.dtype.type(tr)
        lo, hi = np.searchsorted(track_col, key, side="left"), np.searchsorted(track_col, key, side="right")
        mine = np.flatnonzero(tracks == tr)   # a pass per track: cheaper than a stable sort by track
        at = _enclosing(start_col[lo:hi], end_col(lo, hi), t[mine], innermost)
        rows[mine[at >= 0]] = lo + at[at >= 0]
    return rows


def _task_at(head_track: np.ndarray, head_us: np.ndarray, dev_track: np.ndarray, start: np.ndarray,
             end: np.ndarray) -> np.ndarray:
    """Per flow (its head's track and time), the position (in ``start`` order) of the device task its head
    lands in: the task of the head's track that encloses it (a flow's end binds to the enclosing slice; the
    writers put it at the task's start), −1 where none."""
    out = np.full(len(head_track), -1, dtype=np.int64)
    for tr in pd.unique(head_track):
        mine = np.flatnonzero(head_track == tr)
        pos = np.flatnonzero(dev_track == tr)   # ``start`` is sorted, so is each track's share of it
        at = _enclosing(start[pos], end[pos], head_us[mine], innermost=True)
        out[mine[at >= 0]] = pos[at[at >= 0]]
    return out


def _distinct(*arrays: np.ndarray) -> np.ndarray:
    """The distinct values of integer ``arrays``, sorted (by sorting: numpy's hashed `np.unique` took 0.2 s
    per million task ids)."""
    a = np.sort(np.concatenate(arrays))
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a


def _first_per_task(task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the tasks flows land in, sorted; per task the first flow, in flow order, landing in it)."""
    flow = np.flatnonzero(task >= 0)
    order = np.argsort(task[flow], kind="stable")
    t = task[flow][order]
    first = np.concatenate([[True], t[1:] != t[:-1]]) if len(t) else np.zeros(0, bool)
    return t[first], flow[order][first]


def _steps(step_windows, timeline, name_codes, names) -> tuple[pd.DataFrame, str]:
    """The step windows on the timeline's clock and where they come from: ``step_windows``, else the
    host's ``ProfilerStep#N`` events (`derive.profiler_step_windows`; ``name_codes``, ``names``: the
    timeline's names as `_labels`), else none (an empty frame)."""
    if step_windows is None or not len(step_windows):
        step_windows = profiler_step_windows(timeline, name_codes, names[:-1])
    if step_windows is not None and len(step_windows):
        source = str(step_windows["source"].iloc[0]) if "source" in step_windows else "step_windows"
        return step_windows[["step", "start_us", "end_us"]].astype({"step": "int64"}), source
    return pd.DataFrame({"step": pd.Series(dtype="int64"), "start_us": pd.Series(dtype=float),
                         "end_us": pd.Series(dtype=float)}), "none"


def host_dispatch(timeline: pd.DataFrame | None, timeline_tracks: pd.DataFrame | None,
                  timeline_flows: pd.DataFrame | None, step_windows=None,
                  tolerance_us: float = TOLERANCE_US) -> Dispatch:
    """The launches of a profile's device tasks and the device idle the host caused (module docstring).
    ``step_windows``: the step windows frame, or a function returning it (called only when there are
    launches to place: a run without them answers "not available" without its steps being worked out).
    Worked out on the timeline's columns and its names' codes; the ``dispatch`` frame itself (a text per
    task) is made when ``.tasks`` is first read."""
    if timeline is None or timeline.empty or timeline_tracks is None or timeline_tracks.empty:
        return not_available("the run has no timeline (trace_view.json or a profiler database)")
    tracks = timeline_tracks
    device = tracks.loc[tracks["process"].astype(str).str.match(DEVICE_PROCESS), "track"].to_numpy()
    if not len(device):
        procs = ", ".join(sorted(set(tracks["process"].astype(str))))
        return not_available(f"the timeline has no device streams (no 'Ascend Hardware' process; it has "
                             f"{procs}): a host-only run launches no device tasks")
    flows = timeline_flows if timeline_flows is not None else pd.DataFrame()
    if len(flows):
        into = np.isin(flows["end_track"].to_numpy(), device)
        cat = flows["cat"]
        launches, framework = np.flatnonzero(into & (cat == LAUNCH_FLOW).to_numpy()), \
            np.flatnonzero(into & (cat == FRAMEWORK_FLOW).to_numpy())
    else:
        launches = framework = np.zeros(0, dtype=np.int64)
    if not len(launches) and not len(framework):
        return not_available("no flow joins a host call to a device task (the trace has no HostToDevice or "
                             "async_npu flows, the database no CANN_API/TASK connectionId)")

    # every device task, in start order, with the device idle before it (rows of the timeline, which is in
    # track order; no other column is read)
    track_col = timeline["track"].to_numpy()
    start_col = timeline["start_us"].to_numpy(float)
    dur_col = timeline["dur_us"].to_numpy(float)
    on_device = np.zeros(max(int(track_col.max()), int(device.max())) + 1, dtype=bool)
    on_device[device] = True
    on_device = on_device[track_col]
    if "ph" in timeline:
        on_device &= (timeline["ph"] == "X").to_numpy()
    dev_rows = np.flatnonzero(on_device)
    start = start_col[dev_rows]
    order = np.argsort(start, kind="stable")
    dev_rows, start = dev_rows[order], start[order]
    end = start + np.nan_to_num(dur_col[dev_rows])
    busy = np.concatenate([[-np.inf], np.maximum.accumulate(end)[:-1]])  # latest end of the earlier tasks
    release_pages(timeline)   # on disk: the pages of the columns read so far leave (the copies above stay)
    name_codes, names = _labels(timeline["name"])
    windows, step_source = _steps(step_windows() if callable(step_windows) else step_windows, timeline,
                                  name_codes, names)
    if len(windows):
        step, w_start = _place_in_steps(start, windows, with_start=True)
        busy = np.where(step >= 0, np.fmax(busy, w_start), busy)
    else:
        step = np.full(len(start), -1)
    gap = np.where(np.isfinite(busy), np.clip(start - busy, 0, None), np.nan)

    # the launch and framework flows of each task (the first of each kind, in flow order, that lands in it)
    dev_track = track_col[dev_rows]
    head_track, head_us = flows["end_track"].to_numpy(), flows["end_us"].to_numpy(float)
    ln_task, ln_flow = _first_per_task(_task_at(head_track[launches], head_us[launches], dev_track, start, end))
    fw_task, fw_flow = _first_per_task(_task_at(head_track[framework], head_us[framework], dev_track, start, end))
    ln_flow, fw_flow = launches[ln_flow], framework[fw_flow]
    if not len(ln_task) and not len(fw_task):
        return not_available("the flows' heads match no device task on the timeline")
    idx = _distinct(ln_task, fw_task).astype(np.int64)
    has_ln, has_fw = np.isin(idx, ln_task), np.isin(idx, fw_task)
    ln_of = np.full(len(idx), -1, dtype=np.int64)   # per task its launch flow's row, −1 none
    ln_of[has_ln] = ln_flow
    fw_of = np.full(len(idx), -1, dtype=np.int64)
    fw_of[has_fw] = fw_flow
    flow_of = np.where(has_ln, ln_of, fw_of)        # the flow giving the launch
    tail_us, tail_track = flows["start_us"].to_numpy(float), flows["start_track"].to_numpy(np.int64)
    launch_us, launch_track = tail_us[flow_of], tail_track[flow_of]

    def ends(lo, hi):
        return start_col[lo:hi] + np.nan_to_num(dur_col[lo:hi])
    host_row = _tail_rows(track_col, start_col, ends, launch_track, launch_us, innermost=False)
    fw_row = np.full(len(idx), -1, dtype=np.int64)
    fw_row[has_fw] = _tail_rows(track_col, start_col, ends, tail_track[fw_flow], tail_us[fw_flow], innermost=True)
    release_pages(timeline)

    # the op each task's idle is put on, as a code into ``op_labels``: the framework op, else the host op,
    # else the launch flow's name
    named = names != ""
    host_code = np.where(host_row >= 0, name_codes[host_row], -2)
    fw_code = np.where(fw_row >= 0, name_codes[fw_row], -2)
    op_code = np.where((fw_code > -2) & named[fw_code], fw_code,
                       np.where((host_code > -2) & named[host_code], host_code, -2))
    op_code = np.where(op_code == -1, len(names) - 1, op_code)   # a missing name: its "nan" label
    by_flow = np.flatnonzero(op_code == -2)
    flow_names = flows["name"].iloc[flow_of[by_flow]].astype(str).to_numpy(dtype=object)
    extra = pd.unique(flow_names)
    op_labels = np.concatenate([names, np.asarray(extra, dtype=object)])
    op_code[by_flow] = len(names) + pd.Index(extra).get_indexer(flow_names)
    # one group per op text (a flow's name can be a timeline name too), numbered in text order
    used = _distinct(op_code)
    texts, group = np.unique(op_labels[used].astype(str), return_inverse=True)
    group_of = np.zeros(len(op_labels), dtype=np.int64)
    group_of[used] = group
    op = group_of[op_code]

    t_start, t_end, t_gap, t_busy, t_step = start[idx], end[idx], gap[idx], busy[idx], step[idx]
    waited = np.isfinite(t_busy) & (launch_us >= t_busy - tolerance_us) & (np.nan_to_num(t_gap) > 0)
    idle = np.where(waited, t_gap, 0.0)

    # per step: the windows (or the run as one), their host-bound and total device idle, the op behind most
    if len(windows):
        win = windows.sort_values("start_us").reset_index(drop=True)
        win_step = win["step"].to_numpy(np.int64)
    else:
        win = pd.DataFrame({"step": [pd.NA], "start_us": [float(start.min())], "end_us": [float(end.max())]})
        win_step = np.array([-1])
    keys = _distinct(win_step, np.array([-1]))   # a task's step is a window's, or −1: none
    k_task, k_dev = np.searchsorted(keys, t_step), np.searchsorted(keys, step)
    hit = np.flatnonzero(idle > 0)   # the idle is summed over the tasks that waited: the others add nothing
    sums = pd.Series(idle[hit]).groupby(k_task[hit]).sum().reindex(range(len(keys)), fill_value=0.0).to_numpy()
    counts = np.bincount(k_task, minlength=len(keys))
    waits = np.bincount(k_task, weights=waited, minlength=len(keys)).astype(np.int64)
    if len(windows):
        in_step = step >= 0
        dev_idle = np.bincount(k_dev[in_step], weights=np.nan_to_num(gap[in_step]), minlength=len(keys))
    else:
        dev_idle = np.zeros(len(keys))
        dev_idle[np.searchsorted(keys, -1)] = float(np.nansum(gap))
    n_ops = len(texts)
    per_op = pd.Series(idle[hit]).groupby(k_task[hit] * n_ops + op[hit]).sum()
    pair = per_op.index.to_numpy(dtype=np.int64)
    best = np.lexsort((pair % n_ops, -per_op.to_numpy(), pair // n_ops))   # per step: most idle, then by name
    pair = pair[best]
    first = np.ones(len(pair), dtype=bool)
    first[1:] = pair[1:] // n_ops != pair[:-1] // n_ops
    top_of = np.full(len(keys), -1, dtype=np.int64)
    top_of[pair[first] // n_ops] = pair[first] % n_ops
    k_win = np.searchsorted(keys, win_step)
    span = (win["end_us"] - win["start_us"]).to_numpy(float)
    w_idle = sums[k_win]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(span > 0, w_idle / span, np.nan)
    steps = _frame(STEP_COLUMNS, {
        "step": [None if k < 0 else int(k) for k in win_step], "start_us": win["start_us"].to_numpy(float),
        "end_us": win["end_us"].to_numpy(float), "step_us": span, "tasks": counts[k_win],
        "waited_tasks": waits[k_win], "host_idle_us": w_idle, "idle_share": share,
        "device_idle_us": dev_idle[k_win],
        "top_op": np.where(w_idle > 0, texts[np.clip(top_of[k_win], 0, None)], "").astype(object)})

    # per responsible op (of the tasks in a step, where there are steps), in the order they first appear
    counted = np.flatnonzero(t_step >= 0) if len(windows) else np.arange(len(idx))
    c_op = op[counted]
    appear = np.full(n_ops, len(counted), dtype=np.int64)
    np.minimum.at(appear, c_op, np.arange(len(counted)))
    c_hit = counted[idle[counted] > 0]
    op_idle = pd.Series(idle[c_hit]).groupby(op[c_hit]).sum().reindex(range(n_ops), fill_value=0.0).to_numpy()
    op_waits = np.bincount(c_op, weights=waited[counted], minlength=n_ops).astype(np.int64)
    keep = np.flatnonzero(op_waits > 0)
    keep = keep[np.argsort(appear[keep], kind="stable")]
    keep = keep[np.argsort(-op_idle[keep], kind="stable")]
    total = float(op_idle[keep].sum())
    ops = _frame(OP_COLUMNS, {"responsible_op": texts[keep].tolist(), "host_idle_us": op_idle[keep],
                              "waited_tasks": op_waits[keep],
                              "idle_per_step_us": op_idle[keep] / max(len(steps), 1),
                              "share_of_host_idle": op_idle[keep] / total if total > 0 else np.zeros(len(keep))})

    # the frame, made later, keeps the launched tasks' rows, not every device task's
    task_rows, n_device = dev_rows[idx], len(dev_rows)
    release_pages(timeline)     # a timeline on disk: its mapped columns' pages leave this process

    def tasks() -> pd.DataFrame:
        thread_of = _track_labels(tracks)
        host_op = np.where(host_row >= 0, names[host_code], "").astype(object)
        framework_op = np.where(fw_row >= 0, names[fw_code], "").astype(object)
        host_start = np.where(host_row >= 0, start_col[host_row], np.nan)
        host_end = host_start + np.where(host_row >= 0, np.nan_to_num(dur_col[host_row]), np.nan)
        frame = pd.DataFrame({
            "step": pd.array(np.where(t_step >= 0, t_step, 0), dtype="Int64"),
            "task": names[name_codes[task_rows]], "stream": thread_of(track_col[task_rows]),
            "task_start_us": t_start, "task_end_us": t_end,
            "launch_flow": np.where(has_ln, LAUNCH_FLOW, FRAMEWORK_FLOW).astype(object),
            "launch_us": launch_us, "launch_latency_us": t_start - launch_us,
            "host_op": host_op, "host_thread": thread_of(launch_track),
            "host_start_us": host_start, "host_end_us": host_end,
            "framework_op": framework_op, "responsible_op": op_labels[op_code],
            "gap_us": t_gap, "waited": waited, "host_idle_us": idle})
        frame.loc[t_step < 0, "step"] = pd.NA
        return frame[COLUMNS]

    return Dispatch(tasks, steps, ops, None, step_source, float(tolerance_us), n_device,
                    launched=len(idx), waited_tasks=int(waited.sum()), latency_us=t_start - launch_us)


def _track_labels(tracks: pd.DataFrame):
    """A function from track ids to their "process / thread" texts ("" for an unknown track)."""
    ids = tracks["track"].to_numpy(np.int64)
    text = (tracks["process"].astype(str) + " / " + tracks["thread"].astype(str)).to_numpy(dtype=object)
    lut = np.full(int(ids.max()) + 2 if len(ids) else 1, "", dtype=object)   # the last entry: unknown
    lut[ids] = text

    def labels(track: np.ndarray) -> np.ndarray:
        track = np.asarray(track, dtype=np.int64)
        return lut[np.where((track >= 0) & (track < len(lut) - 1), track, len(lut) - 1)]
    return labels


def profile_dispatch(prof, tolerance_us: float = TOLERANCE_US) -> Dispatch:
    """`host_dispatch` of a `Profile`'s frames (cached on it for the default tolerance)."""
    def build():
        return host_dispatch(prof.timeline, prof.timeline_tracks, prof.timeline_flows, lambda: prof.step_windows,
                             tolerance_us)
    return prof.cached("dispatch", build) if tolerance_us == TOLERANCE_US else build()


__all__ = ["Dispatch", "host_dispatch", "profile_dispatch", "not_available", "TOLERANCE_US", "LAUNCH_FLOW",
           "FRAMEWORK_FLOW"]
