"""A torch_npu-shaped database export (``ascend_pytorch_profiler_0.db``) of a requested size, for the
database benchmarks: the schema is the real export's (``sqlite_master`` of the ``ascend_pt_db_2rank``
rank-0 file, every table and index in its order), its enum and metadata tables are copied, and the tables
nbprofiler reads are filled with generated rows in the proportions a training run writes them.

    python benchmarks/db_export.py OUT_FOLDER --mb 1000

Per device task (TASK): COMPUTE_TASK_INFO for the compute streams' tasks (~88 %), COMMUNICATION_TASK_INFO
for the communication stream's (~4 %, grouped 8 to a COMMUNICATION_OP), 1.3 CANN_API calls (the real
file's ratio: one launch per task and some synchronous calls), 3 PYTORCH_API calls (the real file has 4.5,
one step of a small CNN where the first step's host-only calls weigh more than in a long run), 1.8
MEMORY_RECORD and 0.33 OP_MEMORY rows, one CONNECTION_IDS row; a STEP_TIME window per 4,000 tasks,
NPU_MEM / NPU_MODULE_MEM samples every 20 ms. STRING_IDS holds a few thousand names (3,000 kernel names
of 200 op types, 1,500 shapes, 600 framework op names) and the communication ops' own names (one per op,
as HCCL names them), in the real file's id ranges (device strings from 0, ``Enqueue``/``Dequeue`` from
2^28, framework names from 2^29). Times are ns since the epoch, from the real file's session start.
Tables nbprofiler does not read (HBM, LLC, ACC_PMU, NPU_OP_MEM, PYTORCH_CALLCHAINS ...) stay empty.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np

SOURCE = (Path(__file__).resolve().parents[1].parent / "shared/data/npu/ascend_pt_db_2rank/rank0_ascend_pt/"
          "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")
COPIED = ("SESSION_TIME_INFO", "HOST_INFO", "NPU_INFO", "META_DATA", "RANK_DEVICE_MAP", "ENUM_HCCL_RDMA_TYPE",
          "ENUM_MSTX_EVENT_TYPE", "ENUM_HCCL_LINK_TYPE", "ENUM_HCCL_TRANSPORT_TYPE", "ENUM_HCCL_DATA_TYPE",
          "ENUM_MODULE", "ENUM_API_TYPE")
CHUNK_TASKS = 100_000
TASKS_PER_STEP = 4_000
COMM_TASKS_PER_OP = 8
SAMPLE_NS = 20_000_000
PT_BASE, FW_BASE = 1 << 28, 1 << 29
NONE32 = 4294967295  # how the writer says "none" in an integer column

# streams: (id, share of the tasks, task types); stream 4 carries the communication tasks
STREAMS = [(2, 0.70, ["KERNEL_AIVEC", "KERNEL_AICORE", "MIX_AIV"]), (5, 0.18, ["KERNEL_AICORE", "AI_CPU"]),
           (3, 0.08, ["MEMCPY_ASYNC", "EVENT_RECORD", "EVENT_WAIT"]), (4, 0.04, ["Notify Wait", "SDMA", "Write Value"])]
COMPUTE_STREAMS = (2, 5)
COMM_STREAM = 4


def source_schema(source: Path = SOURCE) -> tuple[list[str], dict[str, list[tuple]]]:
    """The real export's CREATE statements in order, and the rows of its `COPIED` tables (read from a
    private copy: the shared file is never opened by SQLite)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / source.name
        shutil.copyfile(source, copy)
        con = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        ddl = [r[0] for r in con.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")]
        rows = {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in COPIED}
        con.close()
    return ddl, rows


class Strings:
    """STRING_IDS as the generator fills it: text -> id, in the real file's id ranges."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.next = {0: 0, PT_BASE: PT_BASE, FW_BASE: FW_BASE}
        self.pending: list[tuple[int, str]] = []

    def id(self, text: str, base: int = 0) -> int:
        if text not in self.ids:
            self.ids[text] = self.next[base]
            self.next[base] += 1
            self.pending.append((self.ids[text], text))
        return self.ids[text]

    def many(self, texts, base: int = 0) -> np.ndarray:
        return np.array([self.id(t, base) for t in texts], dtype=np.int64)


def _zipf_pick(rng, n_items: int, size: int, a: float = 1.1) -> np.ndarray:
    """Indices into ``n_items`` with a long tail: a few names take most rows, as kernels of a model do."""
    w = 1.0 / np.arange(1, n_items + 1) ** a
    return rng.choice(n_items, size=size, p=w / w.sum())


def write_db(path: Path, target_bytes: int, seed: int = 0) -> dict:
    """Write the database at ``path`` (replaced if there), growing it a chunk of device tasks (at most
    `CHUNK_TASKS`) at a time until it holds ``target_bytes``; returns the row count of every table written."""
    ddl, copied = source_schema()
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.unlink(missing_ok=True)
    con = sqlite3.connect(part, isolation_level=None)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-262144")
    for sql in ddl:
        con.execute(sql)
    rng = np.random.default_rng(seed)
    s = Strings()
    chunk = int(min(CHUNK_TASKS, max(5_000, target_bytes // 2_000)))  # ~560 bytes a task: a few chunks at least
    # the vocabularies: kernel names with their op types, shapes, framework ops, API names
    n_types = 200
    types = [f"{p}{k}" for k, p in zip(range(n_types), ["MatMulV"] * 10 + ["Add", "Mul", "Cast", "Transpose",
             "Softmax", "LayerNorm", "Gelu", "ReduceSum", "Conv2D", "TransData"] * 19)]
    kernel_names = [f"aclnn{types[k % n_types]}_{types[k % n_types]}{k // n_types}_{k}" for k in range(3000)]
    kernel_type = np.arange(3000) % n_types
    name_ids = s.many(kernel_names)
    type_ids = s.many(types)
    shapes = s.many([f'"{b},{h};{h},{w}"' for b, h, w in rng.integers(1, 8192, size=(1500, 3))])
    dtypes = s.many(["FLOAT16;FLOAT16", "FLOAT;FLOAT", "BF16;BF16", "INT64", "FLOAT16", "BF16"])
    formats = s.many(["ND;ND", "NCHW", "FRACTAL_NZ;ND", "ND"])
    na = s.id("N/A")
    stream_ids = np.array([st for st, _, _ in STREAMS])
    stream_p = np.array([p for _, p, _ in STREAMS])
    stream_types = {st: s.many(tt) for st, _, tt in STREAMS}
    group = s.id("90.91.105.46%enp189s0f0_60000_0_1736407029972691")
    comm_kinds = s.many(["hcom_allReduce_", "hcom_allGather_", "hcom_reduceScatter_", "hcom_broadcast_"])
    alg = s.id("MESH-RING")
    fw_ops = s.many([f"aten::{n}{k}" for k, n in enumerate(["matmul", "add", "mul", "linear", "softmax",
                                                            "layer_norm", "gelu", "copy_", "empty"] * 67)][:600],
                    FW_BASE)
    components = s.many(["GE", "PTA", "PTA+GE"], FW_BASE)
    queue_ids = np.array([s.id("Enqueue", PT_BASE)] + [s.id(f"Dequeue@{n}", PT_BASE) for n in kernel_names[:200]])
    acl_names = s.many(["aclrtMemcpyAsync", "aclrtSynchronizeStreamWithTimeout", "aclrtLaunchKernel",
                        "aclrtRecordEvent", "aclrtStreamWaitEvent", "HcclAllReduce", "HcclAllGather"])
    app, device = s.id("app"), s.id("device")
    modules = [r[0] for r in copied["ENUM_MODULE"]]
    session_start = copied["SESSION_TIME_INFO"][0][0]
    tids = np.array([13124711390031316, 13124711390027995, 13124711390030001], dtype=np.int64)
    device_id = 0

    con.execute("BEGIN")
    for table, rows in copied.items():
        if rows:
            con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
    con.execute("COMMIT")

    counts: dict[str, int] = {}

    def put(table: str, columns: list) -> None:
        n = len(columns[0])
        cols = [c.tolist() if isinstance(c, np.ndarray) else c for c in columns]
        con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(cols))})", zip(*cols))
        counts[table] = counts.get(table, 0) + n

    clock = session_start + 5_000_000  # ns: the first task comes a little after the session starts
    g0 = 0
    comm_op = 0
    step = 0
    next_sample = session_start
    mem_alloc = 1_000_000_000
    con.execute("BEGIN")
    while True:
        n = chunk
        g = np.arange(g0, g0 + n, dtype=np.int64)
        # device tasks: one start every ~8 us across the streams, durations with a long tail
        start = clock + np.cumsum(rng.exponential(8_000, n)).astype(np.int64)
        dur = np.maximum(rng.lognormal(8.5, 1.0, n), 500).astype(np.int64)
        stream = rng.choice(stream_ids, size=n, p=stream_p)
        ttype = np.empty(n, dtype=np.int64)
        for st, ids in stream_types.items():
            on = stream == st
            ttype[on] = ids[rng.integers(0, len(ids), on.sum())]
        comm = stream == COMM_STREAM
        # a communication op spans its tasks: they take its launch's connection id
        comm_idx = np.flatnonzero(comm)
        op_of = comm_op + np.arange(len(comm_idx)) // COMM_TASKS_PER_OP
        conn = g.copy()
        put("TASK", [start, start + dur, np.full(n, device_id), conn, g, np.full(n, 3055835), ttype,
                     np.full(n, NONE32), stream, (g % 65536), np.full(n, NONE32)])
        comp = np.isin(stream, COMPUTE_STREAMS)
        k = _zipf_pick(rng, 3000, int(comp.sum()))
        m = len(k)
        shape = shapes[rng.integers(0, len(shapes), m)]
        put("COMPUTE_TASK_INFO", [name_ids[k], g[comp], rng.integers(1, 48, m), np.zeros(m, np.int64),
                                  np.full(m, na), type_ids[kernel_type[k]], formats[k % len(formats)],
                                  dtypes[k % len(dtypes)], shape, formats[(k + 1) % len(formats)],
                                  dtypes[(k + 1) % len(dtypes)], shape, np.full(m, na)])
        # the communication ops: one per 8 communication tasks, named as HCCL names them (one name each)
        ops = np.unique(op_of)
        op_names = s.many([f"{['hcom_allReduce_', 'hcom_allGather_', 'hcom_reduceScatter_', 'hcom_broadcast_'][o % 4]}"
                           f"_{576 + o // 1000}_{o}_1" for o in ops])
        first = np.searchsorted(op_of, ops, side="left")
        last = np.searchsorted(op_of, ops, side="right") - 1
        ci = comm_idx
        put("COMMUNICATION_OP", [op_names, start[ci[first]], (start + dur)[ci[last]], conn[ci[first]],
                                 np.full(len(ops), group), ops, np.zeros(len(ops), np.int64),
                                 np.zeros(len(ops), np.int64), np.full(len(ops), 4), np.full(len(ops), alg),
                                 rng.integers(1 << 12, 1 << 26, len(ops)), comm_kinds[ops % 4]])
        nc = len(ci)
        put("COMMUNICATION_TASK_INFO", [op_names[op_of - ops[0]], g[ci], ttype[ci], np.full(nc, NONE32),
                                        np.full(nc, group), rng.integers(0, 1 << 16, nc), np.full(nc, 65534),
                                        np.full(nc, NONE32), np.full(nc, NONE32), np.full(nc, 65534),
                                        rng.integers(1 << 10, 1 << 24, nc), np.full(nc, 65534),
                                        np.full(nc, 65534), op_of])
        comm_op = int(op_of[-1]) + 1 if nc else comm_op
        # CANN API: the launch of each task (node / runtime) ~20 us before it, and 0.3 synchronous calls per task
        launch = start - rng.integers(15_000, 40_000, n)
        api_type = np.where(comp, 10000, 5000)
        api_name = np.full(n, acl_names[0])
        api_name[comp] = name_ids[k]
        extra = rng.random(n) < 0.3
        ne = int(extra.sum())
        put("CANN_API", [np.concatenate([launch, launch[extra] + 2_000]),
                         np.concatenate([launch + rng.integers(2_000, 9_000, n), launch[extra] + 6_000]),
                         np.concatenate([api_type, np.full(ne, 20000)]),
                         np.concatenate([tids[g % 2], tids[g[extra] % 2]]),
                         np.concatenate([conn, (1 << 40) + g[extra]]),
                         np.concatenate([api_name, acl_names[rng.integers(1, len(acl_names), ne)]])])
        # framework API: 3 per task (the aten op, its enqueue and its dequeue), times as text like torch_npu's
        p = 3 * n
        pstart = np.repeat(launch, 3) - np.tile(np.array([60_000, 45_000, 30_000]), n)
        pdur = rng.integers(3_000, 25_000, p)
        kind = np.tile(np.array([50001, 50002, 50002]), n)
        pname = np.where(kind == 50001, fw_ops[rng.integers(0, len(fw_ops), p)],
                         queue_ids[rng.integers(0, len(queue_ids), p)])
        pstr = pstart.astype(str).tolist()
        pend = (pstart + pdur).astype(str).tolist()
        seq = np.repeat(g, 3)
        put("PYTORCH_API", [pstr, pend, tids[np.tile(np.array([1, 1, 0]), n)], seq, pname,
                            np.where(kind == 50001, seq, None).tolist(), np.full(p, NONE32),
                            np.where(kind == 50001, dtypes[seq % len(dtypes)], None).tolist(),
                            np.where(kind == 50001, shapes[seq % len(shapes)], None).tolist(),
                            [None] * p, kind])
        put("CONNECTION_IDS", [g, conn])
        # memory: 1.8 records and 0.33 operator allocations per task
        r = int(1.8 * n)
        mt = np.sort(rng.choice(launch, r))
        alloc = mem_alloc + np.cumsum(rng.integers(-1 << 20, (1 << 20) + 1, r))
        put("MEMORY_RECORD", [components[rng.integers(0, 3, r)], mt, alloc, np.full(r, 4_000_000_000),
                              alloc, np.full(r, 572920208), np.full(r, device_id)])
        mem_alloc = int(alloc[-1])
        o = n // 3
        at = np.sort(rng.choice(launch, o))
        life = rng.integers(10_000, 50_000_000, o)
        size = rng.integers(512, 1 << 27, o)
        put("OP_MEMORY", [fw_ops[rng.integers(0, len(fw_ops), o)], size, at, at + life, at + life - 500, life,
                          life - 500, alloc[:o], np.full(o, 4_000_000_000), alloc[:o], alloc[:o] - size,
                          np.full(o, 4_000_000_000), alloc[:o] - size, np.full(o, 572920208), np.full(o, device_id)])
        end = int((start + dur).max())
        # the steps whose windows this chunk's tasks fill
        bounds = start[::TASKS_PER_STEP]
        ends = np.append(bounds[1:] - 1, end)
        put("STEP_TIME", [np.arange(step, step + len(bounds)), bounds, ends])
        step += len(bounds)
        # sampled device memory
        ts = np.arange(next_sample, end, SAMPLE_NS, dtype=np.int64)
        nts = len(ts)
        if nts:
            put("NPU_MEM", [np.concatenate([np.full(nts, app), np.full(nts, device)]), np.zeros(2 * nts, np.int64),
                            np.concatenate([np.full(nts, 2_212_081_664), np.full(nts, 3_000_000_000)]),
                            np.concatenate([ts, ts]), np.full(2 * nts, device_id)])
            put("NPU_MODULE_MEM", [np.tile(modules, nts), np.repeat(ts, len(modules)),
                                   rng.integers(0, 1 << 28, nts * len(modules)), np.full(nts * len(modules), device_id)])
            next_sample = int(ts[-1]) + SAMPLE_NS
        if s.pending:
            con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", s.pending)
            counts["STRING_IDS"] = counts.get("STRING_IDS", 0) + len(s.pending)
            s.pending = []
        con.execute("COMMIT")
        clock = int(start[-1])
        g0 += n
        if os.path.getsize(part) >= target_bytes:
            break
        con.execute("BEGIN")
    con.execute("UPDATE SESSION_TIME_INFO SET endTimeNs = ?", (end + 1_000_000,))
    con.close()
    part.replace(path)
    return counts


def ensure_run(scratch: Path, mb: int, seed: int = 0) -> Path:
    """``scratch/db_<mb>MB/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db`` (written
    once), the folder `nbprofiler.load` opens."""
    run = scratch / f"db_{mb}MB" / "rank0_ascend_pt"
    path = run / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    if not path.exists():
        write_db(path, mb * 1_000_000, seed)
    return run


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=int, default=100)
    args = ap.parse_args()
    import time
    t = time.perf_counter()
    rows = write_db(args.out, args.mb * 1_000_000)
    print(rows, f"{os.path.getsize(args.out) / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s")
