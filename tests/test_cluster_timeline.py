"""Several ranks' timelines stacked on one clock (analysis.cluster_timeline) and TimelineView(cluster)."""
from __future__ import annotations

import pytest

from nbprofiler.analysis.cluster_timeline import rank_offsets, stacked_timeline

from .conftest import load_quietly


@pytest.fixture(scope="module")
def pt2():
    return load_quietly("npu/ascend_pt_text_2rank")


def test_stacked_timeline_keeps_every_event_of_every_rank_on_the_first_rank_clock(pt2):
    frames = stacked_timeline(pt2)
    tl, tracks = frames["timeline"], frames["timeline_tracks"]
    r0, r1 = pt2["0"], pt2["1"]
    assert len(tl) == len(r0.timeline) + len(r1.timeline) == 6758
    assert len(tracks) == len(r0.timeline_tracks) + len(r1.timeline_tracks)
    assert tracks["track"].is_unique and set(tl["track"]) <= set(tracks["track"])
    # rank 1's events keep their absolute times: its origin is 2141 us after rank 0's
    shift = r1.origin_us - r0.origin_us
    assert shift == 2141.0
    rank1 = tracks[tracks["process"].str.startswith("rank 1 · ")]["track"]
    mine = tl[tl["track"].isin(rank1)]
    assert mine["start_us"].min() == pytest.approx(r1.timeline["start_us"].min() + shift)
    # each rank's tracks stay together, rank 0 first; names keep their category dtype
    order = tracks.sort_values("process_sort")["process"].str.slice(0, 6).tolist()
    assert order == sorted(order) and str(tl["name"].dtype) == "category"
    assert len(frames["timeline_flows"]) == len(r0.timeline_flows) + len(r1.timeline_flows)


def test_communication_alignment_meets_the_ends_of_the_first_shared_collective(pt2):
    """The two ranks ran hcom_allReduce__868_0_1; by their clocks its ends are 8.74 us apart (one host):
    aligned on communication, they meet."""
    offsets = rank_offsets({"0": pt2["0"], "1": pt2["1"]}, align="communication")
    assert offsets == {"0": 0.0, "1": pytest.approx(-8.738125, abs=1e-6)}
    frames = stacked_timeline(pt2, align="communication", offsets_us={"1": 100.0})
    assert frames["timeline"].attrs["offsets_us"]["1"] == pytest.approx(91.261875, abs=1e-6)
    tl, tracks = frames["timeline"], frames["timeline_tracks"]
    ends = {}
    for rank in ("0", "1"):
        own = tracks[tracks["process"].str.startswith(f"rank {rank} · ")]["track"]
        ev = tl[tl["track"].isin(own) & (tl["name"].astype(str) == "hcom_allReduce__868_0_1")]
        ends[rank] = float((ev["start_us"] + ev["dur_us"]).min())
    assert ends["1"] - ends["0"] == pytest.approx(100.0)  # met, then the manual 100 us on top
    with pytest.raises(ValueError, match="align must be one of"):
        stacked_timeline(pt2, align="nearest")


def test_timeline_view_of_a_cluster_draws_the_chosen_ranks(pt2):
    from nbprofiler.views.timeline import TimelineView
    view = TimelineView(pt2, ranks=["1"])
    labels = list(view.tracks["label"])
    assert labels and all(lbl.startswith("rank 1 · ") for lbl in labels)
    both = TimelineView(pt2)
    assert {lbl.split(" · ")[0] for lbl in both.tracks["label"]} == {"rank 0", "rank 1"}
    assert len(both.source.data["left"]) > 0


def test_cluster_page_folds_the_ranks_timeline_and_builds_it_when_opened(pt2):
    from nbprofiler.views.cluster import ClusterView
    view = ClusterView(pt2)
    fold = next(c for c in view.widget.children if getattr(c, "titles", None)
                and c.get_title(0).startswith("Timeline of ranks"))
    assert fold.get_title(0) == "Timeline of ranks 0, 1 on one clock" and view.timeline is None
    fold.selected_index = 0
    assert view.timeline is not None and len(view.timeline.events) == 6758
    controls = fold.children[0].children[0]
    align, offsets = controls.children
    assert "rank 1 +0.00 µs" in offsets.value
    align.value = "communication"  # rebuilt on the first collective: rank 1 moves 8.74 us earlier
    assert view.timeline.events.attrs["align"] == "communication" and "rank 1 -8.74 µs" in offsets.value
    # a cluster without timelines (step-trace and communication files only) has no such fold
    c8 = ClusterView(load_quietly("npu/cluster_8rank"))
    assert not any(getattr(c, "titles", None) and c.get_title(0).startswith("Timeline of ranks")
                   for c in c8.widget.children)


def test_report_ranks_tab_holds_the_ranks_timeline(pt2):
    from nbprofiler.faces.report import report_layout
    ranks = report_layout(pt2).select_one({"name": "report_ranks"})
    part = ranks.select_one({"name": "report_ranks_timeline"})
    assert part is not None
    bars = part.select_one({"name": "timeline_src"}).data
    assert sum(bars["count"]) == 6758  # every event of both ranks drawn or counted
