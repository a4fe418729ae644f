"""Performance checks (`nbprofiler check`, `nbprofiler.testing.check`) on real before/after runs:
md_bottleneck_map (map-bound: the host queue is empty at every step) and md_fast (the same pipeline fixed)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from nbprofiler.faces import cli
from nbprofiler.analysis.checks import Check, CheckSpecError, evaluate, lookup, value_of
from nbprofiler.testing import PerformanceCheckFailed, check  # the path README documents

from .conftest import DATA, load_quietly

SLOW = DATA / "minddata/md_bottleneck_map"
FAST = DATA / "minddata/md_fast"
WIDEDEEP = DATA / "legacy/run_1_widedeep"


@pytest.fixture(scope="module")
def widedeep_summary():
    return load_quietly(WIDEDEEP).summary()


def test_lookup_paths_on_a_real_summary(widedeep_summary):
    s = widedeep_summary
    assert lookup(s, "step_trace.average.total_ms") == s["step_trace"]["average"]["total_ms"]
    matmul = next(r for r in s["op_types"]["ai_core"] if r["op_type"] == "MatMul")
    assert lookup(s, "op_types.ai_core[op_type=MatMul].total_time_us") == matmul["total_time_us"]
    third = s["step_trace"]["steps"][2]["total_ms"]
    assert lookup(s, "step_trace.steps[2].total_ms") == third == lookup(s, "step_trace.steps.2.total_ms")
    assert lookup(s, "step_trace.steps[-1].step") == s["step_trace"]["total_steps"]
    assert lookup(s, "op_types.ai_core[op_type=NoSuchOp].total_time_us") is None
    assert lookup(s, "step_trace.steps[100000].total_ms") is None
    assert lookup(s, "minddata.no.such.key") is None
    with pytest.raises(CheckSpecError):
        lookup(s, "op_types.ai_core[op_type=MatMul")


def test_metric_names_are_derived_from_the_summary():
    slow, fast = load_quietly(SLOW).summary(), load_quietly(FAST).summary()
    # md_bottleneck_map: 62 of 62 steps found the host queue empty; md_fast: 1 of 200 (0.5 %).
    q = fast["minddata"]["host_queue"]
    assert value_of(slow, "host_queue_empty_pct") == 100.0
    assert value_of(fast, "host_queue_empty_pct") == pytest.approx(100.0 * q["empty_steps"] / q["steps"])
    # a MindData-only run has no step trace: its steps are timed from the host queue's batch timestamps,
    # the same source compare uses (62 batches, 61 gaps)
    hq = load_quietly(SLOW).host_queue.sort_values("step")["timestamp_ms"].to_numpy(float)
    assert value_of(slow, "step_ms") == pytest.approx((hq[-1] - hq[0]) / (len(hq) - 1))


def test_a_missing_number_fails_its_check():
    # kernel_details.csv alone: operator times, no step trace and no host queue
    slow = load_quietly(DATA / "npu/kernel_details_591").summary()
    result = evaluate(Check("max", "step_ms", 10), slow)
    assert not result.passed and "not measured" in result.message


def test_python_helper_passes_and_fails_on_real_runs():
    report = check(FAST, baseline=SLOW, max_host_queue_empty_pct=10,
                   max_regression_pct={"minddata.host_queue.avg_get_ms": 0})
    assert report.ok and len(report.results) == 2
    assert report.results[1].change_pct == pytest.approx(
        100 * (report.results[1].value - report.results[1].baseline) / report.results[1].baseline)
    with pytest.raises(PerformanceCheckFailed) as err:
        check(SLOW, baseline=FAST, max_host_queue_empty_pct=10,
              max_regression_pct={"minddata.host_queue.avg_get_ms": 5},
              min={"minddata.pipeline[op_type=MapOp].num_workers": 1})
    text = str(err.value)
    assert "2 of 3 performance checks failed" in text
    assert "host_queue_empty_pct = 100 > 10 (max)" in text
    assert "minddata.host_queue.avg_get_ms = 148.548 vs baseline 0.82" in text
    by_kind = {r.check.kind: r for r in err.value.report.results}
    assert by_kind["min"].passed and by_kind["min"].value == 1  # MapOp has 1 worker >= 1
    with pytest.raises(CheckSpecError):
        check(FAST)  # no checks at all
    with pytest.raises(TypeError):
        check(FAST, max_step_time=3)


def test_cli_exit_status_names_failures_and_writes_junit(tmp_path, capsys):
    junit = tmp_path / "checks.xml"
    rc = cli.main(["check", str(WIDEDEEP), "--max-step-ms", "100",
                   "--max", "step_trace.steps[2].total_ms=1000",
                   "--max", "op_types.ai_core[op_type=MatMul].total_time_us=1", "--junit-xml", str(junit)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL step_ms = 205.381 > 100 (max)" in out
    assert "PASS step_trace.steps[2].total_ms = 203.724 <= 1000 (max)" in out
    assert out.strip().endswith("1 passed, 2 failed")
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    failures = [c.find("failure").get("message") for c in suite if c.tag == "testcase" and c.find("failure") is not None]
    assert failures[0] == "step_ms = 205.381 > 100 (max)"

    assert cli.main(["check", str(FAST), "--baseline", str(SLOW), "--max-host-queue-empty-pct", "10",
                     "--max-regression-pct", "minddata.host_queue.avg_get_ms=0"]) == 0
    assert capsys.readouterr().out.strip().endswith("2 passed, 0 failed")


def test_cli_refuses_what_it_cannot_check(capsys):
    assert cli.main(["check", str(FAST)]) == 2
    assert "no checks given" in capsys.readouterr().err
    assert cli.main(["check", str(FAST), "--max-regression-pct", "5"]) == 2
    assert "needs --baseline" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["check", str(FAST), "--max", "step_ms"])  # not PATH=VALUE


def test_the_documented_import_path_is_the_testing_face():
    import nbprofiler.faces.testing as face
    import nbprofiler.testing as nbt
    assert nbt.__all__ == face.__all__
    assert all(getattr(nbt, name) is getattr(face, name) for name in face.__all__)


@pytest.mark.parametrize("limit", ["inf", "-inf", "nan", "Infinity"])
def test_a_threshold_that_can_never_fail_is_a_usage_error(limit, capsys):
    """Issue 37, item 11: ``inf`` passed every check, so it checked nothing; exit 2 with a message."""
    assert cli.main(["check", str(FAST), f"--max-step-ms={limit}"]) == 2
    assert "must be a finite number" in capsys.readouterr().err
    assert cli.main(["check", str(FAST), "--max", f"step_ms={limit}"]) == 2
    assert cli.main(["check", str(FAST), "--min", f"step_ms={limit}"]) == 2
    assert cli.main(["check", str(FAST), "--baseline", str(SLOW), f"--max-regression-pct={limit}"]) == 2
    with pytest.raises(CheckSpecError, match="finite"):
        check(FAST, max_step_ms=float(limit))
    with pytest.raises(CheckSpecError, match="finite"):
        Check("max", "step_ms", float(limit))


def test_exit_3_when_the_tool_breaks_not_1(tmp_path, capsys, monkeypatch):
    """1 means "a check failed"; a broken tool or unreadable data is 3, so CI can tell them apart."""
    # --junit-xml that cannot be written: a clean message (no traceback), exit 3 even though checks passed
    full = "/dev/full" if __import__("os").path.exists("/dev/full") else None
    targets = [str(tmp_path / "no_such_dir" / "x.xml"), str(tmp_path)] + ([full] if full else [])
    for target in targets:
        assert cli.main(["check", str(FAST), "--max-step-ms", "1e9", "--junit-xml", target]) == 3
        captured = capsys.readouterr()
        assert "1 passed, 0 failed" in captured.out
        assert f"cannot write --junit-xml {target}" in captured.err
        assert "Traceback" not in captured.err
    # a profile that cannot be read
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["check", str(empty), "--max-step-ms", "30"]) == 3
    assert "cannot read the profile" in capsys.readouterr().err
    # a bug inside the tool
    from nbprofiler.faces import testing

    def broken(*args, **kwargs):
        raise KeyError("summary")
    monkeypatch.setattr(testing, "evaluate_all", broken)
    assert cli.main(["check", str(FAST), "--max-step-ms", "30"]) == 3
    assert "internal error" in capsys.readouterr().err


def test_the_readme_names_every_exit_status():
    from .conftest import REPO
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## CI checks"):]
    section = section[:section.index("\n## ", 1)]
    for code, meaning in ((cli.EXIT_PASSED, "passed"), (cli.EXIT_FAILED, "failed"), (cli.EXIT_USAGE, "usage"),
                          (cli.EXIT_BROKEN, "broke")):
        assert f"`{code}`" in section and meaning in section
