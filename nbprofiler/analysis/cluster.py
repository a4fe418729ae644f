"""Cluster analyses: where a job of many ranks loses time, and which rank or step is the straggler.

Pure functions over the reduced per-rank frames (see `nbprofiler.model.parallel`); `rank_summary(cluster)`
gathers those frames (in parallel for many ranks) and caches them on the `Cluster`. Every finding
carries its evidence: the stage, the value, the cluster median and a robust z-score
(0.6745 x (value - median) / MAD, the "modified z-score" of Iglewicz and Hoaglin; a rank is an outlier
above 3.5), so a flag can be checked by hand.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from pathlib import Path

import pandas as pd

from ..model.parallel import map_chunks
from .cluster_reduce import communication_parts, gather_rank_summaries

Z_THRESHOLD = 3.5
# MAD -> standard deviation of a normal distribution; the mean absolute deviation stands in when more
# than half the ranks are identical (MAD 0), scaled as in Iglewicz and Hoaglin.
MAD_TO_Z = 0.6745
MEAN_AD_TO_Z = 0.7979


def rank_summary(cluster, engine: str | None = None, max_workers: int | None = None) -> dict:
    """Per-rank reduced frames of ``cluster``, gathered with ``engine`` (default: ``cluster.engine``,
    else the default of `nbprofiler.model.parallel.map_chunks`: serial below 16 ranks or on one CPU, else
    a first chunk reduced here decides from its measured cost and the cores found idle meanwhile) and
    cached on the cluster (every engine gives the same frames, so one cache entry serves them all). Keys:
    ``steps`` (one row per rank:
    ``rank``, ``steps``, stage means in ms, ``total_ms``, ``average_source`` "file"/"mean", plus
    ``stage_ms``/``bubble_ms``/... where the source has them), ``step_totals`` (rank, step, stages),
    ``op_types`` (rank, kind, op_type, total_time_us, count), ``stages``, ``problems``."""
    engine = engine or getattr(cluster, "engine", None)
    # Each run carries the Cluster's own key (rank, or rank@session when a rank has several sessions)
    # into the worker, which labels its rows with it: ranks alone are not unique.
    def build():
        runs = [dataclasses.replace(p.run, info={**p.run.info, "label": key}) for key, p in cluster.profiles.items()]
        return gather_rank_summaries(runs, engine=engine, max_workers=max_workers)

    return cluster.cached("rank_summary", build) if hasattr(cluster, "cached") else build()


def rank_steps(summary: dict) -> pd.DataFrame:
    """The per-rank step-trace averages (``summary["steps"]``) indexed by rank, numeric order."""
    df = summary["steps"].copy()
    df = df.set_index("rank")
    return df.loc[sorted(df.index, key=_rank_key)]


def rank_stage_matrix(summary: dict) -> pd.DataFrame:
    """ranks x stages (ms): the rows of `rank_steps` restricted to the stage columns that stack up to
    the step, in display order. Suited to a heatmap."""
    steps = rank_steps(summary)
    return steps[[c for c in summary["stages"] if c in steps.columns]].astype(float)


# The most rows (or columns) a per-rank heatmap draws: past it, consecutive ranks share a row (a bin).
MAX_RANK_BINS = 256


def rank_bins(ranks, max_bins: int = MAX_RANK_BINS) -> pd.Series:
    """rank -> its bin's label (``"0-15"``; the rank itself when each bin holds one): the ranks in numeric
    order cut into consecutive bins of ceil(ranks / ``max_bins``), so at most ``max_bins`` bins. A rank's bin
    holds its tensor-parallel neighbours when the bin size divides the TP size or is a multiple of it."""
    order = sorted((str(r) for r in ranks), key=_rank_key)
    size = max(1, -(-len(order) // max(1, max_bins)))
    labels = {}
    for start in range(0, len(order), size):
        chunk = order[start:start + size]
        label = chunk[0] if len(chunk) == 1 else f"{chunk[0]}-{chunk[-1]}"
        labels.update({r: label for r in chunk})
    return pd.Series(labels, dtype=object)


def binned_ranks(values: pd.DataFrame, max_bins: int = MAX_RANK_BINS) -> pd.DataFrame:
    """A ranks x columns frame (indexed by rank) as bins x columns, long: ``bin`` (label, bins in rank
    order), ``column``, ``ranks`` (ranks in the bin), ``max`` (the bin's largest value), ``max_rank`` (the
    rank that has it), ``mean``, ``min``. The largest value is kept so one slow rank still shows in its bin."""
    bins = rank_bins(values.index, max_bins)
    long = values.rename_axis("rank").reset_index().melt(id_vars="rank", var_name="column", value_name="value")
    long["rank"] = long["rank"].astype(str)
    long["bin"] = long["rank"].map(bins)
    long["value"] = long["value"].astype(float)
    g = long.groupby(["bin", "column"], sort=False)["value"]
    out = g.agg(["max", "mean", "min", "size"]).rename(columns={"size": "ranks"})
    idx = g.idxmax().dropna().astype(int)
    out["max_rank"] = pd.Series(long.loc[idx.to_numpy(), "rank"].to_numpy(), index=idx.index)
    out = out.reset_index()
    order = {b: i for i, b in enumerate(dict.fromkeys(bins.to_numpy()))}
    cols = {c: i for i, c in enumerate(values.columns)}
    out = out.sort_values(["bin", "column"], key=lambda s: s.map(order) if s.name == "bin" else s.map(cols),
                          ignore_index=True)
    return out[["bin", "column", "ranks", "max", "max_rank", "mean", "min"]]


def top_ranks(values: pd.Series, n: int) -> list[str]:
    """The ``n`` ranks with the largest ``values`` (indexed by rank), largest first (ties in rank order)."""
    s = values.astype(float).dropna()
    s = s.loc[sorted(s.index, key=_rank_key)]
    return [str(r) for r in s.sort_values(ascending=False, kind="stable").index[:n]]


def robust_z(values: pd.Series) -> pd.Series:
    """Modified z-score: 0.6745 (x - median) / MAD; with MAD 0, (x - median) / (1.2533 x mean absolute
    deviation); all zeros when every value is the same."""
    x = values.astype(float)
    med = x.median()
    dev = (x - med).abs()
    mad = dev.median()
    if mad > 0:
        return MAD_TO_Z * (x - med) / mad
    mean_ad = dev.mean()
    if mean_ad > 0:
        return MEAN_AD_TO_Z * (x - med) / mean_ad
    return pd.Series(0.0, index=x.index)


# A rank is never called an outlier for an excess below this share of its step (robust z finds 0.07 ms of
# Preparing "significant" when every other rank has the same 0.2 ms; it costs 0.04 % of an 810 ms step).
MIN_OUTLIER_SHARE = 0.01


def slow_ranks(summary: dict, threshold: float = Z_THRESHOLD, min_share: float = MIN_OUTLIER_SHARE) -> pd.DataFrame:
    """Every (rank, stage) whose value lies more than ``threshold`` robust standard deviations above the
    ranks' median, worst first. Columns: ``rank``, ``stage``, ``value_ms``, ``median_ms``,
    ``excess_ms`` (value - median), ``z`` (robust z), ``share_of_step`` (this stage's share of the
    rank's step, 0..1), ``flagged`` (bool: the z passes ``threshold`` and the excess costs at least
    ``min_share`` of the rank's step; a row over ``threshold`` that costs less is listed unflagged). The
    slowest rank by ``total_ms`` is always listed (flagged or
    not), so the table answers "who is slowest, and is it significant?"."""
    steps = rank_steps(summary)
    cols = [c for c in summary["stages"] + ["total_ms"] if c in steps.columns]
    columns = ["rank", "stage", "value_ms", "median_ms", "excess_ms", "z", "share_of_step", "flagged"]
    total = steps["total_ms"].astype(float).to_numpy() if "total_ms" in steps else np.full(len(steps), np.nan)
    parts = []
    for stage in cols:  # vectorised over the ranks: thousands of ranks x a dozen stages
        value = steps[stage].astype(float).to_numpy()
        z = robust_z(steps[stage]).to_numpy(float)
        med = float(steps[stage].median())
        with np.errstate(invalid="ignore", divide="ignore"):
            flagged = (z > threshold) & ~(value - med < min_share * total)
            share = np.where(total != 0, value / total, np.nan)
        keep = z > threshold
        if stage == "total_ms":
            keep |= value == steps[stage].max()
        if keep.any():
            parts.append(pd.DataFrame({"rank": steps.index[keep], "stage": stage, "value_ms": value[keep],
                                       "median_ms": med, "excess_ms": value[keep] - med, "z": z[keep],
                                       "share_of_step": share[keep], "flagged": flagged[keep]}))
    out = pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)
    return out.sort_values(["flagged", "z"], ascending=False, ignore_index=True)


def slowest_rank(summary: dict) -> str | None:
    steps = rank_steps(summary)
    return str(steps["total_ms"].idxmax()) if "total_ms" in steps and len(steps) else None


def slow_steps(summary: dict, threshold: float = Z_THRESHOLD) -> pd.DataFrame:
    """Steps that are outliers on their rank (robust z of ``total_ms`` over that rank's steps) and the
    stage that grew most against the rank's median step. Columns: ``rank``, ``step``, ``total_ms``,
    ``median_ms``, ``z``, ``stage`` (the stage with the largest excess), ``stage_excess_ms``."""
    st = summary["step_totals"]
    stages = [c for c in summary["stages"] if c in st.columns]
    columns = ["rank", "step", "total_ms", "median_ms", "z", "stage", "stage_excess_ms"]
    if st.empty:
        return pd.DataFrame(columns=columns)
    # `robust_z` of each rank's steps, vectorised over the ranks (thousands of ranks x their steps)
    by = st["rank"]
    x = st["total_ms"].astype(float)
    med = x.groupby(by, sort=False).transform("median")
    dev = (x - med).abs()
    mad = dev.groupby(by, sort=False).transform("median")
    mean_ad = dev.groupby(by, sort=False).transform("mean")
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(mad > 0, MAD_TO_Z * (x - med) / mad, np.where(mean_ad > 0, MEAN_AD_TO_Z * (x - med) / mean_ad, 0.0))
    hit = (x.groupby(by, sort=False).transform("size") >= 3).to_numpy() & (z > threshold)  # 3 steps or more
    if not hit.any():
        return pd.DataFrame(columns=columns)
    rows = st.loc[hit]
    excess = (rows[stages].astype(float) - st[stages].astype(float).groupby(by, sort=False).transform("median").loc[hit]) \
        if stages else pd.DataFrame(index=rows.index)
    worst = excess.idxmax(axis=1) if stages else pd.Series(None, index=rows.index, dtype=object)
    out = pd.DataFrame({"rank": rows["rank"].to_numpy(), "step": rows["step"].astype(int).to_numpy(),
                        "total_ms": x[hit].to_numpy(), "median_ms": med[hit].to_numpy(), "z": z[hit],
                        "stage": worst.to_numpy(),
                        "stage_excess_ms": [excess.at[i, w] if isinstance(w, str) else np.nan
                                            for i, w in zip(rows.index, worst)]})
    return out.sort_values("z", ascending=False, ignore_index=True)


def step_interval_proposal(summary: dict) -> dict | None:
    """MindInsight's cluster step-interval proposer: the rank with the longest average step interval
    (``val`` ms) and how far it lies above the ranks' mean (``percent`` = (val - mean) / mean x 100).
    Uses ``iteration_interval_ms`` (legacy/CANN) or ``preparing_ms`` (new format)."""
    steps = rank_steps(summary)
    col = next((c for c in ("iteration_interval_ms", "preparing_ms") if c in steps.columns), None)
    if col is None or steps[col].isna().all():
        return None
    mean = float(steps[col].mean())
    rank = steps[col].idxmax()
    val = float(steps.at[rank, col])
    return {"rank_id": rank, "val": round(val, 4), "percent": round((val - mean) / mean * 100, 2) if mean else 0.0,
            "stage": col}


def communication_summary(cluster, engine: str | None = None) -> dict:
    """The cluster's communication reduced where each rank is parsed (`cluster_reduce.reduce_communication`
    in chunks on ``engine``, default the cluster's; see `nbprofiler.model.parallel`), combined and cached on
    the cluster: the keys of `communication_parts` (``groups``: the communication groups of
    communication_group.json, each once) plus ``pipeline_rows`` ((rank, average row) of each
    rank's ascend_cluster_analyse file), ``flops`` (rank -> cube MFLOPs), ``stage_num``. No rank's frames
    stay in this process."""
    from .cluster_reduce import cluster_groups, reduce_communication
    engine = engine or getattr(cluster, "engine", None)
    def build():
        runs = [dataclasses.replace(p.run, info={**p.run.info, "label": str(key)}) for key, p in cluster.profiles.items()]
        parts = map_chunks(reduce_communication, runs, engine=engine)
        cat = lambda k: pd.concat([p[k] for p in parts if len(p[k])], ignore_index=True) \
            if any(len(p[k]) for p in parts) else (parts[0][k] if parts else pd.DataFrame())  # noqa: E731
        out = {k: cat(k) for k in ("links", "by_rank", "bandwidth", "average_links")}
        found = communication_parts({"communication_groups": cluster_groups(runs)})["groups"]
        groups = [g for g in [found, *(p["groups"] for p in parts)] if len(g)]
        out["groups"] = pd.concat(groups, ignore_index=True).drop_duplicates(["kind", "group"], ignore_index=True) \
            if groups else pd.DataFrame()
        out["links_legacy"] = any(p["links_legacy"] for p in parts)
        out["by_rank_source"] = next((p["by_rank_source"] for p in parts if p["by_rank_source"]), "")
        out["pipeline_rows"] = [r for p in parts for r in p["pipeline_rows"]]
        out["flops"] = {k: v for p in parts for k, v in p["flops"].items()}
        out["stage_num"] = next((p["stage_num"] for p in parts if p.get("stage_num")), None)
        return out

    return cluster.cached("communication_summary", build) if hasattr(cluster, "cached") else build()


def pipeline_flops_imbalance(cluster, stages: dict[int, list[str]] | None = None) -> dict | None:
    """MindInsight's pipeline FLOPs proposer from ``flops_summary_*``: per pipeline stage the mean of its
    ranks' cube MFLOPs; the heaviest stage (``stage``, 1-based), its ``val`` and ``percent`` =
    (val - mean over stages) / mean x 100. ``stages`` maps stage -> ranks; by default ranks are split
    evenly in order over the ``stage_num`` of the cluster_analyse files."""
    summary = communication_summary(cluster)
    flops = summary["flops"]
    if not flops:
        return None
    if stages is None:
        n = summary["stage_num"]
        if not n:
            return None
        ranks = sorted(flops, key=_rank_key)
        per = max(1, len(ranks) // int(n))
        stages = {s + 1: ranks[s * per:(s + 1) * per] for s in range(int(n))}
    means = {s: float(np.mean([flops[r] for r in rs if r in flops])) for s, rs in stages.items() if rs}
    overall = float(np.mean(list(means.values())))
    stage = max(means, key=means.get)
    return {"stage": stage, "val": round(means[stage], 4),
            "percent": round((means[stage] - overall) / overall * 100, 2) if overall else 0.0}


def communication_matrix(cluster) -> pd.DataFrame:
    """Per link, summed over the profiled steps (the average rows of the files excluded): ``src``,
    ``dst`` (str ranks), ``transport``, ``time_ms``, ``size`` (as written; legacy units unlabelled),
    ``bandwidth`` (size / time: the file's units per ms), ``steps``. Sources: legacy ``hccl_raw`` link
    data of every rank (each link once, from the rank that recorded it), else the new-format
    ``communication_matrix`` frame (communication_matrix.json / cluster_communication_matrix.json:
    ``size`` in MB, so ``bandwidth`` is MB/ms = GB/s). ``attrs["size_unit"]`` / ``attrs["bandwidth_unit"]``
    say which (hccl_raw names neither unit). Reduced where each rank is parsed (`communication_summary`)."""
    summary = communication_summary(cluster)
    g = summary["links"]
    if g.empty:
        return pd.DataFrame(columns=["src", "dst", "transport", "time_ms", "size", "bandwidth", "steps"])
    # a link seen by both ends is kept once: from the rank that recorded the most time for it
    g = g.sort_values("time_ms", ascending=False).drop_duplicates(["src", "dst", "transport"])
    g["bandwidth"] = np.where(g["time_ms"] > 0, g["size"] / g["time_ms"].where(g["time_ms"] > 0), np.nan)
    g["src"] = g["src"].astype(str)
    g["dst"] = g["dst"].astype(str)
    out = g[["src", "dst", "transport", "time_ms", "size", "bandwidth", "steps"]].sort_values(
        ["src", "dst", "transport"], key=lambda s: s.map(_rank_key) if s.name != "transport" else s,
        ignore_index=True)
    out.attrs["size_unit"], out.attrs["bandwidth_unit"] = (("hccl_raw's unit", "hccl_raw's unit")
                                                           if summary["links_legacy"] else ("MB", "GB/s"))
    return out


def link_bandwidth(cluster) -> pd.DataFrame:
    """New-format per-rank, per-transport communication totals from communication.json /
    cluster_communication.json: ``rank``, ``transport``, ``size_mb``, ``transit_ms`` (sums over ops)
    and ``bandwidth_gbps`` (= size_mb / transit_ms, MB/ms = GB/s), ``ops``. Idle transports are dropped."""
    out = communication_summary(cluster)["bandwidth"]
    return out.sort_values(["rank", "transport"], kind="stable", ignore_index=True)


def communication_by_rank(cluster) -> pd.DataFrame:
    """Per rank, communication time summed over its ops: ``rank``, ``ops``, ``elapse_ms`` = ``transit_ms``
    + ``wait_ms`` + ``idle_ms``, and ``sync_ms`` (part of the wait). From the new-format communication
    files; else from legacy ``hccl_raw``, summed over the steps: ``transit_ms`` its communication cost and
    ``wait_ms`` its wait cost (two separate times, as MindInsight's bars show them: rank 0 of
    cluster_4rank_pipeline communicates 2.6 ms and waits 270 ms a step), no op count, sync or idle.
    ``attrs["source"]`` says which."""
    summary = communication_summary(cluster)
    out = summary["by_rank"].copy()
    if summary["by_rank_source"].startswith("communication"):  # by rank id as written, as the files list them
        out = out.sort_values("rank", kind="stable", ignore_index=True)
    if summary["by_rank_source"]:
        out.attrs["source"] = summary["by_rank_source"]
    return out


# MindInsight's cluster proposer thresholds (its ParallelProposer): a link 20 % below the mean bandwidth
# of its transport; communication over 10 % of a stage's time.
SLOW_LINK_FRACTION = 0.2
STAGE_COMMUNICATION_FRACTION = 0.1


def slow_links(cluster, fraction: float = SLOW_LINK_FRACTION) -> pd.DataFrame:
    """Links whose bandwidth is more than ``fraction`` below the mean of their transport, slowest first,
    as MindInsight's cluster_link proposal finds them: from each rank's ``hccl_raw`` average row (the
    writer's own average per link), every entry whose source and destination differ, the mean taken
    per transport over those entries. Columns: ``src``, ``dst``, ``transport``, ``bandwidth``,
    ``mean_bandwidth``, ``below_mean_pct`` (0-100), ``recorded_by`` (rank key), ``slowest`` (bool: the
    one link per transport MindInsight names)."""
    links = communication_summary(cluster)["average_links"]
    cols = ["src", "dst", "transport", "bandwidth", "mean_bandwidth", "below_mean_pct", "recorded_by", "slowest"]
    if links.empty:
        return pd.DataFrame(columns=cols)
    links = links[links["src"] != links["dst"]].copy()
    links["mean_bandwidth"] = links.groupby("transport")["bandwidth"].transform("mean")
    below = (links["mean_bandwidth"] - links["bandwidth"]) / links["mean_bandwidth"]
    links["below_mean_pct"] = below * 100
    links = links[below > fraction].sort_values("below_mean_pct", ascending=False, kind="stable")
    links["slowest"] = ~links.duplicated("transport")
    return links[cols].reset_index(drop=True)


def pipeline_communication(cluster) -> dict | None:
    """MindInsight's pipeline-parallel communication numbers from each rank's ``ascend_cluster_analyse``
    average row: ``between_stage_pct`` (receive time over computation + communication, all ranks),
    ``within_stage`` ({stage: collective communication without receive over computation + communication
    of that stage's ranks, 0-100}) and ``worst_stage`` / ``worst_stage_pct`` (the stage MindInsight names,
    when over `STAGE_COMMUNICATION_FRACTION`); None when the files are not a pipeline-parallel run."""
    rows = communication_summary(cluster)["pipeline_rows"]
    stages, size = _pipeline_shape(cluster)
    if not rows or not stages:
        return None
    comp = sum(a["computation_time_ms"] for _, a in rows)
    comm = sum(a["communication_alone_time_ms"] for _, a in rows)
    recv = sum(a["receive_alone_time_ms"] for _, a in rows)
    within, spent = {}, {}
    for rank, a in rows:
        stage = int(rank // (size / stages) + 1)
        within[stage] = within.get(stage, 0.0) + a["collective_communication_alone_time_ms"]
        spent[stage] = spent.get(stage, 0.0) + a["computation_time_ms"] + a["communication_alone_time_ms"]
    within_pct = {s: within[s] / spent[s] * 100 for s in sorted(within) if spent[s] > 0}
    worst = max(within_pct, key=within_pct.get) if within_pct else None
    over = worst is not None and within_pct[worst] > STAGE_COMMUNICATION_FRACTION * 100
    return {"between_stage_pct": recv / (comp + comm) * 100 if comp > 0 and comm > 0 and recv > 0 else 0.0,
            "within_stage": within_pct, "worst_stage": worst if over else None,
            "worst_stage_pct": within_pct[worst] if over else None}


def _pipeline_shape(cluster) -> tuple[int, int]:
    """(stages, ranks) from an ``ascend_cluster_analyse_pipeline-parallel_<stages>_<ranks>_<id>.csv``."""
    import re
    for prof in cluster:
        for path in prof.run.files.get("cluster_analyse", []):
            m = re.search(r"pipeline-parallel_(\d+)_(\d+)_\d+\.csv$", Path(path).name)
            if m:
                return int(m.group(1)), int(m.group(2))
    return 0, 0


def _rank_key(r):
    s = str(r)
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


__all__ = ["rank_summary", "rank_steps", "rank_stage_matrix", "robust_z", "slow_ranks", "slowest_rank",
           "slow_steps", "step_interval_proposal", "pipeline_flops_imbalance", "communication_matrix",
           "link_bandwidth", "communication_by_rank", "communication_summary", "communication_parts", "slow_links", "pipeline_communication", "MIN_OUTLIER_SHARE",
           "SLOW_LINK_FRACTION", "STAGE_COMMUNICATION_FRACTION", "rank_bins", "binned_ranks", "top_ranks",
           "MAX_RANK_BINS"]
