"""Regression gates over repeated runs (`nbprofiler check` / `nbprofiler.testing.check` with several runs
per side): the Mann-Whitney decision, flaky thresholds, the history folder and its trend.

Repeated runs are made from real summaries (`Profile.summary()` of shared datasets) by scaling their step
times with seeded noise: a few % for "no real change", the same noise on a 20 % slower step for "a real
change", 15 % for a noisy machine."""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from nbprofiler.analysis import checks as C
from nbprofiler.faces import cli
from nbprofiler.testing import (HistoryError, PerformanceCheckFailed, PerformanceCheckFlaky, check, read_history,
                                trend)

from .conftest import REPO, load_quietly

DATASETS = ["mindspore2/lenet_pynative", "legacy/run_1_widedeep", "minddata/md_fast"]


@pytest.fixture(scope="module")
def summaries():
    return {d: load_quietly(d).summary() for d in DATASETS}


def scaled(summary: dict, factor: float) -> dict:
    """A copy of a real summary whose step times (step_time, step_trace.average) are ``factor`` times longer."""
    out = copy.deepcopy(summary)
    for key in ("average_ms", "median_ms", "p90_ms", "max_ms"):
        if (out.get("step_time") or {}).get(key) is not None:
            out["step_time"][key] *= factor
    avg = (out.get("step_trace") or {}).get("average") or {}
    for key, value in avg.items():
        if key.endswith("_ms") and value is not None:
            avg[key] = value * factor
    return out


def runs(summary: dict, n: int, noise: float, seed: int, slower: float = 1.0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [scaled(summary, slower * (1 + rng.normal(0, noise))) for _ in range(n)]


# -- the test and its effect sizes ------------------------------------------------------------------------

def test_mann_whitney_textbook_values():
    # Every one of 4 current runs above every one of 4 baseline runs: 1 ordering of C(8, 4) = 70.
    assert C.mann_whitney_greater([5, 6, 7, 8], [1, 2, 3, 4]) == (16.0, pytest.approx(1 / 70), "exact")
    # Mann & Whitney (1947), table for n1 = 3, n2 = 4: P(U <= 1) = 2/35, so U = 11 of 12 gives P(U >= 11) = 2/35
    u, p, _ = C.mann_whitney_greater([4, 6, 7], [1, 2, 3, 5])
    assert (u, p) == (11.0, pytest.approx(2 / 35))
    assert C.min_p_value(3, 3) == 1 / 20 and C.min_p_value(1, 20) == 1 / 21
    counts = C._u_counts(5, 7)
    assert counts.sum() == math.comb(12, 5) and np.array_equal(counts, counts[::-1])  # U is symmetric


@pytest.mark.parametrize("m,n,ties", [(3, 3, False), (5, 8, False), (12, 9, False), (60, 60, False), (15, 12, True)])
def test_mann_whitney_agrees_with_scipy(m, n, ties):
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(m * 100 + n)
    x, y = rng.normal(1.04, 0.05, m), rng.normal(1.0, 0.05, n)
    if ties:
        x, y = np.round(x * 20), np.round(y * 20)
    u, p, method = C.mann_whitney_greater(x, y)
    ref = stats.mannwhitneyu(x, y, alternative="greater", method="exact" if method == "exact" else "asymptotic")
    assert method == ("normal" if ties or m * n > 2500 else "exact")
    assert u == ref.statistic and p == pytest.approx(ref.pvalue, rel=1e-9)


def test_effect_sizes():
    st = C.compare_samples([110, 112, 108, 111], [100, 101, 99, 100.5])
    assert st.change_pct == pytest.approx(100 * (110.5 - 100.25) / 100.25)
    diffs = np.subtract.outer([110, 112, 108, 111], [100, 101, 99, 100.5]).ravel()
    assert st.hl_shift_pct == pytest.approx(100 * np.median(diffs) / 100.25)
    assert st.cliffs_delta == 1.0 and st.p_value == pytest.approx(1 / 70)
    assert st.spread_pct == pytest.approx(100 * np.std([100, 101, 99, 100.5], ddof=1) / 100.125)


# -- the verdict on repeated runs ---------------------------------------------------------------------------

@pytest.mark.parametrize("dataset", DATASETS)
def test_no_change_passes_and_a_real_change_fails(summaries, dataset):
    s = summaries[dataset]
    base = runs(s, 8, 0.02, seed=1)
    same = runs(s, 8, 0.02, seed=2)
    slower = runs(s, 8, 0.02, seed=3, slower=1.2)
    ok = check(same, baseline=base, max_regression_pct=10)
    [r] = ok.results
    assert r.status == "pass" and abs(r.change_pct) < 5
    assert "Mann-Whitney one-sided p" in r.message and "median of 8 runs" in r.message
    with pytest.raises(PerformanceCheckFailed) as err:
        check(slower, baseline=base, max_regression_pct=10)
    [r] = err.value.report.results
    assert type(err.value) is PerformanceCheckFailed and r.status == "fail"
    assert r.stats.p_value < 0.05 and 15 < r.change_pct < 25 and r.stats.cliffs_delta > 0.9
    assert r.stats.method == "exact" and "a significant regression over the 10 % threshold" in r.message
    # the same 20 % slower runs pass a 25 % threshold: significant, but within it
    assert check(slower, baseline=base, max_regression_pct=25).ok


def test_the_verdict_over_many_repetitions(summaries):
    """30 independent repetitions of 8 runs a side with 3 % noise: none without a change fails (the
    threshold is far above the noise), every one with a 20 % slower step does."""
    s = summaries["mindspore2/lenet_pynative"]
    same, slower = [], []
    for seed in range(30):
        base = runs(s, 8, 0.03, seed=1000 + seed)
        same.append(check(runs(s, 8, 0.03, seed=2000 + seed), baseline=base, max_regression_pct=10,
                          raise_on_failure=False).verdict)
        slower.append(check(runs(s, 8, 0.03, seed=3000 + seed, slower=1.2), baseline=base,
                            max_regression_pct=10, raise_on_failure=False).verdict)
    assert same == ["pass"] * 30 and slower == ["fail"] * 30


def test_a_change_beyond_the_threshold_that_is_not_significant_passes(summaries):
    s = summaries["legacy/run_1_widedeep"]
    base = [scaled(s, f) for f in (1.0, 1.001, 0.999, 1.0005, 1.002)]
    cur = [scaled(s, f) for f in (0.98, 1.02, 0.97, 1.03, 1.025)]  # the median 2 % up, two runs faster
    [r] = check(cur, baseline=base, max_regression_pct=0.5).results
    assert r.stats.p_value >= 0.05 and r.change_pct == pytest.approx(100 * (1.02 - 1.0005) / 1.0005)
    assert r.passed and "above the 0.5 % threshold but not significant" in r.message


def test_a_threshold_inside_the_noise_is_flaky(summaries):
    s = summaries["mindspore2/lenet_pynative"]
    base, cur = runs(s, 5, 0.15, seed=11), runs(s, 5, 0.15, seed=12)
    with pytest.raises(PerformanceCheckFlaky) as err:
        check(cur, baseline=base, max_regression_pct=5)
    [r] = err.value.report.results
    spread = C.spread_pct([C.value_of(b, "step_ms") for b in base])
    assert r.status == "flaky" and not r.passed and spread > 5
    need = C.runs_needed(spread, 5)
    assert need > 5
    assert f"flaky: the baseline varies by {spread:.1f} % between runs, more than the 5 % threshold" in r.message
    assert f"needs about {need} runs per side (have 5 and 5)" in r.message
    assert f"threshold of at least {math.ceil(spread)} %" in r.message
    assert "FLAKY" in str(err.value) and "1 flaky" in str(err.value)
    # with the noise in the threshold it is decided again
    assert check(cur, baseline=base, max_regression_pct=math.ceil(spread) * 2 + 10).ok


def test_runs_needed_formula():
    z = 1.6448536269514722 + 0.8416212335729143
    assert C.runs_needed(10, 5) == math.ceil(2 * z * z * 4 / (3 / math.pi))
    assert C.runs_needed(1, 5) == 4  # the smallest size whose exact p can fall below 0.05
    assert C.runs_needed(5, 0) is None


def test_one_run_per_side_says_it_has_no_noise_estimate(summaries):
    s = summaries["minddata/md_fast"]
    [r] = check(scaled(s, 1.03), baseline=s, max_regression_pct=5).results
    assert r.change_pct == pytest.approx(3.0) and r.stats is None
    assert "single run per side, no noise estimate" in r.message


def test_too_few_runs_for_the_test_decide_on_medians(summaries):
    s = summaries["legacy/run_1_widedeep"]
    base, cur = runs(s, 3, 0.01, seed=5), runs(s, 3, 0.01, seed=6, slower=1.2)
    with pytest.raises(PerformanceCheckFailed) as err:
        check(cur, baseline=base, max_regression_pct=10)
    assert "the smallest p with 3 and 3 runs is 0.05, so the medians alone decide" in str(err.value)


def test_max_over_several_runs_reads_their_median_and_a_missing_run_fails(summaries):
    s = summaries["legacy/run_1_widedeep"]
    three = [scaled(s, f) for f in (0.9, 1.0, 1.5)]
    [r] = check(three, max_step_ms=1e9).results
    assert r.value == pytest.approx(C.value_of(s, "step_ms")) and "median of 3 runs" in r.message
    no_steps = load_quietly("npu/kernel_details_591").summary()
    [r] = check([s, no_steps], max_step_ms=1e9, raise_on_failure=False).results
    assert not r.passed and "not measured in 1 of 2 runs" in r.message


# -- history and trend ----------------------------------------------------------------------------------------

def test_history_round_trip_and_baseline_from_history(summaries, tmp_path):
    s = summaries["legacy/run_1_widedeep"]
    hist = tmp_path / "history"
    nightly = runs(s, 20, 0.01, seed=21)
    # the first run of a new history has no baseline: its regression check fails, yet it joins the history
    with pytest.raises(PerformanceCheckFailed, match="needs a baseline"):
        check(nightly[0], history=hist, baseline_history=20, max_regression_pct=10, label="nightly 0")
    assert C.history_baseline(read_history(hist), 20) == read_history(hist)
    for i, run in enumerate(nightly[1:], start=1):
        check(run, history=hist, label=f"nightly {i}", max_step_ms=1e9)
    records = read_history(hist)
    assert [r["label"] for r in records] == [f"nightly {i}" for i in range(20)]
    assert len(list(hist.glob("*.json"))) == 20
    second = json.loads(sorted(hist.glob("*.json"))[1].read_text())
    assert second == records[1] and second["values"] == {"step_ms": C.value_of(nightly[1], "step_ms")}
    assert second["checks"] == [{"kind": "max", "metric": "step_ms", "limit": 1e9, "status": "pass",
                                 "baseline_median": None}]
    assert second["verdict"] == "pass" and second["timestamp"].endswith("+00:00")
    # one slower run against the last 20: above every one of them, p = 1/21 < 0.05
    slow = scaled(s, 1.2)
    with pytest.raises(PerformanceCheckFailed) as err:
        check(slow, history=hist, baseline_history=20, max_regression_pct=10, label="slow")
    [r] = err.value.report.results
    assert r.stats.n_baseline == 20 and r.stats.p_value == pytest.approx(1 / 21)
    records = read_history(hist)
    assert records[-1]["label"] == "slow" and records[-1]["verdict"] == "fail"
    assert records[-1]["checks"][0]["baseline_median"] == pytest.approx(r.baseline)
    # the failed run is not part of the next baseline
    assert C.history_baseline(records, 20) == records[:20]
    ok = check(scaled(s, 1.0), history=hist, baseline_history=20, max_regression_pct=10, label="fixed")
    assert ok.results[0].stats.n_baseline == 20 and ok.ok


def test_history_is_never_written_into_profiler_output(tmp_path):
    run = tmp_path / "rank0_123_ascend_ms"  # named as a MindSpore run folder: in_profiler_output
    run.mkdir()
    s = load_quietly("minddata/md_fast").summary()
    with pytest.raises(HistoryError, match="profiler output"):
        check(s, history=run / "history", max_step_ms=1e9)
    assert not (run / "history").exists()
    assert cli.main(["check", str(REPO / "no_such"), "--max-step-ms", "1", "--history", str(run)]) == 2


def test_trend_draws_every_checked_number_and_escapes_labels(summaries, tmp_path):
    from bokeh.embed import file_html
    from bokeh.resources import CDN
    s = summaries["minddata/md_fast"]
    hist = tmp_path / "h"
    base = runs(s, 4, 0.02, seed=31)
    for i, run in enumerate(base):
        check(run, history=hist, label=f"<script>alert({i})</script>", max_step_ms=100,
              max={"step_time.median_ms": 100})
    check(scaled(s, 1.01), history=hist, baseline=base, max_regression_pct=10, label="cur", max_step_ms=100)
    layout = trend(hist)
    titles = [f.title.text for f in layout.children]
    assert titles == ["step_ms", "step_time.median_ms"]
    data = layout.children[0].renderers[-1].data_source.data
    assert data["value"] == [r["values"]["step_ms"] for r in read_history(hist)]
    assert math.isnan(data["band_lo"][0]) and data["band_hi"][-1] == pytest.approx(
        np.median([C.value_of(b, "step_ms") for b in base]) * 1.1)
    html = file_html(layout, resources=CDN, title="t")
    assert "<script>alert(" not in html


# -- the command ---------------------------------------------------------------------------------------------

def _write(folder, summaries_):
    folder.mkdir(parents=True)
    for i, s in enumerate(summaries_):
        (folder / f"run{i}.json").write_text(json.dumps(s), encoding="utf-8")
    return folder


def test_cli_exit_codes_over_repeated_runs(summaries, tmp_path, capsys):
    s = summaries["mindspore2/lenet_pynative"]
    base = _write(tmp_path / "base", runs(s, 6, 0.02, seed=41))
    same = _write(tmp_path / "same", runs(s, 6, 0.02, seed=42))
    slow = _write(tmp_path / "slow", runs(s, 6, 0.02, seed=43, slower=1.2))
    noisy_b = _write(tmp_path / "noisy_b", runs(s, 5, 0.15, seed=44))
    noisy_c = _write(tmp_path / "noisy_c", runs(s, 5, 0.15, seed=45))
    hist, html = tmp_path / "hist", tmp_path / "trend.html"

    assert cli.main(["check", str(same), "--baseline", str(base), "--max-regression-pct", "10",
                     "--history", str(hist), "--label", "same", "--trend-html", str(html)]) == cli.EXIT_PASSED
    out = capsys.readouterr().out
    assert "PASS step_ms" in out and "(median of 6 runs)" in out and out.strip().endswith("1 passed, 0 failed")
    assert len(read_history(hist)) == 6
    text = html.read_text(encoding="utf-8")
    for rec in read_history(hist):
        assert json.dumps(rec["values"]["step_ms"]) in text  # every number drawn is in the page

    assert cli.main(["check", *sorted(map(str, slow.glob("*.json"))), "--baseline", str(base),
                     "--max-regression-pct", "10"]) == cli.EXIT_FAILED
    assert "FAIL step_ms" in capsys.readouterr().out
    assert cli.main(["check", str(noisy_c), "--baseline", str(noisy_b), "--max-regression-pct", "5",
                     "--junit-xml", str(tmp_path / "j.xml")]) == cli.EXIT_FLAKY
    out = capsys.readouterr().out
    assert "FLAKY step_ms" in out and out.strip().endswith("0 passed, 0 failed, 1 flaky")
    assert 'type="flaky"' in (tmp_path / "j.xml").read_text(encoding="utf-8")
    # from the history: the last 6 runs are the baseline
    assert cli.main(["check", str(slow), "--history", str(hist), "--baseline-history", "6",
                     "--max-regression-pct", "10"]) == cli.EXIT_FAILED
    capsys.readouterr()
    # a run whose summary file is cut short cannot be read: the tool broke, no check was decided
    cut = tmp_path / "cut.json"
    cut.write_text((base / "run0.json").read_text(encoding="utf-8")[:3000], encoding="utf-8")
    assert cli.main(["check", str(cut), "--baseline", str(base), "--max-regression-pct", "10"]) == cli.EXIT_BROKEN
    assert "cannot read the profile" in capsys.readouterr().err
    for bad in (["--baseline-history", "3", "--max-regression-pct", "10"],
                ["--trend-html", str(html), "--max-step-ms", "1"],
                ["--baseline", str(base), "--alpha", "1.5", "--max-regression-pct", "10"],
                ["--baseline", str(base), "--history", str(hist), "--baseline-history", "2",
                 "--max-regression-pct", "10"]):
        assert cli.main(["check", str(same), *bad]) == cli.EXIT_USAGE
        assert capsys.readouterr().err.startswith("nbprofiler check: ")


@pytest.mark.parametrize("key,damage,says", [
    ("step_time", "fast", "'step_time' is text, not an object or null"),
    ("op_types", [1, 2], "'op_types' is a list, not an object"),
    ("suggestions", {"a": 1}, "'suggestions' is an object, not a list"),
])
def test_a_summary_of_the_wrong_shape_is_refused_by_name(summaries, tmp_path, capsys, key, damage, says):
    """A damaged copy of a real summary is not read as "not measured": the check says which section is
    wrong and ends as a broken tool (exit 3), not as a failed or passed check."""
    s = copy.deepcopy(summaries["mindspore2/lenet_pynative"])
    good = tmp_path / "good.json"
    good.write_text(json.dumps(s), encoding="utf-8")
    s[key] = damage
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(s), encoding="utf-8")
    assert cli.main(["check", str(good), "--baseline", str(bad), "--max-regression-pct", "10"]) == cli.EXIT_BROKEN
    err = capsys.readouterr().err
    assert "bad.json" in err and says in err
    assert cli.main(["check", str(good), "--baseline", str(good), "--max-regression-pct", "10"]) == cli.EXIT_PASSED


def test_the_readme_and_docs_state_the_test():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## CI checks"):]
    section = section[:section.index("\n## ", 1)]
    assert f"`{cli.EXIT_FLAKY}`" in section and "flaky" in section
    assert "Mann-Whitney" in section and "--history" in section
