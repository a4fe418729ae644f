"""Several ranks' timelines stacked on one clock (analysis.cluster_timeline) and TimelineView(cluster)."""
from __future__ import annotations

import json
import re
import shutil
import statistics
from decimal import Decimal
from pathlib import Path

import pytest

from nbprofiler.analysis.cluster_timeline import rank_alignment, rank_offsets, shared_collectives, stacked_timeline
from nbprofiler.views.cluster import alignment_note

from .conftest import DATA, load_quietly

PT2 = "npu/ascend_pt_text_2rank"
TRACE = "rank{}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


@pytest.fixture(scope="module")
def pt2():
    return load_quietly(PT2)


def _hcom_ends(root: Path, rank: str) -> dict[str, Decimal]:
    """Name -> absolute end (µs, exact) of each hcom_* op in a rank's trace_view.json, read with json."""
    events = json.loads((root / TRACE.format(rank)).read_text())
    return {e["name"]: Decimal(str(e["ts"])) + Decimal(str(e["dur"])) for e in events
            if e.get("ph") == "X" and re.match(r"hcom_[A-Za-z]+_+\d", e.get("name", ""))}


def _copy_pt2(tmp: Path, edit) -> Path:
    """A writable copy of the 2-rank run with rank 1's trace_view.json events passed through ``edit``."""
    dst = tmp / "run"
    shutil.copytree(DATA / PT2, dst, copy_function=shutil.copyfile)
    for d in (dst, *(p for p in dst.rglob("*") if p.is_dir())):
        d.chmod(0o755)
    trace = dst / TRACE.format(1)
    trace.write_text(json.dumps([edit(e) for e in json.loads(trace.read_text())]))
    return dst


SHIFT = Decimal("54321.125")  # µs added to every time of rank 1's copy: its clock set wrong by that much


def _shifted(event: dict) -> dict:
    if "ts" in event:
        event["ts"] = str(Decimal(str(event["ts"])) + SHIFT) if isinstance(event["ts"], str) \
            else event["ts"] + float(SHIFT)
    return event


def _renamed(event: dict) -> dict:
    if str(event.get("name", "")).startswith("hcom_"):
        event["name"] = event["name"].replace("__868_", "__999_")  # another group: no collective in common
    return event


@pytest.fixture(scope="module")
def pt2_shifted(tmp_path_factory):
    return load_quietly(_copy_pt2(tmp_path_factory.mktemp("shifted"), _shifted))


@pytest.fixture(scope="module")
def pt2_apart(tmp_path_factory):
    return load_quietly(_copy_pt2(tmp_path_factory.mktemp("apart"), _renamed))


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


def _stacked_ends(frames: dict, name: str) -> dict[str, float]:
    """Rank -> end of op ``name`` in a stacked timeline (µs on the reference clock)."""
    tl, tracks = frames["timeline"], frames["timeline_tracks"]
    ends = {}
    for rank in ("0", "1"):
        own = tracks[tracks["process"].str.startswith(f"rank {rank} · ")]["track"]
        ev = tl[tl["track"].isin(own) & (tl["name"].astype(str) == name)]
        ends[rank] = float((ev["start_us"] + ev["dur_us"]).min())
    return ends


def test_communication_alignment_fits_every_shared_collective_and_states_the_residual(pt2):
    """The ranks ran the same four all-reduces; their ends, read from the trace_view.json files, differ by
    2130.9-2135.3 us while the origins are 2141 us apart: rank 1's offset is the median of the four
    differences, and what is left of them (up to 2.4 us) is the residual the offset could not remove."""
    root = DATA / PT2
    e0, e1 = _hcom_ends(root, "0"), _hcom_ends(root, "1")
    assert sorted(e0) == sorted(e1) and len(e0) == 4
    diffs = [e0[n] - e1[n] for n in e0]
    offset = statistics.median(diffs)
    left = [abs(d - offset) for d in diffs]
    a = rank_alignment({"0": pt2["0"], "1": pt2["1"]}, align="communication")
    assert a.reference == "0" and a.collectives == {"0": 4, "1": 4} and not a.unaligned
    # an offset is on the absolute clocks, whose origins a Profile holds as float64 epoch µs (a quarter-µs
    # grid: 1736405443756311.100 is 1736405443756311.0); the residual comes from relative times, exact
    assert a.offsets_us == {"0": 0.0, "1": pytest.approx(float(offset), abs=0.5)}
    assert float(offset) == pytest.approx(-8.018, abs=1e-3)
    assert a.residual_us["1"] == {"median": pytest.approx(float(statistics.median(left)), abs=1e-3),
                                  "max": pytest.approx(float(max(left)), abs=1e-3)}
    assert (a.median_us, a.max_us, a.max_rank) == (a.residual_us["1"]["median"], a.residual_us["1"]["max"], "1")
    assert a.max_us == pytest.approx(2.441, abs=1e-3)
    assert rank_offsets({"0": pt2["0"], "1": pt2["1"]}, align="communication") == a.offsets_us
    frames = stacked_timeline(pt2, align="communication", offsets_us={"1": 100.0})
    attrs = frames["timeline"].attrs
    assert attrs["offsets_us"]["1"] == pytest.approx(a.offsets_us["1"] + 100.0)
    assert attrs["residual_us"] == a.residual_us and attrs["alignment"] == a.as_dict() and attrs["anchor"] is None
    for name in e0:  # every collective's ends within the residual of each other, then the manual 100 us on top
        ends = _stacked_ends(frames, name)
        assert abs(ends["1"] - 100.0 - ends["0"]) <= a.max_us + 1e-6
    assert alignment_note(attrs["alignment"]) == (
        f"Ranks aligned on 4 shared collectives; residual misalignment median {a.median_us:,.2f} µs, "
        f"max {a.max_us:,.2f} µs (rank 1).")
    clock = stacked_timeline(pt2)["timeline"].attrs["alignment"]
    assert clock["offsets_us"] == {"0": 0.0, "1": 0.0}
    assert alignment_note(clock) == "Ranks on the hosts' clocks; not checked."
    with pytest.raises(ValueError, match="align must be one of"):
        stacked_timeline(pt2, align="nearest")


def test_a_pinned_anchor_meets_exactly_and_the_others_measure_the_residual(pt2):
    root = DATA / PT2
    e0, e1 = _hcom_ends(root, "0"), _hcom_ends(root, "1")
    pin = "hcom_allReduce__868_2_1"
    frames = stacked_timeline(pt2, align="communication", anchor=pin)
    ends = _stacked_ends(frames, pin)
    assert ends["1"] == pytest.approx(ends["0"], abs=1e-6)
    a = frames["timeline"].attrs["alignment"]
    assert a["anchor"] == pin and a["offsets_us"]["1"] == pytest.approx(float(e0[pin] - e1[pin]), abs=0.5)
    left = [abs((e0[n] - e1[n]) - (e0[pin] - e1[pin])) for n in e0 if n != pin]
    assert a["residual_us"]["1"] == {"median": pytest.approx(float(statistics.median(left)), abs=1e-3),
                                     "max": pytest.approx(float(max(left)), abs=1e-3)}
    assert alignment_note(a).startswith(f"Ranks aligned on {pin}, pinned, among 4 shared collectives; "
                                        "residual misalignment over the other collectives median ")
    # a repeated op is pinned run by run: the pair (name, run)
    assert shared_collectives({"0": pt2["0"], "1": pt2["1"]})[2] == (pin, 0)
    assert rank_offsets({"0": pt2["0"], "1": pt2["1"]}, "communication", (pin, 0)) == a["offsets_us"]
    with pytest.raises(ValueError, match="not a collective ranks 0 and 1 both ran"):
        stacked_timeline(pt2, align="communication", anchor="hcom_allReduce__868_9_1")
    with pytest.raises(ValueError, match="use align='communication'"):
        stacked_timeline(pt2, anchor=pin)


def test_a_known_clock_shift_is_recovered_within_the_reported_residual(pt2, pt2_shifted):
    """Rank 1's copy has every time moved 54321.125 us later (its clock wrong by that much): on the clocks
    its collectives end that much later; aligned on communication they meet the reference's again."""
    assert pt2_shifted["1"].origin_us - pt2["1"].origin_us == pytest.approx(float(SHIFT), abs=0.25)
    profiles = {"0": pt2_shifted["0"], "1": pt2_shifted["1"]}
    a = rank_alignment(profiles, align="communication")
    before = rank_alignment({"0": pt2["0"], "1": pt2["1"]}, align="communication")
    recovered = before.offsets_us["1"] - a.offsets_us["1"]
    assert abs(recovered - float(SHIFT)) <= a.max_us and recovered == pytest.approx(float(SHIFT), abs=0.5)
    assert a.residual_us["1"]["max"] == pytest.approx(before.residual_us["1"]["max"], abs=1e-3)
    frames = stacked_timeline(pt2_shifted, align="communication")
    for name in _hcom_ends(DATA / PT2, "0"):
        ends = _stacked_ends(frames, name)
        assert abs(ends["1"] - ends["0"]) <= a.max_us + 1e-6
    on_clock = _stacked_ends(stacked_timeline(pt2_shifted), "hcom_allReduce__868_1_1")
    assert on_clock["1"] - on_clock["0"] > float(SHIFT) - 10


def test_repeated_collectives_are_matched_run_by_run(data_dir):
    """msprof's CANN layout names every all-reduce Default/AllReduce-op534_0 (one per iteration, on the
    HCCL Communication Kernel thread): the k-th of one device meets the k-th of the other. Read from the
    hccl_*.json files, the ten differences leave a residual of tens of µs (median 31.25, max 118.0)."""
    root = data_dir / "npu/cann_prof_2dev"
    ends = {}
    for dev in ("0", "1"):
        events = [e for f in root.glob(f"PROF_*/device_{dev}/timeline/hccl_*.json") for e in json.loads(f.read_text())
                  if e.get("tid") == 70000 and e.get("ph") == "X"]
        assert {e["name"] for e in events} == {"Default/AllReduce-op534_0"}
        ends[dev] = [e["ts"] + e["dur"] for e in sorted(events, key=lambda e: e["ts"])]
    diffs = [r - o for r, o in zip(ends["1"], ends["0"])]
    offset = statistics.median(diffs)
    left = [abs(d - offset) for d in diffs]
    cluster = load_quietly("npu/cann_prof_2dev")
    a = rank_alignment({"0": cluster["0"], "1": cluster["1"]}, align="communication")
    assert a.reference == "1" and a.collectives == {"0": 10, "1": 10}
    assert a.offsets_us["0"] == pytest.approx(offset, abs=1e-3)
    assert a.residual_us["0"]["median"] == pytest.approx(statistics.median(left), abs=1e-3)
    assert a.residual_us["0"]["max"] == pytest.approx(max(left), abs=1e-3)
    assert (a.median_us, a.max_us) == (pytest.approx(31.25, abs=1e-3), pytest.approx(118.045, abs=1e-3))


def test_ranks_sharing_no_collective_stay_on_their_clocks_and_the_view_says_why(pt2_apart):
    from nbprofiler.views.cluster import ClusterView
    a = rank_alignment({"0": pt2_apart["0"], "1": pt2_apart["1"]}, align="communication")
    assert a.offsets_us == {"0": 0.0, "1": 0.0} and a.collectives["1"] == 0
    view = ClusterView(pt2_apart, align="communication")
    fold = next(c for c in view.widget.children if getattr(c, "titles", None)
                and c.get_title(0).startswith("Timeline of ranks"))
    fold.selected_index = 0
    (align, anchor), note = fold.children[0].children[0].children, fold.children[0].children[1]
    assert align.value == "communication" and anchor.options == (("every shared collective (median)", ""),)
    assert ("Ranks not aligned: rank 1 ran none of the collectives rank 0 ran; they stay on the hosts&#x27; "
            "clocks.") in note.value
    assert "rank 1 +0.00 µs" in note.value


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
    view = ClusterView(pt2, align="communication", anchor=("hcom_allReduce__868_0_1", 0))
    fold = next(c for c in view.widget.children if getattr(c, "titles", None)
                and c.get_title(0).startswith("Timeline of ranks"))
    assert fold.get_title(0) == "Timeline of ranks 0, 1 on one clock" and view.timeline is None
    fold.selected_index = 0  # opened pinned on the first collective: its ends meet
    assert view.timeline is not None and len(view.timeline.events) == 6758
    (align, anchor), offsets = fold.children[0].children[0].children, fold.children[0].children[1]
    assert align.value == "communication" and view.timeline.events.attrs["anchor"] == ("hcom_allReduce__868_0_1", 0)
    assert "rank 1 -8.74 µs" in offsets.value and "hcom_allReduce__868_0_1 (run 1), pinned" in offsets.value
    assert [label for label, _ in anchor.options][1:] == [f"hcom_allReduce__868_{i}_1 (run 1)" for i in range(4)]
    anchor.value = ""  # rebuilt on the four shared collectives: rank 1 moves 8.16 us earlier
    said = view.timeline.events.attrs["alignment"]
    assert said["anchor"] is None and "rank 1 -8.16 µs" in offsets.value
    assert f"residual misalignment median {said['median_us']:,.2f} µs, max {said['max_us']:,.2f} µs (rank 1)" \
        in offsets.value
    with pytest.raises(ValueError, match="use align='communication'"):
        ClusterView(pt2, anchor="hcom_allReduce__868_0_1")
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
    assert "Ranks on the hosts&#x27; clocks; not checked." in part.select_one({"name": "report_ranks_timeline_note"}).text
