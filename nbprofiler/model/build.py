"""How each frame of a `Profile` is built from its run's files (the model side of the data flow).

`SOURCES` is the registry: for each frame (and record) of `nbprofiler.schema` read from files, its sources
in order of preference, each the discovery roles it reads and its parser (an ``nbprofiler.io`` function,
given the explicit inputs it takes: the profile's time origin, the kernels frame, a shared parse). The
first source whose roles the run has gives the frame; a source marked ``or_next`` hands over to the next
one present when its file holds nothing for the frame. `AFTER` finishes a frame whatever its source.
`DERIVED` builds the frames that join other frames (``FrameSpec.builder == "derive"``, with the
functions of `nbprofiler.model.derive`). Every parse shared by several frames is memoised on the Profile
(``prof.cached``), never in io.

Parsers raise `ProfilerDataError`; partial loads warn with `ProfilerDataWarning` (an instance whose
``error`` attribute is the `ProfilerDataError`), which `Profile` records as a problem.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from . import derive
from .. import schema
from ..errors import MalformedFileError, ProfilerDataError
from ..io import ascend_ms, cann, db, families, framework, legacy, minddata, ops
from ..io._util import warn_partial

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
    """`derive.time_origin` of the profile's trace, kernel_details.csv, database and memory record (what
    ``prof.origin_us`` memoises)."""
    from ..io import trace
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

    def from_memory() -> float | None:
        # the memory frame's own sources in its order, read with origin 0 (absolute us); their problems are
        # reported by the memory frame itself
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if run.has("memory_record"):
                    t = ascend_ms.memory_record(run, 0.0)["time_us"]
                    return float(t.min()) if t.notna().any() else None
                return framework.memory_record(run, 0.0).attrs.get("first_us")
            except ProfilerDataError:
                return None

    return derive.time_origin(trace=from_trace if has_trace or run.has("cpu_op_timestamp") else None,
                              kernels=from_kernels if run.has("kernel_details") else None,
                              database=(lambda: db.origin_us(run)) if db.has_db(run) else None,
                              memory=from_memory if run.has("memory_record", "cpu_memory_record") else None)


def built(prof: "Profile", name: str) -> pd.DataFrame | None:
    """Frame ``name`` of ``prof`` where it is already built, else None (never builds it)."""
    return prof._cache.get(name)


def _minddata_read(prof: "Profile"):
    """`minddata.parse`, each file parsed once per profile (several MindData frames read the same files)."""
    return lambda kind, path: prof.cached(f"minddata:{kind}:{path}", lambda: minddata.parse(kind, path))


def _db_timeline(prof: "Profile") -> tuple:
    """(timeline, tracks, flows) from the database, read once for the three frames."""
    return prof.cached("db_timeline", lambda: db.timeline(prof.run, prof.origin_us) or (None, None, None))


def _earlier_windows(prof: "Profile", role: str, parse: Callable) -> list[tuple[str, pd.DataFrame]]:
    """(folder name, memory frame) of every earlier session of this rank beside this run's session folder
    (same parent folder) that has the same memory file (``role``, same name), each read by ``parse(run)``
    with this profile's origin. Found on disk, so a window loaded alone and a window loaded through its
    parent see the same earlier windows. A sibling none of whose first records is in this file cannot be
    the source of repeats and is not parsed; a byte-identical file is a copy of this recording, not an
    earlier window."""
    import os
    import warnings

    from ..io import discover
    path = prof.run.get(role)
    if path is None:
        return []
    path = Path(path)
    session = discover.run_folder(path)
    try:
        rel = path.relative_to(session)
        mine = path.read_bytes()
        siblings = sorted(e.path for e in os.scandir(session.parent) if e.is_dir() and e.path != str(session))
    except (OSError, ValueError):
        return []
    lines = None   # this file's records, made once a sibling has the file (most runs have no sibling)
    rank, order = discover.rank_of(prof.run), discover.session_order(prof.run)
    out = []
    for folder in siblings:
        other = Path(folder) / rel
        try:
            size = other.stat().st_size if other.is_file() else None
            if size is None or size > len(mine) or (size == len(mine) and other.read_bytes() == mine):
                # a window's repeats hold every record of the earlier file, so it is no larger; the same
                # bytes are a copy of this very recording (a window running ops adds records of its own)
                continue
            with open(other, "rb") as f:
                head = [f.readline().rstrip(b"\r\n") for _ in range(9)][1:]
        except OSError:
            continue
        if lines is None:
            lines = set(mine.replace(b"\r\n", b"\n").split(b"\n")[1:])
        if not any(line and line in lines for line in head):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the sibling's own problems are reported where it is loaded
            try:
                runs = [r for r in discover.discover(folder) if discover.rank_of(r) == rank
                        and r.get(role) is not None and Path(r.get(role)) == other]
                if runs and discover.session_order(runs[0]) < order:
                    out.append((Path(folder).name, parse(runs[0])))
            except ProfilerDataError:
                continue
    return out


def _repeating(prof: "Profile") -> bool:
    try:
        info = prof.info
    except Exception:  # noqa: BLE001 - a broken profiler_info is reported by prof.info itself
        return False
    return derive.repeating_schedule(info)


def _without_repeats(prof: "Profile", mem: pd.DataFrame, role: str, parse: Callable) -> pd.DataFrame:
    """``mem`` without the records MindSpore copied from earlier schedule windows (`derive.drop_repeats`,
    evidence from `_earlier_windows`). A window whose metadata names a repeating schedule but whose earlier
    windows are not beside it keeps every record, with a warning when some precede its timeline."""
    from ..io import trace
    if mem.empty:
        return mem
    earlier = _earlier_windows(prof, role, parse)
    out = derive.drop_repeats(mem, earlier, prof.run.get(role))
    if not earlier and _repeating(prof) and trace.trace_sources(prof.run) is not None:
        n = derive.records_before(out)
        if n:
            warn_partial(MalformedFileError(
                prof.run.get(role), f"{n} of {len(out)} memory records precede this window's timeline; its "
                "metadata names a repeating schedule, so some may be MindSpore's copies of earlier windows' "
                "records, but no earlier window of this rank is beside it to tell them apart: all were kept "
                "(they sit before 0 on the time axis)"))
    return out


# -- parsers with their inputs --------------------------------------------------------------------------------
def _kernels_csv(prof: "Profile") -> pd.DataFrame:
    on_timeline = prof.run.has(*derive.KERNELS_ON_TIMELINE)
    return ascend_ms.kernels(prof.run, prof.origin_us if on_timeline else None)


def _memory_csv(prof: "Profile") -> pd.DataFrame:
    def parse(run):
        return ascend_ms.memory_record(run, float(prof.origin_us))
    return _without_repeats(prof, parse(prof.run), "memory_record", parse)


def _memory_framework(prof: "Profile") -> pd.DataFrame:
    """cpu_ms_memory_record on the timeline's clock: its epoch-ns timestamps minus the profile's origin."""
    def parse(run):
        return framework.memory_record(run, float(prof.origin_us))
    return _without_repeats(prof, parse(prof.run), "cpu_memory_record", parse)


def trace_data(prof: "Profile"):
    """The run's parsed trace (`nbprofiler.io.trace.trace_data`), parsed once per profile: an error is
    memoised too, so the four frames of one broken file report one problem and parse once."""
    from ..io import trace

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
        from ..io import trace
        data = trace_data(prof)
        if data is None:
            return None
        return trace.mark_scope_layers(data.timeline, data.tracks) if frame == "timeline" else getattr(data, frame)
    return parse


def _db_trace(i: int) -> Callable[["Profile"], object]:
    def parse(prof: "Profile"):
        part = _db_timeline(prof)
        if i == 0:
            from ..io import trace
            return None if part[0] is None else trace.mark_scope_layers(part[0], part[1])
        return part[i]
    return parse


def _stacks_trace(prof: "Profile") -> pd.DataFrame | None:
    """The stacks the trace's events carry in their args (the timeline keeps them as JSON text)."""
    from ..io import stacks, trace
    found = trace.trace_sources(prof.run)
    return stacks.from_timeline(prof.timeline, found[1][0] if found and len(found[1]) == 1 else None)


def _stacks_db(prof: "Profile") -> pd.DataFrame | None:
    """The database's framework API stacks (PYTORCH_CALLCHAINS), placed on its timeline's tracks."""
    from ..io import stacks
    rows = db.call_stacks(prof.run, prof.origin_us)
    if rows is None:
        return None
    return stacks.attach_tracks(rows, prof.timeline_tracks, db.main_db(prof.run))


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
    "host_queue": (src(("device_queue", "dataset_iterator"), shared(minddata.host_queue)),),
    "device_queue": (src(("minddata_aicpu", "minddata_getnext"), files(minddata.device_queue)),),
    "cpu_utilization": (src("minddata_cpu_utilization", shared(minddata.cpu_utilization)),),
    "op_cpu_utilization": (src("minddata_cpu_utilization", shared(minddata.op_cpu_utilization)),),
    "timeline": (src(TRACE_ROLES, _trace("timeline")), src(DB, _db_trace(0))),
    "timeline_tracks": (src(TRACE_ROLES, _trace("tracks")), src(DB, _db_trace(1))),
    "timeline_flows": (src(TRACE_ROLES, _trace("flows")), src(DB, _db_trace(2))),
    "timeline_counters": (src(TRACE_ROLES, _trace("counters")),),
    "call_stacks": (src(TRACE_ROLES, _stacks_trace), src(DB, _stacks_db)),
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
    """Each step's span on the timeline's clock: the trace's ``ProfilerStep#N`` events where it has them (the
    host's own marks of the step, `derive.profiler_step_windows`: the step trace's Preparing lies inside
    them), else `derive.place_steps` with the profile's kernels (their step ids: the span of the step's
    device tasks), else its step trace and clocks."""
    timeline = prof.timeline
    marked = derive.profiler_step_windows(timeline)
    if marked is not None:
        return marked
    kernels = prof.kernels
    if kernels is not None and not kernels.empty and kernels["step"].notna().any():
        return derive.place_steps(kernels=kernels, timeline=timeline, origin_us=prof.origin_us, device=prof.device)
    steps = prof.step_trace
    if steps is None or steps.empty or not {"start_ms", "end_ms"} <= set(steps.columns):
        return None
    cann_clock = prof.run.generation == "cann"
    return derive.place_steps(steps=steps, timeline=timeline, tracks=None if cann_clock else prof.timeline_tracks,
                              origin_us=prof.origin_us, device=prof.device, cann_clock=cann_clock,
                              first_device_op_ms=None if cann_clock else legacy.timeline_device_origin_ms(prof.run))


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
