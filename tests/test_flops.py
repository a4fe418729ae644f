"""FLOPs analysis and view on the legacy runs' flops files (4- and 7-column headers, both summary key sets)."""
from __future__ import annotations

import json

import pytest

from nbprofiler.analysis import flops as A
from nbprofiler.views.flops import FlopsView

from .conftest import DATA, load_quietly


@pytest.fixture(scope="module")
def widedeep():
    return load_quietly("legacy/run_1_widedeep")


def test_scope_rollup_sums_the_operators(widedeep):
    ops = A.op_flops(widedeep.flops)
    roll = A.scope_rollup(widedeep.flops).set_index("scope")
    total = ops["mflops"].sum()
    assert len(ops) == 199 and total == pytest.approx(199 * 333.0)
    for scope in ("Default", "Gradients", "Default/network-TrainStepWrap"):
        under = ops[ops["op_name"].str.startswith(scope + "/")]
        assert roll.at[scope, "mflops"] == pytest.approx(under["mflops"].sum())
        assert roll.at[scope, "ops"] == len(under)
        assert roll.at[scope, "share_pct"] == pytest.approx(100 * under["mflops"].sum() / total)
    top = roll[roll["depth"] == 0]
    assert top["share_pct"].sum() == pytest.approx(100.0)
    # icicle: each child lies inside its parent's span and siblings do not overlap
    for scope, r in roll[roll["depth"] > 0].iterrows():
        p = roll.loc[r["parent"]]
        assert p["x0"] - 1e-12 <= r["x0"] <= r["x1"] <= p["x1"] + 1e-12
    for _, sib in roll.groupby("parent"):
        sib = sib.sort_values("x0")
        assert (sib["x0"].to_numpy()[1:] >= sib["x1"].to_numpy()[:-1] - 1e-12).all()


def test_summary_figures_from_both_key_sets():
    mixed = load_quietly("legacy/fixtures_mixed_ids", device="0")
    raw = json.loads((DATA / "legacy/fixtures_mixed_ids/flops_summary_0.json").read_text())
    assert A.summary_figures(mixed.flops_summary) == {
        "total_mflops": raw["FLOPs"], "gflops_per_s": raw["FLOPS"], "utilization_pct": raw["FLOPS_Utilization"]}
    cluster0 = load_quietly("legacy/cluster_4rank_pipeline", device="0")
    raw = json.loads((DATA / "legacy/cluster_4rank_pipeline/flops_summary_0.json").read_text())
    fig = A.summary_figures(cluster0.flops_summary)
    assert fig["total_mflops"] == pytest.approx(raw["cube_FLOPs"] + raw["vec_FLOPs"])
    assert fig["utilization_pct"] == max(raw["cube_FLOPS_Utilization"], raw["vec_FLOPS_Utilization"])


def test_cube_and_vector_columns_are_added():
    mixed1 = load_quietly("legacy/fixtures_mixed_ids", device="1")
    ops = A.op_flops(mixed1.flops)
    f = mixed1.flops
    assert ops["mflops"].tolist() == (f["mflops_cube"] + f["mflops_vector"]).tolist()


def test_view_shows_the_rollup(widedeep):
    layout = FlopsView(widedeep).layout
    src = layout.select_one({"name": "flops_icicle_src"})
    roll = A.scope_rollup(widedeep.flops)
    assert src.data["scope"] == roll["scope"].tolist()
    assert "66,267.000 MFLOPs" in layout.select_one({"name": "flops_figures"}).text
    table = layout.select_one({"name": "flops_ops_src"})
    assert table.data["op"][0] == "AssignAdd-op414" and table.data["scope"][0] == "Default"
