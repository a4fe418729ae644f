"""How each frame of a `Profile` is built from its run's files (the model side of the data flow).

`SOURCES` is the registry: for each frame (and record) of `nbprofiler.schema` read from files, its sources
in order of preference, each the discovery roles it reads and its parser (an ``nbprofiler.io`` function,
given the explicit inputs it takes: the profile's time origin, the kernels frame, a shared parse). The
first source whose roles the run has gives the frame; a source marked ``or_next`` hands over to the next
one present when its file holds nothing for the frame. `AFTER` finishes a frame whatever its source.
`DERIVED` builds the frames that join other frames (``FrameSpec.builder == "derive"``, with the
functions of `nbprofiler.derive`). Every parse shared by several frames is memoised on the Profile
(``prof.cached``), never in io.

Parsers raise `ProfilerDataError`; partial loads warn with `ProfilerDataWarning` (an instance whose
``error`` attribute is the `ProfilerDataError`), which `Profile` records as a problem.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import pandas as pd

from . import derive, schema
from .errors import ProfilerDataError
from .io import ascend_ms, cann, db, families, framework, legacy, minddata, ops
from .io._util import warn_partial

if TYPE_CHECKING:
    from .profile import Profile

# The roles of a run's trace (`nbprofiler.io.trace.trace_sources`), and the FRAMEWORK op timestamps it
# falls back to: a run with any of them takes its timeline from `nbprofiler.io.trace`.
TRACE_ROLES = ("trace_view", "timeline", "cann_timeline", "cann_task_time", "cann_hccl", "cpu_op_timestamp")
DB = ("profiler_db", "msprof_db")  # `nbprofiler.io.db.has_db`


@dataclasses.dataclass(frozen=True)
class Source:
    """One source of a frame: ``parse(prof)`` when the run has a file of one of ``roles``. ``or_next``:
    when it gives None (its file holds nothing for this frame), the next source present is tried."""

    roles: tuple[str, ...]
    parse: Callable[["Profile"], object]
    or_next: bool = False


def src(roles: str | tuple[str, ...], parse: Callable[["Profile"], object], or_next: bool = False) -> Source:
    return Source((roles,) if isinstance(roles, str) else tuple(roles), parse, or_next)


def files(parser: Callable) -> Callable[["Profile"], object]:
    """A parser that takes the run's files only."""
    return lambda prof: parser(prof.run)


def timed(parser: Callable) -> Callable[["Profile"], object]:
    """A parser that takes the run's files and the profile's time origin (its frame's times count from it)."""
    return lambda prof: parser(prof.run, prof.origin_us)


def shared(parser: Callable) -> Callable[["Profile"], object]:
    """A MindData parser that takes the run's files and ``read`` (`minddata.parse`): each file is parsed
    once per profile, as several MindData frames read the same files."""
    return lambda prof: parser(prof.run, _minddata_read(prof))


# -- the explicit inputs, gathered from a Profile (memoised on it) ------------------------------------------
def origin_us(prof: "Profile") -> float:
    """`derive.time_origin` of the profile's trace, kernel_details.csv and database (what
    ``prof.origin_us`` memoises)."""
    from .io import trace
    run = prof.run
    has_trace = trace.trace_sources(run) is not None

    def from_trace() -> float | None:
        try:
            data = trace_data(prof)
        except ProfilerDataError:
            return None  # the timeline frame reports the error; the origin falls back
        return None if data is None else data.origin_us

    def from_kernels() -> pd.DataFrame | None:
        # the kernels frame counts from this origin: with a (broken) trace the file is read on its own
        return ascend_ms.kernels(run) if has_trace else prof.kernels

    return derive.time_origin(from_trace if has_trace or run.has("cpu_op_timestamp") else None,
                              from_kernels if run.has("kernel_details") else None,
                              (lambda: db.origin_us(run)) if db.has_db(run) else None)


def built(prof: "Profile", name: str) -> pd.DataFrame | None:
    """Frame ``name`` of ``prof`` where it is already built, else None (never builds it)."""
    return prof._cache.get(name)


def _minddata_read(prof: "Profile"):
    """`minddata.parse`, each file parsed once per profile (several MindData frames read the same files)."""
    return lambda kind, path: prof.cached(f"minddata:{kind}:{path}", lambda: minddata.parse(kind, path))


def _db_timeline(prof: "Profile") -> tuple:
    """(timeline, tracks, flows) from the database, read once for the three frames."""
    return prof.cached("db_timeline", lambda: db.timeline(prof.run, prof.origin_us) or (None, None, None))


def _in_window(prof: "Profile", mem: pd.DataFrame, path, rebase: bool = True) -> pd.DataFrame:
    """``mem`` clipped to this session's window (`derive.clip_to_window`) when the run is one of several
    sessions of its rank, or its metadata names a repeating schedule, and it has a timeline."""
    from .io import trace
    if mem.empty or not (prof.other_sessions or _repeating(prof)) or trace.trace_sources(prof.run) is None:
        return mem
    return derive.clip_to_window(mem, prof.origin_us, path, rebase=rebase)


def _repeating(prof: "Profile") -> bool:
    try:
        info = prof.info
    except Exception:  # noqa: BLE001 - a broken profiler_info is reported by prof.info itself
        return False
    return derive.repeating_schedule(info)


# -- parsers with their inputs --------------------------------------------------------------------------------
def _kernels_csv(prof: "Profile") -> pd.DataFrame:
    on_timeline = prof.run.has(*derive.KERNELS_ON_TIMELINE)
    return ascend_ms.kernels(prof.run, prof.origin_us if on_timeline else None)


def _memory_csv(prof: "Profile") -> pd.DataFrame:
    origin = float(prof.origin_us)
    out = ascend_ms.memory_record(prof.run, origin)
    return out if origin == 0.0 else _in_window(prof, out, prof.run.get("memory_record"), rebase=False)


def _memory_framework(prof: "Profile") -> pd.DataFrame:
    return _in_window(prof, framework.memory_record(prof.run), prof.run.get("cpu_memory_record"))


def trace_data(prof: "Profile"):
    """The run's parsed trace (`nbprofiler.io.trace.trace_data`), parsed once per profile: an error is
    memoised too, so the four frames of one broken file report one problem and parse once."""
    from .io import trace

    def parse():
        try:
            return trace.trace_data(prof.run)
        except ProfilerDataError as err:
            return err
    data = prof.cached("trace_data", parse)
    if isinstance(data, ProfilerDataError):
        raise data
    return data


def _trace(frame: str) -> Callable[["Profile"], object]:
    """One frame of the parsed trace; the timeline with its scope layers marked."""
    def parse(prof: "Profile"):
        from .io import trace
        data = trace_data(prof)
        if data is None:
            return None
        return trace.mark_scope_layers(data.timeline, data.tracks) if frame == "timeline" else getattr(data, frame)
    return parse


def _db_trace(i: int) -> Callable[["Profile"], object]:
    def parse(prof: "Profile"):
        part = _db_timeline(prof)
        if i == 0:
            from .io import trace
            return None if part[0] is None else trace.mark_scope_layers(part[0], part[1])
        return part[i]
    return parse


def step_numbers(df: pd.DataFrame | None) -> pd.DataFrame | None:
    """The communication files key ops by ``"step<N>"`` (or a bare ``"step"``): ``step`` as the number
    (Int64, <NA> where the key names no step)."""
    if df is not None and "step" in df.columns and not pd.api.types.is_integer_dtype(df["step"].dtype):
        digits = df["step"].astype("string").str.extract(r"(\d+)\s*$", expand=False)
        df["step"] = pd.to_numeric(digits, errors="coerce").astype("Int64")
    return df


# -- the registry: frame -> its sources, best first --------------------------------------------------------------
SOURCES: dict[str, tuple[Source, ...]] = {
    "step_trace": (
        src("step_trace", files(legacy.step_trace)),
        src("step_trace_time", files(ascend_ms.step_trace_time)),
        src("cluster_step_trace_time", files(ascend_ms.cluster_step_trace_rank)),
        src("cluster_analysis_db", files(db.cluster_step_trace)),
        src("cann_step_trace", files(cann.step_trace)),
        src(("analysis_db", *DB), files(db.step_trace)),
    ),
    "step_trace_reduce": (
        src("step_trace", files(legacy.step_trace_reduce)),
        src("cann_step_trace", files(cann.step_trace_reduce)),
    ),
    # every operator file of the run, one kind each (`nbprofiler.io.ops`), grouped from the kernels if built
    "op_types": (
        src(("aicore_type", "aicpu", "cpu_op_type", "gpu_op_type", "op_statistic", "kernel_details", *DB),
            lambda prof: ops.op_types(prof.run, built(prof, "kernels"))),
    ),
    "kernels": (
        src("kernel_details", _kernels_csv),
        src(DB, timed(db.kernels)),
    ),
    "flops": (src("flops", files(legacy.flops)),),
    "minddata_pipeline": (src(("minddata_pipeline_raw", "pipeline_profiling"), shared(minddata.pipeline)),),
    "minddata_queues": (src(("pipeline_profiling", "minddata_pipeline_raw"), shared(minddata.queues)),),
    "host_queue": (src(("device_queue", "dataset_iterator"), files(minddata.host_queue)),),
    "device_queue": (src(("minddata_aicpu", "minddata_getnext"), files(minddata.device_queue)),),
    "cpu_utilization": (src("minddata_cpu_utilization", shared(minddata.cpu_utilization)),),
    "op_cpu_utilization": (src("minddata_cpu_utilization", shared(minddata.op_cpu_utilization)),),
    "timeline": (src(TRACE_ROLES, _trace("timeline")), src(DB, _db_trace(0))),
    "timeline_tracks": (src(TRACE_ROLES, _trace("tracks")), src(DB, _db_trace(1))),
    "timeline_flows": (src(TRACE_ROLES, _trace("flows")), src(DB, _db_trace(2))),
    "timeline_counters": (src(TRACE_ROLES, _trace("counters")),),
    "memory": (
        src("memory_record", _memory_csv),
        src("cpu_memory_record", _memory_framework),
        src(DB, timed(db.memory)),
    ),
    "operator_memory": (
        src("operator_memory", timed(ascend_ms.operator_memory)),
        src(DB, timed(db.operator_memory)),
    ),
    "communication": (
        src(("communication", "cluster_communication"), files(ascend_ms.communication)),
        src("analysis_db", files(db.analysis_communication), or_next=True),
        src("cluster_analysis_db", lambda prof: db.analysis_communication(prof.run, cluster=True), or_next=True),
        src(DB, files(db.communication)),
    ),
    "communication_links": (
        src(("communication", "cluster_communication"), files(ascend_ms.communication_links)),
        src("analysis_db", files(db.analysis_links)),
        src("cluster_analysis_db", lambda prof: db.analysis_links(prof.run, cluster=True)),
    ),
    "communication_matrix": (
        src(("communication_matrix", "cluster_communication_matrix"), files(families.communication_matrix)),
        src("analysis_db", files(db.analysis_matrix)),
        src("cluster_analysis_db", lambda prof: db.analysis_matrix(prof.run, cluster=True)),
    ),
    "communication_groups": (
        src("communication_group", files(families.communication_groups)),
        src("cluster_analysis_db", files(db.cluster_groups)),
    ),
    "npu_module_mem": (
        src("npu_module_mem", timed(families.npu_module_mem)),
        src(DB, timed(db.npu_module_mem)),
    ),
    "api_statistic": (src("api_statistic", files(families.api_statistic)),),
    "operator_details": (src("operator_details", files(families.operator_details)),),
    "l2_cache": (src("l2_cache", files(families.l2_cache)),),
    "static_op_mem": (src("static_op_mem", files(families.static_op_mem)),),
    "data_preprocess": (src("data_preprocess", files(families.data_preprocess)),),
    "dataset": (src("dataset", files(families.dataset)),),
    "input_shapes": (src("cpu_framework", files(families.input_shapes)),),
    "hccl": (src("hccl_raw", files(legacy.hccl)),),
    "hccl_links": (src("hccl_raw", files(legacy.hccl_links)),),
    "cluster_analyse": (src("cluster_analyse", files(legacy.cluster_analyse)),),
    # records
    "step_point_info": (src("step_trace_point_info", files(legacy.step_point_info)),),
    "minddata_summary": (
        src(("minddata_pipeline_summary_json", "minddata_pipeline_summary_csv"), files(minddata.summary_file)),
    ),
    "timeline_summary": (src("timeline_summary", files(legacy.timeline_summary)),),
    "flops_summary": (src("flops_summary", files(legacy.flops_summary)),),
}

# What every source's frame goes through.
AFTER: dict[str, Callable[[pd.DataFrame | None], pd.DataFrame | None]] = {
    "communication": step_numbers, "communication_links": step_numbers, "communication_matrix": step_numbers,
}


# -- the frames that join other frames ------------------------------------------------------------------------
def _step_windows(prof: "Profile") -> pd.DataFrame | None:
    """`derive.place_steps` with the profile's kernels, step trace, timeline and clocks. The kernels decide
    alone where they carry step ids (the step trace and the timeline are not read then)."""
    kernels = prof.kernels
    if kernels is not None and not kernels.empty and kernels["step"].notna().any():
        return derive.place_steps(kernels, None, prof.timeline, None, prof.origin_us, prof.device, False, None)
    steps = prof.step_trace
    if steps is None or steps.empty or not {"start_ms", "end_ms"} <= set(steps.columns):
        return None
    cann_clock = prof.run.generation == "cann"
    return derive.place_steps(None, steps, prof.timeline, None if cann_clock else prof.timeline_tracks,
                              prof.origin_us, prof.device, cann_clock,
                              None if cann_clock else legacy.timeline_device_origin_ms(prof.run))


def _ops(prof: "Profile") -> pd.DataFrame | None:
    """Every operator file's operators (`nbprofiler.io.ops`, grouped from the kernels if built) with
    ``input_shapes`` joined from the ``input_shapes`` frame (a bad FRAMEWORK file costs the shapes, not the
    operators)."""
    out = ops.ops(prof.run, built(prof, "kernels"))
    if prof.run.has("cpu_framework") and out is not None:
        try:
            out = derive.join_input_shapes(out, prof.input_shapes)
        except ProfilerDataError as err:
            warn_partial(err)
    return out


DERIVED: dict[str, Callable[["Profile"], pd.DataFrame | None]] = {"step_windows": _step_windows, "ops": _ops}


def build(name: str, prof: "Profile"):
    """Frame or record ``name`` of ``prof``: `DERIVED`'s builder, else the first of its `SOURCES` whose
    roles the run has (None when it has none)."""
    if name in DERIVED:
        return DERIVED[name](prof)
    for source in SOURCES[name]:
        if prof.run.has(*source.roles):
            out = source.parse(prof)
            if out is not None or not source.or_next:
                return AFTER.get(name, _same)(out)
    return None


def _same(df):
    return df


def builder(name: str) -> Callable[["Profile"], object]:
    """The function that builds frame or record ``name`` from a Profile (its spec's ``builder`` says
    whether it is `DERIVED` or read from `SOURCES`)."""
    spec = schema.FRAMES.get(name)
    if spec is not None and (spec.builder == "derive") != (name in DERIVED):
        raise KeyError(f"{name}: the schema says it is built by {spec.builder!r}")
    if name not in DERIVED and name not in SOURCES:
        raise KeyError(f"no sources for {name!r}")
    return lambda prof: build(name, prof)
