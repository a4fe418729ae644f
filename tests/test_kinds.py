"""Kinds kept apart: scope-layer bars are not operator types (timeline frame and summary), communication
kernels are not operators (their own kind), kernels carry their accelerator core."""
from __future__ import annotations

import pytest

from .conftest import load_quietly


def test_scope_layers_are_not_op_types():
    prof = load_quietly("mindspore2/lenet_pynative")
    tl = prof.timeline
    scope = tl[tl["is_scope"]]
    assert scope["name"].astype(str).tolist() == ["Default"]
    assert set(scope["op_type"].astype(str)) == {"Scope Layer"}
    assert "Default" not in set(tl.loc[~tl["is_scope"], "op_type"].astype(str))
    # the type the scope bar had is no category any more; the others keep their order, the scope type last
    cats = list(tl["op_type"].cat.categories)
    assert "Default" not in cats and cats[-1] == "Scope Layer"
    assert cats[:3] == ["SparseSoftmaxCrossEntropyWithLogits", "MatMul", "Ones"]
    s = prof.summary()["timeline"]
    assert "Default" not in s["by_type"] and s["scope_layers"]["Default"]["count"] == 1
    # one operator track: its op types add up to no more than the timeline's span (was 1.96x with scope)
    span = s["end_us"] - s["start_us"]
    assert sum(v["total_us"] for v in s["by_type"].values()) <= span
    assert sum(v["count"] for v in s["by_type"].values()) == int((~tl["is_scope"]).sum())


def test_timeline_without_scope_tracks_marks_nothing():
    tl = load_quietly("npu/trace_view_torch_npu").timeline
    assert "is_scope" in tl and not tl["is_scope"].any()


def test_communication_kernels_are_their_own_kind_with_cores():
    prof = load_quietly("npu/kernel_details_591")
    k = prof.kernels
    assert set(k["accelerator_core"]) >= {"AI_CORE", "AI_VECTOR_CORE", "HCCL"}
    types = prof.op_types
    comm = types[types["kind"] == "communication"]
    npu = types[types["kind"] == "npu"]
    assert comm["count"].sum() == (k["accelerator_core"] == "HCCL").sum()
    # the share of hcom_broadcast_ in the operator pie was 77.9 %; now the pie holds operators only
    hcom = k.loc[k["type"] == "hcom_broadcast_", "dur_us"].sum()
    assert hcom / k["dur_us"].sum() == pytest.approx(0.779, abs=0.001)
    assert npu["percent"].max() < 30 and comm["percent"].sum() == pytest.approx(100.0)
    assert prof.op_kinds == ["npu", "communication"]
    top = prof.summary()["op_types"]
    assert "hcom_broadcast_" not in [r["op_type"] for r in top["npu"]]
