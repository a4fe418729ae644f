"""A Cluster as a collection: tidy cross-rank frames with a ``rank`` column, SQL over them, map over ranks."""
from __future__ import annotations

from operator import attrgetter

import pandas as pd
import pytest

from nbprofiler.analysis import cluster as C

from .conftest import load_quietly


@pytest.fixture(scope="module")
def pipeline4():
    return load_quietly("legacy/cluster_4rank_pipeline")


def test_concat_stacks_every_ranks_frame_with_its_rank(pipeline4):
    st = pipeline4.concat("step_trace")
    assert list(st.columns[:2]) == ["rank", "step"]
    assert sorted(st["rank"].unique()) == ["0", "1", "2", "3"]
    for rank in pipeline4.ranks:
        part = st[st["rank"] == rank].drop(columns="rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(part, pipeline4[rank].step_trace.reset_index(drop=True), check_dtype=False)
    assert pipeline4.concat("timeline").empty and "rank" in pipeline4.concat("timeline").columns
    with pytest.raises(ValueError, match="no frame"):
        pipeline4.concat("nope")
    assert pipeline4.primary is pipeline4["0"]


def test_cluster_sql_gives_the_numbers_of_the_frames_and_of_the_cluster_analysis(pipeline4):
    """Per-rank average step by SQL over the stacked step traces equals each rank's mean; the slowest rank
    by SQL is the cluster analysis' slowest (rank 1 on this data, by the averages MindInsight shows)."""
    got = pipeline4.sql("SELECT rank, avg(total_ms) AS mean_ms, count(*) AS steps FROM step_trace "
                        "GROUP BY rank ORDER BY rank")
    for r in got.itertuples():
        st = pipeline4[r.rank].step_trace
        assert r.steps == len(st) and r.mean_ms == pytest.approx(st["total_ms"].mean())
    summary = C.rank_summary(pipeline4, engine="serial")
    steps = C.rank_steps(summary).reset_index()
    by_sql = pipeline4.sql("SELECT rank FROM r ORDER BY total_ms DESC LIMIT 1", r=steps)["rank"].iloc[0]
    assert by_sql == C.slowest_rank(summary) == "1"


def test_map_runs_a_function_per_rank_serially_or_on_workers(pipeline4):
    serial = pipeline4.map(lambda p: len(p.step_trace))
    assert serial == {r: len(pipeline4[r].step_trace) for r in pipeline4.ranks}
    # on workers: each builds its rank's Profile from the files (a picklable function: attrgetter)
    assert pipeline4.map(attrgetter("generation"), engine="processes") == {r: "legacy" for r in pipeline4.ranks}
