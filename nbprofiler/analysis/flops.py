"""FLOPs: per-operator floating-point work, rolled up by name scope, and the run's FLOPs summary.

Pure functions over the ``flops`` frame (one row per operator: ``op_name`` with its scope path, and either
``mflops``/``gflops``/``utilization_pct`` or the cube and vector pairs ``mflops_cube``,
``mflops_vector``, ...) and the ``flops_summary`` dict (``FLOPs``/``FLOPS``/``FLOPS_Utilization`` or
``cube_*``/``vec_*`` keys: MFLOPs, GFLOPS, %).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

ROLLUP_COLUMNS = ["scope", "name", "parent", "depth", "mflops", "share_pct", "ops", "x0", "x1"]


def op_flops(flops: pd.DataFrame) -> pd.DataFrame:
    """One row per operator: ``op_name``, ``mflops`` (cube + vector where the file splits them),
    ``utilization_pct`` (the higher of cube and vector where split; NaN where the file has none)."""
    if flops is None or not len(flops) or "op_name" not in flops.columns:
        return pd.DataFrame(columns=["op_name", "mflops", "utilization_pct"])
    if "mflops" in flops.columns:
        mflops = flops["mflops"].astype(float)
        util = flops["utilization_pct"].astype(float) if "utilization_pct" in flops.columns else np.nan
    else:
        parts = [c for c in ("mflops_cube", "mflops_vector") if c in flops.columns]
        mflops = flops[parts].astype(float).sum(axis=1, min_count=1) if parts else np.nan
        ucols = [c for c in ("utilization_cube_pct", "utilization_vector_pct") if c in flops.columns]
        util = flops[ucols].astype(float).max(axis=1) if ucols else np.nan
    return pd.DataFrame({"op_name": flops["op_name"].astype(str), "mflops": mflops, "utilization_pct": util})


def summary_figures(flops_summary: dict | None, flops: pd.DataFrame | None = None) -> dict:
    """``total_mflops``, ``gflops_per_s`` and ``utilization_pct`` of the run (cube + vector summed, the
    utilisation of the busier unit) from ``flops_summary``; without a summary file, ``total_mflops`` is
    the sum of the operators' and the other two are absent."""
    s = flops_summary or {}
    if "FLOPs" in s:
        return {"total_mflops": float(s["FLOPs"]), "gflops_per_s": float(s.get("FLOPS", np.nan)),
                "utilization_pct": float(s.get("FLOPS_Utilization", np.nan))}
    if "cube_FLOPs" in s or "vec_FLOPs" in s:
        return {"total_mflops": float(s.get("cube_FLOPs", 0)) + float(s.get("vec_FLOPs", 0)),
                "gflops_per_s": float(s.get("cube_FLOPS", 0)) + float(s.get("vec_FLOPS", 0)),
                "utilization_pct": max(float(s.get("cube_FLOPS_Utilization", 0)),
                                       float(s.get("vec_FLOPS_Utilization", 0)))}
    ops = op_flops(flops)
    return {"total_mflops": float(ops["mflops"].sum())} if len(ops) else {}


def scope_rollup(flops: pd.DataFrame, max_depth: int = 8) -> pd.DataFrame:
    """MFLOPs per name scope (``Default/network-WithLossCell/...``), as an icicle layout: one row per
    scope prefix down to ``max_depth`` levels (deeper names are folded into their level-``max_depth``
    scope): ``scope`` (the full prefix), ``name`` (its last part), ``parent``, ``depth`` (0 = top),
    ``mflops``, ``share_pct`` (0..100 of all operators), ``ops`` (operators under it), and ``x0``/``x1``
    (its span in [0, 1], children inside their parent's span, largest first)."""
    ops = op_flops(flops)
    ops = ops[ops["mflops"].notna() & (ops["mflops"] > 0)]
    if not len(ops):
        return pd.DataFrame(columns=ROLLUP_COLUMNS)
    total = float(ops["mflops"].sum())
    rows: dict[str, dict] = {}
    for name, mf in zip(ops["op_name"], ops["mflops"]):
        parts = [p for p in name.split("/") if p][:max_depth]
        for d in range(len(parts)):
            scope = "/".join(parts[:d + 1])
            r = rows.setdefault(scope, {"scope": scope, "name": parts[d], "parent": "/".join(parts[:d]),
                                        "depth": d, "mflops": 0.0, "ops": 0})
            r["mflops"] += float(mf)
            r["ops"] += 1
    out = pd.DataFrame(rows.values())
    out["share_pct"] = out["mflops"] / total * 100.0
    # lay children out inside the parent's span, largest first
    span = {"": (0.0, 1.0)}
    out = out.sort_values(["depth", "mflops"], ascending=[True, False], kind="stable", ignore_index=True)
    cursor: dict[str, float] = {}
    x0s, x1s = [], []
    for r in out.itertuples():
        p0, p1 = span[r.parent]
        parent_mf = total if r.parent == "" else float(rows[r.parent]["mflops"])
        start = cursor.get(r.parent, p0)
        end = start + (p1 - p0) * r.mflops / parent_mf
        cursor[r.parent] = end
        span[r.scope] = (start, end)
        x0s.append(start)
        x1s.append(end)
    out["x0"], out["x1"] = x0s, x1s
    return out[ROLLUP_COLUMNS]
