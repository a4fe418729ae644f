"""Why the slow ranks are slow and which links run below their transport's bandwidth
(`nbprofiler.analysis.slow_rank_cause`): a synthetic cluster whose straggler runs one operator type longer, and
the real 16-rank and 8-rank cluster outputs, every number checked against the files read here with csv/json."""
from __future__ import annotations

import csv
import functools
import html
import json
import statistics

import pytest

from nbprofiler.analysis.diagnosis import diagnose_cluster, fmt_ms
from nbprofiler.analysis.slow_rank_cause import (SLOW_LINK_SHARE, link_speeds, slow_links_summary, slow_rank_causes,
                                                 slow_rank_summary)
from nbprofiler.schema import ANALYSIS_FRAMES
from nbprofiler.synthetic.cluster import write_npu_cluster

from .conftest import DATA, load_quietly

SLOW_OP, SLOW_MS, SLOW_RANK, RANKS = "Mul", 20.0, 4, 6


@functools.cache
def _loaded(name):
    return load_quietly(name)


def _page_findings(cluster) -> str:
    """The text of the cluster page's findings panel (the page's `findings_div` of the cluster's diagnosis)."""
    from nbprofiler.views.cluster import findings_div
    return findings_div(diagnose_cluster(cluster)).text


def _type_ms(path, op_type) -> float:
    with open(path, newline="") as f:
        return sum(float(r["Duration(us)"]) for r in csv.DictReader(f) if r["Type"] == op_type) / 1000.0


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = write_npu_cluster(tmp_path_factory.mktemp("slow_op"), DATA, RANKS, kernel_repeat=1, slow_rank=SLOW_RANK,
                             slow_op_type=SLOW_OP, slow_op_ms=SLOW_MS, step_row=0)
    return root, load_quietly(root)


def test_an_op_type_made_slower_on_one_rank_is_its_leading_cause_with_the_injected_ms(synthetic):
    root, cluster = synthetic
    # the injected time, from the kernel files as written: the slow rank's Mul time against another rank's
    kernels = {r: next(root.glob(f"*_{1000 + r}_*_ascend_ms")) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
               for r in (0, SLOW_RANK)}
    injected = _type_ms(kernels[SLOW_RANK], SLOW_OP) - _type_ms(kernels[0], SLOW_OP)
    assert injected == pytest.approx(SLOW_MS, abs=1e-3)
    causes = slow_rank_causes(cluster)
    assert ANALYSIS_FRAMES["slow_rank_causes"].mismatches(causes) == []
    mine = causes[causes["rank"] == str(SLOW_RANK)]
    assert set(causes["rank"]) == {str(SLOW_RANK)}, "the only rank that differs is the only one explained"
    lead = mine.iloc[0]
    assert (lead["kind"], lead["cause"], lead["view"], lead["order"]) == ("op_type", f"op_type:{SLOW_OP}",
                                                                          "operators", 1)
    assert lead["ms"] == pytest.approx(injected, rel=1e-9)
    # the computing excess is the same 20 ms: all of it is the op type's, so no computing remainder is listed,
    # and nothing else differs between the ranks
    assert mine["cause"].tolist() == [f"op_type:{SLOW_OP}"]
    # the diagnosis and the cluster page name the same rank and cause with the same ms
    finding = next(f for f in diagnose_cluster(cluster).findings if f.id == f"cluster.slow_rank.{SLOW_RANK}")
    assert f"Rank {SLOW_RANK} " in finding.text and f"{SLOW_OP} operators, +{fmt_ms(injected)} ms" in finding.text
    assert finding.cost_ms == pytest.approx(injected) and finding.view == "operators"  # = the step excess
    # the page's first sentence names it: the costliest finding after the limiting stage
    assert finding.text in diagnose_cluster(cluster).headline
    from nbprofiler.views.cluster import ClusterView
    page = ClusterView(cluster).layout
    assert f"data-finding-id='cluster.slow_rank.{SLOW_RANK}'>{html.escape(finding.text)}" in \
        page.select_one({"name": "cluster_findings"}).text
    table = page.select_one({"name": "cluster_slow_causes_src"}).data
    assert list(table["label"]) == [f"{SLOW_OP} operators"] and list(table["ms"]) == [lead["ms"]]
    assert "no link data" in page.select_one({"name": "cluster_slow_links_head"}).text
    # the summary JSON shows the frame's rows
    summary = cluster.summary()["cluster"]
    assert [(c["cause"], c["ms"]) for c in summary["slow_rank_causes"][0]["causes"]] == [(lead["cause"], lead["ms"])]
    assert summary["slow_links"] is None


def _matrix_links(path):
    """(src, dst, transport) -> [MB, ms, steps] summed over ops and steps, links between two ranks only."""
    out = {}
    for group in json.loads(path.read_text()).values():
        for step in group.values():
            for op, links in step.items():
                if op == "Total Op Info":
                    continue
                for key, v in links.items():
                    src, dst = key.split("-")
                    if src != dst:
                        acc = out.setdefault((src, dst, v["Transport Type"]), [0.0, 0.0, 0])
                        acc[0] += v["Transit Size(MB)"]
                        acc[1] += v["Transit Time(ms)"]
                        acc[2] += 1
    return out


def _expected(links):
    """transport -> the median bandwidth (GB/s = MB/ms) of its links."""
    by = {}
    for (_, _, t), (mb, ms, _) in links.items():
        by.setdefault(t, []).append(mb / ms)
    return {t: statistics.median(v) for t, v in by.items()}


def test_16rank_links_gbps_and_the_slow_link_equal_the_matrix_file():
    cluster = _loaded("npu/cluster_analysis_16rank")
    links = _matrix_links(DATA / "npu/cluster_analysis_16rank/cluster_communication_matrix.json")
    expected = _expected(links)
    got = link_speeds(cluster)
    assert ANALYSIS_FRAMES["link_speeds"].mismatches(got) == []
    assert {(r.src, r.dst, r.transport) for r in got.itertuples()} == set(links)
    slow = set()
    for r in got.itertuples():
        mb, ms, _ = links[(r.src, r.dst, r.transport)]
        assert r.bandwidth_gbps == pytest.approx(mb / ms, rel=1e-9)
        assert r.expected_gbps == pytest.approx(expected[r.transport], rel=1e-9)
        if mb / ms < SLOW_LINK_SHARE * expected[r.transport]:
            slow.add((r.src, r.dst, r.transport))
            assert r.extra_ms == pytest.approx(ms - mb / expected[r.transport], rel=1e-9)
    assert slow == {("1", "0", "HCCS")}, "the 40-byte HCCS broadcast hop runs far below the HCCS median"
    assert set(zip(got.loc[got["slow"], "src"], got.loc[got["slow"], "dst"], got.loc[got["slow"], "transport"])) == slow
    row = got[got["slow"]].iloc[0]
    # the broadcast's group is the one the file keys it under: ranks 0-7 wait on the hop
    assert row["held_back"] == ", ".join(str(r) for r in range(8))
    # the summary JSON's cluster.slow_links and cluster.sql show the same rows
    summary = slow_links_summary(cluster)
    assert [(x["src"], x["dst"], x["transport"]) for x in summary["links"]] == [("1", "0", "HCCS")]
    assert summary["expected_gbps"] == pytest.approx(expected)
    by_sql = cluster.sql("SELECT src, dst, bandwidth_gbps, extra_ms FROM link_speeds WHERE slow")
    assert by_sql.to_dict("records") == [{"src": "1", "dst": "0", "bandwidth_gbps": row["bandwidth_gbps"],
                                          "extra_ms": row["extra_ms"]}]


def _step_rows(path):
    with open(path, newline="") as f:
        return {r["Index"]: {k: float(v) for k, v in r.items() if k not in ("Step", "Type", "Index")}
                for r in csv.DictReader(f) if r["Type"] == "rank"}


def test_16rank_slowest_rank_and_its_leading_cause_equal_the_step_trace_file():
    cluster = _loaded("npu/cluster_analysis_16rank")
    rows = _step_rows(DATA / "npu/cluster_analysis_16rank/cluster_step_trace_time.csv")
    total = {r: v["Computing"] + v["Communication(Not Overlapped)"] + v["Free"] for r, v in rows.items()}
    slowest = max(total, key=total.get)
    parts = {"computing_ms": lambda v: v["Computing"] - v["Overlapped"], "comm_overlapped_ms": lambda v: v["Overlapped"],
             "comm_exposed_ms": lambda v: v["Communication(Not Overlapped)"], "free_ms": lambda v: v["Free"]}
    # a pipeline-parallel job: the rank is compared with the ranks of its own stage (the p2p lists of
    # communication_group.json, read here), whose work and bubbles are the same by design
    groups = json.loads((DATA / "npu/cluster_analysis_16rank/communication_group.json").read_text())
    stage = next([str(r) for r in g] for g in groups["p2p"] if int(slowest) in g)
    excess = {p: (f(rows[slowest]) - statistics.median(f(rows[r]) for r in stage)) / 1000 for p, f in parts.items()}
    lead_part = max(excess, key=excess.get)
    causes = slow_rank_causes(cluster)
    assert set(causes["rank"]) == {slowest} == {"11"} and len(stage) == 8
    assert not causes["outlier"].any(), "no rank of this file is an outlier by robust z: the slowest is explained"
    assert causes["cause"].tolist() == sorted((p for p in excess if excess[p] > 0), key=lambda p: -excess[p])
    assert causes["ms"].tolist() == pytest.approx(sorted((v for v in excess.values() if v > 0), reverse=True))
    assert lead_part == "comm_exposed_ms" and causes.iloc[0]["view"] == "breakdown"
    assert causes.attrs["notes"]["11"] == ("compared with the 8 ranks of its pipeline stage; operator types not loaded "
                                           "(no operator data on this rank)")
    finding = next(f for f in diagnose_cluster(cluster).findings if f.id == "cluster.slow_rank.11")
    assert (f"communication exposed, +{fmt_ms(excess[lead_part])} ms a step against the 8 ranks of its pipeline "
            "stage") in finding.text
    assert f"data-finding-id='cluster.slow_rank.11'>{html.escape(finding.text)}" in _page_findings(cluster)
    summary = slow_rank_summary(cluster)
    assert [(s["rank"], s["causes"][0]["cause"]) for s in summary] == [("11", "comm_exposed_ms")]
    assert summary[0]["causes"][0]["ms"] == pytest.approx(excess[lead_part])


def test_8rank_transport_bandwidths_equal_the_communication_file_and_none_is_slow():
    cluster = _loaded("npu/cluster_8rank")
    per = {}
    for group in json.loads((DATA / "npu/cluster_8rank/cluster_communication.json").read_text()).values():
        for step in group.values():
            for op, ranks in step.items():
                for rank, info in ranks.items():
                    for t, v in info["Communication Bandwidth Info"].items():
                        if op != "Total Op Info" and v.get("Transit Time(ms)", 0) > 0:
                            acc = per.setdefault((rank, "*", t), [0.0, 0.0, 1])
                            acc[0] += v["Transit Size(MB)"]
                            acc[1] += v["Transit Time(ms)"]
    expected = _expected(per)
    got = link_speeds(cluster)
    assert {(r.src, r.dst, r.transport) for r in got.itertuples()} == set(per)
    for r in got.itertuples():
        mb, ms, _ = per[(r.src, r.dst, r.transport)]
        assert r.bandwidth_gbps == pytest.approx(mb / ms, rel=1e-9)
        assert r.expected_gbps == pytest.approx(expected[r.transport], rel=1e-9)
        assert r.slow == (mb / ms < SLOW_LINK_SHARE * expected[r.transport]) == False  # noqa: E712
        assert r.held_back == "0, 1"
    assert slow_links_summary(cluster)["links"] == []
    # the slowest rank (by the step trace file) is the one explained, and the page names its leading cause
    rows = _step_rows(DATA / "npu/cluster_8rank/cluster_step_trace_time.csv")
    total = {r: v["Computing"] + v["Communication(Not Overlapped)"] + v["Free"] for r, v in rows.items()}
    causes = slow_rank_causes(cluster)
    slowest = max(total, key=total.get)
    assert set(causes["rank"]) == {slowest}
    lead = causes.iloc[0]
    finding = next(f for f in diagnose_cluster(cluster).findings if f.id == f"cluster.slow_rank.{slowest}")
    assert f"Rank {slowest} " in finding.text and f"{lead['label']}, +{fmt_ms(lead['ms'])} ms" in finding.text
    assert html.escape(finding.text) in _page_findings(cluster)
    # waiting for the other ranks is never a cause; here no part of the rank's own work explains its extra
    # time (the largest part is far below it), and the sentence says so instead of naming a cause
    assert "wait_ms" not in set(causes["cause"])
    excess = total[slowest] / 1000 - statistics.median(total.values()) / 1000
    assert lead["ms"] < 0.25 * excess
    assert f"no part of its own work accounts for the {fmt_ms(excess)} ms" in finding.text
    assert "longer than the median over 2 ranks inside collectives" in finding.text


def test_a_slow_link_the_slow_rank_uses_is_a_cause_inside_its_exposed_communication(tmp_path):
    """npu/cluster_analysis_16rank copied with rank 1's exposed communication made 100 ms longer: rank 1 becomes
    the slowest, and the slow HCCS hop 1→0 of its broadcast group is one of its causes, with the ms the matrix
    file gives it, inside the exposed communication's transit (ranks 0 and 1 have the communication file's
    wait/transit split); the transit is listed with the rest."""
    import shutil
    src = DATA / "npu/cluster_analysis_16rank"
    root = tmp_path / "cluster_analysis_16rank"
    shutil.copytree(src, root)
    path = root / "cluster_step_trace_time.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["Type"] == "rank" and r["Index"] == "1":
            for col in ("Communication(Not Overlapped)", "Communication"):
                r[col] = repr(float(r[col]) + 100_000.0)  # us
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    links = _matrix_links(src / "cluster_communication_matrix.json")
    mb, ms, _ = links[("1", "0", "HCCS")]
    link_ms = ms - mb / _expected(links)["HCCS"]
    # the transit part of each split rank's exposed communication, by the communication file's wait share
    wait, move = {}, {}
    for group in json.loads((src / "cluster_communication.json").read_text()).values():
        for ops in group.values():
            for op_name, op in ops.items():
                for rank, info in op.items() if op_name != "Total Op Info" else ():
                    t = info["Communication Time Info"]
                    wait[rank] = wait.get(rank, 0.0) + t["Wait Time(ms)"]
                    move[rank] = move.get(rank, 0.0) + t["Transit Time(ms)"]
    step = _step_rows(path)
    transit = {r: step[r]["Communication(Not Overlapped)"] / 1000 * move[r] / (wait[r] + move[r]) for r in wait}
    assert sorted(transit) == ["0", "1"]
    transit_excess = transit["1"] - statistics.median(transit.values())
    causes = slow_rank_causes(load_quietly(root))
    mine = causes[causes["rank"] == "1"].set_index("cause")
    assert causes["rank"].iloc[0] == "1" and mine.iloc[0]["kind"] == "stage"
    link = mine.loc["link:1-0:HCCS"]
    assert (link["kind"], link["view"], link["part"]) == ("link", "links", "transit_ms")
    assert link["ms"] == pytest.approx(link_ms, rel=1e-9)
    assert "ranks 0, 1, 2, 3, 4, 5, 6, 7" in link["evidence"]
    assert mine.loc["transit_ms", "ms"] == pytest.approx(transit_excess - link_ms, rel=1e-6)
