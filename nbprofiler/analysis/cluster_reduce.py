"""The cluster reduce: each rank's `Profile` reduced, in its worker, to the few small frames the cluster
views need (step averages, per-step totals, op-type totals), then combined. `nbprofiler.model.parallel` runs it
on the engine chosen (serial, processes, dask)."""
from __future__ import annotations

import enum
import functools
import warnings
from typing import Iterable

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
    """`reduce_rank` over a chunk of ranks, combined where they were parsed: one reply per chunk."""
    return combine([reduce_rank(r, failure) for r in runs])


# The frames the cluster's communication analyses read, and the column each is keyed by rank on (the links
# of a communication matrix belong to their source rank).
COMMUNICATION_FRAMES = {"communication": "rank", "communication_links": "rank", "communication_matrix": "src",
                        "hccl": None, "hccl_links": None}


def rank_frames(runs: list[RunFiles], names: Iterable[str]) -> dict[str, list[tuple[str, pd.DataFrame]]]:
    """For a chunk of ranks, frame name -> [(rank label, that rank's frame)], the ranks' labels from
    ``info["label"]``. Ranks of one cluster_analysis folder share its cluster-wide files: their rows are
    taken together from each file's frame, read once per process (`nbprofiler.io.shared`) and finished
    as the Profile finishes it; other ranks build their `Profile`."""
    from ..io import ascend_ms, families, shared
    from ..model.build import AFTER
    from ..model.profile import Profile
    names = list(names)
    out: dict[str, list] = {n: [] for n in names}
    readers = {"communication": ("cluster_communication", lambda r: ascend_ms.communication(ascend_ms._all_ranks(r))),
               "communication_links": ("cluster_communication",
                                       lambda r: ascend_ms.communication_links(ascend_ms._all_ranks(r))),
               "communication_matrix": ("cluster_communication_matrix",
                                        lambda r: families.read_matrix(r.get("cluster_communication_matrix")))}
    for run in runs:
        label = str(run.info.get("label", run.device))
        if run.generation == "cluster_analysis" and run.device != "*":
            for name in names:
                role, read = readers.get(name, (None, None))
                if role is None or not run.has(role) or (name != "communication_matrix" and run.has("communication")):
                    continue
                path = run.get(role)
                rows = shared.rows_of(path, name, lambda: read(run), COMMUNICATION_FRAMES[name], str(run.device))
                if len(rows):
                    out[name].append((label, AFTER.get(name, lambda df: df)(rows)))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the frames' problems are the rank's own page's to report
            prof = Profile(run)
            for name in names:
                try:
                    df = getattr(prof, name)
                except Exception:  # noqa: BLE001 - an unreadable rank adds no communication
                    continue
                if df is not None and len(df):
                    out[name].append((label, df))
    return out


def reduce_communication(runs: list[RunFiles]) -> dict:
    """A chunk of ranks reduced, where they are parsed, to what the cluster's communication analyses need
    (`nbprofiler.analysis.cluster.communication_parts`): per rank totals, per link sums, the legacy
    average links, the pipeline averages and FLOPs."""
    from . import cluster as C
    frames = rank_frames(runs, COMMUNICATION_FRAMES)
    parts = C.communication_parts(frames)
    pipeline, flops = [], {}
    from ..model.profile import Profile
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
