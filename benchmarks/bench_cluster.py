"""Cluster gathering: serial vs local processes vs dask, on synthetic clusters of 8, 64 and 512 ranks.

Each engine runs `nbprofiler.analysis.cluster.rank_summary` on a freshly loaded `Cluster` in its own
child process, so peak memory (ru_maxrss of that child) and time are measured per engine without one
run's caches helping another. Results are printed as ratios against the serial baseline of the same run
(absolute seconds depend on the machine; ratios are what to compare).

    python benchmarks/bench_cluster.py            # 8, 64, 512 ranks, legacy and npu shapes
    python benchmarks/bench_cluster.py --quick    # 8 ranks, small files: a smoke test (seconds)
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"


def _measure(path: str, engine: str, conn) -> None:
    import warnings
    warnings.simplefilter("ignore")
    import nbprofiler
    from nbprofiler.analysis import cluster as C
    t0 = time.perf_counter()
    cl = nbprofiler.load(path)
    summary = C.rank_summary(cl, engine=engine)
    slow = C.slow_ranks(summary)
    seconds = time.perf_counter() - t0
    # children of a process pool are reaped by now: RUSAGE_CHILDREN covers the workers
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    conn.send({"seconds": seconds, "ranks": len(cl), "peak_mb": peak_self, "worker_peak_mb": peak_children,
               "slowest": C.slowest_rank(summary), "flagged": int(slow["flagged"].sum())})
    conn.close()


def run_engine(path: Path, engine: str) -> dict:
    ctx = mp.get_context("spawn")  # a clean interpreter per measurement
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_measure, args=(str(path), engine, child))
    p.start()
    out = parent.recv()
    p.join()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 ranks, small files (a smoke test)")
    ap.add_argument("--ranks", type=int, nargs="*", help="cluster sizes (default 8 64 512)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON as well")
    args = ap.parse_args(argv)
    from nbprofiler.synthetic_cluster import write_legacy_cluster, write_npu_cluster
    sizes = args.ranks or ([8] if args.quick else [8, 64, 512])
    engines = ["serial", "processes", "dask"]
    try:
        import dask  # noqa: F401
    except ImportError:
        engines.remove("dask")
    results = []
    print(f"cores: {os.cpu_count()}; engines: {', '.join(engines)}; ratios are vs serial in the same run")
    print(f"{'shape':7} {'ranks':>6} {'engine':10} {'seconds':>8} {'x serial':>9} {'peak MB':>8} "
          f"{'worker MB':>9} {'slowest':>7}")
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-") as tmp:
        for n in sizes:
            for shape in ("legacy", "npu"):
                root = Path(tmp) / f"{shape}_{n}"
                if shape == "legacy":
                    write_legacy_cluster(root, DATA, n, steps=20 if args.quick else 300)
                else:
                    write_npu_cluster(root, DATA, n, kernel_repeat=1 if args.quick else 4)
                base = None
                for engine in engines:
                    r = run_engine(root, engine)
                    base = base or r["seconds"]
                    r.update(shape=shape, engine=engine, ratio=r["seconds"] / base)
                    results.append(r)
                    print(f"{shape:7} {n:>6} {engine:10} {r['seconds']:>8.2f} {r['ratio']:>9.2f} "
                          f"{r['peak_mb']:>8.0f} {r['worker_peak_mb']:>9.0f} {str(r['slowest']):>7}")
    if args.json:
        print(json.dumps(results))
    # every engine must agree on the answer
    for n in sizes:
        for shape in ("legacy", "npu"):
            answers = {r["slowest"] for r in results if r["ranks"] == n and r["shape"] == shape}
            if len(answers) != 1:
                print(f"engines disagree on the slowest rank for {shape} x {n}: {answers}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
