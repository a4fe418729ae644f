"""The offline report of a large trace: its file size and export time with the zoomable timeline's tiles
(`nbprofiler.views.timeline_tiles`, ~6 MB of bar data) against the same report with the whole-run level
alone (tile budget 0), both written in one process after one load and one untimed report.

    python benchmarks/bench_report_size.py /tmp/nbprofiler-bench-dashboard/run_1500MB

(a run made by `benchmarks/bench_dashboard.py --sizes 1500`, or any profiler folder). Target: the file
at most 8 MB for a 1 GB trace.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path


def write_timed(prof, path: Path, budget: float) -> dict:
    from nbprofiler.faces.report import write_html_report
    from nbprofiler.views import timeline_tiles
    saved, timeline_tiles.TILE_BUDGET_BYTES = timeline_tiles.TILE_BUDGET_BYTES, budget
    try:
        w, c = time.perf_counter(), time.process_time()
        write_html_report(prof, path)
        return {"wall_s": round(time.perf_counter() - w, 2), "cpu_s": round(time.process_time() - c, 2),
                "bytes": path.stat().st_size, "load_1min": os.getloadavg()[0]}
    finally:
        timeline_tiles.TILE_BUDGET_BYTES = saved


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-report")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-") as cache:
        os.environ["NBPROFILER_CACHE_DIR"] = cache
        import nbprofiler
        from nbprofiler.views import timeline_tiles
        args.out.mkdir(parents=True, exist_ok=True)
        out = {"load_1min_start": os.getloadavg()[0]}
        t = time.perf_counter()
        prof = nbprofiler.load(args.run)
        out["load_s"] = round(time.perf_counter() - t, 1)
        out["events"] = len(prof.timeline)
        # the frames are read on first use: one untimed report first, so neither timed one pays for them
        write_timed(prof, args.out / "report_warm.html", 0)
        out["baseline"] = write_timed(prof, args.out / "report_level0.html", 0)
        out["tiled"] = write_timed(prof, args.out / "report_tiled.html", timeline_tiles.TILE_BUDGET_BYTES)
        out["size_ratio"] = round(out["tiled"]["bytes"] / out["baseline"]["bytes"], 2)
        out["wall_ratio"] = round(out["tiled"]["wall_s"] / out["baseline"]["wall_s"], 2)
        out["cpu_ratio"] = round(out["tiled"]["cpu_s"] / out["baseline"]["cpu_s"], 2)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
