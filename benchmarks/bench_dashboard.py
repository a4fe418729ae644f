"""What a user waits for after a large trace has loaded: the dashboard (its overview needs the summary)
and the first open of each tab, on a synthetic MindSpore-shaped trace, in a fresh process per size.
Reported next to the first open of the same trace (the load, same run), so the ratio says how much the
dashboard adds to the load.

    python benchmarks/bench_dashboard.py --quick      # 100 MB
    python benchmarks/bench_dashboard.py              # 100 MB and 1 GB

Target: the dashboard and every tab within 1 s of the load.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
os.environ["NBPROFILER_CACHE_DIR"] = sys.argv[2]
import nbprofiler
from benchmarks.bench_dashboard import time_dashboard
out = {"load_1min": os.getloadavg()[0]}
t = time.perf_counter()
prof = nbprofiler.load(sys.argv[1])
out["events"] = len(prof.timeline)
out["load_s"] = time.perf_counter() - t
_, out["dashboard_s"], out["tabs_s"] = time_dashboard(prof)
print(json.dumps(out))
"""


def time_dashboard(prof):
    """(the dashboard, seconds to build it, {tab: seconds of its first open}) for every tab after the
    overview, in a benchmark's child process."""
    import time

    from nbprofiler.views.dashboard import TABS, Dashboard
    t = time.perf_counter()
    dash = Dashboard(prof)
    built = time.perf_counter() - t
    tabs = {}
    for tab in TABS[1:]:
        t = time.perf_counter()
        dash.select(tab)
        tabs[tab] = time.perf_counter() - t
    return dash, built, tabs


def ensure_run(scratch: Path, mb: int) -> Path:
    from nbprofiler.synthetic import write_trace
    run = scratch / f"run_{mb}MB"
    path = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trace(path.with_suffix(".part"), mb * 1_000_000, seed=1)
        path.with_suffix(".part").rename(path)
    return run


def measure(run: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-") as cache:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, "-c", CHILD, str(run), cache], capture_output=True, text=True,
                             env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only 100 MB")
    ap.add_argument("--sizes", type=int, nargs="*", default=[100, 1000], help="trace sizes in MB")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-dashboard")
    args = ap.parse_args(argv)
    results = []
    for mb in [100] if args.quick else args.sizes:
        r = measure(ensure_run(args.scratch, mb))
        r["size_mb"] = mb
        slowest = max(r["tabs_s"], key=r["tabs_s"].get)
        r["slowest_tab"] = slowest
        r["dashboard_x_load"] = round(r["dashboard_s"] / r["load_s"], 3)
        r["slowest_tab_x_load"] = round(r["tabs_s"][slowest] / r["load_s"], 3)
        results.append(r)
        print(json.dumps(r), flush=True)
    print("| trace | events | first open | dashboard | slowest tab (first open) | load avg |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['size_mb']} MB | {r['events']:,} | {r['load_s']:.2f} s | {r['dashboard_s']:.2f} s "
              f"({r['dashboard_x_load']:.2f}x) | {r['slowest_tab']} {r['tabs_s'][r['slowest_tab']]:.2f} s "
              f"({r['slowest_tab_x_load']:.2f}x) | {r['load_1min']:.1f} |")
    return results


if __name__ == "__main__":
    main()
