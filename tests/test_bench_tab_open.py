"""benchmarks/bench_tab_open.py --quick runs end to end (timings are the benchmark's to report, never asserted)."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def test_benchmark_tab_open_quick_mode():
    spec = importlib.util.spec_from_file_location(
        "bench_tab_open", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tab_open.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--quick"])
    (row,) = out["rows"]
    assert (row["run"], row["tab"], row["view"]) == ("md_bottleneck_map", "MindData", "MindDataView")
    assert row["cpu_s"] > 0 and row["wall_s"] > 0 and row["x_baseline"] > 0
    assert out["baseline"]["cpu_s"] > 0 and "load_1min" in row
    assert "| md_bottleneck_map | MindData | MindDataView |" in bench.markdown(out)
