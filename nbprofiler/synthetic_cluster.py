"""Synthetic clusters of many ranks for benchmarks, shaped like the real shipped data.

- ``legacy``: one flat folder, like ``legacy/cluster_4rank_pipeline``: per rank a
  ``step_trace_raw_{rank}_detail_time.csv`` whose rows are the real rank-0/rank-2 rows (by pipeline
  stage) repeated over ``steps`` steps with shifted tick points and a little jitter, plus an average row computed like the writer's
  (mean of steps 2..N); and ``ascend_cluster_analyse_pipeline-parallel_{stages}_{ranks}_{rank}.csv``.
- ``npu``: per rank an ``*_ascend_ms`` folder with ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` (the
  real 591 rows of ``npu/kernel_details_591`` repeated ``kernel_repeat`` times, starts shifted) and
  ``step_trace_time.csv`` (the rank rows of ``npu/cluster_8rank`` cycled over ranks).
One rank is made a straggler (its step interval / free time x3) so the analyses have something to find.
Written only under the ``root`` you give (a temporary folder), never into the shared data.
"""
from __future__ import annotations

import csv
import io
import random
from pathlib import Path

LEGACY_SRC = "legacy/cluster_4rank_pipeline"
NPU_KERNELS = "npu/kernel_details_591/kernel_details.csv"
NPU_CLUSTER = "npu/cluster_8rank/cluster_step_trace_time.csv"


def write_legacy_cluster(root: Path, data: Path, ranks: int, steps: int = 200, stages: int = 2,
                         slow_rank: int | None = None, seed: int = 0) -> Path:
    """A flat legacy folder with ``ranks`` ranks; returns it. Rank r belongs to stage r * stages // ranks."""
    rng = random.Random(seed)
    out = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(data) / LEGACY_SRC
    slow_rank = ranks - 1 if slow_rank is None else slow_rank
    templates = {}
    for s, real_rank in enumerate((0, 2)[:stages] if stages <= 2 else [0, 2] * stages):
        rows = list(csv.reader((src / f"step_trace_raw_{real_rank}_detail_time.csv").open()))
        analyse = next(src.glob(f"ascend_cluster_analyse_pipeline-parallel_2_4_{real_rank}.csv")).read_text()
        templates[s] = (rows[0], rows[1:-1], rows[-1], analyse)
    for r in range(ranks):
        stage = min(r * stages // ranks, len(templates) - 1)
        header, body, _, analyse = templates[stage]
        period = int(body[1][2]) - int(body[1][1])  # one step's ticks
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        written = []
        for i in range(steps):
            base = body[i % len(body)]
            shift = (i - i % len(body)) * period
            row = []
            for name, v in zip(header, base):
                if name == "step_num":
                    row.append(str(i + 1))
                elif name.endswith("point") and v != "0":
                    row.append(str(int(v) + shift))
                elif name in ("iteration_interval", "total") and r == slow_rank:
                    # the straggler waits 3x longer for data (+3 ms): its interval and total grow alike
                    row.append(str(int(v) + 2 * int(base[header.index("iteration_interval")]) + 300000))
                else:
                    row.append(str(max(0, int(int(v) * (1 + rng.uniform(-0.01, 0.01))))) if v.isdigit() else v)
            w.writerow(row)
            written.append(row)
        # the average row as the real writer makes it: "-" then the rounded mean of steps 2..N
        later = written[1:] or written
        w.writerow(["-"] + [str(round(sum(int(x[j]) for x in later) / len(later))) for j in range(1, len(header))])
        (out / f"step_trace_raw_{r}_detail_time.csv").write_text(buf.getvalue())
        (out / f"ascend_cluster_analyse_pipeline-parallel_{stages}_{ranks}_{r}.csv").write_text(analyse)
    return out


def write_npu_cluster(root: Path, data: Path, ranks: int, kernel_repeat: int = 4, slow_rank: int | None = None) -> Path:
    """``ranks`` ``*_ascend_ms`` folders under ``root``; returns ``root``."""
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
        for k in range(kernel_repeat):
            # same rows, later in time: shift the Start Time (8th field) by k seconds
            for line in rows:
                parts = line.split(",", 8)
                parts[7] = f"{float(parts[7]) + k * 1e6:.1f}"
                lines.append(",".join(parts))
        (o / "kernel_details.csv").write_text("\n".join(lines) + "\n")
        src = step_rows[r % len(step_rows)]
        vals = {c: float(src[c]) for c in st_cols}
        if r == slow_rank:
            vals["Free"] *= 3
        (o / "step_trace_time.csv").write_text(
            "Step," + ",".join(st_cols) + ",Preparing\n" +
            "1," + ",".join(f"{vals[c]:.3f}" for c in st_cols) + ",0.000\n")
    return out


__all__ = ["write_legacy_cluster", "write_npu_cluster"]
