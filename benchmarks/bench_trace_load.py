"""Trace loading: nbprofiler's loader vs the stdlib json + pandas baseline, in the same run.

Each measurement runs in its own subprocess so its peak RSS (ru_maxrss of that child) is its own.
Synthetic traces (nbprofiler.synthetic.write_trace, shaped like the real trace_view.json files) are
written to a scratch dir (default: $TMPDIR/nbprofiler-bench), never to the repository.

    python benchmarks/bench_trace_load.py --quick          # 10 MB
    python benchmarks/bench_trace_load.py --sizes 100 1000  # MB

Prints one JSON object per size: seconds, MB/s and peak RSS (MB and x file size) per method, the
speed ratio vs the baseline, and the cached re-open time. Targets (1 GB): >= 150 MB/s, peak <= 3x.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
method, path, cache_dir = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["NBPROFILER_CACHE_DIR"] = cache_dir
import pandas as pd  # imports are not timed: both methods need pandas, a notebook has it loaded
from pathlib import Path
if method != "baseline":
    from nbprofiler.io import cache, trace
    from nbprofiler.io.discover import discover
    import duckdb
t = time.perf_counter()
if method == "baseline":
    with open(path) as f:
        events = json.load(f)
    df = pd.DataFrame([e for e in events if e.get("ph") == "X"])
    df["ts"] = df["ts"].astype(float)
    df["dur"] = df["dur"].astype(float)
    n = len(df)
else:
    if method == "nbprofiler":
        data = trace.load_trace([Path(path)], progress=False)
        if cache_dir != "off":
            cache.store(cache.key_for("trace", [Path(path)]), [Path(path)], data.frames(),
                        {"origin_us": data.origin_us})
    else:  # "cached": a second open through the same entry point a Profile uses
        data = trace.trace_data(discover(path)[0])
    n = len(data.timeline)
secs = time.perf_counter() - t
print(json.dumps({"events": n, "seconds": secs, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(method: str, path: Path, cache_dir: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, method, str(path), cache_dir], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ensure_trace(scratch: Path, mb: int, seed: int = 1) -> Path:
    from nbprofiler.synthetic import write_trace
    path = scratch / f"trace_{mb}MB_seed{seed}.json"
    if not path.exists():
        tmp = path.with_suffix(".part")
        write_trace(tmp, mb * 1_000_000, seed=seed)
        tmp.rename(path)
    return path


def run(sizes: list[int], scratch: Path, baseline_max_mb: int) -> list[dict]:
    scratch.mkdir(parents=True, exist_ok=True)
    results = []
    for mb in sizes:
        path = ensure_trace(scratch, mb)
        size_mb = path.stat().st_size / 1e6
        # outside the trace's folder: the cache refuses to live inside a profiler directory
        cache_dir = tempfile.mkdtemp(prefix="nbprofiler-bench-cache-")
        row = {"size_mb": round(size_mb, 1), "machine": f"{os.cpu_count()} cpu"}
        nb = measure("nbprofiler", path, cache_dir)
        cached = measure("cached", path, cache_dir)
        row["nbprofiler"] = _fmt(nb, size_mb)
        row["cached_reopen_s"] = round(cached["seconds"], 3)
        if mb <= baseline_max_mb:
            base = measure("baseline", path, "off")
            row["baseline_json_pandas"] = _fmt(base, size_mb)
            row["speedup_vs_baseline"] = round(base["seconds"] / nb["seconds"], 2)
        shutil.rmtree(cache_dir, ignore_errors=True)
        results.append(row)
        print(json.dumps(row), flush=True)
    return results


def _fmt(m: dict, size_mb: float) -> dict:
    return {"events": m["events"], "seconds": round(m["seconds"], 3), "mb_per_s": round(size_mb / m["seconds"], 1),
            "peak_rss_mb": round(m["peak_rss_mb"], 1), "peak_x_file": round(m["peak_rss_mb"] / size_mb, 2)}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the 10 MB trace")
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000], help="trace sizes in MB")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench")
    ap.add_argument("--baseline-max-mb", type=int, default=1000,
                    help="skip the (slow, ~8x memory) baseline above this size")
    args = ap.parse_args(argv)
    return run([10] if args.quick else args.sizes, args.scratch, args.baseline_max_mb)


if __name__ == "__main__":
    main()
