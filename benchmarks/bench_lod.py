"""LOD queries on a 5M-event timeline: window cut + sub-pixel merge vs a brute-force numpy filter of
the same window in the same run (the baseline a view without an index would pay).

    python benchmarks/bench_lod.py --quick     # 500k events
    python benchmarks/bench_lod.py             # 5M events

Events are synthetic but shaped like a device timeline: 24 tracks, log-normal durations (median ~5 us)
plus a few very long events per track (steps, scopes) that start before most windows. Prints JSON:
index build time, median ms per query for 1% / 0.01% windows and the full range at 1600 px, glyphs.
Targets (5M): < 50 ms per window query, < 0.5 s full range, <= ~20k glyphs.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import pandas as pd

from nbprofiler.analysis.timeline import build_index, lod_query


def synthetic_timeline(n: int, tracks: int = 24, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    track = rng.integers(0, tracks, n)
    dur = rng.lognormal(np.log(5.0), 1.0, n)
    start = np.empty(n)
    for t in range(tracks):
        m = track == t
        start[m] = np.cumsum(dur[m] + rng.exponential(3.0, m.sum()))
    long = rng.choice(n, size=tracks * 40, replace=False)
    dur[long] = rng.uniform(1e5, 5e6, len(long))
    types = np.array(["Conv2D", "MatMul", "ReLU", "Add", "Cast", "TransData", "AllReduce", "BatchNorm"])
    df = pd.DataFrame({"track": track.astype(np.int32), "name": pd.Categorical(types[rng.integers(0, 8, n)]),
                       "start_us": start, "dur_us": dur})
    df["op_type"] = df["name"]
    return df.sort_values(["track", "start_us"], kind="stable").reset_index(drop=True)


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def run(n: int, width: int = 1600, repeat: int = 7) -> dict:
    ev = synthetic_timeline(n)
    t = time.perf_counter()
    idx = build_index(ev)
    build_s = time.perf_counter() - t
    lo, hi = idx.t_min, idx.t_max
    start = ev["start_us"].to_numpy()
    end = start + ev["dur_us"].to_numpy()
    out = {"events": n, "machine": f"{os.cpu_count()} cpu", "index_build_s": round(build_s, 3)}
    rng = np.random.default_rng(1)
    for label, frac in (("window_1pct", 0.01), ("window_0.01pct", 1e-4), ("full", 1.0)):
        span = (hi - lo) * frac
        t0s = lo + rng.uniform(0, (hi - lo) - span, repeat) if frac < 1 else np.full(repeat, lo)
        it = iter(t0s)
        glyphs = []

        def q():
            a = next(it)
            glyphs.append(len(lod_query(idx, a, a + span, width)))
        ms = _median_ms(q, repeat)
        it2 = iter(t0s)
        brute = _median_ms(lambda: np.flatnonzero((start <= (b := next(it2)) + span) & (end >= b)), repeat)
        out[label] = {"lod_ms": round(ms, 2), "brute_filter_ms": round(brute, 2),
                      "ratio_lod_vs_filter": round(ms / brute, 2), "max_glyphs": int(max(glyphs))}
    print(json.dumps(out), flush=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="500k events instead of 5M")
    ap.add_argument("--events", type=int, default=5_000_000)
    args = ap.parse_args(argv)
    return run(500_000 if args.quick else args.events)


if __name__ == "__main__":
    main()
