"""Synthetic clusters of many ranks for benchmarks, shaped like the real shipped data.

- ``legacy``: one flat folder, like ``legacy/cluster_4rank_pipeline``: per rank a
  ``step_trace_raw_{rank}_detail_time.csv`` whose rows are the real rank-0/rank-2 rows (by pipeline
  stage) repeated over ``steps`` steps with shifted tick points and a little jitter, plus an average row computed like the writer's
  (mean of steps 2..N); and ``ascend_cluster_analyse_pipeline-parallel_{stages}_{ranks}_{rank}.csv``.
- ``npu``: per rank an ``*_ascend_ms`` folder with ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` (the
  real 591 rows of ``npu/kernel_details_591`` repeated ``kernel_repeat`` times, starts shifted) and
  ``step_trace_time.csv`` (the rank rows of ``npu/cluster_8rank`` cycled over ranks).
One rank is made a straggler (its step interval / free time x3, or one operator type made slower on it) so the
analyses have something to find.
Written only under the ``root`` you give (a temporary folder), never into the shared data.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

LEGACY_SRC = "legacy/cluster_4rank_pipeline"
NPU_KERNELS = "npu/kernel_details_591/kernel_details.csv"
NPU_CLUSTER = "npu/cluster_8rank/cluster_step_trace_time.csv"


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
                      slow_op_type: str | None = None, slow_op_ms: float = 0.0, step_row: int | None = None) -> Path:
    """``ranks`` ``*_ascend_ms`` folders under ``root``; returns ``root``.

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
        d = out / f"node{r // 8}_{1000 + r}_20261121000000000_ascend_ms"
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


__all__ = ["write_legacy_cluster", "write_npu_cluster"]
