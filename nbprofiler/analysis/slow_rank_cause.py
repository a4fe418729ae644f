"""Why the slow ranks are slow, and which links run below their transport's bandwidth.

`slow_rank_causes(cluster)` is the frame ``slow_rank_causes`` (declared in `nbprofiler.schema.ANALYSIS_FRAMES`):
for each slow rank (every rank `cluster.slow_ranks` flags as an outlier in some stage; the slowest rank when none
is), a ranked list of what differs from the cluster, each cause with the ms per step it explains, its evidence and
the view that shows it:

- ``stage``: a part of the step (`analysis.breakdown`: computing, communication overlapped, exposed
  communication waiting for the other ranks or moving data, free, host-bound) where the rank's median over its
  steps exceeds the median over its peers of that part (view ``breakdown``). The peers are the ranks of the
  rank's pipeline stage where the job is pipeline-parallel (`analysis.pipeline.pipeline_stages`: stages do
  different work and idle differently by design), else every rank. The exposed communication is split
  into wait and transit where the rank and at least one other rank have the split, each against the median of
  the ranks that have it; else it is one cause. Waiting for the other ranks inside a collective is never a
  cause: a rank waits there because another rank arrived late (the rank's note says how much longer it waits
  than the median, the symptom of a straggler elsewhere).
- ``op_type``: a device operator type (any kind but communication) whose time per step on the rank exceeds the
  median over the ranks with operator data (a rank without the type counts 0): view ``operators``. Time per step
  = the type's total time / the rank's profiled steps. Only where the rank and another rank have operator data;
  otherwise the rank's ``op_types`` note says "not loaded".
- ``link``: a slow link (`link_speeds`) whose communication the rank takes part in, with the time it costs a
  step: view ``links``.

A specific cause lies inside a stage (op types inside computing, links inside the transit or the exposed
communication): the stage is listed with what its specific causes leave unexplained (its excess minus their ms),
so the causes' ms do not count the same time twice. Causes are ranked by ms explained, leading cause first.

`link_speeds(cluster)` is the frame ``link_speeds``: every link between two ranks (`cluster.communication_matrix`,
summed over the profiled steps; where the files give no source -> destination links, each rank's traffic per
transport from the communication files, `cluster.link_bandwidth`), its bandwidth, the expected bandwidth of its
transport (the median over the cluster's links of that transport: the files give no nominal figure) and, for a
link below `SLOW_LINK_SHARE` of it, the ranks it holds back (the members of the communication groups whose ops use
it, else its two ends) and the time it costs a step (its transit time minus the time its bytes would take at the
expected bandwidth). Legacy hccl_raw links have no stated unit: their bandwidths are compared as written, the GB/s
columns are NaN and the ms still hold (size / bandwidth is a time whatever the unit).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..schema import ANALYSIS_FRAMES
from . import cluster as C
from .breakdown import PART_LABELS, rank_breakdown, rank_medians
from .labels import fmt_ms

CAUSES_SPEC = ANALYSIS_FRAMES["slow_rank_causes"]
LINKS_SPEC = ANALYSIS_FRAMES["link_speeds"]
# A link is slow below this share of its transport's median bandwidth: 20 % below, MindInsight's threshold
# (`cluster.SLOW_LINK_FRACTION`) taken against the median.
SLOW_LINK_SHARE = 1.0 - C.SLOW_LINK_FRACTION
# The op types and links listed per rank (the largest excesses).
TOP_OP_TYPES = 5
TOP_LINKS = 3
# A cause explains at least this much a step (1 µs, the step trace's resolution); a stage its op types explain
# entirely leaves a rounding remainder below it.
MIN_CAUSE_MS = 1e-3
# A rank that is not an outlier has a leading cause only when it accounts for at least this share of the rank's
# step over the median (a smaller difference is within what the parts' noise moves).
EXPLAINS_SHARE = 0.25
# At most this many slow ranks are explained (the slowest first).
MAX_RANKS = 8
# The parts of the step a rank's excess is looked for in, in the breakdown's order.
STAGE_PARTS = ("computing_ms", "comm_overlapped_ms", "comm_exposed_ms", "wait_ms", "transit_ms", "free_ms",
               "host_bound_ms")
VIEWS = {"stage": "breakdown", "op_type": "operators", "link": "links"}
# Where a view's evidence is, as a finding says it.
VIEW_PLACES = {"breakdown": "the cluster page's step breakdown", "operators": "rank {rank}'s Operators page",
               "links": "the cluster page's slow links"}


def _empty(spec) -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.Series(dtype="object" if c.dtype == "str" else c.dtype) for c in spec.columns})


# -- links -------------------------------------------------------------------------------------------------
def link_speeds(cluster, share: float = SLOW_LINK_SHARE) -> pd.DataFrame:
    """The ``link_speeds`` frame of ``cluster`` (see the module docstring), slow links first (most ms first),
    then the others by transport and source. ``share``: the slow threshold, a fraction of the expected bandwidth.
    Cached on the cluster."""
    def build():
        links, source, unit = _links(cluster)
        if links.empty:
            return _empty(LINKS_SPEC)
        links = links[links["time_ms"] > 0].copy()
        links["bandwidth"] = links["size"] / links["time_ms"]
        expected = links.groupby("transport")["bandwidth"].transform("median")
        links["ratio"] = links["bandwidth"] / expected.where(expected > 0)
        links["slow"] = links["ratio"] < share
        # the time the link's bytes would take at the expected bandwidth, against the time they took
        at_expected = links["size"] / expected.where(expected > 0)
        links["extra_ms"] = np.where(links["slow"], (links["time_ms"] - at_expected) / links["steps"], 0.0)
        gbps = unit == "GB/s"
        links["bandwidth_gbps"] = links["bandwidth"] if gbps else np.nan
        links["expected_gbps"] = expected if gbps else np.nan
        links["time_ms"] = links["time_ms"] / links["steps"]
        links["size_mb"] = links["size"] / links["steps"] if gbps else np.nan
        links["source"] = source
        links = links.sort_values(["slow", "extra_ms", "transport"], ascending=[False, False, True], kind="stable")
        out = links[LINKS_SPEC.column_names].reset_index(drop=True)
        return out.astype({"src": str, "dst": str, "transport": str, "held_back": str, "source": str,
                           "slow": bool, "steps": "int64"})

    return cluster.cached(f"link_speeds:{share}", build) if hasattr(cluster, "cached") else build()


def _links(cluster) -> tuple[pd.DataFrame, str, str]:
    """(links with ``src``, ``dst``, ``transport``, ``size``, ``time_ms`` (summed over steps), ``steps``,
    ``held_back``; the files they come from; the bandwidth unit)."""
    matrix = C.communication_matrix(cluster)
    if len(matrix):
        links = matrix[matrix["src"] != matrix["dst"]].copy()
        if links.empty:
            return links, "", ""
        links["steps"] = links["steps"].clip(lower=1)
        members = _link_groups(cluster)
        links["held_back"] = [_ranks_text(members.get((s, d, t)) or {s, d})
                              for s, d, t in zip(links["src"], links["dst"], links["transport"])]
        unit = matrix.attrs.get("bandwidth_unit", "")
        source = ("communication matrix (cluster_communication_matrix.json / communication_matrix.json)"
                  if unit == "GB/s" else "hccl_raw link data (no unit stated)")
        return links, source, unit
    per_rank = C.link_bandwidth(cluster)
    if per_rank.empty:
        return pd.DataFrame(), "", ""
    comm = cluster.concat("communication_links")
    comm = comm[comm["transit_ms"] > 0]
    steps = comm.assign(step=comm["step"].astype("Int64")).groupby("rank")["step"].nunique().clip(lower=1)
    groups = comm.groupby(["rank", "transport"])["group"].agg(lambda g: set(g.astype(str)))
    rows = []
    for r in per_rank.itertuples(index=False):
        members = set()
        for g in groups.get((r.rank, r.transport), set()):
            members |= _group_members(g) or {str(r.rank)}
        rows.append({"src": str(r.rank), "dst": "*", "transport": r.transport, "size": r.size_mb,
                     "time_ms": r.transit_ms, "steps": int(steps.get(r.rank, 1)),
                     "held_back": _ranks_text(members or {str(r.rank)})})
    return pd.DataFrame(rows), "each rank's traffic per transport (communication.json / cluster_communication.json)", \
        "GB/s"


def _link_groups(cluster) -> dict:
    """(src, dst, transport) -> the ranks of the communication groups whose ops use the link."""
    out: dict = {}
    try:
        m = cluster.concat("communication_matrix")
    except ValueError:
        return out
    for r in m.itertuples(index=False):
        key = (str(r.src), str(r.dst), str(r.transport))
        out.setdefault(key, set()).update(_group_members(str(r.group)) or {str(r.src), str(r.dst)})
    return out


def _group_members(group: str) -> set:
    """The ranks a group key names ("(0, 1, 2)"), or an empty set (a p2p section, a hashed name)."""
    return set(re.findall(r"\d+", group)) if re.fullmatch(r"\(\s*\d+(\s*,\s*\d+)*\s*,?\s*\)", group) else set()


def _ranks_text(ranks) -> str:
    return ", ".join(sorted({str(r) for r in ranks}, key=C._rank_key))


def slow_links_summary(cluster) -> dict | None:
    """``cluster.slow_links`` of the summary JSON: ``share`` (the threshold), ``source``, ``expected_gbps``
    (transport -> the median bandwidth of its links, where the unit is GB/s), ``links`` (every slow link, as
    the frame's rows) and ``mindinsight`` (the links MindInsight's own proposal flags from hccl_raw's average
    rows, `cluster.slow_links`: ``src``, ``dst``, ``transport``, ``below_mean_pct``); None without link data."""
    links = link_speeds(cluster)
    mi = C.slow_links(cluster)
    if links.empty and mi.empty:
        return None
    exp = links.drop_duplicates("transport").set_index("transport")["expected_gbps"].dropna()
    return {"share": SLOW_LINK_SHARE, "source": str(links["source"].iloc[0]) if len(links) else None,
            "expected_gbps": {str(t): float(v) for t, v in exp.items()},
            "links": [_plain(r) for r in links[links["slow"]].to_dict("records")],
            "mindinsight": [{"src": str(r.src), "dst": str(r.dst), "transport": str(r.transport),
                             "below_mean_pct": float(r.below_mean_pct), "recorded_by": str(r.recorded_by)}
                            for r in mi.itertuples()]}


# -- slow ranks ----------------------------------------------------------------------------------------------
def slow_rank_targets(summary: dict) -> list[tuple[str, bool]]:
    """The ranks to explain, slowest first: (rank, is an outlier) for every rank `cluster.slow_ranks` flags
    (at most `MAX_RANKS`), else the slowest rank, not an outlier; empty without step times."""
    slow = C.slow_ranks(summary)
    steps = C.rank_steps(summary)
    flagged = {str(r) for r in slow.loc[slow["flagged"], "rank"]}
    if flagged and "total_ms" in steps:
        order = sorted(flagged, key=lambda r: -float(steps.at[r, "total_ms"]) if r in steps.index else 0.0)
        return [(r, True) for r in order[:MAX_RANKS]]
    slowest = C.slowest_rank(summary)
    return [(slowest, False)] if slowest is not None else []


def slow_rank_causes(cluster) -> pd.DataFrame:
    """The ``slow_rank_causes`` frame of ``cluster`` (see the module docstring): per slow rank its causes,
    leading cause first (``order`` 1). ``attrs["notes"]``: rank -> what its causes were measured against and
    what could not be looked at (its stage's ranks, how much longer it waits, operator data not loaded, no
    link data); of those, ``attrs["waits"]`` (rank -> the wait note, "" when none) and ``attrs["stage_peers"]``
    (rank -> its pipeline stage's size, 0 when compared with every rank). Cached on the cluster."""
    return cluster.cached("slow_rank_causes", lambda: _causes(cluster)) if hasattr(cluster, "cached") \
        else _causes(cluster)


def _causes(cluster) -> pd.DataFrame:
    summary = C.rank_summary(cluster)
    steps = C.rank_steps(summary)
    out = _empty(CAUSES_SPEC)
    out.attrs["notes"] = {}
    if "total_ms" not in steps or steps["total_ms"].isna().all():
        return out
    targets = slow_rank_targets(summary)
    med = rank_medians(rank_breakdown(cluster)).set_index("rank")
    links = link_speeds(cluster)
    slow_links = links[links["slow"]]
    op_steps = _op_type_per_step(summary)
    median_step = float(steps["total_ms"].median())
    stage_of = _stage_peers(cluster)
    rows, notes, waits, peer_counts = [], {}, {}, {}
    for rank, outlier in targets:
        peers = stage_of.get(rank)
        peer_med = med.loc[med.index.intersection(peers)] if peers else med
        peer_ops = op_steps[[c for c in op_steps.columns if c in peers]] if peers and len(op_steps) else op_steps
        causes = _stage_causes(peer_med, rank)
        waits[rank] = _wait_note(peer_med, rank)
        peer_counts[rank] = len(peers) if peers else 0
        why = [w for w in (f"compared with the {len(peers)} ranks of its pipeline stage" if peers else "",
                           waits[rank]) if w]
        if rank in peer_ops.columns and peer_ops.shape[1] > 1:
            causes += _op_causes(peer_ops, rank)
        else:
            why.append("operator types not loaded (" + ("no operator data on this rank" if rank not in
                                                       op_steps.columns else "no other rank has operator data")
                       + ")")
        if links.empty:
            why.append("links: no link data")
        causes += _link_causes(slow_links, rank, _has_split(med, rank))
        causes = _unexplained_remainders(causes)
        causes = sorted((c for c in causes if c["ms"] >= MIN_CAUSE_MS), key=lambda c: -c["ms"])
        step = float(steps.at[rank, "total_ms"])
        for i, c in enumerate(causes, 1):
            rows.append({"rank": rank, "order": i, "outlier": outlier, "step_ms": step,
                         "median_step_ms": median_step, **c})
        notes[rank] = "; ".join(why)
    if rows:
        out = pd.DataFrame(rows)[CAUSES_SPEC.column_names].astype(
            {"rank": str, "order": "int64", "outlier": bool, "cause": str, "kind": str, "part": str, "label": str,
             "view": str, "evidence": str})
    # the note's parts a sentence quotes, kept apart: how much longer the rank waits, its stage's size
    out.attrs.update(notes=notes, waits=waits, stage_peers=peer_counts)
    return out


def _stage_peers(cluster) -> dict[str, list[str]]:
    """Rank -> the ranks of its pipeline stage, where the job is pipeline-parallel and the stage has another
    rank to compare with; empty otherwise."""
    from .pipeline import pipeline_stages
    try:
        stages, _ = pipeline_stages(cluster)
    except (AttributeError, KeyError, ValueError):
        return {}
    return {str(r): [str(x) for x in ranks] for ranks in stages.values() if len(ranks) > 1 for r in ranks}


def _cause(cause, kind, part, label, ms, value, median, evidence) -> dict:
    return {"cause": cause, "kind": kind, "part": part, "label": label, "ms": float(ms), "value_ms": float(value),
            "median_ms": float(median), "view": VIEWS[kind], "evidence": evidence}


def _has_split(med: pd.DataFrame, rank: str) -> bool:
    """Whether the rank's exposed communication is compared as wait and transit: it and another rank have
    the split."""
    return rank in med.index and pd.notna(med.at[rank, "wait_ms"]) and med["wait_ms"].notna().sum() > 1


def _wait_note(med: pd.DataFrame, rank: str) -> str:
    """How much longer than the median the rank waits inside collectives for the other ranks ("" when not
    longer, or without the split): a symptom, listed beside the causes."""
    if not _has_split(med, rank):
        return ""
    others = med["wait_ms"].dropna()
    excess = float(med.at[rank, "wait_ms"]) - float(others.median())
    if excess < MIN_CAUSE_MS:
        return ""
    return (f"waits {excess:,.3f} ms a step longer than the median over {len(others)} ranks inside collectives for "
            "the other ranks: time lost to a later rank, not to its own work")


def _stage_causes(med: pd.DataFrame, rank: str) -> list[dict]:
    if rank not in med.index:
        return []
    row = med.loc[rank]
    split = _has_split(med, rank)
    out = []
    for part in STAGE_PARTS:
        if part == "wait_ms" or (part == "comm_exposed_ms" and split) or (part == "transit_ms" and not split):
            continue
        value, others = row[part], med[part].dropna()
        if pd.isna(value) or len(others) < 2:
            continue
        median = float(others.median())
        excess = float(value) - median
        if excess <= 0:
            continue
        label = PART_LABELS[part].lower()
        out.append(_cause(part, "stage", part, label, excess, value, median,
                          f"{value:,.3f} ms a step (the rank's median over {_steps(row['steps'])}) against "
                          f"{median:,.3f} ms, the median over {len(others)} ranks"))
    return out


def _steps(n) -> str:
    return f"{int(n)} step" + ("" if int(n) == 1 else "s")


def _op_type_per_step(summary: dict) -> pd.DataFrame:
    """op type x rank: ms per step of each device op type (communication ops excluded), 0 where a rank with
    operator data lacks the type."""
    ops = summary["op_types"]
    if ops is None or ops.empty:
        return pd.DataFrame()
    ops = ops[ops["kind"] != "communication"]
    steps = summary["steps"].set_index("rank")["steps"].astype(float).clip(lower=1)
    ms = ops.groupby(["op_type", "rank"])["total_time_us"].sum().unstack("rank").fillna(0.0) / 1000.0
    ms.columns = [str(c) for c in ms.columns]
    return ms / steps.reindex(ms.columns).fillna(1.0).to_numpy()


def _op_causes(op_steps: pd.DataFrame, rank: str) -> list[dict]:
    median = op_steps.median(axis=1)
    excess = (op_steps[rank] - median).sort_values(ascending=False, kind="stable")
    n = op_steps.shape[1]
    out = []
    for op_type, ms in excess.head(TOP_OP_TYPES).items():
        if ms <= 0:
            break
        value = float(op_steps.at[op_type, rank])
        out.append(_cause(f"op_type:{op_type}", "op_type", "computing_ms", f"{op_type} operators", ms, value,
                          median[op_type], f"{value:,.3f} ms a step of {op_type} time against "
                          f"{float(median[op_type]):,.3f} ms, the median over {n} ranks with operator data"))
    return out


def _link_causes(slow: pd.DataFrame, rank: str, split: bool) -> list[dict]:
    out = []
    part = "transit_ms" if split else "comm_exposed_ms"
    mine = slow[[rank in r.split(", ") for r in slow["held_back"]]] if len(slow) else slow
    for r in mine.head(TOP_LINKS).itertuples(index=False):
        name = f"link {r.src}→{r.dst} ({r.transport})" if r.dst != "*" else f"rank {r.src}'s {r.transport} traffic"
        bw = (f"{r.bandwidth_gbps:,.3f} GB/s against the {r.transport} median {r.expected_gbps:,.3f} GB/s"
              if pd.notna(r.bandwidth_gbps) else f"{r.ratio * 100:.1f} % of the {r.transport} median bandwidth")
        out.append(_cause(f"link:{r.src}-{r.dst}:{r.transport}", "link", part, name, r.extra_ms, r.time_ms,
                          r.time_ms - r.extra_ms, f"{bw}; it holds back ranks {r.held_back}"))
    return out


def _unexplained_remainders(causes: list[dict]) -> list[dict]:
    """Each stage cause minus the ms of the specific causes inside it (op types in computing, links in the
    transit or exposed communication)."""
    inside: dict = {}
    for c in causes:
        if c["kind"] != "stage":
            inside[c["part"]] = inside.get(c["part"], 0.0) + c["ms"]
    out = []
    for c in causes:
        if c["kind"] == "stage" and inside.get(c["part"]):
            what = "the op types" if c["part"] == "computing_ms" else "the slow links"
            c = {**c, "ms": c["ms"] - inside[c["part"]], "label": f"{c['label']} beyond {what} listed",
                 "evidence": c["evidence"] + f"; {inside[c['part']]:,.3f} ms of it is {what} listed"}
        out.append(c)
    return out


def slow_rank_summary(cluster) -> list[dict]:
    """``cluster.slow_rank_causes`` of the summary JSON: per slow rank (slowest first) ``rank``, ``outlier``,
    ``step_ms``, ``median_step_ms``, ``not_looked_at`` (the note: operator data not loaded, ...) and
    ``causes`` (the frame's rows, leading cause first)."""
    frame = slow_rank_causes(cluster)
    notes = frame.attrs.get("notes", {})
    out = []
    for rank in notes:
        rows = frame[frame["rank"] == rank]
        step = _plain(rows.iloc[0])["step_ms"] if len(rows) else None
        out.append({"rank": rank, "outlier": bool(rows["outlier"].iloc[0]) if len(rows) else None,
                    "step_ms": step, "median_step_ms": _plain(rows.iloc[0])["median_step_ms"] if len(rows) else None,
                    "not_looked_at": notes[rank] or None,
                    "causes": [_plain(r) for r in rows.drop(columns=["rank", "outlier", "step_ms", "median_step_ms"])
                               .to_dict("records")]})
    return out


def leading_sentences(cluster) -> list[tuple[str, dict]]:
    """Per explained rank, slowest first: (its finding's sentence, its leading cause's row). The sentence
    names the rank, how far its step is above the ranks' median, its leading cause with the ms it explains
    and where to look, then the next two causes."""
    frame = slow_rank_causes(cluster)
    waits, peers = frame.attrs.get("waits", {}), frame.attrs.get("stage_peers", {})
    return [_sentence(frame[frame["rank"] == rank], waits.get(rank, ""), peers.get(rank, 0))
            for rank in frame["rank"].drop_duplicates()]


def _sentence(rows: pd.DataFrame, waits: str = "", stage_peers: int = 0) -> tuple[str, dict]:
    """The finding's sentence of one rank's causes (``rows``, leading first); ``waits``: its wait note (""
    when it waits no longer than its peers), ``stage_peers``: the size of the pipeline stage it is compared
    within (0: compared with every rank)."""
    lead = rows.iloc[0]
    rank = lead["rank"]
    status = "an outlier" if lead["outlier"] else "the slowest rank, not an outlier by robust z"
    place = VIEW_PLACES[lead["view"]].format(rank=rank)
    head = (f"Rank {rank} ({status}) takes {fmt_ms(lead['step_ms'])} ms a step against the ranks' median "
            f"{fmt_ms(lead['median_step_ms'])} ms")
    excess = float(lead["step_ms"]) - float(lead["median_step_ms"])
    if not lead["outlier"] and lead["ms"] < EXPLAINS_SHARE * excess:
        # within the ranks' spread and nothing of its own work accounts for the difference: say so
        return (f"{head}; no part of its own work accounts for the {fmt_ms(excess)} ms: the largest difference is "
                f"{lead['label']}, +{fmt_ms(lead['ms'])} ms a step (see {place})"
                + (f"; it {waits}" if waits else "") + "."), _plain(lead)
    text = (f"{head}; its leading cause is {lead['label']}, +{fmt_ms(lead['ms'])} ms a step"
            + (f" against the {stage_peers} ranks of its pipeline stage" if stage_peers else "") + f" (see {place})")
    rest = rows.iloc[1:3]
    if len(rest):
        text += "; then " + ", ".join(f"{r.label} +{fmt_ms(r.ms)} ms" for r in rest.itertuples())
    return text + ".", _plain(lead)


def _plain(row) -> dict:
    out = {}
    for k, v in dict(row).items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = bool(v)
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = None if np.isnan(v) else float(v)
        else:
            out[k] = v
    return out


__all__ = ["slow_rank_causes", "slow_rank_targets", "slow_rank_summary", "leading_sentences", "link_speeds",
           "slow_links_summary", "SLOW_LINK_SHARE", "STAGE_PARTS", "VIEWS"]
