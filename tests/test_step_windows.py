"""Steps placed on the timeline's clock (prof.step_windows), checked against the timelines themselves."""
from __future__ import annotations


import numpy as np
import pytest

import nbprofiler

from .conftest import load_quietly


def _load(rel):
    """The profile of a dataset, or its first rank's when it holds several."""
    obj = load_quietly(rel)
    return obj if isinstance(obj, nbprofiler.Profile) else obj[obj.ranks[0]]


def test_legacy_steps_align_with_the_timeline_reduce_events():
    prof = _load("legacy/run_1_widedeep")
    w = prof.step_windows
    assert len(w) == 322 and (w["step"] == np.arange(1, 323)).all()
    # step 1 starts 8955 ticks (89.55 us) after the earliest op (min_cycle_counter_1.txt), as 4-decimal ms
    assert w["start_us"].iloc[0] == pytest.approx(89.6, abs=0.05)
    assert np.allclose(w["start_us"].iloc[1:].to_numpy(), w["end_us"].iloc[:-1].to_numpy())
    # the timeline holds one reduce event per stream (11) and step: each window must hold exactly 11
    tracks, events = prof.timeline_tracks, prof.timeline
    comm = events[events["track"].isin(tracks.loc[tracks["pid"].astype(str) == "10000", "track"])]
    assert len(comm) == 3542
    idx = np.searchsorted(w["start_us"].to_numpy(), comm["start_us"].to_numpy(), side="right") - 1
    assert (np.bincount(idx, minlength=len(w)) == 11).all()


def test_legacy_alignment_uses_the_first_ai_core_op_not_the_timeline_origin():
    # run_2_lenet's timeline starts with an AI CPU op (InitData, ts 0); the AI Core ops begin ~6.04 s later
    prof = _load("legacy/run_2_lenet")
    (step,) = prof.step_windows.itertuples(index=False)
    tracks, events = prof.timeline_tracks, prof.timeline
    ai_core = events[events["track"].isin(tracks.loc[tracks["pid"].astype(str) == "1", "track"])]
    inside = ai_core["start_us"].between(step.start_us, step.end_us)
    assert step.start_us == pytest.approx(6_043_018.7, abs=1) and inside.mean() > 0.95


def test_cann_steps_share_the_timeline_clock():
    prof = _load("npu/cann_prof_2dev")
    w = prof.step_windows
    assert len(w) == 10 and w["source"].iloc[0].startswith("CANN")
    assert (w["end_us"] > w["start_us"]).all() and w["start_us"].iloc[0] >= 0


def test_kernel_step_ids_give_windows_and_runs_without_steps_give_none():
    w = _load("npu/kernel_details_591").step_windows
    assert w["step"].tolist() == [1] and w["source"].iloc[0] == "kernel step ids"
    assert _load("mindspore2/lenet_pynative").step_windows.empty
