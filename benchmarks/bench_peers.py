"""nbprofiler against its peers, in the same run, on the same files, wall time and CPU time.

* MindSpore shape (a bare JSON array with string ``ts``/``dur``, ``nbprofiler.synthetic.write_trace``),
  written as ``ascend_timeline_display_0.json``: MindInsight 2.3.1's timeline analyser
  (``get_display_timeline``, what its timeline page loads), nbprofiler's first open (empty cache), stdlib
  ``json.load`` + a pandas DataFrame of the "X" events (what a user would write by hand), and the duckdb
  parse floor.
* Kineto shape (``{"traceEvents": [...], ...}`` with numeric ``ts``/``dur``, ``kineto_trace.py``), as a
  ``trace_view.json``: Holistic Trace Analysis' trace parser (``Trace.parse_traces``), nbprofiler's first
  open, json + pandas, and nbprofiler on the same events as a bare array (the object form should cost no
  more).

MindInsight and HTA run in their own virtualenvs, created on demand under ``--venvs`` (default
``<repo>/.cache/bench-venvs``); a peer that cannot be installed is skipped with a message. Every
measurement runs in its own subprocess (its peak RSS is its own) and reports the wall time and the CPU time
(``time.process_time``: every thread of the child) of the parse alone. Every method runs ``--repeat`` times,
interleaved with the others, and each figure is the median of its runs; a method whose first run takes over
60 s runs once (its row says so). ``--busy N`` keeps N other processes busy (numpy work, one core each) for
the whole measurement: the "loaded" spell. Each row records the load average before and after its runs.
``--timeout S`` stops a run of json + pandas or of a peer that has not finished after S seconds.
Synthetic files go to ``--scratch``. ``--methods`` runs only the methods named (nbprofiler's first open
always runs, as every ratio's base; a shape none of whose other named methods reads is left out, unless
``--repo`` is given), and ``--repo DIR`` times nbprofiler's first open of each shape with another checkout
too, interleaved with this tree's, as the method "nbprofiler (DIR)" (an A/B in one spell). With the floor
in the run, each nbprofiler's wall and CPU time over the floor's is printed after the table.

    python benchmarks/bench_peers.py --quick                                # 10 MB
    python benchmarks/bench_peers.py --sizes 100 1000 --repeat 3            # quiet
    python benchmarks/bench_peers.py --sizes 100 1000 --repeat 3 --busy 1   # loaded: one core busy
    python benchmarks/bench_peers.py --sizes 100 --repeat 5 --methods nbprofiler floor --repo /tmp/main  # A/B

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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# HTA 0.5 assigns int64 indices into int16 columns, which pandas 3 refuses: it needs pandas 2.
PEERS = {"mindinsight": ["mindinsight==2.3.1"], "hta": ["HolisticTraceAnalysis==0.5.*", "pandas<3"]}
# A method whose first run takes longer than this runs once (minutes per run would make the spell hours).
LONG_RUN_S = 60.0
NAMES = {"nbprofiler": "nbprofiler first open", "nbprofiler_bare_array": "nbprofiler, same events as a bare array",
         "mindinsight": "MindInsight 2.3.1", "hta": "HTA 0.5", "json_pandas": "json + pandas",
         "floor": "duckdb parse floor"}
# The methods each shape compares with nbprofiler's first open (``--methods`` picks among them).
SHAPE_METHODS = {"ms": ("floor", "json_pandas", "mindinsight"),
                 "kineto": ("nbprofiler_bare_array", "json_pandas", "hta")}

# Each child prints {"events", "seconds", "cpu_seconds", "peak_rss_mb"}: wall time and CPU time of the parse
# only (imports excluded, every method's alike: a notebook or a server has them loaded), peak RSS of the
# whole child. The peers also print their package's version.
_CLOCK = r"""
import json, os, resource, sys, time
def report(n, wall, cpu, **more):
    print(json.dumps({"events": n, "seconds": wall, "cpu_seconds": cpu,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **more}))
"""
CHILDREN = {
    "nbprofiler": _CLOCK + r"""
import warnings
warnings.simplefilter("ignore")
os.environ["NBPROFILER_CACHE_DIR"] = sys.argv[2]
import nbprofiler
import duckdb, psutil  # what a first load imports (~60 ms with the modules below): not timed, as for the peers
from nbprofiler.io import cache, trace  # noqa: F401
t, c = time.perf_counter(), time.process_time()
prof = nbprofiler.load(sys.argv[1])
n = len(prof.timeline)
wall, cpu = time.perf_counter() - t, time.process_time() - c
# The load returns before the work it leaves on threads of its own (pairing the flows, writing the cache
# entry): timed apart, as what the first open costs in all.
len(prof.timeline_flows)
cache.wait()
wall_bg, cpu_bg = time.perf_counter() - t, time.process_time() - c
# What the session holds once that work is done: resident memory after the allocator's background thread
# has had time to return the pages freed (jemalloc's decay, ~1 s)
import gc
gc.collect()
time.sleep(2)
rss_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
report(n, wall, cpu, seconds_with_background=wall_bg, cpu_seconds_with_background=cpu_bg,
       settled_rss_mb=rss_kb / 1024)
""",
    "floor": _CLOCK + r"""
import duckdb  # not timed, as for the others
from nbprofiler.io.trace import parse as trace_parse
cols = "{" + ", ".join(f"{k}: '{v}'" for k, v in trace_parse._COLUMNS.items()) + "}"
lit = "'" + sys.argv[1].replace("'", "''") + "'"
t, c = time.perf_counter(), time.process_time()
# duckdb's read buffer as nbprofiler's first read sizes it (the fastest parse: see bench_trace_load)
table = trace_parse.query(f"SELECT * FROM read_json({lit}, format='array', columns={cols}, "
                           f"maximum_object_size={trace_parse._MAX_EVENT})")
n = int((table.column("ph").to_numpy(zero_copy_only=False) == "X").sum())
report(n, time.perf_counter() - t, time.process_time() - c)
""",
    "json_pandas": _CLOCK + r"""
import pandas as pd  # not timed, as for the others
t, c = time.perf_counter(), time.process_time()
with open(sys.argv[1], encoding="utf-8") as f:
    doc = json.load(f)
events = doc["traceEvents"] if isinstance(doc, dict) else doc
df = pd.DataFrame([e for e in events if e.get("ph") == "X"])
# MindSpore writes ts/dur as strings, Kineto as numbers: to_numeric takes both
df["ts"] = pd.to_numeric(df["ts"])
df["dur"] = pd.to_numeric(df["dur"])
report(len(df), time.perf_counter() - t, time.process_time() - c, version="pandas " + pd.__version__)
""",
    "mindinsight": _CLOCK + r"""
import logging, tempfile
from importlib.metadata import version
os.environ.setdefault("MINDINSIGHT_WORKSPACE", tempfile.mkdtemp(prefix="bench-mi-"))
logging.disable(logging.CRITICAL)
from mindinsight.profiler.analyser.analyser_factory import AnalyserFactory
t, c = time.perf_counter(), time.process_time()
events = AnalyserFactory.instance().get_analyser("timeline", sys.argv[1], "0").get_display_timeline("ascend", 0)
n = sum(1 for e in events if e.get("ph") == "X")
report(n, time.perf_counter() - t, time.process_time() - c, version="mindinsight " + version("mindinsight"))
""",
    "hta": _CLOCK + r"""
import logging
from importlib.metadata import version
logging.disable(logging.CRITICAL)
from hta.common.trace import Trace
t, c = time.perf_counter(), time.process_time()
trace = Trace(trace_files={0: sys.argv[1]}, trace_dir=sys.argv[2])
trace.parse_traces(use_multiprocessing=False, use_memory_profiling=False)
n = len(trace.get_trace(0))
report(n, time.perf_counter() - t, time.process_time() - c,
       version=f"HolisticTraceAnalysis {version('HolisticTraceAnalysis')}, pandas {version('pandas')}")
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


def measure(python, method: str, *args, timeout: float | None = None, repo: Path = REPO) -> dict:
    """One run of ``method`` in a fresh process with the checkout ``repo`` on its path: its child's figures,
    or ``{"stopped_after_s": timeout}`` when it had not finished after ``timeout`` seconds (the child is
    killed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]))
    try:
        # run in ``repo``: `-c` puts the working directory first on the path, before PYTHONPATH
        out = subprocess.run([str(python), "-c", CHILDREN[method], *map(str, args)], capture_output=True,
                             text=True, env=env, timeout=timeout, cwd=repo)
    except subprocess.TimeoutExpired:
        return {"stopped_after_s": timeout}
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


# One core's worth of someone else's work: numpy copying and sorting an 8 MB array (memory traffic as well
# as arithmetic), on one thread.
BUSY_WORK = r"""
import numpy as np
a = np.random.default_rng(0).random(1 << 20)
b = np.empty_like(a)
while True:
    b[:] = a
    b.sort()
"""


class Busy:
    """``n`` processes each keeping one core busy for the duration of a ``with`` block (the loaded spell)."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY_WORK], env=env) for _ in range(self.n)]
        if self.procs:
            time.sleep(2.0)  # numpy imported and the loop running before anything is measured
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a --busy process exited at once (code {p.returncode})")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def _load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _summary(runs: list[dict], repeat: int) -> dict:
    """One method's runs as its row: the median wall time, CPU time and peak RSS (each the median of its
    own runs), every run's figures under ``runs_*``, and a ``note`` when it ran fewer than ``repeat`` times
    or was stopped."""
    if "stopped_after_s" in runs[0]:
        return {"runs": 0, "stopped_after_s": runs[0]["stopped_after_s"],
                "note": f"stopped after {runs[0]['stopped_after_s']:.0f} s without finishing"}
    out = {"events": runs[0]["events"], "runs": len(runs),
           "seconds": statistics.median(m["seconds"] for m in runs),
           "cpu_seconds": statistics.median(m["cpu_seconds"] for m in runs),
           "peak_rss_mb": statistics.median(m["peak_rss_mb"] for m in runs),
           "runs_s": sorted(round(m["seconds"], 3) for m in runs),
           "runs_cpu_s": sorted(round(m["cpu_seconds"], 3) for m in runs),
           "runs_rss_mb": sorted(round(m["peak_rss_mb"]) for m in runs)}
    for key in ("seconds_with_background", "cpu_seconds_with_background", "settled_rss_mb"):
        if key in runs[0]:
            out[key] = statistics.median(m[key] for m in runs)
    if "version" in runs[0]:
        out["version"] = runs[0]["version"]
    if len(runs) < repeat:
        out["note"] = f"run once: its first run took {runs[0]['seconds']:.0f} s (> {LONG_RUN_S:.0f} s)"
    return out


def _interleaved(repeat: int, long_run_s: float = LONG_RUN_S, **runs) -> dict:
    """Each of ``runs`` (name -> a function measuring once) ``repeat`` times, in turn, so that the machine's
    mood falls on every method alike; a method whose first run took over ``long_run_s`` (or was stopped) is
    not run again.
    Per name its ``_summary``."""
    done = {name: [] for name in runs}
    for i in range(repeat):
        for name, once in runs.items():
            if i and done[name][0].get("seconds", long_run_s + 1) > long_run_s:
                continue
            done[name].append(once())
    return {name: _summary(ms, repeat) for name, ms in done.items()}


def _row(m: dict, size_mb: float, base: dict) -> dict:
    """A method's figures for the JSON row, with its wall and CPU time over nbprofiler's (``base``)."""
    if "stopped_after_s" in m:
        return m
    row = {"events": m["events"], "seconds": round(m["seconds"], 3), "cpu_seconds": round(m["cpu_seconds"], 3),
           "mb_per_s": round(size_mb / m["seconds"], 1), "peak_rss_mb": round(m["peak_rss_mb"], 1),
           "peak_x_file": round(m["peak_rss_mb"] / size_mb, 2),
           "x_nbprofiler": round(m["seconds"] / base["seconds"], 2),
           "x_nbprofiler_cpu": round(m["cpu_seconds"] / base["cpu_seconds"], 2)}
    for key in ("seconds_with_background", "cpu_seconds_with_background", "settled_rss_mb"):
        if key in m:
            row[key] = round(m[key], 3)
    return {**row, **{k: m[k] for k in ("runs", "note", "version", "runs_s", "runs_cpu_s", "runs_rss_mb") if k in m}}


def _fresh(cache_dir: str) -> Path:
    """An empty cache directory under ``cache_dir``, so that every nbprofiler run is a first open."""
    return Path(tempfile.mkdtemp(dir=cache_dir))


def _shape_row(shape: str, size_mb: float, repeat: int, busy: int, runs: dict) -> dict:
    """One shape's JSON row from the functions measuring each method once (nbprofiler's first)."""
    load_before = _load_avg()
    m = _interleaved(repeat, **runs)
    row = {"shape": shape, "size_mb": round(size_mb, 1), "repeat": repeat, "busy": busy,
           "load_avg_before": load_before, "load_avg_after": _load_avg(),
           "methods": {name: _row(m[name], size_mb, m["nbprofiler"]) for name in runs}}
    return row


def repo_method(repo: Path) -> str:
    """The method name of nbprofiler's first open with the checkout ``repo`` (``--repo``)."""
    return f"nbprofiler ({repo})"


def shape_methods(shape: str, methods: list[str] | None) -> list[str]:
    """The methods ``shape`` ("ms" or "kineto") runs besides nbprofiler's first open: those of
    `SHAPE_METHODS` among ``methods`` (all of them when None); none when ``methods`` names none of them."""
    return [m for m in SHAPE_METHODS[shape] if methods is None or m in methods]


def with_floor_ratios(row: dict) -> dict:
    """``row`` with, when the floor ran, each nbprofiler first open's wall and CPU time over the floor's
    (``x_floor``, ``x_floor_cpu`` of that method; the row's own ``x_floor`` is this tree's wall ratio)."""
    floor = row["methods"].get("floor")
    if floor is None or "seconds" not in floor:
        return row
    for name, m in row["methods"].items():
        if name.startswith("nbprofiler") and "seconds" in m:
            m["x_floor"] = round(m["seconds"] / floor["seconds"], 2)
            m["x_floor_cpu"] = round(m["cpu_seconds"] / floor["cpu_seconds"], 2)
    row["x_floor"] = row["methods"]["nbprofiler"]["x_floor"]
    return row


def run(sizes: list[int], scratch: Path, venvs: Path, repeat: int = 5, busy: int = 0,
        timeout: float | None = None, methods: list[str] | None = None, repo: Path | None = None) -> list[dict]:
    """Every size's rows: the MindSpore shape, then the Kineto shape, each with the ``methods`` it has (all
    when None) and, with ``repo``, nbprofiler's first open with that checkout."""
    scratch.mkdir(parents=True, exist_ok=True)
    pythons = {name: peer_python(name, venvs) if methods is None or name in methods else None for name in PEERS}
    results = []
    for mb in sizes:
        f = _files(scratch, mb)  # written before the busy processes start
        with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-") as cache_dir, Busy(busy):
            ms, kineto = f["files"]["ms"], f["files"]["kineto"]
            first_open = {"ms": f["ms"], "kineto": f["kineto"]}
            others = {"floor": lambda: measure(sys.executable, "floor", ms),
                      "nbprofiler_bare_array": lambda: measure(sys.executable, "nbprofiler", f["kineto_bare"],
                                                               _fresh(cache_dir))}
            for shape, label, file in (("ms", "MindSpore (bare array)", ms), ("kineto", "Kineto (object)", kineto)):
                chosen = shape_methods(shape, methods)
                if not chosen and repo is None:
                    continue
                runs = {"nbprofiler": lambda shape=shape: measure(sys.executable, "nbprofiler", first_open[shape],
                                                                  _fresh(cache_dir))}
                if repo is not None:
                    runs[repo_method(repo)] = lambda shape=shape: measure(
                        sys.executable, "nbprofiler", first_open[shape], _fresh(cache_dir), repo=repo)
                for name in chosen:
                    if name == "json_pandas":
                        runs[name] = lambda file=file: measure(sys.executable, "json_pandas", file, timeout=timeout)
                    elif name == "mindinsight" and pythons["mindinsight"]:
                        runs[name] = lambda: measure(pythons["mindinsight"], "mindinsight", f["ms"], timeout=timeout)
                    elif name == "hta" and pythons["hta"]:
                        runs[name] = lambda: measure(pythons["hta"], "hta", kineto, f["kineto"], timeout=timeout)
                    elif name in others:
                        runs[name] = others[name]
                row = with_floor_ratios(_shape_row(label, file.stat().st_size / 1e6, repeat, busy, runs))
                if "nbprofiler_bare_array" in row["methods"]:
                    row["x_object_vs_array"] = round(1 / row["methods"]["nbprofiler_bare_array"]["x_nbprofiler"], 2)
                results.append(row)
                print(json.dumps(row), flush=True)
    return results


def markdown(results: list[dict]) -> str:
    """The results as the README's table: one line per trace and method, wall and CPU time beside their
    ratio to nbprofiler's first open of the same file, peak RSS (and nbprofiler's resident memory once its
    background work is done), runs, and the load average around them."""
    lines = ["| trace | method | wall | CPU | wall ÷ nbprofiler's | CPU ÷ nbprofiler's | peak RSS | runs | "
             "load avg (1 min, before → after) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        shape = r["shape"].split(" ")[0]
        for i, (name, m) in enumerate(r["methods"].items()):
            first = i == 0
            trace = f"{shape} shape, {r['size_mb']:.0f} MB" if first else ""
            load = f"{r['load_avg_before'][0]:.2f} → {r['load_avg_after'][0]:.2f}" if first else ""
            if "stopped_after_s" in m:
                lines.append(f"| {trace} | {NAMES.get(name, name)} | > {m['stopped_after_s']:.0f} s (stopped) | – | "
                             f"– | – | – | 0 | {load} |")
                continue
            ratios = ("–", "–") if name == "nbprofiler" else (f"{m['x_nbprofiler']:.2f}×",
                                                              f"{m['x_nbprofiler_cpu']:.2f}×")
            settled = f" ({m['settled_rss_mb']:.0f} MB settled)" if "settled_rss_mb" in m else ""
            lines.append(f"| {trace} | {NAMES.get(name, name)} | "
                         f"{m['seconds']:.2f} s | {m['cpu_seconds']:.2f} s | {ratios[0]} | {ratios[1]} | "
                         f"{m['peak_rss_mb']:.0f} MB{settled} | {m['runs']} | {load} |")
    return "\n".join(lines)


def floor_lines(results: list[dict]) -> str:
    """One line per row with the floor and per nbprofiler first open in it: its wall and CPU time over the
    floor's."""
    lines = []
    for r in results:
        for name, m in r["methods"].items():
            if "x_floor_cpu" in m:
                lines.append(f"{r['shape'].split(' ')[0]} shape, {r['size_mb']:.0f} MB: {NAMES.get(name, name)} "
                             f"÷ duckdb parse floor: wall {m['x_floor']:.2f}×, CPU {m['x_floor_cpu']:.2f}×")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only 10 MB")
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 100], help="trace sizes in MB")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-peers")
    ap.add_argument("--venvs", type=Path, default=REPO / ".cache" / "bench-venvs")
    ap.add_argument("--out", type=Path, help="also write the results as JSON here")
    ap.add_argument("--repeat", type=int, default=5,
                    help=f"interleaved runs of every method (their median; one where it takes > {LONG_RUN_S:.0f} s)")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="keep N other processes busy (one core each) while measuring: the loaded spell")
    ap.add_argument("--timeout", type=float, metavar="S",
                    help="stop a run of json + pandas or a peer after S seconds (its row says so)")
    ap.add_argument("--methods", nargs="+", choices=sorted(set(NAMES) - {"nbprofiler"}) + ["nbprofiler"],
                    help="run only these methods (nbprofiler's first open always runs), e.g. --methods "
                         "nbprofiler floor")
    ap.add_argument("--repo", type=Path, help="also time nbprofiler's first open with this checkout, interleaved "
                                              "(A/B), e.g. an export of main")
    args = ap.parse_args(argv)
    repo = args.repo.resolve() if args.repo else None
    for tree in [REPO] + ([repo] if repo else []):
        # as an installed package is: compiled once (this machine's environment may say not to write bytecode,
        # and every fresh process then compiled the modules a load imports as it runs)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "nbprofiler")], check=True)
    results = run([10] if args.quick else args.sizes, args.scratch, args.venvs, args.repeat, args.busy, args.timeout,
                  args.methods, repo)
    print(markdown(results), flush=True)
    if any("x_floor_cpu" in m for r in results for m in r["methods"].values()):
        print(floor_lines(results), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
