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


def gather_rank_summaries(runs: Iterable[RunFiles], engine: str | None = None, max_workers: int | None = None,
                          failure: FailureHandling = FailureHandling.SKIP) -> dict:
    """`reduce_rank` over every run, combined (see `combine`): ``steps`` (one row per rank),
    ``step_totals``, ``op_types`` (long, with ``rank``), ``stages``, ``problems``. Ranks are reduced in
    chunks on the chosen engine (`choose_engine`); a rank that raises is handled as ``failure`` says."""
    return combine(map_chunks(functools.partial(reduce_ranks, failure=failure), list(runs), engine=engine,
                              max_workers=max_workers))
