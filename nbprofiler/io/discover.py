"""Find every profiler run under a path and sort its files by role.

Discovery only looks at names and folder structure (it opens nothing but the small
``profiler_info_*.json`` / CANN ``info.json.*`` files that carry rank ids), so it is fast on big trees.
The result is a list of `RunFiles`: one per device/rank/session, each mapping a *role* (what a file is,
e.g. ``"step_trace"``) to the paths that play it. Loaders take a `RunFiles` and never search themselves.

Layouts understood (FORMATS.md section 2):
- legacy flat profiler folders, several ids in one folder (``step_trace_raw_1_detail_time.csv`` ...);
- MindSpore 2.x ``*_ascend_ms`` folders (one per rank and session), also nested under a parent, and the
  same folders renamed (``test_rank_1/``: any folder holding ``ASCEND_PROFILER_OUTPUT`` or ``FRAMEWORK``),
  each ranked by its own metadata (`written_rank`), never by its name;
- flat folders of raw MindData files; folders with only some ``ASCEND_PROFILER_OUTPUT`` files;
- CANN ``PROF_*/device_N`` exports; ``cluster_analysis_output`` folders; a single trace JSON file.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import time
import warnings
from pathlib import Path

from ..errors import NoProfilerDataError, ProfilerDataWarning

@dataclasses.dataclass(frozen=True)
class FileRole:
    """One kind of profiler file: ``role`` (what the parsers ask a run for: ``run.get(role)``), ``family``
    (what a folder holding it is: "legacy" MindInsight-era, "minddata", "new_format" ASCEND_PROFILER_OUTPUT,
    "database", "metadata", "cluster"), ``name`` (the file name, or with ``regex`` a pattern whose named
    group ``id`` is the device/rank id the name carries)."""

    role: str
    family: str
    name: str
    regex: bool = False


# Every file discovery recognises, in matching order (the first pattern a name matches wins). Adding a file
# kind is one line here (and its parser's entry in `nbprofiler.model.build`).
FILE_ROLES: tuple[FileRole, ...] = (
    FileRole("step_trace", "legacy", r"step_trace_raw_(?P<id>\d+)_detail_time\.csv", regex=True),
    FileRole("step_trace_point_info", "legacy", r"step_trace_point_info_(?P<id>\d+)\.json", regex=True),
    FileRole("aicore_type", "legacy", r"aicore_intermediate_(?P<id>\d+)_type\.csv", regex=True),
    FileRole("aicore_detail", "legacy", r"aicore_intermediate_(?P<id>\d+)_detail\.csv", regex=True),
    FileRole("aicpu", "legacy", r"aicpu_intermediate_(?P<id>\d+)\.csv", regex=True),
    FileRole("framework", "legacy", r"framework_raw_(?P<id>\d+)\.csv", regex=True),
    FileRole("cpu_op_type", "legacy", r"cpu_op_type_info_(?P<id>\d+)\.csv", regex=True),
    FileRole("cpu_op_detail", "legacy", r"cpu_op_detail_info_(?P<id>\d+)\.csv", regex=True),
    FileRole("cpu_op_timestamp", "legacy", r"cpu_op_execute_timestamp_(?P<id>\d+)\.txt", regex=True),
    FileRole("cpu_framework", "legacy", r"cpu_framework_(?P<id>\d+)\.txt", regex=True),
    FileRole("cpu_memory_record", "legacy", r"cpu_ms_memory_record_(?P<id>\d+)\.txt", regex=True),
    FileRole("gpu_op_type", "legacy", r"gpu_op_type_info_(?P<id>\d+)\.csv", regex=True),
    FileRole("gpu_op_detail", "legacy", r"gpu_op_detail_info_(?P<id>\d+)\.csv", regex=True),
    FileRole("gpu_activity", "legacy", r"gpu_activity_data_(?P<id>\d+)\.csv", regex=True),
    FileRole("timeline", "legacy", r"(?:ascend_|gpu_)?timeline_display_(?P<id>\d+)\.json", regex=True),
    FileRole("timeline_summary", "legacy", r"(?:ascend_|gpu_)?timeline_summary_(?P<id>\d+)\.json", regex=True),
    FileRole("min_cycle_counter", "legacy", r"min_cycle_counter_(?P<id>\d+)\.txt", regex=True),
    FileRole("output_timeline_data", "legacy", r"output_timeline_data_(?P<id>\d+)\.txt", regex=True),
    FileRole("op_compute_time", "legacy", r"output_op_compute_time_(?P<id>\d+)\.txt", regex=True),
    FileRole("op_compute_time_detail", "legacy", r"output_op_compute_time_detail_(?P<id>\d+)\.txt", regex=True),
    FileRole("hwts", "legacy", r"output_format_data_hwts_(?P<id>\d+)\.txt", regex=True),
    FileRole("aicpu_preprocess", "legacy", r"output_data_preprocess_aicpu_(?P<id>\d+)\.txt", regex=True),
    FileRole("flops", "legacy", r"flops_(?P<id>\d+)\.txt", regex=True),
    FileRole("flops_summary", "legacy", r"flops_summary_(?P<id>\d+)\.json", regex=True),
    FileRole("flops_scope", "legacy", r"flops_scope_(?P<id>\d+)\.json", regex=True),
    FileRole("hccl_raw", "legacy", r"hccl_raw_(?P<id>\d+)\.csv", regex=True),
    FileRole("cluster_analyse", "legacy", r"(?:ascend|gpu)_cluster_analyse_[A-Za-z-]+_\d+_\d+_(?P<id>\d+)\.csv", regex=True),
    FileRole("dynamic_shape_info", "legacy", r"dynamic_shape_info_(?P<id>\d+)\.json", regex=True),
    FileRole("profiler_info", "metadata", r"profiler_info_(?P<id>\d+)\.json", regex=True),
    FileRole("memory_usage_summary", "legacy", r"memory_usage_summary_(?P<id>\d+)\.json", regex=True),
    FileRole("memory_usage_details", "legacy", r"memory_usage_details_(?P<id>\d+)\.json", regex=True),
    FileRole("pynative_op_type", "legacy", r"pynative_op_intermediate_(?P<id>\d+)_type\.csv", regex=True),
    FileRole("pynative_op_detail", "legacy", r"pynative_op_intermediate_(?P<id>\d+)_detail\.csv", regex=True),
    # MindData (raw engine output and MindSpore's derived files)
    FileRole("pipeline_profiling", "minddata", r"pipeline_profiling_(?P<id>\d+)\.json", regex=True),
    FileRole("minddata_cpu_utilization", "minddata", r"minddata_cpu_utilization_(?P<id>\d+)\.json", regex=True),
    FileRole("device_queue", "minddata", r"device_queue_profiling_(?P<id>\d+)\.txt", regex=True),
    FileRole("dataset_iterator", "minddata", r"dataset_iterator_profiling_(?P<id>\d+)\.txt", regex=True),
    FileRole("minddata_aicpu", "minddata", r"minddata_aicpu_(?P<id>\d+)\.txt", regex=True),
    FileRole("minddata_getnext", "minddata", r"minddata_getnext_profiling_(?P<id>\d+)\.txt", regex=True),
    FileRole("minddata_pipeline_raw", "minddata", r"minddata_pipeline_raw_(?P<id>\d+)\.csv", regex=True),
    FileRole("minddata_pipeline_summary_json", "minddata", r"minddata_pipeline_summary_(?P<id>\d+)\.json", regex=True),
    FileRole("minddata_pipeline_summary_csv", "minddata", r"minddata_pipeline_summary_(?P<id>\d+)\.csv", regex=True),
    # database exports (SQLite): MindSpore / torch_npu per rank; CANN msprof (the number is no rank)
    FileRole("profiler_db", "database", r"ascend_(?:mindspore|pytorch)_profiler(?:_(?P<id>\d+))?\.db", regex=True),
    FileRole("msprof_db", "database", r"msprof_[\d_]+\.db", regex=True),
    # files without an id: new-format deliverables (ASCEND_PROFILER_OUTPUT), metadata, cluster output
    FileRole("step_trace_point_info", "legacy", "step_trace_point_info.json"),
    FileRole("profiler_info", "metadata", "profiler_info.json"),
    FileRole("profiler_metadata", "metadata", "profiler_metadata.json"),
    FileRole("kernel_details", "new_format", "kernel_details.csv"),
    FileRole("op_statistic", "new_format", "op_statistic.csv"),
    FileRole("step_trace_time", "new_format", "step_trace_time.csv"),
    FileRole("trace_view", "new_format", "trace_view.json"),
    FileRole("memory_record", "new_format", "memory_record.csv"),
    FileRole("operator_memory", "new_format", "operator_memory.csv"),
    FileRole("npu_module_mem", "new_format", "npu_module_mem.csv"),
    FileRole("communication", "new_format", "communication.json"),
    FileRole("communication_matrix", "new_format", "communication_matrix.json"),
    FileRole("dataset", "new_format", "dataset.csv"),
    FileRole("api_statistic", "new_format", "api_statistic.csv"),
    FileRole("operator_details", "new_format", "operator_details.csv"),
    FileRole("l2_cache", "new_format", "l2_cache.csv"),
    FileRole("static_op_mem", "new_format", "static_op_mem.csv"),
    FileRole("data_preprocess", "new_format", "data_preprocess.csv"),
    FileRole("communication_group", "cluster", "communication_group.json"),
    FileRole("analysis_db", "database", "analysis.db"),
    FileRole("analysis_db", "database", "communication_analyzer.db"),  # MindSpore's name for the same tables
    FileRole("cluster_analysis_db", "cluster", "cluster_analysis.db"),  # msprof-analyze's cluster output in db mode
    FileRole("cluster_step_trace_time", "cluster", "cluster_step_trace_time.csv"),
    FileRole("cluster_communication", "cluster", "cluster_communication.json"),
    FileRole("cluster_communication_matrix", "cluster", "cluster_communication_matrix.json"),
)

ID_ROLES: list[tuple[str, re.Pattern]] = [(r.role, re.compile(r.name)) for r in FILE_ROLES
                                          if r.regex and "(?P<id>" in r.name]
NOID_ROLES: list[tuple[str, re.Pattern]] = [(r.role, re.compile(r.name)) for r in FILE_ROLES
                                            if r.regex and "(?P<id>" not in r.name]
PLAIN_ROLES: dict[str, str] = {r.name: r.role for r in FILE_ROLES if not r.regex}


def roles_of(family: str) -> frozenset[str]:
    """The roles of one family of `FILE_ROLES`."""
    return frozenset(r.role for r in FILE_ROLES if r.family == family)


MINDDATA_ROLES = roles_of("minddata")
NEW_FORMAT_ROLES = roles_of("new_format")
DB_ROLES = roles_of("database")
METADATA_ROLES = roles_of("metadata")  # describe a run but hold no measurements: alone, the folder is "metadata"
CLUSTER_ROLES = roles_of("cluster")
LEGACY_ROLES = roles_of("legacy")  # say "this folder is a legacy (MindInsight-era) profiler directory"
# ASCEND_PROFILER_OUTPUT files without a parser (listed, read by nothing)
UNRECOGNISED = "unrecognised"

# Sub-folders that make their parent one profiler run folder, whatever its name (ASCEND_PROFILER_OUTPUT
# holds the deliverables, FRAMEWORK the framework's raw files).
RUN_SUBDIRS = ("ASCEND_PROFILER_OUTPUT", "FRAMEWORK")
SKIP_DIRS = {"logs", ".git", "node_modules", "__pycache__", ".ipynb_checkpoints", ".venv", "venv"}
CANN_TIMELINE = re.compile(r"(?P<kind>msprof|hccl|step_trace|task_time)_(?P<rest>[\d_]+)\.json")
ASCEND_MS = re.compile(r".+_ascend_(?:ms|pt)$")  # MindSpore (ms) and the Ascend PyTorch profiler (pt)
PROF_DIR = re.compile(r"PROF_\d+_\d+_[A-Za-z0-9]+$")

# Bounds that keep discovery responsive on a huge, unrelated tree (a home directory, a dataset folder).
MAX_DEPTH = 8
MAX_ENTRIES = 200_000
MAX_SECONDS = 20.0


@dataclasses.dataclass
class RunFiles:
    """The files of one device/rank of one profiling session.

    ``generation`` is one of "legacy", "mindspore2" (text export of ``*_ascend_ms`` / ``*_ascend_pt``),
    "database" (only the SQLite export), "minddata", "cann", "cluster_analysis", "trace", "metadata" (only
    profiler_info / profiler_metadata: nothing measured was found, see ``info["unparsed"]``);
    ``device`` the id as written in file names ("0", "1", "10") or the rank; ``root`` the folder the run
    lives in; ``files`` maps a role to its paths (usually one; CANN timelines have many); ``session``
    tells apart several sessions of the same rank (the ``*_ascend_ms`` folder name).
    """

    generation: str
    root: Path
    device: str
    files: dict[str, list[Path]] = dataclasses.field(default_factory=dict)
    session: str = ""
    info: dict = dataclasses.field(default_factory=dict)

    def add(self, role: str, path: Path) -> None:
        self.files.setdefault(role, []).append(path)

    def get(self, role: str) -> Path | None:
        """The single file playing ``role`` (the first, in sorted order), or None."""
        paths = self.files.get(role)
        return sorted(paths, key=_natural_key)[0] if paths else None

    def all(self, role: str) -> list[Path]:
        return sorted(self.files.get(role, []), key=_natural_key)

    def has(self, *roles: str) -> bool:
        return any(r in self.files for r in roles)


def rank_of(run: RunFiles) -> str:
    """The run's rank id where a file says it, else its device id."""
    return str(run.info.get("rank_id", run.device))


def session_order(run: RunFiles):
    """Sessions of one rank in the order they were recorded: the UTC timestamp in a ``*_ascend_ms`` /
    ``*_ascend_pt`` / ``PROF_*`` folder name (17 or 14 digits) where there is one, else the name."""
    m = re.search(r"(?<!\d)(\d{17}|\d{14})(?!\d)", run.session or "")
    return (0, m.group(1), run.session) if m else (1, "", run.session or str(run.root))


def run_keys(runs: list[RunFiles]) -> list[str]:
    """The key of each run (same order as ``runs``): its rank id for the first session of that rank,
    ``"<rank>@<session>"`` for later sessions (schedule windows, repeated start/stop). These are the keys
    of ``devices_found``, ``Cluster[...]``, ``load(device=...)`` and ``--device``."""
    order = sorted(range(len(runs)), key=lambda i: (_id_sort(rank_of(runs[i])), session_order(runs[i])))
    keys = [""] * len(runs)
    name = lambda r: r.session or r.root.name  # noqa: E731
    # the same session folder name under several parents (dynamic profiling's rank0_start2_stop5/...):
    # those keys name the parent too
    repeated = collections.Counter((rank_of(r), name(r)) for r in runs)
    seen: set[str] = set()
    for i in order:
        run, rank = runs[i], rank_of(runs[i])
        if rank not in seen:
            key = rank
        elif repeated[(rank, name(run))] > 1:
            key = f"{rank}@{run.root.parent.name}/{name(run)}"
        else:
            key = f"{rank}@{name(run)}"
        keys[i] = key
        seen.update((rank, key))
    return keys


def _id_sort(d: str):
    return (0, int(d)) if str(d).isdigit() else (1, str(d))


def _natural_key(p: Path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))]


def classify(name: str) -> tuple[str, str | None] | None:
    """(role, id) for a file name nbprofiler knows, else None. ``id`` is None for id-less files."""
    if name in PLAIN_ROLES:
        return PLAIN_ROLES[name], None
    for role, rx in ID_ROLES:
        m = rx.fullmatch(name)
        if m:
            return role, m.group("id")
    for role, rx in NOID_ROLES:
        if rx.fullmatch(name):
            return role, None
    return None


class _Walker:
    """Bounded directory walk: depth, entry count and time limits, unrelated folders skipped."""

    def __init__(self):
        self.entries = 0
        self.deadline = time.monotonic() + MAX_SECONDS
        self.truncated = False
        self.raw_cann: list[Path] = []  # PROF_* folders of raw, never-parsed CANN data
        self.skipped: list[tuple[Path, str]] = []  # entries seen but not readable as files or folders

    def scandir(self, path: Path) -> list[os.DirEntry]:
        if self.entries > MAX_ENTRIES or time.monotonic() > self.deadline:
            self.truncated = True
            return []
        try:
            with os.scandir(path) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError as err:
            # an unreadable folder (permissions, a vanished mount): whatever it holds is not read, say so
            self.skipped.append((path, f"folder cannot be listed ({err.strerror or err}); its files were not read"))
            return []
        self.entries += len(found)
        out = []
        for e in found:
            try:
                # DirEntry caches what these find; a symlink loop or a file that vanished raises here
                is_dir, is_file = e.is_dir(), e.is_file()
            except OSError as err:
                if e.is_symlink() or classify(e.name):
                    self.skipped.append((Path(e.path), f"cannot be read ({err.strerror or err}); skipped"))
                continue
            if not is_dir and not is_file and classify(e.name):
                # a FIFO, a device or a socket named like a profiler file: reading it could block forever
                self.skipped.append((Path(e.path), "named like a profiler file but not a regular file; skipped"))
                continue
            out.append(e)
        return out


def discover(path: str | os.PathLike) -> list[RunFiles]:
    """Every run under ``path`` (a folder or a single trace JSON file). Raises `NoProfilerDataError`."""
    path = Path(path)
    if not path.exists():
        raise NoProfilerDataError(path, "no such file or directory")
    if path.is_file():
        return [_single_file(path)]
    walker = _Walker()
    runs: list[RunFiles] = []
    _walk(path, 0, walker, runs)
    for where, why in walker.skipped:
        warnings.warn(ProfilerDataWarning(f"{where}: {why}"), stacklevel=2)
        # and a problem entry in every run the entry belongs to (its folder or one above it)
        for run in runs:
            if Path(where).is_relative_to(run.root):
                run.info.setdefault("skipped", []).append((str(where), why))
    if not runs and walker.raw_cann:
        raise NoProfilerDataError(path, "; ".join(unparsed_message(p, True) for p in walker.raw_cann))
    if not runs:
        looked = ("step_trace_raw_*_detail_time.csv, aicore_intermediate_*, *_ascend_ms/ folders, "
                  "ASCEND_PROFILER_OUTPUT files (kernel_details.csv, trace_view.json, step_trace_time.csv), "
                  "FRAMEWORK/cpu_op_*, MindData files (pipeline_profiling_*.json, minddata_pipeline_raw_*.csv, "
                  "dataset_iterator_profiling_*.txt, device_queue_profiling_*.txt), CANN PROF_*/device_N/timeline, "
                  "cluster_analysis_output (cluster_step_trace_time.csv), *_timeline_display_*.json")
        extra = " (the search stopped early: the tree is very large; point at a smaller folder)" \
            if walker.truncated else ""
        raise NoProfilerDataError(path, f"no profiler data found{extra}; looked for {looked}")
    return runs


def _single_file(path: Path) -> RunFiles:
    c = classify(path.name)
    if path.suffix.lower() == ".json" and (c is None or c[0] in ("timeline", "trace_view")):
        run = RunFiles("trace", path.parent, c[1] if c and c[1] else "0", session=path.name)
        run.add(c[0] if c else "trace_view", path)
        return run
    if c is None:
        raise NoProfilerDataError(path, "not a profiler file nbprofiler knows (expected a trace JSON file, "
                                        "or a folder holding profiler output)")
    role, dev = c
    run = RunFiles(_generation_of({role}), path.parent, dev or "0", session=path.name)
    run.add(role, path)
    return run


def run_folder(path: str | os.PathLike) -> Path:
    """The folder of the profiler run that holds the file ``path``: its outermost ``*_ascend_ms`` /
    ``*_ascend_pt`` / ``PROF_*`` ancestor, else the folder above an ``ASCEND_PROFILER_OUTPUT`` or ``FRAMEWORK``
    folder holding it, else the file's own folder."""
    path = Path(path)
    found = path.parent
    if found.name in ("ASCEND_PROFILER_OUTPUT", "FRAMEWORK"):
        found = found.parent
    for folder in path.parents:
        if ASCEND_MS.match(folder.name) or PROF_DIR.match(folder.name):
            found = folder
    return found


def in_profiler_output(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is, or lies inside, a profiler run: it or an ancestor is a ``*_ascend_ms`` /
    ``*_ascend_pt`` / ``PROF_*`` / ``ASCEND_PROFILER_OUTPUT`` / ``FRAMEWORK`` folder, or it or its parent
    holds such a sub-folder or files a profiler names (`classify`; a flat legacy profiler folder).
    Bounded: two folders' entries are read, at most `_PROTECT_SCAN` each."""
    folder = Path(folder)
    if any(ASCEND_MS.match(f.name) or PROF_DIR.match(f.name) or f.name in RUN_SUBDIRS
           for f in (folder, *folder.parents)):
        return True
    for f in (folder, folder.parent):
        try:
            with os.scandir(f) as it:
                for i, e in enumerate(it):
                    if i >= _PROTECT_SCAN:
                        break
                    if (e.name in RUN_SUBDIRS and e.is_dir()) or (e.is_file() and classify(e.name)):
                        return True
        except OSError:  # a folder not made yet, or not readable: nothing there to protect
            continue
    return False


_PROTECT_SCAN = 5000


def _walk(folder: Path, depth: int, walker: _Walker, runs: list[RunFiles]) -> None:
    entries = walker.scandir(folder)
    if ASCEND_MS.match(folder.name):
        runs.extend(_ascend_ms_run(folder, entries, walker))
        return
    if _renamed_run_folder(entries):
        # a renamed run folder (``test_rank_1/``): the profiler's layout without its *_ascend_ms/_pt name.
        # One run, ranked by its own metadata; other sub-folders may still hold runs of their own.
        runs.extend(_ascend_ms_run(folder, entries, walker))
        entries = [e for e in entries if e.is_dir() and e.name not in RUN_SUBDIRS and not PROF_DIR.match(e.name)]
    if PROF_DIR.match(folder.name):
        found = _cann_runs(folder, entries, walker)
        runs.extend(found)
        if not found and raw_cann(folder, walker):
            walker.raw_cann.append(folder)
        return
    flat: list[tuple[str, str | None, Path]] = []
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            if e.name in SKIP_DIRS or e.name.startswith(".") or depth >= MAX_DEPTH:
                continue
            _walk(Path(e.path), depth + 1, walker, runs)
        elif e.is_file():
            c = classify(e.name)
            if c:
                flat.append((c[0], c[1], Path(e.path)))
    if flat:
        runs.extend(_flat_runs(folder, flat))


def _renamed_run_folder(entries: list[os.DirEntry]) -> bool:
    """A folder laid out like one ``*_ascend_ms`` run (an ``ASCEND_PROFILER_OUTPUT`` or ``FRAMEWORK``
    sub-folder) whose own files name at most one id: a flat folder of several devices' files stays
    grouped by id."""
    if not any(e.is_dir() and e.name in RUN_SUBDIRS for e in entries):
        return False
    ids = {c[1] for e in entries if e.is_file() and (c := classify(e.name)) and c[1] is not None}
    return len(ids) <= 1


def _generation_of(roles: set[str]) -> str:
    """What a set of file roles really is (never "minddata" without a MindData file)."""
    if roles & CLUSTER_ROLES and not roles & (LEGACY_ROLES | NEW_FORMAT_ROLES):
        return "cluster_analysis"
    if roles & LEGACY_ROLES:
        return "legacy"
    if roles & NEW_FORMAT_ROLES:
        return "mindspore2"
    if roles & DB_ROLES:
        return "database"
    if roles & MINDDATA_ROLES:
        return "minddata"
    return "metadata"


def _ascend_generation(roles: set[str]) -> str:
    """A ``*_ascend_ms``/``*_ascend_pt`` folder: its text export, else its database export, else (CANN
    timelines merged in) "cann", else nothing measured ("metadata"). FRAMEWORK/cpu_* files (a CPU run)
    count as the text export."""
    if roles & (NEW_FORMAT_ROLES | LEGACY_ROLES | MINDDATA_ROLES):
        return "mindspore2"
    if roles & DB_ROLES:
        return "database"
    if roles & {"cann_timeline", "cann_step_trace", "cann_hccl", "cann_task_time"}:
        return "cann"
    return "metadata"


def _flat_runs(folder: Path, flat: list[tuple[str, str | None, Path]]) -> list[RunFiles]:
    """Group a flat folder's files by id; id-less files belong to every id (or to id "0" alone)."""
    ids = sorted({i for _, i, _ in flat if i is not None}, key=int)
    plain = [(r, p) for r, i, p in flat if i is None]
    plain_roles = {r for r, _ in plain}
    if plain_roles & CLUSTER_ROLES and not ids:
        return _cluster_analysis_runs(folder, plain)
    runs = []
    for dev in ids or [_enclosing_rank(folder) or "0"]:
        roles = [(r, p) for r, i, p in flat if i == dev] + plain
        run = RunFiles("", folder, dev)
        for r, p in roles:
            run.add(r, p)
        run.generation = _generation_of(set(run.files))
        if run.generation == "metadata":
            run.info["unparsed"] = unparsed_message(folder, False)
        runs.append(run)
    return runs


def _enclosing_rank(folder: Path) -> str | None:
    """For an ``ASCEND_PROFILER_OUTPUT`` / ``FRAMEWORK`` folder loaded on its own: the rank its run folder's
    metadata (``../profiler_info_{N}.json``, ``../profiler_metadata.json``) names, else None."""
    if folder.name not in RUN_SUBDIRS:
        return None
    meta = RunFiles("", folder.parent, "")
    try:
        with os.scandir(folder.parent) as it:
            for e in it:
                c = classify(e.name)
                if c and c[0] in METADATA_ROLES and e.is_file():
                    meta.add(c[0], Path(e.path))
    except OSError:
        return None
    return written_rank(meta)


def _cluster_analysis_runs(folder: Path, plain: list[tuple[str, Path]]) -> list[RunFiles]:
    """One run per rank listed in cluster_step_trace_time.csv (read lazily later); here one run, rank "*"."""
    run = RunFiles("cluster_analysis", folder, "*")
    for r, p in plain:
        run.add(r, p)
    return [run]


def _ascend_ms_run(folder: Path, entries: list[os.DirEntry], walker: _Walker) -> list[RunFiles]:
    run = RunFiles("mindspore2", folder, "", session=folder.name)
    ids: list[str] = []

    def take(e: os.DirEntry, deliverable: bool = False):
        c = classify(e.name)
        if c:
            run.add(c[0], Path(e.path))
            if c[1] is not None:
                ids.append(c[1])
        elif deliverable and e.name.lower().endswith((".csv", ".json", ".db")):
            # a deliverable nbprofiler has no parser for (hbm.csv, pcie.csv, ...): listed in prof.files
            # as feeding no frame, never silently ignored
            run.add(UNRECOGNISED, Path(e.path))

    for e in entries:
        if e.is_file():
            take(e)
        elif e.is_dir() and e.name in ("ASCEND_PROFILER_OUTPUT", "FRAMEWORK"):
            for sub in walker.scandir(Path(e.path)):
                if sub.is_file():
                    take(sub, deliverable=e.name == "ASCEND_PROFILER_OUTPUT")
        elif e.is_dir() and PROF_DIR.match(e.name):
            if raw_cann(Path(e.path), walker):
                run.info["raw_cann"] = str(e.path)
            for cann in _cann_runs(Path(e.path), walker.scandir(Path(e.path)), walker):
                for role, paths in cann.files.items():
                    for p in paths:
                        run.add(role, p)
                run.info.setdefault("cann_device", cann.device)
    run.generation = _ascend_generation(set(run.files))
    if run.generation == "metadata":
        run.info["unparsed"] = unparsed_message(folder, bool(run.info.get("raw_cann")))
    run.device = written_rank(run) or (sorted(set(ids), key=int)[0] if ids else run.info.get("cann_device", "0"))
    if not run.files:
        return []
    return [run]


def written_rank(run: RunFiles) -> str | None:
    """The rank the profiler wrote down for a run folder, whatever the folder is called, first found of:
    ``profiler_info_{N}.json``'s ``rank_id`` (else its ``N``), ``profiler_metadata.json`` (``rank_id`` or
    torch_npu's ``distributed_args.rank``), the database export's name (``ascend_*_profiler_{N}.db``) or
    its RANK_DEVICE_MAP. None when no file says (then the ids in other file names decide)."""
    info_path = run.get("profiler_info")
    if info_path is not None:
        rank = _json_rank(info_path)
        if rank is not None:
            return rank
        m = re.fullmatch(r"profiler_info_(\d+)\.json", info_path.name)
        if m:
            return m.group(1)
    if run.get("profiler_metadata") is not None:
        rank = _metadata_rank(run.get("profiler_metadata"))
        if rank is not None:
            return rank
    for db_path in run.all("profiler_db"):
        c = classify(db_path.name)
        if c and c[1] is not None:
            return c[1]
        rank = _db_rank(db_path)
        if rank is not None:
            return rank
    return None


def _json_rank(path: Path) -> str | None:
    """``rank_id`` of a small JSON object (profiler_info writes it as an int or a string; -1 is no rank)."""
    obj = _small_json(path)
    value = obj.get("rank_id") if isinstance(obj, dict) else None
    if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).strip().isdigit():
        return str(int(value))
    return None


def _small_json(path: Path):
    try:
        if path.stat().st_size > 1 << 20:
            return None
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def _db_rank(path: Path) -> str | None:
    """RANK_DEVICE_MAP's rank of a database export whose name carries none (read only, no journal)."""
    import sqlite3
    import urllib.parse
    try:
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"
        con = sqlite3.connect(uri, uri=True)
        try:
            row = con.execute("SELECT rankId FROM RANK_DEVICE_MAP LIMIT 1").fetchone()
        finally:
            con.close()
    except (sqlite3.Error, OSError, ValueError):
        return None
    if row and isinstance(row[0], int) and row[0] >= 0:
        return str(row[0])
    return None


def _metadata_rank(path: Path) -> str | None:
    """The rank a ``profiler_metadata.json`` names (``rank_id``, or torch_npu's ``distributed_args.rank``),
    for a session folder without ``profiler_info_{rank}.json``. Small files only; a broken one says nothing
    here (the loader reports it)."""
    obj = _small_json(path)
    if not isinstance(obj, dict):
        return None
    for value in (obj.get("rank_id"), (obj.get("distributed_args") or {}).get("rank")
                  if isinstance(obj.get("distributed_args"), dict) else None):
        if isinstance(value, (int, str)) and str(value).isdigit():
            return str(int(value))
    return None


def raw_cann(folder: Path, walker: _Walker) -> bool:
    """True for a ``PROF_*`` folder holding only raw collection data (``device_*/data``, ``host/data``):
    msprof never parsed it, so there is no timeline, summary, ``mindstudio_profiler_output`` or database."""
    raw = False
    for e in walker.scandir(folder):
        if not e.is_dir():
            if NOID_ROLES[0][1].fullmatch(e.name):
                return False
            continue
        if e.name == "mindstudio_profiler_output":
            return False
        if re.fullmatch(r"device_\d+|host", e.name):
            names = {x.name for x in walker.scandir(Path(e.path))}
            if names & {"timeline", "summary", "sqlite"}:
                return False
            raw = raw or "data" in names
    return raw


def unparsed_message(folder: Path, raw: bool) -> str:
    """What a folder without measurements is, and the exact command that turns it into profiler output."""
    if ASCEND_MS.match(folder.name):
        call = (f"python -c \"from torch_npu.profiler.profiler import analyse; analyse('{folder}')\""
                if folder.name.endswith("_ascend_pt") else
                f"python -c \"from mindspore import Profiler; Profiler.offline_analyse('{folder}')\"")
        what = ("raw CANN data (PROF_*/device_*/data) that was never analysed" if raw
                else "only profiler_info/profiler_metadata, no measurements")
        return (f"{folder} holds {what}: the profiler's analysis did not run (killed, or "
                f"analyse=False). Parse it with: {call}")
    if not raw:
        return (f"{folder} holds only profiler_info/profiler_metadata files, no measurements: the profiler "
                "output (ASCEND_PROFILER_OUTPUT, or a *_ascend_ms / *_ascend_pt folder) is elsewhere")
    return (f"{folder} is raw CANN profiling data (device_*/data) that msprof never parsed: no timeline, "
            f"summary or database yet. Parse and export it with: msprof --export=on --output={folder} "
            "(msprof is in the CANN toolkit's tools/profiler/bin; older CANN: run msprof --parse=on "
            f"--output={folder} first)")


def _cann_runs(folder: Path, entries: list[os.DirEntry], walker: _Walker) -> list[RunFiles]:
    """A CANN ``PROF_*`` folder: one run per ``device_N`` subfolder (its rank from info.json when set);
    an ``msprof_*.db`` database beside them belongs to every device (or is a run of its own)."""
    runs = []
    dbs = [Path(e.path) for e in entries if e.is_file() and NOID_ROLES[0][1].fullmatch(e.name)]
    # a device folder with only its info files (raw data not exported yet) is no run
    runs.extend(r for r in _cann_device_runs(folder, entries, walker)
                if set(r.files) - {"cann_info", "cann_start_info", "cann_end_info"})
    for db in dbs:
        for run in runs:
            run.add("msprof_db", db)
    if dbs and not runs:
        run = RunFiles("database", folder, "0", session=folder.name)
        for db in dbs:
            run.add("msprof_db", db)
        runs.append(run)
    return runs


def _cann_device_runs(folder: Path, entries: list[os.DirEntry], walker: _Walker) -> list[RunFiles]:
    runs = []
    for e in entries:
        m = re.fullmatch(r"device_(\d+)", e.name)
        if not (m and e.is_dir()):
            if e.is_dir() and e.name == "mindstudio_profiler_output":
                run = RunFiles("cann", folder, "0", session=folder.name)
                for sub in walker.scandir(Path(e.path)):
                    if sub.is_file() and sub.name.endswith(".json"):
                        run.add("cann_timeline" if sub.name.startswith("msprof") else
                                "cann_step_trace" if sub.name.startswith("step_trace") else "cann_other",
                                Path(sub.path))
                if run.files:
                    runs.append(run)
            continue
        dev = m.group(1)
        run = RunFiles("cann", Path(e.path), dev, session=folder.name)
        for sub in walker.scandir(Path(e.path)):
            name = sub.name
            if sub.is_file():
                if name.endswith(".done"):
                    continue
                if name.startswith("info.json"):
                    run.add("cann_info", Path(sub.path))
                elif name.startswith("start_info"):
                    run.add("cann_start_info", Path(sub.path))
                elif name.startswith("end_info"):
                    run.add("cann_end_info", Path(sub.path))
            elif sub.is_dir() and name == "timeline":
                for t in walker.scandir(Path(sub.path)):
                    tm = CANN_TIMELINE.fullmatch(t.name)
                    if tm and t.is_file():
                        role = {"msprof": "cann_timeline", "hccl": "cann_hccl", "task_time": "cann_task_time",
                                "step_trace": "cann_step_trace"}[tm.group("kind")]
                        run.add(role, Path(t.path))
        info = run.get("cann_info")
        if info is not None:
            try:
                if info.stat().st_size > 1 << 20:  # an info.json is a few KB: a huge one is not read here
                    raise ValueError("too large")
                rank = json.loads(info.read_text(encoding="utf-8", errors="replace")).get("rank_id")
                if isinstance(rank, int) and rank >= 0:
                    run.info["rank_id"] = str(rank)
            except (OSError, ValueError, AttributeError):
                pass  # the loader reports a broken info.json; discovery keeps the device id
        if run.files:
            runs.append(run)
    return runs
