"""The schedule-window memory quirk: each later window's cpu_ms_memory_record (and memory_record.csv)
starts with the earlier windows' records copied verbatim (in a real two-window MindSpore 2.10 CPU recording
the second file held the first file's 216 records, then its own 216). Those copies are dropped only on
evidence: the same records, same timestamps, in the file of an earlier window of the same rank beside it.
The result is the same whether the window is loaded alone or through its parent, and two separate runs
never lose a record. Every folder is a copy of real data in a tmp dir."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from .conftest import DATA, load_quietly

LENET = DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms"
FIRST, LATER = "vm_11535_20261121042000000_ascend_ms", "vm_11535_20261121042531696_ascend_ms"
CPU_RECORD = "FRAMEWORK/cpu_ms_memory_record_0.txt"
PT = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"
PT_RECORD = "ASCEND_PROFILER_OUTPUT/memory_record.csv"


def _shift_ns(line: str, ns: int) -> str:
    ts, rest = line.split(",", 1)
    return f"{int(ts) + ns},{rest}"


def _shift_us(line: str, us: float) -> str:  # memory_record.csv: Timestamp(us) is the second field
    cells = line.split(",")
    cells[1] = f"{float(cells[1].strip()) + us:.3f}"
    return ",".join(cells)


def _memory_problems(prof, record):
    return [p for p in prof.problems if p.file == str(record)]


@pytest.fixture
def windows(tmp_path):
    """parent/FIRST: an earlier window, its 500 records 3.3 s before the LeNet run; parent/LATER: the real
    LeNet run, whose memory file starts with FIRST's 500 records copied verbatim (as MindSpore writes)."""
    parent = tmp_path / "parent"
    shutil.copytree(LENET, parent / FIRST)
    shutil.copytree(LENET, parent / LATER)
    lines = (LENET / CPU_RECORD).read_text().splitlines(True)
    earlier = [_shift_ns(line, -3_300_000_000) for line in lines[1:501]]
    (parent / FIRST / CPU_RECORD).write_text("".join([lines[0]] + earlier))
    (parent / LATER / CPU_RECORD).write_text("".join([lines[0]] + earlier + lines[1:]))
    return parent, len(lines) - 1


def test_a_window_drops_the_earlier_windows_records_alone_or_through_its_parent(windows):
    parent, own_rows = windows
    real = load_quietly("mindspore2/lenet_pynative").memory  # the same run with no earlier window
    alone = load_quietly(parent / LATER)
    through = load_quietly(parent, device=f"0@{LATER}")
    for prof in (alone, through):
        mem = prof.memory
        assert len(mem) == own_rows == len(real) and mem.attrs["repeated_rows"] == 500
        assert mem["time_us"].tolist() == pytest.approx(real["time_us"].tolist(), abs=1e-6)
        (problem,) = _memory_problems(prof, parent / LATER / CPU_RECORD)
        assert problem.kind == "warning" and "500 of 32900" in problem.error and FIRST in problem.error
        assert "same timestamps" in problem.error and problem.line == 2
    pd.testing.assert_frame_equal(alone.memory, through.memory)
    # the earlier window keeps its own records, on its own (placeholder) timeline's clock
    first = load_quietly(parent, device="0")
    assert len(first.memory) == 500 and not _memory_problems(first, parent / FIRST / CPU_RECORD)


def test_records_before_the_timeline_are_not_repeats_without_evidence(windows):
    """The later window's file also holds 3 records of its own 5-7 ms before its first traced event (real
    allocations, not in the earlier window's file): they stay, on the timeline's clock before 0."""
    parent, own_rows = windows
    record = parent / LATER / CPU_RECORD
    lines = record.read_text().splitlines(True)
    first_own = lines[501]
    extra = [_shift_ns(first_own, -(5_000_000 + i * 1_000_000)) for i in (2, 1, 0)]
    record.write_text("".join(lines[:501] + extra + lines[501:]))
    mem = load_quietly(parent / LATER).memory
    assert len(mem) == own_rows + 3 and mem.attrs["repeated_rows"] == 500
    assert (mem["time_us"] < -1000).sum() == 3


def test_two_separate_runs_keep_every_record(tmp_path):
    """Two single runs of rank 0 side by side: the later one's records before its timeline (3 allocations
    5-7 ms before its first traced event) are real; nothing in the earlier run's file repeats them."""
    parent = tmp_path / "runs"
    shutil.copytree(LENET, parent / FIRST)
    shutil.copytree(LENET, parent / LATER)
    lines = (LENET / CPU_RECORD).read_text().splitlines(True)
    # the earlier run: the same workload an hour before
    (parent / FIRST / CPU_RECORD).write_text("".join([lines[0]] + [_shift_ns(x, -3_600_000_000_000)
                                                                     for x in lines[1:]]))
    extra = [_shift_ns(lines[1], -(5_000_000 + i * 1_000_000)) for i in (2, 1, 0)]
    record = parent / LATER / CPU_RECORD
    record.write_text("".join([lines[0]] + extra + lines[1:]))
    for prof in (load_quietly(parent, device=f"0@{LATER}"), load_quietly(parent / LATER)):
        mem = prof.memory
        assert len(mem) == len(lines) - 1 + 3 and "repeated_rows" not in mem.attrs
        assert not _memory_problems(prof, record)
        assert (mem["time_us"] < -1000).sum() == 3
    assert len(load_quietly(parent, device="0").memory) == len(lines) - 1


def test_npu_memory_record_repeats_dropped_alone_or_through_parent(tmp_path):
    first, later = "host_1_20250101000000000_ascend_pt", "host_1_20250101000100000_ascend_pt"
    parent = tmp_path / "parent"
    shutil.copytree(PT, parent / first)
    shutil.copytree(PT, parent / later)
    lines = (PT / PT_RECORD).read_text().splitlines(True)
    earlier = [_shift_us(line, -3_300_000) for line in lines[1:101]]
    (parent / first / PT_RECORD).write_text("".join([lines[0]] + earlier))
    record = parent / later / PT_RECORD
    record.write_text("".join([lines[0]] + earlier + lines[1:]))
    real = load_quietly("npu/ascend_pt_text_2rank", device="0").memory
    alone, through = load_quietly(parent / later), load_quietly(parent, device=f"0@{later}")
    for prof in (alone, through):
        assert len(prof.memory) == len(real) == len(lines) - 1
        assert prof.memory["time_us"].tolist() == pytest.approx(real["time_us"].tolist())
        (problem,) = _memory_problems(prof, record)
        assert "100 of" in problem.error and first in problem.error
    pd.testing.assert_frame_equal(alone.memory, through.memory)


def test_a_repeating_window_without_its_earlier_windows_keeps_its_records(tmp_path):
    """The metadata says the schedule repeats, but no earlier window is beside this one: nothing proves
    the early records are copies, so all are kept, and a warning says why they precede the timeline."""
    folder = tmp_path / "host_1_20250101000100000_ascend_pt"
    shutil.copytree(PT, folder)
    record = folder / PT_RECORD
    lines = record.read_text().splitlines(True)
    record.write_text("".join([lines[0]] + [_shift_us(x, -3_300_000) for x in lines[1:101]] + lines[1:]))
    prof = load_quietly(folder)
    assert len(prof.memory) == len(lines) - 1 + 100 and not _memory_problems(prof, record)  # repeat 1
    info_path = folder / "profiler_info_0.json"
    info = json.loads(info_path.read_text())
    info["config"]["common_config"]["schedule"]["repeat"] = 3
    info_path.write_text(json.dumps(info))
    prof = load_quietly(folder)
    assert len(prof.memory) == len(lines) - 1 + 100
    (problem,) = _memory_problems(prof, record)
    assert problem.kind == "warning" and "no earlier window" in problem.error and "100 of" in problem.error
