"""Shared test fixtures. Real profiler data lives in ../shared/data (read-only, never copied here)."""
from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests explore new inputs on every local run; under CI they replay a fixed set, so a CI run never
# fails on an input nobody has seen (a local run finds it, and it is kept as an explicit @example).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
# NBPROFILER_SHARED: another place for shared/ (tests of this very check point it at a missing folder)
SHARED = Path(os.environ.get("NBPROFILER_SHARED") or REPO.parent / "shared")
DATA = SHARED / "data"
EXPECTED = DATA / "expected"
NO_DATA = (f"shared data not found at {DATA}: the tests read real profiler output from shared/data beside the "
           "repository (clone it next to shared/, or set NBPROFILER_SHARED)")


def pytest_collection_modifyitems(config, items):
    """Without shared/data every test that reads it would fail on its own: skip them all with one reason."""
    if DATA.is_dir():
        return
    skip = pytest.mark.skip(reason=NO_DATA)
    for item in items:
        item.add_marker(skip)


def pytest_report_header(config):
    return None if DATA.is_dir() else f"nbprofiler: {NO_DATA}"


def datasets(*groups: str) -> list[str]:
    """The dataset folders of shared/data (``"legacy/run_2_lenet"``, ...), of ``groups`` (default: every
    group with profiler output); empty without shared/data, so a module that parametrizes over them still
    collects (and its tests are skipped with `NO_DATA`)."""
    groups = groups or ("legacy", "mindspore2", "minddata", "npu")
    return sorted(p.relative_to(DATA).as_posix() for g in groups if (DATA / g).is_dir()
                  for p in (DATA / g).iterdir() if p.is_dir())


def load_quietly(path, **kwargs):
    """`nbprofiler.load` with its ProfilerDataWarnings silenced (tests read ``prof.problems`` instead).
    ``path``: a Path, or a dataset name relative to ../shared/data such as ``"legacy/run_2_lenet"``."""
    import warnings

    import nbprofiler
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.load(DATA / path if isinstance(path, str) else path, **kwargs)


def expected(name: str) -> dict:
    """MindInsight 2.3.1's numbers for a dataset, e.g. expected("legacy__run_2_lenet__device1")."""
    return json.loads((EXPECTED / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"shared data not found at {DATA}: the repository must sit beside shared/")
    return DATA


# Outcomes of the damaged-input suite (tests/test_damaged_inputs.py), printed at the end of the run.
DAMAGE_STATS: collections.Counter = collections.Counter()


def pytest_sessionfinish(session):
    """An xdist worker hands its damaged-input outcomes to the controller, which prints them."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["damage_stats"] = dict(DAMAGE_STATS)


@pytest.hookimpl(optionalhook=True)  # an xdist hook
def pytest_testnodedown(node, error):
    DAMAGE_STATS.update(getattr(node, "workeroutput", {}).get("damage_stats", {}))


def pytest_terminal_summary(terminalreporter):
    if DAMAGE_STATS:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(DAMAGE_STATS.items()) if k != "cases")
        terminalreporter.write_line(f"damaged-input suite: {DAMAGE_STATS['cases']} damaged copies tried: {parts}")
