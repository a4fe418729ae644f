"""Files too large for the memory available are refused with a clear message before memory runs out."""
from __future__ import annotations

import shutil
import warnings

import pytest

import nbprofiler
from nbprofiler.errors import FileTooLargeError
from nbprofiler.io import _util

from .conftest import DATA


def test_oversized_files_are_refused_with_a_clear_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    src = DATA / "mindspore2/lenet_pynative"
    shutil.copytree(src, tmp_path / "run", ignore=shutil.ignore_patterns("logs"))
    # Pretend the machine has 4 MB free: the 2 MB trace and 1.5 MB memory record cannot be parsed.
    monkeypatch.setattr(_util, "available_memory_bytes", lambda: 4_000_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(tmp_path / "run")
        assert prof.timeline.empty
        assert prof.memory.empty
        assert not prof.op_types.empty  # small files still load
    refused = {p.file.rsplit("/", 1)[-1]: p.error for p in prof.problems if "FileTooLargeError" in p.error}
    assert set(refused) >= {"trace_view.json", "cpu_ms_memory_record_0.txt"}
    assert "GB of memory" in refused["trace_view.json"] and "refused before loading" in refused["trace_view.json"]


def test_check_size_message_names_file_and_sizes(tmp_path, monkeypatch):
    f = tmp_path / "big.json"
    f.write_bytes(b"[" + b" " * 1_000_000 + b"]")
    monkeypatch.setattr(_util, "available_memory_bytes", lambda: 1_000_000)
    with pytest.raises(FileTooLargeError) as e:
        _util.check_size(f, "csv")
    assert str(f) in str(e.value)
