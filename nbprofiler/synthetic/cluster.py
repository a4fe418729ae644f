"""Synthetic clusters of many ranks for benchmarks, shaped like the real shipped data.

- ``legacy``: one flat folder, like ``legacy/cluster_4rank_pipeline``: per rank a
  ``step_trace_raw_{rank}_detail_time.csv`` whose rows are the real rank-0/rank-2 rows (by pipeline
  stage) repeated over ``steps`` steps with shifted tick points and a little jitter, plus an average row computed like the writer's
  (mean of steps 2..N); and ``ascend_cluster_analyse_pipeline-parallel_{stages}_{ranks}_{rank}.csv``.
- ``npu``: per rank an ``*_ascend_ms`` folder with ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` (the
  real 591 rows of ``npu/kernel_details_591`` repeated ``kernel_repeat`` times, starts shifted) and
  ``step_trace_time.csv`` (the rank rows of ``npu/cluster_8rank`` cycled over ranks).
- ``pipeline``: a pipeline-parallel torch_npu cluster with device timelines (`write_pipeline_cluster`),
  shaped like ``npu/ascend_pt_text_2rank`` (trace_view.json, kernel_details.csv), running an exact GPipe or
  1F1B schedule (`pipeline_timings`) so the measured bubble can be checked against the schedule's.
- ``cluster_analysis``: msprof-analyze's cluster output for ``ranks`` ranks laid out as TP x PP x DP
  (`write_cluster_analysis`), its four files shaped like ``npu/cluster_analysis_16rank``.
One rank is made a straggler (its step interval / free time x3, or one operator type made slower on it) so the
analyses have something to find.
Written only under the ``root`` you give (a temporary folder), never into the shared data.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

LEGACY_SRC = "legacy/cluster_4rank_pipeline"
NPU_KERNELS = "npu/kernel_details_591/kernel_details.csv"
NPU_CLUSTER = "npu/cluster_8rank/cluster_step_trace_time.csv"
CLUSTER16 = "npu/cluster_analysis_16rank"
# cluster_step_trace_time.csv's columns after Step, Type, Index (us)
STEP_COLUMNS = ["Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Communication(Not Overlapped and Exclude Receive)"]
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA")


def write_legacy_cluster(root: Path, data: Path, ranks: int, steps: int = 200, stages: int = 2,
                         slow_rank: int | None = None, seed: int = 0) -> Path:
    """A flat legacy folder with ``ranks`` ranks; returns it. Rank r belongs to stage r * stages // ranks.

    Step i of a rank is real step ``i % 5`` of its stage's template rank, its tick points moved on by
    whole template periods; the stage durations and reduce durations get +-1 % jitter, and ``total`` is
    their sum as in the real files. The straggler (``slow_rank``, default the last) waits 3x longer for
    data, +3 ms: its ``iteration_interval`` and ``total`` grow alike.
    """
    out = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(data) / LEGACY_SRC
    slow_rank = ranks - 1 if slow_rank is None else slow_rank
    templates = {}
    for s, real_rank in enumerate((0, 2)[:stages] if stages <= 2 else [0, 2] * stages):
        rows = list(csv.reader((src / f"step_trace_raw_{real_rank}_detail_time.csv").open()))
        analyse = next(src.glob(f"ascend_cluster_analyse_pipeline-parallel_2_4_{real_rank}.csv")).read_text()
        templates[s] = (rows[0], np.array(rows[1:-1], dtype="int64"), analyse)
    for r in range(ranks):
        rng = np.random.default_rng([seed, r])
        header, body, analyse = templates[min(r * stages // ranks, len(templates) - 1)]
        col = {name: j for j, name in enumerate(header)}
        period = int(body[1, col["end_point"]] - body[1, col["start_point"]])  # one step's ticks
        which = np.arange(steps) % len(body)
        vals = body[which].copy()
        points = np.array([name.endswith("point") for name in header])
        shift = ((np.arange(steps) - which) * period)[:, None]
        vals[:, points] += np.where(vals[:, points] != 0, shift, 0)
        jitter = ~points
        jitter[[col["step_num"], col["total"]]] = False
        vals[:, jitter] = np.maximum(0, np.floor(vals[:, jitter] * rng.uniform(0.99, 1.01, (steps, jitter.sum()))))
        if r == slow_rank:
            vals[:, col["iteration_interval"]] = 3 * body[which, col["iteration_interval"]] + 300000
        vals[:, col["total"]] = vals[:, [col[c] for c in ("iteration_interval", "fp_and_bp", "tail")]].sum(axis=1)
        vals[:, col["step_num"]] = np.arange(1, steps + 1)
        # the average row as the real writer makes it: "-" then the rounded mean of steps 2..N
        later = vals[1:] if steps > 1 else vals
        average = ["-"] + [str(round(v)) for v in later[:, 1:].mean(axis=0).tolist()]
        lines = [",".join(header)] + [",".join(map(str, row)) for row in vals.tolist()] + [",".join(average)]
        (out / f"step_trace_raw_{r}_detail_time.csv").write_text("\n".join(lines) + "\n")
        (out / f"ascend_cluster_analyse_pipeline-parallel_{stages}_{ranks}_{r}.csv").write_text(analyse)
    return out


def write_npu_cluster(root: Path, data: Path, ranks: int, kernel_repeat: int = 4, slow_rank: int | None = None,
                      slow_op_type: str | None = None, slow_op_ms: float = 0.0, step_row: int | None = None,
                      suffix: str = "ascend_ms") -> Path:
    """``ranks`` ``*_<suffix>`` folders under ``root`` (``suffix`` "ascend_ms", MindSpore's, or "ascend_pt",
    torch_npu's, named ``rank<r>_ascend_pt`` as in ``npu/ascend_pt_text_2rank``); returns ``root``.

    Rank r's step_trace_time.csv is rank row ``r % 8`` of ``npu/cluster_8rank`` (row ``step_row`` for every
    rank when given, so the ranks differ only by what is injected). The straggler (``slow_rank``, default the
    last) idles 3x longer (Free x3); with ``slow_op_type`` it instead runs that operator type ``slow_op_ms``
    ms longer a step: each of its kernels of that type in kernel_details.csv is lengthened by an equal share,
    and its Computing grows by the same ``slow_op_ms``."""
    out = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    slow_rank = ranks - 1 if slow_rank is None else slow_rank
    kernel_text = (Path(data) / NPU_KERNELS).read_text()
    header, body = kernel_text.split("\n", 1)
    rows = [r for r in body.split("\n") if r]
    step_rows = [r for r in csv.DictReader((Path(data) / NPU_CLUSTER).open()) if r["Type"] == "rank"]
    st_cols = ["Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
               "Bubble", "Communication(Not Overlapped and Exclude Receive)"]
    for r in range(ranks):
        d = out / (f"node{r // 8}_{1000 + r}_20261121000000000_ascend_ms" if suffix == "ascend_ms"
                   else f"rank{r}_{suffix}")
        o = d / "ASCEND_PROFILER_OUTPUT"
        o.mkdir(parents=True, exist_ok=True)
        (d / f"profiler_info_{r}.json").write_text(f'{{"rank_id": {r}, "ms_version": "2.10.0"}}')
        lines = [header]
        slow_op = slow_op_type if r == slow_rank else None
        if slow_op is not None:
            n = kernel_repeat * sum(line.split(",", 6)[5] == slow_op for line in rows)
            if not n:
                raise ValueError(f"{NPU_KERNELS} has no kernel of type {slow_op!r}")
            extra_us = slow_op_ms * 1000.0 / n  # the one step's extra time, shared by the type's kernels
        for k in range(kernel_repeat):
            # same rows, later in time: shift the Start Time (8th field) by k seconds
            for line in rows:
                parts = line.split(",", 9)
                parts[7] = f"{float(parts[7]) + k * 1e6:.1f}"
                if slow_op is not None and parts[5] == slow_op:
                    parts[8] = repr(float(parts[8]) + extra_us)
                lines.append(",".join(parts))
        (o / "kernel_details.csv").write_text("\n".join(lines) + "\n")
        src = step_rows[(r if step_row is None else step_row) % len(step_rows)]
        vals = {c: float(src[c]) for c in st_cols}
        if r == slow_rank and slow_op_type is not None:
            vals["Computing"] += slow_op_ms * 1000.0  # step_trace_time.csv is in us
        elif r == slow_rank:
            vals["Free"] *= 3
        (o / "step_trace_time.csv").write_text(
            "Step," + ",".join(st_cols) + ",Preparing\n" +
            "1," + ",".join(f"{vals[c]:.3f}" for c in st_cols) + ",0.000\n")
    return out




# -- a pipeline-parallel job with device timelines ---------------------------------------------------------
# The torch_npu layout of npu/ascend_pt_text_2rank: per rank rank{r}_ascend_pt/ with profiler_info_{r}.json
# and ASCEND_PROFILER_OUTPUT/{trace_view.json, kernel_details.csv}. No communication_group.json: beside rank
# folders, nbprofiler loads a cluster_analysis_output/ folder as the ranks (its files' ranks), so the stages
# are given to the analysis (``stages=``) as a user who knows the job does.
PIPELINE_SCHEDULES = ("gpipe", "1f1b")
_HW_PID, _HCCL_PID, _PY_PID = 3089232288, 3089232352, 3016828
_T0_US = 1736405443000000.0  # the epoch µs the synthetic run starts at


def pipeline_timings(stages: int, micro_batches: int, forward_us: float, backward_us: float,
                     p2p_us: float = 0.0, schedule: str = "1f1b") -> dict:
    """The exact event-driven schedule of one pipeline step: stage -> ordered list of (kind "F"/"B",
    micro-batch, start_us, end_us) from the step's start. A forward of micro-batch j on stage s needs that
    micro-batch's forward on stage s-1 plus ``p2p_us`` (the activation's transfer); a backward needs the
    backward on stage s+1 plus ``p2p_us`` (the last stage's needs its own forward). ``schedule``: ``gpipe``
    (every forward, then every backward) or ``1f1b`` (stage s runs stages-s-1 forwards, then alternates one
    forward and one backward, then drains its backwards)."""
    if schedule not in PIPELINE_SCHEDULES:
        raise ValueError(f"schedule must be one of {PIPELINE_SCHEDULES}, not {schedule!r}")
    p, m = stages, micro_batches
    order = {}
    for s in range(p):
        if schedule == "gpipe":
            order[s] = [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
        else:
            warm = min(p - s - 1, m)
            ops = [("F", j) for j in range(warm)]
            f, b = warm, 0
            while b < m:
                if f < m:
                    ops.append(("F", f))
                    f += 1
                ops.append(("B", b))
                b += 1
            order[s] = ops
    done: dict = {}
    out = {s: [] for s in range(p)}
    nxt = {s: 0 for s in range(p)}
    free = {s: 0.0 for s in range(p)}
    while any(nxt[s] < len(order[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if nxt[s] >= len(order[s]):
                continue
            kind, j = order[s][nxt[s]]
            if kind == "F":
                dep = 0.0 if s == 0 else (done.get(("F", s - 1, j), None))
                dep = dep if s == 0 or dep is None else dep + p2p_us
            else:
                dep = done.get(("F", s, j)) if s == p - 1 else done.get(("B", s + 1, j))
                dep = dep if s == p - 1 or dep is None else dep + p2p_us
            if dep is None:
                continue
            start = max(free[s], dep)
            end = start + (forward_us if kind == "F" else backward_us)
            done[(kind, s, j)] = end
            out[s].append((kind, j, start, end))
            free[s] = end
            nxt[s] += 1
            progressed = True
        if not progressed:
            raise RuntimeError("the pipeline schedule deadlocks")
    return out


def write_pipeline_cluster(root: Path, stages: int = 4, micro_batches: int = 8, ranks_per_stage: int = 1,
                           steps: int = 3, forward_us: float = 1000.0, backward_us: float = 2000.0,
                           p2p_us: float = 50.0, schedule: str = "1f1b", step_gap_us: float = 3000.0) -> Path:
    """A pipeline-parallel torch_npu cluster of ``stages`` x ``ranks_per_stage`` ranks under ``root``;
    returns ``root``. Rank r is stage r // ranks_per_stage. Every step runs `pipeline_timings` (each forward
    two kernels, MatMul 70 % then Add 30 %; each backward likewise), steps ``step_gap_us`` apart. Each
    transfer is a ``hcom_send__`` on the sender from its forward's (backward's) end for ``p2p_us`` and a
    ``hcom_receive__`` on the receiver from when it is ready for that op (its previous op's end, or the
    step's start) until the data has arrived; both on the HCCL process's p2p group track and in
    kernel_details.csv (Accelerator Core HCCL) with the step id, as torch_npu writes them."""
    out = Path(root)
    plan = pipeline_timings(stages, micro_batches, forward_us, backward_us, p2p_us, schedule)
    ends = {(k, s, j): e for s, ops in plan.items() for k, j, _, e in ops}
    step_len = max(e for ops in plan.values() for *_, e in ops)
    groups = [[s * ranks_per_stage + i for i in range(ranks_per_stage)] for s in range(stages)]
    for stage in range(stages):
        for rank in groups[stage]:
            events = [{"ph": "M", "name": "process_name", "pid": _PY_PID, "tid": 0, "args": {"name": "Python"}},
                      {"ph": "M", "name": "process_name", "pid": _HW_PID, "tid": 0, "args": {"name": "Ascend Hardware"}},
                      {"ph": "M", "name": "thread_name", "pid": _HW_PID, "tid": 2, "args": {"name": "Stream 2"}},
                      {"ph": "M", "name": "process_name", "pid": _HCCL_PID, "tid": 0, "args": {"name": "HCCL"}},
                      {"ph": "M", "name": "thread_name", "pid": _HCCL_PID, "tid": 1,
                       "args": {"name": "Group 1 Communication"}}]
            kernels = []

            def put(name, pid, tid, core, start, dur, step):
                ts = _T0_US + start
                events.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur,
                               "args": {}})
                kernels.append(f"{step},{name},{name.split('__')[0] if core == 'HCCL' else name.split('_')[1]},{core},"
                               f"{ts:.3f}\t,{dur:.3f},0,0")

            for k in range(steps):
                base = k * (step_len + step_gap_us)
                step = k + 1
                events.append({"ph": "X", "name": f"ProfilerStep#{step}", "pid": _PY_PID, "tid": _PY_PID,
                               "ts": f"{_T0_US + base - 100.0:.3f}", "dur": step_len + 200.0, "args": {}})
                ready = 0.0
                for kind, j, start, end in plan[stage]:
                    src = (("F", stage - 1, j) if stage > 0 else None) if kind == "F" else \
                        (("B", stage + 1, j) if stage < stages - 1 else None)
                    if src is not None and ends[src] + p2p_us > ready:  # waits from ready until the data is in
                        put(f"hcom_receive__{kind}{j}_{stage}_1", _HCCL_PID, 1, "HCCL", base + ready,
                            ends[src] + p2p_us - ready, step)
                    cut = 0.7 * (end - start)
                    verb = "Forward" if kind == "F" else "Backward"
                    put(f"{verb}_MatMulV2", _HW_PID, 2, "AI_CORE", base + start, cut, step)
                    put(f"{verb}_Add", _HW_PID, 2, "AI_VECTOR_CORE", base + start + cut, end - start - cut, step)
                    sends = (kind == "F" and stage < stages - 1) or (kind == "B" and stage > 0)
                    if sends:
                        put(f"hcom_send__{kind}{j}_{stage}_1", _HCCL_PID, 1, "HCCL", base + end, p2p_us, step)
                    ready = end
            d = out / f"rank{rank}_ascend_pt"
            o = d / "ASCEND_PROFILER_OUTPUT"
            o.mkdir(parents=True, exist_ok=True)
            (d / f"profiler_info_{rank}.json").write_text(json.dumps({"config": {}, "rank_id": rank}))
            (d / "profiler_metadata.json").write_text("{}")
            (o / "trace_view.json").write_text(json.dumps(events))
            kernels.sort(key=lambda line: float(line.split(",")[4]))
            (o / "kernel_details.csv").write_text(
                "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n" +
                "\n".join(kernels) + "\n")
    return out


__all__ = ["write_legacy_cluster", "write_npu_cluster", "write_pipeline_cluster", "pipeline_timings",
           "PIPELINE_SCHEDULES"]
def cluster_layout(ranks: int, tp: int = 8, pp: int = 2) -> tuple[int, int, int]:
    """(tp, pp, dp) for ``ranks`` ranks: ``tp`` and ``pp`` as asked where they divide ``ranks``, else as large a
    power of two as does; dp = ranks / (tp x pp)."""
    while tp > 1 and ranks % tp:
        tp //= 2
    while pp > 1 and ranks % (tp * pp):
        pp //= 2
    return tp, pp, ranks // (tp * pp)


def _group_key(ranks) -> str:
    return "(" + ", ".join(str(r) for r in ranks) + ")"


def write_cluster_analysis(root: Path, data: Path, ranks: int, steps: int = 1, tp: int = 8, pp: int = 2,
                           slow_rank: int | None = None, seed: int = 0) -> Path:
    """msprof-analyze's cluster_analysis output for ``ranks`` ranks under ``root`` (returned): the four files
    of ``npu/cluster_analysis_16rank`` with its keys and per-step structure, deterministic from ``seed``.

    Ranks are laid out TP x PP x DP (`cluster_layout`): rank = d x tp x pp + p x tp + t, so a tensor-parallel
    group is ``tp`` consecutive ranks and a pipeline stage holds every rank with the same p, as in the real
    16-rank file (tp 8, pp 2). Steps are numbered from 2 (the real file profiles step 2).

    - ``cluster_step_trace_time.csv``: per step a ``rank`` row per rank, the real row of the same position in
      the same stage (stage 0: the real ranks 0-7, later stages: 8-15, which have the Bubble) with +-1 %
      jitter, Communication = Overlapped + Communication(Not Overlapped) kept; then a ``stage`` row per
      pipeline stage, the per-column maxima over its ranks. The straggler (``slow_rank``, default
      ``ranks * 3 // 4 + 1``) has 3x the Free time.
    - ``communication_group.json``: ``collective`` = the TP groups, the PP groups, the DP groups (dp > 1), every
      rank alone and the world; ``p2p`` = the pipeline stages (as in the real file).
    - ``cluster_communication.json``: per step, group ``p2p`` with one send per rank of every stage but the
      last (to the same position in the next stage, over RDMA) and its ``Total Op Info``, and per TP group
      two broadcasts over HCCS with an entry per member (the real ops' names and numbers, jittered).
    - ``cluster_communication_matrix.json``: the same ops' links, ``"src-dst"`` keys: a LOCAL self link and
      the link to the peer (send: the next stage; broadcast: the group's next member).
    """
    import json
    out = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(data) / CLUSTER16
    tp, pp, dp = cluster_layout(ranks, tp, pp)
    slow_rank = ranks * 3 // 4 + 1 if slow_rank is None else slow_rank
    real = [r for r in csv.DictReader((src / "cluster_step_trace_time.csv").open()) if r["Type"] == "rank"]
    real_vals = np.array([[float(r[c]) for c in STEP_COLUMNS] for r in real])  # 16 real ranks x columns
    col = {c: j for j, c in enumerate(STEP_COLUMNS)}
    comm = json.loads((src / "cluster_communication.json").read_text())
    send_info = comm["p2p"]["step2"]["hcom_send__822_0@13337953553061386822"]["0"]
    bcast = comm["(0, 1, 2, 3, 4, 5, 6, 7)"]["step2"]
    bcast_infos = [bcast[op]["0"] for op in sorted(bcast)]
    rank_ids = np.arange(ranks)
    stage_of = (rank_ids // tp) % pp
    t_of = rank_ids % tp
    stages = {p: rank_ids[stage_of == p].tolist() for p in range(pp)}
    tp_groups = [list(range(g, g + tp)) for g in range(0, ranks, tp)]
    pp_groups = [[d * tp * pp + p * tp + t for p in range(pp)] for d in range(dp) for t in range(tp)]
    dp_groups = [[d * tp * pp + p * tp + t for d in range(dp)] for p in range(pp) for t in range(tp)]
    groups = {"collective": tp_groups + (pp_groups if pp > 1 else []) + (dp_groups if dp > 1 else []) +
              [[r] for r in range(ranks)] + [list(range(ranks))],
              "p2p": [stages[p] for p in range(pp)]}
    (out / "communication_group.json").write_text(json.dumps(groups))

    step_ids = list(range(2, 2 + steps))
    lines = ["Step,Type,Index," + ",".join(STEP_COLUMNS)]
    comm_out: dict = {"p2p": {}}
    matrix_out: dict = {"p2p": {}}
    for k, step in enumerate(step_ids):
        rng = np.random.default_rng([seed, k])
        template = real_vals[np.where(stage_of == 0, 0, 8) + t_of % 8]
        vals = template * rng.uniform(0.99, 1.01, template.shape)
        vals[:, col["Bubble"]] = template[:, col["Bubble"]]  # 0.0 stays 0.0
        vals[slow_rank % ranks, col["Free"]] *= 3
        vals[:, col["Communication"]] = vals[:, col["Overlapped"]] + vals[:, col["Communication(Not Overlapped)"]]
        lines += [f"{step},rank,{r}," + ",".join(repr(float(v)) for v in vals[r]) for r in range(ranks)]
        for p in range(pp):
            top = vals[stages[p]].max(axis=0)
            cells = [repr(float(v)) if c != "Bubble" or v else "0" for c, v in zip(STEP_COLUMNS, top)]
            lines.append(f'{step},stage,"{_group_key(stages[p])}",' + ",".join(cells))
        key = f"step{step}"
        jitter = rng.uniform(0.95, 1.05, (ranks, 3))
        send = "hcom_send__822_0@13337953553061386822"
        senders = [r for r in range(ranks) if stage_of[r] < pp - 1]
        comm_out["p2p"][key] = {send: {str(r): _jittered(send_info, jitter[r, 0]) for r in senders}}
        total = {str(r): _jittered(send_info, jitter[r, 0], start=False) for r in senders}
        comm_out["p2p"][key]["Total Op Info"] = total
        matrix_out["p2p"][key] = {send: {}}
        for r in senders:
            ms = send_info["Communication Bandwidth Info"]["RDMA"]["Transit Time(ms)"] * jitter[r, 0]
            matrix_out["p2p"][key][send][f"{r}-{r}"] = _link("LOCAL", 0.0275528359375 * jitter[r, 0], 20.97152)
            matrix_out["p2p"][key][send][f"{r}-{r + tp}"] = _link("RDMA", ms, 20.97152)
        for g in tp_groups:
            gk = _group_key(g)
            comm_out.setdefault(gk, {})[key] = {}
            matrix_out.setdefault(gk, {})[key] = {}
            for i, (op, info) in enumerate(zip(sorted(bcast), bcast_infos)):
                comm_out[gk][key][op] = {str(r): _jittered(info, jitter[r, 1 + i]) for r in g}
                links = matrix_out[gk][key][op] = {}
                for j, r in enumerate(g):
                    peer = g[(j + 1) % len(g)]
                    links[f"{r}-{r}"] = _link("LOCAL", 0.00105972265625 * jitter[r, 1 + i], 0.131088)
                    if peer != r:
                        links[f"{r}-{peer}"] = _link("HCCS", 0.00185951953125 * jitter[r, 1 + i], 0.015504)
    (out / "cluster_step_trace_time.csv").write_text("\n".join(lines) + "\n")
    (out / "cluster_communication.json").write_text(json.dumps(comm_out))
    (out / "cluster_communication_matrix.json").write_text(json.dumps(matrix_out))
    return out


def _jittered(info: dict, factor: float, start: bool = True) -> dict:
    """A copy of a rank's real op entry with its times scaled by ``factor`` (sizes kept, bandwidth = size /
    time); without ``Start Timestamp(us)`` and ``Large Packet Ratio`` for a ``Total Op Info`` entry."""
    t = dict(info["Communication Time Info"])
    for k in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)"):
        t[k] = t[k] * factor
    if not start:
        t.pop("Start Timestamp(us)", None)
    bw = {}
    for name in TRANSPORTS:
        link = dict(info["Communication Bandwidth Info"][name])
        link["Transit Time(ms)"] = link["Transit Time(ms)"] * factor
        link["Bandwidth(GB/s)"] = (round(link["Transit Size(MB)"] / link["Transit Time(ms)"], 4)
                                   if link["Transit Time(ms)"] else 0)
        link["Size Distribution"] = {s: [n, ms * factor] for s, (n, ms) in link["Size Distribution"].items()}
        if not start:
            link.pop("Large Packet Ratio", None)
        bw[name] = link
    return {"Communication Time Info": t, "Communication Bandwidth Info": bw}


def _link(transport: str, ms: float, mb: float) -> dict:
    return {"Transport Type": transport, "Transit Time(ms)": ms, "Transit Size(MB)": mb,
            "Bandwidth(GB/s)": round(mb / ms, 4)}


__all__ = ["write_legacy_cluster", "write_npu_cluster", "write_cluster_analysis", "cluster_layout"]
