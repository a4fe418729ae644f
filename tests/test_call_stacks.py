"""Python call stacks (``call_stacks``) and an op's source (`op_source`, the Source panel), on torch_npu's
``with_stack`` recordings: trace_view.json's "Call stack" args and the .db's PYTORCH_CALLCHAINS, checked
against what this test reads from the files itself (json, and sqlite3 on a copy of the database)."""
from __future__ import annotations

import collections
import json
import re
import shutil
import sqlite3
import warnings

import pytest

import nbprofiler
from nbprofiler.analysis.source import is_user_file, op_source
from nbprofiler.errors import ProfilerDataWarning
from nbprofiler.io.stacks import parse_stack
from nbprofiler.views.source import OPEN_CLASS, source_html

from .conftest import DATA, load_quietly

TEXT = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"
DB = DATA / "npu/ascend_pt_db_2rank/rank0_ascend_pt"
DB_FILE = DB / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
KERNEL = "aclnnAddmm_MatMulCommon_MatMulV2"


def _frames(texts) -> tuple:
    out = []
    for t in texts:
        m = FRAME.match(t.strip())
        out.append((m[1], int(m[2]), m[3]))
    return tuple(out)


def _user(frames) -> tuple | None:
    """This test's own reading of "user code": not in site-packages, not Python's lib/pythonX.Y, not <...>."""
    return next((f for f in frames if "site-packages" not in f[0] and not re.search(r"/lib/python3\.\d+/", f[0])
                 and not f[0].startswith("<")), None)


def _by_event(cs) -> collections.Counter:
    """(event name, frames innermost first) of every event of a call_stacks frame."""
    out = collections.Counter()
    for (_, _, name), g in cs.groupby(["track", "start_us", "name"], sort=False):
        g = g.sort_values("depth")
        assert list(g["depth"]) == list(range(len(g)))
        out[(name, tuple(zip(g["file"], g["line"].astype(int), g["function"])))] += 1
    return out


@pytest.fixture(scope="module")
def text_prof():
    return load_quietly(TEXT)


@pytest.fixture(scope="module")
def trace_events():
    data = json.loads((TEXT / "ASCEND_PROFILER_OUTPUT/trace_view.json").read_text())
    return data["traceEvents"] if isinstance(data, dict) else data


def test_the_trace_stacks_are_the_files(text_prof, trace_events):
    stacked = [e for e in trace_events if "Call stack" in (e.get("args") or {})]
    want = collections.Counter((e["name"], _frames(e["args"]["Call stack"].split(";\r\n"))) for e in stacked)
    cs = text_prof.call_stacks
    assert len(stacked) == 316 and sum(len(f) for _, f in want.elements()) == len(cs) == 4683
    assert _by_event(cs) == want
    # each stack sits on an event of the timeline, and one id per distinct stack
    keys = cs.drop_duplicates(["track", "start_us", "name"])
    tl = text_prof.timeline.assign(name=text_prof.timeline["name"].astype(str))
    assert len(keys.merge(tl, on=["track", "start_us", "name"])) == len(keys) == 316
    assert cs["stack"].nunique() == len({f for _, f in want}) == 36
    # and the SQL table is the frame
    assert text_prof.sql("SELECT count(*) AS n FROM call_stacks")["n"][0] == 4683


def test_the_db_stacks_are_the_database(tmp_path):
    copy = tmp_path / DB_FILE.name
    shutil.copy(DB_FILE, copy)
    con = sqlite3.connect(copy)
    rows = con.execute("""SELECT a.rowid, n.value, s.value FROM PYTORCH_API a JOIN PYTORCH_CALLCHAINS c
                          ON c.id = a.callchainId JOIN STRING_IDS s ON s.id = c.stack
                          JOIN STRING_IDS n ON n.id = a.name ORDER BY a.rowid, c.stackDepth""").fetchall()
    con.close()
    events: dict[int, list] = {}
    for rid, name, frame in rows:
        events.setdefault(rid, [name]).append(frame)
    want = collections.Counter((v[0], _frames(v[1:])) for v in events.values())
    prof = load_quietly(DB)
    cs = prof.call_stacks
    assert len(events) == 316 and len(cs) == len(rows) == 4683
    assert _by_event(cs) == want
    process = prof.timeline_tracks.set_index("track")["process"]
    assert set(cs["track"].map(process)) == {"PyTorch API"}


def test_the_first_user_frame_of_an_op(text_prof, trace_events):
    """An aten op's own stack: the first frame outside site-packages and the stdlib is the training script."""
    want = collections.Counter(_user(_frames(e["args"]["Call stack"].split(";\r\n"))) for e in trace_events
                               if e["name"] == "aten::conv2d" and "Call stack" in (e.get("args") or {}))
    found = op_source(text_prof, "aten::conv2d")
    assert found.via == "own" and sum(s.calls for s in found.stacks) == sum(want.values()) == 5
    got = collections.Counter()
    for s in found.stacks:
        u = s.user_frame
        got[(u["file"], u["line"], u["function"])] += s.calls
        assert u["user"] and u["local"] is None   # recorded on another machine: not on this one
    assert got == want
    assert got.most_common(1)[0][0] == ("/home/z30057886/imagenet_script/main.py", 354, "train")


def _launch_sources(trace_events) -> list[tuple[float, str, tuple]]:
    """(ts, launching op, its first user frame) of each call of `KERNEL`, this test's own walk: the
    async_npu arrow into the call leads back to the host thread; the innermost stacked cpu_op around the
    arrow's tail launched it."""
    kernels = [e for e in trace_events if e.get("name") == KERNEL and e.get("ph") == "X"]
    ends = {(e["pid"], e["tid"], e["ts"]): e["id"] for e in trace_events if e.get("ph") == "f"
            and e.get("cat") == "async_npu"}
    starts = {e["id"]: e for e in trace_events if e.get("ph") == "s" and e.get("cat") == "async_npu"}
    stacked = [e for e in trace_events if "Call stack" in (e.get("args") or {})]
    out = []
    for k in kernels:
        tail = starts[ends[(k["pid"], k["tid"], k["ts"])]]
        t = float(tail["ts"])
        around = [e for e in stacked if (e["pid"], e["tid"]) == (tail["pid"], tail["tid"])
                  and float(e["ts"]) <= t <= float(e["ts"]) + float(e["dur"])]
        inner = max(around, key=lambda e: (float(e["ts"]), -float(e["dur"])))
        out.append((float(k["ts"]), inner["name"], _user(_frames(inner["args"]["Call stack"].split(";\r\n")))))
    return out


def test_a_kernel_gets_the_stack_of_the_op_that_launched_it(text_prof, trace_events):
    """A device kernel carries no stack: its source is the stack of the framework op that launched it."""
    want = collections.Counter((name, user) for _, name, user in _launch_sources(trace_events))
    found = op_source(text_prof, KERNEL)
    assert found.via == "launch" and sum(want.values()) == 3
    got = collections.Counter()
    for s in found.stacks:
        u = s.user_frame
        got[(s.event, (u["file"], u["line"], u["function"]))] += s.calls
    assert got == want


def test_tapping_a_kernel_in_the_timeline_shows_its_launch_stack(text_prof, trace_events):
    from nbprofiler.views.timeline import TimelineView
    view = TimelineView(text_prof)
    d = view.source.data
    bar = next(i for i in range(len(d["name_code"])) if d["count"][i] == 1
               and view.dictionary.name(int(d["name_code"][i])) == KERNEL)
    view.source.selected.indices = [bar]
    ts = view.event["start_us"] + text_prof.origin_us
    # the call at that start (1 us apart: absolute us near 1.7e15 are 0.25 us apart as floats)
    ((name, user),) = [(n, u) for t, n, u in _launch_sources(trace_events) if abs(t - ts) < 1]
    page = view.source_panel.value
    assert f"Source of {KERNEL}" in page and f"from {name}:" in page
    assert f"your code: {user[0]}, line {user[1]} in {user[2]}" in page


def test_ops_without_stacks_say_why(text_prof):
    assert "no call stack" in op_source(text_prof, "hcom_allReduce__868_0_1").reason
    prof = load_quietly("npu/kernel_details_newest")
    found = op_source(prof, "anything")
    assert not found.stacks and "with_stack" in found.reason


@pytest.mark.parametrize("path, user", [
    ("/home/u/.local/lib/python3.9/site-packages/torch/_ops.py", False),
    ("/usr/lib/python3/dist-packages/numpy/core/numeric.py", False),
    ("/home/u/miniconda3/lib/python3.9/multiprocessing/process.py", False),
    ("C:\\Python311\\Lib\\site-packages\\torch\\nn\\modules\\module.py", False),
    ("<frozen runpy>", False), ("<string>", False),
    ("/home/u/src/pytorch/torch/nn/modules/module.py", False),    # a framework's source checkout
    ("/home/u/imagenet_script/main.py", True), ("train.py", True), ("/home/u/torch_experiments/train.py", True),
])
def test_user_code_is_decided_by_the_path(path, user):
    assert is_user_file(path) is user


def _synthetic(tmp_path, stack: str):
    """A torch_npu trace of two stacked events: ``stack`` on aten::mul, a malformed one on aten::add."""
    out = tmp_path / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Python"}},
              {"ph": "X", "name": "aten::mul", "pid": 1, "tid": 1, "ts": "1000.0", "dur": 5, "cat": "cpu_op",
               "args": {"Call stack": stack}},
              {"ph": "X", "name": "aten::add", "pid": 1, "tid": 1, "ts": "1010.0", "dur": 5, "cat": "cpu_op",
               "args": {"Call stack": "train.py(twelve): step;\r\ntrain.py(3): <module>"}}]
    (out / "trace_view.json").write_text(json.dumps(events))
    return out.parent


def test_a_malformed_stack_is_dropped_with_a_warning(tmp_path):
    run = _synthetic(tmp_path, "/srv/app/model.py(41): forward;\r\n/srv/app/train.py(9): <module>")
    prof = nbprofiler.load(run)
    with pytest.warns(ProfilerDataWarning, match="call stack.*aten::add"):
        cs = prof.call_stacks
    assert list(cs["name"]) == ["aten::mul"] * 2
    assert list(zip(cs["file"], cs["line"], cs["function"])) == [("/srv/app/model.py", 41, "forward"),
                                                                  ("/srv/app/train.py", 9, "<module>")]
    (problem,) = [p for p in prof.problems if p.field == "Call stack"]
    assert problem.kind == "warning" and problem.file.endswith("trace_view.json")
    assert parse_stack("a.py(1): f;\r\nnot a frame") is None and parse_stack("a.py(1): f") == [("a.py", 1, "f")]


def test_a_hostile_file_name_is_escaped_and_a_local_file_gets_an_open_link(tmp_path):
    hostile = tmp_path / "<img src=x onerror=alert(1)>&\"'.py"
    hostile.write_text("x = 1\n" * 10)
    run = _synthetic(tmp_path, f"/usr/lib/python3.11/runpy.py(88): _run_code;\r\n{hostile}(7): <lambda>;\r\n"
                               "<string>(1): <module>")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)
        found = op_source(nbprofiler.load(run), "aten::mul")
    (stack,) = found.stacks
    assert stack.user_depth == 1 and stack.user_frame["local"] == str(hostile.resolve())
    page = source_html(found)
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;&amp;&quot;&#x27;.py" in page
    assert "&lt;lambda&gt;" in page and "<lambda>" not in page
    link = re.search(rf'<a href="#" class="{OPEN_CLASS}" data-path="([^"]*)" data-line="(\d+)"', page)
    assert link and link[2] == "7" and "<" not in link[1] and "&lt;img" in link[1]
    assert 'data-user-frame="1"' in page


def test_selecting_an_operator_shows_its_source(text_prof):
    from nbprofiler.views.operators import OperatorsView
    view = OperatorsView(text_prof)
    src = view._named[f"op_table_src_{view.kind}"]
    row = list(src.data["op_name"]).index(KERNEL)
    src.selected.indices = [row]
    page = view.source_panel.value
    assert f"Source of {KERNEL}" in page and "main.py, line 354 in train" in page
    assert OPEN_CLASS not in page and "not on this machine" in page    # recorded elsewhere: the stack only


def test_a_malformed_database_stack_costs_that_stack(tmp_path):
    """A PYTORCH_CALLCHAINS frame whose text is not ``file(line): function`` drops the stacks that use it,
    with a warning naming the database; every other stack loads."""
    run = tmp_path / DB.name
    shutil.copytree(DB, run)
    for p in [run, *run.rglob("*")]:   # the shared data is read-only, its copy must not be
        p.chmod(0o755 if p.is_dir() else 0o644)
    path = run / "ASCEND_PROFILER_OUTPUT" / DB_FILE.name
    con = sqlite3.connect(path)
    # the frame text used by the fewest events' stacks
    frame, = con.execute("""SELECT c.stack FROM PYTORCH_CALLCHAINS c JOIN PYTORCH_API a ON a.callchainId = c.id
                            GROUP BY c.stack ORDER BY count(DISTINCT a.rowid), c.stack LIMIT 1""").fetchone()
    hit, = con.execute("""SELECT count(DISTINCT a.rowid) FROM PYTORCH_API a JOIN PYTORCH_CALLCHAINS c
                          ON c.id = a.callchainId WHERE c.stack = ?""", (frame,)).fetchone()
    con.execute("UPDATE STRING_IDS SET value = '<img src=x>: no line' WHERE id = ?", (frame,))
    con.commit()
    con.close()
    prof = nbprofiler.load(run)
    with pytest.warns(ProfilerDataWarning, match="call stack"):
        cs = prof.call_stacks
    assert 0 < hit < 316 and cs.drop_duplicates(["track", "start_us", "name"]).shape[0] == 316 - hit
    assert not cs["file"].str.contains("<img", regex=False).any()
    assert any(p.field == "*_CALLCHAINS.stack" and p.file == str(path) for p in prof.problems)
