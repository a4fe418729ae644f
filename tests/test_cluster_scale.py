"""Clusters of thousands of ranks: the synthetic cluster_analysis writer against the real 16-rank files, the
cluster-wide files parsed once per process, the 4,096-rank cluster page bounded (binned heatmaps, top-N bars,
search by rank) and dask on a LocalCluster equal to serial."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess

import pandas as pd
import pytest

from nbprofiler.analysis import cluster as C
from nbprofiler.analysis.breakdown import rank_breakdown
from nbprofiler.io import ascend_ms, shared
from nbprofiler.synthetic.cluster import write_cluster_analysis
from nbprofiler.views import cluster as V

from .conftest import DATA, load_quietly

REAL16 = DATA / "npu/cluster_analysis_16rank"
STAGE_COLUMNS = {"computing_ms": "Computing", "communication_not_overlapped_ms": "Communication(Not Overlapped)",
                 "free_ms": "Free"}


def _rank_rows(path) -> dict[str, dict]:
    """rank -> its row of a cluster_step_trace_time.csv (one step), read with the csv module."""
    with open(path, newline="") as f:
        return {r["Index"]: r for r in csv.DictReader(f) if r["Type"] == "rank"}


def test_synthetic_cluster_analysis_has_the_real_files_keys_and_a_tp_pp_dp_layout(tmp_path):
    root = write_cluster_analysis(tmp_path / "c", DATA, 32, steps=2)  # TP 8 x PP 2 x DP 2
    real_header = (REAL16 / "cluster_step_trace_time.csv").read_text().splitlines()[0]
    text = (root / "cluster_step_trace_time.csv").read_text().splitlines()
    assert text[0] == real_header
    with open(root / "cluster_step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["Step"] for r in rows].count("2") == 32 + 2 and [r["Step"] for r in rows].count("3") == 32 + 2
    # a stage row is the per-column maximum over its ranks: stage 0 = ranks 0-7 and 16-23
    stage0 = [r for r in rows if r["Step"] == "2" and r["Type"] == "stage"][0]
    members = [r for r in rows if r["Step"] == "2" and r["Type"] == "rank" and (int(r["Index"]) // 8) % 2 == 0]
    assert stage0["Index"] == "(" + ", ".join(r["Index"] for r in members) + ")"
    assert float(stage0["Free"]) == max(float(r["Free"]) for r in members)
    for r in (r for r in rows if r["Type"] == "rank"):  # a stage row's columns are maxima over different ranks
        assert float(r["Communication"]) == pytest.approx(
            float(r["Overlapped"]) + float(r["Communication(Not Overlapped)"]))
    groups = json.loads((root / "communication_group.json").read_text())
    assert set(groups) == set(json.loads((REAL16 / "communication_group.json").read_text()))
    assert [0, 1, 2, 3, 4, 5, 6, 7] in groups["collective"] and [0, 8] in groups["collective"]
    assert [0, 16] in groups["collective"] and list(range(32)) in groups["collective"]
    assert groups["p2p"] == [[*range(0, 8), *range(16, 24)], [*range(8, 16), *range(24, 32)]]
    real = json.loads((REAL16 / "cluster_communication.json").read_text())
    comm = json.loads((root / "cluster_communication.json").read_text())
    assert set(comm) == {"p2p", *(f"({', '.join(map(str, range(g, g + 8)))})" for g in range(0, 32, 8))}
    real_send = real["p2p"]["step2"]["hcom_send__822_0@13337953553061386822"]["0"]
    send = comm["p2p"]["step3"]["hcom_send__822_0@13337953553061386822"]
    assert sorted(send, key=int) == [str(r) for r in range(32) if (r // 8) % 2 == 0]  # stage 0 sends
    assert send["0"].keys() == real_send.keys()
    assert send["0"]["Communication Time Info"].keys() == real_send["Communication Time Info"].keys()
    assert send["0"]["Communication Bandwidth Info"]["RDMA"].keys() == \
        real_send["Communication Bandwidth Info"]["RDMA"].keys()
    # deterministic from the seed
    again = write_cluster_analysis(tmp_path / "d", DATA, 32, steps=2)
    assert (again / "cluster_communication.json").read_bytes() == (root / "cluster_communication.json").read_bytes()


def test_cluster_files_are_parsed_once_per_process(tmp_path, monkeypatch):
    root = write_cluster_analysis(tmp_path / "c", DATA, 64)
    calls = []
    real = ascend_ms.cluster_step_trace
    monkeypatch.setattr(ascend_ms, "cluster_step_trace", lambda path: calls.append(path) or real(path))
    shared.clear()
    cl = load_quietly(root)
    summary = C.rank_summary(cl, engine="serial")
    frame = rank_breakdown(cl, engine="serial")
    assert len(C.rank_steps(summary)) == 64 and frame["rank"].nunique() == 64
    assert len(calls) == 1  # 64 ranks, three passes over them: one parse
    # each rank's numbers are its own row of the file (us -> ms)
    rows = _rank_rows(root / "cluster_step_trace_time.csv")
    steps = C.rank_steps(summary)
    for rank in ("0", "9", "63"):
        for col, raw in STAGE_COLUMNS.items():
            assert steps.at[rank, col] == pytest.approx(float(rows[rank][raw]) / 1000)


RANKS = 4096


@pytest.fixture(scope="module")
def page4096(tmp_path_factory):
    root = write_cluster_analysis(tmp_path_factory.mktemp("c4096") / "c", DATA, RANKS)
    cl = load_quietly(root, engine="serial")
    return root, cl, V.ClusterView(cl)


@pytest.mark.slow
def test_the_page_of_4096_ranks_is_bounded_and_finds_a_rank(page4096):
    root, cl, view = page4096
    rows = _rank_rows(root / "cluster_step_trace_time.csv")
    total = {r: sum(float(row[c]) for c in STAGE_COLUMNS.values()) / 1000 for r, row in rows.items()}
    slowest = sorted(total, key=lambda r: (-total[r], int(r)))[:V.TOP_RANKS]
    layout = view.layout
    bars = layout.select_one({"name": "cluster_ranks_src"}).data
    assert list(bars["rank"]) == slowest  # the 32 slowest, slowest first
    assert slowest[0] == "3073"  # the writer's straggler: RANKS * 3 // 4 + 1
    heat = layout.select_one({"name": "cluster_heatmap_src"}).data
    assert len(set(heat["bin"])) == C.MAX_RANK_BINS and max(heat["ranks"]) == RANKS // C.MAX_RANK_BINS
    i = list(heat["bin"]).index("3072-3087")
    cells = {c: v for b, c, v in zip(heat["bin"], heat["column"], heat["max"]) if b == "3072-3087"}
    assert cells["free_ms"] == pytest.approx(max(float(rows[str(r)]["Free"]) for r in range(3072, 3088)) / 1000)
    assert heat["max_rank"][i + list(cells).index("free_ms")] == "3073"
    assert len(set(layout.select_one({"name": "cluster_breakdown_heat_src"}).data["bin"])) <= C.MAX_RANK_BINS
    matrix = layout.select_one({"name": "cluster_comm_matrix"})
    assert len(matrix.x_range.factors) <= C.MAX_RANK_BINS and len(matrix.y_range.factors) <= C.MAX_RANK_BINS
    assert len(layout.select_one({"name": "cluster_links_src"}).data["src"]) == V.LINKS_TABLE_MAX
    assert len(layout.select_one({"name": "cluster_rank_comm_src"}).data["rank"]) == V.TOP_RANKS
    # the search box: every rank's values, and rank 4000's equal to its row of the file
    lookup = pd.DataFrame(layout.select_one({"name": "cluster_rank_lookup_src"}).data).drop(columns="index")
    pd.testing.assert_frame_equal(lookup, view.lookup)  # what the browser gets is the view's table
    assert len(lookup) == RANKS
    row = lookup.set_index("rank").loc["4000"]
    raw = {k: float(v) / 1000 for k, v in rows["4000"].items() if k not in ("Step", "Type", "Index")}
    for col, name in STAGE_COLUMNS.items():
        assert row[col] == pytest.approx(raw[name])
    assert row["breakdown:computing_ms"] == pytest.approx(raw["Computing"] - raw["Overlapped"])
    assert row["breakdown:comm_exposed_ms"] == pytest.approx(raw["Communication(Not Overlapped)"])
    assert row["breakdown:free_ms"] == pytest.approx(raw["Free"])
    text = V.rank_search_html(lookup, "4000")
    assert f"{raw['Free']:,.3f}" in text and "Rank 4000" in text
    assert "No rank 5000" in V.rank_search_html(lookup, "5000")
    assert "&lt;b&gt;" in V.rank_search_html(lookup, "<b>")
    box = layout.select_one({"name": "cluster_rank_search"})
    assert box.value == slowest[0] and box.js_property_callbacks["change:value"]
    # in the browser the box's CustomJS answers as `rank_search_html` does (run with node where there is one)
    node = shutil.which("node")
    if node:
        callback = box.js_property_callbacks["change:value"][0]
        data = {c: [None if isinstance(v, float) and v != v else v for v in lookup[c].tolist()] for c in lookup}
        script = (f"const src = {{data: {json.dumps(data)}}}; const out = {{text: ''}}; "
                  f"const labels = {json.dumps(callback.args['labels'])}; const muted = {json.dumps(callback.args['muted'])};"
                  f"for (const q of ['4000', '5000', '<b>']) {{ const cb_obj = {{value: q}}; "
                  f"(function () {{ {callback.code} }})(); console.log(JSON.stringify(out.text)); }}")
        got = subprocess.run([node], input=script, capture_output=True, text=True, timeout=60, check=True).stdout
        assert [json.loads(line) for line in got.splitlines()] == \
            [V.rank_search_html(lookup, q) for q in ("4000", "5000", "<b>")]


@pytest.mark.slow
def test_dask_on_a_local_cluster_gives_the_serial_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    root = write_cluster_analysis(tmp_path / "c", DATA, 32, steps=2)
    serial = load_quietly(root, engine="serial")
    with distributed.Client(distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                                     dashboard_address=None)) as client:
        with distributed.get_task_stream(client) as stream:
            on_dask = load_quietly(root, engine="dask")
            summary = C.rank_summary(on_dask)
            frame = rank_breakdown(on_dask)
            comm = C.communication_summary(on_dask)
    assert len(stream.data) >= 3  # the three reduces ran as tasks on the client
    expect = C.rank_summary(serial)
    for key in ("steps", "step_totals"):
        pd.testing.assert_frame_equal(summary[key], expect[key])
    pd.testing.assert_frame_equal(frame, rank_breakdown(serial))
    pd.testing.assert_frame_equal(comm["groups"], C.communication_summary(serial)["groups"])
    for analysis in (C.communication_matrix, C.communication_by_rank, C.link_bandwidth):
        pd.testing.assert_frame_equal(analysis(on_dask), analysis(serial))  # on_dask: from its dask-made cache
    assert len(C.communication_matrix(on_dask)) and len(C.communication_by_rank(on_dask)) == 32


def test_synthetic_ascend_pt_text_exports_load_as_ranks_with_the_real_step_rows(tmp_path):
    from nbprofiler.synthetic.cluster import NPU_CLUSTER, write_npu_cluster
    root = write_npu_cluster(tmp_path / "pt", DATA, 3, kernel_repeat=1, suffix="ascend_pt", slow_rank=2)
    assert sorted(p.name for p in root.iterdir()) == ["rank0_ascend_pt", "rank1_ascend_pt", "rank2_ascend_pt"]
    cl = load_quietly(root)
    assert cl.ranks == ["0", "1", "2"]
    with open(DATA / NPU_CLUSTER, newline="") as f:
        real = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    steps = C.rank_steps(C.rank_summary(cl, engine="serial"))
    assert steps.at["0", "computing_ms"] == pytest.approx(float(real[0]["Computing"]) / 1000, abs=1e-6)
    assert steps.at["2", "free_ms"] == pytest.approx(3 * float(real[2]["Free"]) / 1000, abs=1e-5)  # the straggler
