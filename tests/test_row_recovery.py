"""Row-level recovery: a damaged row of a real file costs that row (with a warning naming file and line),
not the file; a file that is mostly damaged is still rejected whole (`nbprofiler.io._util.BAD_ROW_LIMIT`)."""
from __future__ import annotations

import shutil

import pytest

from nbprofiler.errors import MalformedFileError
from nbprofiler.io import _util

from .conftest import DATA, load_quietly

PT = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"


def _copy_pt(tmp_path, name: str, damage) -> tuple:
    """A copy of rank 0 of the text torch_npu run with one ASCEND_PROFILER_OUTPUT file damaged."""
    dest = tmp_path / "rank0_ascend_pt"
    shutil.copytree(PT, dest)
    path = dest / "ASCEND_PROFILER_OUTPUT" / name
    lines = path.read_text().splitlines(True)
    path.write_text("".join(damage(lines)))
    return dest, lines


def _drop_field(line: str, index: int) -> str:
    cells = line.split(",")
    return ",".join(cells[:index] + cells[index + 1:])


def test_kernel_row_without_its_duration_field_costs_that_row(tmp_path):
    header = (PT / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_text().splitlines()[0].split(",")
    dur = header.index("Duration(us)")
    # line 17 of the file (index 16) loses its Duration field: every later cell shifts left by one
    folder, lines = _copy_pt(tmp_path, "kernel_details.csv",
                             lambda ls: ls[:16] + [_drop_field(ls[16], dur)] + ls[17:])
    full = load_quietly(PT).kernels
    prof = load_quietly(folder)
    kernels = prof.kernels
    assert len(kernels) == len(full) - 1 == len(lines) - 2
    assert kernels["name"].tolist() == full["name"].drop(index=15).tolist()
    (problem,) = prof.problems
    assert problem.kind == "warning" and problem.line == 17 and problem.file.endswith("kernel_details.csv")
    assert "row has 7 fields, the header has 8" in problem.error
    # the op-type table (built from the same file) counts the other kernels
    assert prof.op_types["count"].sum() == len(full) - 1


def test_memory_record_bad_value_costs_that_value(tmp_path):
    folder, lines = _copy_pt(tmp_path, "memory_record.csv",
                             lambda ls: ls[:40] + [ls[40].replace(",", ",x", 2).replace(",x", ",", 1)] + ls[41:])
    prof = load_quietly(folder)
    mem = prof.memory
    assert len(mem) == len(lines) - 1
    (problem,) = prof.problems
    assert problem.kind == "warning" and problem.line == 41 and problem.field is not None


def test_mostly_garbage_file_is_rejected_whole(tmp_path):
    # every fifth kernel row loses a field: 20 % > BAD_ROW_LIMIT
    folder, lines = _copy_pt(tmp_path, "kernel_details.csv",
                             lambda ls: [ls[0]] + [_drop_field(l, 5) if i % 5 == 0 else l
                                                   for i, l in enumerate(ls[1:])])
    prof = load_quietly(folder)
    assert prof.kernels.empty
    (problem,) = [p for p in prof.problems if p.file.endswith("kernel_details.csv")]
    assert problem.kind == "error" and problem.line == 2 and "MalformedFileError" in problem.error
    assert f"of {len(lines) - 1} rows are malformed" in problem.error
    with pytest.raises(MalformedFileError):
        _util.read_csv(folder / "ASCEND_PROFILER_OUTPUT/kernel_details.csv")


def test_quoted_fields_with_separators_and_newlines_keep_their_lines(tmp_path):
    f = tmp_path / "q.csv"
    f.write_text('a,b,c\n1,"x,y",2\n3,"multi\nline",4\n5,6\n7,8,9\n' + "1,2,3\n" * 20)
    with pytest.warns(Warning, match="line 5: row has 2 fields"):
        df = _util.read_csv(f)
    assert df["b"].tolist()[:3] == ["x,y", "multi\nline", "8"]
    assert [_util.line_of(df, i) for i in range(3)] == [2, 3, 6]


def test_hccl_link_cell_that_is_not_json_costs_that_row(tmp_path):
    src = DATA / "legacy/cluster_4rank_pipeline/hccl_raw_0.csv"
    full = load_quietly(src.parent, device="0").hccl_links
    lines = src.read_text().splitlines(True)
    lines[2] = lines[2].replace('"{""1-0""', '"{""1-0"" oops', 1)  # step 2's link_info no longer parses
    (tmp_path / "hccl_raw_0.csv").write_text("".join(lines))
    prof = load_quietly(tmp_path)
    links = prof.hccl_links
    assert 2 not in set(links["step"]) and len(links) == len(full[full["step"] != 2])
    (problem,) = prof.problems
    assert problem.kind == "warning" and problem.line == 3 and "link_info: not JSON" in problem.error
