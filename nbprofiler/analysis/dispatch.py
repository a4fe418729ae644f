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

import ctypes
import dataclasses
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .._clib import load
from .._memory import release_heap, release_pages, row_slices
from ..model.derive import profiler_step_windows
from ..schema import ANALYSIS_FRAMES
from .timeline import BLOCK_ROWS, finite

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
# The walk over the device's tasks in start order takes slices of about `SLICE_ROWS` tasks, bounded by every
# _SAMPLE-th of a sample of the starts (each sample stands for SLICE_ROWS / _SAMPLE tasks of a track). A
# slice's temporaries (~40 arrays of a value per task) stay in the CPU's caches and, freed, are reused from
# the heap by the next slice; slices of a million tasks each took fresh memory from the system, page by page
# (benchmarks/README.md, "The dashboard after a load"). The compiled walk takes as many tasks per call, into
# buffers of that size. The result does not depend on it.
SLICE_ROWS = 1 << 18
_SAMPLE = 16
# The sizes of this many longest waits are kept: `Dispatch.longest_waits` up to that many makes their rows
# alone.
_TOP_WAITS = 1000
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
    ``latency`` (their launch latencies' ``median``, ``p90``, ``max`` and how many are ``negative``);
    ``longest`` makes the rows of `longest_waits` without the whole frame."""

    table: pd.DataFrame | Callable[[], pd.DataFrame]
    steps: pd.DataFrame
    ops: pd.DataFrame
    why: str | None = None
    step_source: str = ""
    tolerance_us: float = TOLERANCE_US
    device_tasks: int = 0
    launched: int = 0
    waited_tasks: int = 0
    latency: dict | None = None
    longest: Callable[[int], pd.DataFrame | None] | None = dataclasses.field(default=None, repr=False)

    @property
    def tasks(self) -> pd.DataFrame:
        """The ``dispatch`` frame: one row per launched device task."""
        if callable(self.table):
            self.table = self.table()
        return self.table

    def longest_waits(self, n: int) -> pd.DataFrame:
        """The rows of the ``dispatch`` frame of the ``n`` tasks that waited longest for their launch (most
        ``host_idle_us`` first). Where the frame is not made yet, those rows alone are made: a view of the
        longest waits of millions of tasks does not hold the whole frame."""
        if callable(self.table) and self.longest is not None:
            rows = self.longest(n)
            if rows is not None:
                return rows
        return self.tasks[self.tasks["host_idle_us"] > 0].nlargest(n, "host_idle_us")

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

    def to_dict(self, top: int = 5, per_step: bool = True) -> dict:
        """The summary JSON's ``dispatch`` section (``per_step=False``: without its per-step rows)."""
        if not self.available:
            return {"available": False, "why": self.why}
        out = {"available": True, "sentence": self.sentence(), "tasks": self.launched,
                "device_tasks": self.device_tasks, "waited_tasks": self.waited_tasks, "steps": int(len(self.steps)),
                "step_source": self.step_source, "tolerance_us": self.tolerance_us,
                "host_idle_ms_per_step": self.host_idle_per_step_us / 1000, "idle_share": self.idle_share,
                "latency_us": dict(self.latency)}
        if per_step:
            st = self.steps
            out["per_step"] = [{"step": step, "host_idle_ms": idle, "step_ms": span, "idle_share": share, "top_op": op}
                               for step, idle, span, share, op in zip(
                                   [None if k is pd.NA else int(k) for k in st["step"].array.tolist()],
                                   (st["host_idle_us"] / 1000).tolist(), (st["step_us"] / 1000).tolist(),
                                   st["idle_share"].tolist(), st["top_op"].tolist())]
        out["top_ops"] = [{"op": r.responsible_op, "host_idle_ms": r.host_idle_us / 1000,
                           "waited_tasks": int(r.waited_tasks), "share_of_host_idle": r.share_of_host_idle}
                          for r in self.ops.head(top).itertuples()]
        return out


def _frame(columns: dict, rows: dict | None = None) -> pd.DataFrame:
    rows = rows or {}
    return pd.DataFrame({c: pd.Series(rows.get(c, []), dtype=("object" if t == "str" else t))
                         for c, t in columns.items()})


def _empty_tasks() -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.Series(dtype=("object" if c.dtype == "str" else c.dtype)) for c in SPEC.columns})


def not_available(why: str) -> Dispatch:
    return Dispatch(_empty_tasks(), _frame(STEP_COLUMNS), _frame(OP_COLUMNS), why=why, step_source="none")


def _labels(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A text column as (codes, labels): per row the position of its text in ``labels``, an object array of
    str whose last entry (code −1, a missing value) is "nan", as ``astype(str)`` writes it. A categorical's
    own codes, no text per row: ``Categorical.codes``, a view (of the mapped file, on disk), where pandas'
    ``.cat.codes`` is a new Series, which copies them."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, values = col.array.codes, col.cat.categories
    else:
        codes, values = pd.factorize(col)
    return codes, np.append(np.asarray(pd.Index(values).astype(str), dtype=object), "nan")


def _distinct(*arrays: np.ndarray) -> np.ndarray:
    """The distinct values of integer ``arrays``, sorted (by sorting: numpy's hashed `np.unique` took 0.2 s
    per million task ids)."""
    a = np.sort(np.concatenate(arrays))
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a


def _member(ids: np.ndarray, of: np.ndarray) -> np.ndarray:
    """``np.isin(ids, of)`` for integer ids such as track ids: a lookup in a table of flags where the ids are
    small and not negative (`np.isin` sorts them)."""
    if not len(ids) or not len(of):
        return np.zeros(len(ids), dtype=bool)
    top = max(int(ids.max()), int(of.max()))
    if ids.min() < 0 or of.min() < 0 or top > 4 * (len(ids) + len(of)):
        return np.isin(ids, of)
    table = np.zeros(top + 1, dtype=bool)
    table[of] = True
    return table[ids]


def _positions(mask: np.ndarray) -> np.ndarray | slice:
    """The positions where ``mask`` holds, as an index: ``slice(None)`` where it holds everywhere (as it
    mostly does: every task launched, every task in a step), so that indexing by it makes views, not copies."""
    return slice(None) if mask.all() else np.flatnonzero(mask)


def _index_type(n: int) -> type:
    """The smallest integer type numbering ``n`` rows (with −1 for none)."""
    return np.int32 if n < 2 ** 31 else np.int64


@dataclasses.dataclass
class _Columns:
    """The timeline columns the analysis reads (views of the mapped files of a timeline on disk: a read
    touches only the pages it needs) and the rows of one pass (``chunk``)."""

    frame: pd.DataFrame
    track: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    chunk: int

    @classmethod
    def of(cls, timeline: pd.DataFrame, chunk: int) -> "_Columns":
        return cls(timeline, timeline["track"].to_numpy(), timeline["start_us"].to_numpy(float),
                   timeline["dur_us"].to_numpy(float), max(1, int(chunk)))

    def span(self, track) -> tuple[int, int]:
        """The rows [lo, hi) of a track (the timeline is sorted by track, then start)."""
        # in the column's own type: an int64 key would have the whole int32 column converted to search it
        key = self.track.dtype.type(track)
        return (int(np.searchsorted(self.track, key, side="left")),
                int(np.searchsorted(self.track, key, side="right")))

    def ends(self, rows) -> np.ndarray:
        """The ends of ``rows`` (a slice or positions); a missing duration counts as 0."""
        return self.start[rows] + finite(self.dur[rows])

    def release(self) -> None:
        release_pages(self.frame)   # a timeline on disk: the pages read so far leave this process


@dataclasses.dataclass
class _Device:
    """The device's tasks: the X events of its streams' tracks, numbered track by track in timeline order
    (a task's number: its track's ``base`` + its place among the track's tasks, which are sorted by start)."""

    tracks: list
    lo: list
    xs: list       # per track: its tasks' offsets from ``lo`` where some of its rows are not X events, else None
    base: np.ndarray
    x_start: list  # per track with ``xs``: its tasks' starts

    @property
    def n(self) -> int:
        return int(self.base[-1])

    def starts(self, cols: _Columns, k: int) -> np.ndarray:
        """The starts of the ``k``-th track's tasks, sorted (a view of the column where every row is a task)."""
        if self.xs[k] is None:
            return cols.start[self.lo[k]:self.lo[k] + int(self.base[k + 1] - self.base[k])]
        return self.x_start[k]

    def durs(self, cols: _Columns, k: int) -> np.ndarray:
        """The durations of the ``k``-th track's tasks (a view of the column where every row is a task)."""
        if self.xs[k] is None:
            return cols.dur[self.lo[k]:self.lo[k] + int(self.base[k + 1] - self.base[k])]
        return cols.dur[self.lo[k] + self.xs[k]]

    def c_arrays(self, cols: _Columns) -> "_TrackArrays":
        """Every track's task starts and durations as C arrays, for the compiled kernels."""
        starts = [_c(self.starts(cols, k), np.float64) for k in range(len(self.tracks))]
        durs = [_c(self.durs(cols, k), np.float64) for k in range(len(self.tracks))]
        pointers = ctypes.c_void_p * max(len(self.tracks), 1)
        return _TrackArrays(starts, durs, np.array([len(a) for a in starts], dtype=np.int64),
                            pointers(*(a.ctypes.data for a in starts)), pointers(*(a.ctypes.data for a in durs)))

    def rows(self, k: int, pos) -> np.ndarray:
        """The timeline rows of the ``k``-th track's tasks at positions ``pos`` (an array, or a slice)."""
        if self.xs[k] is not None:
            return self.lo[k] + self.xs[k][pos]
        if isinstance(pos, slice):
            return np.arange(self.lo[k] + pos.start, self.lo[k] + pos.stop)
        return self.lo[k] + pos


@dataclasses.dataclass
class _TrackArrays:
    """`_Device.c_arrays`: per track its starts and durations (held: the pointer arrays point into them), their
    lengths, and an array of pointers to each."""

    starts: list
    durs: list
    lens: np.ndarray
    starts_p: ctypes.Array
    durs_p: ctypes.Array


def _device_tasks(timeline: pd.DataFrame, cols: _Columns, device: np.ndarray) -> _Device:
    """The tasks of the ``device`` tracks: each track's rows found by binary search (no pass over the
    timeline), the X events among them through the ``ph`` codes of those rows only."""
    ph = timeline["ph"] if "ph" in timeline else None
    if ph is not None and isinstance(ph.dtype, pd.CategoricalDtype):
        x_code, ph_codes = int(ph.cat.categories.get_indexer(["X"])[0]), ph.array.codes
    tracks, lo, xs, counts, x_start = [], [], [], [], []
    for tr in np.sort(device):
        a, b = cols.span(tr)
        if b == a:
            continue
        if ph is None:
            is_x = None
        elif isinstance(ph.dtype, pd.CategoricalDtype):
            is_x = ph_codes[a:b] == x_code if x_code >= 0 else np.zeros(b - a, dtype=bool)
        else:
            is_x = (ph.iloc[a:b] == "X").to_numpy(dtype=bool)
        keep = None if is_x is None or is_x.all() else np.flatnonzero(is_x)
        if keep is not None and not len(keep):
            continue
        tracks.append(tr)
        lo.append(a)
        xs.append(keep)
        counts.append(b - a if keep is None else len(keep))
        x_start.append(None if keep is None else cols.start[a + keep])
    base = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
    return _Device(tracks, lo, xs, base, x_start)


# The launched tasks' columns a walk gives for the host side (`_walk`): per task its place among the launched
# tasks, timeline row, start and end, the flow giving its launch and its framework flow, whether that is the
# launch flow, the launch's time, its step (−1: none), gap, whether it waited, its idle and its step's key.
_TASK_COLUMNS = {"pos": np.int64, "row": np.int64, "start": np.float64, "end": np.float64, "flow": np.int64,
                 "fw": np.int64, "is_launch": np.bool_, "launch_us": np.float64, "step": np.int64,
                 "gap": np.float64, "waited": np.bool_, "idle": np.float64, "key": np.int64}


def _compiled_library():
    """The analysis's compiled kernels (``_dispatch.c``), or None where they are not built: then `_innermost`,
    `_first_flows` and `_walk` work with numpy, to the same result."""
    dll = load(Path(__file__).resolve().parent, "_dispatch", 1)
    if dll is None:
        return None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    dll.nbp_innermost.restype = dll.nbp_first_flows.restype = None
    dll.nbp_innermost.argtypes = [ptr, ptr, i64, ptr, i64, i64, ptr]
    dll.nbp_first_flows.argtypes = [i64, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, ptr, ptr, i64, ptr, ctypes.c_int,
                                    ptr]
    dll.nbp_walk.restype = i64
    dll.nbp_walk.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ctypes.c_int, ptr, i64, ptr, ptr, ptr, ptr,
                             ctypes.c_double, ctypes.c_int, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64,
                             *[ptr] * len(_TASK_COLUMNS), ptr]
    return dll


_COMPILED = _compiled_library()


def _c(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as a C array of ``dtype`` (itself where it is one already)."""
    return np.ascontiguousarray(a, dtype=dtype)


def _innermost(starts: np.ndarray, durs: np.ndarray, t: np.ndarray, chunk: int) -> np.ndarray:
    """Per time in ``t``, the position of the innermost event enclosing it (the latest start among the
    `NESTING_DEPTH` events starting before it whose end reaches it), −1 where none. ``starts``: sorted;
    ``durs``: the events' durations (an end is its start + its duration, a missing one counting as 0). With
    numpy, the times are taken ``chunk`` at a time."""
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(starts) or not len(t):
        return out
    if _COMPILED is not None:
        starts, durs, t = _c(starts, np.float64), _c(durs, np.float64), _c(t, np.float64)
        _COMPILED.nbp_innermost(starts.ctypes.data, durs.ctypes.data, len(starts), t.ctypes.data, len(t),
                                NESTING_DEPTH, out.ctypes.data)
        return out

    def ends_at(pos):
        return starts[pos] + finite(durs[pos])
    for q in range(0, len(t), chunk):
        tq = t[q:q + chunk]
        last = np.searchsorted(starts, tq, side="right") - 1
        res = out[q:q + chunk]
        # most times fall in the event starting last before them: that pass over every time, the next passes
        # over the times not placed yet, each looking one event further back
        hit = (last >= 0) & (ends_at(np.clip(last, 0, None)) >= tq)
        res[hit] = last[hit]
        todo = np.flatnonzero(~hit & (last > 0))
        for k in range(1, NESTING_DEPTH):
            at = last[todo] - k
            hit = (at >= 0) & (ends_at(np.clip(at, 0, None)) >= tq[todo])
            res[todo[hit]] = at[hit]
            todo = todo[~hit & (at > 0)]
            if not len(todo):
                break
    return out


class _HostThread:
    """One host track's events, for the outermost event enclosing a time: the earliest start among the
    events starting before it whose end reaches it is the first event where the running maximum of the ends
    reaches the time. That maximum is kept at the end of each block of ``block`` rows only (made in one pass
    over the track): a lookup recomputes it within the blocks its times fall in."""

    def __init__(self, cols: _Columns, lo: int, hi: int):
        self.cols, self.lo, self.n = cols, lo, hi - lo
        self.block = min(cols.chunk, BLOCK_ROWS)
        step = self.block * max(1, cols.chunk // self.block)   # a pass's rows: whole blocks
        tops = [np.fmax.reduceat(cols.ends(slice(lo + a, lo + min(a + step, self.n))),
                                 np.arange(0, min(step, self.n - a), self.block))
                for a in range(0, self.n, step)]
        self.reach = np.fmax.accumulate(np.concatenate(tops)) if tops else np.zeros(0)

    def outermost(self, t: np.ndarray) -> np.ndarray:
        """Per time in ``t``, the row of the outermost event enclosing it, −1 where none. The times are taken
        in order (sorting them is next to no work: launches come in time order), so that those falling in
        each block (after the maximum reached before it, up to the one it reaches) are a run of them."""
        out = np.full(len(t), -1, dtype=np.int64)
        if not self.n or not len(t):
            return out
        lo, b = self.lo, self.block
        order = np.argsort(t, kind="stable")
        t = t[order]
        cuts = np.concatenate([[0], np.searchsorted(t, self.reach, side="right")])
        for k in np.flatnonzero(np.diff(cuts)):
            a, z = cuts[k], cuts[k + 1]
            run = np.fmax.accumulate(np.fmax(self.cols.ends(slice(lo + k * b, lo + min((k + 1) * b, self.n))),
                                             self.reach[k - 1] if k else -np.inf))
            pos = np.searchsorted(run, t[a:z], side="left")
            first = lo + k * b + np.minimum(pos, len(run) - 1)
            # the first event whose running maximum reaches t encloses it if it starts by t (the starts are
            # sorted: then so do all events before it); the maximum misses t only where it is NaN (every
            # event of the thread without a start)
            ok = (pos < len(run)) & (self.cols.start[first] <= t[a:z])
            out[order[a:z][ok]] = first[ok]
        return out


def _first_flows(cols: _Columns, dev: _Device, head_track: np.ndarray, head_us: np.ndarray,
                 kind: np.ndarray) -> np.ndarray:
    """Per device task, the first flow (its row in the flows frame, in flow order) of a kind (``kind``: a
    flag per flow) whose head lands in it: the task of the head's track that encloses it (a flow's end binds
    to the enclosing slice; the writers put it at the task's start); −1 where none."""
    out = np.full(dev.n, -1, dtype=_index_type(len(head_us)))
    if _COMPILED is not None and kind.any():
        _first_flows_compiled(cols, dev, head_track, head_us, kind, out)
        cols.release()
        return out
    for k, tr in enumerate(dev.tracks if kind.any() else []):
        mine = np.flatnonzero(kind & (head_track == tr))
        if not len(mine):
            continue
        at = _innermost(dev.starts(cols, k), dev.durs(cols, k), head_us[mine], cols.chunk)
        task, flow = at[at >= 0], mine[at >= 0]
        if not len(task):   # none of the flows' heads lands in a task of this track
            continue
        order = np.argsort(task, kind="stable")
        task, flow = task[order], flow[order]
        first = np.concatenate([[True], task[1:] != task[:-1]])
        out[dev.base[k] + task[first]] = flow[first]
    cols.release()
    return out


def _first_flows_compiled(cols: _Columns, dev: _Device, head_track: np.ndarray, head_us: np.ndarray,
                          kind: np.ndarray, out: np.ndarray) -> None:
    """`_first_flows` into ``out`` (−1 throughout, int32 or int64), in one pass over the flows in compiled
    code (``nbp_first_flows``)."""
    if not dev.tracks:
        return
    tracks = np.asarray(dev.tracks, dtype=np.int64)
    track_index = np.full(int(tracks.max()) + 1, -1, dtype=np.int64)
    track_index[tracks] = np.arange(len(tracks))
    arrays = dev.c_arrays(cols)
    head_track, head_us = _c(head_track, np.int32), _c(head_us, np.float64)
    kind, base = _c(kind, np.bool_).view(np.uint8), _c(dev.base, np.int64)
    hints = np.zeros(len(tracks), dtype=np.int64)
    _COMPILED.nbp_first_flows(len(head_us), head_track.ctypes.data, head_us.ctypes.data, kind.ctypes.data,
                              len(track_index), track_index.ctypes.data, len(tracks), arrays.starts_p,
                              arrays.durs_p, arrays.lens.ctypes.data, base.ctypes.data, NESTING_DEPTH,
                              hints.ctypes.data, int(out.dtype == np.int64), out.ctypes.data)


class _Ops:
    """The host side of the launches: per launched task the host call enclosing its launch (the outermost
    event of the launch flow's tail thread), the framework op enclosing its framework flow's tail (the
    innermost), and the op its idle is put on, as a code into `labels`: the timeline's names, then the
    flows' names used (the framework op, else the host op, else the launch flow's name)."""

    def __init__(self, cols: _Columns, flows: pd.DataFrame, name_codes: np.ndarray, names: np.ndarray):
        self.cols, self.flows, self.name_codes, self.names = cols, flows, name_codes, names
        # per name code (−1, a missing name: the last entry, its "nan" label) the op it puts idle on, −2 for
        # none: an empty name
        self.op_of_code = np.where(names != "", np.arange(len(names)), -2)
        self.tail_us, self.tail_track = flows["start_us"].to_numpy(float), flows["start_track"].to_numpy()
        self.threads: dict = {}
        self.extra: dict = {}    # a flow's name -> its code − len(names), in the order first used

    def thread(self, track) -> _HostThread:
        if track not in self.threads:
            self.threads[track] = _HostThread(self.cols, *self.cols.span(track))
        return self.threads[track]

    def host_rows(self, flow: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The host calls enclosing the tails of ``flow``, at ``t`` (their ``tail_us``)."""
        tracks = self.tail_track[flow]
        rows = np.full(len(flow), -1, dtype=np.int64)
        for tr in pd.unique(tracks):
            mine = np.flatnonzero(tracks == tr)   # a pass per track: cheaper than a stable sort by track
            rows[mine] = self.thread(tr).outermost(t[mine])
        return rows

    def framework_rows(self, flow: np.ndarray) -> np.ndarray:
        tracks, t = self.tail_track[flow], self.tail_us[flow]
        rows = np.full(len(flow), -1, dtype=np.int64)
        for tr in pd.unique(tracks):
            lo, hi = self.cols.span(tr)
            mine = np.flatnonzero(tracks == tr)
            at = _innermost(self.cols.start[lo:hi], self.cols.dur[lo:hi], t[mine], self.cols.chunk)
            rows[mine[at >= 0]] = lo + at[at >= 0]
        return rows

    def codes(self, host: np.ndarray, fw: np.ndarray, flow: np.ndarray) -> np.ndarray:
        def op_of(rows):
            return np.where(rows >= 0, self.op_of_code[self.name_codes[rows]], -2)
        op = op_of(host)
        if (fw >= 0).any():   # the framework op where there is one (a trace without async_npu flows has none)
            fw_op = op_of(fw)
            op = np.where(fw_op > -2, fw_op, op)
        by_flow = np.flatnonzero(op == -2)
        if len(by_flow):   # the flows' names, as codes of the distinct texts
            text = self.flows["name"].take(flow[by_flow]).astype(str).to_numpy(dtype=object)
            for name in pd.unique(text):
                self.extra.setdefault(name, len(self.extra))
            op[by_flow] = len(self.names) + pd.Index(list(self.extra)).get_indexer(text)
        return op

    @property
    def labels(self) -> np.ndarray:
        return np.concatenate([self.names, np.asarray(list(self.extra), dtype=object)])


def _slices(cols: _Columns, dev: _Device):
    """The device's tasks in start order (ties in timeline order), ``cols.chunk`` or so at a time: (their
    numbers, rows, starts). Each slice holds the tasks starting in a span of time, taken from each track
    (sorted by start) by binary search; the spans' bounds are every `_SAMPLE`-th of a sample of the starts
    taken every ``chunk // _SAMPLE``-th task of each track."""
    n_tracks = len(dev.tracks)
    if dev.n > cols.chunk:
        every = max(1, cols.chunk // _SAMPLE)
        sample = np.sort(np.concatenate([dev.starts(cols, k)[::every] for k in range(n_tracks)]))
        bounds = np.unique(sample[np.isfinite(sample)][_SAMPLE::_SAMPLE])
    else:
        bounds = np.zeros(0)
    sizes = np.diff(dev.base)
    cuts = [np.concatenate([[0], np.searchsorted(dev.starts(cols, k), bounds, side="left"), [sizes[k]]])
            for k in range(n_tracks)]
    for j in range(len(bounds) + 1):
        parts = [(k, int(cuts[k][j]), int(cuts[k][j + 1])) for k in range(n_tracks) if cuts[k][j + 1] > cuts[k][j]]
        if not parts:
            continue
        task = np.concatenate([np.arange(dev.base[k] + a, dev.base[k] + b) for k, a, b in parts])
        rows = np.concatenate([dev.rows(k, slice(a, b)) for k, a, b in parts])
        start = np.concatenate([dev.starts(cols, k)[a:b] for k, a, b in parts])
        order = np.argsort(start, kind="stable")
        yield task[order], rows[order], start[order]


@dataclasses.dataclass
class _Walk:
    """What one walk over the device's tasks in start order gathers: per step key (``keys``) the launched
    tasks, those that waited and all device idle in steps; per op code (`_Ops`) its waits in steps and the
    number of the first of them among all waits; the waits themselves (key, op code, idle, in a step) and
    every launch latency; for the frame, the launched tasks' columns slice by slice."""

    counts: np.ndarray
    waits: np.ndarray
    dev_idle: np.ndarray
    latency: np.ndarray
    op_waits: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    appear: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hit_key: list = dataclasses.field(default_factory=list)
    hit_op: list = dataclasses.field(default_factory=list)
    hit_idle: list = dataclasses.field(default_factory=list)
    hit_in_step: list = dataclasses.field(default_factory=list)
    waited: int = 0
    first_start: float = np.inf   # the run's extent: its first task's start, its last end
    last_end: float = -np.inf
    columns: list = dataclasses.field(default_factory=list)

    def grow(self, n_codes: int) -> None:
        """Room for ``n_codes`` op codes (the flows' names add codes as the walk finds them)."""
        more = n_codes - len(self.op_waits)
        if more > 0:
            self.op_waits = np.concatenate([self.op_waits, np.zeros(more, dtype=np.int64)])
            self.appear = np.concatenate([self.appear, np.full(more, np.iinfo(np.int64).max, dtype=np.int64)])


@dataclasses.dataclass
class _Windows:
    """The step windows as the walk places tasks in them: sorted by start (stably, as
    `op_steps._place_in_steps` sorts them), per window its start, end, step and step's key (its place in
    ``keys``). Each array has one more entry, which a window number −1 reads: "in no window" (start NaN,
    end −inf: no time is before it, step −1 and its key)."""

    start: np.ndarray
    end: np.ndarray
    step: np.ndarray
    key: np.ndarray
    keys: np.ndarray

    @classmethod
    def of(cls, windows: pd.DataFrame, keys: np.ndarray) -> "_Windows":
        w = windows.sort_values("start_us", kind="stable")
        step = np.append(w["step"].to_numpy(np.int64), -1)
        return cls(np.append(w["start_us"].to_numpy(float), np.nan), np.append(w["end_us"].to_numpy(float), -np.inf),
                   step, np.searchsorted(keys, step), keys)

    def __len__(self) -> int:
        return len(self.step) - 1

    def place(self, start: np.ndarray) -> np.ndarray:
        """Per time of ``start`` (sorted), the number of the window it falls in, −1 outside every window: the
        last window starting at or before it, where the time is before that window's end. The windows
        starting at or before each time are counted from where each window's start falls among the times:
        a search per window, not per time (a slice has a million times, a run thousands of windows)."""
        first = np.searchsorted(start, self.start[:-1], side="left")   # the first time at or after each window's start
        at = np.cumsum(np.bincount(first, minlength=len(start) + 1)[:len(start)]) - 1
        return np.where(start < self.end[at], at, -1)


def _walk(cols: _Columns, dev: _Device, ln_of: np.ndarray, fw_of: np.ndarray, launched: int, ops: _Ops,
          windows: _Windows, tolerance_us: float, keep: float | None = None) -> _Walk:
    """The device idle before every task, in start order: the gap since the latest end of the tasks started
    before it (carried from slice to slice), or since its step's start when later; each launched task's
    launch (``ln_of``/``fw_of``: its launch and framework flows) and its wait, and the host ops behind the
    waits (and behind the rows kept). Sums run in start order whatever the slices (``np.add.at`` sums as
    ``np.bincount`` does), so the result does not depend on ``cols.chunk``, nor on whether the compiled walk
    (`_walk_compiled`) or numpy's (`_walk_numpy`) gives the tasks. ``keep``: the columns of the launched tasks
    whose host-bound idle is at least that are kept for the frame (−inf: all; None: none)."""
    n_keys = len(windows.keys)
    acc = _Walk(counts=np.zeros(n_keys, dtype=np.int64), waits=np.zeros(n_keys, dtype=np.int64),
                dev_idle=np.zeros(n_keys), latency=np.empty(launched))
    # the host side of the launches (the ops behind them) only where it is read: the waits, and the rows kept
    # for the frame (the waits are a few of the launches: the search of the host calls is most of the work)
    every = keep is not None and keep <= 0   # idle >= 0: a keep <= 0 keeps every launched task
    walk = _walk_compiled if _COMPILED is not None else _walk_numpy
    for t in walk(cols, dev, ln_of, fw_of, ops.tail_us, windows, tolerance_us, every, acc):
        host = ops.host_rows(t["flow"], t["launch_us"])
        fw_row = np.full(len(host), -1, dtype=np.int64)
        has_fw = t["fw"] >= 0
        fw_row[has_fw] = ops.framework_rows(t["fw"][has_fw])
        op = ops.codes(host, fw_row, t["flow"])
        hit = np.flatnonzero(t["waited"])   # the tasks that waited: their idle (> 0) is what the steps and ops sum
        op_hit = op[hit]
        acc.grow(len(ops.names) + len(ops.extra))
        acc.hit_key.append(t["key"][hit])
        acc.hit_op.append(op_hit)
        acc.hit_idle.append(t["idle"][hit])
        hit_in_step = t["step"][hit] >= 0
        acc.hit_in_step.append(hit_in_step)
        # per op (of the waits in a step, where there are steps): its waits and its first (in start order)
        c_op = op_hit[hit_in_step] if len(windows) else op_hit
        np.minimum.at(acc.appear, c_op, acc.waited + np.arange(len(c_op)))
        np.add.at(acc.op_waits, c_op, 1)
        acc.waited += len(hit)
        if keep is not None:
            k = np.flatnonzero(t["idle"] >= keep)
            acc.columns.append({**{c: t[c][k] for c in ("pos", "row", "start", "end", "flow", "is_launch",
                                                        "launch_us", "step", "gap", "waited", "idle")},
                                "op": op[k], "host_row": host[k], "fw_row": fw_row[k]})
        cols.release()
    return acc


def _walk_numpy(cols: _Columns, dev: _Device, ln_of: np.ndarray, fw_of: np.ndarray, tail_us: np.ndarray,
                windows: _Windows, tolerance_us: float, every: bool, acc: _Walk):
    """The walk's tasks in numpy, slice by slice (`_slices`): the per-step sums, the latencies and the run's
    extent into ``acc``; per slice, the `_TASK_COLUMNS` of its launched tasks that waited (``every``: of all
    its launched tasks). ``tail_us``: per flow, when it was sent."""
    n_keys = len(windows.keys)
    busy_before, n_launched = -np.inf, 0
    for task, rows, start in _slices(cols, dev):
        end = start + finite(cols.dur[rows])
        run = np.maximum.accumulate(np.concatenate([[busy_before], end]))
        busy, busy_before = run[:-1], run[-1]     # the latest end of the tasks started before each
        window = windows.place(start)
        step, all_keys = windows.step[window], windows.key[window]
        np.fmax(busy, windows.start[window], out=busy)   # the step's start where later (NaN, no step: ignored)
        gap = np.subtract(start, busy)
        np.maximum(gap, 0, out=gap)
        gap[~np.isfinite(busy)] = np.nan
        in_step = _positions(step >= 0) if len(windows) else slice(None)   # no steps: the run is one
        np.add.at(acc.dev_idle, all_keys[in_step], finite(gap[in_step]))
        acc.first_start = np.minimum(acc.first_start, start.min())
        acc.last_end = np.maximum(acc.last_end, end.max())

        ln, fw = ln_of[task], fw_of[task]
        sel = np.flatnonzero((ln >= 0) | (fw >= 0))   # the launched tasks of the slice, in start order
        ln, fw = ln[sel], fw[sel]
        is_launch = ln >= 0
        flow = np.where(is_launch, ln, fw)             # the flow giving the launch
        launch_us = tail_us[flow]
        t_start, t_busy, t_gap, key = start[sel], busy[sel], gap[sel], all_keys[sel]
        # a gap (> 0 only after a finite busy end), and the launch came once the device had run out of work
        waited = (t_gap > 0) & (launch_us >= t_busy - tolerance_us)
        idle = np.where(waited, t_gap, 0.0)
        acc.counts += np.bincount(key, minlength=n_keys)
        acc.waits += np.bincount(key[waited], minlength=n_keys)
        np.subtract(t_start, launch_us, out=acc.latency[n_launched:n_launched + len(sel)])
        out = slice(None) if every else np.flatnonzero(waited)
        yield {"pos": n_launched + np.arange(len(sel))[out], "row": rows[sel][out], "start": t_start[out],
               "end": end[sel][out], "flow": flow[out], "fw": fw[out].astype(np.int64), "is_launch": is_launch[out],
               "launch_us": launch_us[out], "step": step[sel][out], "gap": t_gap[out], "waited": waited[out],
               "idle": idle[out], "key": key[out]}
        n_launched += len(sel)


def _walk_compiled(cols: _Columns, dev: _Device, ln_of: np.ndarray, fw_of: np.ndarray, tail_us: np.ndarray,
                   windows: _Windows, tolerance_us: float, every: bool, acc: _Walk):
    """`_walk_numpy`'s walk in compiled code (``nbp_walk``), ``cols.chunk`` tasks per call, into buffers
    reused from call to call: the columns it yields are views of them, read before the next."""
    n = len(dev.tracks)
    arrays = dev.c_arrays(cols)
    xs = [None if x is None else _c(x, np.int64) for x in dev.xs]
    base, lo = _c(dev.base, np.int64), np.array(dev.lo, dtype=np.int64)
    wide = ln_of.dtype == np.int64
    ln_of, fw_of = _c(ln_of, ln_of.dtype), _c(fw_of, ln_of.dtype)
    tail_us = _c(tail_us, np.float64)
    w_start, w_end = _c(windows.start, np.float64), _c(windows.end, np.float64)
    w_step, w_key = _c(windows.step, np.int64), _c(windows.key, np.int64)
    pos, heap, head = np.zeros(n, np.int64), np.zeros(max(n, 1), np.int64), np.zeros(max(n, 1))
    state_i = np.zeros(2, np.int64)
    state_d = np.array([-np.inf, np.inf, -np.inf])
    size = max(1, cols.chunk)
    buf = {c: np.empty(size, dtype=t) for c, t in _TASK_COLUMNS.items()}
    n_out = ctypes.c_int64(0)
    xs_p = (ctypes.c_void_p * max(n, 1))(*(None if x is None else x.ctypes.data for x in xs))
    while True:
        walked = _COMPILED.nbp_walk(
            n, arrays.starts_p, arrays.durs_p, arrays.lens.ctypes.data, base.ctypes.data, lo.ctypes.data, xs_p,
            ln_of.ctypes.data, fw_of.ctypes.data, int(wide), tail_us.ctypes.data, len(windows), w_start.ctypes.data,
            w_end.ctypes.data, w_step.ctypes.data, w_key.ctypes.data, float(tolerance_us), int(every),
            pos.ctypes.data, state_i.ctypes.data, state_d.ctypes.data, heap.ctypes.data, head.ctypes.data,
            acc.counts.ctypes.data, acc.waits.ctypes.data, acc.dev_idle.ctypes.data, acc.latency.ctypes.data, size,
            *(buf[c].ctypes.data for c in _TASK_COLUMNS), ctypes.byref(n_out))
        if not walked:
            break
        yield {c: a[:n_out.value] for c, a in buf.items()}
    acc.first_start, acc.last_end = float(state_d[1]), float(state_d[2])


def _steps(step_windows, timeline) -> tuple[pd.DataFrame, str]:
    """The step windows on the timeline's clock and where they come from: ``step_windows``, else the
    host's ``ProfilerStep#N`` events (`derive.profiler_step_windows`), else none (an empty frame)."""
    if step_windows is None or not len(step_windows):
        step_windows = profiler_step_windows(timeline)
    if step_windows is not None and len(step_windows):
        source = str(step_windows["source"].iloc[0]) if "source" in step_windows else "step_windows"
        return step_windows[["step", "start_us", "end_us"]].astype({"step": "int64"}), source
    return pd.DataFrame({"step": pd.Series(dtype="int64"), "start_us": pd.Series(dtype=float),
                         "end_us": pd.Series(dtype=float)}), "none"


def host_dispatch(timeline: pd.DataFrame | None, timeline_tracks: pd.DataFrame | None,
                  timeline_flows: pd.DataFrame | None, step_windows=None,
                  tolerance_us: float = TOLERANCE_US, chunk_rows: int = SLICE_ROWS) -> Dispatch:
    """The launches of a profile's device tasks and the device idle the host caused (module docstring).
    ``step_windows``: the step windows frame, or a function returning it (called only when there are
    launches to place: a run without them answers "not available" without its steps being worked out).
    Worked out on the timeline's columns and its names' codes, ``chunk_rows`` tasks (or rows, or times) at
    a time, so its memory stays bounded on a timeline larger than memory (loaded on disk: the pages of the
    mapped columns leave after each chunk); the result does not depend on ``chunk_rows``. The ``dispatch``
    frame itself (a text per task) is made when ``.tasks`` is first read, by the same walk again: the
    analysis keeps no column per task."""
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
        into = _member(flows["end_track"].to_numpy(), device)
        cat = flows["cat"]
        is_ln, is_fw = into & (cat == LAUNCH_FLOW).to_numpy(), into & (cat == FRAMEWORK_FLOW).to_numpy()
    else:
        is_ln = is_fw = np.zeros(0, dtype=bool)
    if not is_ln.any() and not is_fw.any():
        return not_available("no flow joins a host call to a device task (the trace has no HostToDevice or "
                             "async_npu flows, the database no CANN_API/TASK connectionId)")

    cols = _Columns.of(timeline, chunk_rows)
    dev = _device_tasks(timeline, cols, device)
    name_codes, names = _labels(timeline["name"])

    def launches() -> tuple[np.ndarray, np.ndarray, int]:
        """Per device task its first launch and framework flows (−1: none), and how many have one."""
        head_track, head_us = flows["end_track"].to_numpy(), flows["end_us"].to_numpy(float)
        ln_of = _first_flows(cols, dev, head_track, head_us, is_ln)
        fw_of = _first_flows(cols, dev, head_track, head_us, is_fw)
        return ln_of, fw_of, sum(int(((ln_of[p] >= 0) | (fw_of[p] >= 0)).sum()) for p in row_slices(dev.n))
    ln_of, fw_of, launched = launches()
    if not launched:
        return not_available("the flows' heads match no device task on the timeline")
    windows, step_source = _steps(step_windows() if callable(step_windows) else step_windows, timeline)
    cols.release()
    # per step: the windows (or the run as one); a task's step is a window's, or −1: none
    if len(windows):
        win = windows.sort_values("start_us").reset_index(drop=True)
        win_step = win["step"].to_numpy(np.int64)
    else:
        win, win_step = None, np.array([-1])
    keys = _distinct(win_step, np.array([-1]))
    ops = _Ops(cols, flows, name_codes, names)
    acc = _walk(cols, dev, ln_of, fw_of, launched, ops, _Windows.of(windows, keys), tolerance_us)
    del ln_of, fw_of
    if win is None:
        win = pd.DataFrame({"step": [pd.NA], "start_us": [float(acc.first_start)], "end_us": [float(acc.last_end)]})

    # one op per text (a flow's name can be a timeline name too), numbered in text order
    labels = ops.labels
    hit_codes = np.concatenate(acc.hit_op)
    used = _distinct(hit_codes)   # the codes of the waits' ops
    texts, group = np.unique(labels[used].astype(str), return_inverse=True)
    group_of = np.zeros(len(labels), dtype=np.int64)
    group_of[used] = group
    n_ops = len(texts)
    op_waits = np.zeros(n_ops, dtype=np.int64)
    np.add.at(op_waits, group, acc.op_waits[used])
    appear = np.full(n_ops, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(appear, group, acc.appear[used])

    # per step: the host-bound idle (summed over the waits in start order), the tasks, the op behind most
    hit_key, hit_op = np.concatenate(acc.hit_key), group_of[hit_codes]
    hit_idle, hit_in_step = np.concatenate(acc.hit_idle), np.concatenate(acc.hit_in_step)
    sums = pd.Series(hit_idle).groupby(hit_key).sum().reindex(range(len(keys)), fill_value=0.0).to_numpy()
    per_op = pd.Series(hit_idle).groupby(hit_key * n_ops + hit_op).sum()
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
        "end_us": win["end_us"].to_numpy(float), "step_us": span, "tasks": acc.counts[k_win],
        "waited_tasks": acc.waits[k_win], "host_idle_us": w_idle, "idle_share": share,
        "device_idle_us": acc.dev_idle[k_win],
        "top_op": np.where(w_idle > 0, np.append(texts, "")[top_of[k_win]], "").astype(object)})   # −1: none

    # per responsible op (of the tasks in a step, where there are steps), in the order of their first waits
    c_hit = hit_in_step if len(windows) else slice(None)
    op_idle = (pd.Series(hit_idle[c_hit]).groupby(hit_op[c_hit]).sum()
               .reindex(range(n_ops), fill_value=0.0).to_numpy())
    keep = np.flatnonzero(op_waits > 0)
    keep = keep[np.argsort(appear[keep], kind="stable")]
    keep = keep[np.argsort(-op_idle[keep], kind="stable")]
    total = float(op_idle[keep].sum())
    ops_frame = _frame(OP_COLUMNS, {"responsible_op": texts[keep].tolist(), "host_idle_us": op_idle[keep],
                                    "waited_tasks": op_waits[keep],
                                    "idle_per_step_us": op_idle[keep] / max(len(steps), 1),
                                    "share_of_host_idle": op_idle[keep] / total if total > 0 else np.zeros(len(keep))})
    latency = _latency_stats(acc.latency)
    waited = acc.waited
    top_idle = -np.sort(-hit_idle)[:_TOP_WAITS]   # the longest waits' sizes, most first
    del acc, hit_key, hit_op, hit_idle, hit_in_step
    release_heap()

    def table(keep: float) -> pd.DataFrame:
        """The ``dispatch`` frame's rows of the tasks whose host-bound idle is at least ``keep``: the walk
        again, keeping their columns."""
        ops = _Ops(cols, flows, name_codes, names)
        parts = _walk(cols, dev, *launches(), ops, _Windows.of(windows, keys), tolerance_us, keep=keep).columns
        # column by column, each slice's piece let go once joined: one column at a time is held twice
        c = {k: np.concatenate([part.pop(k) for part in parts]) for k in list(parts[0])}
        thread_of = _track_labels(tracks)
        host_row, fw_row, step = c["host_row"], c["fw_row"], c["step"]
        host_code = np.where(host_row >= 0, name_codes[host_row], -2)
        fw_code = np.where(fw_row >= 0, name_codes[fw_row], -2)
        host_start = np.where(host_row >= 0, cols.start[host_row], np.nan)
        host_end = host_start + np.where(host_row >= 0, finite(cols.dur[host_row]), np.nan)
        flow_kind = np.array([FRAMEWORK_FLOW, LAUNCH_FLOW], dtype=object)   # a text per kind, not per row
        frame = pd.DataFrame({
            "step": pd.array(np.where(step >= 0, step, 0), dtype="Int64"),
            "task": names[name_codes[c["row"]]], "stream": thread_of(cols.track[c["row"]]),
            "task_start_us": c["start"], "task_end_us": c["end"],
            "launch_flow": flow_kind[c["is_launch"].astype(np.int8)],
            "launch_us": c["launch_us"], "launch_latency_us": c["start"] - c["launch_us"],
            "host_op": np.where(host_row >= 0, names[host_code], "").astype(object),
            "host_thread": thread_of(ops.tail_track[c["flow"]]),
            "host_start_us": host_start, "host_end_us": host_end,
            "framework_op": np.where(fw_row >= 0, names[fw_code], "").astype(object),
            "responsible_op": ops.labels[c["op"]],
            "gap_us": c["gap"], "waited": c["waited"], "host_idle_us": c["idle"]},
            index=None if keep == -np.inf else c["pos"], copy=False)   # the walk's arrays, not copies
        frame.loc[step < 0, "step"] = pd.NA
        cols.release()
        return frame[COLUMNS]

    def longest(n: int) -> pd.DataFrame | None:
        """The rows of the ``n`` longest waits (None: more than the analysis kept the sizes of)."""
        if n > len(top_idle) and len(top_idle) == _TOP_WAITS:
            return None
        keep = top_idle[min(n, len(top_idle)) - 1] if len(top_idle) and n > 0 else np.inf
        return table(keep).nlargest(n, "host_idle_us")

    return Dispatch(lambda: table(-np.inf), steps, ops_frame, None, step_source, float(tolerance_us), dev.n,
                    launched=launched, waited_tasks=waited, latency=latency, longest=longest)


def _latency_stats(latency: np.ndarray) -> dict:
    """The launch latencies' ``median``, ``p90``, ``max`` and how many are ``negative``, as a Series of them
    gives them (NaN skipped). Its median and quantile are np.median and np.quantile of the values that are
    not NaN: those, called on the array itself, take half the time of the Series' methods, which mask and
    frame a million values first."""
    lat = pd.Series(latency, copy=False)
    nan = np.isnan(latency)
    known = latency[~nan] if nan.any() else latency   # np.median and np.quantile leave their input as it is
    if len(known):
        median, p90 = float(np.median(known)), float(np.quantile(known, 0.9))
    else:   # no latency known (no launch or task time): the Series' own NaN
        median, p90 = float(lat.median()), float(lat.quantile(0.9))
    return {"median": median, "p90": p90, "max": float(lat.max()), "negative": int((lat < 0).sum())}


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
