"""A trace larger than memory: a 10 GB synthetic MindSpore-shaped trace opened, its dashboard shown (every
tab's first open) and its timeline zoomed, in a fresh process, then opened again from its cached store;
peak RSS of each, next to two streaming duckdb parses of the same file (the floors, same run): a count of its X
events reading five fields (``count``), and the fields nbprofiler's reader reads, handed over as Arrow record
batches of its size on one thread, as its reader does, and dropped (``fields``; the floor of the peers' table,
`bench_peers.py`, streamed instead of held: 10 GB of Arrow would not fit). The first open does at least what
the second does.

    python benchmarks/bench_big_trace.py              # 10 GB (generated once, ~2 min, 10 GB of disk)
    python benchmarks/bench_big_trace.py --gb 1       # the same path on 1 GB (forced on disk)
    python benchmarks/bench_big_trace.py --dispatch --against /tmp/before   # the host-dispatch analysis alone
    python benchmarks/bench_big_trace.py --phases     # the first open's phases, beside the fields floor
    python benchmarks/bench_big_trace.py --io         # the first open's user and system time, faults and I/O

``--dispatch``: in fresh processes after a cached open (the store kept in ``--cache``, built by a first
open), ``profile_dispatch(prof)`` alone: its CPU and wall time, the peak RSS above the open (Linux: the
peak is reset after the open) and what it leaves held; ``--against`` a checkout of another tree, run
alternately with this one, ``--repeat`` times each.

``--phases``: the first open (empty cache) in a fresh process, phase by phase: the read (the reader
thread parsing while this one digests each batch), the assembly of the timeline's columns, the scope layers
marked, the counters ordered, and the flows' pairing (on a thread of its own from the assembly's start,
waited for before the store is renamed into place); each phase's wall span from the open's start and the
CPU time of the thread that ran it; beside the fields floor's wall and CPU time.

``--io``: the first open (empty cache) and the fields floor, alternating, ``--repeat`` fresh processes each:
the user and system CPU time of each (`getrusage`), its minor page faults and the bytes it wrote and read
(`/proc/self/io`: through the page cache, whether or not the disk was touched); and before each pair, the
machine's price of fresh pages: the system time a process takes to write 1 GB to a new file (removed
after), which the open pays for every page it writes and the floor, which writes nothing, does not. On a
virtual machine that hands free memory back to its host, it moves with what the machine did before. Linux
only.

Before each timed process that parses the trace, the trace is read through once, untimed (`warm`): each then
finds it in the page cache, whichever ran before it. A process that found it out of the cache would pay the
disk's read, and a ratio would say which of the two ran first (a 1.64x and a 1.02x in benchmarks/README.md).

The trace is written to ``--scratch`` (default: $TMPDIR/nbprofiler-bench-big) and kept for later runs.
Targets: peak RSS <= 3 GB for the first open + dashboard + zooms; the cached re-open <= 1 s.
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

# Both children: the run, its cache directory and whether the trace is forced on disk, from the command line.
PRELUDE = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
run, cache_dir, force = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
os.environ["NBPROFILER_CACHE_DIR"] = cache_dir
if force:
    os.environ["NBPROFILER_TRACE_ON_DISK"] = "1"
import nbprofiler
"""

CHILD = PRELUDE + r"""
import resource
from benchmarks.bench_dashboard import time_dashboard
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"load_1min": os.getloadavg()[0], "import_peak_mb": peak()}
t, c = time.perf_counter(), time.process_time()
prof = nbprofiler.load(run)
tl = prof.timeline
out["events"], out["on_disk"] = len(tl), "store" in tl.attrs
out["open_s"], out["open_cpu_s"], out["open_peak_mb"] = time.perf_counter() - t, time.process_time() - c, peak()
c = time.process_time()
dash, out["dashboard_s"], out["tabs_s"] = time_dashboard(prof)
out["dashboard_tabs_cpu_s"] = time.process_time() - c
view = dash.views.get("Timeline")
view.levels_built.join()
lo, hi = view.x_range.bounds  # the view's own extent (a pass over the columns here would add to the peak)
out["zoom_ms"] = {}
for frac in (0.0001, 0.01, 0.1, 1.0):
    worst = 0.0
    for k in range(5):
        mid, width = lo + (hi - lo) * (0.2 + 0.12 * k), (hi - lo) * frac
        t0, t1 = (lo, hi) if frac == 1.0 else (mid - width / 2, mid + width / 2)
        t = time.perf_counter()
        view.set_window(t0, t1)
        worst = max(worst, (time.perf_counter() - t) * 1000)
    out["zoom_ms"][str(frac)] = worst
out["peak_mb"] = peak()
out["load_1min_end"] = os.getloadavg()[0]
print(json.dumps(out))
"""

DISPATCH = PRELUDE + r"""
from nbprofiler.analysis.dispatch import profile_dispatch
def rss():
    d = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(d["VmRSS"].split()[0]) / 1024, int(d["VmHWM"].split()[0]) / 1024
out = {"load_1min": os.getloadavg()[0]}
t, c = time.perf_counter(), time.process_time()
prof = nbprofiler.load(run)
prof.timeline, prof.timeline_tracks, prof.timeline_flows
out["open_s"], out["open_cpu_s"] = time.perf_counter() - t, time.process_time() - c
out["on_disk"], out["open_mb"] = "store" in prof.timeline.attrs, rss()[0]
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak from here on is the analysis's
t, c = time.perf_counter(), time.process_time()
d = profile_dispatch(prof)
out["wall_s"], out["cpu_s"] = time.perf_counter() - t, time.process_time() - c
out["after_mb"], out["peak_mb"] = rss()
out["sentence"], out["source"] = d.sentence(), nbprofiler.__file__
print(json.dumps(out))
"""

PHASES = PRELUDE + r"""
from nbprofiler.io.trace import disk, flows
t0, c0 = time.perf_counter(), time.process_time()
phases = []
def timed(owner, name, label):
    f = getattr(owner, name)
    def run(*a, **k):
        t, th = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            phases.append({"phase": label, "from_s": t - t0, "to_s": time.perf_counter() - t0,
                           "thread_cpu_s": time.thread_time() - th})
    setattr(owner, name, run)
timed(disk, "_parse", "read")
timed(disk, "_assemble", "assembly")
timed(disk, "_mark_scope_layers", "scope layers")
timed(disk, "_counters", "counters")
timed(flows.SpilledFlows, "pair", "flows paired (own thread)")
out = {"load_1min": os.getloadavg()[0]}
prof = nbprofiler.load(run)
out["events"], out["on_disk"] = len(prof.timeline), "store" in prof.timeline.attrs
out["open_s"], out["open_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
out["phases"] = sorted(phases, key=lambda p: p["from_s"])
out["load_1min_end"] = os.getloadavg()[0]
print(json.dumps(out))
"""

FLOOR = r"""
import json, resource, sys, time
import duckdb
path = sys.argv[1]
t, c = time.perf_counter(), time.process_time()
con = duckdb.connect(config={"temp_directory": ""})
con.execute("SET enable_progress_bar = false")  # it would print to stdout on a long query
n = con.execute("SELECT count(*) FROM read_json(?, format='array', columns={ph: 'VARCHAR', ts: 'VARCHAR', "
            "dur: 'VARCHAR', name: 'VARCHAR', args: 'JSON'}) WHERE ph = 'X'", [path]).fetchone()[0]
print(json.dumps({"events": n, "seconds": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FIELDS_SETUP = r"""
import json, os, resource, sys, time
from nbprofiler.io.trace import parse as trace_parse
source = trace_parse._read_json(sys.argv[1], "array", trace_parse._COLUMNS, trace_parse._MAX_EVENT)
"""

FIELDS_READ = r"""
t, c = time.perf_counter(), time.process_time()
con = trace_parse._connection()  # the reader's own settings: one thread, a 1 MB streaming buffer
rel = con.sql(f"SELECT * FROM {source}")
n = 0
for batch in rel.to_arrow_reader(trace_parse._BATCH_ROWS):
    n += batch.num_rows
"""

FIELDS_FLOOR = FIELDS_SETUP + FIELDS_READ + r"""
print(json.dumps({"events": n, "seconds": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


# The open and the fields floor, timed from IO_START to IO_USAGE: the CPU split, the minor faults, the bytes
# through the page cache.
IO_START = r"""
import resource as _resource
def _usage():
    r = _resource.getrusage(_resource.RUSAGE_SELF)
    io = {k: int(v) for k, v in (line.split(":") for line in open("/proc/self/io"))}
    return {"user_s": r.ru_utime, "sys_s": r.ru_stime, "minflt": r.ru_minflt, "written_gb": io["wchar"] / 1e9,
            "read_gb": io["rchar"] / 1e9}
_before = _usage()
"""

IO_USAGE = r"""
_after = _usage()
print(json.dumps({"wall_s": time.perf_counter() - t, **{k: _after[k] - _before[k] for k in _before},
                  "load_1min": os.getloadavg()[0]}))
"""

IO_OPEN = PRELUDE + r"""
from nbprofiler.io import cache
""" + IO_START + r"""
t = time.perf_counter()
prof = nbprofiler.load(run)
len(prof.timeline), len(prof.timeline_flows)
cache.wait()
""" + IO_USAGE

IO_FLOOR = FIELDS_SETUP + IO_START + FIELDS_READ + IO_USAGE

# 1 GB written to a new file through the page cache, one 1 MB buffer again and again: the system time of it.
FRESH_PAGES = r"""
import json, os, resource, sys
path, block = sys.argv[1], bytes(1 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_stime
with open(path, "wb") as f:
    for _ in range(1000):
        f.write(block)
sys_s = resource.getrusage(resource.RUSAGE_SELF).ru_stime - before
os.unlink(path)
print(json.dumps({"sys_s_per_gb": sys_s / (1000 * (1 << 20) / 1e9)}))
"""


def ensure_trace(scratch: Path, gb: float) -> Path:
    from nbprofiler.synthetic import write_trace
    run = scratch / f"run_{gb:g}GB"
    path = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"writing a {gb:g} GB trace to {path} ...", file=sys.stderr)
        write_trace(path.with_suffix(".part"), int(gb * 1e9), seed=1)
        path.with_suffix(".part").rename(path)
    return run


def warm(path: Path | str) -> None:
    """Read ``path`` through once (into the page cache, where memory allows), in 16 MB reads."""
    buf = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def _child(code: str, *args: str, tree: Path = REPO) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    # not in the repository: `-c` puts the working directory first on the path, before ``tree``
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())
    if out.returncode:
        raise SystemExit(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=10.0, help="trace size in GB (default 10)")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-big")
    ap.add_argument("--dispatch", action="store_true", help="time the host-dispatch analysis alone")
    ap.add_argument("--against", type=Path, help="with --dispatch: another checkout to compare with")
    ap.add_argument("--repeat", type=int, default=3, help="with --dispatch or --io: fresh processes each")
    ap.add_argument("--cache", type=Path, help="with --dispatch: where the store is kept (default: in --scratch)")
    ap.add_argument("--phases", action="store_true", help="the first open's phases, beside the fields floor")
    ap.add_argument("--io", action="store_true",
                    help="the first open's and the fields floor's user/system time, faults and I/O (--repeat each)")
    args = ap.parse_args(argv)
    run = ensure_trace(args.scratch, args.gb)
    size = next(run.rglob("trace_view.json")).stat().st_size
    force = "1" if args.gb < 5 else "0"  # below that the machine holds it in memory: force the disk path
    if args.dispatch:
        return dispatch_alone(run, args.cache or args.scratch / f"cache_{args.gb:g}GB", force, args.against,
                              args.repeat)
    if args.phases:
        return phases(run, args.scratch, force)
    if args.io:
        return io_split(run, args.scratch, force, args.repeat)
    trace = next(run.rglob("trace_view.json"))
    warm(trace)
    floor = _child(FLOOR, str(trace))
    warm(trace)
    fields = _child(FIELDS_FLOOR, str(trace))
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-", dir=args.scratch) as cache:
        warm(trace)
        first = _child(CHILD, str(run), cache, force)
        again = _child(CHILD, str(run), cache, force)
    result = {"bytes": size, "floor": floor, "fields_floor": fields, "first": first, "cached": again}
    print(json.dumps(result))
    gb = size / 1e9
    print("\n| trace | events | streaming parse floors (count; fields), wall / CPU | first open, wall / CPU | "
          "cached re-open | dashboard + all tabs, wall / CPU | slowest zoom | peak RSS (first / cached) | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    tabs = sum(first["tabs_s"].values()) + first["dashboard_s"]

    def over(f):
        return f"{first['open_s'] / f['seconds']:.2f}x / {first['open_cpu_s'] / f['cpu_s']:.2f}x"
    print(f"| {gb:.1f} GB | {first['events']:,} | {floor['seconds']:.0f} / {floor['cpu_s']:.0f} s; "
          f"{fields['seconds']:.0f} / {fields['cpu_s']:.0f} s "
          f"| {first['open_s']:.0f} / {first['open_cpu_s']:.0f} s ({over(floor)} the count floor, "
          f"{over(fields)} the fields floor) | {again['open_s']:.2f} s "
          f"| {tabs:.1f} / {first['dashboard_tabs_cpu_s']:.1f} s | "
          f"{max(first['zoom_ms'].values()):.0f} ms | {first['peak_mb'] / 1024:.2f} / "
          f"{again['peak_mb'] / 1024:.2f} GiB ({first['peak_mb'] * 2**20 / 1e9:.2f} / "
          f"{again['peak_mb'] * 2**20 / 1e9:.2f} GB) | {first['load_1min']:.1f}-{first['load_1min_end']:.1f} |")
    return result


def phases(run: Path, scratch: Path, force: str) -> dict:
    """The first open phase by phase, then the fields floor, each in a fresh process."""
    trace = next(run.rglob("trace_view.json"))
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-", dir=scratch) as cache:
        warm(trace)
        first = _child(PHASES, str(run), cache, force)
    warm(trace)
    fields = _child(FIELDS_FLOOR, str(trace))
    result = {"first": first, "fields_floor": fields}
    print(json.dumps(result))
    print(f"\nfirst open {first['open_s']:.1f} s wall, {first['open_cpu_s']:.1f} s CPU ({first['events']:,} events, "
          f"on disk: {first['on_disk']}, load {first['load_1min']:.1f}-{first['load_1min_end']:.1f}); "
          f"fields floor {fields['seconds']:.1f} s wall, {fields['cpu_s']:.1f} s CPU\n")
    print("| phase | from | to | wall | CPU of its thread |")
    print("|---|---|---|---|---|")
    for p in first["phases"]:
        print(f"| {p['phase']} | {p['from_s']:.1f} s | {p['to_s']:.1f} s | {p['to_s'] - p['from_s']:.1f} s "
              f"| {p['thread_cpu_s']:.1f} s |")
    return result


def io_split(run: Path, scratch: Path, force: str, repeat: int) -> dict:
    """The first open (an empty cache each time) and the fields floor, alternating, ``repeat`` times each,
    each pair after the price of fresh pages."""
    trace_path = str(next(run.rglob("trace_view.json")))
    runs: dict[str, list] = {"fresh pages": [], "fields floor": [], "first open": []}
    for _ in range(repeat):
        runs["fresh pages"].append(_child(FRESH_PAGES, str(scratch / "fresh-pages.bin")))
        warm(trace_path)
        runs["fields floor"].append(_child(IO_FLOOR, trace_path))
        with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-", dir=scratch) as cache:
            warm(trace_path)
            runs["first open"].append(_child(IO_OPEN, str(run), cache, force))
    print(json.dumps(runs))
    print("\n| run | wall s | user s | system s | CPU ÷ the floor's before it | minor faults | written GB | read GB "
          "| load avg | fresh pages before it, system s per GB written |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in range(repeat):
        floor_cpu = runs["fields floor"][k]["user_s"] + runs["fields floor"][k]["sys_s"]
        for name in ("fields floor", "first open"):
            r = runs[name][k]
            ratio = f"{(r['user_s'] + r['sys_s']) / floor_cpu:.2f}x" if name == "first open" else ""
            fresh = f"{runs['fresh pages'][k]['sys_s_per_gb']:.2f}" if name == "fields floor" else ""
            print(f"| {name} {k + 1} | {r['wall_s']:.1f} | {r['user_s']:.1f} | {r['sys_s']:.1f} | {ratio} "
                  f"| {r['minflt']:,} | {r['written_gb']:.2f} | {r['read_gb']:.2f} | {r['load_1min']:.1f} | {fresh} |")
    return runs


def dispatch_alone(run: Path, cache: Path, force: str, against: Path | None, repeat: int) -> dict:
    """``profile_dispatch`` alone after a cached open, ``repeat`` fresh processes per tree, alternating."""
    trees = {"this tree": REPO} | ({"against": against} if against else {})
    _child(DISPATCH, str(run), str(cache), force)  # builds the store if there is none yet; not counted
    runs = {name: [] for name in trees}
    for _ in range(repeat):
        for name, tree in trees.items():
            runs[name].append(_child(DISPATCH, str(run), str(cache), force, tree=tree))
    print(json.dumps(runs))
    print("\n| tree | CPU s | wall s | peak RSS above the open | held after, vs the open | the cached open, CPU / wall s "
          "| load avg |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in runs.items():
        def col(f, fmt):
            vals = sorted(f(r) for r in rs)
            return f"{fmt.format(vals[len(vals) // 2])} ({' / '.join(fmt.format(f(r)) for r in rs)})"
        print(f"| {name} | {col(lambda r: r['cpu_s'], '{:.2f}')} | {col(lambda r: r['wall_s'], '{:.1f}')} | "
              f"{col(lambda r: (r['peak_mb'] - r['open_mb']) * 2**20 / 1e9, '{:+.2f} GB')} | "
              f"{col(lambda r: (r['after_mb'] - r['open_mb']) * 2**20 / 1e9, '{:+.2f} GB')} | "
              f"{col(lambda r: r['open_cpu_s'], '{:.2f}')} / {col(lambda r: r['open_s'], '{:.2f}')} | "
              f"{min(r['load_1min'] for r in rs):.1f}-{max(r['load_1min'] for r in rs):.1f} |")
    if len({r["sentence"] for rs in runs.values() for r in rs}) > 1:
        print("the trees' findings differ")
    for name, rs in runs.items():
        print(f"{name}: {rs[0]['source']}")
    return runs


if __name__ == "__main__":
    main()
