"""The parallel-strategy view (`nbprofiler.analysis.parallel_groups`) on real multi-rank data: every group's
dimension against the layout read here from communication_group.json, the time, bytes and exposed time per
dimension against sums made here from cluster_communication.json and cluster_step_trace_time.csv (json/csv
modules), the costliest dimension against this test's own argmax; runs without group data say why."""
from __future__ import annotations

import csv
import functools
import html
import json
import shutil
import sqlite3

import pandas as pd
import pytest

from nbprofiler.analysis.parallel_groups import (dimension_summary, op_type, parallel_communication,
                                                 parallel_groups)
from nbprofiler.errors import ProfilerDataError
from nbprofiler.schema import ANALYSIS_FRAMES

from .conftest import DATA, load_quietly

C16 = DATA / "npu/cluster_analysis_16rank"


@functools.cache
def _cluster(name):
    return load_quietly(name)


def _layout_here() -> dict[str, str]:
    """communication_group.json read with the json module and classified by hand: the p2p lists are the
    pipeline stages; a group with one rank in each stage links the stages (PP); the two consecutive halves
    are the blocks inside a stage (TP); every rank is the world group; one rank is a single."""
    layout = json.loads((C16 / "communication_group.json").read_text())
    stages = [set(s) for s in layout["p2p"]]
    world = set().union(*stages)
    want = {f"p2p[{i}]": "stage" for i in range(len(stages))}
    for i, ranks in enumerate(layout["collective"]):
        r = set(ranks)
        if len(r) == 1:
            dim = "single"
        elif r == world:
            dim = "world"
        elif all(len(r & s) == 1 for s in stages):
            dim = "PP"
        elif r in stages and sorted(r) == list(range(min(r), max(r) + 1)):
            dim = "TP"
        else:
            dim = "unknown"
        want[f"collective[{i}]"] = dim
    return want


def _ops_here() -> list[dict]:
    """Every (group key, op, rank) record of cluster_communication.json, with its elapse, RDMA + SDMA bytes
    and the dimension this test gives it (the ranks key's group; the send/receive ops under "p2p": PP)."""
    layout = json.loads((C16 / "communication_group.json").read_text())
    dims = _layout_here()
    by_ranks = {tuple(sorted(g)): f"collective[{i}]" for i, g in enumerate(layout["collective"])}
    out = []
    for key, steps in json.loads((C16 / "cluster_communication.json").read_text()).items():
        for step, ops in steps.items():
            for op, ranks in ops.items():
                if op == "Total Op Info":
                    continue
                if key == "p2p":
                    assert "send" in op or "receive" in op
                    dim = "PP"
                else:
                    dim = dims[by_ranks[tuple(sorted(int(x) for x in key.strip("()").split(",")))]]
                for rank, info in ranks.items():
                    bw = info["Communication Bandwidth Info"]
                    out.append({"rank": rank, "step": int(step.removeprefix("step")), "dim": dim,
                                "elapse": info["Communication Time Info"]["Elapse Time(ms)"],
                                "mb": bw["RDMA"]["Transit Size(MB)"] + bw["SDMA"]["Transit Size(MB)"]})
    return out


def _steps_here() -> dict[str, dict]:
    """Per rank of cluster_step_trace_time.csv (us): the step (Computing + Communication(Not Overlapped) +
    Free, ms) and the exposed share of its communication (Not Overlapped / Communication)."""
    out = {}
    with open(C16 / "cluster_step_trace_time.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["Type"] == "rank":
                exposed, comm = float(row["Communication(Not Overlapped)"]), float(row["Communication"])
                out[row["Index"]] = {"step_ms": (float(row["Computing"]) + exposed + float(row["Free"])) / 1e3,
                                     "share": exposed / comm, "receive_ms": (exposed - float(
                                         row["Communication(Not Overlapped and Exclude Receive)"])) / 1e3}
    return out


def test_16rank_every_group_gets_the_dimension_of_the_layout():
    groups = parallel_groups(_cluster("npu/cluster_analysis_16rank"))
    assert list(groups.columns) == ANALYSIS_FRAMES["parallel_groups"].column_names
    assert not ANALYSIS_FRAMES["parallel_groups"].mismatches(groups)
    got = dict(zip(groups["group"], groups["dimension"]))
    want = _layout_here()
    assert {k: got[k] for k in want} == want
    assert sorted(set(want.values())) == ["PP", "TP", "single", "stage", "world"]
    # the send/receive ops under cluster_communication.json's "p2p" key: a group of their own, by op name
    extra = groups[~groups["group"].isin(want)]
    assert extra[["group", "dimension", "inferred_from"]].values.tolist() == \
        [["13337953553061386822", "PP", "op names (send/receive)"]]
    reasons = groups.set_index("group")["inferred_from"]
    assert "consecutive ranks 0-7" in reasons["collective[0]"] and "whole pipeline stage" in reasons["collective[0]"]
    assert reasons["collective[1]"] == "one rank in each of 2 pipeline stages (stride 8)"


def test_16rank_time_bytes_and_exposed_per_dimension_equal_the_files():
    cluster = _cluster("npu/cluster_analysis_16rank")
    comm = parallel_communication(cluster)
    assert not ANALYSIS_FRAMES["parallel_communication"].mismatches(comm)
    ops, steps = pd.DataFrame(_ops_here()), _steps_here()
    want = ops.groupby(["rank", "step", "dim"]).agg(elapse=("elapse", "sum"), mb=("mb", "sum"))
    got = comm.set_index(["rank", "step", "dimension"]).sort_index()
    assert sorted(got.index) == sorted(want.index)
    for key, w in want.iterrows():
        g = got.loc[key]
        assert g["elapse_ms"] == pytest.approx(w["elapse"], rel=1e-12)
        assert g["size_mb"] == pytest.approx(w["mb"], rel=1e-12)
        assert g["exposed_ms"] == pytest.approx(w["elapse"] * steps[key[0]]["share"], rel=1e-9)
    # the cluster.sql table is the same frame
    sql = cluster.sql("SELECT dimension, sum(elapse_ms) AS ms FROM parallel_communication GROUP BY 1")
    per_dim = ops.groupby("dim")["elapse"].sum()
    assert dict(zip(sql["dimension"], sql["ms"])) == pytest.approx(per_dim.to_dict())


def test_16rank_costliest_dimension_is_the_argmax_of_the_files():
    cluster = _cluster("npu/cluster_analysis_16rank")
    digest = cluster.summary()["cluster"]["parallel"]
    ops, steps = pd.DataFrame(_ops_here()), _steps_here()
    ops["exposed"] = ops["elapse"] * ops["rank"].map({r: s["share"] for r, s in steps.items()})
    pairs = ops[["rank", "step"]].drop_duplicates()
    exposed_per_step = ops.groupby("dim")["exposed"].sum() / len(pairs)
    top = exposed_per_step.idxmax()
    step_ms = sum(steps[r]["step_ms"] for r in pairs["rank"]) / len(pairs)
    ms_per_step = ops.loc[ops["dim"] == top, "elapse"].sum() / len(pairs)
    best = digest["costliest"]
    assert best["dimension"] == top == "TP" and best["basis"] == "exposed"
    assert best["ms_per_step"] == pytest.approx(ms_per_step)
    assert best["exposed_ms_per_step"] == pytest.approx(exposed_per_step[top])
    assert best["share_of_step"] == pytest.approx(ms_per_step / step_ms)
    # the op records hold 5.4 % of the step trace's communication: the step traces' own split of every rank's
    # exposed communication leads, and the op records' costliest dimension follows as what they show
    assert digest["finding"].startswith("The step traces of 16 ranks split the exposed communication into receives "
                                        "between pipeline stages (PP)")
    assert (f"among them tensor parallel (TP) communication costs most: {ms_per_step:,.3f} ms per step per rank "
            f"({ms_per_step / step_ms * 100:.1f} % of the step)") in digest["finding"]
    dims = {d["dimension"]: d for d in digest["dimensions"]}
    assert dims["PP"]["time_ms"] == pytest.approx(ops.loc[ops["dim"] == "PP", "elapse"].sum())
    assert dims["PP"]["groups"] == 9 and dims["TP"]["groups"] == 2 and dims["stage"]["time_ms"] == 0
    # the op records hold a small part of the step trace's communication, and the sentence says how much
    assert digest["coverage"]["ops_ms_per_step"] == pytest.approx(ops["elapse"].sum() / len(pairs))
    assert "of the step trace's" in digest["finding"]
    # and the step traces of all 16 ranks split the exposed time: receives between stages (PP) vs collectives
    receive = {r: v["receive_ms"] for r, v in steps.items()}
    split = digest["step_trace"]
    assert split["ranks"] == 16 and split["receive_ms_per_step"] == pytest.approx(sum(receive.values()) / 16)
    assert split["max_receive"]["rank"] == max(receive, key=receive.get) == "11"
    assert f"receives between pipeline stages (PP), {split['receive_ms_per_step']:,.3f} ms" in digest["finding"]


def test_16rank_cluster_page_section_states_the_finding():
    from nbprofiler.views.cluster import parallel_layout
    cluster = _cluster("npu/cluster_analysis_16rank")
    lay = parallel_layout(cluster)
    finding = lay.select_one({"name": "cluster_parallel_finding"}).text
    assert html.escape(dimension_summary(cluster)["finding"]) in finding
    for name in ("cluster_parallel_time", "cluster_parallel_bytes", "cluster_parallel_ranks", "cluster_parallel_groups"):
        assert lay.select_one({"name": name}) is not None, name
    bars = lay.select_one({"name": "cluster_parallel_time_src"}).data
    assert bars["dimension"][bars["value"].index(max(bars["value"]))] == "TP"


def test_db_2rank_one_group_on_every_rank_is_data_parallel(tmp_path):
    cluster = _cluster("npu/ascend_pt_db_2rank")
    groups = parallel_groups(cluster)
    assert groups[["dimension", "ranks", "members_from"]].values.tolist() == \
        [["DP", "0,1", "ranks recording its ops"]]
    comm = parallel_communication(cluster).set_index("rank")
    for rank in cluster.ranks:
        db = next((DATA / "npu/ascend_pt_db_2rank" / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT")
                  .glob("ascend_pytorch_profiler_*.db"))
        shutil.copy(db, tmp_path / "prof.db")
        with sqlite3.connect(tmp_path / "prof.db") as con:
            ms, group = con.execute("SELECT sum(c.endNs - c.startNs) / 1e6, min(s.value) FROM COMMUNICATION_OP c "
                                    "JOIN STRING_IDS s ON s.id = c.groupName").fetchone()
        assert comm.loc[rank, "elapse_ms"] == pytest.approx(ms, rel=1e-9)
        assert groups["group"].iloc[0] == group


def test_8rank_a_group_seen_alone_is_unknown_with_why():
    groups = parallel_groups(_cluster("npu/cluster_8rank"))
    assert groups[["group", "dimension"]].values.tolist() == [["(0, 1)", "unknown"]]
    assert "without communication_group.json" in groups["inferred_from"].iloc[0]


def test_without_group_data_the_view_is_not_available():
    from nbprofiler.views.cluster import parallel_layout
    cluster = _cluster("npu/ascend_pt_text_2rank")
    assert parallel_groups(cluster).empty and parallel_communication(cluster).empty
    digest = dimension_summary(cluster)
    assert digest["available"] is False and "no communication groups" in digest["why"]
    assert "not available" in parallel_layout(cluster).text


def test_legacy_pipeline_receives_are_pp_and_cost_most():
    """legacy/cluster_4rank_pipeline: 2 stages of the 4 ranks (the file name), receives between stages (PP)
    and collectives inside a stage (unknown) per rank and step as the ascend_cluster_analyse files write
    them (csv module; their last row is the average, not a step)."""
    name = "legacy/cluster_4rank_pipeline"
    cluster = _cluster(name)
    groups = parallel_groups(cluster)
    stages = groups[groups["dimension"] == "stage"]
    assert stages["ranks"].tolist() == ["0,1", "2,3"]
    rows = []
    for path in sorted((DATA / name).glob("ascend_cluster_analyse_pipeline-parallel_2_4_*.csv")):
        with open(path, newline="") as f:
            table = list(csv.DictReader(f, skipinitialspace=True))[:-1]
        rank = path.stem.rsplit("_", 1)[1]
        for step, r in enumerate(table, start=1):
            rows.append({"rank": rank, "step": step, "PP": float(r["receive_alone_time"]),
                         "unknown": float(r["collective_communication_alone_time"])})
    want = pd.DataFrame(rows).melt(id_vars=["rank", "step"], var_name="dimension", value_name="ms")
    got = parallel_communication(cluster).merge(want, on=["rank", "step", "dimension"], how="outer")
    assert len(got) == len(want) == 40
    assert got["exposed_ms"].tolist() == pytest.approx(got["ms"].tolist())
    per_step = want.groupby("dimension")["ms"].sum() / len(rows)
    digest = dimension_summary(cluster)
    assert digest["costliest"]["dimension"] == per_step.idxmax() == "PP"
    assert digest["costliest"]["exposed_ms_per_step"] == pytest.approx(per_step["PP"])
    assert digest["costliest"]["ms_per_step"] is None  # the files give no elapsed time for them
    assert digest["finding"].startswith(f"Pipeline parallel (PP) communication costs most: {per_step['PP']:,.3f} ms "
                                        "exposed per step per rank")


@pytest.mark.filterwarnings("ignore::nbprofiler.errors.ProfilerDataWarning")
@pytest.mark.parametrize("text", ['{"collective": [[0, 1], [2, "x"]]}', '{"collective": [[0, 1]', '[1, 2]'])
def test_a_malformed_communication_group_json_is_an_error_naming_the_file(tmp_path, text):
    root = tmp_path / "c16"
    shutil.copytree(C16, root)
    (root / "communication_group.json").chmod(0o644)
    (root / "communication_group.json").write_text(text)
    cluster = load_quietly(root)
    with pytest.raises(ProfilerDataError) as err:
        parallel_groups(cluster)
    assert err.value.path.name == "communication_group.json"
    assert "communication_group.json" in dimension_summary(cluster)["why"]


def test_op_type_reads_the_collective_from_the_op_name():
    assert op_type("hcom_allReduce__576_0_1") == "allreduce"
    assert op_type("hcom_send__822_0@13337953553061386822") == "send"
    assert op_type("hcom_alltoallv__1_2@g") == "alltoallv"


def test_a_megatron_layout_tp2_dp4_pp2_is_read_back(tmp_path):
    """The 16-rank run's files with the communication_group.json Megatron writes for TP 2 x DP 4 x PP 2
    (tensor-parallel ranks adjacent, data-parallel ranks 2 apart inside a stage, pipeline ranks 8 apart),
    built here from that rank order: every group gets the dimension it was built as."""
    tp, dp, pp = 2, 4, 2
    built = {}
    for s in range(pp):
        for d in range(dp):
            built[tuple(s * tp * dp + d * tp + t for t in range(tp))] = "TP"
        for t in range(tp):
            built[tuple(s * tp * dp + d * tp + t for d in range(dp))] = "DP"
    for i in range(tp * dp):
        built[tuple(i + s * tp * dp for s in range(pp))] = "PP"
    stages = [list(range(s * tp * dp, (s + 1) * tp * dp)) for s in range(pp)]
    root = tmp_path / "c16"
    shutil.copytree(C16, root)
    (root / "communication_group.json").chmod(0o644)
    (root / "communication_group.json").write_text(json.dumps({"collective": [list(g) for g in built],
                                                               "p2p": stages}))
    groups = parallel_groups(load_quietly(root))
    got = {tuple(int(x) for x in r.split(",")): d for r, d, m in
           zip(groups["ranks"], groups["dimension"], groups["members_from"]) if m == "communication_group.json"}
    assert got == {**built, **{tuple(s): "stage" for s in stages}}
    reasons = dict(zip(groups["dimension"], groups["inferred_from"]))
    assert reasons["DP"] == "stride 2 across the tensor-parallel groups"
    assert "whole pipeline stage" not in reasons["TP"]
