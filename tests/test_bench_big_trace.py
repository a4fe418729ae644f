"""benchmarks/bench_big_trace.py --io runs end to end on a small trace forced on disk (timings are the
benchmark's to report, never asserted; what it counts is)."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def test_benchmark_big_trace_io_split(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        "bench_big_trace", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_big_trace.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = bench.main(["--gb", "0.005", "--io", "--repeat", "1", "--scratch", str(tmp_path)])
    size = next(tmp_path.rglob("trace_view.json")).stat().st_size / 1e9
    (floor,), (first,), (fresh,) = runs["fields floor"], runs["first open"], runs["fresh pages"]
    # the floor reads the trace and writes nothing; the open reads it and writes its store on disk
    assert floor["read_gb"] >= size and floor["written_gb"] < 0.01 * size
    assert first["read_gb"] >= size and first["written_gb"] > 0.1 * size
    for r in (floor, first):
        assert r["user_s"] > 0 and r["sys_s"] >= 0 and r["minflt"] > 0 and r["wall_s"] > 0
    out = capsys.readouterr().out
    assert "| fields floor 1 |" in out and "| first open 1 |" in out
    assert not list(tmp_path.glob("nbprofiler-bench-cache-*"))   # each open's cache is removed
    assert fresh["sys_s_per_gb"] >= 0 and not (tmp_path / "fresh-pages.bin").exists()   # its file is removed too
