"""Seeded synthetic profiler output for benchmarks and tests (outside the data flow: nothing in the package
imports it). `nbprofiler.synthetic.profile` writes whole legacy and 2.x profiles with a bottleneck knob,
`nbprofiler.synthetic.cluster` clusters shaped like the shared ones.

`write_trace` writes a Chrome-trace JSON array shaped like the real ``trace_view.json`` files in
``shared/data`` (MindSpore 2.10: ``ts``/``dur`` as strings with 3 decimals; torch_npu/CANN: string
``ts`` and numeric ``dur``): processes ``MindSpore`` (``ProfilerStep#N``), ``CPU OP``, ``Scope Layer``,
``CANN`` (two host threads of ``AscendCL@...`` launches), ``Ascend Hardware`` (one thread per stream),
``HCCL``, ``Overlap Analysis`` and counter processes (``AI Core Freq``, ``HBM``); ``HostToDevice`` flow
pairs (string ids, ``f`` with ``"bp":"e"``) from each launch to its kernel; ``C`` counter samples.
Nothing here is written into a profiler directory: callers pass a scratch path.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

# Pids as CANN assigns them in the real torch_npu file (opaque large ints beside small ones).
PID_MINDSPORE, PID_CPU_OP, PID_SCOPE = 1, 2, 3
PID_CANN, PID_HW, PID_HCCL, PID_OVERLAP = 43767502, 800, 43767511, 4376751100
PID_FREQ, PID_HBM = 4376751200, 4376751300
STREAMS = [2, 3, 4, 5, 6, 7]
HOST_THREADS = [437675, 439084]

# (op type, task type on the device, typical device duration us): a ResNet-ish mix.
_OP_MIX = [("Conv2D", "AI_CORE", 40.0), ("Conv2DBackpropFilter", "AI_CORE", 60.0),
           ("Conv2DBackpropInput", "AI_CORE", 55.0), ("BatchNorm", "AI_VECTOR_CORE", 12.0),
           ("ReLU", "AI_VECTOR_CORE", 4.0), ("MatMul", "AI_CORE", 25.0), ("Add", "AI_VECTOR_CORE", 3.0),
           ("Cast", "AI_VECTOR_CORE", 2.5), ("TransData", "AI_VECTOR_CORE", 6.0),
           ("ApplyMomentum", "AI_VECTOR_CORE", 3.5), ("MaxPoolGrad", "AI_CORE", 18.0),
           ("ReduceSum", "AI_VECTOR_CORE", 5.0), ("GetNext", "AI_CPU", 120.0)]
_SCOPES = ["Default/network-WithLossCell/_backbone-ResNet/layer1-SequentialCell",
           "Default/network-WithLossCell/_backbone-ResNet/layer2-SequentialCell",
           "Gradients/Default/network-WithLossCell/_backbone-ResNet/gradConv2D",
           "Default/optimizer-Momentum"]


def _metadata() -> list[dict]:
    ev = []

    def proc(pid, name, sort, label=None):
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
        if label:
            ev.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}})

    def thread(pid, tid, name, sort):
        ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": sort}})

    proc(PID_MINDSPORE, "MindSpore", 0, "CPU")
    thread(PID_MINDSPORE, HOST_THREADS[0], f"Thread {HOST_THREADS[0]}", 0)
    proc(PID_CPU_OP, "CPU OP", 2, "CPU")
    thread(PID_CPU_OP, 0, "Thread 0", 0)
    proc(PID_SCOPE, "Scope Layer", 12)
    for depth in range(3):
        thread(PID_SCOPE, depth, f"Thread {depth}", depth)
    proc(PID_CANN, "CANN", 5, "CPU")
    for t in HOST_THREADS:
        thread(PID_CANN, t, f"Thread {t}", t)
    proc(PID_HW, "Ascend Hardware", 6, "NPU")
    for s in STREAMS:
        thread(PID_HW, s, f"Stream {s}", s)
    proc(PID_HCCL, "HCCL", 7, "NPU")
    thread(PID_HCCL, 0, "Plane 0", 0)
    thread(PID_HCCL, 70000, "Communication Kernel", 70000)
    proc(PID_OVERLAP, "Overlap Analysis", 8, "NPU")
    for i, n in enumerate(["Computing", "Communication", "Communication(Not Overlapped)", "Free"]):
        thread(PID_OVERLAP, i, n, i)
    proc(PID_FREQ, "AI Core Freq", 9, "NPU")
    proc(PID_HBM, "HBM", 10, "NPU")
    return ev


def write_trace(path, target_bytes: int, seed: int = 0) -> dict:
    """Write a synthetic trace of about ``target_bytes`` (stops at the first step past it) to ``path``.

    Returns counts: ``bytes``, ``events``, ``x_events``, ``flows`` (pairs), ``counters``, ``steps``.
    The same seed gives the same file byte for byte.
    """
    rng = random.Random(seed)
    path = Path(path)
    counts = {"events": 0, "x_events": 0, "flows": 0, "counters": 0, "steps": 0}
    written = 0
    t = 1_795_235_132_857_961.486  # absolute us, like the real MindSpore 2.10 file
    flow_id = 38654705663
    task_id = 0
    op_seq = 0
    buf: list[str] = []
    with open(path, "w", encoding="utf-8") as out:
        out.write("[")
        first = True
        for e in _metadata():
            buf.append(json.dumps(e))
            counts["events"] += 1
        step = 0
        while written < target_bytes:
            step += 1
            step_start = t
            host_t = t
            dev_t = t + 30.0
            n_ops = rng.randint(150, 250)
            for _ in range(n_ops):
                op_seq += 1
                op_type, task_type, mean_dur = _OP_MIX[rng.randrange(len(_OP_MIX))]
                scope = _SCOPES[rng.randrange(len(_SCOPES))]
                name = f"{scope}/{op_type}-op{op_seq % 997}"
                cpu_dur = rng.uniform(2.0, 15.0)
                thread = HOST_THREADS[op_seq & 1]
                # Host-side framework op (MindSpore 2.10 style: string ts and dur).
                buf.append(f'{{"ph": "X", "name": "{name}", "pid": {PID_CPU_OP}, "tid": 0, "ts": "{host_t:.3f}", '
                           f'"dur": "{cpu_dur:.3f}", "cat": "", "args": {{"type": "HostCpuOps"}}}}')
                # The CANN launch (torch_npu style: string ts, float dur) and its flow to the device.
                launch_t = host_t + cpu_dur * 0.3
                launch_dur = rng.uniform(3.0, 9.0)
                buf.append(f'{{"name": "AscendCL@aclopCompileAndExecute", "pid": {PID_CANN}, "tid": {thread}, '
                           f'"ts": "{launch_t:.3f}", "dur": {launch_dur!r}, "args": {{"Thread Id": {thread}, '
                           f'"Mode": "ACL_OP", "level": "acl", "id": "aclopCompileAndExecute", "item_id": "{op_type}", '
                           f'"connection_id": {flow_id}}}, "ph": "X"}}')
                stream = STREAMS[rng.randrange(len(STREAMS))] if task_type != "AI_CPU" else STREAMS[0]
                dev_t = max(dev_t, launch_t + launch_dur) + rng.uniform(0.5, 3.0)
                dev_dur = round(max(0.5, rng.gauss(mean_dur, mean_dur * 0.2)), 3)
                task_id += 1
                buf.append(f'{{"name": "{op_type}-op{op_seq % 997}", "pid": {PID_HW}, "tid": {stream}, '
                           f'"ts": "{dev_t:.3f}", "dur": {dev_dur}, "args": {{"Model Id": 4294967295, '
                           f'"Task Type": "{task_type}", "Stream Id": {stream}, "Task Id": {task_id % 65536}, '
                           f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {flow_id}}}, "ph": "X"}}')
                buf.append(f'{{"name": "HostToDevice{flow_id}", "ph": "s", "cat": "HostToDevice", "id": "{flow_id}", '
                           f'"pid": {PID_CANN}, "tid": {thread}, "ts": "{launch_t:.3f}"}}')
                buf.append(f'{{"name": "HostToDevice{flow_id}", "ph": "f", "id": "{flow_id}", "ts": "{dev_t:.3f}", '
                           f'"cat": "HostToDevice", "pid": {PID_HW}, "tid": {stream}, "bp": "e"}}')
                buf.append(f'{{"name": "Computing", "pid": {PID_OVERLAP}, "tid": 0, "ts": "{dev_t:.3f}", '
                           f'"dur": {dev_dur}, "ph": "X"}}')
                counts["events"] += 6
                counts["x_events"] += 4
                counts["flows"] += 1
                flow_id += 1
                if op_seq % 16 == 0:
                    buf.append(f'{{"name": "AI Core Freq", "ph": "C", "pid": {PID_FREQ}, "tid": 0, '
                               f'"ts": "{dev_t:.3f}", "args": {{"MHz": {rng.choice((1000, 1400, 1800))}}}}}')
                    buf.append(f'{{"name": "HBM", "ph": "C", "pid": {PID_HBM}, "tid": 0, "ts": "{dev_t:.3f}", '
                               f'"args": {{"Read(MB/s)": {rng.uniform(1e3, 9e4):.2f}, '
                               f'"Write(MB/s)": {rng.uniform(1e3, 9e4):.2f}}}}}')
                    counts["events"] += 2
                    counts["counters"] += 2
                host_t += cpu_dur + rng.uniform(0.5, 4.0)
            # One all-reduce per step on HCCL, then the step and scope bars spanning it.
            hccl_dur = rng.uniform(200.0, 900.0)
            buf.append(f'{{"name": "Default/AllReduce-op{step % 50}_0", "pid": {PID_HCCL}, "tid": 70000, '
                       f'"ts": "{dev_t:.3f}", "dur": {hccl_dur:.3f}, "ph": "X"}}')
            end = max(host_t, dev_t + hccl_dur)
            buf.append(f'{{"ph": "X", "name": "ProfilerStep#{step}", "pid": {PID_MINDSPORE}, '
                       f'"tid": {HOST_THREADS[0]}, "ts": "{step_start:.3f}", "dur": "{end - step_start:.3f}", '
                       f'"cat": "", "args": {{}}}}')
            for depth, scope in enumerate(("Default", "Gradients", "Default/optimizer-Momentum")):
                a = step_start + (end - step_start) * depth / 3
                buf.append(f'{{"ph": "X", "name": "{scope}", "pid": {PID_SCOPE}, "tid": {depth}, '
                           f'"ts": "{a:.3f}", "dur": "{(end - step_start) / 3:.3f}", "cat": "", "args": {{}}}}')
            counts["events"] += 5
            counts["x_events"] += 5
            counts["steps"] = step
            t = end + rng.uniform(50.0, 400.0)
            if len(buf) > 20000 or written + sum(map(len, buf)) >= target_bytes:
                chunk = ", ".join(buf)
                if not first:
                    chunk = ", " + chunk
                out.write(chunk)
                written += len(chunk)
                first = False
                buf.clear()
        if buf:
            chunk = ", ".join(buf)
            out.write((", " if not first else "") + chunk)
            written += len(chunk)
        out.write("]\n")
    counts["bytes"] = path.stat().st_size
    return counts
