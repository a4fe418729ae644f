"""Seeded generator of complete, realistic Ascend-style profiles, for demos, tests and benchmarks.

`write_profile(out_dir, layout=..., bottleneck=...)` writes one device's profiler output shaped like
the real files in ``shared/data`` (formats: FORMATS.md) and returns the folder to pass to
`nbprofiler.load`. Two layouts:

- ``"legacy"`` (MindSpore 1.x-2.2 flat profiler folder): ``step_trace_raw_{id}_detail_time.csv`` in
  10 ns ticks with ``stream_*_parallel_0`` AllReduce columns and the writer's average row (mean of
  steps 2..N, ``step_num`` ``-``), ``step_trace_point_info.json``, ``aicore_intermediate_{id}_type``
  / ``_detail.csv`` (ms, percent 0..100), ``framework_raw_{id}.csv``, ``ascend_timeline_display_{id}``
  / ``_summary_{id}.json`` (us relative to the first op; reduce events on pid 10000), and the MindData
  files (``pipeline_profiling``, ``minddata_pipeline_raw``, ``minddata_cpu_utilization``,
  ``device_queue_profiling`` in sink mode).
- ``"mindspore2"`` (MindSpore 2.3+ ``<host>_<pid>_<utc>_ascend_ms`` folder):
  ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` (absolute epoch us), ``step_trace_time.csv`` (us),
  ``trace_view.json`` (``ts``/``dur`` as strings with 3 decimals, ``ProfilerStep#N``, Ascend Hardware
  streams, HCCL, Overlap Analysis, HostToDevice flows), ``minddata_pipeline_raw_{id}.csv``,
  ``profiler_info_{id}.json``, and the raw MindData files in ``FRAMEWORK/`` (iterator mode).

``bottleneck`` shapes the run the way the user guides' three cases look: ``"data"`` (long step
interval, host queue empty, a slow map op), ``"compute"`` (long forward/backward, one dominant op
type), ``"communication"`` (long step tail: AllReduce), ``"none"`` (balanced). ``op_names`` lets a
test inject hostile names (``<script>``...) to check escaping. Same seed, same bytes.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BOTTLENECKS = ("none", "data", "compute", "communication")
LAYOUTS = ("legacy", "mindspore2")

# (op type, share of forward/backward time, scope) for a small ResNet-like network.
OP_MIX = [("Conv2D", 0.22, "Default/network-WithLossCell/_backbone-ResNet/layer1-SequentialCell"),
          ("Conv2DBackpropFilter", 0.2, "Gradients/Default/network-WithLossCell/_backbone-ResNet/gradConv2D"),
          ("Conv2DBackpropInput", 0.16, "Gradients/Default/network-WithLossCell/_backbone-ResNet/gradConv2D"),
          ("MatMul", 0.12, "Default/network-WithLossCell/_backbone-ResNet/fc-Dense"),
          ("BNTrainingUpdate", 0.1, "Default/network-WithLossCell/_backbone-ResNet/bn1-BatchNorm2d"),
          ("ReLU", 0.06, "Default/network-WithLossCell/_backbone-ResNet/relu-ReLU"),
          ("TransData", 0.05, "Default"),
          ("Cast", 0.04, "Default"),
          ("ApplyMomentum", 0.05, "Default/optimizer-Momentum")]
OPS_PER_TYPE = 3
COMPUTE_STREAM = 519
REDUCE_STREAMS = (520, 522)
TICKS_PER_MS = 100_000  # step-trace syscnt: 10 ns ticks
EPOCH_US = 1_795_235_132_000_000.0  # absolute start of the 2.x run (Unix epoch us, like the real file)


@dataclass
class _Op:
    op_type: str
    name: str          # short name, e.g. Conv2D-op12
    full_name: str     # scope path + short name
    share: float       # fraction of forward/backward time per step
    task_id: int


@dataclass
class _Run:
    """The simulated run all files are written from: every file is a view of the same events."""

    steps: int
    ops: list
    interval_ms: np.ndarray      # per step
    fp_bp_ms: np.ndarray
    tail_ms: np.ndarray
    reduce_ms: np.ndarray        # (steps, streams) AllReduce durations inside the tail
    op_dur_ms: np.ndarray        # (steps, ops)
    queue_sizes: dict            # op_id -> samples of its output queue
    host_queue: np.ndarray       # per step queue size (capacity QUEUE_CAP)
    get_ms: np.ndarray           # per step time to fetch the batch


QUEUE_CAP = 16
PIPELINE = [(0, "BatchOp", 4, [1]), (1, "MapOp", 2, [2]), (2, "GeneratorOp", 1, [])]


def _simulate(steps: int, bottleneck: str, seed: int, op_names: list[str] | None) -> _Run:
    rng = np.random.default_rng(seed)
    ops, k = [], 0
    for i, (op_type, share, scope) in enumerate(OP_MIX):
        for j in range(OPS_PER_TYPE):
            name = f"{op_type}-op{10 * i + j}"
            if op_names:
                name = op_names[k % len(op_names)] + f"-op{k}"
            ops.append(_Op(op_type, name, f"{scope}/{name}", share / OPS_PER_TYPE * (1 + 0.3 * j), k + 2))
            k += 1
    shares = np.array([o.share for o in ops])
    if bottleneck == "compute":
        shares[[i for i, o in enumerate(ops) if o.op_type == "MatMul"]] *= 8  # one op type dominates
    shares /= shares.sum()

    base = {"interval": 1.0, "fp_bp": 20.0, "tail": 3.0}
    if bottleneck == "data":
        base["interval"] = 24.0
    elif bottleneck == "compute":
        base["fp_bp"] = 60.0
    elif bottleneck == "communication":
        base["tail"] = 22.0
    jitter = lambda mean, n=steps: mean * rng.uniform(0.9, 1.1, n)  # noqa: E731
    interval, fp_bp, tail = jitter(base["interval"]), jitter(base["fp_bp"]), jitter(base["tail"])
    interval[0] = 0.0  # the first step starts at the first forward op (as in the real files)
    reduce = np.stack([tail * f for f in (0.8, 0.6)], axis=1) * rng.uniform(0.95, 1.0, (steps, 2))
    op_dur = fp_bp[:, None] * shares[None, :] * rng.uniform(0.97, 1.03, (steps, len(ops)))
    op_dur *= (fp_bp / op_dur.sum(axis=1))[:, None] * 0.96  # ops fill 96 % of fp+bp (small gaps)

    n_samples = steps * 4
    if bottleneck == "data":  # map is slow: batch's input starves, the generator's output is full
        sizes = {0: rng.integers(0, 2, n_samples), 1: rng.integers(0, 3, n_samples),
                 2: rng.integers(QUEUE_CAP - 2, QUEUE_CAP + 1, n_samples)}
        host = rng.integers(0, 2, steps) * rng.integers(0, 2, steps)
        get_ms = interval * 0.95
    else:  # the pipeline keeps up: queues full
        sizes = {i: rng.integers(QUEUE_CAP - 2, QUEUE_CAP + 1, n_samples) for i in (0, 1, 2)}
        host = rng.integers(QUEUE_CAP - 3, QUEUE_CAP + 1, steps)
        get_ms = rng.uniform(0.02, 0.08, steps)
    return _Run(steps, ops, interval, fp_bp, tail, reduce, op_dur, sizes, host, get_ms)


def write_profile(out_dir, layout: str = "legacy", steps: int = 20, bottleneck: str = "none",
                  device: int = 0, seed: int = 0, op_names: list[str] | None = None) -> Path:
    """Write one device's profile under ``out_dir`` and return the folder to load.

    ``out_dir`` must be a scratch folder (it is created; existing files of the same names are
    overwritten). Returns ``out_dir`` for ``"legacy"`` and the ``*_ascend_ms`` folder for
    ``"mindspore2"``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if bottleneck not in BOTTLENECKS:
        raise ValueError(f"bottleneck must be one of {BOTTLENECKS}, not {bottleneck!r}")
    if steps < 2:
        raise ValueError("steps must be >= 2 (the average row excludes step 1)")
    run = _simulate(steps, bottleneck, seed, op_names)
    out = Path(out_dir)
    if layout == "legacy":
        out.mkdir(parents=True, exist_ok=True)
        _write_legacy(out, run, str(device))
        _write_minddata(out, out, run, str(device), sink=True)
        return out
    root = out / f"synthetic_{4000 + device}_20261121042531696_ascend_ms"
    (root / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True, exist_ok=True)
    (root / "FRAMEWORK").mkdir(parents=True, exist_ok=True)
    _write_ms2(root, run, str(device))
    _write_minddata(root / "FRAMEWORK", root / "ASCEND_PROFILER_OUTPUT", run, str(device), sink=False)
    return root


# -- timing -----------------------------------------------------------------------------------------
def _step_points_ms(run: _Run) -> list[dict]:
    """Per step: absolute ms of start, fp, bp, end (the step's events laid end to end)."""
    t, out = 0.0, []
    for s in range(run.steps):
        start = t
        fp = start + run.interval_ms[s]
        bp = fp + run.fp_bp_ms[s]
        end = bp + run.tail_ms[s]
        out.append({"start": start, "fp": fp, "bp": bp, "end": end})
        t = end
    return out


def _op_events_ms(run: _Run, points: list[dict]):
    """(step, op index, start ms, dur ms) of every op execution, sequential from each step's fp point."""
    gap = run.fp_bp_ms * 0.04 / max(len(run.ops), 1)
    for s, p in enumerate(points):
        t = p["fp"]
        for i in range(len(run.ops)):
            d = run.op_dur_ms[s, i]
            yield s, i, t, d
            t += d + gap[s]


def _reduce_events_ms(run: _Run, points: list[dict]):
    for s, p in enumerate(points):
        for j, stream in enumerate(REDUCE_STREAMS):
            start = p["bp"] + 0.05 * run.tail_ms[s]
            yield s, stream, start, run.reduce_ms[s, j]


# -- legacy -----------------------------------------------------------------------------------------
def _write_csv(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _write_legacy(out: Path, run: _Run, dev: str) -> None:
    points = _step_points_ms(run)
    base_tick = 4_380_685_054_700  # device syscnt at the first step (arbitrary, realistic magnitude)
    tick = lambda ms: base_tick + round(ms * TICKS_PER_MS)  # noqa: E731
    reduce_cols = []
    for stream in REDUCE_STREAMS:
        p = f"stream_{stream}_parallel_0"
        reduce_cols += [f"{p}_start_point", f"{p}_end_point", p]
    header = ["step_num", "start_point", "end_point", "total", "fp_point", "bp_point", "iteration_interval",
              "fp_and_bp", "tail"] + reduce_cols
    rows = []
    reduce = {(s, st): (a, d) for s, st, a, d in _reduce_events_ms(run, points)}
    for s, p in enumerate(points):
        st, fp, bp, en = tick(p["start"]), tick(p["fp"]), tick(p["bp"]), tick(p["end"])
        row = [s + 1, st, en, en - st, fp, bp, fp - st, bp - fp, en - bp]
        for stream in REDUCE_STREAMS:
            a, d = reduce[(s, stream)]
            ra, rb = tick(a), tick(a + d)
            row += [ra, rb, rb - ra]
        rows.append(row)
    # The writer's average row: integer means over steps 2..N, step_num "-" (FORMATS.md 3.2).
    mean = np.rint(np.array([r[1:] for r in rows[1:]], dtype=float).mean(axis=0)).astype(np.int64)
    _write_csv(out / f"step_trace_raw_{dev}_detail_time.csv", header, rows + [["-", *mean.tolist()]])
    (out / "step_trace_point_info.json").write_text(json.dumps(
        {"fp_start": run.ops[0].full_name, "bp_end": run.ops[-1].full_name}))

    totals_ms = run.op_dur_ms.sum(axis=0)
    by_type: dict[str, list[float]] = {}
    for op, tot in zip(run.ops, totals_ms):
        by_type.setdefault(op.op_type, []).append(tot)
    grand = totals_ms.sum()
    type_rows = sorted(((t, round(sum(v), 6), run.steps * len(v), round(100 * sum(v) / grand, 2))
                        for t, v in by_type.items()), key=lambda r: -r[1])
    _write_csv(out / f"aicore_intermediate_{dev}_type.csv",
               ["op_type", "execution_time", "execution_frequency", "percent"], type_rows)
    _write_csv(out / f"aicore_intermediate_{dev}_detail.csv", ["full_op_name", "execution_time"],
               [(op.full_name, round(t, 6)) for op, t in zip(run.ops, totals_ms)])
    shape = {"input_0": {"format": "NC1HWC0", "data_type": "NUMBER_TYPE_FLOAT16", "shape": "32,4,56,56,16"},
             "output_0": {"format": "NC1HWC0", "data_type": "NUMBER_TYPE_FLOAT16", "shape": "32,4,56,56,16"}}
    _write_csv(out / f"framework_raw_{dev}.csv",
               ["task_id", "stream_id", "block_dim", "full_op_name", "op_name", "op_type", "subgraph", "op_info"],
               [(op.task_id, COMPUTE_STREAM, 32, op.full_name, op.name, op.op_type, op.full_name.split("/")[0],
                 json.dumps(shape)) for op in run.ops])

    # Timeline: us relative to the first op; device ops on pid = device id, tid = stream id (string).
    t0 = points[0]["fp"]
    events = []
    for s, i, a, d in _op_events_ms(run, points):
        op = run.ops[i]
        events.append({"name": op.name, "ph": "X", "tid": str(COMPUTE_STREAM), "ts": round((a - t0) * 1000, 3),
                       "dur": round(d * 1000, 3), "pid": int(dev),
                       "args": {"type": op.op_type, "fullname": op.full_name, **shape}})
    for s, p in enumerate(points):
        events.append({"name": str(s + 1), "ph": "X", "tid": 100000, "ts": round((p["start"] - t0) * 1000, 3),
                       "dur": round((p["end"] - p["start"]) * 1000, 3), "pid": int(dev)})
    for s, stream, a, d in _reduce_events_ms(run, points):
        events.append({"name": f"stream_{stream}_parallel_0", "ph": "X", "tid": stream,
                       "ts": round((a - t0) * 1000, 3), "dur": round(d * 1000, 3), "pid": 10000})
    events.append({"name": "thread_name", "ph": "M", "pid": int(dev), "tid": 100000, "args": {"name": "Steps"}})
    (out / f"ascend_timeline_display_{dev}.json").write_text(json.dumps(events))
    op_events = [e for e in events if e["ph"] == "X" and e.get("args")]
    (out / f"ascend_timeline_summary_{dev}.json").write_text(json.dumps({
        "total_time": round(sum(e["dur"] for e in op_events), 3), "num_of_streams": 1,
        "num_of_ops": len(run.ops), "op_exe_times": len(op_events), "max_scope_name_num": 0}))


# -- MindSpore 2.x ----------------------------------------------------------------------------------
def _s(x: float) -> str:
    return f"{x:.3f}"


def _write_ms2(root: Path, run: _Run, dev: str) -> None:
    out = root / "ASCEND_PROFILER_OUTPUT"
    points = _step_points_ms(run)
    us = lambda ms: EPOCH_US + ms * 1000  # noqa: E731  (absolute epoch us)
    (root / f"profiler_info_{dev}.json").write_text(json.dumps({
        "profiler_parameters": {"activities": ["CPU", "NPU"], "profiler_level": "Level1", "data_process": True},
        "ms_version": "2.10.0", "rank_id": int(dev)}))

    kernel_rows = []
    for s, i, a, d in _op_events_ms(run, points):
        op = run.ops[i]
        core = "AI_VECTOR_CORE" if op.op_type in ("ReLU", "Cast", "TransData", "ApplyMomentum") else "AI_CORE"
        kernel_rows.append([s + 1, 4294967295, op.task_id, COMPUTE_STREAM, op.name, op.op_type, core,
                            _s(us(a)), _s(d * 1000), _s(2.0), 32])
    for s, stream, a, d in _reduce_events_ms(run, points):
        kernel_rows.append([s + 1, 4294967295, "N/A", "N/A", f"hcom_allReduce__{stream}_{s}", "hcom_allReduce_",
                            "HCCL", _s(us(a)), _s(d * 1000), _s(0.0), 0])
    kernel_rows.sort(key=lambda r: float(r[7]))
    _write_csv(out / "kernel_details.csv",
               ["Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "Accelerator Core",
                "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim"], kernel_rows)

    # step_trace_time.csv (us): computing = op time, communication not hidden by compute = the tail's
    # AllReduce (the longest stream), free = the rest of the step; preparing = the step gap.
    comp = run.op_dur_ms.sum(axis=1)
    comm = run.reduce_ms.max(axis=1)
    step_rows = []
    for s, p in enumerate(points):
        total = p["end"] - p["start"] - run.interval_ms[s]
        free = max(total - comp[s] - comm[s], 0.0)
        step_rows.append([s + 1, _s(comp[s] * 1000), _s(comm[s] * 1000), _s(0.0), _s(comm[s] * 1000),
                          _s(free * 1000), _s(0.0), _s(0.0), _s(comm[s] * 1000), _s(run.interval_ms[s] * 1000)])
    _write_csv(out / "step_trace_time.csv",
               ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
                "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"], step_rows)

    pid_ms, pid_hw, pid_hccl, pid_overlap, host_tid = 1, 800, 43767511, 4376751100, 11535
    ev = []
    for pid, name, sort in ((pid_ms, "MindSpore", 0), (pid_hw, "Ascend Hardware", 6), (pid_hccl, "HCCL", 7),
                            (pid_overlap, "Overlap Analysis", 8)):
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
    ev.append({"ph": "M", "name": "thread_name", "pid": pid_ms, "tid": host_tid, "args": {"name": f"Thread {host_tid}"}})
    ev.append({"ph": "M", "name": "thread_name", "pid": pid_hw, "tid": COMPUTE_STREAM,
               "args": {"name": f"Stream {COMPUTE_STREAM}"}})
    ev.append({"ph": "M", "name": "thread_name", "pid": pid_hccl, "tid": 0, "args": {"name": "Plane 0"}})
    for tid, name in enumerate(("Computing", "Communication", "Communication(Not Overlapped)", "Free")):
        ev.append({"ph": "M", "name": "thread_name", "pid": pid_overlap, "tid": tid, "args": {"name": name}})
    for s, p in enumerate(points):
        ev.append({"ph": "X", "name": f"ProfilerStep#{s + 1}", "pid": pid_ms, "tid": host_tid, "ts": _s(us(p["start"])),
                   "dur": _s((p["end"] - p["start"]) * 1000), "cat": "", "args": {}})
    flow = 0
    for s, i, a, d in _op_events_ms(run, points):
        op = run.ops[i]
        ev.append({"ph": "X", "name": op.name, "pid": pid_hw, "tid": COMPUTE_STREAM, "ts": _s(us(a)),
                   "dur": _s(d * 1000), "cat": "", "args": {"Model Id": 4294967295, "Task Type": "AI_CORE",
                                                           "Stream Id": COMPUTE_STREAM, "Task Id": op.task_id,
                                                           "type": op.op_type}})
        ev.append({"ph": "X", "name": "Computing", "pid": pid_overlap, "tid": 0, "ts": _s(us(a)),
                   "dur": _s(d * 1000), "cat": "", "args": {}})
        if i == 0:  # one launch flow per step, from the host step start to its first kernel
            flow += 1
            ev.append({"ph": "s", "name": f"HostToDevice{flow}", "cat": "HostToDevice", "id": str(flow),
                       "pid": pid_ms, "tid": host_tid, "ts": _s(us(points[s]["start"]))})
            ev.append({"ph": "f", "name": f"HostToDevice{flow}", "cat": "HostToDevice", "id": str(flow),
                       "pid": pid_hw, "tid": COMPUTE_STREAM, "ts": _s(us(a)), "bp": "e"})
    for s, stream, a, d in _reduce_events_ms(run, points):
        ev.append({"ph": "X", "name": f"hcom_allReduce__{stream}_{s}", "pid": pid_hccl, "tid": 0, "ts": _s(us(a)),
                   "dur": _s(d * 1000), "cat": "", "args": {"type": "hcom_allReduce_"}})
        if stream == REDUCE_STREAMS[0]:
            ev.append({"ph": "X", "name": "Communication", "pid": pid_overlap, "tid": 1, "ts": _s(us(a)),
                       "dur": _s(d * 1000), "cat": "", "args": {}})
    (out / "trace_view.json").write_text(json.dumps(ev))


# -- MindData ---------------------------------------------------------------------------------------
def _write_minddata(raw_dir: Path, derived_dir: Path, run: _Run, dev: str, sink: bool) -> None:
    interval = 20
    n = len(run.queue_sizes[0])
    rng = np.random.default_rng(len(run.ops) * 7919 + run.steps)
    op_info = []
    for op_id, op_type, workers, children in PIPELINE:
        entry = {"metrics": {"output_queue": {"length": QUEUE_CAP, "size": run.queue_sizes[op_id].tolist()}},
                 "num_workers": workers, "op_id": op_id, "op_type": op_type}
        if children:
            entry["children"] = children
        op_info.append(entry)
    (raw_dir / f"pipeline_profiling_{dev}.json").write_text(
        json.dumps({"op_info": op_info, "sampling_interval": interval}, separators=(",", ":")))

    rows = []
    parents = {c: op_id for op_id, _, _, children in PIPELINE for c in children}
    for op_id, op_type, workers, children in PIPELINE:  # already breadth-first from the root
        sizes = run.queue_sizes[op_id]
        avg = float(sizes.mean())
        rows.append([op_id, op_type, workers, "[" + ", ".join(map(str, sizes.tolist())) + "]", avg, QUEUE_CAP,
                     avg / QUEUE_CAP, interval, parents.get(op_id, ""),
                     "[" + ", ".join(map(str, children)) + "]" if children else ""])
    _write_csv(derived_dir / f"minddata_pipeline_raw_{dev}.csv",
               ["op_id", "op_type", "num_workers", "output_queue_size", "output_queue_average_size",
                "output_queue_length", "output_queue_usage_rate", "sample_interval", "parent_id", "children_id"],
               rows)

    start_ms = 572_359
    step_ms = run.interval_ms + run.fp_bp_ms + run.tail_ms
    stamps = (start_ms + np.cumsum(step_ms)).round().astype(np.int64)
    times = np.linspace(start_ms, stamps[-1], n).round().astype(np.int64).tolist()
    busy = 70 if not (run.get_ms > 1).any() else 40
    util = lambda mean: np.clip(rng.normal(mean, 5, n), 0, 100).round().astype(int).tolist()  # noqa: E731
    (raw_dir / f"minddata_cpu_utilization_{dev}.json").write_text(json.dumps({
        "sampling_interval": interval, "cpu_processor_num": 8, "time_stamp": times,
        "device_info": {"user_utilization": util(busy), "sys_utilization": util(8), "io_utilization": util(1),
                        "idle_utilization": util(100 - busy - 9), "runnable_process": util(3),
                        "context_switch_count": util(50)},
        "process_info": {"user_utilization": util(busy * 0.8), "sys_utilization": util(5)},
        "op_info": [{"op_id": op_id, "metrics": {"user_utilization": util(10 + 20 * (op_type == "MapOp")),
                                                  "sys_utilization": util(2)}}
                    for op_id, op_type, _, _ in PIPELINE]}, separators=(",", ":")))

    # Queue records, 4 per step: push (sub 1), batch (sub 2), get (sub 0), then the queue depth.
    lines = []
    for s in range(run.steps):
        ts, get = int(stamps[s]), max(int(round(run.get_ms[s])), 0)
        push = 1 if sink else 0
        lines += [f"0 1 {s + 1} {push} {ts}", f"0 2 {s + 1} {get + push} {ts}", f"0 0 {s + 1} {get} {ts}",
                  f"1 {QUEUE_CAP} {s + 1} {int(run.host_queue[s])} {ts}"]
    name = f"device_queue_profiling_{dev}.txt" if sink else f"dataset_iterator_profiling_{dev}.txt"
    (raw_dir / name).write_text("\n".join(lines) + "\n")
