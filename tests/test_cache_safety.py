"""The trace cache serves an entry only for the files it was made from, and never writes into profiler
output, the profile being cached or another one."""
from __future__ import annotations

import shutil
import warnings

import pytest

from nbprofiler.io import cache

from .conftest import DATA, load_quietly


@pytest.fixture
def two_traces(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV, str(root))
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    runs = []
    for name, src in (("a", "mindspore2/lenet_pynative"), ("b", "npu/trace_view_torch_npu")):
        dst = tmp_path / name
        shutil.copytree(DATA / src, dst)
        runs.append(dst)
    return root, runs


def test_swapped_entries_are_not_served_for_each_other(two_traces):
    root, (a, b) = two_traces
    first_a, first_b = len(load_quietly(a).timeline), len(load_quietly(b).timeline)
    cache.wait()
    entries = sorted(p.parent for p in root.rglob("meta.json"))
    assert len(entries) == 2 and first_a != first_b
    x, y = entries
    x.rename(x.with_name("swap")), y.rename(x), x.with_name("swap").rename(y)  # swap the two folders
    assert len(load_quietly(a).timeline) == first_a and len(load_quietly(b).timeline) == first_b


def test_a_cache_dir_inside_another_profile_is_not_written(two_traces, monkeypatch, tmp_path):
    _, (a, b) = two_traces
    inside_b = next(p for p in b.rglob("*") if p.is_dir()) if any(p.is_dir() for p in b.rglob("*")) else b
    target = inside_b / "nbprofiler-cache"
    monkeypatch.setenv(cache.ENV, str(target))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    before = sorted(p.relative_to(b) for p in b.rglob("*"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        import nbprofiler
        nbprofiler.load(a).timeline
        cache.wait()
    assert sorted(p.relative_to(b) for p in b.rglob("*")) == before and not target.exists()
    assert any("lies in or above profiler output" in str(w.message) for w in seen)
    assert list((tmp_path / "user-cache").rglob("meta.json"))  # cached in the user cache directory instead
