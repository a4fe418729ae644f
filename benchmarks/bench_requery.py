"""What a zoom costs the notebook's kernel: `TimelineView.set_window` end to end (level-of-detail query, bar
columns, flows, counters, the Bokeh patch sent to the page), for windows of 0.01 % to all of a synthetic
MindSpore-shaped trace; CPU time (every thread of the process) and wall time, median and p95 of 20 windows
of each size, and the load average.

    python benchmarks/bench_requery.py --quick           # 100 MB (330k events), in a plain Python process
    python benchmarks/bench_requery.py                   # 1.5 GB (5M events, the size the target is set for)
    python benchmarks/bench_requery.py --kernel          # the same in an IPython kernel (jupyter_client)
    python benchmarks/bench_requery.py --repeat 3 --repo /tmp/before   # A/B against another checkout, interleaved

Each run is a fresh process importing this checkout's nbprofiler (``--repo``: that one's). In a plain process
the widget's comm is a dummy that drops its messages; ``--kernel`` runs the loop in a real ipykernel, where
each patch is also framed, signed and sent on the kernel's IOPub socket, as in JupyterLab (no page is
attached: `bench_browser_zoom.py` times the page). With ``--repeat`` the figures pool every run's windows.

Target (issue 38): <= 20 ms of kernel CPU per re-query, p95, at 5M events.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
TARGET_CPU_MS = 20.0
# Window sizes, as fractions of the trace: the view queries a window and one width on each side of it, so
# the 1 % and 3 % windows ask for 3 % and 9 % of the events, and a 30 % window cuts runs of the coarse
# levels at its edges.
FRACTIONS = (0.0001, 0.001, 0.01, 0.03, 0.1, 0.3, 1.0)

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
out = {{"events": len(tl), "load_before": os.getloadavg()[0], "windows": {{}}, "package": nbprofiler.__file__}}
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


def _env(repo: Path) -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]))


def run_process(code: str, repo: Path) -> dict:
    """``code`` in a fresh Python process importing ``repo``'s nbprofiler; its printed RESULT line."""
    # (run from the checkout: ``-c`` puts the working directory first on the path)
    done = subprocess.run([sys.executable, "-c", code], env=_env(repo), cwd=repo, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return _result(done.stdout)


def run_in_kernel(code: str, repo: Path) -> dict:
    """``code`` as a cell of a fresh ipykernel importing ``repo``'s nbprofiler; its printed RESULT line."""
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3", env=_env(repo), cwd=str(repo))
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


def report(label: str, runs: list[dict]) -> dict:
    """Print one checkout's table (every run's windows pooled) and return its figures."""
    print(f"\n{label} ({Path(runs[0]['package']).parent}): {runs[0]['events']:,} events; "
          "load average per run (before, after): "
          + ", ".join(f"{r['load_before']:.1f}-{r['load_after']:.1f}" for r in runs) + f"; {os.cpu_count()} cpu")
    print("\n| window | bars | CPU median | CPU p95 | wall median | wall p95 |")
    print("|---|---|---|---|---|---|")
    out = {}
    for frac in runs[0]["windows"]:
        cpu = [c for r in runs for c in r["windows"][frac]["cpu"]]
        wall = [c for r in runs for c in r["windows"][frac]["wall"]]
        out[frac] = {"bars": runs[0]["windows"][frac]["bars"], "cpu_median": statistics.median(cpu),
                     "cpu_p95": _p95(cpu), "wall_median": statistics.median(wall), "wall_p95": _p95(wall)}
        w = out[frac]
        print(f"| {float(frac):.2%} | {w['bars']:,} | {w['cpu_median']:.1f} ms | {w['cpu_p95']:.1f} ms "
              f"| {w['wall_median']:.1f} ms | {w['wall_p95']:.1f} ms |")
    every = [c for r in runs for w in r["windows"].values() for c in w["cpu"]]
    per_run = [_p95([c for w in r["windows"].values() for c in w["cpu"]]) for r in runs]
    worst = max(w["cpu_p95"] for w in out.values())
    print(f"\nevery window: CPU median {statistics.median(every):.1f} ms, p95 {_p95(every):.1f} ms "
          f"(each run's: {', '.join(f'{p:.1f}' for p in per_run)} ms; target <= {TARGET_CPU_MS:.0f} ms p95: "
          f"{'met' if _p95(every) <= TARGET_CPU_MS else 'NOT met'}); worst size's p95 {worst:.1f} ms")
    return {"windows": out, "cpu_median": statistics.median(every), "cpu_p95": _p95(every), "per_run_p95": per_run}


def main(argv=None) -> dict:
    from bench_dashboard import ensure_run
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 MB")
    ap.add_argument("--mb", type=int, default=1500, help="trace size in MB (~3,300 events per MB)")
    ap.add_argument("--windows", type=int, default=20, help="windows of each size")
    ap.add_argument("--kernel", action="store_true", help="run the loop in an ipykernel (messages really sent)")
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes per checkout (interleaved with --repo's)")
    ap.add_argument("--repo", type=Path, help="another checkout to time in the same spell (A/B), e.g. an "
                                               "export of main: git -C main archive HEAD | tar -x -C /tmp/before")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-dashboard")
    args = ap.parse_args(argv)
    run = ensure_run(args.scratch, 100 if args.quick else args.mb)
    code = LOOP.format(run=str(run), fractions=FRACTIONS, n=args.windows)
    repos = {"this checkout": REPO, **({f"--repo {args.repo}": args.repo.resolve()} if args.repo else {})}
    runs = {label: [] for label in repos}
    for _ in range(args.repeat):
        for label, repo in repos.items():
            runs[label].append(run_in_kernel(code, repo) if args.kernel else run_process(code, repo))
    print(f"in {'an ipykernel' if args.kernel else 'a plain Python process'} per run, {args.repeat} run(s) per "
          f"checkout, {args.windows} windows of each size per run")
    return {label: report(label, r) for label, r in runs.items()}


if __name__ == "__main__":
    main()
