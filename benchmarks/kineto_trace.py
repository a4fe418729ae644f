"""A synthetic trace shaped like PyTorch's Kineto output (what the PyTorch profiler, torch_npu's
``tensorboard_trace_handler`` and Holistic Trace Analysis use): one JSON object whose ``traceEvents``
array holds numeric ``ts``/``dur`` events with Kineto's categories — ``user_annotation`` steps
(``ProfilerStep#N``), ``cpu_op`` host operators, ``cuda_runtime`` launches, ``kernel`` device operators
with ``stream``/``correlation`` args, ``ac2g`` launch→kernel flows — plus the keys Kineto writes around
it (``schemaVersion``, ``distributedInfo``, ``deviceProperties``, ``traceName``). ``array_at`` puts the
array first or last among those keys (both occur in real files), or ``"bare"`` writes the same events as
a bare array (MindSpore's form), so the two forms can be timed against each other."""
from __future__ import annotations

import json
import random
from pathlib import Path

OPS = [("aten::mm", "gemm_kernel", 180.0), ("aten::add", "elementwise_add", 12.0),
       ("aten::relu", "relu_kernel", 9.0), ("aten::conv2d", "conv_fwd_kernel", 240.0),
       ("aten::softmax", "softmax_kernel", 30.0), ("aten::layer_norm", "layernorm_kernel", 45.0)]
PID_HOST, TID_MAIN, PID_DEVICE = 4242, 4242, 0
STREAMS = [7, 13, 20]


def _head(rank: int) -> dict:
    return {"schemaVersion": 1, "distributedInfo": {"backend": "hccl", "rank": rank, "world_size": 1},
            "deviceProperties": [{"id": 0, "name": "Ascend910B", "totalGlobalMem": 68719476736}]}


def write_kineto_trace(path, target_bytes: int, seed: int = 0, array_at: str = "first", rank: int = 0) -> dict:
    """Write about ``target_bytes`` of Kineto-shaped trace to ``path``; returns ``bytes``, ``events``,
    ``x_events``, ``steps``. The same arguments give the same file byte for byte."""
    if array_at not in ("first", "last", "bare"):
        raise ValueError(f"array_at must be 'first', 'last' or 'bare', got {array_at!r}")
    rng = random.Random(seed)
    path = Path(path)
    head = json.dumps(_head(rank))[1:-1]  # the keys without their braces
    counts = {"events": 0, "x_events": 0, "steps": 0}
    t, corr, written = 1_700_000_000_000.0, 1, 0
    with open(path, "w", encoding="utf-8") as out:
        out.write("[" if array_at == "bare" else
                  "{" + ("" if array_at == "first" else head + ", ") + '"traceEvents": [')
        meta = [{"name": "process_name", "ph": "M", "pid": PID_HOST, "tid": 0, "args": {"name": "python"}},
                {"name": "process_name", "ph": "M", "pid": PID_DEVICE, "tid": 0, "args": {"name": "NPU 0"}}]
        buf = [json.dumps(e) for e in meta]
        counts["events"] += len(meta)
        first = True
        while written < target_bytes:
            counts["steps"] += 1
            step_start, host_t, dev_t = t, t + 5.0, t + 40.0
            for _ in range(rng.randint(150, 250)):
                op, kernel, mean = OPS[rng.randrange(len(OPS))]
                cpu_dur = rng.uniform(5.0, 30.0)
                launch_t = host_t + cpu_dur * 0.5
                stream = STREAMS[rng.randrange(len(STREAMS))]
                dev_t = max(dev_t, launch_t + 4.0) + rng.uniform(0.5, 3.0)
                dev_dur = round(max(1.0, rng.gauss(mean, mean * 0.2)), 3)
                buf.append(f'{{"ph": "X", "cat": "cpu_op", "name": "{op}", "pid": {PID_HOST}, "tid": {TID_MAIN}, '
                           f'"ts": {host_t:.3f}, "dur": {cpu_dur:.3f}, "args": {{"External id": {corr}, '
                           f'"Sequence number": {corr}, "Input Dims": [[64, 512], [512, 512]], '
                           f'"Input type": ["float", "float"]}}}}')
                buf.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "aclnnLaunch", "pid": {PID_HOST}, '
                           f'"tid": {TID_MAIN}, "ts": {launch_t:.3f}, "dur": 4.0, "args": {{"External id": {corr}, '
                           f'"correlation": {corr}}}}}')
                buf.append(f'{{"ph": "X", "cat": "kernel", "name": "{kernel}", "pid": {PID_DEVICE}, '
                           f'"tid": {stream}, "ts": {dev_t:.3f}, "dur": {dev_dur}, "args": {{"External id": {corr}, '
                           f'"device": 0, "stream": {stream}, "correlation": {corr}, "grid": [128, 1, 1], '
                           f'"block": [256, 1, 1]}}}}')
                buf.append(f'{{"ph": "f", "id": {corr}, "pid": {PID_DEVICE}, "tid": {stream}, "ts": {dev_t:.3f}, '
                           f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
                buf.append(f'{{"ph": "s", "id": {corr}, "pid": {PID_HOST}, "tid": {TID_MAIN}, "ts": {launch_t:.3f}, '
                           f'"cat": "ac2g", "name": "ac2g"}}')
                counts["events"] += 5
                counts["x_events"] += 3
                corr += 1
                host_t += cpu_dur + rng.uniform(0.5, 4.0)
            end = max(host_t, dev_t) + 10.0
            buf.append(f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{counts["steps"]}", '
                       f'"pid": {PID_HOST}, "tid": {TID_MAIN}, "ts": {step_start:.3f}, "dur": {end - step_start:.3f}, '
                       f'"args": {{"External id": {corr}}}}}')
            counts["events"] += 1
            counts["x_events"] += 1
            corr += 1
            t = end + rng.uniform(50.0, 400.0)
            if len(buf) > 20000 or written + sum(map(len, buf)) >= target_bytes:
                chunk = ("" if first else ", ") + ", ".join(buf)
                out.write(chunk)
                written += len(chunk)
                first = False
                buf.clear()
        if buf:
            out.write(("" if first else ", ") + ", ".join(buf))
        if array_at == "bare":
            out.write("]\n")
        else:
            out.write("]" + (", " + head if array_at == "first" else "") + ', "traceName": "' + path.name + '"}\n')
    counts["bytes"] = path.stat().st_size
    return counts
