"""CANN PROF_* step_trace exports (nbprofiler.io.cann) on the real 2-device msprof data."""
from __future__ import annotations

import json
import shutil

import pytest

from nbprofiler.errors import MalformedFileError, ProfilerDataWarning, TruncatedFileError
from nbprofiler.io import ascend_ms, cann
from nbprofiler.io.discover import discover

from tests.conftest import DATA

CANN = DATA / "npu/cann_prof_2dev"


def _runs(path=CANN):
    return {r.device: r for r in discover(path)}


def _raw_iterations(run):
    events = json.loads(run.all("cann_step_trace")[0].read_text())
    return {e["args"]["Iteration ID"]: e["args"] for e in events
            if e.get("ph") == "X" and e.get("cat") == "Iteration Time"}


def test_two_devices_ten_iterations():
    runs = _runs()
    assert sorted(runs) == ["0", "1"]
    for dev, run in runs.items():
        assert len(run.all("cann_step_trace")) == 10
        st = cann.step_trace(run)
        assert st["step"].tolist() == list(range(1, 11))
        assert list(st.columns[:5]) == ["step", "iteration_interval_ms", "fp_and_bp_ms", "tail_ms", "total_ms"]
        assert (st["total_ms"] - st[["iteration_interval_ms", "fp_and_bp_ms", "tail_ms"]].sum(axis=1)).abs().max() < 1e-4
        raw = _raw_iterations(run)
        # fp_and_bp and tail are exactly the file's FP_BP Time and Iteration Refresh
        assert st["fp_and_bp_ms"].iloc[0] == pytest.approx((raw[1]["BP End"] - raw[1]["FP Start"]) / 1e3, abs=1e-5)
        # a step spans previous Iteration End -> this Iteration End
        assert (st["end_ms"].diff().iloc[1:] - st["total_ms"].iloc[1:]).abs().max() < 1e-4


def test_device0_values():
    st = cann.step_trace(_runs()["0"])
    one, two = st.iloc[0], st.iloc[1]
    assert one["iteration_interval_ms"] == 0.0  # Data_aug Bound 1 is 0
    assert one["fp_and_bp_ms"] == pytest.approx(4.2361)
    assert one["tail_ms"] == pytest.approx(43.34558)
    # step 2's interval = FP Start(2) - Iteration End(1) = the file's "Data_aug Bound(us)": 32134.95
    assert two["iteration_interval_ms"] == pytest.approx(32.13495)
    assert two["fp_and_bp_ms"] == pytest.approx(4.26915) and two["tail_ms"] == pytest.approx(11.09507)
    assert st["iteration_interval_ms"].iloc[2:].round(5).tolist() == [23.30811, 17.8543, 15.6358, 16.2109, 15.36125,
                                                                       16.23301, 15.49615, 16.00044]


def test_reduce_events_and_run_info():
    run = _runs()["1"]
    red = cann.step_trace_reduce(run)
    assert len(red) == 10 and red["name"].tolist()[0] == "Reduce_1_0"
    assert red["dur_ms"].iloc[0] == pytest.approx(51.49719, abs=1e-5)
    assert red["start_ms"].iloc[0] == pytest.approx(4.28404, abs=1e-5)  # from the step's start
    assert red["stream_id"].isna().all()
    info = ascend_ms.run_info(run)
    assert info["rank_id"] == "1" and info["cann_info"]["devices"] == "1"
    start = json.loads(run.get("cann_start_info").read_text())
    assert info["collection_start_us"] == float(start["collectionTimeBegin"])
    assert info["monotonic_start_ns"] > 0


def test_damaged_step_trace_files(tmp_path):
    src = next(CANN.glob("PROF_*/device_0"))
    dst = tmp_path / "PROF_000001_20230818142704322_COJGGGCANRMICFBC" / "device_0"
    shutil.copytree(src, dst)
    files = sorted((dst / "timeline").glob("step_trace_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    text = files[0].read_text()
    files[0].write_text(text[: len(text) // 2])  # killed mid-write
    run = _runs(tmp_path)["0"]
    with pytest.warns(ProfilerDataWarning, match="step_trace_0_2_1.json"):
        st = cann.step_trace(run)
    assert len(st) == 10  # the identical copies stand in for the broken one
    for f in files:
        f.write_text(text[: len(text) // 2])
    with pytest.raises(TruncatedFileError):
        cann.step_trace(run)
    events = json.loads(text)
    for e in events:
        if e.get("name") == "Iteration 3":
            e["args"]["BP End"] = "soon"
    for f in files:
        f.write_text(json.dumps(events))
    with pytest.raises(MalformedFileError) as e:
        cann.step_trace(run)
    assert "BP End" in e.value.field and "Iteration 3" in e.value.field
