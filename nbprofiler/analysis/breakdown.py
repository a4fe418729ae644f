"""Per-rank, per-step time breakdown of a distributed job: where each rank's step goes.

`rank_breakdown(cluster)` is the frame ``rank_breakdown`` (declared in `nbprofiler.schema.ANALYSIS_FRAMES`):
one row per rank and step, the step split into disjoint parts that add up to it::

    step_ms = computing_ms + comm_overlapped_ms + comm_exposed_ms + free_ms + host_bound_ms
    comm_exposed_ms = wait_ms + transit_ms

(a NaN part is one the files do not give, counted as 0). From a step_trace_time.csv (per rank, its
analysis.db or profiler database twin, or cluster_step_trace_time.csv): ``computing_ms`` = Computing −
Overlapped (Computing counts the time communication runs beside it, Overlapped is that time),
``comm_overlapped_ms`` = Overlapped, ``comm_exposed_ms`` = Communication(Not Overlapped), ``free_ms`` = Free,
``host_bound_ms`` = Preparing (first device task of the step − the host's step start: the device idle while
the host dispatches; NaN in cluster_step_trace_time.csv, which has no Preparing), ``step_ms`` = their sum
(the step trace's ``total_ms``). From a legacy step trace: ``step_ms`` = its total, ``host_bound_ms`` = the
step interval (end of the previous step to the first forward op), ``comm_exposed_ms`` = the
ascend_cluster_analyse file's communication_alone_time where the run has one, ``computing_ms`` the rest of the
step (the legacy files give neither the overlapped communication nor the idle time apart).

The exposed communication is split into waiting for the other ranks (synchronisation inside the collectives)
and moving data in the ratio wait / (wait + transit) of the rank's communication in that step, because no
file gives the wait of the exposed part alone (the ops overlap the computing and each other: rank 0 of
cluster_4rank_pipeline's hccl_raw waits 270 ms in a 178 ms step). The ratio comes from, first that found:
the communication files' per-op ``Wait Time(ms)`` and ``Transit Time(ms)`` (communication.json,
cluster_communication.json); legacy hccl_raw's ``wait_cost`` and ``communication_cost``; the communication
stream's tasks on the timeline (trace_view.json, or the database's TASK table as the reader gives it): the
time covered by ``Notify Wait`` tasks against the time covered by the data-moving tasks (SDMA, RDMA, Memcpy,
Reduce Inline/TBE), each as the union of its tasks' intervals (the tasks of several planes overlap).
"""
from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pandas as pd

from ..io import shared
from ..model.parallel import MIN_RANKS_FOR_PROCESSES, map_chunks
from ..schema import ANALYSIS_FRAMES, FRAMES

SPEC = ANALYSIS_FRAMES["rank_breakdown"]
COLUMNS = SPEC.column_names
# The disjoint parts of the step, in stacking order, and the split of the exposed communication.
PARTS = ("computing_ms", "comm_overlapped_ms", "comm_exposed_ms", "free_ms", "host_bound_ms")
EXPOSED_SPLIT = ("wait_ms", "transit_ms")
IDENTITY = ("step_ms = computing_ms + comm_overlapped_ms + comm_exposed_ms + free_ms + host_bound_ms; "
            "comm_exposed_ms = wait_ms + transit_ms (NaN parts count as 0)")
PART_LABELS = {"computing_ms": "Computing (alone)", "comm_overlapped_ms": "Communication overlapped",
               "comm_exposed_ms": "Communication exposed", "wait_ms": "Exposed: waiting for other ranks",
               "transit_ms": "Exposed: moving data", "free_ms": "Free (device idle)",
               "host_bound_ms": "Host-bound (device waits for dispatch)"}

# Above this many ranks the wait/transit split is not taken from the timelines (it would parse every rank's
# trace for a summary); `rank_breakdown(cluster, timelines=True)` still does.
TIMELINE_SPLIT_MAX_RANKS = 16

# HCCL task names on the communication stream: waits for a peer's notify, and the tasks that move data.
WAIT_TASK = re.compile(r"notify[ _]?wait", re.I)
TRANSFER_TASK = re.compile(r"^(sdma|rdma\w*|memcpy\w*|reduce[ _]?(inline|tbe)\w*)$", re.I)


def rank_breakdown(cluster, engine: str | None = None, timelines: bool | None = None) -> pd.DataFrame:
    """The ``rank_breakdown`` frame of ``cluster`` (see the module docstring): one row per rank and step,
    ranks in the cluster's order. ``engine``: as `nbprofiler.model.parallel.map_chunks` (default: the
    cluster's); below `MIN_RANKS_FOR_PROCESSES` ranks, serially on the cluster's own profiles (their frames
    stay for the other views), else in chunks of ranks, each rank reduced where it is parsed
    (`breakdown_ranks`) so no rank's frames stay in this process. ``timelines``: whether the wait/transit
    split may come from the ranks' timelines (default: up to `TIMELINE_SPLIT_MAX_RANKS` ranks). Cached on
    the cluster."""
    if timelines is None:
        timelines = len(getattr(cluster, "ranks", cluster.profiles)) <= TIMELINE_SPLIT_MAX_RANKS
    engine = engine or getattr(cluster, "engine", None)

    def build():
        if engine in (None, "serial") and len(cluster.profiles) < MIN_RANKS_FOR_PROCESSES:
            parts = [profile_breakdown(p, timelines).assign(rank=str(k)) for k, p in cluster.profiles.items()]
        else:
            runs = [dataclasses.replace(p.run, info={**p.run.info, "label": str(k)})
                    for k, p in cluster.profiles.items()]
            parts = map_chunks(functools.partial(breakdown_ranks, timelines=timelines), runs, engine=engine)
        frames = [df for df in parts if len(df)]
        if not frames:
            return _empty()
        out = pd.concat(frames, ignore_index=True)[COLUMNS]
        return out.astype({"rank": str, "step": "int64", "source": str})

    return cluster.cached(f"rank_breakdown:{timelines}", build) if hasattr(cluster, "cached") else build()


def breakdown_ranks(runs: list, timelines: bool = False) -> pd.DataFrame:
    """The ``rank_breakdown`` rows of a chunk of ranks (`RunFiles`, ``info["label"]`` the rank's key),
    computed where they are parsed. Ranks of one cluster_analysis folder take their rows from
    `cluster_file_breakdown` of that folder, computed once per process; the others each from their
    `Profile` (`profile_breakdown`)."""
    from ..model.profile import Profile
    parts, pending, pending_path = [], [], None

    def flush():
        if pending:
            full, pos = shared.whole(pending_path, f"rank_breakdown:{timelines}",
                                     lambda: cluster_file_breakdown(pending[0], timelines), "rank")
            take = [pos[str(r.device)] for r in pending if str(r.device) in pos]
            rows = full.iloc[np.concatenate(take) if take else []].copy()
            labels = {str(r.device): str(r.info.get("label", r.device)) for r in pending}
            rows["rank"] = rows["rank"].map(labels)
            parts.append(rows)
            pending.clear()

    for run in runs:
        path = run.get("cluster_step_trace_time") if run.generation == "cluster_analysis" else None
        if path is not None and path != pending_path:
            flush()
            pending_path = path
        if path is not None:
            pending.append(run)
            continue
        flush()
        pending_path = None
        label = str(run.info.get("label", run.device))
        parts.append(profile_breakdown(Profile(run), timelines).assign(rank=label))
    flush()
    frames = [p for p in parts if len(p)]
    return pd.concat(frames, ignore_index=True)[COLUMNS] if frames else _empty()


def cluster_file_breakdown(run, timelines: bool = False) -> pd.DataFrame:
    """The ``rank_breakdown`` rows of every rank of a cluster_analysis folder (``run``: any of its ranks),
    from its files read once: the parts from cluster_step_trace_time.csv's rank rows (`step_parts`), the
    wait/transit split of each rank and step from cluster_communication.json (as `wait_shares` takes it
    from the communication files). ``rank`` is the rank id as the file writes it."""
    from ..io import ascend_ms
    from ..model.build import step_numbers
    path = run.get("cluster_step_trace_time")
    full, _ = shared.whole(path, "cluster_step_trace", lambda: ascend_ms.cluster_step_trace(path), "index")
    steps = full[(full["type"] == "rank") & full["step"].notna()]
    if steps.empty or "total_ms" not in steps:
        return _empty()
    out = step_parts(steps)
    out.insert(0, "rank", steps["index"].astype(str).to_numpy())
    comm = ascend_ms.communication(ascend_ms.whole_cluster(run)) if run.has("cluster_communication") else None
    share = pd.Series(dtype=float)
    if comm is not None and len(comm) and {"wait_ms", "transit_ms"} <= set(comm.columns):
        c = step_numbers(comm)
        # a file without step keys describes the one step of a rank profiled without steps
        only = out.groupby("rank")["step"].agg(["first", "size"])
        c = c.assign(step=c["step"].fillna(c["rank"].map(only["first"].where(only["size"] == 1))))
        c = c[c["wait_ms"].notna() & c["transit_ms"].notna() & c["step"].notna()]
        g = c.groupby(["rank", c["step"].astype("int64")])[["wait_ms", "transit_ms"]].sum()
        total = g["wait_ms"] + g["transit_ms"]
        share = (g["wait_ms"] / total.where(total > 0)).dropna()
    key = pd.MultiIndex.from_arrays([out["rank"], out["step"]])
    out["wait_share"] = share.reindex(key).to_numpy(dtype=float) if len(share) else np.nan
    out["wait_ms"] = out["comm_exposed_ms"] * out["wait_share"]
    out["transit_ms"] = out["comm_exposed_ms"] - out["wait_ms"]
    has_share = out["rank"].isin(share.index.get_level_values(0)) if len(share) else np.zeros(len(out), bool)
    step_file = _step_source(steps)
    out["source"] = np.where(has_share, source_text(step_file, "communication files (Wait Time, Transit Time)",
                                                    timelines), source_text(step_file, "", timelines))
    return out[COLUMNS].reset_index(drop=True)


def source_text(step_file: str, share_source: str, timelines: bool) -> str:
    """A row's ``source``: the step file and where its wait/transit split came from (or why there is none)."""
    return step_file + (f"; wait/transit: {share_source}" if share_source else
                        "; wait/transit: no file of this rank gives them" if timelines else
                        f"; wait/transit: not split (over {TIMELINE_SPLIT_MAX_RANKS} ranks the "
                        "timelines are not read for it)")


def step_parts(steps: pd.DataFrame) -> pd.DataFrame:
    """``step``, ``step_ms`` and the disjoint parts of each step of a step_trace_time.csv-shaped frame (any
    number of ranks: row by row): computing alone, overlapped and exposed communication, free, host-bound."""
    get = lambda c: steps[c].astype(float).to_numpy() if c in steps else np.full(len(steps), np.nan)  # noqa: E731
    out = pd.DataFrame({"step": steps["step"].astype("int64").to_numpy(),
                        "step_ms": steps["total_ms"].astype(float).to_numpy()})
    overlapped = get("overlapped_ms")
    if np.isnan(overlapped).all() and "communication_ms" in steps:
        overlapped = get("communication_ms") - get("communication_not_overlapped_ms")
    out["computing_ms"] = get("computing_ms") - np.nan_to_num(overlapped)
    out["comm_overlapped_ms"] = overlapped
    out["comm_exposed_ms"] = get("communication_not_overlapped_ms")
    out["free_ms"] = get("free_ms")
    out["host_bound_ms"] = get("preparing_ms")
    return out


def _empty() -> pd.DataFrame:
    dtypes = {c.name: ("object" if c.dtype == "str" else c.dtype) for c in SPEC.columns}
    return pd.DataFrame({k: pd.Series(dtype=v) for k, v in dtypes.items()})


def profile_breakdown(prof, timelines: bool = True) -> pd.DataFrame:
    """One rank's rows of ``rank_breakdown`` (``rank`` left to the caller): empty without a step trace.
    ``timelines``: whether the wait/transit split may come from the rank's timeline."""
    steps = prof.step_trace
    if steps is None or steps.empty or "total_ms" not in steps or "step" not in steps:
        return _empty()
    steps = steps[steps["step"].notna()]
    step_file = _step_source(steps)
    nan = np.full(len(steps), np.nan)
    get = lambda c: steps[c].astype(float).to_numpy() if c in steps else nan  # noqa: E731
    if "computing_ms" in steps and "communication_not_overlapped_ms" in steps:
        out = step_parts(steps)
    else:
        out = pd.DataFrame({"step": steps["step"].astype("int64").to_numpy(),
                            "step_ms": steps["total_ms"].astype(float).to_numpy()})
        out["host_bound_ms"] = get("iteration_interval_ms")
        alone = _cluster_analyse_column(prof, out["step"], "communication_alone_time_ms")
        out["comm_exposed_ms"] = alone
        out["comm_overlapped_ms"] = nan
        out["free_ms"] = nan
        out["computing_ms"] = (out["step_ms"] - np.nan_to_num(alone) - out["host_bound_ms"].fillna(0.0))
        if not np.isnan(alone).all():
            step_file += " + ascend_cluster_analyse (communication_alone_time)"
    share, share_source = wait_shares(prof, out["step"], timelines)
    out["wait_share"] = out["step"].map(share).astype(float)
    out["wait_ms"] = out["comm_exposed_ms"] * out["wait_share"]
    out["transit_ms"] = out["comm_exposed_ms"] - out["wait_ms"]
    out["source"] = source_text(step_file, share_source, timelines)
    return out.assign(rank="")[COLUMNS]


def _step_source(steps: pd.DataFrame) -> str:
    path = steps.attrs.get("path")
    if not path:
        return "step trace"
    name = str(path).replace("\\", "/").rsplit("/", 1)[-1]
    return "analysis.db (StepTraceTime)" if name == "analysis.db" else name


def _cluster_analyse_column(prof, steps: pd.Series, column: str) -> np.ndarray:
    ca = prof.cluster_analyse
    if ca is None or ca.empty or column not in ca:
        return np.full(len(steps), np.nan)
    by_step = ca.drop_duplicates("step").set_index("step")[column].astype(float)
    return steps.map(by_step).astype(float).to_numpy()


def wait_shares(prof, steps: pd.Series, timelines: bool = True) -> tuple[dict, str]:
    """step -> wait / (wait + transit) of the rank's communication in that step, and the files it came from
    ("" when none gives it); see the module docstring for the order the sources are tried in."""
    steps = [int(s) for s in steps]
    comm = prof.communication
    if comm is not None and len(comm) and {"wait_ms", "transit_ms"} <= set(comm.columns):
        c = comm[comm["wait_ms"].notna() & comm["transit_ms"].notna()]
        if len(c):
            # a file without step keys ("step") describes the one step of a run profiled without steps
            step = c["step"].astype("Int64")
            if step.isna().any() and len(steps) == 1:
                step = step.fillna(steps[0])
            g = c.assign(step=step).dropna(subset=["step"]).groupby("step")[["wait_ms", "transit_ms"]].sum()
            return _ratio(g["wait_ms"], g["transit_ms"]), "communication files (Wait Time, Transit Time)"
    hccl = prof.hccl
    if hccl is not None and len(hccl):
        g = hccl.groupby("step")[["wait_cost_ms", "communication_cost_ms"]].sum()
        return _ratio(g["wait_cost_ms"], g["communication_cost_ms"]), "hccl_raw (wait_cost, communication_cost)"
    tasks = task_wait_transit(prof, steps) if timelines else ()
    if len(tasks):
        return _ratio(tasks["wait_us"], tasks["transit_us"]), "timeline communication tasks (Notify Wait vs " \
                                                              "SDMA/RDMA/Memcpy/Reduce)"
    return {}, ""


def _ratio(wait: pd.Series, transit: pd.Series) -> dict:
    total = wait + transit
    share = (wait / total.where(total > 0)).dropna()
    return {int(k): float(v) for k, v in share.items()}


def task_wait_transit(prof, steps: list[int] | None = None) -> pd.DataFrame:
    """Per step, the time covered by the communication stream's ``Notify Wait`` tasks (``wait_us``) and by
    its data-moving tasks (``transit_us``), each the union of its tasks' intervals; tasks are placed in a
    step by their start (`step_windows`; all of them in the one step of a run with a single step). The
    communication streams are the timeline tracks that carry Notify Wait tasks. Empty without such tasks."""
    cols = ["step", "wait_us", "transit_us"]
    if hasattr(prof, "has") and not prof.has(*FRAMES["timeline"].roles):
        return pd.DataFrame(columns=cols)
    tl = prof.timeline
    if tl is None or tl.empty:
        return pd.DataFrame(columns=cols)
    names = tl["name"]
    cats = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else pd.Index(names.unique())
    waits = [c for c in cats if WAIT_TASK.search(str(c))]
    if not waits:
        return pd.DataFrame(columns=cols)
    is_wait = names.isin(waits).to_numpy()
    on_stream = tl["track"].isin(np.unique(tl["track"].to_numpy()[is_wait])).to_numpy()
    moves = names.isin([c for c in cats if TRANSFER_TASK.match(str(c))]).to_numpy() & on_stream
    start = tl["start_us"].to_numpy(dtype=float)
    end = start + np.nan_to_num(tl["dur_us"].to_numpy(dtype=float))
    windows = prof.step_windows
    if windows is not None and len(windows):
        bounds = [(int(w.step), w.start_us, w.end_us) for w in windows.itertuples()]
    elif steps and len(steps) == 1:
        bounds = [(steps[0], -np.inf, np.inf)]
    else:
        return pd.DataFrame(columns=cols)
    rows = []
    for step, lo, hi in bounds:
        inside = (start >= lo) & (start < hi)
        rows.append({"step": step, "wait_us": union_length(start[is_wait & inside], end[is_wait & inside]),
                     "transit_us": union_length(start[moves & inside], end[moves & inside])})
    out = pd.DataFrame(rows, columns=cols)
    return out[(out["wait_us"] + out["transit_us"]) > 0].set_index("step")


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Total length covered by the intervals [start, end)."""
    if not len(start):
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # an interval opens a new run where it starts after everything before it has ended
    new = np.r_[True, s[1:] > reach[:-1]]
    run_start = s[new]
    run_end = np.r_[reach[np.flatnonzero(new)[1:] - 1], reach[-1]]
    return float((run_end - run_start).sum())


def rank_medians(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank, the median over its steps of ``step_ms``, every part and ``wait_share`` (each its own
    median: the medians of the parts need not add up to the median step), ``steps`` and ``source``;
    slowest rank (median step) first. ``wait_ms`` / ``transit_ms`` split the median exposed communication
    by the median wait share (the steps without a split would otherwise leave a median wait taken over
    other steps than the median exposed time)."""
    num = ["step_ms", *PARTS, *EXPOSED_SPLIT, "wait_share"]
    if frame.empty:
        return pd.DataFrame(columns=["rank", "steps", *num, "source"])
    g = frame.groupby("rank", sort=False)
    out = g[num].median()
    out["wait_ms"] = out["comm_exposed_ms"] * out["wait_share"]
    out["transit_ms"] = out["comm_exposed_ms"] - out["wait_ms"]
    out.insert(0, "steps", g.size())
    out["source"] = g["source"].first()
    return out.reset_index().sort_values("step_ms", ascending=False, kind="stable", ignore_index=True)


def breakdown_summary(frame: pd.DataFrame) -> dict | None:
    """The breakdown for the summary JSON: ``identity``, ``ranks`` (`rank_medians` rows), ``cluster`` (the
    median over ranks of each rank's median), ``largest`` (the part that takes most of the slowest rank's
    step: ``part``, ``ms``, ``share`` 0-1) and ``finding`` (a sentence naming it); None without rows."""
    if frame.empty:
        return None
    med = rank_medians(frame)
    num = ["step_ms", *PARTS, *EXPOSED_SPLIT, "wait_share"]
    cluster = {c: _num(med[c].median()) for c in num}
    ranks = [{k: _num(v) if k in num else int(v) if k == "steps" else str(v) for k, v in r.items()}
             for r in med.to_dict("records")]
    return {"identity": IDENTITY, "ranks": ranks,
            "cluster": cluster, **_largest(med)}


def _largest(med: pd.DataFrame) -> dict:
    slow = med.iloc[0]
    step = float(slow["step_ms"])
    parts = {p: float(slow[p]) for p in PARTS if pd.notna(slow[p])}
    if not parts or not step:
        return {"largest": None, "finding": None}
    part = max(parts, key=parts.get)
    share = parts[part] / step
    text = (f"On the slowest rank ({slow['rank']}, median step {step:,.3f} ms) "
            f"{PART_LABELS[part].lower()} takes {parts[part]:,.3f} ms ({share * 100:.0f} %)")
    if part == "comm_exposed_ms" and pd.notna(slow["wait_ms"]):
        text += (f", of which {float(slow['wait_ms']):,.3f} ms waiting for the other ranks and "
                 f"{float(slow['transit_ms']):,.3f} ms moving data")
    if part == "computing_ms" and pd.isna(slow["comm_overlapped_ms"]):
        text += " (the files do not separate overlapped communication or idle time from it)"
    return {"largest": {"rank": str(slow["rank"]), "part": part, "ms": parts[part], "share": share},
            "finding": text + "."}


def _num(v):
    return None if v is None or pd.isna(v) else float(v)


__all__ = ["rank_breakdown", "breakdown_ranks", "cluster_file_breakdown", "step_parts", "source_text",
           "profile_breakdown", "wait_shares", "task_wait_transit", "union_length",
           "rank_medians", "breakdown_summary", "PARTS", "EXPOSED_SPLIT", "IDENTITY", "PART_LABELS"]
