"""SQL over a profile's frames (`prof.sql`) gives the frames' own numbers, builds only what it reads and
has no file access."""
from __future__ import annotations

import pytest

from nbprofiler.model.sql import SQLError

from .conftest import load_quietly


@pytest.fixture()
def lenet():
    return load_quietly("mindspore2/lenet_pynative")


def test_group_by_equals_pandas(lenet):
    got = lenet.sql("SELECT op_type, count(*) AS n, sum(dur_us) AS total_us FROM timeline "
                    "WHERE ph = 'X' GROUP BY 1 ORDER BY total_us DESC")
    tl = lenet.timeline
    want = tl[tl["ph"] == "X"].groupby("op_type")["dur_us"].agg(["count", "sum"]).sort_values("sum", ascending=False)
    assert got["op_type"].tolist() == want.index.tolist()
    assert got["n"].tolist() == want["count"].tolist()
    assert got["total_us"].to_numpy() == pytest.approx(want["sum"].to_numpy())
    # LeNet's CPU run: 600 Conv2D kernels in the trace, as in the op detail files
    assert got.set_index("op_type").at["Conv2D", "n"] == 600


def test_only_the_frames_a_query_names_are_built(lenet):
    before = set(lenet._cache)
    out = lenet.sql("SELECT kind, sum(total_time_us) AS t FROM op_types GROUP BY kind")
    built = set(lenet._cache) - before
    assert out["kind"].tolist() == ["cpu"]
    assert out["t"].iloc[0] == pytest.approx(lenet.op_types["total_time_us"].sum())
    assert not any("timeline" in k or "trace" in k for k in built), built


def test_extra_tables_and_case_insensitive_names(lenet):
    import pandas as pd
    wanted = pd.DataFrame({"op_type": ["Conv2D", "MatMul"]})
    out = lenet.sql("SELECT o.op_type, o.count FROM OP_TYPES o JOIN wanted USING (op_type) ORDER BY 1",
                    wanted=wanted)
    assert out["op_type"].tolist() == ["Conv2D", "MatMul"]
    ot = lenet.op_types.set_index("op_type")
    assert out["count"].tolist() == [ot.at["Conv2D", "count"], ot.at["MatMul", "count"]]


def test_errors_name_the_tables_and_files_are_out_of_reach(lenet, tmp_path):
    with pytest.raises(SQLError, match="tables: .*step_trace"):
        lenet.sql("SELECT * FROM no_such_frame")
    with pytest.raises(SQLError, match="disabled"):
        lenet.sql("SELECT * FROM read_csv('/etc/hostname')")
    target = tmp_path / "out.csv"
    with pytest.raises(SQLError):
        lenet.sql(f"COPY (SELECT * FROM op_types) TO '{target}'")
    assert not target.exists()


@pytest.mark.parametrize("statement", [
    "EXPORT DATABASE '{d}'",
    "COPY (SELECT 1) TO '{d}/x.csv'",
    "ATTACH '{d}/x.db' AS x",
    "INSTALL sqlite",
    "LOAD sqlite",
    "SET autoinstall_known_extensions = true",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')",
    "SELECT 1; EXPORT DATABASE '{d}'",
])
def test_statements_that_are_not_queries_are_refused_before_they_run(lenet, tmp_path, monkeypatch, statement):
    """Issue 37, item 10: refused by nbprofiler, not by DuckDB half-way (EXPORT used to leave the empty
    folder behind, even inside a profiler folder), and no ~/.duckdb appears."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    target = tmp_path / "profiler_out" / "export"
    with pytest.raises(SQLError, match="queries only"):
        lenet.sql(statement.format(d=target))
    assert not target.exists() and not target.parent.exists()
    assert list((tmp_path / "home").iterdir()) == []


def test_no_extension_is_installed_or_loaded_behind_a_query(lenet, tmp_path, monkeypatch):
    """A query naming an extension's function fails at once: DuckDB does not try to download the extension
    (no ~/.duckdb/extensions created, so nothing was fetched) and cannot be told to."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for query in ("SELECT * FROM sqlite_scan('x.db', 't')", "SELECT * FROM read_parquet('https://example.invalid/x')",
                  "SELECT * FROM duckdb_extensions()"):
        with pytest.raises(SQLError):
            lenet.sql(query)
    settings = lenet.sql("SELECT current_setting('autoinstall_known_extensions') AS install, "
                         "current_setting('autoload_known_extensions') AS autoload, "
                         "current_setting('enable_external_access') AS files")
    assert settings.iloc[0].tolist() == [False, False, False]
    assert list(home.iterdir()) == []
    # queries still run: WITH and EXPLAIN are queries
    assert lenet.sql("WITH k AS (SELECT DISTINCT kind FROM op_types) SELECT * FROM k")["kind"].tolist() == ["cpu"]
    assert not lenet.sql("EXPLAIN SELECT count(*) FROM op_types").empty
