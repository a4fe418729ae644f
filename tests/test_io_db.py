"""The database export (SQLite): each frame read from a .db equals SQL written here over the same file,
agrees with the text recording of the same job where both hold the same facts, and the profiler folder
is never touched (read-only, immutable: no -journal / -wal file, every byte unchanged)."""
from __future__ import annotations

import hashlib
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest

from nbprofiler.io import db
from nbprofiler.schema import FRAMES

from .conftest import DATA, load_quietly

PT_DB = DATA / "npu/ascend_pt_db_2rank"
PT_TEXT = DATA / "npu/ascend_pt_text_2rank"
MSPROF = DATA / "npu/msprof_db"


def _sql(path, query):
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _pt_db(rank: str):
    return PT_DB / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db"


def _snapshot(folder):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_loading_everything_leaves_the_folders_byte_identical():
    from nbprofiler.model.profile import FRAME_NAMES
    for folder in (PT_DB, MSPROF):
        before = _snapshot(folder)
        obj = load_quietly(folder)
        for prof in (list(obj) if hasattr(obj, "ranks") else [obj]):
            for name in FRAME_NAMES:
                getattr(prof, name)
            prof.summary()
        after = _snapshot(folder)
        assert after == before
        assert not [p for p in folder.rglob("*") if p.name.endswith(("-journal", "-wal", "-shm"))]


KERNEL_TYPES_SQL = """
    SELECT type, name, count(*), sum(dur) FROM (
        SELECT (SELECT value FROM STRING_IDS WHERE id = c.opType) AS type,
               (SELECT value FROM STRING_IDS WHERE id = c.name) AS name, t.endNs - t.startNs AS dur
        FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
        UNION ALL
        SELECT (SELECT value FROM STRING_IDS WHERE id = o.opType), (SELECT value FROM STRING_IDS WHERE id = o.opName),
               o.endNs - o.startNs FROM COMMUNICATION_OP o)
    GROUP BY type, name"""


def _kernel_types(path) -> dict:
    """type -> (count, total ns) by SQL; a kernel the database types N/A (torch_npu at level 0) is of the
    type its name says (`kernel_type_of`: aclnnMuls_MulAiCore_Mul -> Mul)."""
    from nbprofiler.io.trace import kernel_type_of
    out: dict = {}
    for t, name, n, ns in _sql(path, KERNEL_TYPES_SQL):
        t = kernel_type_of(name) if t in (None, "", "N/A", "NULL") else t
        c, s = out.get(t, (0, 0))
        out[t] = (c + n, s + ns)
    return out


@pytest.mark.parametrize("folder,path", [(PT_DB / "rank0_ascend_pt", _pt_db("0")),
                                         (PT_DB / "rank1_ascend_pt", _pt_db("1")),
                                         (MSPROF, MSPROF / "msprof_0.db")])
def test_kernels_per_type_equal_sql_over_the_same_file(folder, path):
    prof = load_quietly(folder)
    expected = {t: (n, ns / 1000.0) for t, (n, ns) in _kernel_types(path).items()}
    assert "N/A" not in expected
    kernels = prof.kernels
    got = kernels.groupby("type")["dur_us"].agg(["size", "sum"])
    assert {t: int(r["size"]) for t, r in got.iterrows()} == {t: n for t, (n, _) in expected.items()}
    assert {t: r["sum"] for t, r in got.iterrows()} == pytest.approx({t: us for t, (_, us) in expected.items()})
    # the op-type table, communication kind included (HCCL ops are their own kind)
    types = prof.op_types.groupby("op_type")[["count", "total_time_us"]].sum()
    for t, (n, us) in expected.items():
        assert types.loc[t, "count"] == n and types.loc[t, "total_time_us"] == pytest.approx(us)
    assert db.kernel_type_totals(path).set_index("type")["count"].to_dict() == {t: n for t, (n, _) in expected.items()}
    # accelerator cores: the task type the database names (HCCL for communication ops)
    n_comm = _sql(path, "SELECT count(*) FROM COMMUNICATION_OP")[0][0]
    assert (kernels["accelerator_core"] == "HCCL").sum() == n_comm
    kinds = prof.op_types.groupby("kind")["count"].sum().to_dict()
    assert kinds.get("communication", 0) == n_comm and kinds["npu"] == len(kernels) - n_comm
    assert not kernels["accelerator_core"].isin(["", "N/A"]).any()


def test_msprof_cores_and_shapes():
    prof = load_quietly(MSPROF)
    # msprof collects every device into one file: one run per device with tasks (here device 2 only)
    assert prof.device == "2" and prof.generation == "database"
    k = prof.kernels
    assert set(k["device_id"]) == {2}
    cores = dict(_sql(MSPROF / "msprof_0.db", "SELECT (SELECT value FROM STRING_IDS WHERE id = taskType), count(*) "
                                              "FROM COMPUTE_TASK_INFO GROUP BY 1"))
    assert k["accelerator_core"].value_counts().to_dict() == cores
    row = k[k["name"] == "aclnnInplaceOne_OnesLikeAiCore_OnesLike"].iloc[0]
    assert row["input_shapes"] == "1,2048,2048" and row["block_dim"] == 48


def test_pt_db_matches_the_text_recording_of_the_same_job():
    dbc, txt = load_quietly(PT_DB), load_quietly(PT_TEXT)
    assert dbc.ranks == txt.ranks == ["0", "1"]
    assert dbc.generation == "database" and txt.generation == "mindspore2"
    for rank in dbc.ranks:
        d, t = dbc[rank], txt[rank]
        assert d.info["rank_id"] == rank and d.info["db_meta"]["SCHEMA_VERSION"] == "1.0.0"
        # op types and kernel counts: the same job, the same kernels
        assert set(d.op_types["op_type"]) == set(t.op_types["op_type"])
        assert d.op_types["count"].sum() == t.op_types["count"].sum() == len(t.kernels)
        named = lambda k: sorted(k["name"].str.replace(r"^hcom_(\w+?)__\d+_", r"hcom_\1__", regex=True))  # noqa: E731
        assert named(d.kernels) == named(t.kernels)  # the same kernels (hcom ops renumbered per recording)
        # steps: the same step ids, the same stage columns, similar (not identical) numbers
        assert d.step_trace["step"].tolist() == t.step_trace["step"].tolist() == [50]
        common = [c for c in t.step_trace.columns if c in d.step_trace.columns]
        assert set(common) >= {"computing_ms", "communication_not_overlapped_ms", "free_ms", "preparing_ms", "total_ms"}
        # two recordings of step 50: rank 0 137.3 vs 135.6 ms, rank 1 143.6 vs 119.5 ms
        assert d.step_trace["total_ms"].iloc[0] == pytest.approx(t.step_trace["total_ms"].iloc[0], rel=0.25)
        # memory components
        assert set(d.memory["component"]) == set(t.memory["component"]) == {"APP", "GE", "PTA", "PTA+GE"}
        assert d.memory["reserved_mb"].max() == pytest.approx(t.memory["reserved_mb"].max(), rel=0.1)
        assert len(d.operator_memory) == pytest.approx(len(t.operator_memory), abs=5)
        # communication ops (the database has no transit/wait split)
        assert len(d.communication) == 4 and set(d.communication["group"]) != {""}


def test_step_memory_communication_equal_sql():
    path, analysis = _pt_db("0"), PT_DB / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/analysis.db"
    prof = load_quietly(PT_DB / "rank0_ascend_pt")
    ((step, computing, free, preparing),) = _sql(analysis, "SELECT step, computing, free, preparing FROM StepTraceTime")
    st = prof.step_trace.iloc[0]
    assert (st["step"], st["computing_ms"], st["free_ms"], st["preparing_ms"]) == \
        pytest.approx((int(step), computing / 1e3, free / 1e3, preparing / 1e3))
    mem = prof.memory
    (n_rec, max_alloc), = _sql(path, "SELECT count(*), max(totalAllocated) FROM MEMORY_RECORD")
    (n_app,), = _sql(path, "SELECT count(*) FROM NPU_MEM n JOIN STRING_IDS s ON s.id = n.type WHERE s.value = 'app'")
    assert len(mem) == n_rec + n_app and mem["allocated_mb"].max() == pytest.approx(max_alloc / 2**20)
    assert (mem["component"] == "APP").sum() == n_app
    comm = prof.communication.sort_values("start_us")
    rows = _sql(path, "SELECT (SELECT value FROM STRING_IDS WHERE id = opName), (endNs - startNs) / 1e6 "
                      "FROM COMMUNICATION_OP ORDER BY startNs")
    assert list(zip(comm["op_name"], comm["elapse_ms"])) == [(n, pytest.approx(ms)) for n, ms in rows]
    assert set(comm["step"]) == {50} and set(comm["rank"]) == {"0"}
    om = prof.operator_memory
    (n_op, total_kb), = _sql(path, "SELECT count(*), sum(size) / 1024.0 FROM OP_MEMORY")
    assert len(om) == n_op and om["size_kb"].sum() == pytest.approx(total_kb)


def test_timeline_from_the_database():
    path = _pt_db("1")
    prof = load_quietly(PT_DB / "rank1_ascend_pt")
    tl, tracks = prof.timeline, prof.timeline_tracks
    by_process = tl.merge(tracks[["track", "process"]], on="track").groupby("process").size().to_dict()
    for table, process in (("TASK", "Ascend Hardware"), ("CANN_API", "CANN"), ("PYTORCH_API", "PyTorch API"),
                           ("COMMUNICATION_OP", "Communication")):
        assert by_process[process] == _sql(path, f"SELECT count(*) FROM {table}")[0][0]
    (first_ns,), = _sql(path, "SELECT min(startNs) FROM TASK")
    hw = tl[tl["track"].isin(tracks.loc[tracks["process"] == "Ascend Hardware", "track"])]
    assert prof.origin_us + hw["start_us"].min() == pytest.approx(first_ns / 1000.0)
    # the origin is a float64 of epoch us (0.25 us apart at this magnitude)
    assert tl["start_us"].min() == pytest.approx(0.0, abs=0.25) and np.all(tl["dur_us"] >= 0)
    assert prof.summary()["timeline"]["events"] == len(tl)
    text = load_quietly(PT_TEXT / "rank1_ascend_pt").timeline
    assert list(tl.columns) == list(text.columns) and not tl["is_scope"].any()  # the text export's columns


def test_a_damaged_database_is_a_typed_problem(tmp_path):
    dest = tmp_path / "rank0_ascend_pt"
    shutil.copytree(PT_DB / "rank0_ascend_pt", dest)
    target = dest / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 3])
    prof = load_quietly(dest)
    assert prof.kernels.empty
    assert any(p.file == str(target.resolve()) or p.file == str(target) for p in prof.problems)
    target.write_bytes(b"not a database at all" * 100)
    prof = load_quietly(dest)
    assert prof.kernels.empty and any("SQLite" in p.error for p in prof.problems)


def test_msprof_database_of_two_devices_gives_one_run_each(tmp_path):
    """A copy of the real msprof database whose tasks are duplicated onto a second device (3)."""
    dest = tmp_path / "msprof_db"
    dest.mkdir()
    shutil.copy(MSPROF / "msprof_0.db", dest)
    con = sqlite3.connect(dest / "msprof_0.db")
    with con:
        shift = con.execute("SELECT max(globalTaskId) + 1 FROM TASK").fetchone()[0]
        cols = [r[1] for r in con.execute("PRAGMA table_info(COMPUTE_TASK_INFO)")]
        con.execute(f"INSERT INTO COMPUTE_TASK_INFO SELECT {', '.join('globalTaskId + ?' if c == 'globalTaskId' else c for c in cols)} "
                    "FROM COMPUTE_TASK_INFO", (shift,))
        tcols = [r[1] for r in con.execute("PRAGMA table_info(TASK)")]
        con.execute(f"INSERT INTO TASK SELECT {', '.join('globalTaskId + ?' if c == 'globalTaskId' else '3' if c == 'deviceId' else c for c in tcols)} "
                    "FROM TASK", (shift,))
    con.close()
    cluster = load_quietly(dest)
    assert cluster.ranks == ["2", "3"]
    a, b = cluster["2"].kernels, cluster["3"].kernels
    assert len(a) == len(b) == 11 and set(a["device_id"]) == {2} and set(b["device_id"]) == {3}
    hw = lambda p: p.timeline_tracks.loc[p.timeline_tracks["process"] == "Ascend Hardware", "events"].sum()  # noqa: E731
    assert hw(cluster["2"]) == hw(cluster["3"]) == _sql(MSPROF / "msprof_0.db", "SELECT count(*) FROM TASK")[0][0]


def test_launch_flows_from_the_database():
    path = _pt_db("0")
    prof = load_quietly(PT_DB / "rank0_ascend_pt")
    flows, tracks = prof.timeline_flows, prof.timeline_tracks
    assert set(flows["cat"]) == {"HostToDevice", "async_npu", "async_task_queue", "fwdbwd"}
    framework, flows = flows[flows["cat"] == "async_npu"], flows[flows["cat"] == "HostToDevice"]
    ((n,),) = _sql(path, "SELECT count(DISTINCT t.connectionId) FROM TASK t WHERE t.connectionId IN "
                         "(SELECT a.connectionId FROM CANN_API a JOIN ENUM_API_TYPE e ON e.id = a.type "
                         "WHERE e.name = 'node')")
    assert len(flows) == n > 0
    process = tracks.set_index("track")["process"]
    assert set(flows["start_track"].map(process)) == {"CANN"}
    assert set(flows["end_track"].map(process)) == {"Ascend Hardware"}
    # the framework ops' launches: PYTORCH_API.connectionId is an id of CONNECTION_IDS, whose connectionIds
    # are the tasks'
    ((m,),) = _sql(path, "SELECT count(DISTINCT t.connectionId) FROM TASK t JOIN CONNECTION_IDS c "
                         "ON c.connectionId = t.connectionId JOIN PYTORCH_API p ON p.connectionId = c.id")
    assert len(framework) == m > 0 and set(framework["name"]) == {"torch_to_npu"}
    assert set(framework["start_track"].map(process)) == {"PyTorch API"}
    assert set(framework["end_track"].map(process)) == {"Ascend Hardware"}
    assert (framework["end_us"] >= framework["start_us"]).all()   # queued on the host before the launch
    # a kernel runs after its launch call starts, up to the host/device clock skew of the recording
    # (32 of 191 device tasks start 4-21 us before the host's launch call in this file)
    assert (flows["end_us"] >= flows["start_us"] - 25).all()
    assert (flows["end_us"] >= flows["start_us"]).mean() > 0.8


def test_framework_flows_from_the_database():
    """Framework calls whose CONNECTION_IDS sets share a connection id are joined by an arrow, as
    trace_view.json draws them: an Enqueue to its Dequeue on the queue's thread (``async_task_queue``), a
    forward op to its backward op (``fwdbwd``)."""
    path = _pt_db("0")
    prof = load_quietly(PT_DB / "rank0_ascend_pt")
    flows, tracks = prof.timeline_flows, prof.timeline_tracks
    pairs = _sql(path, "SELECT DISTINCT se.value, e.rowid, d.rowid FROM PYTORCH_API e JOIN CONNECTION_IDS ce ON ce.id = "
                       "e.connectionId JOIN CONNECTION_IDS cd ON cd.connectionId = ce.connectionId JOIN PYTORCH_API d "
                       "ON d.connectionId = cd.id JOIN STRING_IDS se ON se.id = e.name JOIN STRING_IDS sd ON "
                       "sd.id = d.name WHERE e.globalTid <> d.globalTid AND CAST(e.startNs AS INTEGER) < "
                       "CAST(d.startNs AS INTEGER)")
    queue, fwdbwd = flows[flows["cat"] == "async_task_queue"], flows[flows["cat"] == "fwdbwd"]
    assert len(queue) == sum(a == "Enqueue" for a, _, _ in pairs) > 0
    assert len(fwdbwd) == sum(a != "Enqueue" for a, _, _ in pairs) > 0
    assert set(queue["name"]) == {"Enqueue"}
    thread = tracks.set_index("track")["thread"]
    assert (queue["start_track"].map(thread) != queue["end_track"].map(thread)).all()
    assert (flows["end_us"] > flows["start_us"])[flows["cat"] != "HostToDevice"].all()


@pytest.mark.parametrize("folder", [PT_DB / "rank1_ascend_pt", MSPROF])
def test_op_types_aggregated_in_sql_equal_the_kernels_grouped(folder):
    from nbprofiler.io.ops import npu_types_from_kernels
    prof = load_quietly(folder)
    from_sql = prof.op_types  # built first: aggregated inside the database, kernels never loaded
    assert "kernels" not in prof._cache
    from_kernels = FRAMES["op_types"].conform(npu_types_from_kernels(prof.kernels))
    key = ["kind", "op_type"]
    a = from_sql.sort_values(key).reset_index(drop=True)
    b = from_kernels.sort_values(key).reset_index(drop=True)
    assert a[key + ["count", "accelerator_core"]].equals(b[key + ["count", "accelerator_core"]])
    assert a["total_time_us"].tolist() == pytest.approx(b["total_time_us"].tolist())


def test_analysis_db_communication_tables_give_the_json_frames(tmp_path):
    """analysis.db's CommAnalyzerTime / CommAnalyzerBandwidth / CommAnalyzerMatrix (msprof-analyze's
    column names) filled with rank 0's real records from the 16-rank cluster JSON files: the frames read
    from the tables equal those read from the JSON."""
    c16 = DATA / "npu/cluster_analysis_16rank"
    ref = load_quietly(c16, device="0")
    comm, links, matrix = ref.communication, ref.communication_links, ref.communication_matrix
    assert len(comm) and len(links) and len(matrix)
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(_pt_db("0"), out)
    con = sqlite3.connect(out / "analysis.db")
    with con:
        con.execute("CREATE TABLE CommAnalyzerTime (hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, "
                    "elapse_time NUMERIC, transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, "
                    "idle_time NUMERIC, synchronization_time_ratio NUMERIC, wait_time_ratio NUMERIC, step TEXT, type TEXT)")
        con.executemany("INSERT INTO CommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        [(r.op_name, r.group, r.start_us, r.elapse_ms, r.transit_ms, r.wait_ms, r.sync_ms, r.idle_ms,
                          r.sync_ratio, r.wait_ratio, f"step{r.step}", "collective") for r in comm.itertuples()])
        con.execute("CREATE TABLE CommAnalyzerBandwidth (hccl_op_name TEXT, group_name TEXT, band_type TEXT, "
                    "transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, "
                    "package_size NUMERIC, count NUMERIC, total_duration NUMERIC, step TEXT, type TEXT)")
        con.executemany("INSERT INTO CommAnalyzerBandwidth VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        [(r.op_name, r.group, r.transport, r.size_mb, r.transit_ms, r.bandwidth_gbps,
                          r.large_packet_ratio, None, r.packets, None, f"step{r.step}", "collective")
                         for r in links.itertuples()])
        con.execute("CREATE TABLE CommAnalyzerMatrix (hccl_op_name TEXT, group_name TEXT, src_rank INTEGER, "
                    "dst_rank INTEGER, transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, "
                    "bandwidth NUMERIC, step TEXT, type TEXT, op_name TEXT)")
        con.executemany("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        [(r.op_name.split("@")[0] + "-top1", r.group, int(r.src), int(r.dst), r.transport, r.size_mb,
                          r.transit_ms, r.bandwidth_gbps, f"step{r.step}", "collective", r.op_name) for r in matrix.itertuples()])
    con.close()
    prof = load_quietly(out.parent)
    got = prof.communication
    cols = ["step", "group", "op_name", "rank", "start_us", "elapse_ms", "transit_ms", "wait_ms", "idle_ms"]
    assert got[cols].reset_index(drop=True).equals(comm[cols].reset_index(drop=True))
    lk = ["step", "group", "op_name", "transport"]
    a = prof.communication_links.sort_values(lk).reset_index(drop=True)
    b = links.sort_values(lk).reset_index(drop=True)
    assert a[lk + ["packets"]].equals(b[lk + ["packets"]])
    assert a["bandwidth_gbps"].tolist() == pytest.approx(b["bandwidth_gbps"].tolist())
    mk = ["step", "group", "op_name", "src", "dst", "transport"]
    m = prof.communication_matrix.sort_values(mk).reset_index(drop=True)
    assert m[mk].equals(matrix.sort_values(mk).reset_index(drop=True)[mk])
    assert set(prof.files.set_index("role").loc["analysis_db", "feeds"].split(", ")) >= {"communication_matrix"}


def test_cluster_analysis_db_gives_the_cluster_files_frames(tmp_path):
    """msprof-analyze's db-mode output (cluster_analysis.db; its documented table and column names) filled
    with the 16-rank cluster's real records: ranks, step traces, communication, links and groups equal
    those read from the text files."""
    import csv as csv_mod
    import json as json_mod
    c16 = DATA / "npu/cluster_analysis_16rank"
    text = load_quietly(c16)
    con = sqlite3.connect(tmp_path / "cluster_analysis.db")
    with con:
        with open(c16 / "cluster_step_trace_time.csv", newline="") as f:
            rows = list(csv_mod.DictReader(f))
        cols = {"Step": "step", "Type": "type", "Index": "index", "Computing": "computing",
                "Communication(Not Overlapped)": "communication_not_overlapped", "Overlapped": "overlapped",
                "Communication": "communication", "Free": "free", "Stage": "stage", "Bubble": "bubble",
                "Communication(Not Overlapped and Exclude Receive)": "communication_not_overlapped_and_exclude_receive",
                "Preparing": "preparing"}
        present = [c for c in cols if c in rows[0]]
        con.execute(f"CREATE TABLE ClusterStepTraceTime ({', '.join(repr(cols[c]) for c in present)})")
        con.executemany(f"INSERT INTO ClusterStepTraceTime VALUES ({','.join('?' * len(present))})",
                        [[r[c] for c in present] for r in rows])
        con.execute("CREATE TABLE ClusterCommAnalyzerTime (rank_set TEXT, step TEXT, rank_id INTEGER, hccl_op_name TEXT, "
                    "group_name TEXT, start_timestamp NUMERIC, elapsed_time NUMERIC, transit_time NUMERIC, "
                    "wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC, "
                    "synchronization_time_ratio NUMERIC, wait_time_ratio NUMERIC)")
        con.execute("CREATE TABLE ClusterCommAnalyzerMatrix (rank_set TEXT, step TEXT, hccl_op_name TEXT, group_name TEXT, "
                    "src_rank TEXT, dst_rank TEXT, transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, "
                    "transport_type TEXT, op_name TEXT)")
        for prof in text:
            con.executemany("INSERT INTO ClusterCommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            [("", f"step{r.step}", int(r.rank), r.op_name, r.group, r.start_us, r.elapse_ms,
                              r.transit_ms, r.wait_ms, r.sync_ms, r.idle_ms, r.sync_ratio, r.wait_ratio)
                             for r in prof.communication.itertuples()])
            con.executemany("INSERT INTO ClusterCommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                            [(r.group, f"step{r.step}", r.op_name, r.group, r.src, r.dst, r.size_mb, r.transit_ms,
                              r.bandwidth_gbps, r.transport, r.op_name) for r in prof.communication_matrix.itertuples()])
        groups = json_mod.loads((c16 / "communication_group.json").read_text())
        con.execute("CREATE TABLE CommunicationGroup (type TEXT, rank_set TEXT, group_name TEXT, group_id TEXT, pg_name TEXT)")
        con.executemany("INSERT INTO CommunicationGroup VALUES (?,?,?,?,?)",
                        [(kind, str(tuple(g)), "", "", "") for kind, gs in groups.items() for g in gs])
    con.close()
    cluster = load_quietly(tmp_path)
    assert cluster.ranks == text.ranks and cluster.generation == "cluster_analysis"
    for rank in ("0", "1", "8"):
        d, t = cluster[rank], text[rank]
        assert d.step_trace["step"].tolist() == t.step_trace["step"].tolist()
        assert d.step_trace["total_ms"].tolist() == pytest.approx(t.step_trace["total_ms"].tolist())
        key = ["step", "group", "op_name", "rank", "start_us", "elapse_ms", "wait_ms"]
        assert len(d.communication) == len(t.communication)
        pd.testing.assert_frame_equal(d.communication[key].reset_index(drop=True),
                                      t.communication[key].reset_index(drop=True), check_dtype=False)
        mk = ["step", "op_name", "src", "dst", "transport", "size_mb"]
        pd.testing.assert_frame_equal(d.communication_matrix[mk].reset_index(drop=True),
                                      t.communication_matrix[mk].reset_index(drop=True), check_dtype=False)
    assert cluster["0"].communication_groups[["kind", "ranks", "size"]].equals(
        text["0"].communication_groups[["kind", "ranks", "size"]])


def test_npu_module_mem_equals_sql():
    path = _pt_db("1")
    mem = load_quietly(PT_DB / "rank1_ascend_pt").npu_module_mem
    rows = _sql(path, "SELECT e.name, count(*), max(m.totalReserved) FROM NPU_MODULE_MEM m "
                      "JOIN ENUM_MODULE e ON e.id = m.moduleId GROUP BY e.name")
    got = mem.groupby("component")["reserved_mb"].agg(["size", "max"])
    assert {n: int(got.loc[n, "size"]) for n, _, _ in rows} == {n: c for n, c, _ in rows}
    assert [got.loc[n, "max"] for n, _, _ in rows] == pytest.approx([b / 2**20 for _, _, b in rows])


@pytest.mark.slow
def test_database_benchmark_quick_mode(tmp_path):
    """benchmarks/bench_db_load.py --quick on a 10 MB generated database: every method reports its time,
    CPU time, peak RSS and load average, and every frame nbprofiler builds has as many rows as the floor
    read for it from the same tables."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("bench_db_load", root / "benchmarks" / "bench_db_load.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from benchmarks.db_export import SOURCE
    if not SOURCE.exists():
        pytest.skip("the real torch_npu database the generator takes its schema from is not here")
    (row,) = bench.main(["--quick", "--sizes", "10", "--scratch", str(tmp_path)])
    assert row["table_rows"]["TASK"] >= 10_000 and row["table_rows"]["STRING_IDS"] > 3_000
    for method in bench.METHODS:
        m = row[method]
        assert m["s"] > 0 and m["cpu_s"] > 0 and m["peak_rss_mb"] > m["base_rss_mb"] > 0 and "load_1min" in m
        assert "refused" not in m
    for method in ("nbprofiler", "timeline", "dashboard"):
        assert row[method]["x_floor"] > 0 and row[method]["x_floor_cpu"] > 0
    assert set(row["rows"]) == set(bench.FRAMES)
    for frame, counts in row["rows"].items():
        assert counts["nbprofiler"] == counts["floor"] > 0, frame
    assert row["rows"]["timeline"]["floor"] == sum(row["table_rows"][t] for t in ("TASK", "COMMUNICATION_OP",
                                                                                   "CANN_API", "PYTORCH_API"))
    assert "| database |" in bench.markdown([row])


@pytest.mark.parametrize("block", [3, 65536])
def test_rows_are_read_as_pandas_read_sql_query_reads_them(tmp_path, monkeypatch, block):
    """`db.read_rows` (blocks of typed columns) gives the frame pandas.read_sql_query gives, column kinds
    mixed within and across blocks included: integers, NULLs, floats, texts, blobs, integers past int64."""
    monkeypatch.setattr(db, "FETCH_ROWS", block)
    rng = np.random.default_rng(0)
    kinds = {"ints": [1, 2 ** 62, -5], "ints_null": [1, None, 7], "num": [1, 2.5, None, 2 ** 53 + 1],
             "text": ["a", None, "bb"], "nulls": [None], "mixed": [1, 2.5, "x", "12", b"ab", None, 2 ** 63 - 1],
             "late_text": [1, 2], "floats": [0.5, 1.25]}
    con = sqlite3.connect(tmp_path / "t.db")
    con.execute(f"CREATE TABLE t ({', '.join(kinds)})")
    rows = [[v[rng.integers(len(v))] for v in kinds.values()] for _ in range(20)]
    rows[-1][list(kinds).index("late_text")] = "text in the last block"
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(kinds))})", rows)
    for sql in ["SELECT * FROM t", "SELECT * FROM t WHERE 0", "SELECT ints, ints AS ints FROM t",
                "SELECT ints_null, 18446744073709551615 AS big FROM t", "SELECT text FROM t WHERE text IS NULL",
                "SELECT floats, late_text FROM t LIMIT 5"]:
        pd.testing.assert_frame_equal(db.read_rows(con.execute(sql)), pd.read_sql_query(sql, con))
    con.close()
