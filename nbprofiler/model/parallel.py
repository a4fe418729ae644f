"""Run a function over the ranks of a `Cluster`: serially, on local processes, or on dask.

Workers receive a rank's `RunFiles` (file paths only, cheap to pickle) and build a `Profile` in their own
process; ranks travel in chunks, so one reply carries the results of many ranks. What is computed per
rank is the caller's: `nbprofiler.analysis.cluster_reduce` reduces each rank to a few small frames, so the
raw events of 512 ranks never travel back to, or accumulate in, the notebook kernel.

Engines (``engine=`` of `nbprofiler.load` and `nbprofiler.analysis.cluster.rank_summary`):
- ``None`` (default): serial below `MIN_RANKS_FOR_PROCESSES` ranks or on one usable CPU; otherwise the
  first chunk of ranks is reduced here and timed, and the processes engine takes the rest only when they
  would take longer than `POOL_WORTH_S` serially (benchmarks/README.md's Clusters table has the measurements).
- ``"serial"``: one rank after another in this process (the baseline of `benchmarks/bench_cluster.py`);
- ``"processes"``: this process and a `concurrent.futures.ProcessPoolExecutor` of one worker per other
  usable CPU, started from a fork server that has imported nbprofiler once (forking the kernel itself is
  unsafe: it has threads); this process starts on the chunks at once and takes over every chunk the
  pool has not started, so starting the pool never makes the load wait;
- ``"dask"``: the ``distributed.Client`` in scope (``distributed.get_client()``), so a cluster
  spanning machines does the work; without one, dask's local multiprocessing scheduler.
  dask is an optional extra: ``pip install 'nbprofiler[dask]'``.
"""
from __future__ import annotations

import functools
import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, Sequence


from ..io.discover import RunFiles

ENGINES = ("serial", "processes", "dask")
# Below this many ranks the default engine is serial: a rank's reduce costs ~10-80 ms, starting a pool
# of workers ~0.3-1 s (benchmarks/bench_cluster.py measures both).
MIN_RANKS_FOR_PROCESSES = 16
# The default engine starts a pool only when the ranks left after a first, measured chunk would take
# longer than this serially: starting and stopping the pool costs ~0.25 s on 2 cores, and the pool saves
# at most (workers - 1) / workers of the rest (benchmarks/bench_cluster.py; its results: benchmarks/README.md).
POOL_WORTH_S = 1.0
# Chunks per worker: more than one so a slow chunk does not leave the other workers idle at the end,
# few enough that the per-task overhead (pickling, one reply per chunk) stays small.
CHUNKS_PER_WORKER = 4
# Imported once by the fork server, so forked workers start with every module a reduce touches.
FORKSERVER_PRELOAD = ["nbprofiler.model.parallel", "nbprofiler.model.profile", "nbprofiler.model.build", "nbprofiler.io.legacy",
                      "nbprofiler.io.ascend_ms", "nbprofiler.io.cann", "nbprofiler.io.ops",
                      "nbprofiler.analysis.cluster_reduce"]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a container's or ``taskset``'s limit), which can
    be fewer than ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def choose_engine(n_ranks: int, engine: str | None = None) -> str:
    """The engine to use for ``n_ranks`` ranks: ``engine`` if given (validated), else ``"processes"``
    when there are at least `MIN_RANKS_FOR_PROCESSES` ranks and more than one usable CPU, else
    ``"serial"``."""
    if engine is None:
        return "processes" if n_ranks >= MIN_RANKS_FOR_PROCESSES and usable_cpus() > 1 else "serial"
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES} or None, not {engine!r}")
    return engine


def chunked(items: Sequence, workers: int) -> list[list]:
    """``items`` split, in order, into about ``workers`` x `CHUNKS_PER_WORKER` contiguous chunks."""
    if not items:
        return []
    size = max(1, math.ceil(len(items) / (max(1, workers) * CHUNKS_PER_WORKER)))
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def _apply_each(fn: Callable, chunk: list) -> list:
    return [fn(item) for item in chunk]


def map_chunks(fn: Callable[[list], object], items: Sequence, engine: str | None = None,
               max_workers: int | None = None) -> list:
    """``[fn(chunk) for chunk in chunked(items)]`` on the chosen engine (see `choose_engine`), in order.
    ``fn`` must be a module-level function: it is pickled to the workers."""
    items = list(items)
    auto = engine is None
    engine = choose_engine(len(items), engine)
    workers = max(1, min(max_workers or usable_cpus(), len(items)))
    if engine == "serial" or len(items) <= 1:
        return [fn(items)] if items else []
    chunks = chunked(items, workers)
    if engine == "processes" and auto:
        # Measure a chunk here first: a pool pays only when the rest would take long serially.
        start = time.perf_counter()
        first = fn(chunks[0])
        rest_s = (time.perf_counter() - start) * (len(chunks) - 1)
        if rest_s < POOL_WORTH_S:
            return [first] + [fn(chunk) for chunk in chunks[1:]]
        return [first] + _map_alongside_pool(fn, chunks[1:], workers)
    if engine == "processes":
        return _map_alongside_pool(fn, chunks, workers)
    return _map_dask(fn, chunks, workers)


def _map_alongside_pool(fn: Callable, chunks: list[list], workers: int) -> list:
    """``[fn(c) for c in chunks]`` with this process as one of the ``workers``: the pool takes chunks from
    the first, this process from the last, and a chunk the pool has not started is cancelled and done here.
    So nothing waits for workers that are still starting (on a busy or 2-core machine a pool alone lost to
    serial: 1.05x its time at 256 ranks), and the pool adds what it can once it is up."""
    pending = object()
    results = [pending] * len(chunks)
    with ProcessPoolExecutor(max_workers=max(1, min(workers - 1, len(chunks))),
                             mp_context=_process_context()) as pool:
        futures = [pool.submit(fn, chunk) for chunk in chunks]
        for i in reversed(range(len(chunks))):
            if futures[i].cancel():  # not started by the pool: do it here
                results[i] = fn(chunks[i])
        for i, future in enumerate(futures):
            if results[i] is pending:
                results[i] = future.result()
    return results


def map_ranks(fn: Callable[[RunFiles], object], runs: Iterable[RunFiles], engine: str | None = None,
              max_workers: int | None = None) -> list:
    """``[fn(run) for run in runs]`` on the chosen engine, in the order of ``runs``; runs travel to the
    workers in chunks. ``fn`` must be a module-level function (it is pickled to the workers)."""
    return [out for part in map_chunks(functools.partial(_apply_each, fn), list(runs), engine, max_workers)
            for out in part]


def _process_context():
    # "fork" from a Jupyter kernel copies its threads' locks (and warns from Python 3.12 on); "spawn"
    # re-imports pandas in every worker (~1 s each). A fork server imports nbprofiler once and forks
    # the workers from that clean single-threaded process.
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")  # Windows, macOS without forkserver
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    return ctx


def _map_dask(fn, chunks: list[list], workers: int) -> list:
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
        return client.gather(client.map(fn, chunks, pure=False))
    tasks = [dask.delayed(fn, pure=False)(c) for c in chunks]
    return list(dask.compute(*tasks, scheduler="processes", num_workers=workers))


__all__ = ["map_chunks", "map_ranks", "choose_engine", "chunked", "usable_cpus", "ENGINES", "MIN_RANKS_FOR_PROCESSES", "POOL_WORTH_S"]
