"""Cluster gathering: serial vs local processes vs dask, on synthetic clusters of 8, 64 and 512 ranks.

Each engine loads a fresh `Cluster` and runs `nbprofiler.analysis.cluster.rank_summary` plus
`slow_ranks` in its own child process (a clean interpreter, so no run's caches or imports help another).
Per engine it reports wall seconds, CPU seconds and peak memory of the whole process tree (the
measuring process plus every worker it starts, sampled every 0.1 s with psutil), as ratios against the
serial baseline of the same run and spell: absolute seconds depend on the machine and on what else runs on
it (the load average is printed with every row), ratios are what to compare.

Engines: ``auto`` (``engine=None``: what a user gets; its ``decision`` column shows the measured cost of a
rank, the cores found idle while the first chunk ran, the pool start-up it assumed and the workers it
started, 0 = serial), ``serial``, ``processes`` (fork-server pool beside this process), ``dask`` (no client
in scope: dask's local multiprocessing scheduler) and ``dask-client`` (a ``distributed.LocalCluster`` with
one single-threaded worker per CPU, started *before* the clock starts, as a user's existing cluster would
be; its start-up time is printed separately).

``--loaded`` measures everything twice: on the machine as it is ("quiet") and with a busy loop
(``python -c "while True: pass"``) holding one core ("loaded"). Each spell also times the start-up of a
fork-server pool in a fresh interpreter, cold (the fork server imports nbprofiler) and warm (a second pool),
which is what `nbprofiler.model.parallel.POOL_COLD_START_S` stands for. ``--repeat N`` runs the engines
N times, interleaved; each run's ratio is against the baseline (the first engine given) run just before
it, and the medians of the ratios, wall times and CPU times are shown.

    python benchmarks/bench_cluster.py            # 8, 64, 512 ranks, legacy and npu shapes
    python benchmarks/bench_cluster.py --ranks 16 64 --shapes legacy --engines serial auto processes --loaded --repeat 3
    python benchmarks/bench_cluster.py --quick    # 8 ranks, small files, no dask-client: a smoke test
    python benchmarks/bench_cluster.py --ranks 1024 4096 --shapes cluster_analysis --engines serial processes dask-client

``--shapes cluster_analysis`` writes msprof-analyze's cluster output for that many ranks
(`nbprofiler.synthetic.cluster.write_cluster_analysis`: TP 8 x PP 2 x DP, shaped like
``npu/cluster_analysis_16rank``) and measures the whole cluster page: the load, `ClusterView` (its
rank summary, diagnosis, breakdown and communication, each reduced where the ranks are parsed) and its
HTML (``bokeh.embed.file_html``); the ``page s`` column is the view and HTML alone, ``page MB`` the HTML's
size. Peak memory is given for the measuring process alone ("main MB", its ``ru_maxrss``) and for it with
every worker ("tree MB").
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"
# psutil's process-tree walk costs ~1 ms of CPU; every 0.1 s keeps it to ~1 % (and it is subtracted).
SAMPLE_SECONDS = 0.1


class TreeSampler(threading.Thread):
    """Peak summed RSS of this process and all its descendants, and their CPU seconds (the last value
    seen for each process, so a worker's final <0.1 s may be missed), minus the sampler's own CPU."""

    def __init__(self):
        super().__init__(daemon=True)
        import psutil
        self.me = psutil.Process()
        self.peak_bytes = 0
        self.cpu: dict[int, float] = {}
        self.own_cpu = 0.0
        self.stop = threading.Event()

    def sample(self):
        import psutil
        t0 = time.thread_time()
        total = 0
        for p in [self.me] + self.me.children(recursive=True):
            try:
                with p.oneshot():
                    total += p.memory_info().rss
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
            except psutil.Error:
                continue  # the process ended between listing and reading
        self.peak_bytes = max(self.peak_bytes, total)
        self.own_cpu += time.thread_time() - t0

    def run(self):
        while not self.stop.wait(SAMPLE_SECONDS):
            self.sample()


def _measure(path: str, engine: str, page: bool, conn) -> None:
    import warnings
    warnings.simplefilter("ignore")
    import nbprofiler
    from nbprofiler.analysis import cluster as C
    client, startup = None, 0.0
    if engine == "dask-client":
        from distributed import Client, LocalCluster
        t0 = time.perf_counter()
        client = Client(LocalCluster(n_workers=os.cpu_count(), threads_per_worker=1, processes=True,
                                     dashboard_address=None))
        startup = time.perf_counter() - t0
    sampler = TreeSampler()
    sampler.sample()
    cpu_before = sum(sampler.cpu.values()) + sampler.own_cpu
    sampler.peak_bytes = 0
    sampler.start()
    t0 = time.perf_counter()
    cl = nbprofiler.load(path, engine=None if engine == "auto" else engine.split("-")[0])
    summary = C.rank_summary(cl)
    slow = C.slow_ranks(summary)
    page_s = page_mb = None
    if page:
        from bokeh.embed import file_html
        from bokeh.resources import CDN
        from nbprofiler.views.cluster import ClusterView
        t1 = time.perf_counter()
        page_mb = len(file_html(ClusterView(cl).layout, CDN, "cluster")) / 1e6
        page_s = time.perf_counter() - t1
    seconds = time.perf_counter() - t0
    sampler.sample()
    sampler.stop.set()
    sampler.join()
    from nbprofiler.model import parallel
    conn.send({"seconds": seconds, "ranks": len(cl), "peak_tree_mb": sampler.peak_bytes / 2**20,
               "peak_main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "cpu_s": sum(sampler.cpu.values()) - sampler.own_cpu - cpu_before, "startup_s": startup,
               "slowest": C.slowest_rank(summary), "flagged": int(slow["flagged"].sum()), "page_s": page_s,
               "page_mb": page_mb,
               "decision": parallel.last_decision if engine == "auto" else None})
    conn.close()
    for t in threading.enumerate():
        if t.name == "nbprofiler-pool-feeder":
            t.join()  # a pool still starting when the work was done: let it close before this process exits
    if client is not None:
        client.close()
        client.cluster.close()


def _pool_start(conn) -> None:
    from concurrent.futures import ProcessPoolExecutor
    from nbprofiler.model.parallel import _process_context
    out = []
    for _ in range(2):  # cold: the fork server starts and imports nbprofiler; warm: it is running
        t0 = time.perf_counter()
        with ProcessPoolExecutor(1, mp_context=_process_context()) as pool:
            pool.submit(os.getpid).result()
            out.append(time.perf_counter() - t0)
    conn.send(out)
    conn.close()


def run_engine(path: Path, engine: str, page: bool = False) -> dict:
    return _in_child(_measure, str(path), engine, page)


def _in_child(target, *args):
    ctx = mp.get_context("spawn")  # a clean interpreter per measurement
    parent, child = ctx.Pipe(duplex=False)
    engine = next((a for a in reversed(args) if isinstance(a, str)), target.__name__)  # the last str: the engine
    p = ctx.Process(target=target, args=(*args, child))
    p.start()
    child.close()
    try:
        out = parent.recv()
    except EOFError:
        p.join()
        raise RuntimeError(f"the {engine} measurement died (exit code {p.exitcode})") from None
    p.join()
    return out


class Burner:
    """A busy loop on one core for the duration of a ``with`` block (the "loaded" spell)."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)  # let it take its core before anything is measured
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _decision(d: dict | None) -> str:
    if not d:
        return ""
    return (f"{d['rank_s'] * 1000:.0f} ms/rank x {d['ranks_left']}, {d['free_cores']:.2f} free, "
            f"start {d['start_s']:.2f} s -> {d['helpers']} worker{'s' if d['helpers'] != 1 else ''}")


def _spread(ratios: list[float]) -> str:
    return f"[{min(ratios):.2f}-{max(ratios):.2f}] " if len(ratios) > 1 and max(ratios) != min(ratios) else ""


def _workers(runs: list[dict]) -> str:
    if len(runs) < 2 or not runs[0]["decision"]:
        return ""
    return f" (workers per run: {', '.join(str(r['decision']['helpers']) for r in runs)})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 ranks, small files, no dask-client (a smoke test)")
    ap.add_argument("--ranks", type=int, nargs="*", help="cluster sizes (default 8 64 512)")
    ap.add_argument("--shapes", nargs="*", default=["legacy", "npu"], choices=["legacy", "npu", "cluster_analysis"])
    ap.add_argument("--engines", nargs="*", help="default: serial auto processes dask dask-client")
    ap.add_argument("--loaded", action="store_true",
                    help="measure again with a busy loop on one core (spells: quiet, loaded)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine, interleaved; the median is shown")
    ap.add_argument("--json", action="store_true", help="print the results as JSON as well")
    args = ap.parse_args(argv)
    from nbprofiler.synthetic.cluster import write_cluster_analysis, write_legacy_cluster, write_npu_cluster
    sizes = args.ranks or ([8] if args.quick else [8, 64, 512])
    engines = args.engines or (["serial", "auto", "processes", "dask"] if args.quick else
                               ["serial", "auto", "processes", "dask", "dask-client"])
    spells = ["quiet", "loaded"] if args.loaded else ["quiet"]
    import importlib.util
    if importlib.util.find_spec("dask") is None:
        engines = [e for e in engines if not e.startswith("dask")]
    results = []
    print(f"cores: {os.cpu_count()}; load average before: {_load()}; engines: {', '.join(engines)}; "
          f"spells: {', '.join(spells)}; median of {args.repeat}; ratios are vs {engines[0]} in the same repeat and spell")
    for spell in spells:
        with Burner() if spell == "loaded" else contextlib.nullcontext():
            cold, warm = _in_child(_pool_start)
            print(f"{spell}: pool start-up {cold:.2f} s cold, {warm:.2f} s warm (load average {_load()})")
    print(f"{'shape':16} {'ranks':>6} {'spell':6} {'engine':11} {'seconds':>8} {'x serial':>9} {'cpu s':>7} "
          f"{'tree MB':>8} {'main MB':>8} {'slowest':>7} {'load 1m':>7}  [ratio range] decision")
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-") as tmp:
        for n in sizes:
            for shape in args.shapes:
                root = Path(tmp) / f"{shape}_{n}"
                if shape == "legacy":
                    write_legacy_cluster(root, DATA, n, steps=20 if args.quick else 300)
                elif shape == "cluster_analysis":
                    write_cluster_analysis(root, DATA, n)
                else:
                    write_npu_cluster(root, DATA, n, kernel_repeat=1 if args.quick else 4)
                for spell in spells:
                    with Burner() if spell == "loaded" else contextlib.nullcontext():
                        runs = {e: [] for e in engines}
                        for _ in range(args.repeat):
                            for engine in engines:
                                r = run_engine(root, engine, page=shape == "cluster_analysis")
                                r["load1"] = os.getloadavg()[0]
                                runs[engine].append(r)
                    for engine in engines:
                        # each repeat's ratio is against the baseline run just before it, so a change in
                        # the machine's load between repeats moves both; the median ratio is shown
                        ratios = [x["seconds"] / b["seconds"] for x, b in zip(runs[engine], runs[engines[0]])]
                        r = sorted(runs[engine], key=lambda x: x["seconds"])[len(ratios) // 2]
                        r.update(shape=shape, spell=spell, engine=engine, ratio=statistics.median(ratios),
                                 ratios=ratios, all_seconds=[x["seconds"] for x in runs[engine]],
                                 cpu_s=statistics.median(x["cpu_s"] for x in runs[engine]))
                        results.append(r)
                        extra = f"  (client start-up {r['startup_s']:.1f} s, not timed)" if r["startup_s"] else ""
                        if r["page_s"] is not None:
                            extra += f"  page {r['page_s']:.2f} s, {r['page_mb']:.2f} MB of HTML"
                        print(f"{shape:16} {n:>6} {spell:6} {engine:11} {r['seconds']:>8.2f} {r['ratio']:>9.2f} "
                              f"{r['cpu_s']:>7.1f} {r['peak_tree_mb']:>8.0f} {r['peak_main_mb']:>8.0f} "
                              f"{str(r['slowest']):>7} {r['load1']:>7.2f}  {_spread(ratios)}{_decision(r['decision'])}"
                              f"{_workers(runs[engine])}{extra}",
                              flush=True)
                if not args.quick:
                    import shutil
                    shutil.rmtree(root)  # 512 legacy ranks of 300 steps are ~1 GB
    print(f"load average after: {_load()}")
    if args.json:
        print(json.dumps(results))
    # every engine must agree on the answer
    for n in sizes:
        for shape in args.shapes:
            answers = {r["slowest"] for r in results if r["ranks"] == n and r["shape"] == shape}
            if len(answers) != 1:
                print(f"engines disagree on the slowest rank for {shape} x {n}: {answers}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
