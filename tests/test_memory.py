"""Memory analysis and view on real recordings: an Ascend PyTorch run (memory_record.csv +
operator_memory.csv, rank 0) and MindSpore's CPU LeNet run (allocator samples only). Expected values are
read from the CSV files with the csv module, not through nbprofiler's parsers."""
from __future__ import annotations

import csv
import json
import math
from decimal import Decimal

import numpy as np
import pytest
from bokeh.events import SelectionGeometry

from nbprofiler.analysis import memory as M
from nbprofiler.views.memory import MemoryView, memory_layout

from .conftest import DATA, load_quietly

NPU_OUT = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"


def _rows(name):
    with open(NPU_OUT / name, newline="") as f:
        return list(csv.DictReader(f))


def _num(cell):
    cell = (cell or "").strip()
    return float(cell) if cell else math.nan


@pytest.fixture(scope="module")
def npu():
    return load_quietly("npu/ascend_pt_text_2rank", device="0")


def test_peaks_match_the_memory_record(npu):
    peaks = M.memory_peaks(npu.memory).set_index("component")
    for comp in ("PTA+GE", "PTA", "GE"):
        rows = [r for r in _rows("memory_record.csv") if r["Component"] == comp]
        alloc = [_num(r["Total Allocated(MB)"]) for r in rows]
        assert peaks.at[comp, "samples"] == len(rows)
        assert peaks.at[comp, "peak_allocated_mb"] == pytest.approx(max(alloc))
        assert peaks.at[comp, "final_allocated_mb"] == pytest.approx(alloc[-1])
        assert peaks.at[comp, "peak_reserved_mb"] == pytest.approx(max(_num(r["Total Reserved(MB)"]) for r in rows))
    # the APP row records reserved memory only: no allocated peak is invented for it
    assert math.isnan(peaks.at["APP", "peak_allocated_mb"]) and peaks.at["APP", "peak_reserved_mb"] > 2000
    assert peaks.index[0] == "PTA+GE"  # largest allocated peak first


def test_allocations_and_static_memory_match_operator_memory(npu):
    rows = _rows("operator_memory.csv")
    sizes = [_num(r["Size(KB)"]) / 1024 for r in rows]
    held = [s for s, r in zip(sizes, rows) if not r["Release Time(us)"].strip()]
    stats = M.allocation_stats(npu.operator_memory)
    assert stats["allocations"] == len(rows) == 184
    assert stats["total_mb"] == pytest.approx(sum(sizes))
    assert (stats["never_released"], stats["never_released_mb"]) == (len(held), pytest.approx(sum(held)))
    assert stats["largest_mb"] == pytest.approx(max(sizes)) and stats["largest_name"] == "aten::mm"
    allocs = M.allocations(npu.operator_memory)
    released = allocs[allocs["released"]]
    assert (released["lifetime_us"] == released["release_us"] - released["alloc_us"]).all()


def test_alive_in_a_window(npu):
    allocs = M.allocations(npu.operator_memory)
    t0, t1 = 150_000.0, 155_000.0
    alive = M.alive_in(allocs, t0, t1)
    brute = [i for i, r in allocs.iterrows()
             if r.alloc_us <= t1 and (math.isnan(r.release_us) or r.release_us >= t0)]
    assert sorted(alive.index) == brute and 0 < len(alive) < len(allocs)


def test_downsample_keeps_peaks_and_troughs():
    lenet = load_quietly("mindspore2/lenet_pynative")
    g = lenet.memory.sort_values("time_us", kind="stable")
    t, y = g["time_us"].to_numpy(float), g["allocated_mb"].to_numpy(float)
    ts, ys = M.downsample(t, y, 3000)
    assert len(t) == 32400 and len(ts) <= 3000
    assert ys.max() == y.max() and ys.min() == y.min()
    assert np.all(np.diff(ts) >= 0)


def _trace_span_us(trace_view):
    """(first ts, last end) of a trace_view.json in absolute us, exact (Decimal), read with json."""
    events = json.loads(trace_view.read_text())
    starts = [Decimal(str(e["ts"])) for e in events if "ts" in e]
    ends = [Decimal(str(e["ts"])) + Decimal(str(e["dur"])) for e in events if "ts" in e and "dur" in e]
    return min(starts), max(ends)


def test_cpu_memory_is_on_the_timeline_clock():
    """MindSpore 2.10 CPU (LeNet): cpu_ms_memory_record's epoch-ns timestamps minus the trace's first event.
    The peak (first sample of the largest allocated total) lies inside the timeline and at the file's own
    peak time, converted here from the raw files (not from the file's first record)."""
    folder = DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms"
    origin, end = _trace_span_us(folder / "ASCEND_PROFILER_OUTPUT/trace_view.json")
    with open(folder / "FRAMEWORK/cpu_ms_memory_record_0.txt", newline="") as f:
        rows = list(csv.DictReader(f))
    alloc = [int(r["Total Allocated(Byte)"]) for r in rows]
    peak_ns = int(rows[alloc.index(max(alloc))]["Timestamp(ns)"])
    want = Decimal(peak_ns) / 1000 - origin
    prof = load_quietly("mindspore2/lenet_pynative")
    peak = M.memory_peaks(prof.memory).iloc[0]
    assert peak["peak_allocated_mb"] == max(alloc) / 1024 / 1000  # 5.253 MB, unchanged
    # the origin is a float64 of absolute us (0.25 us apart at 1.8e15): sub-us agreement
    assert peak["peak_allocated_at_us"] == pytest.approx(float(want), abs=0.25)
    assert 0 <= peak["peak_allocated_at_us"] <= float(end - origin)
    first = Decimal(int(rows[0]["Timestamp(ns)"])) / 1000 - origin  # -69.8 us: before the first op
    assert prof.memory["time_us"].iloc[0] == pytest.approx(float(first), abs=0.25)
    timeline = prof.timeline
    assert timeline["start_us"].min() == 0 and peak["peak_allocated_at_us"] <= (timeline["start_us"] +
                                                                                timeline["dur_us"]).max()


def test_npu_memory_is_on_the_timeline_clock(npu):
    """memory_record.csv (Timestamp(us), Unix epoch) of the Ascend PyTorch run: the same clock as its
    trace_view.json; the PTA+GE peak lies inside the timeline at the file's peak time."""
    origin, end = _trace_span_us(NPU_OUT / "trace_view.json")
    rows = [r for r in _rows("memory_record.csv") if r["Component"] == "PTA+GE"]
    alloc = [_num(r["Total Allocated(MB)"]) for r in rows]
    want = Decimal(rows[alloc.index(max(alloc))]["Timestamp(us)"].strip()) - origin
    peak = M.memory_peaks(npu.memory).set_index("component").loc["PTA+GE"]
    assert peak["peak_allocated_at_us"] == pytest.approx(float(want), abs=0.25)
    assert 0 <= peak["peak_allocated_at_us"] <= float(end - origin)


def test_view_sources_and_window(npu):
    layout = memory_layout(npu.memory, npu.operator_memory)
    table = layout.select_one({"name": "memory_alloc_src"})
    assert len(table.data["name"]) == 184 and table.data["size_mb"][0] == pytest.approx(144.00048828125)
    peaks = layout.select_one({"name": "memory_peaks_src"})
    assert max(peaks.data["mb"]) == pytest.approx(M.memory_peaks(npu.memory)["peak_allocated_mb"].max())
    figures = layout.select_one({"name": "memory_figures"}).text
    assert "1.16 GB" in figures and "252.65 MB" in figures and "aten::mm" in figures

    view = MemoryView(npu)
    curve = view.layout.select_one({"name": "memory_curve"})
    view._on_select(SelectionGeometry(curve, geometry={"type": "rect", "x0": 155e3, "x1": 150e3,
                                                       "y0": 0, "y1": 1}, final=True))
    assert view.window == (150e3, 155e3)


def test_module_memory_drawn_on_the_allocator_curve_axis(npu):
    """npu_module_mem.csv of rank 0: one curve per CANN module that reserves memory (top 8 by peak), its
    peak in the legend, on the allocator curve's time axis."""
    view = MemoryView(npu)
    modules = view.layout.select_one({"name": "memory_modules"})
    curve = view.layout.select_one({"name": "memory_curve"})
    assert modules is not None and modules.x_range is curve.x_range
    mem = npu.npu_module_mem
    peaks = mem.groupby("component")["reserved_mb"].max().sort_values(ascending=False)
    peaks = peaks[peaks > 0]
    drawn = [r.data_source.data for r in modules.renderers]
    assert [d["module"][0] for d in drawn] == list(peaks.index[:8])
    assert max(drawn[0]["mb"]) == pytest.approx(peaks.iloc[0])
    # a run without module records has no such figure
    assert memory_layout(npu.memory, npu.operator_memory).select_one({"name": "memory_modules"}) is None


def test_cpu_run_without_allocation_records():
    lenet = load_quietly("mindspore2/lenet_pynative")
    layout = memory_layout(lenet.memory, lenet.operator_memory)
    assert layout.select_one({"name": "memory_alloc_table"}) is None
    assert "5.25 MB" in layout.select_one({"name": "memory_figures"}).text  # MindSpore's peak on CPU:0
    # the 1 GB reserved pool would flatten a 5 MB curve: it starts hidden
    hidden = [r for r in layout.select_one({"name": "memory_curve"}).renderers if not r.visible]
    assert len(hidden) == 1


def test_operator_names_reach_html_escaped(npu):
    om = npu.operator_memory.copy()
    om.loc[om["size_kb"].idxmax(), "name"] = "<img src=x onerror=alert(1)>"
    text = memory_layout(npu.memory, om).select_one({"name": "memory_figures"}).text
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
