"""Several ranks' timelines on one clock, stacked: the frames a `TimelineView` draws for a cluster.

Each rank's events count from its own ``origin_us`` (the absolute µs of its earliest event). They are put
on the earliest rank's clock by one offset per rank, chosen by ``align``:

- ``"clock"``: the ranks' own absolute clocks (right when they share a host clock: one machine, or hosts
  kept in sync);
- ``"communication"``: the first collective every rank ran (the same op name, e.g.
  ``hcom_allReduce__063_0``) ends at the same moment on every rank, as a collective does: each rank is
  shifted so that those ends meet (right when the hosts' clocks disagree);

plus ``offsets_us`` (rank -> µs), a manual shift added on top. The offsets used are in
``attrs["offsets_us"]`` of the stacked timeline, and the method in ``attrs["align"]``.
"""
from __future__ import annotations

import re

import pandas as pd

ALIGNMENTS = ("clock", "communication")
# A collective op's own name on the device's communication track: hcom_<op>__<group hash>_<index>..., the
# same on every rank (host API names such as HcclAllreduce repeat for every call and cannot anchor).
COLLECTIVE = re.compile(r"^hcom_[A-Za-z]+_+\d+")


def _first_collective_ends(prof) -> dict[str, float]:
    """Name -> end (µs from ``prof.origin_us``) of the first occurrence of each collective in ``prof``'s
    timeline (relative: absolute epoch µs in float64 keep only a quarter of a µs)."""
    tl = prof.timeline
    if tl.empty:
        return {}
    names = tl["name"].astype(str)
    comm = tl[names.str.match(COLLECTIVE)]
    if comm.empty:
        return {}
    ends = comm["start_us"] + comm["dur_us"].fillna(0.0)
    first = pd.DataFrame({"name": comm["name"].astype(str), "end": ends}).groupby("name")["end"].min()
    return first.to_dict()


def rank_offsets(profiles: dict, align: str = "clock") -> dict[str, float]:
    """Rank -> µs to add to its absolute times so that every rank is on the reference clock (the rank with
    the earliest origin). ``align``: one of `ALIGNMENTS`; "communication" keeps the clock offset (0) of
    the ranks that share no collective with the reference."""
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, not {align!r}")
    offsets = {rank: 0.0 for rank in profiles}
    if align == "clock" or len(profiles) < 2:
        return offsets
    ends = {rank: _first_collective_ends(p) for rank, p in profiles.items()}
    ref = min(profiles, key=lambda r: float(profiles[r].origin_us))
    shared = set(ends[ref]).intersection(*(set(e) for e in ends.values() if e)) if ends[ref] else set()
    if not shared:
        return offsets
    anchor = min(shared, key=lambda n: ends[ref][n])  # the reference's first collective that all ranks ran
    for rank, e in ends.items():
        if anchor in e:  # the reference's absolute end minus this rank's, origins apart from the rest
            gap = float(profiles[ref].origin_us) - float(profiles[rank].origin_us)
            offsets[rank] = gap + (ends[ref][anchor] - e[anchor])
    return offsets


def stacked_timeline(cluster, ranks=None, align: str = "clock", offsets_us: dict | None = None) -> dict:
    """The chosen ``ranks`` (default: every rank, in order) of ``cluster`` as one set of timeline frames
    (``timeline``, ``timeline_tracks``, ``timeline_flows``, ``timeline_counters``, the columns of the
    Profile frames): each rank's tracks renamed "rank R · process" and kept together, track ids renumbered,
    times on the reference rank's clock (relative to its ``origin_us``, see the module docstring)."""
    keys = [str(r) for r in (ranks if ranks is not None else cluster.ranks)]
    profiles = {k: cluster[k] for k in keys}
    offsets = rank_offsets(profiles, align)
    for rank, extra in (offsets_us or {}).items():
        offsets[str(rank)] = offsets.get(str(rank), 0.0) + float(extra)
    origin = min(float(p.origin_us) for p in profiles.values())
    parts = [(rank, f"rank {rank}", prof, float(prof.origin_us) - origin + offsets[rank])
             for rank, prof in profiles.items()]
    out = stack_timelines(parts)
    out["timeline"].attrs.update(offsets_us=offsets, align=align, origin_us=origin, ranks=keys)
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
