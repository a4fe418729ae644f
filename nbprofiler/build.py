"""Builders: `RunFiles` -> the DataFrames that `Profile` exposes. One function per frame.

Each builder picks the best source file(s) for its frame among the roles found (a run may have
several generations' files), calls the parser of that file family (``legacy``, ``framework``,
``minddata``, ``ascend_ms``, ``cann``, ``trace``) and returns a frame with the documented columns.
Parsers raise `ProfilerDataError`; partial loads warn with `ProfilerDataWarning` (an instance whose
``error`` attribute is the `ProfilerDataError`), which `Profile` records as a problem.

What each frame holds (columns, dtypes, units, clock) is declared once in `nbprofiler.schema`; the
docstrings here say only which files a builder prefers.
"""
from __future__ import annotations

import pandas as pd

from .io.discover import RunFiles


def run_info(run: RunFiles, prof) -> dict:
    """profiler_info_*.json, profiler_metadata.json and CANN info/start/end files merged into one dict."""
    from .io import ascend_ms
    return ascend_ms.run_info(run, prof)


# -- step trace -------------------------------------------------------------------------------------
def step_trace(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `step_trace` frame (declared in `nbprofiler.schema`) from legacy step_trace_raw_*, else
    step_trace_time.csv, cluster_step_trace_time.csv, the cluster database, a CANN step trace, then a
    profiler database. The file's own average row goes to ``attrs['file_average']``
    (``prof.step_trace_average``)."""
    from .io import ascend_ms, cann, legacy
    if run.has("step_trace"):
        return legacy.step_trace(run, prof)
    if run.has("step_trace_time"):
        return ascend_ms.step_trace_time(run, prof)
    if run.has("cluster_step_trace_time"):
        return ascend_ms.cluster_step_trace_rank(run, prof)
    if run.has("cluster_analysis_db"):
        from .io import db
        return db.cluster_step_trace(run)
    if run.has("cann_step_trace"):
        return cann.step_trace(run, prof)
    if run.has("analysis_db", "profiler_db", "msprof_db"):
        from .io import db
        return db.step_trace(run, prof)
    return None


def step_trace_reduce(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `step_trace_reduce` frame (declared in `nbprofiler.schema`) from the legacy stream_* columns,
    else CANN Reduce_* events."""
    from .io import cann, legacy
    if run.has("step_trace"):
        return legacy.step_trace_reduce(run, prof)
    if run.has("cann_step_trace"):
        return cann.step_trace_reduce(run, prof)
    return None


def step_point_info(run: RunFiles, prof):
    from .io import legacy
    return legacy.step_point_info(run, prof)


# -- operators --------------------------------------------------------------------------------------
def op_types(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `op_types` frame (declared in `nbprofiler.schema`) from every operator-type file of the run, one
    kind each (`nbprofiler.io.ops`)."""
    from .io.ops import op_types as build
    return build(run, prof)


def ops(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `ops` frame (declared in `nbprofiler.schema`) from every operator-detail file of the run
    (`nbprofiler.io.ops`); `nbprofiler.derive.ops` joins the input shapes of FRAMEWORK/cpu_framework_*."""
    from .io.ops import ops as build
    return build(run, prof)


def kernels(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `kernels` frame (declared in `nbprofiler.schema`) from kernel_details.csv, else a profiler
    database."""
    from .io import ascend_ms, db
    if run.has("kernel_details"):
        return ascend_ms.kernels(run, prof)
    if db.has_db(run):
        return db.kernels(run, prof)
    return None


def flops(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `flops` frame (declared in `nbprofiler.schema`) from flops_*.txt."""
    from .io import legacy
    if run.has("flops"):
        return legacy.flops(run, prof)
    return None


def flops_summary(run: RunFiles, prof) -> dict | None:
    from .io import legacy
    if run.has("flops_summary"):
        return legacy.flops_summary(run, prof)
    return None


# -- MindData ---------------------------------------------------------------------------------------
def minddata_pipeline(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `minddata_pipeline` frame (declared in `nbprofiler.schema`) from minddata_pipeline_raw_*.csv,
    else derived from pipeline_profiling_*.json as MindSpore does."""
    from .io import minddata
    return minddata.pipeline(run, prof)


def minddata_queues(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `minddata_queues` frame (declared in `nbprofiler.schema`) from pipeline_profiling_*.json (or the
    raw CSV's queue columns)."""
    from .io import minddata
    return minddata.queues(run, prof)


def host_queue(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `host_queue` frame (declared in `nbprofiler.schema`) from device_queue_profiling_* (sink mode),
    else dataset_iterator_profiling_*."""
    from .io import minddata
    return minddata.host_queue(run, prof)


def device_queue(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `device_queue` frame (declared in `nbprofiler.schema`) from minddata_aicpu_* (µs), else
    minddata_getnext_profiling_* (ns)."""
    from .io import minddata
    return minddata.device_queue(run, prof)


def cpu_utilization(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `cpu_utilization` frame (declared in `nbprofiler.schema`) from minddata_cpu_utilization_*.json."""
    from .io import minddata
    return minddata.cpu_utilization(run, prof)


def op_cpu_utilization(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `op_cpu_utilization` frame (declared in `nbprofiler.schema`) from
    minddata_cpu_utilization_*.json."""
    from .io import minddata
    return minddata.op_cpu_utilization(run, prof)


def minddata_summary(run: RunFiles, prof) -> dict | None:
    from .io import minddata
    return minddata.summary_file(run, prof)


# -- timeline ---------------------------------------------------------------------------------------
def timeline(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `timeline` frame (declared in `nbprofiler.schema`) from the run's trace JSON
    (`nbprofiler.io.trace`), else the database's tasks and API calls."""
    from .io import trace
    if _db_timeline(run):
        tl, tracks, _ = _db_trace(run, prof)
        return None if tl is None else trace.mark_scope_layers(tl, tracks)
    return trace.timeline_frame(run, prof)


def timeline_tracks(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `timeline_tracks` frame (declared in `nbprofiler.schema`) from the trace's ``M`` events and
    pid/tid conventions, else the database."""
    from .io import trace
    if _db_timeline(run):
        return _db_trace(run, prof)[1]
    return trace.tracks_frame(run, prof)


def _db_timeline(run: RunFiles) -> bool:
    """The timeline comes from the database only when the run has no trace JSON of its own."""
    from .io import db, trace
    return db.has_db(run) and trace.trace_sources(run) is None and not run.has("cpu_op_timestamp")


def _db_trace(run: RunFiles, prof):
    from .io import db
    build = lambda: db.timeline(run, prof) or (None, None, None)  # noqa: E731
    return prof.cached("db_timeline", build) if prof is not None else build()


def timeline_flows(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `timeline_flows` frame (declared in `nbprofiler.schema`) from the trace's ``s``/``f`` events,
    else the database's launch arrows."""
    from .io import trace
    if _db_timeline(run):
        return _db_trace(run, prof)[2]
    return trace.flows_frame(run, prof)


def timeline_counters(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `timeline_counters` frame (declared in `nbprofiler.schema`) from the trace's ``C`` events."""
    from .io import trace
    return trace.counters_frame(run, prof)


def timeline_summary(run: RunFiles, prof) -> dict | None:
    from .io import legacy
    if run.has("timeline_summary"):
        return legacy.timeline_summary(run, prof)
    return None


# -- memory, communication, cluster -----------------------------------------------------------------
def memory(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `memory` frame (declared in `nbprofiler.schema`) from memory_record.csv, else
    FRAMEWORK/cpu_ms_memory_record_*.txt, else a profiler database."""
    from .io import ascend_ms, db, framework
    if run.has("memory_record"):
        return ascend_ms.memory_record(run, prof)
    if run.has("cpu_memory_record"):
        return framework.memory_record(run, prof)
    if db.has_db(run):
        return db.memory(run, prof)
    return None


def operator_memory(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `operator_memory` frame (declared in `nbprofiler.schema`) from operator_memory.csv, else a
    profiler database."""
    from .io import ascend_ms, db
    if run.has("operator_memory"):
        return ascend_ms.operator_memory(run, prof)
    if db.has_db(run):
        return db.operator_memory(run, prof)
    return None


def _step_numbers(df: pd.DataFrame | None) -> pd.DataFrame | None:
    """The communication files key ops by ``"step<N>"`` (or a bare ``"step"``): ``step`` as the number
    (Int64, <NA> where the key names no step)."""
    if df is not None and "step" in df.columns and not pd.api.types.is_integer_dtype(df["step"].dtype):
        digits = df["step"].astype("string").str.extract(r"(\d+)\s*$", expand=False)
        df["step"] = pd.to_numeric(digits, errors="coerce").astype("Int64")
    return df


def communication(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `communication` frame (declared in `nbprofiler.schema`) from communication.json /
    cluster_communication.json, else analysis.db or cluster_analysis.db, else a profiler database's
    COMMUNICATION_OP."""
    from .io import ascend_ms, db
    if not run.has("communication", "cluster_communication"):
        found = db.analysis_communication(run) if run.has("analysis_db") else None
        if found is None and run.has("cluster_analysis_db"):
            found = db.analysis_communication(run, cluster=True)
        if found is not None:
            return _step_numbers(found)
        if db.has_db(run):
            return _step_numbers(db.communication(run, prof))
    return _step_numbers(ascend_ms.communication(run, prof))


def communication_links(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `communication_links` frame (declared in `nbprofiler.schema`) from communication.json /
    cluster_communication.json, else analysis.db or cluster_analysis.db."""
    from .io import ascend_ms, db
    if not run.has("communication", "cluster_communication") and run.has("analysis_db"):
        return _step_numbers(db.analysis_links(run))
    if not run.has("communication", "cluster_communication") and run.has("cluster_analysis_db"):
        return _step_numbers(db.analysis_links(run, cluster=True))
    return _step_numbers(ascend_ms.communication_links(run, prof))


def hccl(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `hccl` frame (declared in `nbprofiler.schema`) from legacy hccl_raw_*.csv (the average row in
    ``attrs['average']``)."""
    from .io import legacy
    if run.has("hccl_raw"):
        return legacy.hccl(run, prof)
    return None


def hccl_links(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `hccl_links` frame (declared in `nbprofiler.schema`) from legacy hccl_raw_*.csv link_info cells."""
    from .io import legacy
    if run.has("hccl_raw"):
        return legacy.hccl_links(run, prof)
    return None


def communication_matrix(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `communication_matrix` frame (declared in `nbprofiler.schema`) from communication_matrix.json
    (this rank), else the links of cluster_communication_matrix.json whose source is this rank."""
    from .io import families
    return _step_numbers(families.communication_matrix(run, prof))


def communication_groups(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `communication_groups` frame (declared in `nbprofiler.schema`) from communication_group.json."""
    from .io import families
    return families.communication_groups(run, prof)


def npu_module_mem(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `npu_module_mem` frame (declared in `nbprofiler.schema`) from npu_module_mem.csv, else the
    database's NPU_MODULE_MEM."""
    from .io import families
    return families.npu_module_mem(run, prof)


def api_statistic(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `api_statistic` frame (declared in `nbprofiler.schema`) from api_statistic.csv."""
    from .io import families
    return families.api_statistic(run, prof)


def operator_details(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `operator_details` frame (declared in `nbprofiler.schema`) from operator_details.csv."""
    from .io import families
    return families.operator_details(run, prof)


def l2_cache(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `l2_cache` frame (declared in `nbprofiler.schema`) from l2_cache.csv."""
    from .io import families
    return families.l2_cache(run, prof)


def static_op_mem(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `static_op_mem` frame (declared in `nbprofiler.schema`) from static_op_mem.csv."""
    from .io import families
    return families.static_op_mem(run, prof)


def data_preprocess(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `data_preprocess` frame (declared in `nbprofiler.schema`) from data_preprocess.csv."""
    from .io import families
    return families.data_preprocess(run, prof)


def dataset(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `dataset` frame (declared in `nbprofiler.schema`) from dataset.csv."""
    from .io import families
    return families.dataset(run, prof)


def input_shapes(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `input_shapes` frame (declared in `nbprofiler.schema`) from FRAMEWORK/cpu_framework_*."""
    from .io import families
    return families.input_shapes(run, prof)


def cluster_analyse(run: RunFiles, prof) -> pd.DataFrame | None:
    """The `cluster_analyse` frame (declared in `nbprofiler.schema`) from legacy ascend_cluster_analyse_*
    (the average row in ``attrs['average']``)."""
    from .io import legacy
    if run.has("cluster_analyse"):
        return legacy.cluster_analyse(run, prof)
    return None
