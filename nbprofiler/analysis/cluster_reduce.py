"""The cluster reduce: each rank's `Profile` reduced, in its worker, to the few small frames the cluster
views need (step averages, per-step totals, op-type totals), then combined. `nbprofiler.model.parallel` runs it
on the engine chosen (serial, processes, dask)."""
from __future__ import annotations

import enum
import functools
import warnings
from typing import Iterable

import numpy as np
import pandas as pd

from ..io.discover import RunFiles
from ..model.parallel import map_chunks
from .steps import profile_step_average

# step_trace_time columns beside the stages that the cluster step table shows too
EXTRA_STEP_COLUMNS = ("stage_ms", "bubble_ms", "overlapped_ms", "communication_ms")


class FailureHandling(enum.Enum):
    """What the reduce does with a rank whose Profile raises while it is reduced: ``SKIP`` (the default)
    leaves the rank out of the frames and reports it in ``problems`` (one unreadable rank of a thousand does
    not take the cluster page down); ``RAISE`` lets the error out of the reduce."""

    SKIP = "skip"
    RAISE = "raise"


def _failed_rank(run: RunFiles, error: Exception) -> dict:
    rank = str(run.info.get("label", run.device))
    return {"rank": rank, "stages": [], "steps": pd.DataFrame(columns=["rank", "steps", "total_ms"]),
            "step_totals": pd.DataFrame(columns=["rank", "step", "total_ms"]),
            "op_types": pd.DataFrame(columns=["rank", "kind", "op_type", "total_time_us", "count"]),
            "problems": [{"file": str(run.root), "error": f"rank {rank} left out of the cluster: "
                                                         f"{type(error).__name__}: {error}"}]}


def reduce_rank(run: RunFiles, failure: FailureHandling = FailureHandling.SKIP) -> dict:
    """`_reduce_rank`, with ``failure`` deciding what a rank that raises becomes (see `FailureHandling`)."""
    try:
        return _reduce_rank(run)
    except Exception as e:  # noqa: BLE001 - any error of one rank: the policy decides
        if failure is FailureHandling.RAISE:
            raise
        return _failed_rank(run, e)


def _reduce_rank(run: RunFiles) -> dict:
    """The reduced results of one rank, computed where the rank is parsed (a worker).

    Keys: ``rank`` (str), ``stages`` (the step-stage columns, display order), ``steps`` (one-row
    DataFrame: ``rank``, ``steps``, ``<stage>`` averages in ms, ``total_ms``, ``average_source`` "file"
    when the file's own average row is used, as MindInsight does, else "mean" over all steps; plus
    ``stage_ms``/``bubble_ms``/``overlapped_ms``/``communication_ms`` where the source has them),
    ``step_totals`` (``rank``, ``step``, ``total_ms`` and the stage columns, ms: one row per step),
    ``op_types`` (``rank``, ``kind``, ``op_type``, ``total_time_us``, ``count``), ``problems`` (list of
    dicts). Only the step-trace and op-type frames are built; nothing large is returned.
    """
    from ..model.profile import Profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # problems are returned as data below
        prof = Profile(run)
        rank = str(run.info.get("label", prof.rank))
        steps = prof.step_trace
        stages = prof.step_stages
        # MindInsight's cluster step trace shows each rank's average row as written where it is a real
        # step; without one, the mean (the comparable average of nbprofiler.analysis.steps).
        average = profile_step_average(prof, extras=EXTRA_STEP_COLUMNS)
        row: dict = {"rank": rank, "steps": int(len(steps)), **average.comparable,
                     "average_source": average.source}
        step_totals = steps[["step"] + [c for c in stages + ["total_ms"] if c in steps.columns]].copy() \
            if len(steps) and "step" in steps.columns else pd.DataFrame(columns=["step", "total_ms"])
        step_totals.insert(0, "rank", rank)
        ops = prof.op_types
        op_cols = ["kind", "op_type", "total_time_us", "count"]
        ops = ops[op_cols].copy() if len(ops) and all(c in ops.columns for c in op_cols) else \
            pd.DataFrame(columns=op_cols)
        ops.insert(0, "rank", rank)
        return {"rank": rank, "stages": stages, "steps": pd.DataFrame([row]), "step_totals": step_totals,
                "op_types": ops, "problems": [p.as_dict() for p in prof.problems]}


def combine(parts: list[dict]) -> dict:
    """Reduced results of several ranks (or chunks) as one: ``steps``, ``step_totals`` and ``op_types``
    concatenated in order, ``stages`` of the first part that has any, ``problems`` joined."""
    def cat(key):
        frames = [p[key] for p in parts if len(p[key])]
        if frames:
            return pd.concat(frames, ignore_index=True)
        return parts[0][key].iloc[:0] if parts else pd.DataFrame()

    return {"steps": cat("steps"), "step_totals": cat("step_totals"), "op_types": cat("op_types"),
            "stages": next((p["stages"] for p in parts if p["stages"]), []),
            "problems": [pr for p in parts for pr in p["problems"]]}


def reduce_ranks(runs: list[RunFiles], failure: FailureHandling = FailureHandling.SKIP) -> dict:
    """`reduce_rank` over a chunk of ranks, combined where they were parsed: one reply per chunk. Ranks of
    one cluster_analysis folder are reduced together (`reduce_cluster_file`)."""
    parts, group = [], []

    def flush():
        if group:
            parts.append(reduce_cluster_file(list(group), failure))
            group.clear()

    for run in runs:
        if run.generation == "cluster_analysis" and run.device != "*" and run.has("cluster_step_trace_time"):
            if group and group[0].get("cluster_step_trace_time") != run.get("cluster_step_trace_time"):
                flush()
            group.append(run)
            continue
        flush()
        parts.append(reduce_rank(run, failure))
    flush()
    return combine(parts)


def reduce_cluster_file(runs: list[RunFiles], failure: FailureHandling = FailureHandling.SKIP) -> dict:
    """`reduce_rank`'s results for ranks of one cluster_analysis folder, from its cluster_step_trace_time.csv
    read once per process: the first rank is reduced as any rank is (it gives the stages, the columns and the
    file's problems), the others' step means and per-step rows are taken from the file's frame at once (a
    cluster file has no average row and no op types, so the mean over the steps is each rank's average)."""
    from ..io import ascend_ms, shared
    first = reduce_rank(runs[0], failure)
    if len(runs) == 1 or first["problems"] or not len(first["steps"]) or \
            first["steps"]["average_source"].iloc[0] != "mean":
        return combine([first] + [reduce_rank(r, failure) for r in runs[1:]])
    path = runs[0].get("cluster_step_trace_time")
    full, pos = shared.whole(path, "cluster_step_trace", lambda: ascend_ms.cluster_step_trace(path), "index")
    rest = [r for r in runs[1:] if str(r.device) in pos]
    missing = [r for r in runs[1:] if str(r.device) not in pos]  # not in the file: reduced (and reported) alone
    if not rest:
        return combine([first] + [reduce_rank(r, failure) for r in missing])
    rows = full.iloc[np.concatenate([pos[str(r.device)] for r in rest])]
    rows = rows[rows["type"] == "rank"]
    labels = {str(r.device): str(r.info.get("label", r.device)) for r in rest}
    rank = rows["index"].map(labels)
    means = [c for c in first["steps"].columns if c not in ("rank", "steps", "average_source")]
    g = rows.assign(rank=rank).groupby("rank", sort=False)
    steps = g[means].mean().reset_index()
    steps.insert(1, "steps", g.size().to_numpy().astype(int))
    steps["average_source"] = "mean"
    totals_cols = list(first["step_totals"].columns)
    step_totals = rows.assign(rank=rank)[totals_cols].reset_index(drop=True)
    part = {"stages": first["stages"], "steps": steps[list(first["steps"].columns)],
            "step_totals": step_totals, "op_types": first["op_types"].iloc[:0], "problems": []}
    return combine([first, part] + [reduce_rank(r, failure) for r in missing])


# The frames the cluster's communication analyses read, and the column each is keyed by rank on (the links
# of a communication matrix belong to their source rank).
COMMUNICATION_FRAMES = {"communication": "rank", "communication_links": "rank", "communication_matrix": "src",
                        "hccl": None, "hccl_links": None, "communication_groups": None}


def _cluster_step_rows(run: RunFiles) -> pd.DataFrame:
    """cluster_step_trace_time.csv's rank rows as the ``step_trace`` frame of each rank, ``index`` the rank."""
    from ..io import ascend_ms
    full = ascend_ms.cluster_step_trace(run.get("cluster_step_trace_time"))
    return full[full["type"] == "rank"].drop(columns=["type", "ranks"]).reset_index(drop=True)


def rank_frames(runs: list[RunFiles], names: Iterable[str], skip_errors: bool = True,
                cluster_groups_apart: bool = False) -> dict[str, pd.DataFrame]:
    """For a chunk of ranks, frame name -> the ranks' frames stacked, with ``label`` (the rank's key, from
    ``info["label"]``) first; ``hccl_links_average`` stacks each rank's ``hccl_links.attrs["average"]``.
    Ranks of one cluster_analysis folder share its cluster-wide files: their rows are taken together from
    each file's frame, read once per process (`nbprofiler.io.shared`) and finished as a Profile finishes
    it; other ranks build their `Profile`. ``skip_errors``: a rank whose frame raises adds nothing (else the
    error goes out). ``cluster_groups_apart``: leave out the ``communication_groups`` of cluster_analysis
    ranks (the same whole-cluster frame for each: the caller reads it once, `cluster_groups`)."""
    from ..io import ascend_ms, families, shared
    from ..model.build import AFTER
    from ..model.profile import Profile
    from ..schema import FRAMES
    names = list(names)
    pieces: dict[str, list[pd.DataFrame]] = {n: [] for n in [*names, "hccl_links_average"]}
    readers = {"communication": ("cluster_communication", lambda r: ascend_ms.communication(ascend_ms.whole_cluster(r))),
               "communication_links": ("cluster_communication",
                                       lambda r: ascend_ms.communication_links(ascend_ms.whole_cluster(r))),
               "communication_matrix": ("cluster_communication_matrix",
                                        lambda r: families.read_matrix(r.get("cluster_communication_matrix"))),
               "step_trace": ("cluster_step_trace_time", _cluster_step_rows)}
    by = {**COMMUNICATION_FRAMES, "step_trace": "index"}
    own_file = {"step_trace": "step_trace_time"}  # a rank file that would win over the cluster file
    shared_runs = [r for r in runs if r.generation == "cluster_analysis" and r.device != "*"]
    by_file: dict[tuple, list[RunFiles]] = {}
    for run in shared_runs:
        by_file.setdefault(tuple(str(run.get(role)) for role, _ in readers.values()), []).append(run)
    handled: dict[int, set] = {}  # id of a run -> the names its cluster files gave
    for group in by_file.values():
        first = group[0]
        done = set()
        if cluster_groups_apart and "communication_groups" in names:
            done.add("communication_groups")
        for name in names:
            role, read = readers.get(name, (None, None))
            if role is None or not first.has(role) or first.has(own_file.get(name, "communication")) and \
                    name != "communication_matrix":
                continue
            full, pos = shared.whole(first.get(role), name, lambda: read(first), by[name])
            done.add(name)
            take = [(pos[str(r.device)], str(r.info.get("label", r.device))) for r in group if str(r.device) in pos]
            if not take:
                continue
            rows = full.iloc[np.concatenate([t for t, _ in take])].reset_index(drop=True)
            labels = np.repeat([label for _, label in take], [len(t) for t, _ in take])
            rows = FRAMES[name].conform(AFTER.get(name, lambda df: df)(rows.drop(columns="index", errors="ignore")))
            rows.insert(0, "label", labels)
            pieces[name].append(rows)
        handled.update({id(r): done for r in group})
    for run in runs:
        left = [n for n in names if n not in handled.get(id(run), ())]
        if id(run) in handled:  # a cluster_analysis rank: only frames its folder has a file for
            left = [n for n in left if n not in FRAMES or not FRAMES[n].roles or run.has(*FRAMES[n].roles)]
        if not left:
            continue
        label = str(run.info.get("label", run.device))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the frames' problems are the rank's own page's to report
            prof = Profile(run)
            for name in left:
                try:
                    df = getattr(prof, name)
                except Exception:  # noqa: BLE001 - an unreadable rank adds nothing
                    if not skip_errors:
                        raise
                    continue
                if df is None or not len(df):
                    continue
                pieces[name].append(df.assign(label=label))
                if name == "hccl_links" and df.attrs.get("average"):
                    pieces["hccl_links_average"].append(pd.DataFrame(df.attrs["average"]).assign(label=label))
    return {n: pd.concat(p, ignore_index=True) if p else pd.DataFrame(columns=["label"]) for n, p in pieces.items()}


def cluster_groups(runs: list[RunFiles]) -> pd.DataFrame:
    """The communication groups of the cluster_analysis folders of ``runs`` (communication_group.json, read
    once per folder where this is called: one small file for the whole cluster, not one copy per rank)."""
    from ..io import families
    seen, frames = set(), []
    for run in runs:
        if run.generation != "cluster_analysis" or not run.has("communication_group"):
            continue
        path = run.get("communication_group")
        if path in seen:
            continue
        seen.add(path)
        try:
            groups = families.communication_groups(run)
        except Exception:  # noqa: BLE001 - an unreadable group file names no group
            continue
        if groups is not None and len(groups):
            frames.append(groups.assign(label=str(run.info.get("label", run.device))))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["label"])


def stack_frame(name: str, runs: list[RunFiles]) -> pd.DataFrame:
    """Frame ``name`` of a chunk of ranks stacked, ``rank`` (each rank's key, ``info["label"]``) first, built
    where the ranks are parsed (`rank_frames`): `nbprofiler.model.profile.Cluster.concat` of many ranks."""
    df = rank_frames(runs, [name], skip_errors=False)[name]
    if not len(df):
        return df.iloc[:0]
    df = df.drop(columns="rank", errors="ignore").rename(columns={"label": "rank"})
    return df[["rank", *[c for c in df.columns if c != "rank"]]]


# A link's key in the communication parts, and the per-rank communication times they sum.
LINK_KEYS = ["src", "dst", "transport", "recorded_by"]
BY_RANK_TIMES = ["elapse_ms", "transit_ms", "wait_ms", "sync_ms", "idle_ms"]


def communication_parts(frames: dict) -> dict:
    """Some ranks' communication frames (``frames``: name -> the ranks' frames stacked with ``label``, the
    rank's key, as `cluster_reduce.rank_frames` gives them) reduced to what `communication_matrix`,
    `communication_by_rank`, `link_bandwidth` and `slow_links` need; ranks reduced apart combine by
    concatenation. Keys: ``links`` (per link and recording rank: ``time_ms``, ``size``, ``steps``; from
    legacy ``hccl_raw`` link data where a rank has it, else the communication matrix; ``links_legacy``
    says whether any came from hccl_raw), ``by_rank`` and ``by_rank_source`` (see
    `communication_by_rank`), ``bandwidth`` (`link_bandwidth` rows), ``average_links`` (each rank's
    ``hccl_raw`` average links with ``recorded_by``)."""
    empty = pd.DataFrame(columns=["label"])
    hccl_links = frames.get("hccl_links", empty)
    hccl_links = hccl_links[hccl_links["src"].notna()] if "src" in hccl_links.columns else empty
    matrix = frames.get("communication_matrix", empty)
    link_frames = []
    if len(hccl_links):
        link_frames.append(hccl_links.rename(columns={"label": "recorded_by"}))
    if len(matrix) and "src" in matrix.columns:
        matrix = matrix[~matrix["label"].isin(set(hccl_links["label"]) if len(hccl_links) else set())]
        link_frames.append(pd.DataFrame({"step": matrix["step"].astype(str).str.extract(r"(\d+)$")[0],
                                         "src": matrix["src"], "dst": matrix["dst"], "transport": matrix["transport"],
                                         "time_ms": matrix["transit_ms"], "size": matrix["size_mb"],
                                         "recorded_by": matrix["label"]}))
    link_frames = [f for f in link_frames if len(f)]
    if link_frames:
        links = pd.concat(link_frames, ignore_index=True)
        links = links[pd.to_numeric(links["step"], errors="coerce").notna()]
        links = links.groupby(LINK_KEYS, as_index=False).agg(time_ms=("time_ms", "sum"), size=("size", "sum"),
                                                             steps=("step", "nunique"))
    else:
        links = pd.DataFrame(columns=[*LINK_KEYS, "time_ms", "size", "steps"])
    by_rank, source = pd.DataFrame(columns=["rank", "ops", *BY_RANK_TIMES]), ""
    comm = frames.get("communication", empty)
    hccl = frames.get("hccl", empty)
    if len(comm):
        by_rank = comm.assign(rank=comm["label"]).groupby("rank", as_index=False, sort=False).agg(
            ops=("op_name", "nunique"), **{c: (c, "sum") for c in BY_RANK_TIMES})
        source = "communication.json / cluster_communication.json"
    elif len(hccl):
        g = hccl.assign(rank=hccl["label"]).groupby("rank", as_index=False, sort=False).agg(
            transit_ms=("communication_cost_ms", "sum"), wait_ms=("wait_cost_ms", "sum"))
        g = g.assign(ops=np.nan, elapse_ms=g["transit_ms"] + g["wait_ms"], sync_ms=np.nan, idle_ms=0.0)
        by_rank, source = g[["rank", "ops", *BY_RANK_TIMES]], "hccl_raw_*.csv"
    bw = frames.get("communication_links", empty)
    if len(bw):
        bw = bw.assign(rank=bw["label"]).groupby(["rank", "transport"], as_index=False).agg(
            size_mb=("size_mb", "sum"), transit_ms=("transit_ms", "sum"), ops=("op_name", "nunique"))
        bw = bw[bw["transit_ms"] > 0].copy()
        bw["bandwidth_gbps"] = bw["size_mb"] / bw["transit_ms"]
        bw = bw[["rank", "transport", "size_mb", "transit_ms", "bandwidth_gbps", "ops"]].reset_index(drop=True)
    else:
        bw = pd.DataFrame(columns=["rank", "transport", "size_mb", "transit_ms", "bandwidth_gbps", "ops"])
    avg = frames.get("hccl_links_average", empty)
    groups = frames.get("communication_groups", empty)
    groups = groups.drop_duplicates(["kind", "group"]).drop(columns="label") if len(groups) else pd.DataFrame()
    return {"groups": groups, "links": links, "links_legacy": bool(len(hccl_links)), "by_rank": by_rank, "by_rank_source": source,
            "bandwidth": bw, "average_links": avg.rename(columns={"label": "recorded_by"}) if len(avg) else
            pd.DataFrame()}


def reduce_communication(runs: list[RunFiles]) -> dict:
    """A chunk of ranks reduced, where they are parsed, to what the cluster's communication analyses need
    (`communication_parts`): per rank totals, per link sums, the legacy
    average links, the pipeline averages and FLOPs."""
    from ..model.profile import Profile
    frames = rank_frames(runs, COMMUNICATION_FRAMES, cluster_groups_apart=True)
    parts = communication_parts(frames)
    pipeline, flops = [], {}
    for run in runs:
        if run.generation == "cluster_analysis":
            continue  # no ascend_cluster_analyse or flops_summary file in a cluster_analysis folder
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prof = Profile(run)
            label = str(run.info.get("label", run.device))
            ca = prof.cluster_analyse
            avg = ca.attrs.get("average") if ca is not None else None
            if avg and "receive_alone_time_ms" in avg:
                pipeline.append((int(prof.run.device), avg))
            fs = prof.flops_summary
            if fs:
                v = fs.get("cube_FLOPs", fs.get("FLOPs"))
                if v is not None:
                    flops[label] = float(v)
            stage_num = ca.attrs.get("stage_num") if ca is not None and len(ca) else None
            if stage_num:
                parts.setdefault("stage_num", stage_num)
    parts["pipeline_rows"] = pipeline
    parts["flops"] = flops
    return parts


def gather_rank_summaries(runs: Iterable[RunFiles], engine: str | None = None, max_workers: int | None = None,
                          failure: FailureHandling = FailureHandling.SKIP) -> dict:
    """`reduce_rank` over every run, combined (see `combine`): ``steps`` (one row per rank),
    ``step_totals``, ``op_types`` (long, with ``rank``), ``stages``, ``problems``. Ranks are reduced in
    chunks on the chosen engine (`choose_engine`); a rank that raises is handled as ``failure`` says."""
    return combine(map_chunks(functools.partial(reduce_ranks, failure=failure), list(runs), engine=engine,
                              max_workers=max_workers))
