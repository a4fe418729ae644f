"""Gather per-rank results of a `Cluster` in parallel: serial, local processes, or dask.

Workers receive a rank's `RunFiles` (file paths only, cheap to pickle), build a `Profile` in their
own process, and return only the *reduced* per-rank frames (step averages, op-type totals, a few
scalars): the raw events of 512 ranks never travel back to, or accumulate in, the notebook kernel.

Engines:
- ``"serial"``: one rank after another in this process (the baseline of `benchmarks/bench_cluster.py`);
- ``"processes"`` (default for more than a handful of ranks): `concurrent.futures.ProcessPoolExecutor`;
- ``"dask"``: the ``distributed.Client`` already in scope (``distributed.get_client()``) if there is
  one, so a cluster spanning machines does the work; else dask's local multiprocessing scheduler.
  dask is an optional extra: ``pip install nbprofiler[dask]``.
"""
from __future__ import annotations

import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable

import pandas as pd

from .io.discover import RunFiles

ENGINES = ("serial", "processes", "dask")
# Below this many ranks a process pool costs more to start than it saves.
MIN_RANKS_FOR_PROCESSES = 8


def reduce_rank(run: RunFiles) -> dict:
    """The reduced results of one rank, computed where the rank is parsed (a worker).

    Keys: ``rank`` (str), ``steps`` (one-row DataFrame: ``rank``, ``steps``, ``<stage>`` means in ms
    over all steps, ``total_ms``, ``average_source``), ``step_totals`` (``rank``, ``step``,
    ``total_ms`` and the stage columns: one row per step, a few numbers each), ``op_types``
    (the rank's op-type totals: ``rank``, ``kind``, ``op_type``, ``total_time_us``, ``count``),
    ``problems`` (list of dicts). Builds a `Profile` locally; nothing large is returned.
    """
    from .profile import Profile
    from .io import frames as F

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # problems are returned as data below
        prof = Profile(run)
        rank = str(prof.rank)
        steps = prof.step_trace
        stages = F.step_stages(steps)
        avg = prof.step_trace_average
        row: dict = {"rank": rank, "steps": int(len(steps))}
        extras = [c for c in ("stage_ms", "bubble_ms", "overlapped_ms", "communication_ms") if c in steps.columns]
        # MindInsight's cluster step trace shows each rank's average row as written; without one, the mean.
        use_file = bool(avg) and all(c in avg for c in stages) and float(avg.get("total_ms") or 0) > 0
        for c in stages + ["total_ms"] + extras:
            if use_file and c in avg:
                row[c] = float(avg[c])
            elif c in steps.columns and len(steps):
                row[c] = float(pd.to_numeric(steps[c], errors="coerce").mean())
        row["average_source"] = "file" if use_file else "mean"
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


def map_ranks(fn: Callable[[RunFiles], object], runs: Iterable[RunFiles], engine: str | None = None,
              max_workers: int | None = None) -> list:
    """``[fn(run) for run in runs]`` on the chosen engine, in the order of ``runs``. ``fn`` must be a
    module-level function (it is pickled to the workers)."""
    runs = list(runs)
    engine = engine or ("processes" if len(runs) >= MIN_RANKS_FOR_PROCESSES else "serial")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    if engine == "serial" or len(runs) <= 1:
        return [fn(r) for r in runs]
    if engine == "processes":
        workers = max_workers or min(len(runs), os.cpu_count() or 1)
        # chunks amortise the pickling round-trip when ranks are many and small
        chunk = max(1, len(runs) // (workers * 4))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(fn, runs, chunksize=chunk))
    return _map_dask(fn, runs)


def _map_dask(fn, runs: list[RunFiles]) -> list:
    try:
        import dask
    except ImportError:
        raise ImportError("engine='dask' needs dask: pip install 'nbprofiler[dask]'") from None
    try:
        from distributed import get_client
        client = get_client()
    except (ImportError, ValueError):
        client = None  # no distributed.Client in scope
    if client is not None:
        return client.gather(client.map(fn, runs, pure=False))
    tasks = [dask.delayed(fn)(r) for r in runs]
    return list(dask.compute(*tasks, scheduler="processes"))


def gather_rank_summaries(runs: Iterable[RunFiles], engine: str | None = None,
                          max_workers: int | None = None) -> dict:
    """`reduce_rank` over every run, concatenated: ``steps`` (one row per rank), ``step_totals``,
    ``op_types`` (long, with ``rank``), ``stages`` (the stage columns, in display order, of the first
    rank that has any), ``problems``."""
    parts = map_ranks(reduce_rank, runs, engine=engine, max_workers=max_workers)
    stages = next((p["stages"] for p in parts if p["stages"]), [])

    def cat(key):
        frames = [p[key] for p in parts if len(p[key])]
        return pd.concat(frames, ignore_index=True) if frames else parts[0][key].iloc[:0] if parts else pd.DataFrame()

    return {"steps": cat("steps"), "step_totals": cat("step_totals"), "op_types": cat("op_types"),
            "stages": stages, "problems": [pr for p in parts for pr in p["problems"]]}


__all__ = ["reduce_rank", "map_ranks", "gather_rank_summaries", "ENGINES"]
