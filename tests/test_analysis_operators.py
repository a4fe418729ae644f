"""Operator analyses (top-N with "Other", fuzzy search, sort) on the real operator frames."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbprofiler
from nbprofiler.analysis.operators import OTHER, filter_ops, sort_ops, top_types
from nbprofiler.schema import FRAMES

from .conftest import DATA, expected


@pytest.fixture(scope="module")
def widedeep():
    return nbprofiler.load(DATA / "legacy/run_1_widedeep")


def test_top_types_folds_the_rest_into_other(widedeep):
    types = widedeep.op_types
    top = top_types(types, "ai_core", n=5)
    assert top["op_type"].tolist()[:5] == expected("legacy__run_1_widedeep__device1")["operators"]["aicore_type"][
        "pie_top5"]
    other = top.iloc[-1]
    assert other.op_type == OTHER and len(top) == 6
    rest = types[types.kind == "ai_core"].iloc[5:]
    assert other.total_time_us == pytest.approx(rest["total_time_us"].sum())
    assert other["count"] == rest["count"].sum()
    assert other.avg_time_us == pytest.approx(other.total_time_us / other["count"])
    assert top["percent"].sum() == pytest.approx(100.0)
    assert str(top.dtypes["count"]) == FRAMES["op_types"].column("count").dtype  # "Int64", as declared


def test_top_types_without_rest_has_no_other(widedeep):
    top = top_types(widedeep.op_types, "ai_core", n=20)
    assert len(top) == 21 and top["op_type"].iloc[-1] == OTHER  # 24 types: 20 + Other
    all_ = top_types(widedeep.op_types, "ai_core", n=24)
    assert OTHER not in set(all_["op_type"]) and len(all_) == 24
    assert top_types(widedeep.op_types, "gpu").empty


def test_filter_ops_fuzzy_search_is_case_insensitive_substring(widedeep):
    ops = widedeep.ops
    hits = filter_ops(ops, search="MATMUL")
    assert len(hits) > 0
    assert hits.apply(lambda r: "matmul" in r.op_name.lower() or "matmul" in r.op_type.lower(), axis=1).all()
    # OR of several strings, matching op_type or op_name
    both = filter_ops(ops, search=["gradmatmul", "TransData"])
    assert set(both.index) == set(filter_ops(ops, search="gradmatmul").index) | set(
        filter_ops(ops, search="transdata").index)
    # exact type membership and kind
    cast = filter_ops(ops, kind="ai_core", op_type=["Cast"])
    assert len(cast) > 0 and set(cast["op_type"]) == {"Cast"}
    assert filter_ops(ops, kind="ai_cpu").empty
    assert len(filter_ops(ops, search="  ")) == len(ops)
    # regex characters are literal text
    assert filter_ops(ops, search="network-TrainOneStepCell/").shape[0] > 0
    assert filter_ops(ops, search=".*").empty


def test_sort_ops_puts_missing_values_last(widedeep):
    ops = widedeep.ops
    by_avg = sort_ops(ops, "avg_time_us")
    assert by_avg["avg_time_us"].is_monotonic_decreasing
    shown = expected("legacy__run_1_widedeep__device1")["operators"]["aicore_detail"]["first_page"]
    assert by_avg["op_name"].head(len(shown)).tolist() == [r[0] for r in shown]
    # run_1_widedeep's flops file names none of the detail ops: all NaN, order kept
    frame = pd.DataFrame({"op_name": ["a", "b", "c"], "x": [1.0, np.nan, 3.0]})
    assert sort_ops(frame, "x")["op_name"].tolist() == ["c", "a", "b"]
    assert sort_ops(frame, "x", descending=False)["op_name"].tolist() == ["a", "c", "b"]
    with pytest.raises(KeyError, match="nope"):
        sort_ops(ops, "nope")
