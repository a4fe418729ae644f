"""CPU FRAMEWORK files of the MindSpore 2.10 CPU run: memory record and per-execution op timestamps."""
from __future__ import annotations

import shutil

import pytest

import nbprofiler
from nbprofiler.errors import MalformedFileError, ProfilerDataWarning
from nbprofiler.io import framework

from .conftest import DATA

RUN = DATA / "mindspore2/lenet_pynative"
FRAMEWORK_DIR = RUN / "vm_11535_20261121042531696_ascend_ms/FRAMEWORK"


@pytest.fixture(scope="module")
def prof():
    return nbprofiler.load(RUN)


def test_memory_record(prof):
    mem = prof.memory
    assert len(mem) == 32400 and prof.problems == []
    assert list(mem.columns[:6]) == ["component", "time_us", "allocated_mb", "reserved_mb", "active_mb", "device"]
    first, last = mem.iloc[0], mem.iloc[-1]
    # first row 1795235132515411913,602112,1073741824,602112 ; last 1795235241714510917,3324928,...
    # on the timeline's clock: from the trace's first event ("Default" scope, ts "1795235132515481.674")
    assert mem.attrs["origin_us"] == prof.origin_us and mem.attrs["first_us"] == 1795235132515411.913
    assert first.time_us == pytest.approx((1795235132515411913 - 1795235132515481674) / 1000, abs=0.25)
    assert last.time_us - first.time_us == pytest.approx((1795235241714510917 - 1795235132515411913) / 1000, abs=1e-6)
    assert (first.allocated_mb, first.reserved_mb) == (602112 / 1024 / 1000, 1073741824 / 1024 / 1000)
    assert mem["allocated_mb"].max() == 5379072 / 1024 / 1000
    assert (first.component, first.device) == ("MindSpore", "CPU:0")
    assert mem["time_us"].is_monotonic_increasing


def test_cpu_op_executions_match_the_detail_file(prof):
    ex = framework.cpu_op_executions(prof.run)
    assert list(ex.columns) == ["op_name", "op_type", "start_us", "dur_us", "tid"]
    assert len(ex) == 13800  # = the sum of op_occurrences in cpu_op_detail_info_0.csv
    assert ex["start_us"].is_monotonic_increasing and set(ex["tid"]) == {0}
    first = ex.iloc[0]
    # Default/Conv2D-op0;HostCpuOps;1795235132515481637,84.6201,0 is the earliest execution
    assert (first.op_name, first.op_type, first.start_us, first.dur_us) == (
        "Default/Conv2D-op0", "Conv2D", 1795235132515481.637, pytest.approx(84620.1))
    # per op: executions and summed time agree with the detail file (its times are ms, 6 digits)
    detail = prof.ops[prof.ops.kind == "cpu"].set_index("op_name")
    per_op = ex.groupby("op_name").agg(count=("dur_us", "size"), total=("dur_us", "sum"))
    assert (per_op["count"] == detail.loc[per_op.index, "count"]).all()
    assert per_op["total"].to_numpy() == pytest.approx(detail.loc[per_op.index, "total_time_us"].to_numpy(), rel=1e-4)
    # bare PyNative names get their type from the detail file
    assert set(ex.loc[ex.op_name == "MatMul", "op_type"]) == {"MatMul"}


def test_cpu_op_executions_absent_file_is_none():
    prof = nbprofiler.load(DATA / "legacy/run_2_lenet")
    assert framework.cpu_op_executions(prof.run) is None


def test_cpu_op_executions_bad_record_costs_that_record_and_names_line(tmp_path):
    lines = (FRAMEWORK_DIR / "cpu_op_execute_timestamp_0.txt").read_text().splitlines(True)
    lines[2] = lines[2].replace(",0 ", ",x ", 1)
    (tmp_path / "cpu_op_execute_timestamp_0.txt").write_text("".join(lines))
    prof = nbprofiler.load(tmp_path)
    with pytest.warns(ProfilerDataWarning) as w:
        ex = framework.cpu_op_executions(prof.run)
    (err,) = [x.message.error for x in w]
    assert err.line == 3 and lines[2].split(";")[0] in err.reason and "skipped" in err.reason
    assert len(ex) == 13800 - 1
    # a file of nothing but bad records is rejected whole, naming the first
    (tmp_path / "cpu_op_execute_timestamp_0.txt").write_text("".join(l.replace(",0 ", ",x ") for l in lines))
    with pytest.raises(MalformedFileError) as e:
        framework.cpu_op_executions(prof.run)
    assert e.value.line is not None


def test_cpu_op_executions_cut_last_record_warns(tmp_path):
    text = (FRAMEWORK_DIR / "cpu_op_execute_timestamp_0.txt").read_text().rstrip()
    cut = text[: text.rindex(",")]  # the last triple loses its third field
    (tmp_path / "cpu_op_execute_timestamp_0.txt").write_text(cut)
    prof = nbprofiler.load(tmp_path)
    with pytest.warns(ProfilerDataWarning, match="cut off"):
        ex = framework.cpu_op_executions(prof.run)
    assert len(ex) == 13799


def test_memory_record_bad_cell_costs_that_value(tmp_path):
    shutil.copy(FRAMEWORK_DIR / "cpu_ms_memory_record_0.txt", tmp_path)
    path = tmp_path / "cpu_ms_memory_record_0.txt"
    lines = path.read_text().splitlines(True)
    lines[5] = lines[5].replace(",1073741824,", ",10737x1824,")
    path.write_text("".join(lines))
    prof = nbprofiler.load(tmp_path)
    n = len(lines) - 1
    with pytest.warns(ProfilerDataWarning):
        assert len(prof.memory) == n and prof.memory["reserved_mb"].isna().sum() == 1
    (problem,) = prof.problems
    assert (problem.kind, problem.line, problem.field) == ("warning", 6, "Total Reserved(Byte)")
    # a memory record with no timeline beside it: the profile counts from its first record
    assert prof.origin_us == pytest.approx(1795235132515411.913, abs=0.25)
    assert prof.memory["time_us"].iloc[0] == pytest.approx(0.0, abs=0.25)
