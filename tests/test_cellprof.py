"""``%%nbprofiler profile`` for real: MindSpore's CPU build trains a small LeNet with a MindData pipeline
in an IPython shell under the magic, and the profile it binds holds that run's numbers."""
from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from nbprofiler.faces import cellprof
from nbprofiler.faces.magics import register

from .browser.cellprof_cells import LENET_CELL as LENET


@pytest.fixture(scope="module")
def shell():
    had = InteractiveShell.initialized()
    sh = InteractiveShell.instance()
    register(sh)
    yield sh
    if not had:
        InteractiveShell.clear_instance()  # later tests create the shell they need


def test_a_lenet_cell_profiled_for_real_holds_its_own_numbers(shell, tmp_path):
    out = tmp_path / "runs"
    cell = f"%%nbprofiler profile --data-process --memory --output {out} --no-show --as lenet\nSTEPS = 10\n{LENET}"
    result = shell.run_cell(cell)
    assert result.success, result.error_in_exec
    prof = shell.user_ns["lenet"]
    assert prof.generation == "mindspore2" and prof.root.parent == out  # MindSpore's own *_ascend_ms folder
    assert len(prof.host_queue) == 10 and list(prof.host_queue["step"]) == list(range(1, 11))  # 10 steps
    assert set(prof.minddata_pipeline["op_type"]) == {"BatchOp", "MapOp", "GeneratorOp"}
    types = set(prof.op_types["op_type"])
    assert {"Conv2D", "MatMul", "MaxPool"} <= types
    assert not prof.memory.empty and prof.timeline["name"].str.contains("Conv2D").any()


def test_a_cell_that_raises_still_stops_the_profiler_and_loads_what_ran(shell, tmp_path, capsys):
    out = tmp_path / "runs"
    cell = (f"%%nbprofiler profile --output {out} --no-show --as broken\nSTEPS = 3\n{LENET}\n"
            "raise RuntimeError('after training')")
    result = shell.run_cell(cell)
    assert isinstance(result.error_in_exec, RuntimeError) and "after training" in str(result.error_in_exec)
    prof = shell.user_ns["broken"]
    assert "Conv2D" in set(prof.op_types["op_type"])
    assert "the profile holds what ran before it (broken)" in capsys.readouterr().out


def test_without_mindspore_the_magic_says_how_to_install_it(shell, monkeypatch, capsys):
    def missing():
        raise cellprof.MindSporeMissing(f"%%nbprofiler profile needs MindSpore in this kernel: {cellprof.INSTALL}")
    monkeypatch.setattr(cellprof, "_mindspore", missing)
    shell.run_cell("%%nbprofiler profile --no-show\nx = 1")
    assert 'pip install "nbprofiler[mindspore]"' in capsys.readouterr().out


def test_output_never_inside_a_profile_and_options_are_checked(tmp_path):
    from .conftest import DATA
    session = next((DATA / "mindspore2" / "lenet_pynative").glob("*_ascend_ms"))
    with pytest.raises(ValueError, match="inside the profiler output"):
        cellprof.output_folder(str(session / "new"))
    assert cellprof.output_folder(None, tmp_path).parent == tmp_path / "nbprofiler-runs"
    assert cellprof.parse("--schedule 1,2,0,1").schedule == {"wait": 1, "active": 2, "warmup": 0, "repeat": 1}
    from nbprofiler.faces.magics import MagicUsageError
    with pytest.raises(MagicUsageError, match="--schedule"):
        cellprof.parse("--schedule 1")
