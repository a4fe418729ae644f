"""nbprofiler's numbers against MindInsight 2.3.1's on the same files (../shared/data/expected).

Each expected file is checked with ../shared/tools/compare_summary.py (the mapping and tolerances are
defined there) on the output of the real command ``nbprofiler summary DIR --device ID --json``.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import DATA, EXPECTED, SHARED, expected

CASES = sorted(p.stem for p in EXPECTED.glob("*.json"))


def _dataset(case: str):
    *parts, dev = case.split("__")
    return DATA.joinpath(*parts), dev.removeprefix("device")


def _summary(path, device) -> dict:
    out = subprocess.run([sys.executable, "-m", "nbprofiler.faces.cli", "summary", str(path), "--device", device,
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("case", CASES)
def test_summary_matches_mindinsight(case, tmp_path):
    path, device = _dataset(case)
    summary = _summary(path, device)
    assert summary["device"] == device
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    cmp = subprocess.run([sys.executable, str(SHARED / "tools/compare_summary.py"), str(EXPECTED / f"{case}.json"),
                          str(tmp_path / "summary.json")], capture_output=True, text=True)
    last = cmp.stdout.strip().splitlines()[-1]
    matched, checked = map(int, last.split()[-1].split("/"))
    assert cmp.returncode == 0 and matched == checked, cmp.stdout
    # Only files MindInsight itself could not read may be reported as problems, never ours.
    assert [p for p in summary["problems"] if "Error" in p["error"]] == [], summary["problems"]


def test_every_summary_section_is_checked_somewhere():
    checked = set()
    for case in CASES:
        e = expected(case)
        if "summary" in (e.get("step_trace") or {}):
            checked.add("step_trace")
        if any("rows" in (e.get("operators") or {}).get(k, {}) for k in ("aicore_type", "aicpu_type", "cpu_op_type")):
            checked.add("op_types")
        if "ops" in (e.get("minddata_pipeline") or {}):
            checked.add("minddata")
    assert checked == {"step_trace", "op_types", "minddata"}


def test_mindinsight_percent_is_scaled_twice_run_2_lenet():
    """MindInsight multiplies the already-percent aicore column by 100: the file says 89.47 % for MatMul,
    MindInsight shows 8947, nbprofiler shows the true share recomputed from the times."""
    import nbprofiler
    e = expected("legacy__run_2_lenet__device1")["operators"]["aicore_type"]
    mi = {r[0]: dict(zip(e["col_name"], r)) for r in e["rows"]}
    prof = nbprofiler.load(DATA / "legacy/run_2_lenet")
    t = prof.op_types.query("kind == 'ai_core'").set_index("op_type")
    matmul = t.loc["MatMul"]
    assert matmul["file_percent"] == pytest.approx(89.47, abs=0.005)       # the file, already 0..100
    assert mi["MatMul"]["total_percent"] == pytest.approx(8947, abs=0.5)   # MindInsight: x100 again
    total = t["total_time_us"].sum()
    assert matmul["percent"] == pytest.approx(matmul["total_time_us"] / total * 100)
    assert 85 < matmul["percent"] < 95
