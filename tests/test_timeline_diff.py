"""The event-level diff of two runs (analysis.timeline_diff, views.timeline_diff) on real pairs: rank 0 against
rank 1 of one torch_npu job (its numbers checked against kernel_details.csv, read here with the csv module),
the ten steps of two CANN devices, and two steps of one run."""
from __future__ import annotations

import collections
import dataclasses
import csv
import json
from decimal import Decimal

import numpy as np
import pytest

import nbprofiler
from nbprofiler import schema
from nbprofiler.analysis.timeline_diff import TOP_CHANGED, timeline_diff
from nbprofiler.views.compare import GAIN, LOSS, CompareView
from nbprofiler.views.timeline_diff import TimelineDiffView

from .conftest import DATA, load_quietly

PT = "npu/ascend_pt_text_2rank"


@pytest.fixture(scope="module")
def pt2():
    return load_quietly(PT)


@pytest.fixture(scope="module")
def ranks(pt2):
    return timeline_diff(pt2["0"], pt2["1"])


@pytest.fixture(scope="module")
def cann():
    return load_quietly("npu/cann_prof_2dev", device="0"), load_quietly("npu/cann_prof_2dev", device="1")


def kernels_of_step(rank: str, step: int = 50) -> list[dict]:
    """rank<rank>'s kernel_details.csv rows of ``step``: name, start (absolute µs, a Decimal: a float64 of epoch
    µs keeps only a quarter of a µs), duration (µs), in start order, each with its occurrence (the k-th kernel
    of its name in the step)."""
    path = DATA / PT / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = [{"name": r["Name"], "start": Decimal(r["Start Time(us)"].strip()),
                 "dur": float(r["Duration(us)"])}
                for r in csv.DictReader(f) if int(r["Step Id"]) == step]
    rows.sort(key=lambda r: r["start"])
    seen = collections.Counter()
    for r in rows:
        r["occurrence"] = seen[r["name"]]
        seen[r["name"]] += 1
    return rows


def profiler_step(rank: str, step: int = 50) -> tuple[Decimal, Decimal]:
    """rank<rank>'s ProfilerStep#<step> event of trace_view.json (read with the json module): its start
    (absolute µs) and duration (µs), the step as torch_npu marks it."""
    path = DATA / PT / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
    with open(path, encoding="utf-8") as f:
        [e] = [e for e in json.load(f) if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{step}"]
    return Decimal(str(e["ts"])), Decimal(str(e["dur"]))


def test_two_recordings_of_one_job_match_their_collectives_across_group_hashes(pt2, tmp_path):
    """The text export against the database export of the same job: each recording names its allreduces with
    its own group hash (hcom_allReduce__868_k_1 / __576_k_1); they are matched all the same, their times those
    of kernel_details.csv and of the database's COMMUNICATION_OP table (read with sqlite3 from a copy)."""
    import shutil
    import sqlite3
    db = load_quietly("npu/ascend_pt_db_2rank", device="0")
    d = timeline_diff(pt2["0"], db)
    copy = tmp_path / "rank0.db"
    shutil.copyfile(DATA / "npu/ascend_pt_db_2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db",
                    copy)
    with sqlite3.connect(copy) as con:
        b_us = {name: (end - start) / 1000 for name, start, end in con.execute(
            "SELECT s.value, o.startNs, o.endNs FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.opName")}
        [(b_step_ns,)] = con.execute("SELECT p.endNs - p.startNs FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
                                     "WHERE s.value = 'ProfilerStep#50'").fetchall()
    a_us = {r["name"]: r["dur"] for r in kernels_of_step("0") if r["name"].startswith("hcom_allReduce_")}
    assert sorted(a_us) == [f"hcom_allReduce__868_{k}_1" for k in range(4)]
    assert sorted(b_us) == [f"hcom_allReduce__576_{k}_1" for k in range(4)]
    rows = d.ops[d.ops["op_type"] == "hcom_allReduce"].set_index("op_name")
    assert sorted(rows.index) == sorted(a_us) and (rows["status"] == "both").all()
    for k in range(4):
        r = rows.loc[f"hcom_allReduce__868_{k}_1"]
        assert r["b_name"] == f"hcom_allReduce__576_{k}_1"
        assert r["a_time_us"] == pytest.approx(a_us[r.name], abs=1e-3)
        assert r["b_time_us"] == pytest.approx(b_us[r["b_name"]], abs=1e-3)
    # the database recording's step 50 (its ProfilerStep#50) is 1.77 ms slower; its allreduces took 4.36 ms
    # more, more than all of it: it spent less time before its first device task (Preparing)
    change = sum(b_us.values()) - sum(a_us.values())
    head = d.op_types.iloc[0]
    assert head["op_type"] == "hcom_allReduce" and head["delta_us"] == pytest.approx(change, abs=1e-3)
    assert (d.ops["status"] == "both").all() and len(d.ops) == 191
    step_delta_ms = (b_step_ns / 1000 - float(profiler_step("0")[1])) / 1000
    assert d.step_pair["delta_ms"] == pytest.approx(step_delta_ms, abs=1e-6)
    assert d.headline.endswith(f"; more than all of it in hcom_allReduce (+{change / 1000:.3g} ms): other time "
                               "moved the other way")
    assert f" step 50 is {step_delta_ms:.3g} ms slower than " in d.headline and f"{step_delta_ms:.3g}" == "1.77"


def test_the_frames_are_as_declared(ranks):
    for name, df in (("timeline_diff_steps", ranks.steps), ("timeline_diff_op_types", ranks.op_types),
                     ("timeline_diff_ops", ranks.ops), ("timeline_diff_highlights", ranks.highlights)):
        spec = schema.ANALYSIS_FRAMES[name]
        assert list(df.columns) == spec.column_names and spec.mismatches(df) == [], name


def test_the_step_and_its_slowest_operator_against_kernel_details(ranks):
    a, b = kernels_of_step("0"), kernels_of_step("1")
    span = lambda rank: float(profiler_step(rank)[1]) / 1000  # noqa: E731   (the step as torch_npu marks it)
    delta_ms = span("1") - span("0")
    pair = ranks.step_pair
    assert (pair["a_step"], pair["b_step"]) == (50, 50) and len(ranks.steps) == 1
    assert pair["delta_ms"] == pytest.approx(delta_ms, abs=1e-6)
    # every operator by (name, occurrence): rank 1 is 15.6 ms faster, its first allreduce 16.9 ms shorter
    da = {(r["name"], r["occurrence"]): r["dur"] for r in a}
    db = {(r["name"], r["occurrence"]): r["dur"] for r in b}
    change = {k: db.get(k, 0.0) - da.get(k, 0.0) for k in da.keys() | db.keys()}
    top = max(change, key=lambda k: abs(change[k]))
    assert top == ("hcom_allReduce__868_0_1", 0) and change[top] == pytest.approx(-16910.718, abs=1e-3)
    first = ranks.ops.iloc[0]
    assert (first["op_name"], first["occurrence"]) == top
    assert first["delta_us"] == pytest.approx(change[top], abs=1e-6)
    assert first["a_time_us"] == pytest.approx(da[top]) and first["b_time_us"] == pytest.approx(db[top])
    assert len(ranks.ops) == len(change) == 191
    got = {(r.op_name, r.occurrence): r.delta_us for r in ranks.ops.itertuples()}
    assert got == pytest.approx(change, abs=1e-6)
    # the op type that carries it: the four allreduces together, 85.5 -> 68.6 ms
    allreduce = sum(v for (name, _), v in change.items() if name.startswith("hcom_allReduce_"))
    head = ranks.op_types.iloc[0]
    assert head["op_type"] == "hcom_allReduce" and (head["a_count"], head["b_count"]) == (4, 4)
    assert head["delta_us"] == pytest.approx(allreduce, abs=1e-6)
    assert head["a_time_us"] == pytest.approx(sum(v for (n, _), v in da.items() if n.startswith("hcom_allReduce_")))
    # the allreduces shrank by more than the step did (rank 1 also spent longer before its first device task)
    assert abs(allreduce) / 1000 > abs(delta_ms)
    assert ranks.headline == (f"ascend_pt_text_2rank (device 1)'s step 50 is {abs(delta_ms):.3g} ms faster than "
                              f"ascend_pt_text_2rank (device 0)'s ({span('0'):.3g} -> {span('1'):.3g} ms); more than "
                              f"all of it in hcom_allReduce (-{abs(allreduce) / 1000:.3g} ms): other time moved the "
                              "other way")
    assert ranks.headline.startswith("ascend_pt_text_2rank (device 1)'s step 50 is 16 ms faster")


def test_b_step_starts_where_a_step_starts_on_the_shared_clock(pt2, ranks):
    b = kernels_of_step("1")
    a_start = float(profiler_step("0")[0] - Decimal(str(pt2["0"].origin_us)))   # A's clock: µs from its origin
    # (a float64 of epoch µs, as the origin is kept, holds a quarter of a µs)
    assert ranks.step_pair["start_us"] == pytest.approx(a_start, abs=0.25)
    tracks, tl = ranks.frames["timeline_tracks"], ranks.frames["timeline"]
    assert set(tracks["run"]) == {"a", "b"} and tracks["process"].str.match(r"^[AB] · ").all()
    b_tracks = tracks.loc[tracks["run"] == "b", "track"]
    first_b = tl[tl["track"].isin(b_tracks) & (tl["name"].astype(str) == b[0]["name"])]["start_us"]
    # B's first kernel of step 50 lands as far after A's step start as it was after B's own (trace_view.json
    # writes it 0.1 µs before kernel_details.csv does)
    lead = float(b[0]["start"] - profiler_step("1")[0])
    assert np.abs(first_b.to_numpy() - (a_start + lead)).min() < 0.5
    assert len(tl) == len(pt2["0"].timeline) + len(pt2["1"].timeline)


def test_highlighted_operators_are_the_tables_top_entries(ranks):
    top = ranks.ops.head(TOP_CHANGED)
    assert ranks.ops["flagged"].sum() == TOP_CHANGED and ranks.flagged.equals(top)
    keys = set(zip(top["op_name"], top["occurrence"]))
    h = ranks.highlights
    assert set(zip(h["op_name"], h["occurrence"])) == keys
    assert len(h) == 2 * TOP_CHANGED and (h["track"] >= 0).all()     # each in both runs, each on its track
    # each outline sits on an event of its run's tracks with the operator's name and start
    tl, tracks = ranks.frames["timeline"], ranks.frames["timeline_tracks"].set_index("track")
    for r in h.itertuples():
        assert tracks.at[r.track, "run"] == r.run
        on = tl[(tl["track"] == r.track) & (tl["name"].astype(str) == r.op_name)]
        assert np.abs(on["start_us"].to_numpy() - r.start_us).min() < 0.5


def test_every_cann_step_of_b_starts_where_the_same_step_of_a_starts(cann):
    a, b = cann
    d = timeline_diff(a, b)
    assert list(d.steps["a_step"]) == list(range(1, 11)) and d.steps["b_step"].equals(d.steps["a_step"])
    assert d.step_pair["a_step"] == 1
    wb = b.step_windows.set_index("step")
    tl, tracks = d.frames["timeline"], d.frames["timeline_tracks"]
    b_tl = b.timeline
    hardware = tracks.loc[(tracks["run"] == "b") & tracks["process"].str.endswith("Ascend Hardware"), "track"]
    stacked = tl[tl["track"].isin(hardware)]
    for s in d.steps.itertuples():
        # B's first task inside its step k lands as far after A's step k start as it was after its own
        own = b_tl[(b_tl["start_us"] >= wb.at[s.b_step, "start_us"]) & (b_tl["start_us"] < wb.at[s.b_step, "end_us"])
                   & b_tl["track"].isin(b.timeline_tracks.loc[b.timeline_tracks["process"] == "Ascend Hardware", "track"])]
        offset = float(own["start_us"].min()) - float(wb.at[s.b_step, "start_us"])
        assert s.start_us == pytest.approx(float(a.step_windows.set_index("step").at[s.a_step, "start_us"]))
        assert (np.abs(stacked["start_us"].to_numpy() - (s.start_us + offset)) < 1e-6).any(), s.b_step


def test_the_median_step_pair(cann):
    a, b = cann
    d = timeline_diff(a, b, step="median")
    ms = (a.step_windows["end_us"] - a.step_windows["start_us"]).to_numpy()
    lower_median = np.sort(ms)[(len(ms) - 1) // 2]
    assert d.a_step == d.b_step == int(a.step_windows["step"].to_numpy()[np.flatnonzero(ms == lower_median)[0]])
    assert d.step_pair["chosen"] and d.steps["chosen"].sum() == 1 and len(d.steps) == 10


def test_two_steps_of_one_run(cann):
    a, _ = cann
    d = timeline_diff(a, a, step=2, b_step=7)
    assert len(d.steps) == 1 and (d.a_step, d.b_step) == (2, 7)
    w = a.step_windows.set_index("step")
    assert d.step_pair["shift_us"] == pytest.approx(w.at[2, "start_us"] - w.at[7, "start_us"])
    delta = (w.at[7, "end_us"] - w.at[7, "start_us"] - w.at[2, "end_us"] + w.at[2, "start_us"]) / 1000
    assert d.headline.startswith(f"step 7 of cann_prof_2dev (device 0) is {abs(delta):.3g} ms faster than step 2 of")
    # the same executions in both steps: every type counted as often, the table ranked by |change|
    assert (d.op_types["a_count"] == d.op_types["b_count"]).all()
    assert d.ops["delta_us"].abs().is_monotonic_decreasing


def test_a_run_without_steps_on_its_timeline_is_refused_with_why(pt2):
    lenet = load_quietly("mindspore2/lenet_pynative")
    with pytest.raises(ValueError, match="no steps placed on its timeline"):
        timeline_diff(pt2["0"], lenet)
    with pytest.raises(ValueError, match="has no step 7"):
        timeline_diff(pt2["0"], pt2["1"], step=7)


def test_the_view_outlines_the_flagged_operators_and_zooms_to_a_clicked_one(pt2, ranks):
    v = TimelineDiffView(ranks, debounce_s=0)
    # opened on the compared step (its padded window kept inside the axis' bounds)
    assert (v.timeline.x_range.start, v.timeline.x_range.end) == pytest.approx(v.timeline.clamp(*ranks.window()))
    pair = ranks.step_pair
    assert v.timeline.x_range.start <= pair["start_us"] and \
        v.timeline.x_range.end >= pair["start_us"] + max(pair["a_ms"], pair["b_ms"]) * 1000
    marks = v.timeline._marks_src.data
    h = ranks.highlights
    assert sorted(marks["left"]) == pytest.approx(sorted(h["start_us"]))
    colours = dict(zip(h["start_us"], np.where(h["delta_us"] > 0, LOSS, GAIN)))
    assert all(colours[x] == c for x, c in zip(marks["left"], marks["color"]))
    assert v.ops.source.data["op_name"][0] == "hcom_allReduce__868_0_1"
    assert v.ops.source.data["mark"][:TOP_CHANGED] == ["●"] * TOP_CHANGED
    assert v.ops.source.data["delta_ms"][0] == pytest.approx(ranks.ops["delta_us"].iloc[0] / 1000)
    assert "16 ms faster" in v.headline.value and "&#x27;s step 50" in v.headline.value
    # a click on the second row: both runs' executions of that operator in view
    v.ops.source.selected.indices = [1]
    r = ranks.ops.iloc[1]
    t0, t1 = v.timeline.x_range.start, v.timeline.x_range.end
    assert t0 < min(r["a_start_us"], r["b_start_us"]) and t1 > max(r["a_start_us"] + r["a_time_us"],
                                                                   r["b_start_us"] + r["b_time_us"])
    shown = v.timeline.bars()
    assert (shown["name"] == r["op_name"]).sum() >= 2
    # a pinned track moves its outlines with it
    hccl_b = int(h.loc[(h["run"] == "b") & (h["op_name"] == "hcom_allReduce__868_0_1"), "track"].iloc[0])
    v.timeline.pin_tracks([hccl_b])
    at = v.timeline._marks_src.data["left"].tolist().index(
        float(h.loc[(h["run"] == "b") & (h["track"] == hccl_b), "start_us"].iloc[0]))
    assert v.timeline._marks_src.data["y"][at] == 0


def test_compare_offers_the_timeline_diff(pt2):
    cmp = nbprofiler.compare(pt2["0"], pt2["1"])
    d = cmp.timeline_diff()
    assert d.a_label == cmp.a_label and d.ops["op_name"].iloc[0] == "hcom_allReduce__868_0_1"
    # the comparison's view opens it under the comparison, on a click
    view = CompareView(cmp)
    assert view.widget.children[1].children[0].children[0].description.startswith("Compare the timelines")
    opened = view.open_timeline_diff()
    assert opened.diff.headline == d.headline and view.widget.children[1].children[-1] is opened.widget
    # a run whose steps are not on its timeline: the view says why, escaped
    lenet = load_quietly("mindspore2/lenet_pynative")
    view = CompareView(dataclasses.replace(cmp, b=lenet))
    assert view.open_timeline_diff() is None
    assert "timeline diff not available" in view._diff_note.value and "no steps placed" in view._diff_note.value
