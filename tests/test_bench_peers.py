"""benchmarks/bench_peers.py's pure helpers: the interleaving of the methods' runs (a long one runs once), the
medians and ratios of a row, the table (timings are the benchmark's to report, never asserted)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_peers", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs(*figures):
    """A stand-in for measuring a method once: returns the given (wall, cpu, rss) triples in turn."""
    it = iter(figures)

    def once():
        wall, cpu, rss = next(it)
        return {"events": 10, "seconds": wall, "cpu_seconds": cpu, "peak_rss_mb": rss}
    return once


def test_interleaved_runs_in_turn_and_a_long_method_once(bench):
    order = []
    fast = _runs((1.0, 1.5, 100), (3.0, 1.0, 300), (2.0, 2.5, 200))
    slow = _runs((90.0, 80.0, 900))

    def tracked(name, once):
        def run():
            order.append(name)
            return once()
        return run
    out = bench._interleaved(3, fast=tracked("fast", fast), slow=tracked("slow", slow))
    assert order == ["fast", "slow", "fast", "fast"]
    # each figure is the median of its own runs, not the figures of the median run
    assert (out["fast"]["seconds"], out["fast"]["cpu_seconds"], out["fast"]["peak_rss_mb"]) == (2.0, 1.5, 200)
    assert out["fast"]["runs"] == 3 and "note" not in out["fast"]
    assert out["fast"]["runs_s"] == [1.0, 2.0, 3.0] and out["fast"]["runs_cpu_s"] == [1.0, 1.5, 2.5]
    assert out["slow"]["runs"] == 1 and out["slow"]["note"] == "run once: its first run took 90 s (> 60 s)"


def test_rows_give_wall_and_cpu_ratios_to_nbprofiler_and_the_table_shows_both(bench):
    m = bench._interleaved(1, nbprofiler=_runs((0.5, 0.8, 290)), json_pandas=_runs((2.0, 2.0, 900)))
    row = {"shape": "MindSpore (bare array)", "size_mb": 100.0, "load_avg_before": [1.2, 1, 1],
           "load_avg_after": [1.9, 1, 1],
           "methods": {name: bench._row(m[name], 100.0, m["nbprofiler"]) for name in m}}
    jp = row["methods"]["json_pandas"]
    assert (jp["x_nbprofiler"], jp["x_nbprofiler_cpu"], jp["mb_per_s"], jp["peak_x_file"]) == (4.0, 2.5, 50.0, 9.0)
    table = bench.markdown([row]).splitlines()
    assert table[2] == ("| MindSpore shape, 100 MB | nbprofiler first open | 0.50 s | 0.80 s | – | – | 290 MB | "
                        "1 | 1.20 → 1.90 |")
    assert table[3] == "|  | json + pandas | 2.00 s | 2.00 s | 4.00× | 2.50× | 900 MB | 1 |  |"
    # nbprofiler's resident memory once its flows are paired and its cache entry written, beside its peak
    settled = {**m["nbprofiler"], "settled_rss_mb": 201.4}
    row["methods"]["nbprofiler"] = bench._row(settled, 100.0, settled)
    assert "| 290 MB (201 MB settled) | 1 |" in bench.markdown([row]).splitlines()[2]


def test_a_stopped_run_is_not_repeated_and_its_row_says_so(bench):
    stopped = iter([{"stopped_after_s": 900.0}])
    m = bench._interleaved(3, nbprofiler=_runs(*[(4.0, 6.0, 1000)] * 3), hta=lambda: next(stopped))
    assert m["nbprofiler"]["runs"] == 3
    assert m["hta"] == {"runs": 0, "stopped_after_s": 900.0, "note": "stopped after 900 s without finishing"}
    row = {"shape": "Kineto (object)", "size_mb": 1000.0, "load_avg_before": [1, 1, 1], "load_avg_after": [1, 1, 1],
           "methods": {name: bench._row(m[name], 1000.0, m["nbprofiler"]) for name in m}}
    assert bench.markdown([row]).splitlines()[-1] == "|  | HTA 0.5 | > 900 s (stopped) | – | – | – | – | 0 |  |"


def test_methods_pick_each_shapes_comparisons_and_a_shape_with_none_is_left_out(bench):
    assert bench.shape_methods("ms", None) == ["floor", "json_pandas", "mindinsight"]
    assert bench.shape_methods("ms", ["nbprofiler", "floor"]) == ["floor"]
    assert bench.shape_methods("kineto", ["nbprofiler", "floor"]) == []
    assert bench.shape_methods("kineto", ["hta", "nbprofiler_bare_array"]) == ["nbprofiler_bare_array", "hta"]


def test_methods_and_repo_are_options(bench, monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(bench, "run", lambda *a: seen.update(args=a) or [])
    monkeypatch.setattr(bench.subprocess, "run", lambda cmd, **kw: seen.setdefault("compiled", []).append(cmd[-1]))
    bench.main(["--sizes", "100", "--methods", "nbprofiler", "floor", "--repo", str(tmp_path)])
    sizes, _, _, _, _, _, methods, repo = seen["args"]
    assert (sizes, methods, repo) == ([100], ["nbprofiler", "floor"], tmp_path.resolve())
    # both trees are compiled before anything is timed
    assert seen["compiled"] == [str(bench.REPO / "nbprofiler"), str(tmp_path.resolve() / "nbprofiler")]


def test_each_nbprofiler_is_given_its_ratio_to_the_floor_and_the_other_tree_its_own_row(bench, tmp_path):
    other = bench.repo_method(tmp_path)
    m = bench._interleaved(1, nbprofiler=_runs((0.9, 1.2, 290)), **{other: _runs((1.0, 1.5, 290))},
                           floor=_runs((0.8, 0.6, 270)))
    row = bench.with_floor_ratios({"shape": "MindSpore (bare array)", "size_mb": 100.0, "load_avg_before": [1, 1, 1],
                                   "load_avg_after": [1, 1, 1],
                                   "methods": {name: bench._row(m[name], 100.0, m["nbprofiler"]) for name in m}})
    assert (row["methods"]["nbprofiler"]["x_floor"], row["methods"]["nbprofiler"]["x_floor_cpu"]) == (1.12, 2.0)
    assert (row["methods"][other]["x_floor"], row["methods"][other]["x_floor_cpu"]) == (1.25, 2.5)
    assert row["x_floor"] == 1.12 and "x_floor" not in row["methods"]["floor"]
    assert bench.markdown([row]).splitlines()[3].startswith(f"|  | nbprofiler ({tmp_path}) | 1.00 s | 1.50 s | 1.11× |")
    assert bench.floor_lines([row]).splitlines() == [
        "MindSpore shape, 100 MB: nbprofiler first open ÷ duckdb parse floor: wall 1.12×, CPU 2.00×",
        f"MindSpore shape, 100 MB: nbprofiler ({tmp_path}) ÷ duckdb parse floor: wall 1.25×, CPU 2.50×"]


def test_a_run_with_another_tree_imports_that_trees_nbprofiler(bench, monkeypatch, tmp_path):
    """``--repo``'s runs import the other checkout's package, whatever directory the benchmark is run from (a
    child started with ``-c`` puts its working directory first on its path)."""
    other = tmp_path / "other"
    (other / "nbprofiler").mkdir(parents=True)
    (other / "nbprofiler" / "__init__.py").write_text("")
    monkeypatch.setitem(bench.CHILDREN, "where", "import json, nbprofiler; print(json.dumps(nbprofiler.__file__))")
    monkeypatch.chdir(bench.REPO)
    assert bench.measure(bench.sys.executable, "where", repo=other) == str(other / "nbprofiler" / "__init__.py")
    assert bench.measure(bench.sys.executable, "where") == str(bench.REPO / "nbprofiler" / "__init__.py")
