"""Pipeline bubbles of a pipeline-parallel job: how long each stage idles in a step, against the schedule.

`pipeline_bubbles(cluster)` is the frame ``pipeline_bubbles`` (declared in `nbprofiler.schema.ANALYSIS_FRAMES`):
one row per stage, rank and step, the step split into disjoint parts::

    step_ms = busy_ms + p2p_ms + collective_ms + free_ms      idle_ms = p2p_ms + free_ms
    bubble_ratio = idle_ms / step_ms

``busy_ms`` is the time the rank computes (the union of its compute kernels), ``p2p_ms`` the time it spends
in send/receive ops with nothing computing (waiting for a neighbouring stage), ``collective_ms`` its
collectives with nothing computing (data-parallel gradient reductions: not a bubble), ``free_ms`` the time
nothing runs. The stage idles for ``idle_ms``. Sources, per rank, first found (``source`` says which):

- the device timeline, where it holds send/receive ops (``hcom_send__``, ``hcom_receive__``, ``Send-op``,
  ``Receive-op``, ...): compute = the kernels of the device's streams (``Ascend Hardware``) other than the
  communication streams and the ``hcom_*`` ops; send/receive and collectives = the ``hcom_*`` ops (the
  ``HCCL`` / ``Communication`` process's op tracks, not its planes' tasks). The step is the pipeline's: from
  the earliest start to the latest end of that step (`step_windows`) over every rank of the pipeline, on the
  ranks' own absolute clocks (one host, or hosts kept in sync), so a stage that starts late or ends early
  idles for it, as in the stage x time chart;
- a step trace with a ``Bubble`` column (step_trace_time.csv, cluster_step_trace_time.csv: the summed
  send/receive ops): ``busy_ms`` = Computing, ``p2p_ms`` = Bubble (at most the Communication(Not
  Overlapped) it lies in), ``collective_ms`` = the rest of Communication(Not Overlapped), ``free_ms`` =
  Free + Preparing;
- legacy ``ascend_cluster_analyse_pipeline-parallel_*.csv``: ``busy_ms`` = computation_time, ``p2p_ms`` =
  receive_alone_time, ``collective_ms`` = collective_communication_alone_time (the step: computation_time +
  communication_alone_time; the file gives no idle time apart, ``free_ms`` NaN).

Stages, first found: the ``stages=`` mapping (stage -> ranks); the p2p groups of communication_group.json
(msprof-analyze's pipeline stages: each group one stage, in the order of their smallest rank); the
``<stages>_<ranks>`` of a legacy ``ascend_cluster_analyse_pipeline-parallel_*`` file name (ranks split in
order). Stages count from 0, as the framework numbers them.

The theoretical bubble of the schedule, where the micro-batch count ``m`` is given: (p-1)/(m+p-1) for p
stages under GPipe or 1F1B (they idle alike, 1F1B only holds fewer activations), (p-1)/(v*m+p-1) for
interleaved 1F1B with v model chunks per stage. ``gap_ms`` = idle_ms − theoretical x step_ms: the time a
step loses to the bubble beyond what the schedule itself costs (stage imbalance, communication, stalls).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..schema import ANALYSIS_FRAMES, FRAMES
from .breakdown import TRANSFER_TASK, WAIT_TASK

SPEC = ANALYSIS_FRAMES["pipeline_bubbles"]
COLUMNS = SPEC.column_names
PARTS = ("busy_ms", "p2p_ms", "collective_ms", "free_ms")
PART_LABELS = {"busy_ms": "Computing", "p2p_ms": "Send/receive (waiting for a neighbour stage)",
               "collective_ms": "Collective communication", "free_ms": "Idle (nothing running)"}
IDENTITY = "step_ms = busy_ms + p2p_ms + collective_ms + free_ms; idle_ms = p2p_ms + free_ms; " \
           "bubble_ratio = idle_ms / step_ms (NaN parts count as 0)"
SCHEDULES = ("gpipe", "1f1b", "interleaved")
# Point-to-point ops of HCCL (torch_npu, MindSpore 2.x) and of MindSpore's graph (legacy Send-op/Receive-op).
P2P_OP = re.compile(r"(^hcom_(send|receive|recv|sendrecv|batchsendrecv|batch_send_recv)_|"
                    r"^(send|receive)-op|batchsendrecv)", re.I)
COMM_OP = re.compile(r"^(hcom_|hccl)", re.I)
DEVICE_PROCESS = "Ascend Hardware"
# The processes of the communication ops: "HCCL" in trace_view.json, "Communication" in the databases' timeline.
COMM_PROCESSES = ("HCCL", "Communication")
# Above this many ranks the timelines are not read for the summary; `pipeline_bubbles(..., timelines=True)`
# still reads them.
TIMELINE_MAX_RANKS = 16
NOT_PIPELINE = ("no pipeline stages: no p2p groups in communication_group.json, no "
                "ascend_cluster_analyse_pipeline-parallel_* file, and no stages= given")


def theoretical_bubble(stages: int, micro_batches: int, schedule: str = "1f1b", chunks: int = 1) -> float:
    """The bubble ratio of the ideal schedule (equal stages, free communication): (p-1)/(m+p-1) for GPipe
    and 1F1B, (p-1)/(v*m+p-1) for interleaved 1F1B with ``chunks`` = v model chunks per stage."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    p, m, v = int(stages), int(micro_batches), int(chunks) if schedule == "interleaved" else 1
    if p < 1 or m < 1 or v < 1:
        raise ValueError(f"stages, micro_batches and chunks must be at least 1 (got {p}, {m}, {v})")
    return (p - 1) / (v * m + p - 1)


# -- stages -------------------------------------------------------------------------------------------------
def pipeline_stages(cluster, stages: dict | None = None) -> tuple[dict[int, list[str]], str]:
    """stage -> its ranks (str keys of the cluster) and where that came from ("" and an empty dict when the
    job is not pipeline-parallel as far as the files tell); see the module docstring for the order."""
    known = [str(r) for r in cluster.ranks]
    if stages:
        out = {int(s): [str(r) for r in rs] for s, rs in dict(stages).items()}
        unknown = sorted({r for rs in out.values() for r in rs} - set(known))
        if unknown:
            raise ValueError(f"stages= names ranks the cluster does not have: {unknown}; its ranks are {known}")
        listed = [r for rs in out.values() for r in rs]
        twice = sorted({r for r in listed if listed.count(r) > 1})
        if twice:
            raise ValueError(f"stages= puts ranks {twice} in more than one stage")
        return dict(sorted(out.items())), "stages= given"
    from .cluster import communication_summary
    # the cluster's groups, each once (every rank of a cluster_analysis folder holds them all)
    groups = communication_summary(cluster).get("groups", pd.DataFrame()) if hasattr(cluster, "profiles") \
        else cluster.concat("communication_groups")
    if len(groups) and "kind" in groups:
        p2p = groups[groups["kind"] == "p2p"]
        found = sorted({tuple(str(r) for r in g) for g in p2p["ranks"]}, key=lambda g: min(_num(r) for r in g))
        found = [[r for r in g if r in known] for g in found]
        found = [g for g in found if g]
        if len(found) > 1:
            return {i: g for i, g in enumerate(found)}, "p2p groups of communication_group.json"
    from .cluster import _pipeline_shape
    n, size = _pipeline_shape(cluster)
    if n > 1 and size:
        per = max(1, size // n)
        out: dict[int, list[str]] = {}
        for r in known:
            if str(r).isdigit():
                out.setdefault(min(int(r) // per, n - 1), []).append(r)
        if len(out) > 1:
            return dict(sorted(out.items())), f"ascend_cluster_analyse_pipeline-parallel_{n}_{size} file name"
    return {}, ""


def _num(r) -> float:
    return float(r) if str(r).isdigit() else float("inf")


# -- the frame ----------------------------------------------------------------------------------------------
def pipeline_bubbles(cluster, stages: dict | None = None, micro_batches: int | None = None,
                     schedule: str = "1f1b", chunks: int = 1, timelines: bool | None = None) -> pd.DataFrame:
    """The ``pipeline_bubbles`` frame of ``cluster`` (see the module docstring); stages in order, ranks in
    the cluster's order. ``stages``: stage -> ranks (default: found in the files); ``micro_batches``,
    ``schedule`` (`SCHEDULES`), ``chunks`` (interleaved): the schedule for ``theoretical_ratio`` and
    ``gap_ms`` (NaN without ``micro_batches``); ``timelines``: whether the ranks' timelines may be read
    (default: up to `TIMELINE_MAX_RANKS` ranks). Empty when the job is not pipeline-parallel;
    ``attrs``: ``stages``, ``stages_from``, ``schedule`` (dict or None), ``reason`` (why empty)."""
    theory = None
    if micro_batches is not None:
        theory = {"schedule": schedule, "micro_batches": int(micro_batches),
                  "chunks": int(chunks) if schedule == "interleaved" else 1}
    key = f"pipeline_bubbles:{sorted((stages or {}).items())}:{theory}:{timelines}"

    def build():
        found, origin = pipeline_stages(cluster, stages)
        if not found:
            return _with_attrs(_empty(), found, origin, None, NOT_PIPELINE)
        use_timelines = timelines if timelines is not None else len(cluster.ranks) <= TIMELINE_MAX_RANKS
        rows = _stage_rows(cluster, found, use_timelines)
        if rows.empty:
            return _with_attrs(rows, found, origin, None, "no rank of the stages has a timeline with send/receive "
                               "ops, a step trace with a Bubble column or an ascend_cluster_analyse pipeline file")
        ratio = np.nan
        out_theory = None
        if theory is not None:
            ratio = theoretical_bubble(len(found), theory["micro_batches"], theory["schedule"], theory["chunks"])
            out_theory = {**theory, "stages": len(found), "ratio": ratio}
        rows["theoretical_ratio"] = ratio
        rows["gap_ms"] = rows["idle_ms"] - ratio * rows["step_ms"]
        rows["source"] = rows["source"] + f"; stages: {origin}"
        out = rows[COLUMNS].astype({"stage": "int64", "rank": str, "step": "int64", "source": str})
        return _with_attrs(out.reset_index(drop=True), found, origin, out_theory, "")

    return cluster.cached(key, build) if hasattr(cluster, "cached") else build()


def _with_attrs(df, found, origin, theory, reason):
    df.attrs.update(stages={int(k): list(v) for k, v in found.items()}, stages_from=origin, schedule=theory,
                    reason=reason)
    return df


def _empty() -> pd.DataFrame:
    dtypes = {c.name: ("object" if c.dtype == "str" else c.dtype) for c in SPEC.columns}
    return pd.DataFrame({k: pd.Series(dtype=v) for k, v in dtypes.items()})


def _stage_rows(cluster, found: dict, use_timelines: bool) -> pd.DataFrame:
    stage_of = {r: s for s, rs in found.items() for r in rs}
    ranks = [r for r in cluster.ranks if str(r) in stage_of]
    frames = []
    timed = {r: cluster[r] for r in ranks if use_timelines and _has_p2p_timeline(cluster[r])}
    if timed:
        frames.append(_timeline_rows(timed))
    rest = [str(r) for r in ranks if r not in timed]
    # every rank's step trace at once (`Cluster.concat`: many ranks are stacked where they are parsed)
    traces = cluster.concat("step_trace") if rest and hasattr(cluster, "concat") else pd.DataFrame()
    rows = None
    if len(traces):
        traces = traces[traces["rank"].astype(str).isin(rest)]
        rows = _step_trace_rows(traces, _trace_name(cluster[rest[0]])) if len(traces) else None
    done = set(rows["rank"]) if rows is not None else set()
    if rows is not None:
        frames.append(rows)
    for r in rest:
        if r in done:
            continue
        df = _legacy_rows(cluster[r])
        if df is not None and len(df):
            frames.append(df.assign(rank=r))
    frames = [f for f in frames if len(f)]
    if not frames:
        return _empty()
    out = pd.concat(frames, ignore_index=True)
    out["stage"] = out["rank"].map(stage_of).astype("int64")
    out["idle_ms"] = out["p2p_ms"].fillna(0.0) + out["free_ms"].fillna(0.0)
    out["bubble_ratio"] = out["idle_ms"] / out["step_ms"].where(out["step_ms"] > 0)
    order = {str(r): i for i, r in enumerate(cluster.ranks)}
    out = out.assign(_o=out["rank"].map(order)).sort_values(["stage", "_o", "step"], kind="stable")
    return out.drop(columns="_o").reset_index(drop=True)


# -- from the step traces -----------------------------------------------------------------------------------
def _trace_name(prof) -> str:
    """The file name of a rank's step trace (the rows' ``source``)."""
    st = prof.step_trace
    path = st.attrs.get("path", "step trace") if st is not None else "step trace"
    return str(path).replace("\\", "/").rsplit("/", 1)[-1]


def _step_trace_rows(st: pd.DataFrame, name: str) -> pd.DataFrame | None:
    """Rows of the ranks whose step trace has a Bubble column, from their stacked step traces ``st`` (with
    ``rank``; ``name``: the file they come from); None when none has one."""
    need = {"rank", "step", "total_ms", "computing_ms", "communication_not_overlapped_ms", "bubble_ms"}
    if st.empty or not need <= set(st.columns):
        return None
    st = st[st["step"].notna()]
    with_bubble = st["bubble_ms"].notna().groupby(st["rank"].astype(str)).transform("any")
    st = st[with_bubble.to_numpy()]
    if st.empty:
        return None
    get = lambda c: st[c].astype(float).to_numpy() if c in st else np.zeros(len(st))  # noqa: E731
    exposed = np.nan_to_num(get("communication_not_overlapped_ms"))
    p2p = np.minimum(np.nan_to_num(get("bubble_ms")), exposed)
    return pd.DataFrame({"step": st["step"].astype("int64").to_numpy(), "step_ms": get("total_ms"),
                         "busy_ms": get("computing_ms"), "p2p_ms": p2p, "collective_ms": exposed - p2p,
                         "free_ms": np.nan_to_num(get("free_ms")) + np.nan_to_num(get("preparing_ms")),
                         "source": f"{name} (Computing, Bubble, Communication(Not Overlapped), Free)",
                         "rank": st["rank"].astype(str).to_numpy()})


def _legacy_rows(prof) -> pd.DataFrame | None:
    ca = prof.cluster_analyse
    need = {"step", "computation_time_ms", "communication_alone_time_ms", "receive_alone_time_ms",
            "collective_communication_alone_time_ms"}
    if ca is None or ca.empty or not need <= set(ca.columns):
        return None
    ca = ca.drop_duplicates("step")
    f = lambda c: ca[c].astype(float).to_numpy()  # noqa: E731
    return pd.DataFrame({"step": ca["step"].astype("int64").to_numpy(),
                         "step_ms": f("computation_time_ms") + f("communication_alone_time_ms"),
                         "busy_ms": f("computation_time_ms"), "p2p_ms": f("receive_alone_time_ms"),
                         "collective_ms": f("collective_communication_alone_time_ms"), "free_ms": np.nan,
                         "source": "ascend_cluster_analyse_pipeline-parallel_*.csv (computation_time, "
                                   "receive_alone_time, collective_communication_alone_time)"})


# -- from the device timelines ------------------------------------------------------------------------------
def _has_p2p_timeline(prof) -> bool:
    if hasattr(prof, "has") and not prof.has(*FRAMES["timeline"].roles):
        return False
    tl = prof.timeline
    if tl is None or tl.empty:
        return False
    names = tl["name"]
    cats = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else pd.Index(names.unique())
    return any(P2P_OP.search(str(c)) for c in cats)


def _classified(prof) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The rank's device intervals (absolute µs): ``compute``, ``p2p``, ``collective`` as (start, end)."""
    tl, tracks = prof.timeline, prof.timeline_tracks
    process = tl["track"].map(tracks.set_index("track")["process"].astype(str)).astype(str).to_numpy()
    thread = tl["track"].map(tracks.set_index("track")["thread"].astype(str)).astype(str).to_numpy()
    names = tl["name"]
    cats = pd.Index(names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else names.unique()).astype(str)
    of = lambda test: names.astype(str).isin([c for c in cats if test(c)]).to_numpy()  # noqa: E731
    is_wait = of(lambda c: bool(WAIT_TASK.search(c) or TRANSFER_TASK.match(c)))
    on_comm_stream = tl["track"].isin(np.unique(tl["track"].to_numpy()[is_wait])).to_numpy()
    is_comm = of(lambda c: bool(COMM_OP.match(c)))
    is_p2p = of(lambda c: bool(P2P_OP.search(c)))
    device = process == DEVICE_PROCESS
    ops = (np.isin(process, COMM_PROCESSES) & ~np.char.startswith(thread.astype(str), "Plane")) | (device & is_comm)
    start = tl["start_us"].to_numpy(dtype=float) + float(prof.origin_us)
    end = start + np.nan_to_num(tl["dur_us"].to_numpy(dtype=float))
    pick = lambda m: (start[m], end[m])  # noqa: E731
    return {"compute": pick(device & ~on_comm_stream & ~is_comm), "p2p": pick(ops & is_p2p),
            "collective": pick(ops & is_comm & ~is_p2p)}


def _pipeline_windows(profiles: dict, intervals: dict) -> dict[int, tuple[float, float]]:
    """step -> (start, end) absolute µs: the pipeline's step, from the first to the last device op of any
    rank inside the step's window (`step_windows`, over the ranks: a host mark such as ProfilerStep#N also
    holds the host's work before and after the device's); without steps, one step 0 from the first to the
    last device op of any rank (``intervals``: rank -> `_classified`)."""
    windows: dict[int, tuple[float, float]] = {}
    for prof in profiles.values():
        w = prof.step_windows
        if w is None or w.empty:
            continue
        origin = float(prof.origin_us)
        for row in w.itertuples():
            lo, hi = origin + float(row.start_us), origin + float(row.end_us)
            old = windows.get(int(row.step))
            windows[int(row.step)] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
    starts = np.concatenate([s for iv in intervals.values() for s, _ in iv.values()] or [np.zeros(0)])
    ends = np.concatenate([e for iv in intervals.values() for _, e in iv.values()] or [np.zeros(0)])
    if not windows:
        return {0: (float(starts.min()), float(ends.max()))} if len(starts) else {}
    out = {}
    for step, (lo, hi) in sorted(windows.items()):
        inside = (starts >= lo) & (starts < hi)
        out[step] = (float(starts[inside].min()), float(ends[inside].max())) if inside.any() else (lo, hi)
    return out


def _merge(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The intervals [start, end) merged: an (n, 2) array of disjoint intervals in order."""
    keep = end > start
    start, end = start[keep], end[keep]
    if not len(start):
        return np.empty((0, 2))
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    return np.column_stack([s[new], np.r_[reach[np.flatnonzero(new)[1:] - 1], reach[-1]]])


def _subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Merged intervals ``a`` minus merged intervals ``b``."""
    out, j = [], 0
    for lo, hi in a:
        while j < len(b) and b[j, 1] <= lo:
            j += 1
        k, cur = j, lo
        while k < len(b) and b[k, 0] < hi:
            if b[k, 0] > cur:
                out.append((cur, b[k, 0]))
            cur = max(cur, b[k, 1])
            k += 1
        if cur < hi:
            out.append((cur, hi))
    return np.array(out, dtype=float).reshape(-1, 2)


def _clip(pair, lo, hi) -> np.ndarray:
    s, e = pair
    return _merge(np.maximum(s, lo), np.minimum(e, hi))


def _length(iv: np.ndarray) -> float:
    return float((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0.0


def step_segments(intervals: dict, lo: float, hi: float) -> dict[str, np.ndarray]:
    """One rank's step [lo, hi) split into disjoint merged intervals: ``compute`` (any compute kernel),
    ``p2p`` (send/receive and no compute), ``collective`` (a collective, no compute, no send/receive) and
    ``free`` (nothing)."""
    compute = _clip(intervals["compute"], lo, hi)
    p2p_all = _clip(intervals["p2p"], lo, hi)
    coll_all = _clip(intervals["collective"], lo, hi)
    p2p = _subtract(p2p_all, compute)
    busy_or_p2p = _merge(np.r_[compute[:, 0], p2p[:, 0]], np.r_[compute[:, 1], p2p[:, 1]])
    collective = _subtract(coll_all, busy_or_p2p)
    taken = _merge(np.r_[busy_or_p2p[:, 0], collective[:, 0]], np.r_[busy_or_p2p[:, 1], collective[:, 1]])
    free = _subtract(np.array([[lo, hi]], dtype=float), taken)
    return {"compute": compute, "p2p": p2p, "collective": collective, "free": free}


def _timeline_rows(profiles: dict) -> pd.DataFrame:
    intervals = {rank: _classified(prof) for rank, prof in profiles.items()}
    windows = _pipeline_windows(profiles, intervals)
    rows = []
    for rank, iv in intervals.items():
        for step, (lo, hi) in windows.items():
            seg = step_segments(iv, lo, hi)
            rows.append({"rank": str(rank), "step": step, "step_ms": (hi - lo) / 1000.0,
                         "busy_ms": _length(seg["compute"]) / 1000.0, "p2p_ms": _length(seg["p2p"]) / 1000.0,
                         "collective_ms": _length(seg["collective"]) / 1000.0,
                         "free_ms": _length(seg["free"]) / 1000.0,
                         "source": "device timeline (compute kernels vs send/receive ops in the pipeline's step "
                                   "window on one clock)"})
    return pd.DataFrame(rows)


def stage_timeline(cluster, frame: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """The stage x time chart's bars for one step of a timeline-measured ``frame`` (`pipeline_bubbles`):
    for the first rank of each stage, its disjoint ``compute`` / ``p2p`` / ``collective`` / ``free``
    intervals as ``stage``, ``rank``, ``kind``, ``start_ms``, ``end_ms`` (from the pipeline's step start, on
    one clock). ``step``: default `representative_step`. Empty when no row came from a timeline."""
    cols = ["stage", "rank", "kind", "start_ms", "end_ms"]
    timed = frame[frame["source"].str.startswith("device timeline")] if len(frame) else frame
    if timed.empty:
        return pd.DataFrame(columns=cols)
    step = representative_step(timed) if step is None else int(step)
    firsts = timed.drop_duplicates("stage")[["stage", "rank"]]
    profiles = {str(r): cluster[str(r)] for r in timed["rank"].unique()}
    intervals = {rank: _classified(prof) for rank, prof in profiles.items()}
    lo, hi = _pipeline_windows(profiles, intervals)[step]
    rows = []
    for stage, rank in firsts.itertuples(index=False):
        seg = step_segments(intervals[str(rank)], lo, hi)
        for kind, iv in seg.items():
            rows += [(int(stage), str(rank), kind, (a - lo) / 1000.0, (b - lo) / 1000.0) for a, b in iv]
    out = pd.DataFrame(rows, columns=cols)
    out.attrs["step"] = step
    return out


def representative_step(frame: pd.DataFrame) -> int:
    """The step whose pipeline step (its longest stage row) is the median of the steps' (the lower middle)."""
    per = frame.groupby("step")["step_ms"].max().sort_values(kind="stable")
    return int(per.index[(len(per) - 1) // 2])


# -- the digest ---------------------------------------------------------------------------------------------
STAGE_NUMBERS = ("step_ms", *PARTS, "idle_ms", "bubble_ratio", "gap_ms")


def stage_medians(frame: pd.DataFrame) -> pd.DataFrame:
    """Per stage, the median over its ranks' steps of `STAGE_NUMBERS` (each its own median), with
    ``ranks`` (list) and ``rows``; stages in order."""
    g = frame.groupby("stage", sort=True)
    out = g[list(STAGE_NUMBERS)].median()
    out.insert(0, "ranks", g["rank"].agg(lambda s: list(dict.fromkeys(s))))
    out.insert(1, "rows", g.size())
    return out.reset_index()


def pipeline_summary(frame: pd.DataFrame) -> dict | None:
    """The pipeline bubbles for the summary JSON: ``identity``, ``stages_from``, ``sources``, ``stages``
    (`stage_medians` rows), ``bubble_ratio`` (mean over the stages of their median ratio: the share of the
    pipeline's device time spent idle), ``theoretical`` (the schedule and its ratio, or None), ``gap_ms``
    (mean over the stages of their median gap, ms per step), ``worst`` (the stage that idles most: ``stage``,
    ``ranks``, ``idle_ms``, ``step_ms``, ``bubble_ratio``) and ``finding``; None without rows."""
    if frame.empty:
        return None
    med = stage_medians(frame)
    worst = med.loc[med["bubble_ratio"].idxmax()]
    theory = frame.attrs.get("schedule")
    ratio = float(med["bubble_ratio"].mean())
    gap = float(med["gap_ms"].mean()) if theory else None
    stages = [{"stage": int(r["stage"]), "ranks": [str(x) for x in r["ranks"]], "rows": int(r["rows"]),
               **{c: _f(r[c]) for c in STAGE_NUMBERS}} for _, r in med.iterrows()]
    out = {"identity": IDENTITY, "stages_from": frame.attrs.get("stages_from", ""),
           "sources": sorted(frame["source"].str.split("; stages:").str[0].unique()), "stages": stages,
           "bubble_ratio": ratio, "theoretical": theory, "gap_ms": gap,
           "worst": {"stage": int(worst["stage"]), "ranks": [str(x) for x in worst["ranks"]],
                     "idle_ms": float(worst["idle_ms"]), "step_ms": float(worst["step_ms"]),
                     "bubble_ratio": float(worst["bubble_ratio"]), "gap_ms": _f(worst["gap_ms"])}}
    out["finding"] = _finding(out, med)
    return out


def _finding(d: dict, med: pd.DataFrame) -> str:
    w = d["worst"]
    ranks = ", ".join(w["ranks"])
    text = (f"Stage {w['stage']} (rank{'s' if len(w['ranks']) > 1 else ''} {ranks}) idles most: "
            f"{w['idle_ms']:,.3f} ms a step (median; bubble ratio {w['bubble_ratio'] * 100:.1f} % of its median "
            f"{w['step_ms']:,.3f} ms step)")
    if len(med) > 1:
        text += f"; over its {len(med)} stages the pipeline idles {d['bubble_ratio'] * 100:.1f} % of the step"
    t = d["theoretical"]
    if t:
        name = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": f"interleaved 1F1B, {t['chunks']} chunks"}
        text += (f". The schedule's own bubble ({name[t['schedule']]}, {t['stages']} stages, "
                 f"{t['micro_batches']} micro-batches) is {t['ratio'] * 100:.1f} %: measured − theoretical = "
                 f"{(d['bubble_ratio'] - t['ratio']) * 100:+.1f} points, {d['gap_ms']:+,.3f} ms per step "
                 f"(stage {w['stage']}: {w['gap_ms']:+,.3f} ms)")
    else:
        text += (". The schedule's theoretical bubble needs the micro-batch count "
                 "(pipeline_bubbles(cluster, micro_batches=...))")
    return text + "."


def _f(v):
    return None if v is None or pd.isna(v) else float(v)


__all__ = ["pipeline_bubbles", "pipeline_stages", "pipeline_summary", "stage_medians", "stage_timeline",
           "step_segments", "representative_step", "theoretical_bubble", "PARTS", "PART_LABELS", "IDENTITY",
           "SCHEDULES", "NOT_PIPELINE"]
