"""What is alive at the memory peak, on real recordings of one torch_npu job: rank 0 of the text export
(memory_record.csv + operator_memory.csv) and rank 0 of the database export (MEMORY_RECORD + OP_MEMORY, a
different recording). Every expected value is computed here from the files themselves: the CSVs with
the csv module, the database with sqlite3 on a copy in tmp_path."""
from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from decimal import Decimal

import pandas as pd
import pytest

from nbprofiler.analysis.compare import compare
from nbprofiler.analysis.memory_peak import UNCATEGORISED, alive_at_peak, category_curves, memory_diff
from nbprofiler.faces.cli import _print_summary
from nbprofiler.schema import ANALYSIS_FRAMES
from nbprofiler.views.compare import compare_layout, memory_delta_figure
from nbprofiler.views.memory import memory_layout, peak_div

from .conftest import DATA, load_quietly

TEXT_OUT = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
DB_FILE = DATA / "npu/ascend_pt_db_2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
MB = 1024 * 1024


def _rows(name):
    with open(TEXT_OUT / name, newline="") as f:
        return list(csv.DictReader(f))


def _num(cell):
    cell = (cell or "").strip()
    return float(cell) if cell else None


def _time(cell):
    """A text export's timestamp (us with 3 decimals, 16 digits before them) exactly, as a Decimal."""
    cell = (cell or "").strip()
    return Decimal(cell) if cell else None


def _expected(record, allocations):
    """The peak of the PTA+GE allocated curve (first sample of its maximum) and the allocations alive at
    it: (peak_mb, peak_time, alive {operator: [mb, count]}); ``record`` (component, time, allocated_mb),
    ``allocations`` (name, size_mb, alloc_time, release_time or None), times exact (Decimal us or int ns)."""
    total = [(t, a) for comp, t, a in record if comp == "PTA+GE"]
    peak_mb = max(a for _, a in total)
    peak_t = next(t for t, a in total if a == peak_mb)
    alive = {}
    for name, size_mb, alloc, release in allocations:
        if alloc <= peak_t and (release is None or release > peak_t):
            mb, n = alive.get(name, (0.0, 0))
            alive[name] = (mb + size_mb, n + 1)
    return peak_mb, peak_t, alive


def _text_expected():
    record = [(r["Component"], _time(r["Timestamp(us)"]), _num(r["Total Allocated(MB)"]))
              for r in _rows("memory_record.csv")]
    allocs = [(r["Name"], _num(r["Size(KB)"]) / 1024, _time(r["Allocation Time(us)"]),
               _time(r["Release Time(us)"])) for r in _rows("operator_memory.csv")]
    return _expected(record, allocs)


@pytest.fixture(scope="module")
def db_expected(tmp_path_factory):
    copy = tmp_path_factory.mktemp("db") / DB_FILE.name
    shutil.copyfile(DB_FILE, copy)
    con = sqlite3.connect(copy)
    try:
        names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        # times kept in integer ns: a float of ns since the epoch would lose the last 7 bits
        record = [(names[c], t, a / MB) for c, t, a in
                  con.execute("SELECT component, timestamp, totalAllocated FROM MEMORY_RECORD")]
        allocs = [(names[n], s / MB, a, r) for n, s, a, r in
                  con.execute("SELECT name, size, allocationTime, releaseTime FROM OP_MEMORY")]
    finally:
        con.close()
    return _expected(record, allocs)


@pytest.fixture(scope="module")
def text0():
    return load_quietly("npu/ascend_pt_text_2rank", device="0")


@pytest.fixture(scope="module")
def db0():
    return load_quietly("npu/ascend_pt_db_2rank", device="0")


def _check(peak, prof, expected, ns=False):
    peak_mb, peak_t, alive = expected
    assert peak.available and peak.curve == "PTA+GE" and peak.parts == ["PTA", "GE"]
    assert peak.peak_mb == pytest.approx(peak_mb, abs=1e-9)
    # on the timeline's clock: the file's time less the profile's origin (a float of us since the epoch
    # resolves 0.25 us)
    origin = Decimal(repr(prof.origin_us))
    rel = (Decimal(peak_t) - origin * 1000) / 1000 if ns else peak_t - origin
    assert peak.peak_at_us == pytest.approx(float(rel), abs=0.5)
    total = sum(mb for mb, _ in alive.values())
    assert peak.alive_count == sum(n for _, n in alive.values())
    assert peak.alive_mb == pytest.approx(total, abs=1e-9)
    assert peak.unexplained_mb == pytest.approx(peak_mb - total, abs=1e-9)
    largest = max(alive, key=lambda k: alive[k][0])
    top = peak.operators.iloc[0]
    assert (top["name"], top["size_mb"], top["allocations"]) == (largest, pytest.approx(alive[largest][0]),
                                                                 alive[largest][1])
    ops = peak.operators.set_index("name")
    assert {k: (pytest.approx(v[0]), v[1]) for k, v in alive.items()} == \
        {k: (r["size_mb"], r["allocations"]) for k, r in ops.iterrows()}
    return total


def test_the_text_exports_peak_and_what_is_alive_at_it(text0):
    expected = _text_expected()
    total = _check(alive_at_peak(text0), text0, expected)
    peak = alive_at_peak(text0)
    # the conclusion: 1,188 MB at the peak, of which the operators alive explain 487 MB (41 allocations,
    # aten::_foreach_add's 17 the largest share) and 702 MB were allocated before the recording
    assert (round(peak.peak_mb, 2), round(total, 2), peak.alive_count) == (1188.11, 486.56, 41)
    assert peak.operators.iloc[0]["name"] == "aten::_foreach_add"
    sentence = peak.headline
    assert sentence.startswith("peak 1,188.11 MB allocated (PTA+GE) at ")
    assert "486.56 MB in 41 operator allocations alive, largest aten::_foreach_add 233.91 MB" in sentence
    assert sentence.endswith("701.55 MB not explained by operator allocations")


def test_each_alive_allocation_belongs_to_the_component_whose_total_it_records(text0):
    """The category is what the file says: an allocation's 'Allocation Total Allocated(MB)' equals its
    allocator's curve in memory_record.csv at that moment."""
    peak = alive_at_peak(text0)
    curves = {}
    for r in _rows("memory_record.csv"):
        curves.setdefault(r["Component"], []).append((_time(r["Timestamp(us)"]), _num(r["Total Allocated(MB)"])))
    peak_t = next(_time(r["Timestamp(us)"]) for r in _rows("memory_record.csv") if r["Component"] == "PTA+GE"
                  and _num(r["Total Allocated(MB)"]) == peak.peak_mb)
    by_part = {}
    for r in _rows("operator_memory.csv"):
        alloc, release = _time(r["Allocation Time(us)"]), _time(r["Release Time(us)"])
        if not (alloc <= peak_t and (release is None or release > peak_t)):
            continue
        total = _num(r["Allocation Total Allocated(MB)"])
        owners = [c for c in ("PTA", "GE") if any(abs(t - alloc) < 1 and abs(v - total) < 1e-4 for t, v in curves[c])]
        owner = owners[0] if len(owners) == 1 else UNCATEGORISED
        by_part[owner] = by_part.get(owner, 0.0) + _num(r["Size(KB)"]) / 1024
    cats = peak.categories.set_index("category")
    assert by_part.keys() == {"PTA"}   # every allocation alive at the peak was served by the PyTorch allocator
    assert cats.at["PTA", "alive_mb"] == pytest.approx(by_part["PTA"])
    assert cats.at["GE", "alive_mb"] == 0
    # the parts' curves at the peak add up to it, and each part's rest is its unexplained remainder
    at = lambda comp: [v for t, v in curves[comp] if t <= peak_t][-1]  # noqa: E731
    assert cats.at["PTA", "allocated_mb"] == pytest.approx(at("PTA"))
    assert cats.at["GE", "allocated_mb"] == pytest.approx(at("GE"))
    assert cats["allocated_mb"].sum() == pytest.approx(peak.peak_mb)
    assert cats.at["PTA", "unexplained_mb"] == pytest.approx(at("PTA") - by_part["PTA"])
    # beside the peak: the allocators' unused reservation and the process's (APP) beyond them, from the file
    rec = [r for r in _rows("memory_record.csv") if r["Component"] == "PTA+GE"]
    reserved = next(_num(r["Total Reserved(MB)"]) for r in rec if _num(r["Total Allocated(MB)"]) == max(
        _num(x["Total Allocated(MB)"]) for x in rec))
    app = [_num(r["Total Reserved(MB)"]) for r in _rows("memory_record.csv")
           if r["Component"] == "APP" and _time(r["Timestamp(us)"]) <= peak_t][-1]
    assert peak.cached_mb == pytest.approx(reserved - peak.peak_mb)
    assert peak.outside_mb == pytest.approx(app - reserved)
    modules = {r["Component"]: _num(r["Total Reserved(MB)"]) for r in _rows("npu_module_mem.csv")
               if _time(r["Timestamp(us)"]) <= peak_t}   # the last sample of each module before the peak
    assert dict(zip(peak.modules["module"], peak.modules["reserved_mb"])) == \
        {k: pytest.approx(v) for k, v in modules.items() if v > 0}


def test_the_database_exports_peak_and_what_is_alive_at_it(db0, db_expected):
    peak = alive_at_peak(db0)
    _check(peak, db0, db_expected, ns=True)
    frames = {"memory_peak_allocations": peak.allocations, "memory_peak_operators": peak.operators,
              "memory_peak_categories": peak.categories, "memory_peak_modules": peak.modules,
              "memory_category_curves": category_curves(db0.memory)}
    assert {k: ANALYSIS_FRAMES[k].mismatches(df) for k, df in frames.items()} == {k: [] for k in frames}
    assert all(len(df) for df in frames.values())


def test_the_category_curves_add_up_to_the_total_curve(text0):
    curves = category_curves(text0.memory)
    wide = curves.pivot_table(index="time_us", columns="category", values="allocated_mb")
    total = text0.memory[text0.memory["component"] == "PTA+GE"].groupby("time_us")["allocated_mb"].last()
    assert set(wide.columns) == {"PTA", "GE"} and set(curves["curve"]) == {"PTA+GE"}
    summed = wide.loc[total.index].sum(axis=1)
    assert (summed - total).abs().max() < 1e-9


def test_compare_of_two_recordings_of_one_job_finds_the_same_peak(text0, db0, db_expected):
    """Text against database export: the same job recorded twice. The test's own difference of the two
    files' peaks and alive sets is what `compare` reports, operator by operator (here: none; both hold the
    same 41 allocations at a peak of the same size)."""
    a_mb, _, a_alive = _text_expected()
    b_mb, _, b_alive = db_expected
    cmp = compare(text0, db0)
    mem = cmp.memory
    assert mem.available
    _check_diff(mem, (a_mb, a_alive), (b_mb, b_alive))
    assert mem.peak_delta_mb == 0 and (mem.operators["delta_mb"] == 0).all() and len(mem.operators) == len(a_alive)
    assert mem.sentence == "memory peak unchanged at 1,188.11 MB (PTA+GE allocated); 0 KB not explained by operator " \
                           "allocations"
    assert mem.sentence in cmp.verdict
    layout = compare_layout(cmp)
    assert layout.select_one({"name": "compare_memory"}) is not None
    assert layout.select_one({"name": "compare_memory_src"}).data["label"] == ["not explained by operator allocations"]


def _check_diff(mem, a, b):
    (a_mb, a_alive), (b_mb, b_alive) = a, b
    a_total, b_total = (sum(v[0] for v in x.values()) for x in (a_alive, b_alive))
    assert mem.peak_delta_mb == pytest.approx(b_mb - a_mb, abs=1e-9)
    assert mem.alive_delta_mb == pytest.approx(b_total - a_total, abs=1e-9)
    assert mem.unexplained_delta_mb == pytest.approx((b_mb - b_total) - (a_mb - a_total), abs=1e-9)
    delta = {k: b_alive.get(k, (0.0, 0))[0] - a_alive.get(k, (0.0, 0))[0] for k in {*a_alive, *b_alive}}
    assert dict(zip(mem.operators["name"], mem.operators["delta_mb"])) == \
        {k: pytest.approx(v, abs=1e-9) for k, v in delta.items()}


def test_the_memory_difference_is_explained_by_the_operators_alive(text0):
    """Run b: rank 0's record without its aten::mm allocations (as a run whose matrix products allocate
    nothing at the peak would record). The peak is the same, so the operator's whole alive size moves into
    the unexplained remainder; the diff says which operator and how much, as computed here from the file."""
    a_mb, _, a_alive = _text_expected()
    b_alive = {k: v for k, v in a_alive.items() if k != "aten::mm"}
    om = text0.operator_memory
    b = {"memory": text0.memory, "operator_memory": om[om["name"] != "aten::mm"], "npu_module_mem": None}
    mem = memory_diff(text0, b)
    _check_diff(mem, (a_mb, a_alive), (a_mb, b_alive))
    assert ANALYSIS_FRAMES["memory_peak_diff"].mismatches(mem.operators) == []
    top = mem.operators.iloc[0]
    assert (top["name"], top["a_allocations"], top["b_allocations"]) == ("aten::mm", a_alive["aten::mm"][1], 0)
    assert mem.unexplained_delta_mb == pytest.approx(a_alive["aten::mm"][0])
    assert mem.sentence == (f"memory peak unchanged at 1,188.11 MB (PTA+GE allocated): aten::mm "
                            f"{-a_alive['aten::mm'][0]:+,.2f} MB alive at the peak; "
                            f"{a_alive['aten::mm'][0]:+,.2f} MB not explained by operator allocations")
    fig = memory_delta_figure(mem, runs=("text", "without aten::mm"))
    data = fig.select_one({"name": "compare_memory_src"}).data
    assert data["label"] == ["aten::mm", "not explained by operator allocations"]
    assert data["delta_mb"] == [pytest.approx(-a_alive["aten::mm"][0]), pytest.approx(a_alive["aten::mm"][0])]


def test_the_memory_tab_shows_the_peak_the_split_and_the_operators_alive(text0):
    peak = alive_at_peak(text0)
    layout = memory_layout(text0.memory, text0.operator_memory, text0.npu_module_mem)
    names = [c.name for c in layout.children]
    assert names.index("memory_peak") < names.index("memory_curve") < names.index("memory_categories") \
        < names.index("memory_peak_table")
    text = layout.select_one({"name": "memory_peak"}).text
    assert "<b>Peak 1,188.11 MB allocated (PTA+GE)" in text and "701.55 MB not explained" in text
    src = layout.select_one({"name": "memory_peak_src"}).data
    assert src["name"] == peak.operators["name"].tolist() and src["size_mb"][0] == pytest.approx(233.9135742)
    stacked = layout.select_one({"name": "memory_categories_src"}).data
    # the stacked parts' top at the peak's moment is the peak
    i = max(j for j, t in enumerate(stacked["t"]) if t <= peak.peak_at_us)
    assert stacked["part_0"][i] + stacked["part_1"][i] == pytest.approx(peak.peak_mb)


def test_operator_names_reach_the_peak_panel_escaped(text0):
    om = text0.operator_memory.copy()
    om["name"] = "<img src=x onerror=alert(1)>"
    text = peak_div(alive_at_peak({"memory": text0.memory, "operator_memory": om})).text
    assert "<img" not in text and "&lt;img src=x" in text


def test_without_memory_files_the_peak_is_not_available_and_says_why(text0):
    legacy = load_quietly("legacy/run_2_lenet")
    peak = alive_at_peak(legacy)
    assert not peak.available and "no memory record" in peak.why
    assert peak.headline.startswith("memory peak: not available (no memory record")
    assert legacy.summary()["memory"] is None
    # a record of reserved memory only (the APP rows) has no allocated curve to find a peak on
    app = text0.memory[text0.memory["component"] == "APP"]
    only_reserved = alive_at_peak({"memory": app, "operator_memory": text0.operator_memory})
    assert not only_reserved.available and "only reserved memory" in only_reserved.why
    diff = memory_diff(text0, legacy)
    assert not diff.available and diff.sentence == f"memory peak: not comparable (b: {peak.why})"
    assert "not available (no memory record" in peak_div(peak).text


def test_the_summary_holds_the_peak(text0, capsys):
    summary = text0.summary()
    out = summary["memory"]["peak"]
    peak_mb, _, alive = _text_expected()
    assert out["available"] and out["peak_mb"] == pytest.approx(peak_mb)
    assert (out["alive_count"], out["alive_mb"]) == (41, pytest.approx(sum(v[0] for v in alive.values())))
    assert out["headline"] == alive_at_peak(text0).headline
    json.dumps(out, allow_nan=False)   # JSON as written: no NaN
    _print_summary({**summary, "source": "rank0"})   # `nbprofiler summary` without --json
    assert f"memory: {out['headline']}\n" in capsys.readouterr().out
    assert [c["category"] for c in out["categories"]] == ["PTA", "GE"]
    assert pd.Series([o["size_mb"] for o in out["operators"]]).is_monotonic_decreasing
