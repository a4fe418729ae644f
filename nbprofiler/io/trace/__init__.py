"""Chrome-trace JSON -> timeline frames (`TraceData`).

Sources, by role (first found wins): ``trace_view`` (MindSpore 2.3+ / torch_npu ``trace_view.json``),
``timeline`` (legacy ``ascend_``/``gpu_``/older ``timeline_display_{id}.json``), ``cann_timeline``
(CANN ``msprof_*.json``, one file per iteration, merged), else ``cann_task_time`` + ``cann_hccl``; with
none of them, the FRAMEWORK ``cpu_op_execute_timestamp`` records (``framework.cpu_op_executions``).

The package is split by job; its modules use each other's public names only:

- `load`: the entry points (`trace_sources`, `trace_data`, `load_trace`) and the FRAMEWORK fallback.
- `parse`: the streaming parse: each file is read into Arrow record batches in a background thread
  while this thread digests them (``ph`` -> an int ``kind``, exact integer-ns ``ts``, ``args.type``,
  dictionary codes).
- `scan`: the reader of those batches where it is built (``_scan.c``, compiled at install), with duckdb's
  values; duckdb's ``read_json`` where it is not, and for text it does not take.
- `exact`: the exact validator: when duckdb rejects a file, a slower exact parse (stdlib json, one
  element at a time) finds the line of the error, so the user gets `TruncatedFileError` /
  `MalformedFileError` with a line number.
- `frames`: what both builds share: `TraceData`, the rule for events that cannot be placed, B/E pairs.
- `naming`: track names (from the ``M`` events, else by the legacy conventions), op types of event and
  kernel names, scope layers.
- `flows` and `counters`: the flows and counters frames.
- `memory`: the build of several files merged (per-iteration CANN exports: their repeated events are
  deduplicated, then the timeline is sorted globally).
- `disk`: the build of one file batch by batch: each digested batch coded against running dictionaries
  and its X events sorted per track as it is read, the timeline then assembled track by track; kept in
  memory, or, for a trace too large for memory, spilled to a store on disk and memory-mapped.
- `progress`: the load's progress bar.

Everything is vectorised numpy/Arrow/duckdb work; only metadata (``M``) and ``B``/``E`` events, a tiny
fraction, are touched one by one. Parsed frames are cached (LZ4 Arrow IPC files) in the user cache dir
(`nbprofiler.io.cache`), keyed by path, size and mtime of every source file, so a second open of a big
trace reads them instead of JSON.
"""
from __future__ import annotations

from .exact import exact_events
from .frames import MAX_DURATION_US, TRACE_FRAMES, TraceData, distinct_categorical
from .load import TRACE_ROLES, load_trace, trace_data, trace_sources
from .naming import (GENERIC_ARG_TYPES, SCOPE_LAYER_TYPE, fill_kernel_types, kernel_type_of, mark_scope_layers,
                     op_type_of, scope_tracks)
from .parse import parse_events
from .progress import PROGRESS_MIN_BYTES

__all__ = ["mark_scope_layers", "scope_tracks", "trace_sources", "trace_data", "load_trace", "parse_events",
           "exact_events", "op_type_of", "kernel_type_of", "fill_kernel_types", "distinct_categorical",
           "TraceData", "TRACE_FRAMES", "TRACE_ROLES", "GENERIC_ARG_TYPES", "SCOPE_LAYER_TYPE",
           "MAX_DURATION_US", "PROGRESS_MIN_BYTES"]
