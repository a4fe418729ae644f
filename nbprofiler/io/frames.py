"""Builders: `RunFiles` -> the DataFrames that `Profile` exposes. One function per frame.

Each builder picks the best source file(s) for its frame among the roles found (a run may have
several generations' files), calls the parser of that file family (``legacy``, ``framework``,
``minddata``, ``ascend_ms``, ``cann``, ``trace``) and returns a frame with the documented columns.
Parsers raise `ProfilerDataError`; partial loads warn with `ProfilerDataWarning` (an instance whose
``error`` attribute is the `ProfilerDataError`), which `Profile` records as a problem.

The docstrings here are the data-model contract (copied to README "Data model").
"""
from __future__ import annotations

import pandas as pd

from ..errors import ProfilerDataError
from .discover import RunFiles

OP_KINDS = ["ai_core", "ai_cpu", "cpu", "gpu", "npu", "communication"]


def origin_us(run: RunFiles, prof) -> float:
    """Absolute time (us) of the profile's time origin: the earliest timeline event where a timeline
    exists, else the earliest kernel start, else 0.0. Relative ``start_*`` columns count from it."""
    from . import trace
    return trace.origin_us(run, prof)


def run_info(run: RunFiles, prof) -> dict:
    """profiler_info_*.json, profiler_metadata.json and CANN info/start/end files merged into one dict."""
    from . import ascend_ms
    return ascend_ms.run_info(run, prof)


# -- step trace -------------------------------------------------------------------------------------
def step_trace(run: RunFiles, prof) -> pd.DataFrame | None:
    """One row per real step (an average row is not a step).

    Columns: ``step`` (int64, 1-based as in the file), ``total_ms`` (float64) and the stage columns
    (float64 ms) that stack up to ``total_ms``:
    - legacy ``step_trace_raw_*`` and CANN step_trace: ``iteration_interval_ms`` (step gap: waiting for
      data), ``fp_and_bp_ms`` (forward + backward), ``tail_ms`` (step tail: gradient aggregation,
      parameter update); inference files ``fp_ms`` instead of the last two. Also ``start_ms``,
      ``fp_start_ms``, ``bp_end_ms``, ``end_ms`` (absolute points ÷1e5, float64 ms on the device clock).
      Values are ticks ÷ 100 000 rounded to 4 decimals, exactly as MindInsight shows them.
    - new format ``step_trace_time.csv`` / ``cluster_step_trace_time.csv``: ``preparing_ms``,
      ``computing_ms``, ``communication_not_overlapped_ms``, ``free_ms`` (stages) and
      ``overlapped_ms``, ``communication_ms``, ``stage_ms``, ``bubble_ms``,
      ``communication_not_overlapped_exclude_receive_ms`` (extras).
    The file's own average row (MindInsight's "average") goes to ``prof.step_trace_average``; set it with
    ``prof._cache["step_trace_average"] = {...}``.
    """
    from . import ascend_ms, cann, legacy
    if run.has("step_trace"):
        return legacy.step_trace(run, prof)
    if run.has("step_trace_time"):
        return ascend_ms.step_trace_time(run, prof)
    if run.has("cluster_step_trace_time"):
        return ascend_ms.cluster_step_trace_rank(run, prof)
    if run.has("cluster_analysis_db"):
        from . import db
        return db.cluster_step_trace(run)
    if run.has("cann_step_trace"):
        return cann.step_trace(run, prof)
    if run.has("analysis_db", "profiler_db", "msprof_db"):
        from . import db
        return db.step_trace(run, prof)
    return None


def step_stages(df: pd.DataFrame) -> list[str]:
    """Stage columns of a step_trace frame, in display order."""
    for stages in (["iteration_interval_ms", "fp_and_bp_ms", "tail_ms"], ["iteration_interval_ms", "fp_ms"],
                   ["preparing_ms", "computing_ms", "communication_not_overlapped_ms", "free_ms"],
                   ["computing_ms", "communication_not_overlapped_ms", "free_ms"]):
        if all(c in df.columns for c in stages):
            return stages
    return []


def step_trace_reduce(run: RunFiles, prof) -> pd.DataFrame | None:
    """Reduce / communication sub-stages of each step (legacy ``stream_*`` columns, CANN ``Reduce_*``).

    Columns: ``step`` (int64), ``stream_id`` (int64), ``name`` (str: the column prefix, e.g.
    ``stream_48_0_Receive-op663``), ``start_ms`` (float64, relative to the step's ``start_ms``),
    ``dur_ms`` (float64). Events written as 0 (missing) are dropped, as MindInsight drops them.
    """
    from . import cann, legacy
    if run.has("step_trace"):
        return legacy.step_trace_reduce(run, prof)
    if run.has("cann_step_trace"):
        return cann.step_trace_reduce(run, prof)
    return None


def step_windows(run: RunFiles, prof) -> pd.DataFrame | None:
    """Each step's span on the timeline's clock, for linking a step to the timeline: ``step`` (int64),
    ``start_us``, ``end_us`` (float64, relative to ``origin_us``), ``source`` (str: how the clocks were
    matched). From the kernels' step ids where they exist; else from the step trace's points: CANN step
    traces share the timeline's monotonic clock, legacy points (device ticks) are shifted by the device
    time of the first AI Core op (``min_cycle_counter_*`` or ``output_timeline_data_*``) against that op on
    the timeline. None when the
    clocks cannot be matched, or when the result does not overlap the timeline at all."""
    import numpy as np

    from . import legacy
    kernels = prof.kernels
    if kernels is not None and not kernels.empty and kernels["step"].notna().any():
        k = kernels.dropna(subset=["step"])
        g = (k.assign(end_us=k["start_us"] + k["dur_us"]).groupby("step")
             .agg(start_us=("start_us", "min"), end_us=("end_us", "max")).reset_index())
        out = g.assign(step=g["step"].astype("int64"), source="kernel step ids")
    else:
        steps = prof.step_trace
        if steps is None or steps.empty or not {"start_ms", "end_ms"} <= set(steps.columns):
            return None
        if run.generation == "cann":
            shift_us, source = prof.origin_us, "CANN step trace (the timeline's clock)"
        else:
            # The earliest AI Core op on the device clock (ms) is the earliest event of the device's own
            # stream tracks on the timeline; the difference of the two maps device time to timeline time.
            first_op_ms = legacy.timeline_device_origin_ms(run)
            anchor_us = _first_device_op_us(prof)
            if first_op_ms is None or anchor_us is None:
                return None
            shift_us, source = first_op_ms * 1000.0 - anchor_us, "step-trace points aligned on the first AI Core op"
        out = pd.DataFrame({"step": steps["step"].astype("int64"),
                            "start_us": steps["start_ms"].astype(float) * 1000.0 - shift_us,
                            "end_us": steps["end_ms"].astype(float) * 1000.0 - shift_us,
                            "source": source})
    events = prof.timeline
    if events is None or events.empty:
        return out
    t0, t1 = float(events["start_us"].min()), float((events["start_us"] + events["dur_us"].fillna(0)).max())
    overlaps = (out["end_us"] > t0) & (out["start_us"] < t1)
    return out if bool(np.any(overlaps)) else None


def _first_device_op_us(prof) -> float | None:
    """Start (relative us) of the earliest event on the device's own stream tracks of a legacy timeline
    (pid = the device id; not the AI CPU 9000, communication 10000 or host 11000 processes)."""
    tracks, events = prof.timeline_tracks, prof.timeline
    if tracks is None or tracks.empty or events is None or events.empty:
        return None
    own = tracks.loc[tracks["pid"].astype(str) == str(prof.device), "track"]
    if own.empty:
        own = tracks.loc[~tracks["pid"].astype(str).isin(["9000", "10000", "11000"]), "track"]
    starts = events.loc[events["track"].isin(own), "start_us"]
    return float(starts.min()) if len(starts) else None


def step_point_info(run: RunFiles, prof):
    from . import legacy
    return legacy.step_point_info(run, prof)


# -- operators --------------------------------------------------------------------------------------
def op_types(run: RunFiles, prof) -> pd.DataFrame | None:
    """Per operator type and device kind, sorted by ``kind`` then ``total_time_us`` descending.

    Columns: ``kind`` (str: ai_core, ai_cpu, cpu, gpu, npu, communication — HCCL kernels, never
    operators), ``op_type`` (str), ``total_time_us``
    (float64, summed execution time), ``count`` (int64, executions), ``avg_time_us`` (float64,
    total/count), ``percent`` (float64, 0..100: this type's share of the kind's total, recomputed from
    the times), ``file_percent`` (float64, the file's own percent column as written, NaN if none; its
    scale varies between writers, see FORMATS.md 3.3).
    Sources: aicore_intermediate_*_type, aicpu_intermediate_* (grouped), cpu_op_type_info,
    gpu_op_type_info, kernel_details.csv / op_statistic.csv (kind "npu").
    """
    from .ops import op_types as build
    return build(run, prof)


def ops(run: RunFiles, prof) -> pd.DataFrame | None:
    """Per operator (full scope name) and device kind, sorted by ``kind`` then ``total_time_us`` desc.

    Columns: ``kind``, ``op_name`` (full scope name as in the files), ``op_type``, ``total_time_us``,
    ``count`` (Int64, <NA> where the file does not say), ``avg_time_us``; optional: ``short_name``,
    ``stream_id``, ``task_id``, ``block_dim``, ``op_info`` (str, JSON), ``dispatch_time_us`` (AI CPU),
    ``mflops_cube``/``gflops_cube``/... (joined from flops files).
    """
    from .ops import ops as build
    out = build(run, prof)
    if run.has("cpu_framework") and out is not None:
        from ._util import warn_partial
        from .families import input_shapes, join_input_shapes
        try:
            out = join_input_shapes(out, prof.input_shapes if prof is not None else input_shapes(run))
        except ProfilerDataError as err:
            warn_partial(err)
    return out


def kernels(run: RunFiles, prof) -> pd.DataFrame | None:
    """One row per device task from ``kernel_details.csv``: ``step`` (Int64), ``model_id``, ``task_id``,
    ``stream_id`` (Int64, <NA> for N/A), ``name``, ``type``, ``accelerator_core``, ``start_us``
    (float64, relative to ``origin_us``), ``dur_us``, ``wait_us`` (float64), ``block_dim``, and every
    other column present, snake_cased, with units in the name (``aicore_time_us`` ...)."""
    from . import ascend_ms, db
    if run.has("kernel_details"):
        return ascend_ms.kernels(run, prof)
    if db.has_db(run):
        return db.kernels(run, prof)
    return None


def flops(run: RunFiles, prof) -> pd.DataFrame | None:
    """``flops_*.txt`` per op: ``op_name`` plus the numeric columns mapped by header name
    (``mflops_cube``, ``gflops_cube``, ``utilization_cube_pct``, ``mflops_vector``, ``gflops_vector``,
    ``utilization_vector_pct``; 4-column files: ``mflops``, ``gflops``, ``utilization_pct``)."""
    from . import legacy
    if run.has("flops"):
        return legacy.flops(run, prof)
    return None


def flops_summary(run: RunFiles, prof) -> dict | None:
    from . import legacy
    if run.has("flops_summary"):
        return legacy.flops_summary(run, prof)
    return None


# -- MindData ---------------------------------------------------------------------------------------
def minddata_pipeline(run: RunFiles, prof) -> pd.DataFrame | None:
    """One row per pipeline op, in breadth-first order from the root (op 0).

    Columns: ``op_id`` (int64), ``op_type`` (str as written, e.g. ``BatchOp``), ``num_workers`` (int64),
    ``parent_id`` (Int64, <NA> for the root), ``children_ids`` (list of int), ``output_queue_length``
    (Int64 capacity, <NA> without queue), ``output_queue_average_size`` (float64, NaN without queue),
    ``output_queue_usage_rate`` (float64, 0..1 = average/capacity), ``sample_interval_ms`` (float64).
    Source: minddata_pipeline_raw_*.csv, else derived from pipeline_profiling_*.json as MindSpore does.
    """
    from . import minddata
    return minddata.pipeline(run, prof)


def minddata_queues(run: RunFiles, prof) -> pd.DataFrame | None:
    """Sampled output-queue sizes, long form: ``op_id`` (int64), ``sample`` (int64, 0-based),
    ``time_ms`` (float64, the CPU-utilisation time stamp of that sample where the lengths agree, else
    NaN), ``size`` (int64 items in the queue), ``length`` (int64 capacity)."""
    from . import minddata
    return minddata.queues(run, prof)


def host_queue(run: RunFiles, prof) -> pd.DataFrame | None:
    """The host-side queue feeding the device, one row per step: ``step`` (int64), ``size`` (int64),
    ``capacity`` (int64), ``get_ms``, ``push_ms``, ``batch_ms`` (float64 ms; NaN if absent),
    ``timestamp_ms`` (float64, NaN in old files). ``attrs["source"]`` = "device_queue" (sink mode,
    device_queue_profiling_*) or "dataset_iterator" (non-sink, dataset_iterator_profiling_*)."""
    from . import minddata
    return minddata.host_queue(run, prof)


def device_queue(run: RunFiles, prof) -> pd.DataFrame | None:
    """The device-side data queue (GetNext), one row per record: ``index`` (int64), ``name`` (str),
    ``start_us``, ``end_us`` (float64, device clock), ``get_next_ms`` (float64), ``size`` (Int64)."""
    from . import minddata
    return minddata.device_queue(run, prof)


def cpu_utilization(run: RunFiles, prof) -> pd.DataFrame | None:
    """Whole-machine and process CPU use per sample: ``sample`` (int64), ``time_ms`` (float64),
    ``user_pct``, ``sys_pct``, ``io_pct``, ``idle_pct`` (float64, device), ``context_switches``,
    ``runnable_processes`` (float64), ``process_user_pct``, ``process_sys_pct`` (float64, NaN where the
    series is shorter). Series of unequal length are aligned by index against ``time_stamp`` (the 2N
    series are truncated to N, as MindInsight does). Also ``step`` (Int64: the step MindInsight maps the
    sample to, 0 before the first host-queue record, <NA> without a host-queue file) and, where written,
    ``process_pss_mb``/``process_rss_mb``/``process_vss_mb``/``sys_total_mb``/``sys_available_mb``/
    ``sys_used_mb`` (float64 MB)."""
    from . import minddata
    return minddata.cpu_utilization(run, prof)


def op_cpu_utilization(run: RunFiles, prof) -> pd.DataFrame | None:
    """Per pipeline op CPU use: ``op_id``, ``sample``, ``time_ms``, ``user_pct``, ``sys_pct`` (an op -1
    entry, CPU outside any op, is kept as written; analyses drop it)."""
    from . import minddata
    return minddata.op_cpu_utilization(run, prof)


def minddata_summary(run: RunFiles, prof) -> dict | None:
    from . import minddata
    return minddata.summary_file(run, prof)


# -- timeline ---------------------------------------------------------------------------------------
def timeline(run: RunFiles, prof) -> pd.DataFrame | None:
    """Complete events (``X``, and ``B``/``E`` pairs) of the timeline, sorted by ``track``, ``start_us``.

    Columns: ``track`` (int32, index into ``timeline_tracks``), ``name`` (category dtype), ``op_type``
    (category: ``args.type`` where present, else derived from the name), ``ph`` (category), ``cat``
    (category), ``start_us`` (float64, relative to ``origin_us``), ``dur_us`` (float64), ``args`` (str
    JSON or None). Sources: trace_view.json, ascend/gpu/legacy timeline_display, CANN msprof timelines.
    """
    from . import trace
    if _db_timeline(run):
        tl, tracks, _ = _db_trace(run, prof)
        return None if tl is None else trace.mark_scope_layers(tl, tracks)
    return trace.timeline_frame(run, prof)


def timeline_tracks(run: RunFiles, prof) -> pd.DataFrame | None:
    """One row per (process, thread): ``track`` (int32), ``pid``, ``tid`` (str), ``process``,
    ``thread`` (str names from the ``M`` events, else the ids), ``process_sort``, ``thread_sort``
    (int64), ``events`` (int64)."""
    from . import trace
    if _db_timeline(run):
        return _db_trace(run, prof)[1]
    return trace.tracks_frame(run, prof)


def _db_timeline(run: RunFiles) -> bool:
    """The timeline comes from the database only when the run has no trace JSON of its own."""
    from . import db, trace
    return db.has_db(run) and trace.trace_sources(run) is None and not run.has("cpu_op_timestamp")


def _db_trace(run: RunFiles, prof):
    from . import db
    build = lambda: db.timeline(run, prof) or (None, None, None)  # noqa: E731
    return prof.cached("db_timeline", build) if prof is not None else build()


def timeline_flows(run: RunFiles, prof) -> pd.DataFrame | None:
    """Flow arrows paired by (cat, id): ``cat``, ``id`` (str), ``name``, ``start_track``, ``start_us``,
    ``end_track``, ``end_us``."""
    from . import trace
    if _db_timeline(run):
        return _db_trace(run, prof)[2]
    return trace.flows_frame(run, prof)


def timeline_counters(run: RunFiles, prof) -> pd.DataFrame | None:
    """Counter (``C``) samples: ``pid``, ``name``, ``series`` (args key), ``start_us``, ``value``."""
    from . import trace
    return trace.counters_frame(run, prof)


def timeline_summary(run: RunFiles, prof) -> dict | None:
    from . import legacy
    if run.has("timeline_summary"):
        return legacy.timeline_summary(run, prof)
    return None


# -- memory, communication, cluster -----------------------------------------------------------------
def memory(run: RunFiles, prof) -> pd.DataFrame | None:
    """Allocator totals over time: ``component`` (str), ``time_us`` (float64, relative to origin),
    ``allocated_mb``, ``reserved_mb``, ``active_mb`` (float64 MB), ``device`` (str).
    Sources: memory_record.csv, FRAMEWORK/cpu_ms_memory_record_*.txt (ns, bytes)."""
    from . import ascend_ms, db, framework
    if run.has("memory_record"):
        return ascend_ms.memory_record(run, prof)
    if run.has("cpu_memory_record"):
        return framework.memory_record(run, prof)
    if db.has_db(run):
        return db.memory(run, prof)
    return None


def operator_memory(run: RunFiles, prof) -> pd.DataFrame | None:
    """operator_memory.csv: ``name``, ``size_kb``, ``alloc_us``, ``release_us``, ``dur_us`` and the
    other columns snake_cased."""
    from . import ascend_ms, db
    if run.has("operator_memory"):
        return ascend_ms.operator_memory(run, prof)
    if db.has_db(run):
        return db.operator_memory(run, prof)
    return None


def communication(run: RunFiles, prof) -> pd.DataFrame | None:
    """Per communication op (and rank): ``step`` (str key, "step1" or "step"), ``group``, ``op_name``,
    ``rank`` (str), ``start_us`` (float64, absolute), ``elapse_ms``, ``transit_ms``, ``wait_ms``,
    ``sync_ms``, ``idle_ms`` (float64), ``wait_ratio``, ``sync_ratio`` (float64).
    Sources: communication.json, cluster_communication.json, the database's COMMUNICATION_OP."""
    from . import ascend_ms, db
    if not run.has("communication", "cluster_communication"):
        found = db.analysis_communication(run) if run.has("analysis_db") else None
        if found is None and run.has("cluster_analysis_db"):
            found = db.analysis_communication(run, cluster=True)
        if found is not None:
            return found
        if db.has_db(run):
            return db.communication(run, prof)
    return ascend_ms.communication(run, prof)


def communication_links(run: RunFiles, prof) -> pd.DataFrame | None:
    """Per op, rank and transport: ``transport`` (RDMA/HCCS/PCIE/SDMA/SIO), ``size_mb``, ``transit_ms``,
    ``bandwidth_gbps``, ``large_packet_ratio`` (and the keys of ``communication``)."""
    from . import ascend_ms, db
    if not run.has("communication", "cluster_communication") and run.has("analysis_db"):
        return db.analysis_links(run)
    if not run.has("communication", "cluster_communication") and run.has("cluster_analysis_db"):
        return db.analysis_links(run, cluster=True)
    return ascend_ms.communication_links(run, prof)


def hccl(run: RunFiles, prof) -> pd.DataFrame | None:
    """Legacy ``hccl_raw_*.csv`` per step: ``step`` (int64; the average row excluded and kept in
    ``attrs["average"]``), ``communication_cost_ms``, ``wait_cost_ms`` (float64)."""
    from . import legacy
    if run.has("hccl_raw"):
        return legacy.hccl(run, prof)
    return None


def hccl_links(run: RunFiles, prof) -> pd.DataFrame | None:
    """Legacy ``hccl_raw_*.csv`` link_info per step: ``step``, ``src``, ``dst`` (int64 ranks),
    ``transport``, ``time_ms``, ``size``, ``bandwidth`` (float64; size/bandwidth units unlabelled)."""
    from . import legacy
    if run.has("hccl_raw"):
        return legacy.hccl_links(run, prof)
    return None


def communication_matrix(run: RunFiles, prof) -> pd.DataFrame | None:
    """Per op and link (src rank -> dst rank): ``step``, ``group``, ``op_name``, ``src``, ``dst`` (str),
    ``transport`` (LOCAL/HCCS/RDMA/SDMA/PCIE/SIO), ``size_mb``, ``transit_ms``, ``bandwidth_gbps``
    (float64). Sources: communication_matrix.json (this rank), cluster_communication_matrix.json (the
    links whose source is this rank). Feeds `analysis.cluster.communication_matrix` like ``hccl_raw``."""
    from . import families
    return families.communication_matrix(run, prof)


def communication_groups(run: RunFiles, prof) -> pd.DataFrame | None:
    """communication_group.json: ``kind`` (collective/p2p), ``group`` (int64), ``ranks`` (tuple of str),
    ``size`` (int64)."""
    from . import families
    return families.communication_groups(run, prof)


def npu_module_mem(run: RunFiles, prof) -> pd.DataFrame | None:
    """CANN per-module reserved memory: ``component``, ``time_us`` (relative), ``reserved_mb``,
    ``device``. Sources: npu_module_mem.csv, the database's NPU_MODULE_MEM."""
    from . import families
    return families.npu_module_mem(run, prof)


def api_statistic(run: RunFiles, prof) -> pd.DataFrame | None:
    """api_statistic.csv by header name: ``level``, ``api_name``, ``time_us``, ``count``, ``avg_us``,
    ``min_us``, ``max_us``, ``variance``."""
    from . import families
    return families.api_statistic(run, prof)


def operator_details(run: RunFiles, prof) -> pd.DataFrame | None:
    """operator_details.csv: ``name``, ``input_shapes``, ``call_stack``, ``host_self_duration_us``,
    ``host_total_duration_us``, ``device_self_duration_us``, ``device_total_duration_us``, ... (us)."""
    from . import families
    return families.operator_details(run, prof)


def l2_cache(run: RunFiles, prof) -> pd.DataFrame | None:
    """l2_cache.csv: ``stream_id``, ``task_id``, ``hit_rate``, ``victim_rate`` (0..1), ``op_name``."""
    from . import families
    return families.l2_cache(run, prof)


def static_op_mem(run: RunFiles, prof) -> pd.DataFrame | None:
    """static_op_mem.csv by header name (snake_case, units in the names)."""
    from . import families
    return families.static_op_mem(run, prof)


def data_preprocess(run: RunFiles, prof) -> pd.DataFrame | None:
    """data_preprocess.csv (CANN AI CPU preprocessing) by header name."""
    from . import families
    return families.data_preprocess(run, prof)


def dataset(run: RunFiles, prof) -> pd.DataFrame | None:
    """dataset.csv (MindSpore dataset ranges) by header name."""
    from . import families
    return families.dataset(run, prof)


def input_shapes(run: RunFiles, prof) -> pd.DataFrame | None:
    """FRAMEWORK/cpu_framework_*: ``op_name`` (short name), ``op_type``, ``input_shapes``, ``count`` per
    operator and distinct input shapes; joined into ``ops`` as ``input_shapes``."""
    from . import families
    return families.input_shapes(run, prof)


# Which frames each file role is read into (`Profile.files` shows it; a role absent here feeds nothing).
FEEDS: dict[str, tuple[str, ...]] = {
    "step_trace": ("step_trace", "step_trace_reduce", "step_windows"), "step_trace_point_info": ("step_point_info",),
    "aicore_type": ("op_types",), "aicore_detail": ("ops",), "aicpu": ("op_types", "ops"),
    "framework": ("ops",), "cpu_op_type": ("op_types",), "cpu_op_detail": ("ops", "timeline"),
    "cpu_op_timestamp": ("timeline",), "cpu_framework": ("input_shapes", "ops"),
    "cpu_memory_record": ("memory",), "gpu_op_type": ("op_types",), "gpu_op_detail": ("ops",),
    "timeline": ("timeline", "timeline_tracks", "timeline_flows", "timeline_counters"),
    "timeline_summary": ("timeline_summary",), "min_cycle_counter": ("step_windows",),
    "output_timeline_data": ("step_windows",), "flops": ("flops", "ops"), "flops_summary": ("flops_summary",),
    "hccl_raw": ("hccl", "hccl_links"), "cluster_analyse": ("cluster_analyse",), "profiler_info": ("info",),
    "profiler_metadata": ("info",), "pipeline_profiling": ("minddata_pipeline", "minddata_queues"),
    "minddata_cpu_utilization": ("cpu_utilization", "op_cpu_utilization"),
    "device_queue": ("host_queue",), "dataset_iterator": ("host_queue",), "minddata_aicpu": ("device_queue",),
    "minddata_getnext": ("device_queue",), "minddata_pipeline_raw": ("minddata_pipeline", "minddata_queues"),
    "minddata_pipeline_summary_json": ("minddata_summary",), "minddata_pipeline_summary_csv": ("minddata_summary",),
    "kernel_details": ("kernels", "op_types", "ops", "step_windows"), "op_statistic": ("op_types",),
    "step_trace_time": ("step_trace",), "trace_view": ("timeline", "timeline_tracks", "timeline_flows",
                                                       "timeline_counters"),
    "memory_record": ("memory",), "operator_memory": ("operator_memory",), "npu_module_mem": ("npu_module_mem",),
    "communication": ("communication", "communication_links"), "communication_matrix": ("communication_matrix",),
    "dataset": ("dataset",), "api_statistic": ("api_statistic",), "operator_details": ("operator_details",),
    "l2_cache": ("l2_cache",), "static_op_mem": ("static_op_mem",), "data_preprocess": ("data_preprocess",),
    "communication_group": ("communication_groups",),
    "cluster_step_trace_time": ("step_trace",), "cluster_communication": ("communication", "communication_links"),
    "cluster_communication_matrix": ("communication_matrix",),
    "profiler_db": ("kernels", "op_types", "ops", "step_trace", "memory", "operator_memory", "npu_module_mem",
                    "communication", "timeline", "timeline_tracks", "info"),
    "msprof_db": ("kernels", "op_types", "ops", "step_trace", "memory", "operator_memory", "npu_module_mem",
                  "communication", "timeline", "timeline_tracks", "info"),
    "analysis_db": ("step_trace", "communication", "communication_links", "communication_matrix"),
    "cluster_analysis_db": ("step_trace", "communication", "communication_links", "communication_matrix",
                            "communication_groups"),
    "cann_timeline": ("timeline", "timeline_tracks", "timeline_flows", "timeline_counters"),
    "cann_hccl": ("timeline",), "cann_task_time": ("timeline",), "cann_step_trace": ("step_trace", "step_trace_reduce"),
    "cann_info": ("info",), "cann_start_info": ("info",), "cann_end_info": ("info",),
}


# Roles read only for the frames that no text file of the run gives (the text export wins when both exist).
DB_FALLBACK_ROLES = {"profiler_db", "msprof_db"}


def cluster_analyse(run: RunFiles, prof) -> pd.DataFrame | None:
    """Legacy ``ascend_cluster_analyse_*`` per step: ``step`` (int64; last row = average in
    ``attrs["average"]``) and the file's columns in ms (ticks converted for data-parallel files)."""
    from . import legacy
    if run.has("cluster_analyse"):
        return legacy.cluster_analyse(run, prof)
    return None
