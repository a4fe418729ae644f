"""Without ../shared/data the suite says so once and skips, instead of failing test by test."""
from __future__ import annotations

import os
import subprocess
import sys

from .conftest import REPO


def test_a_checkout_without_shared_data_skips_with_one_reason(tmp_path):
    env = dict(os.environ, NBPROFILER_SHARED=str(tmp_path / "no-shared"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                          "tests/test_schema.py", "tests/test_json_slice.py"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 0, out[-2000:]
    assert "error" not in out.lower().split("short test summary")[0][-400:]
    assert "passed" not in out.splitlines()[-1] and "skipped" in out.splitlines()[-1]
    assert f"shared data not found at {tmp_path / 'no-shared' / 'data'}" in out
