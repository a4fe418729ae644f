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


_NUMPY_NOTICE = ("\nA module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.4.6 as it may crash. To "
                 "support both 1.x and 2.x\nversions of NumPy, modules must be compiled with NumPy 2.0.\n\n"
                 "Traceback (most recent call last):" + '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
                 * 60)


def _fake_mindspore(tmp_path, monkeypatch, raise_after: bool = False):
    """A package named mindspore whose import prints what NumPy 2 prints for a module compiled against
    NumPy 1.x (the message and a 60-frame stack, in one write, as numpy.core._multiarray_umath does), then
    a log line of its own; with ``raise_after`` the import then fails."""
    import sys
    pkg = tmp_path / "fake" / "mindspore"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import sys\n__version__ = '2.10.0'\n"
        f"sys.stderr.write({_NUMPY_NOTICE!r})\n"
        "sys.stderr.write('AttributeError: _ARRAY_API not found\\n')\n"
        "sys.stderr.write('[WARNING] ME(1:1,MainProcess): its own log line\\n')\n"
        + ("raise ImportError('numpy.core.multiarray failed to import')\n" if raise_after else ""))
    (pkg / "profiler.py").write_text("PROFILER = 'fake'\n")
    for name in [m for m in sys.modules if m == "mindspore" or m.startswith("mindspore.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))


def test_numpys_numpy_1x_traceback_at_mindspores_import_is_one_line(tmp_path, monkeypatch, capsys):
    import sys
    _fake_mindspore(tmp_path, monkeypatch)
    real = sys.stderr
    profiler = cellprof._mindspore()
    assert profiler.PROFILER == "fake" and sys.stderr is real
    err = capsys.readouterr().err
    assert "Traceback" not in err and "_ARRAY_API" not in err and "File " not in err
    assert "its own log line" in err                       # MindSpore's own output still shows
    notes = [line for line in err.splitlines() if "NumPy 1.x" in line]   # only the one-line note
    assert len(notes) == 1 and notes[0].startswith("nbprofiler: hid NumPy") and "MindSpore 2.10.0" in notes[0], err
    assert len(err) < 600    # was a 60-frame stack trace (3,300 px in the cell)


def test_a_mindspore_that_cannot_import_with_numpy_2_says_so(tmp_path, monkeypatch, capsys):
    _fake_mindspore(tmp_path, monkeypatch, raise_after=True)
    with pytest.raises(cellprof.MindSporeMissing, match="needs NumPy 1.x"):
        cellprof._mindspore()
    assert "Traceback" not in capsys.readouterr().err


def test_stderr_without_the_notice_passes_untouched(capsys):
    import sys
    with cellprof.quiet_numpy_notice() as gate:
        sys.stderr.write("[WARNING] ME: something else\n")
    assert gate.hidden == 0 and capsys.readouterr().err == "[WARNING] ME: something else\n"
