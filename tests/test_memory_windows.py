"""The schedule-window memory quirk: each window's cpu_ms_memory_record repeats earlier windows' rows;
each session's memory frame is clipped to its own window, with a warning saying why."""
from __future__ import annotations

import json
import shutil

import pytest

from .conftest import DATA, load_quietly

LENET = DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms"
LATER = "vm_11535_20261121050000000_ascend_ms"


def test_each_window_keeps_only_its_own_memory_records(tmp_path):
    shutil.copytree(LENET, tmp_path / LENET.name)
    shutil.copytree(LENET, tmp_path / LATER)
    record = tmp_path / LATER / "FRAMEWORK/cpu_ms_memory_record_0.txt"
    lines = record.read_text().splitlines(True)
    # the later window's file starts with 500 records of an earlier window, 3.3 s before its own
    earlier = [f"{int(l.split(',', 1)[0]) - 3_300_000_000},{l.split(',', 1)[1]}" for l in lines[1:501]]
    record.write_text("".join([lines[0]] + earlier + lines[1:]))
    own = load_quietly(tmp_path, device="0").memory
    later = load_quietly(tmp_path, device=f"0@{LATER}")
    mem = later.memory
    assert len(mem) == len(own) == len(lines) - 1  # the repeats are gone, every own record kept
    assert mem["time_us"].tolist() == pytest.approx(own["time_us"].tolist(), abs=1e-6)
    assert mem.attrs["origin_us"] == pytest.approx(own.attrs["origin_us"], abs=1e-3)
    assert mem.attrs["clipped_rows"] == 500
    (problem,) = [p for p in later.problems if p.file == str(record)]
    assert problem.kind == "warning" and "500 of" in problem.error and "earlier schedule windows" in problem.error
    assert problem.line == 2
    # a run that is not one of several windows is left as written
    alone = tmp_path / "alone" / LATER
    shutil.copytree(tmp_path / LATER, alone)
    assert len(load_quietly(alone.parent).memory) == len(lines) - 1 + 500


def test_npu_memory_record_of_a_later_window_is_clipped_too(tmp_path):
    src = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"
    first, later = "host_1_20250101000000000_ascend_pt", "host_1_20250101000100000_ascend_pt"
    shutil.copytree(src, tmp_path / first)
    shutil.copytree(src, tmp_path / later)
    record = tmp_path / later / "ASCEND_PROFILER_OUTPUT/memory_record.csv"
    lines = record.read_text().splitlines(True)

    def earlier(line):  # the same record 3.3 s earlier (Timestamp(us) is the second field)
        cells = line.split(",")
        cells[1] = f"{float(cells[1].strip()) - 3_300_000:.3f}"
        return ",".join(cells)
    record.write_text("".join([lines[0]] + [earlier(l) for l in lines[1:101]] + lines[1:]))
    own = load_quietly(tmp_path, device="0").memory
    prof = load_quietly(tmp_path, device=f"0@{later}")
    assert len(prof.memory) == len(own) == len(lines) - 1
    assert prof.memory["time_us"].tolist() == pytest.approx(own["time_us"].tolist())
    (problem,) = [p for p in prof.problems if p.file == str(record)]
    assert "100 of" in problem.error and "3.3" in problem.error


def test_a_window_loaded_alone_is_clipped_when_its_schedule_repeats(tmp_path):
    src = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"
    folder = tmp_path / "host_1_20250101000100000_ascend_pt"
    shutil.copytree(src, folder)
    record = folder / "ASCEND_PROFILER_OUTPUT/memory_record.csv"
    lines = record.read_text().splitlines(True)

    def earlier(line):
        cells = line.split(",")
        cells[1] = f"{float(cells[1].strip()) - 3_300_000:.3f}"
        return ",".join(cells)
    record.write_text("".join([lines[0]] + [earlier(l) for l in lines[1:101]] + lines[1:]))
    assert len(load_quietly(folder).memory) == len(lines) - 1 + 100  # schedule repeat 1: one window, as written
    info_path = folder / "profiler_info_0.json"
    info = json.loads(info_path.read_text())
    info["config"]["common_config"]["schedule"]["repeat"] = 3
    info_path.write_text(json.dumps(info))
    prof = load_quietly(folder)
    assert len(prof.memory) == len(lines) - 1
    assert any("earlier schedule windows" in p.error for p in prof.problems)
