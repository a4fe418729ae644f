"""The parallel-strategy view of a distributed job: its communication groups classified by parallel
dimension (TP, PP, DP, EP, CP), and the communication time and bytes of each dimension, per rank and step.

Groups come from, all that are found: communication_group.json or cluster_analysis.db's CommunicationGroup
(the `communication_groups` frame: msprof-analyze's ``collective`` groups, and its ``p2p`` lists, which are
the *pipeline stages*: msprof-analyze joins into one list the collective groups that never hold both ends
of a send/receive pair), then the groups only the communication files name. A cluster_communication.json
key ``"(0, 1, ...)"`` gives its ranks; any other group (a hash after ``@`` in the op names, a communicator
name in a database's COMMUNICATION_OP) gets as ranks the ranks that record ops under it.

Each group's ``dimension`` and the reason (``inferred_from``), first rule that applies:

* a ``p2p`` list of communication_group.json: ``stage`` (they partition the ranks into the stages);
* one rank: ``single`` (no peer);
* only send/receive ops on it: ``PP``; any all-to-all op: ``EP`` (op names);
* one rank in each of several pipeline stages: ``PP``;
* every rank: ``DP`` when it is the job's only multi-rank group, else ``world``;
* the smallest partition of the ranks into equal blocks of consecutive ranks: ``TP`` (tensor parallelism
  innermost, as Megatron and MindSpeed order ranks: the layout alone cannot tell it from data parallelism
  innermost, and the reason says so when a block is a whole stage);
* groups of one stride orthogonal to those blocks (no two ranks in one block): ``DP``;
* anything else: ``unknown``, with why (several stride families: data, context and expert parallelism have
  the same shape; a block seen alone, without the rest of the partition). ``CP`` is never inferred: no op
  name or layout sets it apart from data parallelism.

A legacy pipeline-parallel run (``ascend_cluster_analyse_pipeline-parallel_<stages>_<ranks>_<rank>.csv``)
names no group: its stages are its ranks split evenly in rank order (as MindInsight splits them), its
receives between stages (``receive_alone_time``) are ``PP`` and its collectives inside a stage
(``collective_communication_alone_time``) ``unknown``; both are exposed times, and the files give no
elapsed time or bytes for them.

Communication per dimension: each op record of the `communication` frame (communication.json,
cluster_communication.json, the databases' communication tables) is matched to its group, and summed per
rank, step and dimension: ``elapse_ms`` (the op's Elapse Time: transit + wait + idle), ``transit_ms``,
``wait_ms``, ``size_mb`` (from `communication_links`: RDMA plus the on-node bytes, SDMA where written,
which msprof-analyze fills with HCCS + PCIE, else HCCS + PCIE + SIO: summing SDMA with HCCS would count
the same bytes twice) and ``exposed_ms``: the elapse times the rank's exposed share of communication in
that step (`rank_breakdown`: comm_exposed / (comm_exposed + comm_overlapped)); no file says which op ran
beside computing, so every dimension of a rank-step gets the same share.

`dimension_summary` is the digest (summary JSON ``cluster.parallel``, the cluster page): time per
dimension and the costliest one, and `receive_split`, the step traces' own split of every rank's exposed
communication into receives between pipeline stages and collectives (the op records may cover a small
part of the step trace's communication; the sentence says how much).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ProfilerDataError
from ..schema import ANALYSIS_FRAMES

GROUPS_SPEC = ANALYSIS_FRAMES["parallel_groups"]
COMM_SPEC = ANALYSIS_FRAMES["parallel_communication"]
# Display order of the dimensions; "stage" and "single" groups carry no communication of their own.
DIMENSIONS = ("TP", "PP", "DP", "EP", "CP", "world", "unknown", "stage", "single")
DIMENSION_LABELS = {"TP": "Tensor parallel (TP)", "PP": "Pipeline parallel (PP)", "DP": "Data parallel (DP)",
                    "EP": "Expert parallel (EP)", "CP": "Context parallel (CP)", "world": "World (every rank)",
                    "unknown": "Unknown dimension", "stage": "Pipeline stage", "single": "Single rank"}
# Groups per dimension the summary names (the `parallel_groups` frame has every one).
EXAMPLES = 4

_TUPLE_KEY = re.compile(r"^\(\s*\d+\s*(,\s*\d+\s*)*,?\s*\)$")


@dataclasses.dataclass
class _Group:
    name: str
    kind: str
    ranks: tuple[int, ...]
    members_from: str
    from_file: bool = False  # a group of communication_group.json / CommunicationGroup
    ops: set = dataclasses.field(default_factory=set)  # op types seen on it (allreduce, send, ...)
    dimension: str = ""
    inferred_from: str = ""


def op_type(op_name: str) -> str:
    """The collective an op name stands for (``hcom_allReduce__576_0_1@g`` -> ``allreduce``): the name's
    letters after an ``hcom_`` prefix, lower case; without that prefix, all the letters of the name."""
    name = str(op_name).split("@", 1)[0]
    m = re.match(r"(?i)^hcom_?([a-z]+)", name)
    return (m.group(1) if m else re.sub(r"[^a-z]", "", name.lower())).lower()


def _is_p2p(t: str) -> bool:
    return t in ("send", "receive", "recv", "batchsendrecv") or t.startswith(("send", "receive", "recv"))


def _is_alltoall(t: str) -> bool:
    return t.startswith("alltoall")


def parallel_groups(cluster) -> pd.DataFrame:
    """The ``parallel_groups`` frame of ``cluster`` (see the module docstring): one row per communication
    group. Raises `ProfilerDataError` naming communication_group.json when that file is malformed. Cached."""
    return _built(cluster)[0]


def parallel_communication(cluster) -> pd.DataFrame:
    """The ``parallel_communication`` frame of ``cluster``: one row per rank, step and dimension. Cached."""
    return _built(cluster)[1]


def _built(cluster):
    build = lambda: _build(cluster)  # noqa: E731
    return cluster.cached("parallel_groups", build) if hasattr(cluster, "cached") else build()


def _build(cluster) -> tuple[pd.DataFrame, pd.DataFrame]:
    world = sorted({int(k) for k in cluster.ranks if str(k).isdigit()})
    file_groups = _file_groups(cluster)
    comm = _frame(cluster, "communication")
    records = _op_records(comm)
    groups = list(file_groups)
    key_of = {}  # the communication frame's (group, group id of the op name) -> the name of its row in `groups`
    if len(records):
        index = _Index(groups)
        for (g, gid), rec in records.groupby(["group", "gid"], sort=False):
            target = _match(index, g, gid, rec)
            target.ops.update(rec["op_type"])
            key_of[(g, gid)] = target.name
    if not groups and records.empty:
        legacy = _legacy_pipeline(cluster, world)
        if legacy is not None:
            return legacy
    world = sorted(set(world).union(*(set(g.ranks) for g in groups))) if groups else world
    _classify(groups, world)
    frame = _groups_frame(groups, records, key_of)
    return frame, _per_rank(cluster, records, key_of, {g.name: g.dimension for g in groups})


def _frame(cluster, name: str) -> pd.DataFrame:
    """Frame ``name`` of every rank stacked with its ``rank`` (`Cluster.concat`: many ranks are stacked where
    they are parsed), read once per cluster; empty when no rank has it."""
    def build():
        df = cluster.concat(name)
        return df if len(df) else pd.DataFrame()
    return cluster.cached(f"parallel_groups:{name}", build) if hasattr(cluster, "cached") else build()


def _legacy_pipeline(cluster, world: list[int]):
    """A legacy pipeline-parallel run: its stages (``ascend_cluster_analyse_pipeline-parallel_<stages>_<ranks>``,
    ranks split evenly in rank order, as MindInsight splits them) and, per rank and step, the exposed
    communication the files split: receives between stages (``receive_alone_time``: PP) and collectives
    inside the stage (``collective_communication_alone_time``: no file names their group, so their
    dimension is unknown). (groups, communication) frames, or None when the run is not such a run."""
    frames = {k: p.cluster_analyse for k, p in cluster.profiles.items()}
    frames = {k: f for k, f in frames.items() if f is not None and len(f) and
              {"receive_alone_time_ms", "collective_communication_alone_time_ms"} <= set(f.columns)
              and f.attrs.get("stage_num")}
    if not frames or not world:
        return None
    attrs = next(iter(frames.values())).attrs
    n_stages, size = int(attrs["stage_num"]), int(attrs.get("rank_size") or len(world))
    if n_stages < 2 or size % n_stages:
        return None
    per = size // n_stages
    shape = f"pipeline-parallel_{n_stages}_{size}"
    stage_rows, stage_of = [], {}
    for i in range(n_stages):
        ranks = list(range(i * per, (i + 1) * per))
        stage_of.update({r: i for r in ranks})
        stage_rows.append({"group": f"stage[{i}]", "kind": "stage", "ranks": ",".join(map(str, ranks)),
                           "size": per, "dimension": "stage", "inferred_from": (
                               f"pipeline stage {i + 1} of {n_stages}: ascend_cluster_analyse_{shape} names "
                               f"{n_stages} stages of {size} ranks, split in rank order as MindInsight splits them"),
                           "members_from": "ascend_cluster_analyse file name", "ops": 0, "time_ms": np.nan})
    rows = [*stage_rows,
            {"group": "receive", "kind": "p2p", "ranks": ",".join(map(str, world)), "size": len(world),
             "dimension": "PP", "inferred_from": "receives between pipeline stages (ascend_cluster_analyse's "
                                                 "receive_alone_time)",
             "members_from": "ascend_cluster_analyse", "ops": 0, "time_ms": np.nan}]
    for i, st in enumerate(stage_rows):
        rows.append({"group": f"collectives of stage[{i}]", "kind": "collective", "ranks": st["ranks"],
                     "size": per, "dimension": "unknown", "inferred_from": (
                         "collectives inside a pipeline stage (ascend_cluster_analyse's "
                         "collective_communication_alone_time): no file names their group, so TP and DP cannot "
                         "be told apart"),
                     "members_from": "ascend_cluster_analyse", "ops": 0, "time_ms": np.nan})
    groups = pd.DataFrame(rows)[GROUPS_SPEC.column_names].astype({"size": "int64", "ops": "int64",
                                                                  "time_ms": "float64"})
    comm_rows = []
    for key, f in frames.items():
        stage = stage_of.get(int(key)) if str(key).isdigit() else None
        for r in f.itertuples(index=False):
            for dim, col, name in (("PP", "receive_alone_time_ms", "receive"),
                                   ("unknown", "collective_communication_alone_time_ms",
                                    f"collectives of stage[{stage}]")):
                comm_rows.append({"rank": str(key), "step": int(r.step), "dimension": dim, "groups": name,
                                  "ops": 0, "elapse_ms": np.nan, "transit_ms": np.nan, "wait_ms": np.nan,
                                  "size_mb": np.nan, "exposed_ms": float(getattr(r, col))})
    comm = pd.DataFrame(comm_rows)[COMM_SPEC.column_names]
    comm = comm.astype({"step": "Int64", "ops": "int64"})
    return groups, comm


def _file_groups(cluster) -> list[_Group]:
    """The groups of communication_group.json / CommunicationGroup (the first rank that has them: every
    rank of a cluster analysis shares the file); a file that failed to load is raised, by name."""
    for prof in cluster.profiles.values():
        df = prof.communication_groups
        if df is not None and len(df):
            source = Path(str(df.attrs.get("path", "communication_group.json"))).name
            return [_Group(f"{r.kind}[{int(r.group)}]", str(r.kind),
                           tuple(sorted(int(x) for x in r.ranks)), source, True) for r in df.itertuples(index=False)]
    for prof in cluster.profiles.values():
        for pr in prof.problems:
            if Path(pr.file).name == "communication_group.json" and pr.kind == "error":
                raise ProfilerDataError(pr.file, pr.error.split(": ", 1)[-1], line=pr.line, field=pr.field)
    return []


def _op_records(comm: pd.DataFrame) -> pd.DataFrame:
    """The communication frame with ``gid`` (the group an op names after ``@``, else the frame's group)
    and ``op_type``; one row per rank, step, group and op name (repeats summed)."""
    cols = ["rank", "step", "group", "gid", "op_name", "op_type", "records", "elapse_ms", "transit_ms", "wait_ms"]
    if comm.empty:
        return pd.DataFrame(columns=cols)
    c = comm.assign(group=comm["group"].astype(str).fillna(""),
                    step=comm["step"].astype("Int64") if "step" in comm else pd.NA)
    at = c["op_name"].astype(str).str.rsplit("@", n=1)
    c["gid"] = [p[1] if len(p) == 2 else g for p, g in zip(at, c["group"])]
    c["op_type"] = c["op_name"].map(op_type)
    for k in ("elapse_ms", "transit_ms", "wait_ms"):
        if k not in c:
            c[k] = np.nan
    g = c.groupby(["rank", "step", "group", "gid", "op_name", "op_type"], sort=False, dropna=False)
    out = g[["elapse_ms", "transit_ms", "wait_ms"]].sum(min_count=1).reset_index()
    out.insert(6, "records", g.size().to_numpy())
    return out[cols]


class _Index:
    """The groups by name and by ranks (collective groups before p2p lists), appended to as groups are
    found in the communication files."""

    def __init__(self, groups: list[_Group]):
        self.groups, self.by_name, self.by_ranks = groups, {}, {}
        for g in sorted(groups, key=lambda g: g.kind != "collective"):
            self._note(g)

    def _note(self, g: _Group) -> None:
        self.by_name.setdefault(g.name, g)
        self.by_ranks.setdefault(g.ranks, g)

    def add(self, g: _Group) -> _Group:
        self.groups.append(g)
        self._note(g)
        return g


def _match(index: _Index, key: str, gid: str, rec: pd.DataFrame) -> _Group:
    """The group an op record belongs to: the file's group with the ranks a ``(0, 1, ...)`` key names,
    else a group of its own (named by the key, or by the id after ``@``)."""
    if _TUPLE_KEY.match(key.strip()):
        ranks = tuple(sorted(int(x) for x in re.findall(r"\d+", key)))
        found = index.by_ranks.get(ranks) or index.by_name.get(key)
        return found or index.add(_Group(key, "collective", ranks, "cluster_communication.json key"))
    found = index.by_name.get(gid)
    recording = {int(r) for r in rec["rank"].unique() if str(r).isdigit()}
    if found is None:
        kind = "p2p" if all(_is_p2p(t) for t in rec["op_type"]) else "collective"
        return index.add(_Group(gid, kind, tuple(sorted(recording)), "ranks recording its ops"))
    found.ranks = tuple(sorted(set(found.ranks) | recording))
    return found


def _span(ranks) -> str:
    r = sorted(ranks)
    if len(r) > 2 and r == list(range(r[0], r[-1] + 1)):
        return f"{r[0]}-{r[-1]}"
    return ", ".join(map(str, r))


def _stride(ranks: tuple[int, ...]) -> int | None:
    """The common difference of sorted ranks forming an arithmetic progression (None otherwise)."""
    if len(ranks) < 2:
        return None
    d = np.diff(ranks)
    return int(d[0]) if (d == d[0]).all() else None


def _classify(groups: list[_Group], world: list[int]) -> None:
    """Sets ``dimension`` and ``inferred_from`` of every group (the rules of the module docstring)."""
    wset = set(world)
    stage_of: dict[int, int] = {}
    lists = [g for g in groups if g.kind == "p2p" and g.from_file]
    if lists:
        covered = [r for g in lists for r in g.ranks]
        partition = len(covered) == len(set(covered)) and set(covered) == wset
        for i, g in enumerate(lists):
            if partition and len(lists) > 1:
                g.dimension, g.inferred_from = "stage", (
                    f"pipeline stage {i + 1} of {len(lists)}: msprof-analyze lists under p2p the ranks its "
                    "collectives join without spanning a send/receive pair")
                stage_of.update({r: i for r in g.ranks})
            elif partition:
                g.dimension, g.inferred_from = "stage", "one stage holds every rank: no pipeline split"
            else:
                g.dimension, g.inferred_from = "unknown", "a p2p list that does not partition the ranks into stages"
    rest = [g for g in groups if not g.dimension]
    for g in rest:
        if len(g.ranks) == 1:
            g.dimension, g.inferred_from = "single", "one rank: no peer"
        elif g.ops and all(_is_p2p(t) for t in g.ops):
            g.dimension, g.inferred_from = "PP", "op names (send/receive)"
        elif any(_is_alltoall(t) for t in g.ops):
            g.dimension, g.inferred_from = "EP", "op names (alltoall)"
        elif len(stage_of) and len(g.ranks) > 1 and all(r in stage_of for r in g.ranks) and \
                len({stage_of[r] for r in g.ranks}) == len(g.ranks):
            d = _stride(g.ranks)
            g.dimension, g.inferred_from = "PP", (f"one rank in each of {len(g.ranks)} pipeline stages"
                                                  + (f" (stride {d})" if d else ""))
    multi = [g for g in rest if not g.dimension and len(g.ranks) > 1]
    for g in multi:
        if set(g.ranks) == wset and len(wset) > 1:
            others = [o for o in rest if o is not g and len(o.ranks) > 1]
            g.dimension, g.inferred_from = ("DP", "every rank, the only multi-rank group") if not others else \
                ("world", "every rank")
    left = [g for g in multi if not g.dimension]
    blocks = _block_partition(left, wset)
    if blocks:
        k = len(blocks[0].ranks)
        whole_stage = bool(stage_of) and all(len({stage_of[r] for r in b.ranks}) == 1 and
                                             sum(1 for v in stage_of.values() if v == stage_of[b.ranks[0]]) == k
                                             for b in blocks)
        for b in blocks:
            b.dimension = "TP"
            b.inferred_from = (f"consecutive ranks {_span(b.ranks)}: the smallest partition of the ranks into "
                               f"equal consecutive blocks ({k} ranks), tensor parallelism innermost")
            if whole_stage:
                b.inferred_from += (f"; each block is a whole pipeline stage, so this reads TP {k} x DP 1 "
                                    f"(DP {k} x TP 1 would look the same)")
        block_of = {r: i for i, b in enumerate(blocks) for r in b.ranks}
        strided = [g for g in left if not g.dimension and _stride(g.ranks) and
                   len({block_of.get(r, -1 - r) for r in g.ranks}) == len(g.ranks)]
        strides = sorted({_stride(g.ranks) for g in strided})
        for g in strided:
            if len(strides) == 1:
                g.dimension, g.inferred_from = "DP", f"stride {strides[0]} across the tensor-parallel groups"
            else:
                g.dimension, g.inferred_from = "unknown", (
                    f"strides {', '.join(map(str, strides))} across the tensor-parallel groups: data, context "
                    "and expert parallelism have the same shape")
    layout_known = any(g.from_file for g in groups)
    for g in left:
        if not g.dimension:
            g.dimension, g.inferred_from = "unknown", (
                "neither a block nor a stride family of the layout" if layout_known else
                f"ranks {_span(g.ranks)} seen alone: without communication_group.json the rest of the layout "
                "is not known")
    for g in groups:
        if not g.dimension:
            g.dimension, g.inferred_from = "unknown", "no rule of the layout applies"


def _block_partition(groups: list[_Group], world: set[int]) -> list[_Group]:
    """The groups of the smallest size k whose consecutive-rank groups partition ``world`` into blocks of
    k; [] when no size does."""
    by_size: dict[int, list[_Group]] = {}
    for g in groups:
        if _stride(g.ranks) == 1:
            by_size.setdefault(len(g.ranks), []).append(g)
    for k in sorted(by_size):
        uniq = {g.ranks: g for g in by_size[k]}
        covered = [r for ranks in uniq for r in ranks]
        if len(covered) == len(set(covered)) and set(covered) == world and len(uniq) > 1:
            return sorted(by_size[k], key=lambda g: g.ranks)
    return []


def _groups_frame(groups: list[_Group], records: pd.DataFrame, key_of: dict) -> pd.DataFrame:
    if not groups:
        return _empty(GROUPS_SPEC)
    per = pd.DataFrame(columns=["name", "ops", "time_ms"])
    if len(records):
        named = records.assign(name=[key_of[(g, i)] for g, i in zip(records["group"], records["gid"])])
        per = named.groupby("name", as_index=False).agg(ops=("op_name", "nunique"), time_ms=("elapse_ms", "sum"))
    rows = [{"group": g.name, "kind": g.kind, "ranks": ",".join(map(str, g.ranks)), "size": len(g.ranks),
             "dimension": g.dimension, "inferred_from": g.inferred_from, "members_from": g.members_from}
            for g in groups]
    out = pd.DataFrame(rows).merge(per.rename(columns={"name": "group"}), on="group", how="left")
    out["ops"] = out["ops"].fillna(0).astype("int64")
    out["time_ms"] = out["time_ms"].astype(float).fillna(0.0)
    out["size"] = out["size"].astype("int64")
    return out[GROUPS_SPEC.column_names]


def _empty(spec) -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.Series(dtype="object" if c.dtype == "str" else c.dtype) for c in spec.columns})


def _bytes(cluster) -> pd.DataFrame:
    """MB per rank, step, group and op name: RDMA plus SDMA where written, else HCCS + PCIE + SIO."""
    links = _frame(cluster, "communication_links")
    keys = ["rank", "step", "group", "op_name"]
    if links.empty or "transport" not in links:
        return pd.DataFrame(columns=[*keys, "size_mb"])
    links = links.assign(step=links["step"].astype("Int64"), group=links["group"].astype(str))
    # the key combinations that occur only (a pivot_table with dropna=False would make their full product:
    # ranks x steps x groups x op names, gigabytes at thousands of ranks), NaN keys kept
    wide = links.groupby([*keys, "transport"], dropna=False, sort=False)["size_mb"].sum().unstack("transport")
    get = lambda t: wide[t].fillna(0.0) if t in wide else 0.0  # noqa: E731
    on_node = get("HCCS") + get("PCIE") + get("SIO")
    sdma = get("SDMA")
    size = get("RDMA") + (np.where(sdma > 0, sdma, on_node) if "SDMA" in wide else on_node)
    return pd.DataFrame({"size_mb": np.asarray(size, dtype=float)}, index=wide.index).reset_index()


def _exposed_share(cluster) -> pd.DataFrame:
    from .breakdown import rank_breakdown
    bd = rank_breakdown(cluster)
    if bd.empty:
        return pd.DataFrame(columns=["rank", "step", "share", "step_ms", "step_comm_ms"])
    comm = bd["comm_exposed_ms"] + bd["comm_overlapped_ms"]
    return pd.DataFrame({"rank": bd["rank"].astype(str), "step": bd["step"].astype("Int64"),
                         "share": bd["comm_exposed_ms"] / comm.where(comm > 0),
                         "step_ms": bd["step_ms"], "step_comm_ms": comm})


def _per_rank(cluster, records: pd.DataFrame, key_of: dict, dims: dict) -> pd.DataFrame:
    if records.empty:
        return _empty(COMM_SPEC)
    r = records.assign(dimension=[dims[key_of[(g, i)]] for g, i in zip(records["group"], records["gid"])],
                       name=[key_of[(g, i)] for g, i in zip(records["group"], records["gid"])])
    b = _bytes(cluster)
    if len(b):
        b = b.groupby(["rank", "step", "group", "op_name"], dropna=False, as_index=False)["size_mb"].sum()
        r = r.merge(b, on=["rank", "step", "group", "op_name"], how="left")
    else:
        r["size_mb"] = np.nan
    share = _exposed_share(cluster)
    r["step"] = _single_step(r, share)
    g = r.groupby(["rank", "step", "dimension"], dropna=False, sort=False)
    total = lambda s: s.sum(min_count=1)  # noqa: E731 - NaN where no op of the group gives the column
    out = g.agg(ops=("op_name", "nunique"), elapse_ms=("elapse_ms", total), transit_ms=("transit_ms", total),
                wait_ms=("wait_ms", total), size_mb=("size_mb", total)).reset_index()
    out["groups"] = g["name"].agg(lambda s: " ".join(sorted(set(s)))).to_numpy()
    out = out.merge(share[["rank", "step", "share"]], on=["rank", "step"], how="left")
    out["exposed_ms"] = out["elapse_ms"] * out["share"]
    order = {d: i for i, d in enumerate(DIMENSIONS)}
    out = out.assign(_r=out["rank"].map(lambda x: (0, int(x), "") if str(x).isdigit() else (1, 0, str(x))),
                     _d=out["dimension"].map(order))
    out = out.sort_values(["_r", "step", "_d"], kind="stable", ignore_index=True)
    out["ops"] = out["ops"].astype("int64")
    out["step"] = out["step"].astype("Int64")
    for c in ("elapse_ms", "transit_ms", "wait_ms", "size_mb", "exposed_ms"):
        out[c] = out[c].astype(float)
    out.attrs["step_ms"] = share
    return out[COMM_SPEC.column_names]


def _single_step(records: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    """The records' steps, a missing one (a communication file without step keys) taken as the rank's only
    step in the step trace when it has exactly one."""
    step = records["step"].astype("Int64")
    if not step.isna().any() or steps.empty:
        return step
    counts = steps.groupby("rank")["step"].agg(["nunique", "first"])
    only = counts.loc[counts["nunique"] == 1, "first"]
    return step.fillna(records["rank"].map(only)).astype("Int64")


# Coverage below which the sentence says the costliest dimension is that of the ops the files list, not of the
# step trace's whole communication.
FULL_COVERAGE = 0.9


def receive_split(cluster) -> dict | None:
    """The step trace's own split of the exposed communication, over every rank that has one: receives
    (Communication(Not Overlapped) - Communication(Not Overlapped and Exclude Receive): the waits for the
    previous pipeline stage, PP) and the rest (the collectives). ``rank_steps``, ``ranks``,
    ``receive_ms_per_step``, ``collective_ms_per_step`` (means over the rank-steps), ``max_receive``
    (``rank``, ``step``, ``ms``), ``source``; None when no step trace has the Exclude Receive column."""
    st = _frame(cluster, "step_trace")
    col = "communication_not_overlapped_exclude_receive_ms"
    if st.empty or col not in st or "communication_not_overlapped_ms" not in st:
        return None
    st = st[st[col].notna() & st["communication_not_overlapped_ms"].notna()]
    if st.empty:
        return None
    receive = st["communication_not_overlapped_ms"] - st[col]
    top = receive.idxmax()
    return {"rank_steps": int(len(st)), "ranks": int(st["rank"].nunique()),
            "receive_ms_per_step": float(receive.mean()), "collective_ms_per_step": float(st[col].mean()),
            "max_receive": {"rank": str(st.at[top, "rank"]), "step": None if pd.isna(st.at[top, "step"]) else
                            int(st.at[top, "step"]), "ms": float(receive[top])},
            "source": "step trace: Communication(Not Overlapped) - Communication(Not Overlapped and Exclude Receive)"}


def dimension_summary(cluster) -> dict:
    """The parallel view for the summary JSON (``cluster.parallel``): ``available``; without groups and ops
    ``why``. Else ``dimensions`` (per dimension: ``dimension``, ``groups``, ``ranks`` — ranks in its groups
    —, ``ranks_measured`` — ranks with op records in it —, ``time_ms`` and ``exposed_ms`` summed over the
    records, ``ms_per_step`` and ``exposed_ms_per_step`` — per measured rank and step, 0 where a rank-step
    has no op of it —, ``size_mb``, ``share_of_step`` 0-1 of the mean step of those rank-steps),
    ``costliest`` (the dimension with the most exposed time per step, elapsed time where no rank gives the
    exposed share: ``dimension``, ``ms_per_step``, ``exposed_ms_per_step``, ``share_of_step``, ``basis``),
    ``coverage`` (``ops_ms_per_step`` against ``step_communication_ms_per_step``: how much of the step trace's
    communication the op records hold), ``rank_steps``, ``inferred`` (the reasons behind the dimensions that
    carry time), ``step_trace`` (`receive_split`: the exposed receives, PP, against the exposed collectives
    over every rank) and ``finding`` (the costliest dimension first: "of the ops the files list" when those
    hold under `FULL_COVERAGE` of the step trace's communication; then how the dimensions were inferred and
    the step trace's split). Each dimension also lists ``label``, ``inferred_from`` (its
    groups' reasons) and ``examples`` (the ranks of its first `EXAMPLES` groups; all of them are in the
    ``parallel_groups`` frame)."""
    try:
        groups = parallel_groups(cluster)
    except ProfilerDataError as err:
        return {"available": False, "why": str(err)}
    comm = parallel_communication(cluster)
    if groups.empty and comm.empty:
        why = ("no communication groups or communication ops: the run has no communication_group.json, "
               "cluster_communication.json, communication.json, database communication tables or "
               "pipeline-parallel ascend_cluster_analyse files")
        if len(_frame(cluster, "hccl")):
            why += "; its hccl_raw_*.csv give each step's communication cost but name no group"
        return {"available": False, "why": why}
    pairs = comm[["rank", "step"]].drop_duplicates() if len(comm) else pd.DataFrame(columns=["rank", "step"])
    n = len(pairs)
    share = _exposed_share(cluster)
    steps = pairs.merge(share, on=["rank", "step"], how="left") if n else share.iloc[0:0]
    step_ms = float(steps["step_ms"].mean()) if n and steps["step_ms"].notna().any() else None
    step_comm = float(steps["step_comm_ms"].mean()) if n and steps["step_comm_ms"].notna().any() else None
    has_exposed = bool(len(comm)) and comm["exposed_ms"].notna().all()
    has_elapse = bool(len(comm)) and comm["elapse_ms"].notna().any()
    dims = []
    for d in DIMENSIONS:
        gs = groups[groups["dimension"] == d]
        c = comm[comm["dimension"] == d]
        if gs.empty and c.empty:
            continue
        ranks = sorted({int(x) for rs in gs["ranks"] for x in rs.split(",") if x}, key=int)
        t = float(c["elapse_ms"].sum()) if c["elapse_ms"].notna().any() else (0.0 if has_elapse else None)
        e = float(c["exposed_ms"].sum()) if has_exposed else None
        per = (t / n if n else 0.0) if t is not None else None
        dims.append({"dimension": d, "label": DIMENSION_LABELS[d], "groups": int(len(gs)), "ranks": len(ranks),
                     "examples": gs["ranks"].head(EXAMPLES).tolist(),
                     "inferred_from": sorted(set(gs["inferred_from"])),
                     "ranks_measured": int(c["rank"].nunique()), "time_ms": t, "exposed_ms": e,
                     "ms_per_step": per, "exposed_ms_per_step": (e / n if n and e is not None else None),
                     "size_mb": float(c["size_mb"].sum()) if c["size_mb"].notna().any() else None,
                     "share_of_step": per / step_ms if step_ms and per is not None else None,
                     "exposed_share_of_step": e / n / step_ms if step_ms and n and e is not None else None})
    key = "exposed_ms_per_step" if has_exposed else "ms_per_step"
    carrying = [x for x in dims if (x["time_ms"] or 0) > 0 or (x["exposed_ms"] or 0) > 0]
    top = max(carrying, key=lambda x: x[key]) if carrying else None
    used = groups[groups["dimension"].isin([x["dimension"] for x in carrying]) &
                  ((groups["time_ms"] > 0) | groups["time_ms"].isna())]
    inferred = sorted({f"{r.dimension}: {r.inferred_from}" for r in used.itertuples(index=False)})
    ops_per = float(comm["elapse_ms"].sum()) / n if n and has_elapse else None
    out = {"available": True, "dimensions": dims, "rank_steps": n,
           "costliest": None if top is None else {
               "dimension": top["dimension"], "ms_per_step": top["ms_per_step"],
               "exposed_ms_per_step": top["exposed_ms_per_step"], "share_of_step": top["share_of_step"],
               "exposed_share_of_step": top["exposed_share_of_step"],
               "basis": "exposed" if has_exposed else "elapsed"},
           "coverage": {"ops_ms_per_step": ops_per, "step_communication_ms_per_step": step_comm},
           "inferred": inferred,
           "step_trace": receive_split(cluster)}
    out["finding"] = _finding(top, has_exposed, n, inferred, groups, ops_per, step_comm, out["step_trace"])
    return out


def _finding(top, has_exposed, n, inferred, groups, ops_per, step_comm, split) -> str:
    """The section's first sentence. Where the op records hold under `FULL_COVERAGE` of the step traces'
    communication and the step traces split it into receives between stages and collectives, that split
    (every rank, every step) leads and the op records' costliest dimension follows as what they show."""
    if top is None:
        dims = ", ".join(f"{d} {k}" for d, k in groups["dimension"].value_counts().items())
        return (f"No communication op is recorded on the {len(groups)} groups found ({dims}): the time per "
                "dimension is not available.")
    label = (f"{DIMENSION_LABELS[top['dimension']]} communication" if top["dimension"] != "unknown" else
             "Communication on groups of unknown dimension")
    partial = bool(step_comm) and ops_per is not None and ops_per < FULL_COVERAGE * step_comm
    has_split = bool(split) and split["receive_ms_per_step"] > 0
    if top["ms_per_step"] is None:  # the files give the exposed time alone (legacy pipeline runs)
        cost = f"{top['exposed_ms_per_step']:,.3f} ms exposed per step per rank" + (
            f" ({top['exposed_share_of_step'] * 100:.1f} % of the step)" if top["exposed_share_of_step"] else "")
    else:
        cost = (f"{top['ms_per_step']:,.3f} ms per step per rank"
                + (f" ({top['share_of_step'] * 100:.1f} % of the step)" if top["share_of_step"] is not None else ""))
        if has_exposed:
            cost += f", {top['exposed_ms_per_step']:,.3f} ms of it exposed"
    cost += f", over {n} rank-step{'s' if n != 1 else ''} with communication records"
    split_text = ""
    if has_split:
        top_r = split["max_receive"]
        split_text = (f"the step traces of {split['ranks']} rank{'s' if split['ranks'] != 1 else ''} split the exposed "
                      f"communication into receives between pipeline stages (PP), {split['receive_ms_per_step']:,.3f} "
                      f"ms per step per rank (up to {top_r['ms']:,.3f} ms on rank {top_r['rank']}), and collectives, "
                      f"{split['collective_ms_per_step']:,.3f} ms")
    coverage = (f"the op records hold {ops_per:,.3f} ms of the step trace's {step_comm:,.3f} ms of communication "
                f"per rank-step ({ops_per / step_comm * 100:.1f} %)" if step_comm and ops_per is not None else "")
    how = " Dimensions inferred from " + "; ".join(inferred) + "."
    if partial and has_split:
        return (split_text[0].upper() + split_text[1:] + f". Only part of it is in op records: {coverage}; among "
                f"them {label[0].lower() + label[1:]} costs most: {cost}." + how)
    if partial:
        label = "Of the communication ops the files list, " + label[0].lower() + label[1:]
    text = f"{label} costs most: {cost}." + how
    if coverage:
        text += f" {coverage[0].upper() + coverage[1:]}."
    if split_text:
        text += f" {split_text[0].upper() + split_text[1:]}."
    return text


__all__ = ["parallel_groups", "parallel_communication", "dimension_summary", "receive_split", "op_type",
           "DIMENSIONS", "DIMENSION_LABELS", "FULL_COVERAGE"]
