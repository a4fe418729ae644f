"""`Profile` (one device/rank of one session) and `Cluster` (many): the public data model.

A `Profile` holds the `RunFiles` found by discovery and turns them into pandas DataFrames on first
access (lazily, cached per object). Every frame is declared in `nbprofiler.schema` (columns, dtypes,
units, clock, sources) and built by `builder_of` its name (`nbprofiler.model.build`: the first of the frame's
sources the run has, or a join of other frames); the result is cast to the declared dtypes. A
builder raises `ProfilerDataError` for a file it cannot read; the Profile records it in ``problems``,
warns, and returns the declared empty frame, so "why is this view empty?" is always answered by
``prof.problems`` and ``prof.files``.

Units: every time column carries its unit in its name (``_us``, ``_ms``); each frame's clock is stated
in its schema entry (most count from ``origin_us``, absolute microseconds of the timeline's start).
"""
from __future__ import annotations

import dataclasses
import warnings
from functools import partial
from pathlib import Path
from typing import Callable

import pandas as pd

from . import build
from .. import schema
from ..errors import Problem, ProfilerDataError, ProfilerDataWarning
from ..io import ascend_ms
from ..io.discover import RunFiles
from .parallel import MIN_RANKS_FOR_PROCESSES


def builder_of(name: str) -> Callable:
    """The function that builds frame ``name`` of a Profile (`nbprofiler.model.build.builder`)."""
    return build.builder(name)


def _frame(spec: schema.FrameSpec):
    """A cached property for a declared frame: built by `builder_of` its name, cast to the declared
    dtypes, load errors turned into problems (and the declared empty frame)."""
    builder = builder_of(spec.name)

    def getter(self: "Profile") -> pd.DataFrame:
        if spec.name not in self._cache:
            self._cache[spec.name] = self._build(builder, spec)
        return self._cache[spec.name]

    getter.__doc__ = spec.doc()
    return property(getter)


class Profile:
    """One device/rank of one profiling session. Create with `nbprofiler.load`.

    Metadata: ``generation`` ("legacy", "mindspore2", "database", "minddata", "cann", "cluster_analysis",
    "trace", "metadata"), ``device`` (the id as in the file names), ``rank`` (the rank id where known, else
    the device id), ``root`` (the folder), ``session`` (the ``*_ascend_ms`` folder name or ""), ``key`` (how
    ``devices_found``, ``load(device=...)`` and ``--device`` name it: the rank, or ``"<rank>@<session>"``
    for a later session of the same rank), ``other_sessions`` (keys of the rank's other sessions),
    ``windows`` (key -> `Profile` of every session of this rank, this one included), ``origin_us`` (absolute
    time that relative ``start_*`` columns count from), ``files`` (what was found), ``problems`` (what
    failed). Frames: `nbprofiler.schema.FRAMES`, each property's docstring and docs/data-model.md's
    table.
    """

    def __init__(self, run: RunFiles, source: str | Path | None = None, devices_found: list[str] | None = None,
                 key: str | None = None):
        self.run = run
        self.source = str(source if source is not None else run.root)
        self.generation = run.generation
        self.device = run.device
        self.rank = run.info.get("rank_id", run.device)
        self.root = run.root
        self.session = run.session
        self.key = key or str(self.rank)
        self.devices_found = devices_found or [self.key]
        self._cache: dict[str, object] = {}
        self._problems: list[Problem] = []
        self._windows: dict[str, "Profile"] | None = None  # set by `load`: the rank's sessions, shared
        if run.info.get("unparsed"):
            self._problems.append(Problem(file=str(run.root), error=f"NoProfilerDataError: {run.info['unparsed']}"))
        for where, why in run.info.get("skipped", []):  # seen by discovery, not readable
            self._problems.append(Problem(file=where, error=why, kind="warning"))

    @property
    def other_sessions(self) -> list[str]:
        """Keys in ``devices_found`` of this rank's other sessions (schedule windows, repeated runs)."""
        mine = str(self.rank)
        return [k for k in self.devices_found if k != self.key and k.split("@", 1)[0] == mine]

    @property
    def windows(self) -> dict[str, "Profile"]:
        """This rank's sessions (schedule windows, repeated start/stop), key -> `Profile`, in recording
        order, this profile included: ``{self.key: self}`` when the rank has one session. ``show()`` puts a
        picker over them when there are several."""
        return dict(self._windows) if self._windows and self.key in self._windows else {self.key: self}

    # -- plumbing -----------------------------------------------------------------------------------
    def _build(self, builder, spec: schema.FrameSpec):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ProfilerDataWarning)
                out = builder(self)
            for w in caught:
                err = getattr(w.message, "error", None)
                if isinstance(err, ProfilerDataError):
                    self._note(Problem.from_error(err, kind="warning"))
                else:
                    self._note(Problem(file=str(self.root), error=str(w.message), kind="warning"))
                warnings.warn(w.message, ProfilerDataWarning, stacklevel=3)
        except ProfilerDataError as err:
            self._note(Problem.from_error(err))
            warnings.warn(f"{err} (skipped; see prof.problems)", ProfilerDataWarning, stacklevel=3)
            out = None
        return spec.empty() if out is None else spec.conform(out)

    def _note(self, problem: Problem) -> None:
        if problem not in self._problems:
            self._problems.append(problem)

    def cached(self, key: str, fn: Callable[[], object]):
        """Memoise an analysis result on this object (analyses are pure; frames never change)."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    @property
    def problems(self) -> list[Problem]:
        """Files that failed to load (``kind="error"``) or loaded with data skipped (``"warning"``)."""
        return list(self._problems)

    @property
    def files(self) -> pd.DataFrame:
        """What discovery found: one row per file. Columns: role (str), path (str), size_bytes (int),
        feeds (str: the frames the file is read into, comma-separated; "" for a file no frame reads)."""
        rows = []
        # a database beside the text export only feeds the frames no text file gives
        feeds_of = schema.feeds()
        from_text = {f for r in self.run.files if r not in schema.DB_FALLBACK_ROLES for f in feeds_of.get(r, ())}
        for role, paths in sorted(self.run.files.items()):
            feeds = [f for f in feeds_of.get(role, ()) if role not in schema.DB_FALLBACK_ROLES or f not in from_text]
            for p in sorted(paths):
                try:
                    size = p.stat().st_size
                except OSError:
                    size = -1
                rows.append({"role": role, "path": str(p), "size_bytes": size, "feeds": ", ".join(feeds)})
        return pd.DataFrame(rows, columns=["role", "path", "size_bytes", "feeds"])

    def has(self, *roles: str) -> bool:
        """True if any file with one of these roles was found."""
        return self.run.has(*roles)

    @property
    def origin_us(self) -> float:
        """Absolute time (us) that every relative ``start_*`` column counts from (0.0 if unknown)."""
        return self.cached("origin_us", lambda: build.origin_us(self))

    @property
    def info(self) -> dict:
        """Run metadata files merged into one dict: profiler_info, profiler_metadata, CANN info.json."""
        return self.cached("info", lambda: ascend_ms.run_info(self.run))

    def load_all(self) -> "Profile":
        """Parse every frame now (otherwise each is parsed on first access). Shows a progress bar."""
        from tqdm.auto import tqdm
        names = [n for n, v in vars(Profile).items() if isinstance(v, property) and n in FRAME_NAMES]
        for n in tqdm(names, desc=f"loading {Path(self.source).name}", leave=False, disable=len(names) < 2):
            getattr(self, n)
        return self

    # -- records and derived lists (the frames are declared in nbprofiler.schema and attached below) --
    @property
    def step_trace_average(self) -> dict | None:
        """The average MindInsight shows: the step-trace file's own average row as written (ms, dict of
        ``<stage>_ms`` and ``total_ms``), or None when the source has no such row."""
        return self.step_trace.attrs.get("file_average")

    @property
    def step_stages(self) -> list[str]:
        """The columns of ``step_trace`` that stack up to ``total_ms``, in display order."""
        return schema.step_stages(self.step_trace)

    @property
    def step_point_info(self) -> dict | list | None:
        """FP start / BP end anchor operators (``{"fp_start": ..., "bp_end": ...}``), a per-step list, or None."""
        return self.cached("step_point_info", lambda: build.build("step_point_info", self))

    @property
    def op_kinds(self) -> list[str]:
        """Device kinds with operator data, in display order (ai_core, ai_cpu, cpu, gpu, npu)."""
        kinds = set(self.op_types["kind"].dropna()) | set(self.ops["kind"].dropna())
        return [k for k in schema.OP_KINDS if k in kinds]

    @property
    def minddata_summary(self) -> dict | None:
        """MindSpore's own ``minddata_pipeline_summary_*`` (JSON preferred, else CSV) as a dict, or None."""
        return self.cached("minddata_summary", lambda: self._safe("minddata_summary"))

    @property
    def timeline_summary(self) -> dict | None:
        """The writer's ``*_timeline_summary_*.json`` as a dict (total_time in us), or None."""
        return self.cached("timeline_summary", lambda: self._safe("timeline_summary"))

    @property
    def flops_summary(self) -> dict | None:
        """``flops_summary_*.json`` as written (MFLOPs / GFLOPS / percent), or None."""
        return self.cached("flops_summary", lambda: self._safe("flops_summary"))

    @property
    def dispatch(self):
        """Where the device waited for the host: its tasks joined to the host calls that launched them, the
        idle the host caused per step and the ops responsible (`nbprofiler.analysis.dispatch.Dispatch`:
        ``.tasks`` is the ``dispatch`` frame, ``.steps``, ``.ops``, ``.sentence()``; ``.why`` says why not
        where the run has no device tasks joined to launches)."""
        from ..analysis.dispatch import profile_dispatch
        return profile_dispatch(self)

    def _safe(self, name: str):
        try:
            return build.build(name, self)
        except ProfilerDataError as err:
            self._note(Problem.from_error(err))
            warnings.warn(f"{err} (skipped; see prof.problems)", ProfilerDataWarning, stacklevel=3)
            return None

    # -- digest and display -------------------------------------------------------------------------
    def sql(self, query: str, **tables) -> "pd.DataFrame":
        """Run a SQL query (DuckDB) over this profile's frames, each a table named like its property
        (``timeline``, ``ops``, ``op_types``, ``step_trace``, ...); only the frames the query names are
        built. Extra DataFrames can be passed by name: ``prof.sql("... FROM timeline JOIN mine ...",
        mine=df)``. No file access from SQL. See `nbprofiler.model.sql`. The profile's analysis frame
        ``dispatch`` (`nbprofiler.analysis.dispatch`: device tasks joined to their launches) is a table too."""
        from .sql import run_sql
        frames = {n: (lambda n=n: getattr(self, n)) for n in sorted(FRAME_NAMES)}
        frames["dispatch"] = lambda: self.dispatch.tasks
        return run_sql(query, frames, tables)

    def summary(self) -> dict:
        """The JSON-ready digest described in SUMMARY_SCHEMA (what ``nbprofiler summary --json`` prints)."""
        from ..analysis.summary import summarize
        return summarize(self)

    def show(self, **kwargs):
        """Display the interactive dashboard (the Overview, then a tab per page of
        `nbprofiler.views.pages.PAGES` with data); for a rank with several sessions, with a window picker above it and the windows compared
        (`nbprofiler.views.windows.WindowsDashboard`)."""
        if len(self.windows) > 1:
            from ..views.windows import WindowsDashboard
            return WindowsDashboard(self, **kwargs).display()
        from ..views.dashboard import Dashboard
        return Dashboard(self, **kwargs).display()

    def to_html(self, path, **kwargs) -> Path:
        """Write a one-file, offline HTML report (BokehJS inline) and return its path."""
        from ..faces.report import write_html_report
        return write_html_report(self, path, **kwargs)

    def _repr_html_(self) -> str:
        from ..views.repr import profile_html
        return profile_html(self)

    def __repr__(self) -> str:
        return (f"<nbprofiler.Profile {self.generation} device={self.device} "
                f"files={sum(len(v) for v in self.run.files.values())} root={str(self.root)!r}>")


# Each declared frame is a lazily built, cached property of the same name (docstring from its spec).
for _spec in schema.FRAMES.values():
    setattr(Profile, _spec.name, _frame(_spec))

FRAME_NAMES = set(schema.FRAMES)


class Cluster:
    """Many profiles (ranks, devices or sessions) found under one path. Index by rank/device id.

    ``cluster["0"]`` (or ``cluster[0]``) is that rank's `Profile`; ``cluster.ranks`` lists the ids in
    numeric order; iterating yields the profiles. When several sessions exist for one rank (schedule
    windows), `nbprofiler.load` puts the earliest in the cluster as ``cluster[rank]`` and the others in its
    ``windows``, keyed ``"<rank>@<session>"`` (as `nbprofiler.io.discover.run_keys` gives it);
    ``cluster["<rank>@<session>"]`` finds those too, but they are not ranks (not in ``ranks``, not iterated).
    """

    def __init__(self, profiles: list[Profile], source: str | Path):
        self.source = str(source)
        self.profiles: dict[str, Profile] = {}
        for p in profiles:
            key = p.key if p.key not in self.profiles else f"{p.key}@{p.session or p.root}"
            self.profiles[key] = p
        self._cache: dict[str, object] = {}
        self.engine: str | None = None  # `nbprofiler.load`'s engine: how analyses gather over the ranks

    @property
    def ranks(self) -> list[str]:
        return list(self.profiles)

    def __getitem__(self, key) -> Profile:
        try:
            return self.profiles[str(key)]
        except KeyError:
            for p in self.profiles.values():  # a later session of a rank
                if str(key) in p.windows:
                    return p.windows[str(key)]
            raise KeyError(f"no rank/device {key!r}; found {self.ranks}") from None

    def __iter__(self):
        return iter(self.profiles.values())

    def __len__(self) -> int:
        return len(self.profiles)

    @property
    def generation(self) -> str:
        gens = {p.generation for p in self}
        return gens.pop() if len(gens) == 1 else "mixed"

    @property
    def problems(self) -> list[Problem]:
        return [pr for p in self for pr in p.problems]

    def cached(self, key: str, fn: Callable[[], object]):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def summary(self, device: str | None = None) -> dict:
        """The summary of one rank (default: the smallest id), with ``devices_found`` listing all, and
        ``cluster``: the cluster's diagnosis across its ranks (`analysis.diagnosis.ClusterDiagnosis`)."""
        from ..analysis.summary import summarize_cluster
        return summarize_cluster(self, device)

    @property
    def primary(self) -> Profile:
        """The rank a single-profile view details: the smallest id."""
        return self[self.ranks[0]]

    def map(self, fn: Callable[[Profile], object], engine: str | None = "serial") -> dict[str, object]:
        """``{rank: fn(profile)}`` for every rank. ``engine``: ``"serial"`` (default) or one of
        `nbprofiler.model.parallel.ENGINES`, where each worker builds the rank's `Profile` from its files
        (``fn`` must then be a module-level function, as it is pickled)."""
        if engine == "serial":
            return {rank: fn(p) for rank, p in self.profiles.items()}
        from functools import partial
        from .parallel import map_ranks
        out = map_ranks(partial(_on_profile, fn), [p.run for p in self.profiles.values()], engine=engine)
        return dict(zip(self.ranks, out))

    def concat(self, frame: str) -> pd.DataFrame:
        """One frame of every rank stacked into one tidy frame, ``rank`` (str: the key in `ranks`) first.
        ``frame``: a property name of `Profile` (``step_trace``, ``ops``, ``timeline``, ...)."""
        if frame not in FRAME_NAMES:
            raise ValueError(f"no frame {frame!r}; frames are {sorted(FRAME_NAMES)}")
        if len(self.profiles) >= MIN_RANKS_FOR_PROCESSES:
            return self._gather(frame)
        parts = [getattr(p, frame) for p in self.profiles.values()]
        keep = [(rank, df) for rank, df in zip(self.ranks, parts) if df is not None and len(df)]
        if not keep:
            empty = next((df for df in parts if df is not None), pd.DataFrame())
            return empty.iloc[0:0].assign(rank=pd.Series(dtype=str))[["rank", *empty.columns]]
        out = pd.concat([df.assign(rank=rank) for rank, df in keep], ignore_index=True)
        return out[["rank", *[c for c in out.columns if c != "rank"]]]

    def _gather(self, frame: str) -> pd.DataFrame:
        """`concat` of many ranks: each chunk of ranks stacks its frames where it is parsed, on the
        cluster's engine (`nbprofiler.analysis.cluster_reduce.stack_frame`), so no rank's frame stays in
        this process's profiles."""
        from ..analysis.cluster_reduce import stack_frame
        from .parallel import map_chunks
        runs = [dataclasses.replace(p.run, info={**p.run.info, "label": key}) for key, p in self.profiles.items()]
        parts = [df for df in map_chunks(partial(stack_frame, frame), runs, engine=self.engine) if len(df)]
        if not parts:
            empty = schema.FRAMES[frame].empty() if frame in schema.FRAMES else pd.DataFrame()
            return empty.assign(rank=pd.Series(dtype=str))[["rank", *[c for c in empty.columns if c != "rank"]]]
        out = pd.concat(parts, ignore_index=True)
        return out[["rank", *[c for c in out.columns if c != "rank"]]]

    def sql(self, query: str, **tables) -> pd.DataFrame:
        """SQL (DuckDB) over the ranks' frames stacked (`concat`): each frame a table named like the
        property, with a ``rank`` column; only the frames a query names are built. ``prof.sql`` rules
        apply: no file access, extra DataFrames by name. The cluster's analysis frames
        (`schema.ANALYSIS_FRAMES`: ``rank_breakdown``, ``parallel_groups``, ``parallel_communication``,
        ``slow_rank_causes``, ``link_speeds``; ``pipeline_bubbles`` with the stages the files give and no
        schedule; ``dispatch`` of every rank stacked with its ``rank``) are tables too."""
        from ..analysis.breakdown import rank_breakdown
        from ..analysis.parallel_groups import parallel_communication, parallel_groups
        from ..analysis.pipeline import pipeline_bubbles
        from ..analysis.slow_rank_cause import link_speeds, slow_rank_causes
        from .sql import run_sql
        frames = {n: (lambda n=n: self.concat(n)) for n in sorted(FRAME_NAMES)}
        frames["rank_breakdown"] = lambda: rank_breakdown(self)
        frames["parallel_groups"] = lambda: parallel_groups(self)
        frames["parallel_communication"] = lambda: parallel_communication(self)
        frames["pipeline_bubbles"] = lambda: pipeline_bubbles(self)
        frames["slow_rank_causes"] = lambda: slow_rank_causes(self)
        frames["link_speeds"] = lambda: link_speeds(self)

        def dispatch():
            parts = [p.dispatch.tasks for p in self.profiles.values()]
            return pd.concat([df.assign(rank=rank)[["rank", *df.columns]] for rank, df in zip(self.ranks, parts)],
                             ignore_index=True)
        frames["dispatch"] = dispatch
        return run_sql(query, frames, tables)

    def show(self, **kwargs):
        """Display the cluster page (`views.cluster.ClusterView`; e.g. ``align="communication"``,
        ``anchor="<collective op>"`` for its timeline of ranks)."""
        from ..views.cluster import ClusterView
        return ClusterView(self, **kwargs).display()

    def _repr_html_(self) -> str:
        from ..views.repr import cluster_html
        return cluster_html(self)

    def __repr__(self) -> str:
        return f"<nbprofiler.Cluster {self.generation} ranks={self.ranks} source={self.source!r}>"


def _on_profile(fn, run):
    """`Cluster.map`'s work in a worker: the rank's Profile from its files, then ``fn``."""
    return fn(Profile(run))


def _id_key(device: str):
    return (0, int(device)) if str(device).isdigit() else (1, str(device))
