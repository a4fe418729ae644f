"""What a zoom costs the notebook's kernel: `TimelineView.set_window` end to end (level-of-detail query, bar
columns, flows, counters, the Bokeh patch jupyter_bokeh sends), for windows of 0.01 %, 1 %, 10 % and all
of a synthetic MindSpore-shaped trace; CPU time (every thread of the process) and wall time, median and
p95 of 20 windows each, and the load average.

    python benchmarks/bench_requery.py --quick           # 100 MB (330k events), in this process
    python benchmarks/bench_requery.py                   # 1.5 GB (5M events, the size the target is set for)
    python benchmarks/bench_requery.py --kernel          # the same in an IPython kernel (jupyter_client)

In this process the widget's comm is a dummy that drops its messages; ``--kernel`` runs the loop in a real
ipykernel, where each patch is also framed, signed and sent on the kernel's IOPub socket, as in JupyterLab
(no page is attached: `bench_browser_zoom.py` times the page).

Target (issue 38): <= 20 ms of kernel CPU per re-query, p95, at 5M events.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
TARGET_CPU_MS = 20.0
FRACTIONS = (0.0001, 0.01, 0.1, 1.0)

# The measured loop, run as is in this process or as a cell of a kernel; prints one JSON line.
LOOP = """
import json, os, statistics, time, warnings
warnings.simplefilter("ignore")
import nbprofiler
from nbprofiler.views.timeline import TimelineView
from nbprofiler.io import cache
prof = nbprofiler.load({run!r})
tl = prof.timeline
len(prof.timeline_flows)   # the load's own threads (flows paired, the cache entry written) finish first:
cache.wait()               # process_time counts every thread
view = TimelineView(prof, debounce_s=0)
view.levels_built.join()  # the coarse levels a view builds in the background after it is shown
lo, hi = float(tl["start_us"].min()), float((tl["start_us"] + tl["dur_us"]).max())
view.set_window(lo + (hi - lo) * 0.5, lo + (hi - lo) * 0.51)   # a view's first zoom pays a few ms once
out = {{"events": len(tl), "load_before": os.getloadavg()[0], "windows": {{}}}}
for frac in {fractions!r}:
    cpu, wall = [], []
    for k in range({n}):
        mid, width = lo + (hi - lo) * (0.1 + 0.8 * k / {n}), (hi - lo) * frac
        t0, t1 = (lo, hi) if frac == 1.0 else (mid - width / 2, mid + width / 2)
        c, w = time.process_time(), time.perf_counter()
        view.set_window(t0, t1)
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    out["windows"][str(frac)] = {{"cpu": cpu, "wall": wall, "bars": len(view.source.data["left"])}}
out["load_after"] = os.getloadavg()[0]
print("RESULT " + json.dumps(out))
"""


def _p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def run_here(code: str) -> dict:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "<bench_requery>", "exec"), {})
    return _result(buf.getvalue())


def run_in_kernel(code: str) -> dict:
    """``code`` as a cell of a fresh ipykernel; its printed RESULT line."""
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3", env=dict(os.environ,
                                                               PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])))
    try:
        chunks = []
        reply = kc.execute_interactive(code, timeout=1800, output_hook=lambda m: chunks.append(
            m["content"].get("text", "") if m["msg_type"] == "stream" else
            "\n".join(m["content"].get("traceback", [])) if m["msg_type"] == "error" else ""))
        if reply["content"]["status"] != "ok":
            raise RuntimeError("".join(chunks)[-3000:])
        return _result("".join(chunks))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _result(text: str) -> dict:
    line = next(ln for ln in text.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> dict:
    from bench_dashboard import ensure_run
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 MB")
    ap.add_argument("--mb", type=int, default=1500, help="trace size in MB (~3,300 events per MB)")
    ap.add_argument("--windows", type=int, default=20, help="windows of each size")
    ap.add_argument("--kernel", action="store_true", help="run the loop in an ipykernel (messages really sent)")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-dashboard")
    args = ap.parse_args(argv)
    run = ensure_run(args.scratch, 100 if args.quick else args.mb)
    code = LOOP.format(run=str(run), fractions=FRACTIONS, n=args.windows)
    out = run_in_kernel(code) if args.kernel else run_here(code)
    where = "an ipykernel" if args.kernel else "this process"
    print(f"{out['events']:,} events, in {where}; load average {out['load_before']:.1f} before, "
          f"{out['load_after']:.1f} after; {os.cpu_count()} cpu")
    print("\n| window | bars | CPU median | CPU p95 | wall median | wall p95 |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for frac, w in out["windows"].items():
        p95 = _p95(w["cpu"])
        worst = max(worst, p95)
        print(f"| {float(frac):.2%} | {w['bars']:,} | {statistics.median(w['cpu']):.1f} ms | {p95:.1f} ms "
              f"| {statistics.median(w['wall']):.1f} ms | {_p95(w['wall']):.1f} ms |")
    every = [c for w in out["windows"].values() for c in w["cpu"]]
    print(f"\nevery window: CPU median {statistics.median(every):.1f} ms, p95 {_p95(every):.1f} ms "
          f"(target <= {TARGET_CPU_MS:.0f} ms p95: {'met' if _p95(every) <= TARGET_CPU_MS else 'NOT met'}); "
          f"worst size's p95 {worst:.1f} ms")
    return out


if __name__ == "__main__":
    main()
