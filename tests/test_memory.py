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
from bokeh.models import LinearAxis

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


def _listed_lines(fig):
    """(legend label, renderer, its y range) of every line the chart's legend lists."""
    out = []
    for item in fig.legend[0].items:
        for r in item.renderers:
            rng = fig.y_range if r.y_range_name == "default" else fig.extra_y_ranges[r.y_range_name]
            out.append((item.label["value"], r, rng))
    return out


def _check_chart(fig):
    """Every listed line drawn and inside its y range; each peak label level with its marker under the top
    of the frame, its text towards the wider side of the time span."""
    lines = _listed_lines(fig)
    assert lines
    for label, r, rng in lines:
        mb = [v for v in r.data_source.data["mb"] if not math.isnan(v)]
        assert r.visible and rng.start <= min(mb) and max(mb) <= rng.end, (label, rng.start, rng.end, max(mb))
    times = [t for _, r, _ in lines for t in r.data_source.data["t"]]
    t_min, t_max = min(times), max(times)
    labels = fig.select_one({"name": "memory_peak_labels"}).source.data
    for t, mb, align, dx in zip(labels["t"], labels["mb"], labels["align"], labels["dx"]):
        y = fig.y_range
        assert y.start < mb and (y.end - mb) / (y.end - y.start) >= 0.1  # headroom: half a line of text is ~3 %
        assert t_min <= t <= t_max
        room_right = t_max - t >= (t_max - t_min) / 2
        assert (align, dx) == (("left", 9) if room_right else ("right", -9))


def test_cpu_run_without_allocation_records():
    lenet = load_quietly("mindspore2/lenet_pynative")
    layout = memory_layout(lenet.memory, lenet.operator_memory)
    assert layout.select_one({"name": "memory_alloc_table"}) is None
    assert "5.25 MB" in layout.select_one({"name": "memory_figures"}).text  # MindSpore's peak on CPU:0
    assert "1.02 GB" in layout.select_one({"name": "memory_figures"}).text  # and the reserved pool it lists


def test_curve_shows_every_line_it_lists_and_its_peak_label():
    """LeNet CPU: a 1 GB reserved pool beside a 5.25 MB allocated peak. The pool is drawn against its own
    axis on the right (its dashed line on screen, the allocated curve on a readable MB scale); every line
    the legend lists is visible and inside its range; the peak label (at the run's right end) reads leftwards
    under the top of the frame, and the flat pool runs below it, not through it."""
    lenet = load_quietly("mindspore2/lenet_pynative")
    fig = memory_layout(lenet.memory, lenet.operator_memory).select_one({"name": "memory_curve"})
    _check_chart(fig)
    lines = {label: (r, rng) for label, r, rng in _listed_lines(fig)}
    assert set(lines) == {"MindSpore: allocated", "MindSpore: reserved (right axis)"}
    reserved, right = lines["MindSpore: reserved (right axis)"]
    assert right is fig.extra_y_ranges["reserved"] and right.end >= 1073741824 / 1024 / 1000
    assert [a.y_range_name for a in fig.right if isinstance(a, LinearAxis)] == ["reserved"]
    assert fig.y_range.end < 10  # the allocated scale stays MB-sized: 5.253 MB plus headroom
    labels = fig.select_one({"name": "memory_peak_labels"}).source.data
    assert labels["mb"] == [5253.0 / 1000] and labels["align"] == ["right"]
    label_height = labels["mb"][0] / fig.y_range.end
    pool_height = max(reserved.data_source.data["mb"]) / right.end
    assert abs(label_height - pool_height) > 0.08
    # a peak at the very start of the run reads rightwards
    early = lenet.memory.copy()
    early.loc[0, "allocated_mb"] = 7.5
    fig = memory_layout(early, lenet.operator_memory).select_one({"name": "memory_curve"})
    _check_chart(fig)
    assert fig.select_one({"name": "memory_peak_labels"}).source.data["align"] == ["left"]


def test_curve_of_comparable_lines_keeps_one_axis(npu):
    """Ascend PyTorch rank 0: reserved (APP 2.06 GB) within 4x of the allocated peak (1.16 GB): one axis
    covering every line, reserved included."""
    fig = memory_layout(npu.memory, npu.operator_memory).select_one({"name": "memory_curve"})
    _check_chart(fig)
    assert not fig.extra_y_ranges
    assert fig.y_range.end >= max(_num(r["Total Reserved(MB)"]) for r in _rows("memory_record.csv"))


def test_operator_names_reach_html_escaped(npu):
    om = npu.operator_memory.copy()
    om.loc[om["size_kb"].idxmax(), "name"] = "<img src=x onerror=alert(1)>"
    text = memory_layout(npu.memory, om).select_one({"name": "memory_figures"}).text
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
