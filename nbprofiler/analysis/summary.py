"""`summarize(prof)`: the digest that `nbprofiler summary --json` prints (../SUMMARY_SCHEMA in the brief;
docs/data-model.md, "The summary JSON"). Pure: reads only the Profile's frames, never files."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._memory import release_pages
from .._version import __version__
from .diagnosis import diagnose, own_stages
from .dispatch import profile_dispatch
from .steps import STAGE_KEYS, legacy_stage_view, profile_step_average, step_times
from .timeline import events_end, row_passes



def summarize(prof, overview_only: bool = False) -> dict:
    """The summary JSON of ``prof``. ``overview_only``: without what the overview does not show
    (`views.overview`): the timeline's totals per op type and per scope layer and the host dispatch's
    per-step rows (on a trace of millions of events, its dashboard comes that much sooner), and the memory
    peak (``memory`` is then ``{}`` where there is a memory record: the record is still read, so that its
    problems are the overview's too)."""
    out = {
        "nbprofiler_version": __version__,
        "source": prof.source,
        "generation": prof.generation,
        "device": str(prof.device),
        "devices_found": [str(d) for d in prof.devices_found],
        "session": session_info(prof),
        "problems": [],
        "step_time": step_times(prof).to_dict(),
        "step_trace": _step_trace(prof),
        "op_types": _op_types(prof),
        "ops": _ops(prof),
        "minddata": _minddata(prof),
        "timeline": _timeline(prof, totals_too=not overview_only),
        "flops": _flops(prof),
        "memory": _memory(prof, peak=not overview_only),
        "dispatch": profile_dispatch(prof).to_dict(per_step=not overview_only),
    }
    diagnosis = diagnose(prof)
    out["diagnosis"] = {**diagnosis.to_dict(),
                        "folded": [{**s.to_dict(), "why": why} for s, why in diagnosis.folded]}
    out["suggestions"] = [s.to_dict() for s in diagnosis.findings]
    out["problems"] = [p.as_dict() for p in prof.problems]
    return _plain(out)


def summarize_cluster(cluster, device: str | None = None) -> dict:
    """One rank's summary (default: the smallest id) with ``cluster``: the diagnosis across the ranks, its
    ``breakdown``: each rank's median step split into its parts (`analysis.breakdown.breakdown_summary`),
    ``parallel``: the communication per parallel dimension (`analysis.parallel_groups.dimension_summary`),
    ``pipeline_bubbles``: each pipeline stage's idle time and bubble ratio
    (`analysis.pipeline.pipeline_summary`), None when the job is not pipeline-parallel, with the reason in
    ``pipeline_bubbles_unavailable`` (None when available), ``slow_rank_causes``: per slow rank its ranked
    causes (`analysis.slow_rank_cause.slow_rank_summary`) and ``slow_links``: the links below their
    transport's median bandwidth, with MindInsight's own slow-link proposal beside them
    (`analysis.slow_rank_cause.slow_links_summary`)."""
    from .breakdown import breakdown_summary, rank_breakdown
    from .diagnosis import diagnose_cluster
    from .parallel_groups import dimension_summary
    from .pipeline import pipeline_bubbles, pipeline_summary
    from .slow_rank_cause import slow_links_summary, slow_rank_summary
    out = dict(cluster[device if device is not None else cluster.ranks[0]].summary())
    out["cluster"] = diagnose_cluster(cluster).to_dict()
    out["cluster"]["breakdown"] = breakdown_summary(rank_breakdown(cluster))
    out["cluster"]["parallel"] = dimension_summary(cluster)
    bubbles = pipeline_bubbles(cluster)
    out["cluster"]["pipeline_bubbles"] = pipeline_summary(bubbles)
    out["cluster"]["pipeline_bubbles_unavailable"] = bubbles.attrs.get("reason") or None
    out["cluster"]["slow_rank_causes"] = slow_rank_summary(cluster)
    out["cluster"]["slow_links"] = slow_links_summary(cluster)
    return _plain(out)


def session_info(prof) -> dict | None:
    """Which session this summary shows, the rank's other sessions and how to pick one; None for a run
    that is not one of several sessions (no session folder and no other session of its rank)."""
    others = list(getattr(prof, "other_sessions", []) or [])
    if not prof.session and not others:
        return None
    key = getattr(prof, "key", str(prof.device))
    return {"key": key, "folder": prof.session or None, "other_sessions": others,
            "how_to_pick": (f"another session: nbprofiler.load(source, device=KEY) or --device KEY with KEY one "
                            f"of {others}") if others else None}


def _step_trace(prof) -> dict | None:
    steps = prof.step_trace
    if steps is None or steps.empty or "total_ms" not in steps:
        return None
    view = legacy_stage_view(steps)
    written = profile_step_average(prof).written  # MindInsight's average: the file's row as written
    if written is not None:
        a = legacy_stage_view(pd.DataFrame([written])).iloc[0]
        average = {k: float(a[k]) for k in (*STAGE_KEYS, "total_ms")}
    else:
        average = {k: float(view[k].mean()) for k in (*STAGE_KEYS, "total_ms")}
    total = average["total_ms"]
    for k in STAGE_KEYS:
        average[k.replace("_ms", "_percent")] = round(average[k] / total * 100, 2) if total else 0.0
    own = own_stages(prof)
    own_total = profile_step_average(prof).comparable.get("total_ms") or 0.0
    return {
        "total_steps": int(len(view)),
        # MindInsight's three stages, as MindInsight 2.3.1 shows them (new-format stage sets mapped onto them)
        "mapping": "MindInsight 2.3.1's step interval, forward+backward and tail",
        "average": average,
        # the run's own stages (step_trace_time.csv: computing, communication not overlapped, free, ...)
        "stages": own,
        "stages_percent": {k: round(v / own_total * 100, 2) if own_total else None for k, v in own.items()},
        "steps": [{"step": int(r.step), **{k: float(getattr(r, k)) for k in (*STAGE_KEYS, "total_ms")}}
                  for r in view.itertuples(index=False)],
    }


def inconsistent_average(step_trace: dict | None, rel: float = 0.01) -> dict | None:
    """When the average row a profiler wrote contradicts itself (its total is not the sum of its stages,
    as in legacy/run_2_lenet: total 0 ms, step interval 12.4321 ms), what the recorded steps say instead:
    ``{"written_total_ms", "stages_sum_ms", "mean": {stage and total means of the step rows}}``; None
    when the average is consistent (within ``rel``) or there is no step trace. ``step_trace``: the
    summary's ``step_trace`` section."""
    if not step_trace or not step_trace.get("average") or not step_trace.get("steps"):
        return None
    avg = step_trace["average"]
    stages_sum = sum(float(avg.get(k, 0.0) or 0.0) for k in STAGE_KEYS)
    total = float(avg.get("total_ms", 0.0) or 0.0)
    if abs(total - stages_sum) <= max(rel * max(abs(total), abs(stages_sum)), 1e-3):
        return None
    rows = pd.DataFrame(step_trace["steps"])
    return {"written_total_ms": total, "stages_sum_ms": stages_sum,
            "mean": {k: round(float(rows[k].mean()), 4) for k in (*STAGE_KEYS, "total_ms")}}


def _op_types(prof) -> dict:
    t = prof.op_types
    out = {}
    if t is None or t.empty:
        return out
    for kind, g in t.groupby("kind", sort=False):
        g = g.sort_values("total_time_us", ascending=False, kind="stable")
        out[kind] = [{"op_type": r.op_type, "total_time_us": float(r.total_time_us), "count": _int(r.count),
                      "avg_time_us": float(r.avg_time_us), "percent": float(r.percent)}
                     for r in g.itertuples(index=False)]
    return out


def _ops(prof) -> dict:
    t = prof.ops
    out = {}
    if t is None or t.empty:
        return out
    for kind, g in t.groupby("kind", sort=False):
        top = g.sort_values("total_time_us", ascending=False, kind="stable").head(10)
        out[kind] = {"rows": int(len(g)),
                     "top": [{"op_name": r.op_name, "op_type": r.op_type, "total_time_us": float(r.total_time_us),
                              "count": _int(r.count)} for r in top.itertuples(index=False)]}
    return out


def _minddata(prof) -> dict | None:
    from . import minddata as md
    pipeline, host, device, cpu = prof.minddata_pipeline, prof.host_queue, prof.device_queue, prof.cpu_utilization
    if all(f is None or f.empty for f in (pipeline, host, device, cpu)):
        return None
    out = {"pipeline": [], "bottleneck_op_ids": [], "host_queue": None, "device_queue": None,
           "cpu_utilization": None}
    if pipeline is not None and not pipeline.empty:
        for r in pipeline.itertuples(index=False):
            out["pipeline"].append({
                "op_id": int(r.op_id), "op_type": r.op_type, "num_workers": _int(r.num_workers),
                "output_queue_average_size": _float(r.output_queue_average_size),
                "output_queue_length": _int(r.output_queue_length),
                "output_queue_usage_rate": _float(r.output_queue_usage_rate),
                "parent_id": _int(r.parent_id), "children_ids": [int(c) for c in (r.children_ids or [])]})
        out["bottleneck_op_ids"] = sorted(int(i) for i in md.bottleneck_ops(pipeline).op_ids)
    queues = md.queue_summary(host, device)
    out["host_queue"] = queues.get("host_queue")
    out["device_queue"] = queues.get("device_queue")
    if cpu is not None and not cpu.empty:
        c = md.cpu_summary(cpu)
        out["cpu_utilization"] = {k: c[k] for k in ("device_user_pct_avg", "device_sys_pct_avg",
                                                    "device_idle_pct_avg")}
    return out


def _flops(prof) -> dict | None:
    """The run's FLOPs figures (`analysis.flops.summary_figures`: ``total_mflops``, ``gflops_per_s``,
    ``utilization_pct``), from flops_summary_*.json or the operators' flops; None without either."""
    from .flops import summary_figures
    if prof.flops.empty and not prof.flops_summary:
        return None
    return summary_figures(prof.flops_summary, prof.flops) or None


def _memory(prof, peak: bool = True) -> dict | None:
    """The memory peak and what is alive at it (`analysis.memory_peak.MemoryPeak.to_dict`) under ``peak``
    (with ``peak``); None without a memory record."""
    if prof.memory is None or not len(prof.memory):
        return None
    if not peak:
        return {}
    from .memory_peak import alive_at_peak
    return {"peak": alive_at_peak(prof).to_dict()}


def _timeline(prof, totals_too: bool = True) -> dict | None:
    ev = prof.timeline
    if ev is None or ev.empty or "start_us" not in ev:
        return None
    # Column arithmetic on the codes in passes of a few million rows, no row selection: a selection would
    # copy every column of a frame that can hold tens of millions of events (memory-mapped on a trace
    # larger than memory), and whole-column temporaries would cost as much.
    start = ev["start_us"].to_numpy(dtype=np.float64)
    dur = ev["dur_us"].to_numpy(dtype=np.float64)
    origin = prof.origin_us
    out = {"events": int(len(ev)), "tracks": _track_count(ev["track"].to_numpy()),
           "start_us": float(origin + start.min()),
           "end_us": float(origin + events_end(start, dur))}
    if totals_too:
        out.update(_totals(ev, dur))
    release_pages(ev)  # after the passes above, which page the mapped columns in
    return out


def _totals(ev: pd.DataFrame, dur: np.ndarray) -> dict:
    """The timeline's ``by_type`` and ``scope_layers``: each op type's and scope layer's event count and
    total duration, most time first."""
    # scope-layer bars span the operators under them: counted apart, never as an operator type
    scope = ev["is_scope"].to_numpy(dtype=bool) if "is_scope" in ev else np.zeros(len(ev), dtype=bool)
    passes = row_passes(len(ev))
    scope_rows = np.flatnonzero(scope)

    def totals(column: str, in_scope: bool) -> dict:
        # Categorical.codes: a view (of the mapped file, on disk); pandas' .cat.codes would copy them
        codes, values = (ev[column].array.codes, ev[column].cat.categories) \
            if isinstance(ev[column].dtype, pd.CategoricalDtype) else pd.factorize(ev[column], sort=True)
        # bins shifted by one: a missing value (code −1) and, out of scope, a scope bar land in bin 0
        count, total = np.zeros(len(values) + 1, np.int64), np.zeros(len(values) + 1, np.float64)
        for p in ([scope_rows] if in_scope else passes):
            c, d = np.add(codes[p], 1, dtype=np.intp), dur[p]
            if not in_scope and len(scope_rows):
                c[scope[p]] = 0
            if np.isnan(d).any():   # a missing duration adds 0 (one pass to find out, where the replacement takes two)
                d = np.where(np.isnan(d), 0.0, d)
            count += np.bincount(c, minlength=len(values) + 1)
            total += np.bincount(c, weights=d, minlength=len(values) + 1)
        count, total = count[1:], total[1:]
        used = np.flatnonzero(count)
        order = used[np.argsort(-total[used], kind="stable")]
        return {str(values[i]): {"count": int(count[i]), "total_us": float(total[i])} for i in order}
    return {"by_type": totals("op_type", False), "scope_layers": totals("name", True)}


def _track_count(track: np.ndarray) -> int:
    """How many tracks have events, pass by pass: where a pass's ids are sorted (the timeline's are, by track
    then start) its tracks are read off where the id changes, else from a bincount (which casts and scans the
    ids thrice)."""
    seen: set = set()
    for p in row_passes(len(track)):
        t = track[p]
        if (t[1:] >= t[:-1]).all():
            seen.update(t[np.concatenate([[0], np.flatnonzero(t[1:] != t[:-1]) + 1])].tolist())
        else:
            seen.update(np.flatnonzero(np.bincount(t)).tolist())
    return len(seen)


def _int(v):
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return int(v)


def _float(v):
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v)


def _plain(o):
    """JSON-ready: numpy scalars to Python, NaN/inf to None (JSON has neither)."""
    kind = type(o)   # the plain types first, by identity: the summary holds tens of thousands of them
    if kind is float:
        return o if math.isfinite(o) else None
    if kind is str or kind is int or kind is bool or o is None:
        return o
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if o is pd.NA:
        return None
    return o
