"""Several ranks' timelines on one clock, stacked: the frames a `TimelineView` draws for a cluster.

Each rank's events count from its own ``origin_us`` (the absolute µs of its earliest event). They are put
on the reference rank's clock (the rank with the earliest origin) by one offset per rank, chosen by
``align``:

- ``"clock"``: the ranks' own absolute clocks (right when they share a host clock: one machine, or hosts
  kept in sync); nothing checks it;
- ``"communication"``: a collective ends at the same moment on every rank that ran it (a straggler
  arrives late, but it leaves with the others), so the ends of the collectives a rank shares with the
  reference are matched: the offset is the median of the per-collective end differences (robust to a
  collective whose end was recorded late), and what is left of those differences after the offset is the
  **residual** misalignment the offset could not remove (its median and max absolute value, µs). With
  ``anchor`` (an op name, or a ``(name, run)`` pair for an op that runs repeatedly) that one collective's
  ends meet exactly and the residual is measured over the other shared collectives.

A collective is a device communication op named ``hcom_<op>_..._<index>`` (the same name on every rank;
host API names such as HcclAllreduce cannot anchor), or an event of msprof's HCCL "Communication Kernel"
thread (one per collective, e.g. ``Default/AllReduce-op534_0``). An op that runs repeatedly under one name
is matched run by run: its k-th run on one rank with its k-th run on another.

``offsets_us`` (rank -> µs) is a manual shift added on top. `rank_alignment` returns the `Alignment`;
`stacked_timeline` puts it in ``attrs`` of its timeline frame (``offsets_us``, ``align``, ``anchor``,
``residual_us``, ``alignment``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pandas as pd

ALIGNMENTS = ("clock", "communication")
# A collective op's own name on the device's communication track: hcom_<op>__<group hash>_<index>..., the
# same on every rank (host API names such as HcclAllreduce repeat for every call and cannot anchor).
COLLECTIVE = re.compile(r"^hcom_[A-Za-z]+_+\d+")
# msprof's HCCL thread holding one event per collective (the op's graph name), FORMATS 4.14.
COLLECTIVE_THREAD = "Communication Kernel"


def collective_ends(prof) -> pd.Series:
    """End (µs from ``prof.origin_us``) of each collective run in ``prof``'s timeline, indexed by
    (``name``, ``run``): the run-th time (0 first, by start) the op ran. Relative times: absolute epoch
    µs in float64 keep only a quarter of a µs. Empty when the timeline holds no collective."""
    tl = prof.timeline
    empty = pd.Series([], dtype="float64", index=pd.MultiIndex.from_tuples([], names=["name", "run"]))
    if tl.empty:
        return empty
    tracks = prof.timeline_tracks
    kernel = (tracks.loc[tracks["thread"].astype(str) == COLLECTIVE_THREAD, "track"]
              if "thread" in tracks else pd.Series([], dtype="int64"))
    names = tl["name"].astype(str)
    comm = tl[names.str.match(COLLECTIVE) | tl["track"].isin(kernel)]
    if comm.empty:
        return empty
    # one op recorded on several tracks (e.g. a host and a device copy) counts once per run: its earliest end
    frame = pd.DataFrame({"name": comm["name"].astype(str), "track": comm["track"], "start": comm["start_us"],
                          "end": comm["start_us"] + comm["dur_us"].fillna(0.0)}).sort_values("start", kind="stable")
    frame["run"] = frame.groupby(["track", "name"]).cumcount()
    return frame.groupby(["name", "run"])["end"].min()


@dataclass(frozen=True)
class Alignment:
    """How a cluster's ranks were put on one clock (see the module docstring).

    ``offsets_us``: rank -> µs added to its absolute times (the reference rank 0.0). ``collectives``: rank
    -> how many collectives it shares with the reference (the ones its offset was fitted on).
    ``residual_us``: rank -> {"median", "max"}: the absolute end differences left after the offset (µs;
    NaN when no collective is left to measure them on: one shared collective, or only the anchor).
    ``unaligned``: rank -> why it kept its own clock. ``median_us``/``max_us``/``max_rank``: the residual
    over every rank's left-over differences together, and the rank with the largest. The residuals come
    from times relative to each rank's origin (exact to the files' digits); an offset also carries the
    origins' own grain (absolute epoch µs in float64: a quarter of a µs)."""
    method: str
    reference: str
    offsets_us: dict[str, float]
    anchor: str | tuple | None = None
    collectives: dict[str, int] = field(default_factory=dict)
    residual_us: dict[str, dict[str, float]] = field(default_factory=dict)
    unaligned: dict[str, str] = field(default_factory=dict)
    median_us: float = math.nan
    max_us: float = math.nan
    max_rank: str | None = None

    def as_dict(self) -> dict:
        return {"method": self.method, "reference": self.reference, "anchor": self.anchor,
                "offsets_us": dict(self.offsets_us), "collectives": dict(self.collectives),
                "residual_us": {r: dict(v) for r, v in self.residual_us.items()},
                "unaligned": dict(self.unaligned), "median_us": self.median_us, "max_us": self.max_us,
                "max_rank": self.max_rank}


def _anchor_key(anchor, shared: pd.Index):
    """The (name, run) ``anchor`` names among ``shared``: a name alone is its first shared run."""
    if isinstance(anchor, (tuple, list)):
        key = (str(anchor[0]), int(anchor[1]))
        return key if key in shared else None
    runs = sorted(run for name, run in shared if name == str(anchor))
    return (str(anchor), runs[0]) if runs else None


def check_alignment(align: str, anchor=None) -> None:
    """ValueError unless ``align`` is one of `ALIGNMENTS` and an ``anchor`` comes with "communication"."""
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, not {align!r}")
    if anchor is not None and align != "communication":
        raise ValueError(f"anchor={anchor!r} pins a collective to align on: use align='communication'")


def rank_alignment(profiles: dict, align: str = "clock", anchor=None) -> Alignment:
    """The `Alignment` of ``profiles`` (rank -> Profile) by ``align`` (one of `ALIGNMENTS`), pinned on
    ``anchor`` if given (a collective every rank ran; ValueError otherwise, or with ``align="clock"``).
    "communication" leaves a rank that shares no collective with the reference on its own clock (offset 0)
    and says why in ``unaligned``."""
    check_alignment(align, anchor)
    offsets = {rank: 0.0 for rank in profiles}
    ref = min(profiles, key=lambda r: float(profiles[r].origin_us))
    if align == "clock" or len(profiles) < 2:
        return Alignment(align, ref, offsets, anchor)
    ends = {rank: collective_ends(p) for rank, p in profiles.items()}
    collectives, residual, unaligned, left = {ref: len(ends[ref])}, {}, {}, {}
    for rank, own in ends.items():
        if rank == ref:
            continue
        shared = ends[ref].index.intersection(own.index)
        collectives[rank] = len(shared)
        key = _anchor_key(anchor, shared) if anchor is not None else None
        if anchor is not None and key is None:
            raise ValueError(f"anchor {anchor!r} is not a collective ranks {ref} and {rank} both ran; "
                             f"they share {sorted({n for n, _ in shared})}")
        if not len(shared):
            unaligned[rank] = (f"rank {rank} ran none of the collectives rank {ref} ran" if len(own) and len(ends[ref])
                               else f"rank {rank if not len(own) else ref}'s timeline holds no collective op")
            continue
        # the reference's end minus this rank's, each from its own origin (origins apart from the rest)
        diff = ends[ref][shared] - own[shared]
        if key is not None:
            base, rest = float(diff[key]), diff.drop(key)
        else:
            base = float(diff.median())
            rest = diff if len(diff) > 1 else diff.iloc[0:0]
        offsets[rank] = float(profiles[ref].origin_us) - float(profiles[rank].origin_us) + base
        left[rank] = (rest - base).abs()
        residual[rank] = {"median": float(left[rank].median()) if len(rest) else math.nan,
                          "max": float(left[rank].max()) if len(rest) else math.nan}
    pooled = pd.concat([v for v in left.values() if len(v)]) if any(len(v) for v in left.values()) else None
    worst = max((r for r in left if len(left[r])), key=lambda r: residual[r]["max"], default=None)
    return Alignment(align, ref, offsets, anchor, collectives, residual, unaligned,
                     float(pooled.median()) if pooled is not None else math.nan,
                     float(pooled.max()) if pooled is not None else math.nan, worst)


def rank_offsets(profiles: dict, align: str = "clock", anchor=None) -> dict[str, float]:
    """Rank -> µs to add to its absolute times so that every rank is on the reference clock (the rank with
    the earliest origin): `rank_alignment`'s ``offsets_us``."""
    return rank_alignment(profiles, align, anchor).offsets_us


def shared_collectives(profiles: dict) -> list[tuple[str, int]]:
    """The (name, run) of the collectives every one of ``profiles`` ran, in the reference rank's order of
    end (the choices of an anchor)."""
    ends = {rank: collective_ends(p) for rank, p in profiles.items()}
    if not ends:
        return []
    ref = min(profiles, key=lambda r: float(profiles[r].origin_us))
    keys = ends[ref].index
    for own in ends.values():
        keys = keys.intersection(own.index)
    return [(str(name), int(run)) for name, run in ends[ref][keys].sort_values(kind="stable").index]


def stacked_timeline(cluster, ranks=None, align: str = "clock", offsets_us: dict | None = None,
                     anchor=None) -> dict:
    """The chosen ``ranks`` (default: every rank, in order) of ``cluster`` as one set of timeline frames
    (``timeline``, ``timeline_tracks``, ``timeline_flows``, ``timeline_counters``, the columns of the
    Profile frames): each rank's tracks renamed "rank R · process" and kept together, track ids renumbered,
    times on the reference rank's clock (relative to its ``origin_us``, see the module docstring). The
    timeline frame's ``attrs``: ``offsets_us`` (the manual ones included), ``align``, ``anchor``,
    ``residual_us`` (rank -> {"median", "max"}) and ``alignment`` (`Alignment.as_dict`)."""
    keys = [str(r) for r in (ranks if ranks is not None else cluster.ranks)]
    profiles = {k: cluster[k] for k in keys}
    alignment = rank_alignment(profiles, align, anchor)
    offsets = dict(alignment.offsets_us)
    for rank, extra in (offsets_us or {}).items():
        offsets[str(rank)] = offsets.get(str(rank), 0.0) + float(extra)
    origin = min(float(p.origin_us) for p in profiles.values())
    parts = [(rank, f"rank {rank}", prof, float(prof.origin_us) - origin + offsets[rank])
             for rank, prof in profiles.items()]
    out = stack_timelines(parts)
    out["timeline"].attrs.update(offsets_us=offsets, align=align, anchor=anchor, origin_us=origin, ranks=keys,
                                 residual_us=alignment.as_dict()["residual_us"], alignment=alignment.as_dict())
    return out


def stack_timelines(parts) -> dict:
    """Several Profiles' timelines as one set of timeline frames (``timeline``, ``timeline_tracks``,
    ``timeline_flows``, ``timeline_counters``): ``parts`` is a list of (key, label, profile, shift), each
    profile's tracks renamed "<label> · process" (counters too) and kept together in the parts' order,
    track ids renumbered, flow ids prefixed "<key>:", and every time moved by ``shift``: µs added to the profile's own relative times, a number,
    or a function of an array of its times returning the µs to add to each (a shift that varies along the
    run, e.g. one per step)."""
    events, tracks, flows, counters = [], [], [], []
    base = 0
    prof = None
    for order, (key, prefix, prof, shift) in enumerate(parts):
        move = (lambda t, f=shift: t + f(t)) if callable(shift) else (lambda t, s=float(shift): t + s)
        tr = prof.timeline_tracks
        if tr.empty:
            continue
        tl = prof.timeline
        events.append(tl.assign(track=(tl["track"].astype("int64") + base).astype("int32"),
                                start_us=move(tl["start_us"].to_numpy(dtype="float64"))))
        sort = tr["process_sort"] if "process_sort" in tr else pd.Series(0, index=tr.index)
        tracks.append(tr.assign(track=(tr["track"].astype("int64") + base).astype("int32"),
                                process=f"{prefix} · " + tr["process"].astype(str),
                                process_sort=order * 1_000_000 + sort.astype("int64")))
        fl = prof.timeline_flows
        if len(fl):
            flows.append(fl.assign(start_track=(fl["start_track"].astype("int64") + base).astype("int32"),
                                   end_track=(fl["end_track"].astype("int64") + base).astype("int32"),
                                   start_us=move(fl["start_us"].to_numpy(dtype="float64")),
                                   end_us=move(fl["end_us"].to_numpy(dtype="float64")),
                                   id=f"{key}:" + fl["id"].astype(str)))
        co = prof.timeline_counters
        if len(co):
            counters.append(co.assign(pid=f"{prefix} · " + co["pid"].astype(str),
                                      start_us=move(co["start_us"].to_numpy(dtype="float64"))))
        base += int(tr["track"].max()) + 1
    if prof is None:
        raise ValueError("stack_timelines needs at least one profile")
    return {"timeline": _concat(events, prof.timeline), "timeline_tracks": _concat(tracks, prof.timeline_tracks),
            "timeline_flows": _concat(flows, prof.timeline_flows),
            "timeline_counters": _concat(counters, prof.timeline_counters)}


def _concat(parts: list[pd.DataFrame], like: pd.DataFrame) -> pd.DataFrame:
    """Stack the ranks' frames; categorical columns stay categorical (their categories united)."""
    if not parts:
        return like.iloc[0:0]
    cats = [c for c in parts[0].columns if isinstance(parts[0][c].dtype, pd.CategoricalDtype)]
    out = pd.concat(parts, ignore_index=True)
    for c in cats:
        out[c] = out[c].astype("category")
    if "start_us" in out and "track" in out:
        out = out.sort_values(["track", "start_us"], kind="stable", ignore_index=True)
    return out
