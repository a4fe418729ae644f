"""Memory: peaks per allocator component, operator allocations and their lifetimes, curves cut to a
size a browser draws.

Pure functions over the ``memory`` frame (allocator samples: ``component``, ``time_us``,
``allocated_mb``, ``reserved_mb``, ``active_mb``, ``device``) and the ``operator_memory`` frame (one row
per allocation: ``name``, ``size_kb``, ``alloc_us``, ``release_us``, ...). Both are on the timeline's
clock (µs from the profile's origin), so a window of the memory curve is a window of the timeline.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CURVE_POINTS = 4000   # samples per curve sent to the browser; peaks are kept (min/max per bucket)
METRICS = ["allocated_mb", "reserved_mb", "active_mb"]
PEAK_COLUMNS = ["device", "component", "samples", "start_us", "end_us", "peak_allocated_mb",
                "peak_allocated_at_us", "peak_reserved_mb", "final_allocated_mb"]
ALLOCATION_COLUMNS = ["name", "size_mb", "alloc_us", "release_us", "lifetime_us", "released"]


def memory_peaks(memory: pd.DataFrame) -> pd.DataFrame:
    """One row per (``device``, ``component``): ``samples``, ``start_us``, ``end_us``,
    ``peak_allocated_mb`` and when it was first reached (``peak_allocated_at_us``), ``peak_reserved_mb``,
    ``final_allocated_mb`` (the last sample: what stayed allocated). NaN where the file has no such column
    (the APP row of an Ascend run records reserved memory only). Sorted by peak allocated, largest first."""
    if memory is None or not len(memory):
        return pd.DataFrame(columns=PEAK_COLUMNS)
    rows = []
    for (device, comp), g in memory.sort_values("time_us", kind="stable").groupby(["device", "component"], sort=False):
        alloc = g["allocated_mb"]
        has_alloc = alloc.notna().any()
        rows.append({
            "device": device, "component": comp, "samples": len(g),
            "start_us": float(g["time_us"].min()), "end_us": float(g["time_us"].max()),
            "peak_allocated_mb": float(alloc.max()) if has_alloc else np.nan,
            "peak_allocated_at_us": float(g["time_us"].loc[alloc.idxmax()]) if has_alloc else np.nan,
            "peak_reserved_mb": float(g["reserved_mb"].max()) if g["reserved_mb"].notna().any() else np.nan,
            "final_allocated_mb": float(alloc.dropna().iloc[-1]) if has_alloc else np.nan,
        })
    out = pd.DataFrame(rows, columns=PEAK_COLUMNS)
    return out.sort_values("peak_allocated_mb", ascending=False, na_position="last", ignore_index=True)


def allocations(operator_memory: pd.DataFrame) -> pd.DataFrame:
    """One row per operator allocation: ``name``, ``size_mb``, ``alloc_us``, ``release_us`` (NaN: not
    released while profiling), ``lifetime_us`` (to the release, or to the end of the recording for one
    never released), ``released``; largest first."""
    if operator_memory is None or not len(operator_memory):
        return pd.DataFrame(columns=ALLOCATION_COLUMNS)
    om = operator_memory
    end = float(np.nanmax(np.r_[om["alloc_us"].to_numpy(float), om["release_us"].to_numpy(float)]))
    release = om["release_us"].astype(float)
    out = pd.DataFrame({
        "name": om["name"].astype(str),
        "size_mb": om["size_kb"].astype(float) / 1024.0,
        "alloc_us": om["alloc_us"].astype(float),
        "release_us": release,
        "lifetime_us": release.fillna(end) - om["alloc_us"].astype(float),
        "released": release.notna(),
    })
    return out.sort_values("size_mb", ascending=False, kind="stable", ignore_index=True)


def allocation_stats(operator_memory: pd.DataFrame) -> dict:
    """``allocations``, ``total_mb`` (sum of sizes), ``never_released`` and ``never_released_mb`` (held
    to the end of the recording: weights, workspaces — the static part), ``largest_name``,
    ``largest_mb``. Empty dict without allocation records."""
    a = allocations(operator_memory)
    if not len(a):
        return {}
    held = a[~a["released"]]
    return {"allocations": int(len(a)), "total_mb": float(a["size_mb"].sum()),
            "never_released": int(len(held)), "never_released_mb": float(held["size_mb"].sum()),
            "largest_name": str(a["name"].iloc[0]), "largest_mb": float(a["size_mb"].iloc[0])}


def alive_in(allocs: pd.DataFrame, t0_us: float, t1_us: float) -> pd.DataFrame:
    """The allocations alive at some moment of [t0_us, t1_us]: allocated before its end, released after
    its start (or never)."""
    released_after = allocs["release_us"].isna() | (allocs["release_us"] >= t0_us)
    return allocs[(allocs["alloc_us"] <= t1_us) & released_after]


def downsample(t: np.ndarray, y: np.ndarray, max_points: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most about ``max_points`` points of a step curve, keeping each bucket's first, minimum and
    maximum samples in time order, so no peak or trough is lost; NaN samples are dropped."""
    keep = ~np.isnan(y)
    t, y = t[keep], y[keep]
    idx = downsample_index(y, max_points)
    return t[idx], y[idx]


def downsample_index(y: np.ndarray, max_points: int = CURVE_POINTS) -> np.ndarray:
    """The sample indices `downsample` keeps of ``y`` (no NaN): all of them up to ``max_points``, else
    each bucket's first, minimum and maximum in order. Several curves sampled at the same times (the parts
    of a stacked curve) are cut alike by taking these indices of their sum."""
    if len(y) <= max_points:
        return np.arange(len(y))
    buckets = max(1, max_points // 3)
    edges = np.linspace(0, len(y), buckets + 1).astype(int)
    idx = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi <= lo:
            continue
        seg = y[lo:hi]
        idx.extend(sorted({lo, lo + int(np.argmin(seg)), lo + int(np.argmax(seg))}))
    return np.asarray(idx, dtype=int)
