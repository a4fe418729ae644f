"""Host dispatch (`nbprofiler.analysis.dispatch`) on real runs: each device task's launch latency and the
device idle the host caused per step equal the numbers computed here from the files themselves (the json
module on trace_view.json, with Decimal for its epoch-µs strings; sqlite3 on a copy of the database), the
device idle agrees with the profiler's own Overlap Analysis "Free" track, the rule fires on the host-bound
run and not under a threshold above its share, and a CPU run says why it has none."""
from __future__ import annotations

import functools
import json
import shutil
import sqlite3
from collections import Counter
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from nbprofiler.analysis import advisor as A
from nbprofiler.analysis.dispatch import TOLERANCE_US, host_dispatch
from nbprofiler.schema import ANALYSIS_FRAMES

from .conftest import DATA, load_quietly

TORCH = "npu/trace_view_torch_npu"
DB_RANK = "npu/ascend_pt_db_2rank/rank0_ascend_pt"
TOL = Decimal(str(TOLERANCE_US))


@functools.cache
def _prof(name):
    if name == DB_RANK:   # the cluster's rank 0: one load for the rank's tests and the cluster's
        return _db_cluster()["0"]
    return load_quietly(name)


@functools.cache
def _db_cluster():
    return load_quietly(DB_RANK.rsplit("/", 1)[0])


def _host_idle(tasks, launch_of, windows):
    """The host-bound idle per step, computed from raw (start, end) pairs: per launched task, the gap since
    the latest end of the tasks started before it (or the step's start, when later) when its launch came
    after that moment (within the tolerance)."""
    tasks = sorted(tasks)
    idle = {step: Decimal(0) for step in windows}
    busy = None
    for start, end in tasks:
        step = next((k for k, (w0, w1) in windows.items() if w0 <= start < w1), None)
        ready = busy if step is None else (windows[step][0] if busy is None else max(busy, windows[step][0]))
        launch = launch_of.get(start)
        if step is not None and launch is not None and ready is not None and start > ready and launch >= ready - TOL:
            idle[step] += start - ready
        busy = end if busy is None else max(busy, end)
    return idle


@functools.cache
def _torch_raw():
    """From trace_view.json itself: device tasks (absolute start, end), each HostToDevice launch by its task's
    start, the ProfilerStep windows, and the Overlap Analysis "Free" time."""
    with open(DATA / TORCH / "trace_view.json", encoding="utf-8") as f:
        events = json.load(f)
    process = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    device = [e for e in events if e.get("ph") == "X" and process.get(e["pid"]) == "Ascend Hardware"]
    tasks = [(Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"]))) for e in device]
    on_device = {(e["pid"], e["tid"], Decimal(e["ts"])) for e in device}
    tails = {e["id"]: Decimal(e["ts"]) for e in events if e.get("ph") == "s" and e.get("cat") == "HostToDevice"}
    launch_of = {Decimal(e["ts"]): tails[e["id"]] for e in events if e.get("ph") == "f"
                 and e.get("cat") == "HostToDevice" and (e["pid"], e["tid"], Decimal(e["ts"])) in on_device}
    windows = {int(e["name"].split("#")[1]): (Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"])))
               for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    free = sum(Decimal(str(e["dur"])) for e in events if e.get("ph") == "X" and e["name"] == "Free"
               and process.get(e["pid"]) == "Overlap Analysis")
    return tasks, launch_of, windows, free


def test_torch_trace_latencies_are_the_flows_own():
    prof = _prof(TORCH)
    d = prof.dispatch
    assert d.available and d.step_source == "ProfilerStep#N events"
    tasks, launch_of, _, _ = _torch_raw()
    assert len(d.tasks) == len(launch_of) == 274   # every HostToDevice flow ends on one device task
    # tasks found by their start from the step's start (both clocks count from ProfilerStep#1)
    step0 = _torch_raw()[2][1][0]
    got = dict(zip((d.tasks["task_start_us"] - d.steps["start_us"].iloc[0]).round(3), d.tasks["launch_latency_us"]))
    for start, launch in sorted(launch_of.items())[:: 25]:
        assert got[round(float(start - step0), 3)] == pytest.approx(float(start - launch), abs=1e-3)
    lat = np.array([float(s - launch) for s, launch in launch_of.items()])
    assert d.tasks["launch_latency_us"].median() == pytest.approx(np.median(lat), abs=1e-3)
    # torch_npu's host and device clocks disagree: most tasks start before their flow's tail
    assert (d.tasks["launch_latency_us"] < 0).sum() == (lat < 0).sum() > len(lat) / 2
    assert d.tasks["launch_latency_us"].min() > -TOLERANCE_US   # the tolerance covers that disagreement
    first = d.tasks.iloc[0]
    assert first["host_op"] == "AscendCL@aclnnInplaceZero" and first["framework_op"] == "aclnnInplaceZero"
    assert first["host_start_us"] <= first["launch_us"] <= first["host_end_us"]


def test_torch_trace_host_idle_per_step_matches_the_file():
    d = _prof(TORCH).dispatch
    tasks, launch_of, windows, free = _torch_raw()
    idle = _host_idle(tasks, launch_of, windows)
    assert list(d.steps["step"]) == [1]
    assert d.steps["host_idle_us"].iloc[0] == pytest.approx(float(idle[1]), abs=1e-3)
    step_us = float(windows[1][1] - windows[1][0])
    assert d.steps["idle_share"].iloc[0] == pytest.approx(float(idle[1]) / step_us, rel=1e-9)
    # all device idle of the step = the profiler's own Free time + the wait for the step's first task
    lead = min(s for s, _ in tasks) - windows[1][0]
    assert d.steps["device_idle_us"].iloc[0] == pytest.approx(float(free + lead), abs=5.0)
    # the conclusion: this eager run is host-bound, the host behind 85 % of the step
    assert 0.8 < d.idle_share < 0.9 and d.steps["host_idle_us"].iloc[0] <= d.steps["device_idle_us"].iloc[0]
    assert d.ops["host_idle_us"].sum() == pytest.approx(d.steps["host_idle_us"].sum())
    assert d.ops["responsible_op"].iloc[0] == "aclnnInplaceZero"   # it holds the wait for the step's first launch
    assert d.sentence().startswith(f"The device waited {float(idle[1]) / 1000:,.3f} ms per step for the host (")


@pytest.fixture(scope="module")
def db_copy(tmp_path_factory):
    src = DATA / DB_RANK / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    dst = tmp_path_factory.mktemp("dispatch_db") / src.name
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    yield con
    con.close()


def test_db_latencies_and_idle_match_the_tables(db_copy):
    d = _prof(DB_RANK).dispatch
    assert d.available and _prof(DB_RANK).root.name == "rank0_ascend_pt"
    # CANN_API node launch -> the first TASK of the same connectionId
    rows = db_copy.execute("""
        SELECT t.startNs, min(t.startNs) - c.startNs, c.startNs FROM TASK t
        JOIN CANN_API c ON c.connectionId = t.connectionId
        WHERE c.type = (SELECT id FROM ENUM_API_TYPE WHERE name = 'node')
        GROUP BY t.connectionId""").fetchall()
    assert len(rows) == len(d.tasks) == 191
    want = np.sort([lat / 1000 for _, lat, _ in rows])
    assert np.allclose(np.sort(d.tasks["launch_latency_us"].to_numpy()), want, atol=1e-3)
    # device idle the host caused, over every TASK (ns -> us), in the step's window: the host's own mark of
    # step 50 (its ProfilerStep#50 call), which holds the step's Preparing
    us = lambda ns: Decimal(ns) / 1000  # noqa: E731
    tasks = [(us(a), us(b)) for a, b in db_copy.execute("SELECT startNs, endNs FROM TASK")]
    w0, w1 = db_copy.execute("""
        SELECT p.startNs, p.endNs FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name
        WHERE s.value = 'ProfilerStep#50'""").fetchone()
    window = {50: (us(w0), us(w1))}
    assert d.steps["step_us"].iloc[0] == pytest.approx(float(us(w1) - us(w0)), abs=1e-3)
    idle = _host_idle(tasks, {us(t): us(c) for t, _, c in rows}, window)
    # the framework op of each launch: the PYTORCH_API row whose CONNECTION_IDS list the task's connectionId
    ops = db_copy.execute("""
        SELECT s.value FROM (SELECT connectionId, min(startNs) FROM TASK GROUP BY connectionId) t
        JOIN CONNECTION_IDS c ON c.connectionId = t.connectionId JOIN PYTORCH_API p ON p.connectionId = c.id
        JOIN STRING_IDS s ON s.id = p.name""").fetchall()
    assert Counter(d.tasks["framework_op"]) == Counter(v for v, in ops)
    assert list(d.steps["step"]) == [50]
    assert f"{len(rows)} of {len(tasks)} device tasks have a flow" in d.sentence()
    assert d.steps["host_idle_us"].iloc[0] == pytest.approx(float(idle[50]), abs=1e-3)
    # this run keeps the device fed: most launches run far ahead, the host explains a sixth of the step
    assert d.tasks["launch_latency_us"].median() > 500 and 0.1 < d.idle_share < 0.25
    # the window is the step the step trace times: it holds the Preparing before the step's first task
    trace_ms = _prof(DB_RANK).step_trace["total_ms"].iloc[0]
    assert abs(d.steps["step_us"].iloc[0] / 1000 - trace_ms) < 0.01 * trace_ms


def test_a_run_whose_launches_never_wait_has_no_op_rows():
    """npu/msprof_db: one task joined to its launch, which it did not wait for: no op is responsible for any
    idle, so the op table is empty (not a row of gaps) and the summary lists no op."""
    d = _prof("npu/msprof_db").dispatch
    assert d.available and (d.launched, d.waited_tasks) == (1, 0)
    assert d.ops.empty and d.to_dict()["top_ops"] == []


def test_frame_matches_its_declaration_and_sql():
    prof = _prof(TORCH)
    spec = ANALYSIS_FRAMES["dispatch"]
    assert list(prof.dispatch.tasks.columns) == spec.column_names and spec.mismatches(prof.dispatch.tasks) == []
    n = prof.sql("SELECT count(*) AS n, sum(host_idle_us) AS idle FROM dispatch WHERE waited")
    assert int(n["n"].iloc[0]) == int(prof.dispatch.tasks["waited"].sum())
    assert float(n["idle"].iloc[0]) == pytest.approx(prof.dispatch.steps["host_idle_us"].sum())
    summary = prof.summary()["dispatch"]
    assert summary["host_idle_ms_per_step"] == pytest.approx(prof.dispatch.steps["host_idle_us"].mean() / 1000)
    assert summary["sentence"] == prof.dispatch.sentence() and summary["top_ops"][0]["op"] == "aclnnInplaceZero"


def test_host_bound_rule_fires_per_the_numbers():
    prof = _prof(TORCH)
    found = [s for s in A.advise_profile(prof) if s.rule == "dispatch.host_bound"]
    assert len(found) == 1
    s = found[0]
    share = prof.dispatch.idle_share * 100
    assert s.get("idle_share_pct").value == pytest.approx(share) and s.get("idle_share_pct").threshold == 10.0
    assert s.cost_ms == pytest.approx(prof.dispatch.steps["host_idle_us"].mean() / 1000)   # the saving
    assert s.get("worst_step_idle_us").window_us == (0.0, pytest.approx(14091.97))   # opens the timeline there
    rule = A.RULES_BY_ID["dispatch.host_bound"]
    above = rule.with_thresholds(share_pct=share + 1)
    assert A.run_rules([above], **A.profile_frames(prof)) == []
    db = _prof(DB_RANK)
    db_share = db.dispatch.idle_share * 100
    assert [x.rule for x in A.run_rules([rule.with_thresholds(share_pct=db_share - 1)], **A.profile_frames(db))] == \
        ["dispatch.host_bound"]
    assert A.run_rules([rule.with_thresholds(share_pct=db_share + 1)], **A.profile_frames(db)) == []


def test_cpu_run_is_not_available_with_why():
    prof = _prof("mindspore2/lenet_pynative")
    d = prof.dispatch
    assert not d.available and "no device streams" in d.why and "CPU OP" in d.why
    assert d.to_dict() == {"available": False, "why": d.why}   # the summary's "dispatch" section
    assert not [s for s in A.advise_profile(prof) if s.rule == "dispatch.host_bound"]
    assert host_dispatch(None, None, None).why.startswith("the run has no timeline")


def test_view_shows_the_analysis():
    from nbprofiler.views.dispatch import DispatchView
    prof = _prof(TORCH)
    view = DispatchView.from_profile(prof)
    head = view.layout.select_one({"name": "dispatch_headline"}).text
    assert prof.dispatch.sentence().split(";")[0].replace("(", "") in head.replace("(", "")
    bars = view.layout.select_one({"name": "dispatch_steps_src"}).data
    assert list(bars["label"]) == ["1"]
    assert bars["host_idle_ms"][0] == pytest.approx(prof.dispatch.steps["host_idle_us"].iloc[0] / 1000)
    ops = view.layout.select_one({"name": "dispatch_ops_src"}).data
    assert list(ops["op"]) == list(prof.dispatch.ops["responsible_op"])
    view.layout.select_one({"name": "dispatch_steps_src"}).selected.indices = [0]
    assert view.window == (0.0, pytest.approx(14091.97))   # the dashboard moves the timeline there
    waits = view.layout.select_one({"name": "dispatch_waits_src"})
    waits.selected.indices = [1]
    t0, t1 = view.window
    assert t0 < waits.data["t0"][1] < waits.data["t1"][1] < t1


def test_cluster_sql_stacks_the_ranks_dispatch():
    cluster = _db_cluster()
    got = cluster.sql("SELECT rank, count(*) AS tasks, sum(host_idle_us) AS idle FROM dispatch GROUP BY rank "
                      "ORDER BY rank")
    assert list(got["rank"]) == cluster.ranks
    for r in got.itertuples():
        d = cluster[r.rank].dispatch
        assert r.tasks == len(d.tasks) and r.idle == pytest.approx(d.tasks["host_idle_us"].sum())


def test_dashboard_folds_it_under_the_timeline_and_a_clicked_step_moves_the_timeline():
    from nbprofiler.views import dashboard as D
    prof = _prof(TORCH)
    db = D.Dashboard(prof)
    tl = db.select("Timeline")
    fold = db._panels["Timeline"].children[-1]
    assert fold.titles == ("Where the device waited for the host",) and "Host dispatch" not in db.views
    fold.selected_index = 0
    view = db.views["Host dispatch"]
    view.layout.select_one({"name": "dispatch_steps_src"}).selected.indices = [0]
    assert (tl.x_range.start, tl.x_range.end) == (0.0, pytest.approx(14091.97))


def test_report_links_the_dispatch_tab_to_the_timeline():
    from nbprofiler.faces.report import report_layout
    layout = report_layout(_prof(TORCH))
    tabs = layout.select_one({"name": "report_tabs"})
    titles = [t.title for t in tabs.tabs]
    steps = layout.select_one({"name": "dispatch_steps_src"})
    (callback,) = steps.selected.js_property_callbacks["change:indices"]
    assert callback.args["x_range"] is layout.select_one({"name": "timeline_x_range"})
    assert callback.args["tab"] == titles.index("Timeline") and callback.args["lo"] == "start_us"


def test_op_names_never_become_markup(tmp_path):
    """A host op named like markup reaches the headline (the sentence names it) escaped."""
    from nbprofiler.views.dispatch import DispatchView
    payload = "<img src=x onerror=alert(1)>"
    text = (DATA / TORCH / "trace_view.json").read_text(encoding="utf-8")
    text = text.replace('"aclnnInplaceZero"', json.dumps("aclnnInplaceZero" + payload))
    (tmp_path / "trace_view.json").write_text(text, encoding="utf-8")
    prof = load_quietly(tmp_path)
    assert prof.dispatch.ops["responsible_op"].iloc[0] == "aclnnInplaceZero" + payload
    head = DispatchView.from_profile(prof).layout.select_one({"name": "dispatch_headline"}).text
    assert payload not in head and "aclnnInplaceZero&lt;img src=x onerror=alert(1)&gt;" in head


def test_cli_text_summary_says_it(capsys):
    from nbprofiler.faces.cli import main
    assert main(["summary", str(DATA / TORCH)]) == 0
    out = capsys.readouterr().out
    assert f"dispatch: {_prof(TORCH).dispatch.sentence()}" in out.splitlines()


def test_torch_trace_steps_are_the_same_on_every_page():
    """The trace's only step marks are its ProfilerStep#N events: the step time, the first sentence and the
    host-dispatch finding all count from them, and the sentence names the wait that sets the step."""
    from nbprofiler.analysis.diagnosis import diagnose, fmt_ms
    from nbprofiler.analysis.steps import PROFILER_STEP_SPANS_SOURCE, step_times
    from nbprofiler.views.overview import overview_html
    prof = _prof(TORCH)
    tasks, launch_of, windows, _ = _torch_raw()
    step_ms = float(windows[1][1] - windows[1][0]) / 1000
    idle_ms = float(_host_idle(tasks, launch_of, windows)[1]) / 1000
    t = step_times(prof)
    assert (t.source, t.count) == (PROFILER_STEP_SPANS_SOURCE, len(windows))
    assert t.average_ms == pytest.approx(step_ms, abs=1e-6)
    assert list(prof.step_windows["step"]) == [1] and prof.dispatch.step_source == "ProfilerStep#N events"
    d = diagnose(prof)
    assert d.headline == (f"The average step takes {fmt_ms(step_ms)} ms (1 step, from the timeline's ProfilerStep#N "
                          f"spans): the device waits {fmt_ms(idle_ms)} ms of it ({idle_ms / step_ms * 100:.0f} %) "
                          "for the host to launch its tasks, most for aclnnInplaceZero. Look at where the device "
                          "waited for the host (Timeline).")
    s = prof.summary()
    assert s["step_time"]["source"] == PROFILER_STEP_SPANS_SOURCE and s["step_time"]["steps"] == 1
    assert s["dispatch"]["host_idle_ms_per_step"] == pytest.approx(idle_ms, abs=1e-6)
    assert "No step timing" not in overview_html(s, root=prof.root)


def test_step_marks_are_read_from_codes_and_texts_alike():
    from nbprofiler.model.derive import PROFILER_STEP_SOURCE, profiler_step_windows
    names = ["ProfilerStep#3", "aten::add", None, "ProfilerStep#2", "ProfilerStep#2x", "ProfilerStep#3"]
    tl = pd.DataFrame({"name": names, "start_us": [50.0, 1.0, 2.0, 10.0, 12.0, 90.0],
                       "dur_us": [30.0, 1.0, np.nan, 40.0, 1.0, 5.0]})
    for frame in (tl, tl.astype({"name": "category"})):
        w = profiler_step_windows(frame)
        assert w[["step", "start_us", "end_us"]].values.tolist() == [[2, 10.0, 50.0], [3, 50.0, 80.0]]
        assert set(w["source"]) == {PROFILER_STEP_SOURCE}
    assert profiler_step_windows(tl[tl["name"] == "aten::add"]) is None
