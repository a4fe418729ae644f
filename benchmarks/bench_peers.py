"""nbprofiler against its peers, in the same run, on the same files.

* MindSpore shape (a bare JSON array with string ``ts``/``dur``, ``nbprofiler.synthetic.write_trace``),
  written as ``ascend_timeline_display_0.json``: MindInsight 2.3.1's timeline analyser
  (``get_display_timeline``, what its timeline page loads), nbprofiler's first open (empty cache), and
  the duckdb parse floor.
* Kineto shape (``{"traceEvents": [...], ...}`` with numeric ``ts``/``dur``, ``kineto_trace.py``), as a
  ``trace_view.json``: Holistic Trace Analysis' trace parser (``Trace.parse_traces``), nbprofiler's first
  open, and nbprofiler on the same events as a bare array (the object form should cost no more).

MindInsight and HTA run in their own virtualenvs, created on demand under ``--venvs`` (default
``<repo>/.cache/bench-venvs``); a peer that cannot be installed is skipped with a message. Every
measurement runs in its own subprocess (its peak RSS is its own); nbprofiler's runs and the floor are the
median of ``--repeat`` interleaved runs, the peers' (seconds to minutes each) one run. Synthetic files go to
``--scratch``.

    python benchmarks/bench_peers.py --quick          # 10 MB
    python benchmarks/bench_peers.py --sizes 100 1000

Prints one JSON object per size and shape, then a Markdown table (the README's peers table).
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
# HTA 0.5 assigns int64 indices into int16 columns, which pandas 3 refuses: it needs pandas 2.
PEERS = {"mindinsight": ["mindinsight==2.3.1"], "hta": ["HolisticTraceAnalysis", "pandas<3"]}

# Each child prints {"events", "seconds", "peak_rss_mb"}: wall time of the parse only (imports excluded,
# every method's alike: a notebook or a server has them loaded), peak RSS of the whole child.
CHILDREN = {
    "nbprofiler": r"""
import json, os, resource, sys, time, warnings
warnings.simplefilter("ignore")
os.environ["NBPROFILER_CACHE_DIR"] = sys.argv[2]
import nbprofiler
import duckdb, psutil  # what a first load imports (~60 ms with the modules below): not timed, as for the peers
from nbprofiler.io import cache, trace  # noqa: F401
t = time.perf_counter()
n = len(nbprofiler.load(sys.argv[1]).timeline)
secs = time.perf_counter() - t
cache.wait()
print(json.dumps({"events": n, "seconds": secs, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
    "floor": r"""
import json, resource, sys, time
import duckdb  # not timed, as for the others
from nbprofiler.io.trace import parse as trace_parse
cols = "{" + ", ".join(f"{k}: '{v}'" for k, v in trace_parse._COLUMNS.items()) + "}"
lit = "'" + sys.argv[1].replace("'", "''") + "'"
t = time.perf_counter()
# duckdb's read buffer as nbprofiler's first read sizes it (the fastest parse: see bench_trace_load)
table = trace_parse.query(f"SELECT * FROM read_json({lit}, format='array', columns={cols}, "
                           f"maximum_object_size={trace_parse._MAX_EVENT})")
n = int((table.column("ph").to_numpy(zero_copy_only=False) == "X").sum())
secs = time.perf_counter() - t
print(json.dumps({"events": n, "seconds": secs, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
    "mindinsight": r"""
import json, logging, os, resource, sys, tempfile, time
os.environ.setdefault("MINDINSIGHT_WORKSPACE", tempfile.mkdtemp(prefix="bench-mi-"))
logging.disable(logging.CRITICAL)
from mindinsight.profiler.analyser.analyser_factory import AnalyserFactory
t = time.perf_counter()
events = AnalyserFactory.instance().get_analyser("timeline", sys.argv[1], "0").get_display_timeline("ascend", 0)
n = sum(1 for e in events if e.get("ph") == "X")
secs = time.perf_counter() - t
print(json.dumps({"events": n, "seconds": secs, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
    "hta": r"""
import json, logging, resource, sys, time
logging.disable(logging.CRITICAL)
from hta.common.trace import Trace
t = time.perf_counter()
trace = Trace(trace_files={0: sys.argv[1]}, trace_dir=sys.argv[2])
trace.parse_traces(use_multiprocessing=False, use_memory_profiling=False)
n = len(trace.get_trace(0))
secs = time.perf_counter() - t
print(json.dumps({"events": n, "seconds": secs, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
}


def peer_python(name: str, venvs: Path) -> Path | None:
    """The python of ``name``'s virtualenv, created and installed on first use; None (with a message)
    when it cannot be installed here."""
    venv = venvs / name
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return python
    print(f"[peers] installing {' '.join(PEERS[name])} into {venv} (once)", file=sys.stderr, flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEERS[name]], check=True,
                       stdout=subprocess.DEVNULL)
    except (subprocess.CalledProcessError, OSError) as err:
        print(f"[peers] skipping {name}: it could not be installed ({err})", file=sys.stderr, flush=True)
        return None
    marker.write_text("ok\n")
    return python


def measure(python, method: str, *args) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([str(python), "-c", CHILDREN[method], *map(str, args)], capture_output=True, text=True,
                         env=env)
    if out.returncode:
        raise RuntimeError(f"{method} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _files(scratch: Path, mb: int) -> dict:
    """The synthetic inputs of one size, written once: ``ms`` (a folder holding
    ascend_timeline_display_0.json), ``kineto`` / ``kineto_bare`` (folders with ASCEND_PROFILER_OUTPUT/
    trace_view.json, object and bare-array forms of the same events)."""
    sys.path.insert(0, str(HERE))
    from kineto_trace import write_kineto_trace
    from nbprofiler.synthetic import write_trace
    out = {"ms": scratch / f"ms_{mb}MB", "kineto": scratch / f"kineto_{mb}MB", "kineto_bare": scratch / f"bare_{mb}MB"}
    targets = {"ms": out["ms"] / "ascend_timeline_display_0.json",
               "kineto": out["kineto"] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json",
               "kineto_bare": out["kineto_bare"] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"}
    for key, path in targets.items():
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        if key == "ms":
            write_trace(tmp, mb * 1_000_000, seed=1)
        else:
            write_kineto_trace(tmp, mb * 1_000_000, seed=1, array_at="last" if key == "kineto" else "bare")
        tmp.rename(path)
    out["files"] = targets
    return out


def _row(m: dict, size_mb: float) -> dict:
    return {"events": m["events"], "seconds": round(m["seconds"], 3), "mb_per_s": round(size_mb / m["seconds"], 1),
            "peak_rss_mb": round(m["peak_rss_mb"], 1), "peak_x_file": round(m["peak_rss_mb"] / size_mb, 2),
            **{k: m[k] for k in ("runs_s", "runs_rss_mb") if k in m}}


def _fresh(cache_dir: str) -> Path:
    """An empty cache directory under ``cache_dir``, so that every nbprofiler run is a first open."""
    return Path(tempfile.mkdtemp(dir=cache_dir))


def _interleaved(repeat: int, **runs) -> dict:
    """Each of ``runs`` (name -> a function measuring once) ``repeat`` times, in turn; per name the run of
    median time with the median peak RSS (a run's peak varies: at 100 MB by ~35 MB, with how many batches
    wait in the reader's queue), every run's seconds under ``runs_s`` and peaks under ``runs_rss_mb``."""
    done = {name: [] for name in runs}
    for _ in range(repeat):
        for name, once in runs.items():
            done[name].append(once())
    return {name: {**sorted(ms, key=lambda m: m["seconds"])[len(ms) // 2],
                   "peak_rss_mb": statistics.median(m["peak_rss_mb"] for m in ms),
                   "runs_s": sorted(round(m["seconds"], 3) for m in ms),
                   "runs_rss_mb": sorted(round(m["peak_rss_mb"]) for m in ms)} for name, ms in done.items()}


def run(sizes: list[int], scratch: Path, venvs: Path, repeat: int = 5) -> list[dict]:
    scratch.mkdir(parents=True, exist_ok=True)
    pythons = {name: peer_python(name, venvs) for name in PEERS}
    results = []
    for mb in sizes:
        f = _files(scratch, mb)
        with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-") as cache_dir:
            ms_mb = f["files"]["ms"].stat().st_size / 1e6
            # nbprofiler and the floor: the median of ``repeat`` interleaved runs (the cache is cleared before
            # each first open); the peers, seconds to minutes per run, once
            m = _interleaved(repeat, floor=lambda: measure(sys.executable, "floor", f["files"]["ms"]),
                             nbprofiler=lambda: measure(sys.executable, "nbprofiler", f["ms"], _fresh(cache_dir)))
            row = {"shape": "MindSpore (bare array)", "size_mb": round(ms_mb, 1), "repeat": repeat,
                   "floor": _row(m["floor"], ms_mb), "nbprofiler": _row(m["nbprofiler"], ms_mb)}
            if pythons["mindinsight"]:
                row["mindinsight"] = _row(measure(pythons["mindinsight"], "mindinsight", f["ms"]), ms_mb)
                row["x_mindinsight"] = round(row["mindinsight"]["seconds"] / row["nbprofiler"]["seconds"], 2)
            row["x_floor"] = round(row["nbprofiler"]["seconds"] / row["floor"]["seconds"], 2)
            results.append(row)
            print(json.dumps(row), flush=True)
            k_mb = f["files"]["kineto"].stat().st_size / 1e6
            m = _interleaved(repeat, object=lambda: measure(sys.executable, "nbprofiler", f["kineto"], _fresh(cache_dir)),
                             array=lambda: measure(sys.executable, "nbprofiler", f["kineto_bare"], _fresh(cache_dir)))
            row = {"shape": "Kineto (object)", "size_mb": round(k_mb, 1), "repeat": repeat,
                   "nbprofiler": _row(m["object"], k_mb), "nbprofiler_bare_array": _row(m["array"], k_mb)}
            row["x_object_vs_array"] = round(row["nbprofiler"]["seconds"] / row["nbprofiler_bare_array"]["seconds"], 2)
            if pythons["hta"]:
                row["hta"] = _row(measure(pythons["hta"], "hta", f["files"]["kineto"], f["kineto"]), k_mb)
                row["x_hta"] = round(row["hta"]["seconds"] / row["nbprofiler"]["seconds"], 2)
            results.append(row)
            print(json.dumps(row), flush=True)
    return results


def markdown(results: list[dict]) -> str:
    def cell(row, key, ratio=None):
        m = row.get(key)
        if not m:
            return "–"
        text = f"{m['seconds']:.2f} s, {m['peak_rss_mb']:.0f} MB"
        return f"{text} ({row[ratio]}x nbprofiler's time)" if ratio and ratio in row else text
    lines = ["| trace | nbprofiler first open | MindInsight 2.3.1 | HTA | duckdb parse floor | "
             "nbprofiler, same events as a bare array |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['shape']}, {r['size_mb']:.0f} MB | {cell(r, 'nbprofiler')} | "
                     f"{cell(r, 'mindinsight', 'x_mindinsight')} | {cell(r, 'hta', 'x_hta')} | {cell(r, 'floor')} | "
                     f"{cell(r, 'nbprofiler_bare_array')} |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only 10 MB")
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 100], help="trace sizes in MB")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-peers")
    ap.add_argument("--venvs", type=Path, default=REPO / ".cache" / "bench-venvs")
    ap.add_argument("--out", type=Path, help="also write the results as JSON here")
    ap.add_argument("--repeat", type=int, default=5, help="runs of nbprofiler and the floor (median reported)")
    args = ap.parse_args(argv)
    results = run([10] if args.quick else args.sizes, args.scratch, args.venvs, args.repeat)
    print(markdown(results), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
