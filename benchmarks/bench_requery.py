"""What a zoom costs in the notebook: `TimelineView.set_window` end to end on the kernel side (level-of-detail
query, bar columns, the Bokeh patch jupyter_bokeh sends), for windows of 0.01 %, 1 %, 10 % and all of a
synthetic MindSpore-shaped trace, median and max of 7 windows each.

    python benchmarks/bench_requery.py --quick      # 100 MB (330k events)
    python benchmarks/bench_requery.py              # 1.5 GB (5M events, the size the target is set for)
    python benchmarks/bench_requery.py --mb 1000    # 1 GB (3.3M events)

Target: <= 50 ms for every window, the whole range included.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> dict:
    from bench_dashboard import ensure_run
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 MB")
    ap.add_argument("--mb", type=int, default=1500, help="trace size in MB (~3,300 events per MB)")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-dashboard")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import nbprofiler
    from nbprofiler.views.timeline import TimelineView
    prof = nbprofiler.load(ensure_run(args.scratch, 100 if args.quick else args.mb))
    tl = prof.timeline
    view = TimelineView(prof, debounce_s=0)
    view.levels_built.join()  # the coarse levels a view builds in the background after it is shown
    lo, hi = float(tl["start_us"].min()), float((tl["start_us"] + tl["dur_us"]).max())
    out = {}
    print(f"{len(tl):,} events")
    for frac in (0.0001, 0.01, 0.1, 1.0):
        times = []
        for k in range(7):
            mid, width = lo + (hi - lo) * (0.2 + 0.08 * k), (hi - lo) * frac
            t0, t1 = (lo, hi) if frac == 1.0 else (mid - width / 2, mid + width / 2)
            start = time.perf_counter()
            view.set_window(t0, t1)
            times.append((time.perf_counter() - start) * 1000)
        out[frac] = (statistics.median(times), max(times), len(view.source.data["left"]))
        print(f"window {frac:>7.2%}: median {out[frac][0]:6.1f} ms, max {out[frac][1]:6.1f} ms, {out[frac][2]:,} bars")
    return out


if __name__ == "__main__":
    main()
