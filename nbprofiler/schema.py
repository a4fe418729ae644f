"""The data model, declared once: every frame a `Profile` exposes, its columns (dtype, unit, meaning), the
clock its time columns are on, and the profiler files that feed it.

Everything else is generated from or checked against these declarations: `Profile`'s frame properties
and their docstrings, the typed empty frame a view gets when a run lacks the data, ``prof.files``'s
``feeds`` column, the dashboard's and the report's "looked for" lists, and the data-model tables of
docs/data-model.md (``python -m nbprofiler.schema --readme docs/data-model.md`` rewrites them; a test fails
when they drift).

The shared vocabulary (operator kinds, step-trace stages and their display names) lives here too.
This module imports nothing from nbprofiler: the io layer, the model, the analyses and the views all
build on it.
"""
from __future__ import annotations

import dataclasses
import functools

import pandas as pd

# -- vocabulary -------------------------------------------------------------------------------------------
# Device kinds of the operator frames, in display order ("communication": HCCL kernels, never operators).
OP_KINDS = ["ai_core", "ai_cpu", "cpu", "gpu", "npu", "communication"]
KIND_LABELS = {"ai_core": "AI Core", "ai_cpu": "AI CPU", "cpu": "CPU", "gpu": "GPU", "npu": "NPU",
               "communication": "Communication"}

# The stage columns of ``step_trace`` that stack up to ``total_ms``, per generation (first match wins):
# legacy training, legacy inference, step_trace_time.csv with and without a preparing column.
STAGE_SETS = (
    ("iteration_interval_ms", "fp_and_bp_ms", "tail_ms"),
    ("iteration_interval_ms", "fp_ms"),
    ("preparing_ms", "computing_ms", "communication_not_overlapped_ms", "free_ms"),
    ("computing_ms", "communication_not_overlapped_ms", "free_ms"),
)
STAGE_LABELS: dict[str, str] = {
    "iteration_interval_ms": "Step interval",
    "fp_and_bp_ms": "Forward + backward",
    "fp_ms": "Forward",
    "tail_ms": "Step tail",
    "preparing_ms": "Preparing",
    "computing_ms": "Computing",
    "communication_not_overlapped_ms": "Communication (not overlapped)",
    "free_ms": "Free",
    "overlapped_ms": "Overlapped",
    "communication_ms": "Communication",
    "bubble_ms": "Bubble",
    "stage_ms": "Stage",
    "total_ms": "Total",
}


def step_stages(columns) -> list[str]:
    """The stage columns among ``columns`` (a step_trace frame or its column names), in display order."""
    have = set(columns.columns if hasattr(columns, "columns") else columns)
    return next((list(s) for s in STAGE_SETS if set(s) <= have), [])


# -- clocks -----------------------------------------------------------------------------------------------
# What a frame's time-of-day columns count from, and how they map onto the timeline.
CLOCKS: dict[str, str] = {
    "timeline": "µs from `prof.origin_us` (the earliest timeline event, absolute µs; else the earliest "
                "kernel): the timeline's own clock",
    "device": "ms on the device's clock (10 ns ticks ÷ 1e5); `step_windows` places each step on the "
              "timeline (legacy points aligned on the first AI Core op, CANN points share its clock)",
    "step": "ms from the start of the row's own step",
    "epoch": "absolute µs (Unix epoch) as written; minus `prof.origin_us` it is the timeline's clock "
             "where the run has a timeline on the same host",
    "minddata": "ms on MindData's steady clock (since the machine booted), shared by `cpu_utilization`, "
                "`minddata_queues` and `host_queue`; the files give no mapping onto the timeline",
    "device_queue": "µs on the device's clock (`minddata_aicpu_*`) or the host's (`minddata_getnext_*`, "
                    "ns ÷ 1000); no mapping onto the timeline",
    "none": "no time-of-day columns (durations and totals only)",
}


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a frame: ``dtype`` is a pandas dtype name (``str`` also admits object columns of
    strings, ``object`` admits anything: lists, tuples, JSON text or None), ``unit`` e.g. ``us``, ``ms``,
    ``MB``, ``%`` (0–100), ``0-1`` (a fraction) or "" (a count, an id, a name)."""

    name: str
    dtype: str
    unit: str
    meaning: str
    required: bool = True   # present whenever the frame has rows; optional ones only where the source has them


def col(name: str, dtype: str, unit: str, meaning: str) -> Column:
    return Column(name, dtype, unit, meaning)


def opt(name: str, dtype: str, unit: str, meaning: str) -> Column:
    return Column(name, dtype, unit, meaning, required=False)


@dataclasses.dataclass(frozen=True)
class FrameSpec:
    """A frame: ``row`` (what one row is), ``columns``, ``clock`` (a key of `CLOCKS`), ``files`` (the file
    patterns as the profilers write them), ``roles`` (the discovery roles of those files, see
    `nbprofiler.io.discover`), ``more`` (the further columns a frame carries as the file names them, or "":
    then every column is declared), ``note`` (how the values relate to the files), ``builder`` (how
    `Profile` builds it: ``"sources"``, read by the first of its sources in `nbprofiler.model.build.SOURCES`
    whose roles the run has; ``"derive"``, joined from other frames by `nbprofiler.model.build.DERIVED`;
    ``"analysis"``, an `ANALYSIS_FRAMES` frame an analysis function builds from other frames)."""

    name: str
    row: str
    columns: tuple[Column, ...]
    clock: str
    files: tuple[str, ...]
    roles: frozenset[str]
    more: str = ""
    note: str = ""
    builder: str = "sources"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def required(self) -> list[str]:
        """The columns present whenever the frame has rows, in declaration order."""
        return [c.name for c in self.columns if c.required]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    def empty(self) -> pd.DataFrame:
        """A frame with no rows and the required columns in their declared dtypes (a copy of one made once:
        a profile without a file makes many, and pandas is slow to make one from its columns)."""
        return _empty_frame(self).copy()

    def mismatches(self, df: pd.DataFrame) -> list[str]:
        """How ``df`` breaks this declaration: missing required columns, dtypes other than declared,
        columns not declared (unless the frame takes ``more``). Empty list: it conforms."""
        out = [f"{self.name}: missing column {c.name!r}" for c in self.columns
               if c.required and c.name not in df.columns and len(df)]
        for name in df.columns:
            spec = self.column(name)
            if spec is None:
                if not self.more:
                    out.append(f"{self.name}: column {name!r} is not declared")
            elif not dtype_matches(df[name].dtype, spec.dtype):
                out.append(f"{self.name}.{name}: dtype {df[name].dtype}, declared {spec.dtype}")
        return out

    def conform(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` with declared numeric columns cast to their declared dtype (e.g. ``int64`` -> ``Int64``)
        where a source gave another; columns it cannot cast are left as they are."""
        casts = {}
        for c in self.columns:
            if c.name in df.columns and c.dtype in _NUMERIC and str(df[c.name].dtype) != c.dtype:
                casts[c.name] = c.dtype
        for name, dtype in casts.items():
            try:
                df[name] = df[name].astype(dtype)
            except (TypeError, ValueError):
                pass
        return df

    def doc(self) -> str:
        """The property docstring: what a row is, each column, the clock, the sources."""
        lines = [f"One row per {self.row}.", ""]
        for c in self.columns:
            unit = f", {c.unit}" if c.unit else ""
            where = "" if c.required else " (where the source has it)"
            lines.append(f"- ``{c.name}`` ({c.dtype}{unit}): {c.meaning}{where}")
        if self.more:
            lines.append(f"- {self.more}")
        lines += ["", f"Clock: {CLOCKS[self.clock]}.", f"Sources: {', '.join(self.files)}."]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


@functools.cache
def _empty_frame(spec: FrameSpec) -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in spec.columns if c.required})


_NUMERIC = {"int64", "Int64", "int32", "float64", "bool"}


def dtype_matches(dtype, declared: str) -> bool:
    if declared == "object":
        return True
    if declared == "str":
        return pd.api.types.is_string_dtype(dtype) or dtype == object
    if declared == "category":
        return isinstance(dtype, pd.CategoricalDtype)
    return str(dtype) == declared


@dataclasses.dataclass(frozen=True)
class RecordSpec:
    """A non-tabular item of a `Profile` (a dict or a number): name, meaning, files and roles."""

    name: str
    meaning: str
    files: tuple[str, ...]
    roles: frozenset[str]


# -- the frames -------------------------------------------------------------------------------------------
_STEP_FILES = ("step_trace_raw_*_detail_time.csv", "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
               "cluster_step_trace_time.csv", "PROF_*/device_*/timeline/step_trace_*.json",
               "*.db (STEP_TIME, StepTraceTime)")
_OP_TYPE_FILES = ("aicore_intermediate_*_type.csv", "aicpu_intermediate_*.csv", "cpu_op_type_info_*.csv",
                  "gpu_op_type_info_*.csv", "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "op_statistic.csv",
                  "*.db (TASK, COMPUTE_TASK_INFO)")
_TIMELINE_FILES = ("ASCEND_PROFILER_OUTPUT/trace_view.json", "ascend_timeline_display_*.json",
                   "timeline_display_*.json", "gpu_timeline_display_*.json", "PROF_*/device_*/timeline/*.json",
                   "FRAMEWORK/cpu_op_execute_timestamp_*.txt", "*.db")
_TIMELINE_ROLES = frozenset({"timeline", "trace_view", "cann_timeline"})
_DB = frozenset({"profiler_db", "msprof_db"})
_COMM_KEYS = (col("step", "Int64", "", "the step the op ran in (the file's `stepN` key; <NA> where it names none)"),
              col("group", "str", "", "the communication group (its name or hashed id as written)"),
              col("op_name", "str", "", "the collective or P2P op, as the file keys it"),
              col("rank", "str", "", "the rank the row was measured on"))

# flops_*.txt's columns by header name (4-column files: the first three), also joined into ``ops``
_FLOPS_COLUMNS = (opt("mflops", "float64", "MFLOPs", "floating-point operations (4-column files)"),
                  opt("gflops", "float64", "GFLOPS", "throughput (4-column files)"),
                  opt("utilization_pct", "float64", "%", "FLOPs utilisation (4-column files)"),
                  opt("mflops_cube", "float64", "MFLOPs", "cube unit operations"),
                  opt("gflops_cube", "float64", "GFLOPS", "cube unit throughput"),
                  opt("utilization_cube_pct", "float64", "%", "cube unit utilisation"),
                  opt("mflops_vector", "float64", "MFLOPs", "vector unit operations"),
                  opt("gflops_vector", "float64", "GFLOPS", "vector unit throughput"),
                  opt("utilization_vector_pct", "float64", "%", "vector unit utilisation"))

FRAMES: dict[str, FrameSpec] = {s.name: s for s in (
    FrameSpec("step_trace", "training step (the file's average row is not a step)", (
        col("step", "int64", "", "step number, 1-based as in the file"),
        col("total_ms", "float64", "ms", "the step's duration"),
        opt("iteration_interval_ms", "float64", "ms", "step interval (step gap): waiting for data"),
        opt("fp_and_bp_ms", "float64", "ms", "forward and backward propagation"),
        opt("tail_ms", "float64", "ms", "step tail: gradient aggregation, parameter update"),
        opt("fp_ms", "float64", "ms", "forward (inference step traces)"),
        opt("start_ms", "float64", "ms", "step start (a point on the device clock)"),
        opt("fp_start_ms", "float64", "ms", "forward start (device clock)"),
        opt("bp_end_ms", "float64", "ms", "backward end (device clock)"),
        opt("end_ms", "float64", "ms", "step end (device clock)"),
        opt("preparing_ms", "float64", "ms", "step_trace_time: preparing"),
        opt("computing_ms", "float64", "ms", "step_trace_time: computing"),
        opt("communication_not_overlapped_ms", "float64", "ms", "communication not overlapped by computing"),
        opt("free_ms", "float64", "ms", "step_trace_time: free (nothing on the device)"),
        opt("overlapped_ms", "float64", "ms", "communication overlapped by computing"),
        opt("communication_ms", "float64", "ms", "all communication"),
        opt("stage_ms", "float64", "ms", "pipeline stage time"),
        opt("bubble_ms", "float64", "ms", "pipeline bubble"),
        opt("communication_not_overlapped_exclude_receive_ms", "float64", "ms",
            "communication not overlapped, receive excluded"),
    ), "device", _STEP_FILES, frozenset({"step_trace", "step_trace_time", "cluster_step_trace_time",
                                          "cann_step_trace", "analysis_db", "cluster_analysis_db"}) | _DB,
        note="The stage columns (`nbprofiler.schema.STAGE_SETS`) stack up to `total_ms`; legacy values are "
             "ticks ÷ 1e5 rounded to 4 decimals as MindInsight shows them. The file's own average row is "
             "`prof.step_trace_average`; `attrs` hold `mean_all_steps` and `mean_excluding_step1`."),
    FrameSpec("step_trace_reduce", "reduce or communication event of a step", (
        col("step", "int64", "", "step number"),
        col("stream_id", "Int64", "", "the stream the event ran on"),
        col("name", "str", "", "the column prefix in the file, e.g. `stream_48_0_Receive-op663`"),
        col("start_ms", "float64", "ms", "start, from the step's `start_ms`"),
        col("dur_ms", "float64", "ms", "duration"),
    ), "step", ("step_trace_raw_*_detail_time.csv (stream_* columns)", "PROF_*/.../step_trace_*.json (Reduce_*)"),
        frozenset({"step_trace", "cann_step_trace"}), note="Events written as 0 (missing) are dropped, as "
                                                           "MindInsight drops them."),
    FrameSpec("step_windows", "step placed on the timeline", (
        col("step", "int64", "", "step number"),
        col("start_us", "float64", "us", "the step's start on the timeline"),
        col("end_us", "float64", "us", "the step's end on the timeline"),
        col("source", "str", "", "where the steps come from and how the clocks were matched"),
    ), "timeline", ("trace_view.json (ProfilerStep#N)", "ASCEND_PROFILER_OUTPUT/kernel_details.csv (step ids)",
                    "a step trace and its timeline", "min_cycle_counter_*.txt", "output_timeline_data_*.txt"),
        frozenset({"trace_view", "kernel_details", "step_trace", "min_cycle_counter", "output_timeline_data"}) | _DB,
        note="Derived: from the trace's ProfilerStep#N events (the host's marks of each step, Preparing "
             "included), else the kernels' step ids (the span of the step's device tasks), else the step "
             "trace's points (CANN: the timeline's clock; legacy: shifted by the first AI Core op's device time "
             "against the timeline).", builder="derive"),
    FrameSpec("op_types", "operator type and device kind", (
        col("kind", "str", "", "device kind (`nbprofiler.schema.OP_KINDS`)"),
        col("op_type", "str", "", "operator type"),
        col("total_time_us", "float64", "us", "summed execution time"),
        col("count", "Int64", "", "executions"),
        col("avg_time_us", "float64", "us", "total_time_us / count"),
        col("percent", "float64", "%", "this type's share of the kind's total time (recomputed)"),
        col("file_percent", "float64", "%", "the file's own share column, on the same 0–100 scale (files "
                                            "writing a fraction are scaled); NaN where the file has none"),
        opt("accelerator_core", "str", "", "NPU: the core the type ran on (AI_CORE, AI_VECTOR_CORE, ...)"),
        opt("op_names", "Int64", "", "CPU: distinct operator names of the type (the file's "
                                     "`execution_frequency(per-step)`)"),
    ), "none", _OP_TYPE_FILES, frozenset({"aicore_type", "aicpu", "cpu_op_type", "gpu_op_type", "kernel_details",
                                          "op_statistic"}) | _DB,
        note="Sorted by `kind`, then `total_time_us` descending."),
    FrameSpec("ops", "operator (full scope name) and device kind", (
        col("kind", "str", "", "device kind"),
        col("op_name", "str", "", "full scope name as in the files"),
        col("op_type", "str", "", "operator type"),
        col("total_time_us", "float64", "us", "summed execution time"),
        col("count", "Int64", "", "executions (<NA> where the file does not say)"),
        col("avg_time_us", "float64", "us", "total_time_us / count"),
        opt("short_name", "str", "", "the name's last scope component"),
        opt("stream_id", "Int64", "", "stream"), opt("task_id", "Int64", "", "task"),
        opt("block_dim", "Int64", "", "cores the op was launched on"),
        opt("graph_id", "Int64", "", "graph the op belongs to"),
        opt("subgraph", "str", "", "CPU: the subgraph as written"),
        opt("op_info", "str", "", "shapes, formats and types (JSON text, from framework_raw_*)"),
        opt("dispatch_time_us", "float64", "us", "AI CPU dispatch time"),
        opt("file_percent", "float64", "%", "the file's own share column, 0–100"),
        opt("input_shapes", "str", "", "the input shapes it ran with (FRAMEWORK/cpu_framework_*)"),
        opt("accelerator_core", "str", "", "NPU: its core"),
        *_FLOPS_COLUMNS,
    ), "none", ("aicore_intermediate_*_detail.csv", "aicpu_intermediate_*.csv", "cpu_op_detail_info_*.csv",
                "gpu_op_detail_info_*.csv", "framework_raw_*.csv", "flops_*.txt",
                "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "*.db"),
        frozenset({"aicore_detail", "aicpu", "framework", "cpu_op_detail", "cpu_framework", "gpu_op_detail",
                   "flops", "kernel_details"}) | _DB, note="Sorted by `kind`, then `total_time_us` descending.",
        builder="derive"),
    FrameSpec("kernels", "device task", (
        col("step", "Int64", "", "step id (<NA> where none)"),
        opt("model_id", "Int64", "", "model"), opt("task_id", "Int64", "", "task"),
        opt("stream_id", "Int64", "", "stream (<NA> for N/A)"),
        col("name", "str", "", "kernel (operator) name"), col("type", "str", "", "operator type"),
        col("accelerator_core", "str", "", "AI_CORE, AI_VECTOR_CORE, AI_CPU, HCCL, ..."),
        col("start_us", "float64", "us", "start"), col("dur_us", "float64", "us", "duration"),
        col("wait_us", "float64", "us", "wait before the task"),
        opt("block_dim", "Int64", "", "cores"), opt("mix_block_dim", "Int64", "", "mixed cores"),
        opt("device_id", "Int64", "", "device"),
        opt("input_shapes", "str", "", "as written"), opt("output_shapes", "str", "", "as written"),
    ), "timeline", ("ASCEND_PROFILER_OUTPUT/kernel_details.csv", "*.db (TASK, COMPUTE_TASK_INFO)"),
        frozenset({"kernel_details"}) | _DB,
        more="every other column of the file snake_cased with its unit in the name (`aicore_time_us`, "
             "`aic_mac_ratio`, ...), numeric where it holds numbers"),
    FrameSpec("flops", "operator", (
        col("op_name", "str", "", "full scope name"),
        *_FLOPS_COLUMNS,
    ), "none", ("flops_*.txt",), frozenset({"flops"})),
    FrameSpec("minddata_pipeline", "pipeline op, breadth-first from the root (op 0)", (
        col("op_id", "int64", "", "op id"), col("op_type", "str", "", "as written, e.g. `BatchOp`"),
        col("num_workers", "int64", "", "parallel workers"),
        col("parent_id", "Int64", "", "the consuming op (<NA> for the root)"),
        col("children_ids", "object", "", "list of the ops feeding it"),
        col("output_queue_length", "Int64", "", "output queue capacity (<NA> without a queue)"),
        col("output_queue_average_size", "float64", "", "average items in the output queue"),
        col("output_queue_usage_rate", "float64", "0-1", "average / capacity"),
        col("sample_interval_ms", "float64", "ms", "queue sampling interval"),
    ), "none", ("minddata_pipeline_raw_*.csv", "pipeline_profiling_*.json"),
        frozenset({"minddata_pipeline_raw", "pipeline_profiling"}),
        note="From minddata_pipeline_raw_*.csv, else derived from pipeline_profiling_*.json as MindSpore does."),
    FrameSpec("minddata_queues", "queue sample (long form)", (
        col("op_id", "int64", "", "op id"), col("sample", "int64", "", "0-based sample index"),
        col("time_ms", "float64", "ms", "the CPU-utilisation time stamp of that sample (NaN where the series "
                                        "lengths disagree)"),
        col("size", "int64", "", "items in the queue"), col("length", "int64", "", "queue capacity"),
    ), "minddata", ("pipeline_profiling_*.json",), frozenset({"pipeline_profiling", "minddata_pipeline_raw"})),
    FrameSpec("host_queue", "step (the host-side queue feeding the device)", (
        col("step", "int64", "", "step number"), col("size", "int64", "", "batches in the queue"),
        col("capacity", "int64", "", "queue capacity"),
        col("get_ms", "float64", "ms", "time to get the batch"), col("push_ms", "float64", "ms", "time to push it"),
        col("batch_ms", "float64", "ms", "time to make the batch (NaN where absent)"),
        col("timestamp_ms", "float64", "ms", "when the batch was handed out (NaN in old files)"),
    ), "minddata", ("device_queue_profiling_*.txt", "dataset_iterator_profiling_*.txt"),
        frozenset({"device_queue", "dataset_iterator"}),
        note="`attrs['source']`: `device_queue` (sink mode) or `dataset_iterator` (non-sink). MindInsight calls "
             "this queue the device queue."),
    FrameSpec("device_queue", "GetNext record (the device-side data queue)", (
        col("index", "int64", "", "record index"), col("name", "str", "", "record name"),
        col("start_us", "float64", "us", "start"), col("end_us", "float64", "us", "end"),
        col("get_next_ms", "float64", "ms", "GetNext duration"), col("size", "Int64", "", "items in the queue"),
    ), "device_queue", ("minddata_aicpu_*.txt", "minddata_getnext_profiling_*.txt"),
        frozenset({"minddata_aicpu", "minddata_getnext"}), note="MindInsight calls it the get_next queue."),
    FrameSpec("cpu_utilization", "CPU sample", (
        col("sample", "int64", "", "0-based sample index"), col("time_ms", "float64", "ms", "sample time"),
        col("user_pct", "float64", "%", "machine: user"), col("sys_pct", "float64", "%", "machine: system"),
        col("io_pct", "float64", "%", "machine: I/O wait"), col("idle_pct", "float64", "%", "machine: idle"),
        opt("context_switches", "float64", "", "context switches"),
        opt("runnable_processes", "float64", "", "runnable processes"),
        opt("process_user_pct", "float64", "%", "this process: user, % of one core"),
        opt("process_sys_pct", "float64", "%", "this process: system, % of one core"),
        opt("step", "Int64", "", "the step MindInsight maps the sample to (0 before the first host-queue "
                                 "record)"),
        opt("process_pss_mb", "float64", "MB", "process PSS"), opt("process_rss_mb", "float64", "MB", "process RSS"),
        opt("process_vss_mb", "float64", "MB", "process VSS"), opt("sys_total_mb", "float64", "MB", "machine total"),
        opt("sys_available_mb", "float64", "MB", "machine available"),
        opt("sys_used_mb", "float64", "MB", "machine used"),
    ), "minddata", ("minddata_cpu_utilization_*.json",), frozenset({"minddata_cpu_utilization"}),
        note="Series of unequal length are aligned by index (the 2N series truncated to N, as MindInsight does)."),
    FrameSpec("op_cpu_utilization", "pipeline op and CPU sample", (
        col("op_id", "int64", "", "op id (-1: CPU outside any op, kept as written)"),
        col("sample", "int64", "", "sample index"), col("time_ms", "float64", "ms", "sample time"),
        col("user_pct", "float64", "%", "user"), col("sys_pct", "float64", "%", "system"),
    ), "minddata", ("minddata_cpu_utilization_*.json",), frozenset({"minddata_cpu_utilization"})),
    FrameSpec("timeline", "complete event (`X`, or a `B`/`E` pair)", (
        col("track", "int32", "", "index into `timeline_tracks`"),
        col("name", "category", "", "event name"),
        col("op_type", "category", "", "`args.type` where present, else derived from the name"),
        col("ph", "category", "", "trace phase"), col("cat", "category", "", "trace category"),
        col("start_us", "float64", "us", "start"), col("dur_us", "float64", "us", "duration"),
        col("args", "object", "", "the event's args as JSON text, or None"),
        opt("is_scope", "bool", "", "a scope-layer bar (its op_type is `Scope Layer`)"),
    ), "timeline", _TIMELINE_FILES, _TIMELINE_ROLES | {"cpu_op_timestamp", "cpu_op_detail", "cann_hccl",
                                                        "cann_task_time"} | _DB,
        note="Sorted by `track`, then `start_us`."),
    FrameSpec("timeline_tracks", "process × thread of the timeline", (
        col("track", "int32", "", "track id"), col("pid", "str", "", "process id"),
        col("tid", "str", "", "thread id"), col("process", "str", "", "process name (`M` events, else the id)"),
        col("thread", "str", "", "thread name"), col("process_sort", "int64", "", "the writer's process order"),
        col("thread_sort", "int64", "", "the writer's thread order"), col("events", "int64", "", "events on it"),
    ), "none", _TIMELINE_FILES, _TIMELINE_ROLES | _DB),
    FrameSpec("timeline_flows", "flow arrow (paired by cat and id)", (
        col("cat", "str", "", "category"), col("id", "str", "", "flow id"), col("name", "str", "", "name"),
        col("start_track", "int32", "", "track of the arrow's tail"), col("start_us", "float64", "us", "tail"),
        col("end_track", "int32", "", "track of the arrow's head"), col("end_us", "float64", "us", "head"),
    ), "timeline", _TIMELINE_FILES, _TIMELINE_ROLES | _DB),
    FrameSpec("call_stacks", "frame of an event's Python call stack (innermost first)", (
        col("track", "int32", "", "the event's track (index into `timeline_tracks`)"),
        col("name", "str", "", "the event (framework op or API call) the stack belongs to"),
        col("start_us", "float64", "us", "the event's start, as `timeline` has it"),
        col("stack", "int64", "", "the stack's id, shared by the events called from the same place: the "
                                  "distinct stacks numbered in the order of their first event"),
        col("depth", "int64", "", "the frame's place in the stack, 0 = innermost (where the op was called)"),
        col("file", "str", "", "the source file as the profiler wrote it (a path on the profiled machine)"),
        col("line", "Int64", "", "the line in that file"),
        col("function", "str", "", "the function"),
    ), "timeline", ("ASCEND_PROFILER_OUTPUT/trace_view.json (args \"Call stack\")",
                    "*.db (PYTORCH_API.callchainId, PYTORCH_CALLCHAINS)"),
        # read from the timeline's args, whichever trace files gave the timeline
        _TIMELINE_ROLES | {"cpu_op_timestamp", "cann_hccl", "cann_task_time"} | _DB,
        note="Recorded with torch_npu's `with_stack=True`; a frame is written `file(line): function` "
             "(`nbprofiler.io.stacks.parse_frame`), and a stack with a frame in another form is dropped with a "
             "warning. Sorted by `track`, `start_us`, `depth`."),
    FrameSpec("timeline_counters", "counter sample (`C` event)", (
        col("pid", "str", "", "process"), col("name", "str", "", "counter"),
        col("series", "str", "", "the args key"), col("start_us", "float64", "us", "sample time"),
        col("value", "float64", "", "value, in the counter's own unit"),
    ), "timeline", _TIMELINE_FILES, _TIMELINE_ROLES),
    FrameSpec("memory", "allocator sample", (
        col("component", "str", "", "who allocated (APP, PTA, GE, MindSpore, ...)"),
        col("time_us", "float64", "us", "sample time"),
        col("allocated_mb", "float64", "MB", "allocated"), col("reserved_mb", "float64", "MB", "reserved"),
        col("active_mb", "float64", "MB", "active"), col("device", "str", "", "device as written"),
    ), "timeline", ("ASCEND_PROFILER_OUTPUT/memory_record.csv", "FRAMEWORK/cpu_ms_memory_record_*.txt",
                    "*.db (MEMORY_RECORD, NPU_MEM)"), frozenset({"memory_record", "cpu_memory_record"}) | _DB),
    FrameSpec("operator_memory", "allocation by an operator", (
        col("name", "str", "", "operator"), col("size_kb", "float64", "KB", "size"),
        col("alloc_us", "float64", "us", "allocation time"), col("release_us", "float64", "us", "release time"),
        col("dur_us", "float64", "us", "held for"),
    ), "timeline", ("ASCEND_PROFILER_OUTPUT/operator_memory.csv", "*.db (OP_MEMORY)"),
        frozenset({"operator_memory"}) | _DB, more="the file's other columns snake_cased with their units"),
    FrameSpec("communication", "communication op and rank", (
        *_COMM_KEYS,
        col("start_us", "float64", "us", "start"),
        col("elapse_ms", "float64", "ms", "elapsed"), col("transit_ms", "float64", "ms", "transit"),
        col("wait_ms", "float64", "ms", "wait"), col("sync_ms", "float64", "ms", "synchronisation"),
        col("idle_ms", "float64", "ms", "idle"),
        opt("kind", "str", "", "collective or p2p (the file's section)"),
        opt("wait_ratio", "float64", "0-1", "wait / (wait + transit)"),
        opt("sync_ratio", "float64", "0-1", "sync / (sync + transit)"),
    ), "epoch", ("ASCEND_PROFILER_OUTPUT/communication.json", "cluster_communication.json",
                 "*.db (COMMUNICATION_OP, CommAnalyzerTime)"),
        frozenset({"communication", "cluster_communication", "analysis_db", "cluster_analysis_db"}) | _DB),
    FrameSpec("communication_links", "communication op, rank and transport", (
        *_COMM_KEYS,
        col("transport", "str", "", "RDMA, HCCS, PCIE, SDMA, SIO"), col("size_mb", "float64", "MB", "data moved"),
        col("transit_ms", "float64", "ms", "transit"), col("bandwidth_gbps", "float64", "GB/s", "bandwidth"),
        opt("kind", "str", "", "collective or p2p"),
        opt("large_packet_ratio", "float64", "0-1", "share of large packets"),
        opt("packets", "int64", "", "packets (summed over the packet-size rows)"),
    ), "none", ("ASCEND_PROFILER_OUTPUT/communication.json", "cluster_communication.json",
                "*.db (CommAnalyzerBandwidth)"),
        frozenset({"communication", "cluster_communication", "analysis_db", "cluster_analysis_db"})),
    FrameSpec("communication_matrix", "communication op and link (src rank -> dst rank)", (
        col("step", "Int64", "", "the step (<NA> where the file names none)"),
        col("group", "str", "", "group"), col("op_name", "str", "", "op"),
        col("src", "str", "", "source rank"), col("dst", "str", "", "destination rank"),
        col("transport", "str", "", "LOCAL, HCCS, RDMA, SDMA, PCIE, SIO"),
        col("size_mb", "float64", "MB", "data moved"), col("transit_ms", "float64", "ms", "transit"),
        col("bandwidth_gbps", "float64", "GB/s", "bandwidth"),
    ), "none", ("communication_matrix.json", "cluster_communication_matrix.json", "*.db (CommAnalyzerMatrix)"),
        frozenset({"communication_matrix", "cluster_communication_matrix", "analysis_db", "cluster_analysis_db"}),
        note="A cluster file gives each rank the links whose source it is."),
    FrameSpec("communication_groups", "communication group", (
        col("kind", "str", "", "collective or p2p"), col("group", "int64", "", "group index"),
        col("ranks", "object", "", "tuple of the member ranks (str)"), col("size", "int64", "", "members"),
    ), "none", ("communication_group.json",), frozenset({"communication_group", "cluster_analysis_db"})),
    FrameSpec("npu_module_mem", "module memory sample", (
        col("component", "str", "", "CANN module"), col("time_us", "float64", "us", "sample time"),
        col("reserved_mb", "float64", "MB", "reserved"), col("device", "str", "", "device as written"),
    ), "timeline", ("ASCEND_PROFILER_OUTPUT/npu_module_mem.csv", "*.db (NPU_MODULE_MEM)"),
        frozenset({"npu_module_mem"}) | _DB),
    FrameSpec("api_statistic", "CANN API", (col("api_name", "str", "", "API"),), "none",
              ("ASCEND_PROFILER_OUTPUT/api_statistic.csv",), frozenset({"api_statistic"}),
              more="the file's columns by header name: `level`, `time_us`, `count`, `avg_us`, `min_us`, `max_us`, "
                   "`variance`"),
    FrameSpec("operator_details", "framework operator", (col("name", "str", "", "operator"),), "none",
              ("ASCEND_PROFILER_OUTPUT/operator_details.csv",), frozenset({"operator_details"}),
              more="`input_shapes`, `call_stack`, `host_self_duration_us`, `host_total_duration_us`, "
                   "`device_self_duration_us`, `device_total_duration_us`, ... (us)"),
    FrameSpec("l2_cache", "task", (
        col("stream_id", "Int64", "", "stream"), col("task_id", "Int64", "", "task"),
        col("hit_rate", "float64", "0-1", "L2 hit rate"), col("victim_rate", "float64", "0-1", "L2 victim rate"),
        col("op_name", "str", "", "operator"),
    ), "none", ("ASCEND_PROFILER_OUTPUT/l2_cache.csv",), frozenset({"l2_cache"})),
    FrameSpec("static_op_mem", "static-graph operator allocation", (col("op_name", "str", "", "operator"),),
              "none", ("ASCEND_PROFILER_OUTPUT/static_op_mem.csv",), frozenset({"static_op_mem"}),
              more="the file's columns snake_cased with units in the names"),
    FrameSpec("data_preprocess", "CANN AI CPU preprocessing record", (), "none",
              ("ASCEND_PROFILER_OUTPUT/data_preprocess.csv",), frozenset({"data_preprocess"}),
              more="the file's columns snake_cased with units in the names"),
    FrameSpec("dataset", "MindSpore dataset range", (), "none", ("ASCEND_PROFILER_OUTPUT/dataset.csv",),
              frozenset({"dataset"}), more="the file's columns snake_cased with units in the names"),
    FrameSpec("input_shapes", "operator and distinct input shapes", (
        col("op_name", "str", "", "short operator name"), col("op_type", "str", "", "type"),
        col("input_shapes", "str", "", "the shapes"), col("count", "Int64", "", "calls with those shapes"),
    ), "none", ("FRAMEWORK/cpu_framework_*.txt",), frozenset({"cpu_framework"}),
        note="Also joined into `ops.input_shapes`."),
    FrameSpec("hccl", "step (legacy HCCL)", (
        col("step", "int64", "", "step number (the average row is in `attrs['average']`)"),
        col("communication_cost_ms", "float64", "ms", "communication"),
        col("wait_cost_ms", "float64", "ms", "waiting"),
    ), "none", ("hccl_raw_*.csv",), frozenset({"hccl_raw"})),
    FrameSpec("hccl_links", "step and link (legacy HCCL)", (
        col("step", "int64", "", "step number"), col("src", "int64", "", "source rank"),
        col("dst", "int64", "", "destination rank"), col("transport", "str", "", "link type"),
        col("time_ms", "float64", "ms", "time on the link"),
        col("size", "float64", "", "data moved (the file gives no unit)"),
        col("bandwidth", "float64", "", "bandwidth (the file gives no unit)"),
    ), "none", ("hccl_raw_*.csv (link_info)",), frozenset({"hccl_raw"})),
    FrameSpec("cluster_analyse", "step (legacy cluster analysis)", (
        col("step", "int64", "", "step number (the average row is in `attrs['average']`)"),
    ), "none", ("ascend_cluster_analyse_*.csv",), frozenset({"cluster_analyse"}),
        more="the file's metric columns in ms (ticks converted for data-parallel files)"),
)}

RECORDS: dict[str, RecordSpec] = {r.name: r for r in (
    RecordSpec("step_trace_average", "dict: the step-trace file's own average row as written (MindInsight's "
               "\"average\"), `<stage>_ms` and `total_ms`; None when the file has none", _STEP_FILES[:1],
               frozenset({"step_trace"})),
    RecordSpec("step_point_info", "the FP-start and BP-end anchor operators (a dict, or a list per step)",
               ("step_trace_point_info_*.json",), frozenset({"step_trace_point_info"})),
    RecordSpec("minddata_summary", "MindSpore's own pipeline summary as a dict", (
        "minddata_pipeline_summary_*.json", "minddata_pipeline_summary_*.csv"),
        frozenset({"minddata_pipeline_summary_json", "minddata_pipeline_summary_csv"})),
    RecordSpec("timeline_summary", "the writer's timeline summary (total_time in us)",
               ("*_timeline_summary_*.json",), frozenset({"timeline_summary"})),
    RecordSpec("flops_summary", "FLOPs totals as written (MFLOPs, GFLOPS, percent)", ("flops_summary_*.json",),
               frozenset({"flops_summary"})),
    RecordSpec("info", "run metadata merged into one dict", (
        "profiler_info_*.json", "profiler_metadata.json", "PROF_*/*/info.json*", "*.db (META_DATA, ...)"),
        frozenset({"profiler_info", "profiler_metadata", "cann_info", "cann_start_info", "cann_end_info"}) | _DB),
)}

# What a timeline diff reads: each run's step windows, its operators in the step and its timeline.
_DIFF_FILES = ("ASCEND_PROFILER_OUTPUT/kernel_details.csv (step ids)", "trace_view.json / msprof_*.json",
               "a step trace sharing the timeline's clock")
_DIFF_ROLES = _TIMELINE_ROLES | frozenset({"kernel_details", "step_trace", "cann_step_trace"}) | _DB
_MEMORY_PEAK_FILES = ("ASCEND_PROFILER_OUTPUT/memory_record.csv", "FRAMEWORK/cpu_ms_memory_record_*.txt",
                      "ASCEND_PROFILER_OUTPUT/operator_memory.csv", "*.db (MEMORY_RECORD, OP_MEMORY)")
_MEMORY_PEAK_ROLES = frozenset({"memory_record", "cpu_memory_record", "operator_memory"}) | _DB

# Frames an analysis derives (not `Profile` properties): declared here like the others (``builder``
# "analysis": the function their note names builds them). The cluster ones are also tables of
# ``cluster.sql`` under their name, ``dispatch`` (one profile) a table of ``prof.sql``.
ANALYSIS_FRAMES: dict[str, FrameSpec] = {s.name: s for s in (
    FrameSpec("rank_breakdown", "rank and step", (
        col("rank", "str", "", "the rank's key in the cluster"), col("step", "int64", "", "step number"),
        col("step_ms", "float64", "ms", "the step (= the parts below, NaN parts counted as 0)"),
        col("computing_ms", "float64", "ms", "device computing with no communication beside it (legacy: the rest "
            "of the step, overlapped communication and idle time included)"),
        col("comm_overlapped_ms", "float64", "ms", "communication overlapped by computing"),
        col("comm_exposed_ms", "float64", "ms", "communication not overlapped (= wait_ms + transit_ms)"),
        col("wait_ms", "float64", "ms", "part of the exposed communication spent waiting for the other ranks "
            "(apportioned by the files' wait / (wait + transit))"),
        col("transit_ms", "float64", "ms", "part of the exposed communication spent moving data"),
        col("free_ms", "float64", "ms", "the device idle inside the step"),
        col("host_bound_ms", "float64", "ms", "the device idle while the host dispatches the step (Preparing; "
            "legacy: the step interval)"),
        col("wait_share", "float64", "0-1", "wait / (wait + transit) of the rank's communication in the step"),
        col("source", "str", "", "the files the row's numbers come from"),
    ), "none", ("ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "cluster_step_trace_time.csv", "*.db (STEP_TIME, "
                "TASK)", "trace_view.json (Notify Wait, SDMA, RDMA tasks)", "cluster_communication.json",
                "step_trace_raw_*_detail_time.csv", "ascend_cluster_analyse_*.csv", "hccl_raw_*.csv"),
        frozenset({"step_trace", "step_trace_time", "cluster_step_trace_time", "analysis_db", "cluster_analysis_db",
                   "trace_view", "cluster_communication", "communication", "cluster_analyse", "hccl_raw"}) | _DB,
        note="`nbprofiler.analysis.breakdown.rank_breakdown(cluster)`; a NaN part is one the files do not give.",
        builder="analysis"),
    FrameSpec("timeline_diff_steps", "step of run b aligned on the same (or the chosen) step of run a", (
        col("a_step", "int64", "", "run a's step number"), col("b_step", "int64", "", "run b's step number"),
        col("a_start_us", "float64", "us", "the step's start on run a's timeline (`step_windows`)"),
        col("b_start_us", "float64", "us", "the step's start on run b's own timeline"),
        col("a_ms", "float64", "ms", "run a's step duration (its `step_windows` span)"),
        col("b_ms", "float64", "ms", "run b's step duration"),
        col("delta_ms", "float64", "ms", "b_ms - a_ms"),
        col("shift_us", "float64", "us", "added to run b's times in this step to put it on run a's clock"),
        col("start_us", "float64", "us", "the aligned start of both steps on the shared clock (run a's)"),
        col("chosen", "bool", "", "the compared step pair (the operator tables are of this step)"),
    ), "timeline", _DIFF_FILES, _DIFF_ROLES,
        note="`nbprofiler.analysis.timeline_diff.timeline_diff(a, b).steps`.", builder="analysis"),
    FrameSpec("timeline_diff_op_types", "operator type in the compared step pair", (
        col("op_type", "str", "", "operator type"),
        col("a_time_us", "float64", "us", "its executions' summed duration in run a's step (NaN: none)"),
        col("b_time_us", "float64", "us", "the same in run b's step"),
        col("delta_us", "float64", "us", "b - a (a missing side counted as 0)"),
        col("delta_pct", "float64", "%", "delta_us relative to a_time_us (NaN where a has no time)"),
        col("a_count", "int64", "", "executions in run a's step"), col("b_count", "int64", "", "in run b's step"),
        col("status", "str", "", "\"both\", \"new\" (only in b) or \"vanished\" (only in a)"),
    ), "none", _DIFF_FILES, _DIFF_ROLES,
        note="`timeline_diff(a, b).op_types`, ranked by |delta_us|.", builder="analysis"),
    FrameSpec("timeline_diff_ops", "operator (name and occurrence) in the compared step pair", (
        col("op_name", "str", "", "the operator's name in run a (run b's where a lacks it)"),
        col("b_name", "str", "", "its name in run b (a collective's group hash may differ between runs)"),
        col("occurrence", "int64", "", "k: the k-th execution (from 0) of the name in the step, by start"),
        col("op_type", "str", "", "operator type"),
        col("a_time_us", "float64", "us", "its duration in run a's step (NaN: not run)"),
        col("b_time_us", "float64", "us", "its duration in run b's step"),
        col("delta_us", "float64", "us", "b - a (a missing side counted as 0)"),
        col("delta_pct", "float64", "%", "delta_us relative to a_time_us (NaN where a has no time)"),
        col("a_count", "int64", "", "1 where run a's step ran it, else 0"), col("b_count", "int64", "", "the same for b"),
        col("a_start_us", "float64", "us", "its start on the shared clock (run a's timeline), run a"),
        col("b_start_us", "float64", "us", "its start on the shared clock, run b (shifted by the step's shift_us)"),
        col("status", "str", "", "\"both\", \"new\" or \"vanished\""),
        col("flagged", "bool", "", "among the top_n |delta_us|: highlighted on the timeline"),
    ), "timeline", _DIFF_FILES, _DIFF_ROLES,
        note="`timeline_diff(a, b).ops`, ranked by |delta_us|.", builder="analysis"),
    FrameSpec("timeline_diff_highlights", "execution of a flagged operator in either run's compared step", (
        col("run", "str", "", "\"a\" or \"b\""), col("op_name", "str", "", "the operator (`timeline_diff_ops.op_name`)"),
        col("occurrence", "int64", "", "its occurrence in the step"),
        col("track", "int64", "", "its event's track in the stacked timeline (-1: no event of it on the timeline)"),
        col("start_us", "float64", "us", "start on the shared clock"), col("dur_us", "float64", "us", "duration"),
        col("delta_us", "float64", "us", "the operator's change, b - a"),
    ), "timeline", _DIFF_FILES, _DIFF_ROLES,
        note="`timeline_diff(a, b).highlights`: what the timeline diff view outlines.", builder="analysis"),
    FrameSpec("memory_peak_allocations", "operator allocation alive at the memory peak", (
        col("name", "str", "", "operator"), col("size_mb", "float64", "MB", "size"),
        col("alloc_us", "float64", "us", "allocated at (at or before the peak)"),
        col("release_us", "float64", "us", "released at (after the peak; NaN: never while recording)"),
        col("category", "str", "", "the allocator component that served it (PTA, GE, ...) or uncategorised"),
        col("category_source", "str", "", "what in the files says so"),
    ), "timeline", _MEMORY_PEAK_FILES, _MEMORY_PEAK_ROLES,
        note="`nbprofiler.analysis.memory_peak.alive_at_peak(prof).allocations`; largest first.",
        builder="analysis"),
    FrameSpec("memory_peak_operators", "operator with allocations alive at the memory peak", (
        col("name", "str", "", "operator"), col("allocations", "int64", "", "its allocations alive"),
        col("size_mb", "float64", "MB", "their size"), col("share", "float64", "0-1", "of the peak"),
        col("category", "str", "", "component of its allocations (mixed: several)"),
    ), "none", _MEMORY_PEAK_FILES, _MEMORY_PEAK_ROLES,
        note="`alive_at_peak(prof).operators`; largest first.", builder="analysis"),
    FrameSpec("memory_peak_categories", "allocator component at the memory peak", (
        col("category", "str", "", "component (a part of the peak curve) or uncategorised"),
        col("allocated_mb", "float64", "MB", "its allocated curve at the peak"),
        col("reserved_mb", "float64", "MB", "its reserved curve at the peak"),
        col("alive_mb", "float64", "MB", "its operator allocations alive"),
        col("allocations", "int64", "", "how many"),
        col("unexplained_mb", "float64", "MB", "allocated - alive: not explained by operator allocations"),
        col("source", "str", "", "the file and columns the row comes from"),
    ), "none", _MEMORY_PEAK_FILES, _MEMORY_PEAK_ROLES,
        note="`alive_at_peak(prof).categories`.", builder="analysis"),
    FrameSpec("memory_peak_modules", "CANN module reserving memory at the memory peak", (
        col("module", "str", "", "CANN module"), col("reserved_mb", "float64", "MB", "reserved then"),
    ), "none", ("ASCEND_PROFILER_OUTPUT/npu_module_mem.csv", "*.db (NPU_MODULE_MEM)"),
        frozenset({"npu_module_mem"}) | _DB, note="`alive_at_peak(prof).modules`.", builder="analysis"),
    FrameSpec("memory_category_curves", "sample time and part of the peak curve", (
        col("time_us", "float64", "us", "sample time"), col("category", "str", "", "component"),
        col("allocated_mb", "float64", "MB", "its allocated memory then (0 before its first sample)"),
        col("curve", "str", "", "the sum curve the parts add up to"),
    ), "timeline", (*_MEMORY_PEAK_FILES[:2], "*.db (MEMORY_RECORD)"),
        frozenset({"memory_record", "cpu_memory_record"}) | _DB,
        note="`nbprofiler.analysis.memory_peak.category_curves(prof.memory)`.", builder="analysis"),
    FrameSpec("memory_peak_diff", "operator alive at either run's memory peak", (
        col("name", "str", "", "operator"), col("a_alive_mb", "float64", "MB", "alive at a's peak"),
        col("b_alive_mb", "float64", "MB", "alive at b's peak"), col("delta_mb", "float64", "MB", "b - a"),
        col("a_allocations", "int64", "", "allocations alive at a's peak"),
        col("b_allocations", "int64", "", "allocations alive at b's peak"),
    ), "none", _MEMORY_PEAK_FILES, _MEMORY_PEAK_ROLES,
        note="`nbprofiler.compare(a, b).memory.operators`; largest |delta| first.", builder="analysis"),
    FrameSpec("pipeline_bubbles", "pipeline stage, rank and step", (
        col("stage", "int64", "", "pipeline stage (from 0)"), col("rank", "str", "", "the rank's key in the cluster"),
        col("step", "int64", "", "step number"),
        col("step_ms", "float64", "ms", "the step (= busy + p2p + collective + free, NaN parts counted as 0); "
            "from a timeline the pipeline's step: earliest start to latest end over the stages"),
        col("busy_ms", "float64", "ms", "computing (the union of the compute kernels)"),
        col("p2p_ms", "float64", "ms", "in send/receive ops with nothing computing: waiting for a neighbour stage"),
        col("collective_ms", "float64", "ms", "in collectives with nothing computing (not a bubble)"),
        col("free_ms", "float64", "ms", "nothing running on the device (legacy files: not given)"),
        col("idle_ms", "float64", "ms", "the stage's bubble: p2p_ms + free_ms"),
        col("bubble_ratio", "float64", "0-1", "idle_ms / step_ms"),
        col("theoretical_ratio", "float64", "0-1", "the schedule's bubble (p-1)/(m+p-1), interleaved "
            "(p-1)/(v*m+p-1); NaN without micro_batches"),
        col("gap_ms", "float64", "ms", "idle_ms - theoretical_ratio x step_ms: bubble beyond the schedule's"),
        col("source", "str", "", "the files the row's numbers and the stages come from"),
    ), "none", ("trace_view.json (hcom_send/hcom_receive, compute kernels)", "kernel_details.csv (step ids)",
                "ASCEND_PROFILER_OUTPUT/step_trace_time.csv (Bubble)", "cluster_step_trace_time.csv (Bubble)",
                "communication_group.json (p2p groups)", "ascend_cluster_analyse_pipeline-parallel_*.csv"),
        frozenset({"trace_view", "kernel_details", "step_trace_time", "cluster_step_trace_time",
                   "communication_group", "cluster_analyse"}),
        note="`nbprofiler.analysis.pipeline.pipeline_bubbles(cluster, stages=None, micro_batches=None, "
             "schedule='1f1b')`; empty when the job is not pipeline-parallel.", builder="analysis"),
    FrameSpec("parallel_groups", "communication group", (
        col("group", "str", "", "`collective[i]`/`p2p[i]` (its place in communication_group.json), the ranks "
            "key of cluster_communication.json, or the group id the op names carry"),
        col("kind", "str", "", "collective or p2p"),
        col("ranks", "str", "", "member ranks, comma-separated"), col("size", "int64", "", "members"),
        col("dimension", "str", "", "TP, PP, DP, EP, CP, world, unknown, stage (a pipeline stage), single"),
        col("inferred_from", "str", "", "why that dimension"),
        col("members_from", "str", "", "where the ranks come from"),
        col("ops", "int64", "", "distinct op names recorded on it"),
        col("time_ms", "float64", "ms", "the ops' elapse time, summed over ranks and steps"),
    ), "none", ("communication_group.json", "cluster_analysis.db (CommunicationGroup)", "cluster_communication.json",
                "ASCEND_PROFILER_OUTPUT/communication.json", "*.db (COMMUNICATION_OP, CommAnalyzerTime)"),
        frozenset({"communication_group", "cluster_analysis_db", "cluster_communication", "communication",
                   "analysis_db"}) | _DB,
        note="`nbprofiler.analysis.parallel_groups.parallel_groups(cluster)`; the dimension is inferred from the "
             "layout and the op names, `inferred_from` says how.", builder="analysis"),
    FrameSpec("parallel_communication", "rank, step and parallel dimension", (
        col("rank", "str", "", "the rank's key in the cluster"), col("step", "Int64", "", "step number"),
        col("dimension", "str", "", "as in `parallel_groups`"),
        col("groups", "str", "", "the groups (`parallel_groups.group`) of its ops, space-separated"),
        col("ops", "int64", "", "distinct op names"),
        col("elapse_ms", "float64", "ms", "the ops' elapse time (transit + wait + idle)"),
        col("transit_ms", "float64", "ms", "transit"), col("wait_ms", "float64", "ms", "wait"),
        col("size_mb", "float64", "MB", "data moved: RDMA plus SDMA (else HCCS + PCIE + SIO)"),
        col("exposed_ms", "float64", "ms", "elapse_ms x the rank-step's exposed share of communication (step "
            "trace: not overlapped / all communication)"),
    ), "none", ("cluster_communication.json", "ASCEND_PROFILER_OUTPUT/communication.json",
                "*.db (COMMUNICATION_OP, CommAnalyzerTime, CommAnalyzerBandwidth)", "step_trace_time.csv",
                "cluster_step_trace_time.csv"),
        frozenset({"cluster_communication", "communication", "analysis_db", "cluster_analysis_db",
                   "communication_group", "step_trace_time", "cluster_step_trace_time"}) | _DB,
        note="`nbprofiler.analysis.parallel_groups.parallel_communication(cluster)`; no file says which op "
             "overlapped computing, so each dimension of a rank-step gets the rank-step's exposed share.",
        builder="analysis"),
    FrameSpec("slow_rank_causes", "slow rank and cause", (
        col("rank", "str", "", "the slow rank's key in the cluster (a flagged outlier, else the slowest rank)"),
        col("order", "int64", "", "1 = the leading cause (most ms explained)"),
        col("outlier", "bool", "", "the rank is an outlier in some stage (robust z), not only the slowest"),
        col("step_ms", "float64", "ms", "the rank's average step"),
        col("median_step_ms", "float64", "ms", "the median over the ranks of their average step"),
        col("cause", "str", "", "key: a breakdown part (computing_ms, wait_ms, ...), op_type:<type> or "
            "link:<src>-<dst>:<transport>"),
        col("kind", "str", "", "stage, op_type or link"),
        col("part", "str", "", "the breakdown part the cause lies in"),
        col("label", "str", "", "the cause as a sentence names it"),
        col("ms", "float64", "ms", "time per step the cause explains (a stage's excess over the ranks' median, "
            "less the op types or links listed inside it)"),
        col("value_ms", "float64", "ms", "the rank's time per step in that part, op type or link"),
        col("median_ms", "float64", "ms", "the median over the ranks (a link: its time at the transport's "
            "median bandwidth)"),
        col("view", "str", "", "where the evidence is shown: breakdown, operators or links"),
        col("evidence", "str", "", "the numbers behind the cause"),
    ), "none", ("ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "cluster_step_trace_time.csv",
                "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "ASCEND_PROFILER_OUTPUT/op_statistic.csv",
                "cluster_communication.json", "cluster_communication_matrix.json", "hccl_raw_*.csv",
                "step_trace_raw_*_detail_time.csv"),
        frozenset({"step_trace", "step_trace_time", "cluster_step_trace_time", "kernel_details", "op_statistic",
                   "communication", "cluster_communication", "communication_matrix", "cluster_communication_matrix",
                   "hccl_raw"}) | _DB,
        note="`nbprofiler.analysis.slow_rank_cause.slow_rank_causes(cluster)`; per slow rank, leading cause first.",
        builder="analysis"),
    FrameSpec("link_speeds", "link (src rank -> dst rank) and transport", (
        col("src", "str", "", "source rank"),
        col("dst", "str", "", "destination rank; * where the files give a rank's traffic per transport only"),
        col("transport", "str", "", "HCCS, RDMA, SDMA, PCIE, SIO"),
        col("steps", "int64", "", "profiled steps the link's numbers are summed over"),
        col("size_mb", "float64", "MB", "data moved a step (NaN for hccl_raw, whose unit is not stated)"),
        col("time_ms", "float64", "ms", "transit time a step"),
        col("bandwidth_gbps", "float64", "GB/s", "size / time (NaN for hccl_raw)"),
        col("expected_gbps", "float64", "GB/s", "the median bandwidth of the cluster's links of this transport"),
        col("ratio", "float64", "0-1", "bandwidth / expected bandwidth (in the file's own unit for hccl_raw)"),
        col("slow", "bool", "", "ratio below the slow share (0.8: 20 % below the transport's median)"),
        col("extra_ms", "float64", "ms", "time a step the link costs against its transport's median bandwidth "
            "for the bytes it moved (0 for a link that is not slow)"),
        col("held_back", "str", "", "the ranks whose communication waits on the link (the members of the groups "
            "whose ops use it, else its ends), comma-separated"),
        col("source", "str", "", "the files the links come from"),
    ), "none", ("cluster_communication_matrix.json", "communication_matrix.json", "cluster_communication.json",
                "communication.json", "hccl_raw_*.csv", "*.db (CommAnalyzerMatrix, CommAnalyzerBandwidth)"),
        frozenset({"communication_matrix", "cluster_communication_matrix", "communication", "cluster_communication",
                   "hccl_raw", "analysis_db", "cluster_analysis_db"}),
        note="`nbprofiler.analysis.slow_rank_cause.link_speeds(cluster)`; slow links first.",
        builder="analysis"),
    FrameSpec("dispatch", "device task launched by a host call (joined through the timeline's flows)", (
        col("step", "Int64", "", "the step the task started in (<NA>: no step known or outside every step)"),
        col("task", "str", "", "device task"), col("stream", "str", "", "its stream (process / thread)"),
        col("task_start_us", "float64", "us", "task start"), col("task_end_us", "float64", "us", "task end"),
        col("launch_flow", "str", "", "the flow giving the launch: `HostToDevice` (CANN), else `async_npu`"),
        col("launch_us", "float64", "us", "the launch: the flow's tail"),
        col("launch_latency_us", "float64", "us", "task start − launch (slightly negative where the host's and "
            "device's clocks disagree)"),
        col("host_op", "str", "", "the outermost host event around the launch (the API call; \"\" none)"),
        col("host_thread", "str", "", "its thread (process / thread)"),
        col("host_start_us", "float64", "us", "its start (NaN: none)"),
        col("host_end_us", "float64", "us", "its end (NaN: none)"),
        col("framework_op", "str", "", "the innermost framework op around the `async_npu` flow's tail (\"\" none)"),
        col("responsible_op", "str", "", "the op the idle is put on: the framework op, else the host op"),
        col("gap_us", "float64", "us", "device idle right before the task (no task on any stream; from the "
            "step's start for a step's first task; NaN for the run's first task)"),
        col("waited", "bool", "", "the task waited for its launch (launched after the device ran idle, within "
            "the tolerance)"),
        col("host_idle_us", "float64", "us", "the device idle the host caused: `gap_us` where `waited`, else 0"),
    ), "timeline", ("ASCEND_PROFILER_OUTPUT/trace_view.json (HostToDevice, async_npu flows)",
                    "*.db (CANN_API, TASK connectionId)"), _TIMELINE_ROLES | _DB,
        note="`nbprofiler.analysis.dispatch.host_dispatch(...)` / `profile_dispatch(prof)`; a table of "
             "`prof.sql`.", builder="analysis"),
)}

# Roles read only for the frames no text file of the run gives (the text export wins when both exist).
DB_FALLBACK_ROLES = _DB


# The summary JSON (`Profile.summary()`, ``nbprofiler summary --json``, SUMMARY_SCHEMA): its top-level
# sections and the JSON types each may hold. A summary read back from a file (a check's baseline, a run of
# a check's history) is held to it, so a damaged copy is refused by name instead of read as "not measured".
SUMMARY_SECTIONS: dict[str, tuple[type, ...]] = {
    "nbprofiler_version": (str,), "source": (str,), "generation": (str,), "device": (str, type(None)),
    "devices_found": (list,), "session": (dict, type(None)), "problems": (list,),
    "step_time": (dict, type(None)), "step_trace": (dict, type(None)), "op_types": (dict,), "ops": (dict,),
    "minddata": (dict, type(None)), "timeline": (dict, type(None)), "flops": (dict, type(None)),
    "diagnosis": (dict, type(None)), "suggestions": (list,), "cluster": (dict, type(None)),
    "memory": (dict, type(None)),
    "dispatch": (dict, type(None)),
}


def feeds() -> dict[str, tuple[str, ...]]:
    """Role -> the frames and records its files are read into (``prof.files``'s ``feeds`` column)."""
    out: dict[str, list[str]] = {}
    for spec in (*FRAMES.values(), *RECORDS.values()):
        for role in sorted(spec.roles):
            out.setdefault(role, []).append(spec.name)
    return {role: tuple(names) for role, names in out.items()}


def looked_for(*names: str) -> list[str]:
    """The file patterns that feed these frames or records, in declaration order without repeats (a view's
    "looked for" list)."""
    out: list[str] = []
    for n in names:
        spec = FRAMES.get(n) or RECORDS[n]
        out += [f for f in spec.files if f not in out]
    return out


def roles_of(*names: str) -> frozenset[str]:
    """The discovery roles that feed these frames or records."""
    return frozenset().union(*((FRAMES.get(n) or RECORDS[n]).roles for n in names))


# -- the data-model tables (docs/data-model.md) -------------------------------------------------------------
def _columns_cell(spec: FrameSpec) -> str:
    parts = []
    for c in spec.columns:
        unit = f" {c.unit}" if c.unit and c.unit not in ("",) else ""
        text = f"`{c.name}` ({c.dtype}{unit})"
        parts.append(text if c.required else f"{text}?")
    if spec.more:
        parts.append(spec.more)
    return ", ".join(parts) or spec.more


def markdown_table() -> str:
    """The data-model tables of docs/data-model.md: one line per frame, then the records, then the clocks."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| frame | one row per | columns (dtype unit; `?` where the source has it) | clock | sources |",
             "|---|---|---|---|---|"]
    for spec in FRAMES.values():
        lines.append(f"| `{spec.name}` | {esc(spec.row)} | {esc(_columns_cell(spec))} | {spec.clock} | "
                     f"{esc(', '.join(f'`{f}`' for f in spec.files))} |")
    lines += ["", "| analysis frame | one row per | columns | built by | sources |", "|---|---|---|---|---|"]
    for spec in ANALYSIS_FRAMES.values():
        lines.append(f"| `{spec.name}` | {esc(spec.row)} | {esc(_columns_cell(spec))} | {esc(spec.note)} | "
                     f"{esc(', '.join(f'`{f}`' for f in spec.files))} |")
    lines += ["", "| record | what it is | sources |", "|---|---|---|"]
    for rec in RECORDS.values():
        lines.append(f"| `{rec.name}` | {esc(rec.meaning)} | {esc(', '.join(f'`{f}`' for f in rec.files))} |")
    lines += ["", "| clock | what the time columns count from |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in CLOCKS.items()]
    return "\n".join(lines)


DATA_MODEL_PAGE = "docs/data-model.md"  # where the tables live, relative to the repository root


def write_readme(path: str = DATA_MODEL_PAGE) -> None:
    """Replace the tables between the data-model markers of ``path`` (docs/data-model.md) with
    `markdown_table`; a page without the markers is an error, not a silent no-op."""
    import re
    with open(path, encoding="utf-8") as f:
        text = f.read()
    new, n = re.subn(r"(<!-- data-model table:[^\n]*-->\n).*?(\n<!-- end of data-model table -->)",
                     lambda m: m.group(1) + markdown_table() + m.group(2), text, flags=re.S)
    if not n:
        raise SystemExit(f"{path} has no data-model table markers (they live in {DATA_MODEL_PAGE})")
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


if __name__ == "__main__":  # python -m nbprofiler.schema [--readme [docs/data-model.md]]
    import sys
    if sys.argv[1:2] == ["--readme"]:
        write_readme(*sys.argv[2:3])
    else:
        print(markdown_table())
