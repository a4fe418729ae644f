"""Run a function over the ranks of a `Cluster`: serially, on local processes, or on dask.

Workers receive a rank's `RunFiles` (file paths only, cheap to pickle) and build a `Profile` in their own
process; ranks travel in chunks, so one reply carries the results of many ranks. What is computed per
rank is the caller's: `nbprofiler.analysis.cluster_reduce` reduces each rank to a few small frames, so the
raw events of 512 ranks never travel back to, or accumulate in, the notebook kernel.

Engines (``engine=`` of `nbprofiler.load` and `nbprofiler.analysis.cluster.rank_summary`):
- ``None`` (default): serial below `MIN_RANKS_FOR_PROCESSES` ranks or on one usable CPU; otherwise the
  first chunk of ranks is reduced here, timed, and the CPU left idle meanwhile is measured
  (`free_cores_between`); `pool_helpers` then starts worker processes only when the cores that were free
  would finish the rest, start-up included, at least `POOL_MARGIN` faster than this process alone
  (benchmarks/README.md's Clusters table has the measurements, quiet and with a busy core).
- ``"serial"``: one rank after another in this process (the baseline of `benchmarks/bench_cluster.py`);
- ``"processes"``: this process and a `concurrent.futures.ProcessPoolExecutor` of one worker per other
  usable CPU, started from a fork server that has imported nbprofiler once (forking the kernel itself is
  unsafe: it has threads); a thread starts the pool and feeds it chunks from the first while this process
  works from the last, so starting the pool never makes the load wait;
- ``"dask"``: the ``distributed.Client`` in scope (``distributed.get_client()``), so a cluster
  spanning machines does the work; without one, dask's local multiprocessing scheduler.
  dask is an optional extra: ``pip install 'nbprofiler[dask]'``.
"""
from __future__ import annotations

import collections
import functools
import json
import math
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Sequence


from ..io.cache import root_for
from ..io.discover import RunFiles

ENGINES = ("serial", "processes", "dask")
# Below this many ranks the default engine is serial: a rank's reduce costs ~10-120 ms, starting a first
# pool ~1-2 s (benchmarks/bench_cluster.py measures both).
MIN_RANKS_FOR_PROCESSES = 16
# The default engine starts a pool only when its estimate of the rest (`pool_estimate_s`) times
# 1 + POOL_MARGIN is still below the rest done serially: the estimate leaves out pickling, the workers'
# first-call costs and the wait for the last chunk, and a wrong "pool" costs more than a wrong "serial".
POOL_MARGIN = 0.25
# Seconds until the first pool of a process runs a task: the fork server starts and imports
# FORKSERVER_PRELOAD (pandas, pyarrow, nbprofiler). bench_cluster.py prints it in each spell: 0.6 s on an
# idle 2-core machine, 1.2-1.7 s at load 3.8-4.3, more on a busier machine, where no pool is started anyway
# (benchmarks/README.md). The first pool of a process measures it and keeps it for the next process on the
# machine (`cold_start_s`); this is the figure until one has. Later pools fork from the running server
# (0.04-0.15 s): they use the start-up measured when the last pool started (`last_pool_start_s`).
POOL_COLD_START_S = 1.2
# The file under the cache root (`nbprofiler.io.cache.root_for`) that keeps the last cold start measured.
COLD_START_FILE = "pool-cold-start.json"
# A core counts as free when at least 1 - FREE_CORE_SLACK of it idled while the first chunk ran:
# /proc/stat counts in 10 ms ticks, so over a 0.1 s chunk one core's idle share is only known to ~10 %.
FREE_CORE_SLACK = 0.2
# Fewer ticks per CPU than this in the measured window and the idle share is too coarse to use: the load
# average decides instead.
MIN_WINDOW_TICKS = 5
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


def cpu_ticks() -> tuple[int, int, int] | None:
    """(idle ticks, all ticks, CPUs counted) summed over the CPUs this process may run on, from
    ``/proc/stat`` (idle and iowait count as idle; steal, taken by the hypervisor, does not); None where
    there is no ``/proc/stat``."""
    try:
        allowed = os.sched_getaffinity(0)
        with open("/proc/stat") as f:
            lines = [ln.split() for ln in f if ln.startswith("cpu") and not ln.startswith("cpu ")]
    except (AttributeError, OSError):
        return None
    idle = total = n = 0
    for fields in lines:
        if int(fields[0][3:]) not in allowed:
            continue
        ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
        idle += ticks[3] + ticks[4]
        total += sum(ticks)
        n += 1
    return (idle, total, n) if n else None


def free_cores_between(before: tuple[int, int, int] | None, after: tuple[int, int, int] | None,
                       usable: int, loadavg: float | None = None) -> float:
    """Cores left idle between two `cpu_ticks` readings taken around work this process did on one
    core: the cores a pool could have had beside it. Without readings, or over a window shorter than
    `MIN_WINDOW_TICKS` per CPU, the one-minute load average stands in (``loadavg``, default
    ``os.getloadavg()``), counting this process as one of the ``usable`` cores busy besides the load."""
    if before is not None and after is not None and after[2] == before[2]:
        idle, total = after[0] - before[0], after[1] - before[1]
        if total >= MIN_WINDOW_TICKS * after[2]:
            return after[2] * idle / total
    if loadavg is None:
        try:
            loadavg = os.getloadavg()[0]
        except (AttributeError, OSError):
            return 0.0  # nothing tells whether the machine is free: do not bet on it
    return max(0.0, usable - 1 - loadavg)


def pool_estimate_s(serial_s: float, helpers: float, start_s: float) -> float:
    """Wall seconds of work that takes ``serial_s`` in this process alone when this process keeps working
    and ``helpers`` worker processes join it ``start_s`` after the pool is asked for: this process works
    W seconds and the helpers helpers x (W - start_s), so W = (serial_s + helpers x start_s) /
    (1 + helpers); a pool that is not up before the work is done saves nothing."""
    if helpers <= 0 or serial_s <= start_s:
        return serial_s
    return (serial_s + helpers * start_s) / (1 + helpers)


def pool_helpers(rank_s: float, n_ranks: int, free_cores: float, start_s: float, max_helpers: int) -> int:
    """Worker processes to start beside this process for ``n_ranks`` more ranks of ``rank_s`` seconds
    each, with ``free_cores`` idle besides this process and a pool that takes ``start_s`` to start; 0:
    stay serial. One worker per free core (rounded down, with `FREE_CORE_SLACK`), at most
    ``max_helpers``, and only when `pool_estimate_s` with them, times 1 + `POOL_MARGIN`, beats serial."""
    helpers = min(max_helpers, math.floor(free_cores + FREE_CORE_SLACK))
    if helpers < 1:
        return 0  # the machine is busy: workers would only take turns with this process
    serial_s = rank_s * n_ranks
    return helpers if pool_estimate_s(serial_s, helpers, start_s) * (1 + POOL_MARGIN) <= serial_s else 0


# Seconds the last pool this process started took to run its first task (None: no pool yet).
last_pool_start_s: float | None = None
# How the last engine=None call decided: rank_s, ranks_left, free_cores, start_s, helpers.
last_decision: dict | None = None


def _cold_start_path():
    """`COLD_START_FILE` under the cache root (never inside profiler output), or None with caching off."""
    root = root_for([])
    return None if root is None else root / COLD_START_FILE


def cold_start_s() -> float:
    """Seconds the first pool of a process takes to start here: the last such start measured on this
    machine (by any process, kept in `COLD_START_FILE`), else `POOL_COLD_START_S`."""
    path = _cold_start_path()
    if path is None:
        return POOL_COLD_START_S
    try:
        seconds = float(json.loads(path.read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):  # no file yet, or not a start-up in it
        return POOL_COLD_START_S
    return seconds if 0 < seconds < 60 else POOL_COLD_START_S


def _keep_cold_start(seconds: float) -> None:
    """Keep a cold start just measured for the next process (`cold_start_s`); best effort."""
    path = _cold_start_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_text(json.dumps({"seconds": seconds}))
        os.replace(part, path)
    except OSError:
        pass


def choose_engine(n_ranks: int, engine: str | None = None) -> str:
    """The engine to use for ``n_ranks`` ranks: ``engine`` if given (validated), else ``"processes"``
    when there are at least `MIN_RANKS_FOR_PROCESSES` ranks and more than one usable CPU, else
    ``"serial"``. With ``engine=None``, ``"processes"`` means a pool *may* be started: `map_chunks`
    decides after a measured first chunk (`pool_helpers`)."""
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
        # Reduce a chunk here first, timing it and the CPU the machine leaves idle meanwhile: a pool
        # pays only when the rest is long and there are cores to run it on.
        global last_decision
        before, start = cpu_ticks(), time.perf_counter()
        first = fn(chunks[0])
        rank_s = (time.perf_counter() - start) / len(chunks[0])
        free = free_cores_between(before, cpu_ticks(), usable_cpus())
        start_s = cold_start_s() if last_pool_start_s is None else last_pool_start_s
        left = len(items) - len(chunks[0])
        helpers = pool_helpers(rank_s, left, free, start_s, workers - 1)
        last_decision = {"rank_s": rank_s, "ranks_left": left, "free_cores": free, "start_s": start_s,
                         "helpers": helpers}
        if not helpers:
            return [first] + [fn(chunk) for chunk in chunks[1:]]
        return [first] + _map_alongside_pool(fn, chunks[1:], helpers)
    if engine == "processes":
        return _map_alongside_pool(fn, chunks, workers - 1)
    return _map_dask(fn, chunks, workers)


def _note_start(started: float, cold: bool, future) -> None:
    global last_pool_start_s
    if not future.cancelled() and future.exception() is None:
        last_pool_start_s = time.perf_counter() - started
        if cold:
            _keep_cold_start(last_pool_start_s)


def _map_alongside_pool(fn: Callable, chunks: list[list], helpers: int) -> list:
    """``[fn(c) for c in chunks]`` by this process and a pool of ``helpers`` workers: a thread starts the
    pool and hands it chunks from the first, one per idle worker, while this process takes them from the
    last. Nothing waits for the pool to start (the first pool of a process takes ~1 s: its fork server
    imports nbprofiler, and asking for the first worker blocks until then), and a pool that is not up
    before this process is done is left to close behind it. A chunk whose worker died is done here."""
    todo = collections.deque(range(len(chunks)))
    submitting = object()
    taken: dict[int, object] = {}  # chunk index -> its future (None: submitting it failed; done here)
    cond = threading.Condition()
    idle_workers = threading.Semaphore(max(1, helpers))

    def feed():
        started, cold = time.perf_counter(), last_pool_start_s is None  # this process's first pool
        try:
            pool = ProcessPoolExecutor(max_workers=max(1, helpers), mp_context=_process_context())
        except Exception:
            return  # no pool: this process does every chunk
        try:
            probe = pool.submit(os.getpid)  # blocks until the fork server is up and a worker forked
            probe.add_done_callback(functools.partial(_note_start, started, cold))
            while True:
                idle_workers.acquire()
                with cond:
                    if not todo:
                        break
                    i = todo.popleft()
                    taken[i] = submitting
                try:
                    future = pool.submit(fn, chunks[i])
                    future.add_done_callback(lambda _: idle_workers.release())
                except Exception:  # a broken or closing pool: the chunk is done here
                    future = None
                with cond:
                    taken[i] = future
                    cond.notify_all()
                if future is None:
                    break
        except Exception:
            pass  # the pool did not start: this process does every chunk
        finally:
            with cond:
                cond.notify_all()
            pool.shutdown(wait=True, cancel_futures=True)

    feeder = threading.Thread(target=feed, name="nbprofiler-pool-feeder")
    feeder.start()
    pending = object()
    results = [pending] * len(chunks)
    try:
        while True:
            with cond:
                if not todo:
                    break
                i = todo.pop()
            results[i] = fn(chunks[i])
    finally:
        with cond:
            todo.clear()  # on an error here too: the feeder stops handing out chunks
    for i in range(len(chunks)):
        if results[i] is not pending:
            continue
        with cond:
            # the feeder took it; submitting it does not block once the pool is up
            cond.wait_for(lambda: taken[i] is not submitting)
            future = taken[i]
        try:
            results[i] = future.result() if future is not None else fn(chunks[i])
        except BrokenProcessPool:
            results[i] = fn(chunks[i])
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


__all__ = ["map_chunks", "map_ranks", "choose_engine", "chunked", "usable_cpus", "cpu_ticks", "free_cores_between",
           "pool_estimate_s", "pool_helpers", "ENGINES", "MIN_RANKS_FOR_PROCESSES", "POOL_MARGIN",
           "POOL_COLD_START_S", "cold_start_s"]
