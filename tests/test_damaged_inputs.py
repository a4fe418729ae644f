"""The damaged-input suite: every real file in ../shared/data, damaged in every way of tests/damage.py.

For each damaged copy the profile is loaded, every frame and the summary are built. Expectation: the
file loads (with a warning where data was skipped) or is reported in ``prof.problems`` with a typed
nbprofiler error naming it; never an unrelated exception, never a hang. A destructive damage (empty,
garbage, bad encoding) of a file that nbprofiler reads is always reported. The suite's size and
outcomes are printed at the end of the test run.
"""
from __future__ import annotations

import shutil
import signal
import warnings
from pathlib import Path

import pytest

import nbprofiler
from nbprofiler.errors import ProfilerDataError
from nbprofiler.model.profile import FRAME_NAMES

from .conftest import DAMAGE_STATS, DATA
from .damage import DAMAGES, DESTRUCTIVE

CASE_SECONDS = 30


def _files() -> list[Path]:
    out, per_kind = [], {}
    for p in sorted(DATA.rglob("*")):
        if (not p.is_file() or "expected" in p.parts or "logs" in p.parts or p.name.endswith(".done")
                or len(p.relative_to(DATA).parts) < 3):
            continue
        # The CANN export repeats one file kind per iteration; two of each kind per device are enough.
        if "timeline" in p.parts and "PROF_" in str(p):
            key = (p.parts[-3], p.name.split("_")[0])
            per_kind[key] = per_kind.get(key, 0) + 1
            if per_kind[key] > 2:
                continue
        out.append(p)
    return out


FILES = _files()


def _dataset_root(path: Path) -> Path:
    rel = path.relative_to(DATA)
    return DATA / rel.parts[0] / rel.parts[1]


def _exercise(folder: Path) -> tuple[list, dict]:
    """Load everything under ``folder`` the way a user would; return (problems, non-empty frame sizes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = nbprofiler.load(folder)
        profiles = list(obj) if isinstance(obj, nbprofiler.Cluster) else [obj]
        sizes = {}
        for prof in profiles:
            for name in sorted(FRAME_NAMES):
                frame = getattr(prof, name)
                if frame is not None and len(frame):
                    sizes[f"{prof.device}.{name}"] = len(frame)
            prof.summary()
        return [pr for prof in profiles for pr in prof.problems], sizes


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _copy_with(path: Path, data: bytes, dest: Path) -> Path:
    """A copy of the file alone, at the same relative place under its dataset (so discovery sees the same
    layout: *_ascend_ms/ASCEND_PROFILER_OUTPUT, PROF_*/device_0/timeline ...)."""
    rel = path.relative_to(_dataset_root(path))
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(DATA)) for p in FILES])
def test_damaged_copies_load_or_fail_clearly(path, tmp_path):
    original = path.read_bytes()
    base_dir = tmp_path / "original"
    _copy_with(path, original, base_dir)
    try:
        _, base_sizes = _exercise(base_dir)
        used = bool(base_sizes)
    except ProfilerDataError:
        used = False  # alone, this file is no profile (e.g. a companion file); damage still must not crash
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for damage in DAMAGES:
            data = damage(original, path.name)
            if data is None:
                continue
            case = tmp_path / damage.__name__
            target = _copy_with(path, data, case)
            signal.alarm(CASE_SECONDS)
            try:
                problems, _ = _exercise(case)
                named = [p for p in problems if Path(p.file).name == target.name or p.file == str(case)]
                outcome = ("error" if any(p.kind == "error" for p in named)
                           else "warning" if named else "loaded")
            except ProfilerDataError:
                outcome = "refused"  # e.g. the only file became unrecognisable: NoProfilerDataError
            except _Timeout:
                DAMAGE_STATS["hang"] += 1
                pytest.fail(f"{damage.__name__}: load did not finish within {CASE_SECONDS} s")
            except Exception as e:  # noqa: BLE001 - the point of the suite: nothing else may escape
                DAMAGE_STATS["crash"] += 1
                raise AssertionError(f"{damage.__name__}: {type(e).__name__}: {e}") from e
            finally:
                signal.alarm(0)
            DAMAGE_STATS["cases"] += 1
            DAMAGE_STATS[outcome] += 1
            if used and damage.__name__ in DESTRUCTIVE:
                assert outcome in ("error", "warning", "refused"), \
                    f"{damage.__name__} copy of a file that is read loaded silently"
            shutil.rmtree(case)
    finally:
        signal.signal(signal.SIGALRM, old)
