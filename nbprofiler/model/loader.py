"""`load()`: discovery -> `Profile` or `Cluster`. Never writes into the profiler directory."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import NoProfilerDataError
from ..io.discover import RunFiles, discover, rank_of, run_keys, session_order
from .profile import Cluster, Profile


def load(path: str | os.PathLike, device: str | int | None = None, engine: str | None = None):
    """Load the profiler output under ``path``.

    ``path`` may be a legacy profiler folder, a ``*_ascend_ms`` / ``*_ascend_pt`` folder (or one renamed:
    any folder holding ``ASCEND_PROFILER_OUTPUT`` / ``FRAMEWORK``) or a parent of many, a folder of raw
    MindData files, a folder of CANN ``PROF_*`` exports, a folder with some ASCEND_PROFILER_OUTPUT files,
    a ``cluster_analysis_output`` folder, or a single trace JSON file. A run folder's rank is the one its
    own metadata writes (``profiler_info_{N}.json``, ``profiler_metadata.json``, the database export),
    never its folder name.

    Returns a `Profile` when one rank is found, else a `Cluster` indexable by rank. Several sessions of
    one rank (schedule windows, repeated start/stop: one folder each) are not ranks: one rank's sessions
    give the `Profile` of its first session (by the UTC time in the folder name), whose ``windows`` holds
    every session of the rank by key (``"<rank>"`` for the first, ``"<rank>@<session folder>"`` for the
    others; ``prof.show()`` puts a window picker above the dashboard and compares the windows); a
    `Cluster` holds each rank's first session, ``cluster[rank].windows`` the rest (``cluster["0@..."]``
    still finds them). ``device`` picks one rank or session by key (a bare rank: its first session); its
    Profile has the same ``windows``. Frames are parsed lazily on first access. ``engine`` ("serial",
    "processes", "dask" or None) only matters for clusters: it is how ranks are parsed when cluster-wide
    analyses gather them; None is serial below 16 ranks or on one CPU, else it times a first chunk of
    ranks and measures the cores left idle meanwhile, and starts local processes only on idle cores and
    when they would finish clearly sooner (`nbprofiler.model.parallel.pool_helpers`); "dask" uses the
    ``distributed.Client`` in scope if any.
    """
    if engine is not None:
        from .parallel import choose_engine
        choose_engine(0, engine)  # a misspelt engine fails here, not at the first cluster-wide analysis
    runs = expand_runs(discover(path))
    keys = run_keys(runs)
    order = sorted(range(len(runs)), key=lambda i: (_id_key(rank_of(runs[i])), session_order(runs[i])))
    runs, keys = [runs[i] for i in order], [keys[i] for i in order]
    devices = list(keys)
    chosen = None
    if device is not None:
        # the exact key ("1", "1@<session>") first; a bare rank or device id picks its first session
        want = str(device)
        hits = [i for i, k in enumerate(keys) if k == want] or \
               [i for i, r in enumerate(runs) if rank_of(r) == want or r.device == want]
        if not hits:
            raise NoProfilerDataError(Path(path), f"no device/rank {device!r} here; found {devices}")
        chosen = hits[0]
        keep = [i for i, r in enumerate(runs) if rank_of(r) == rank_of(runs[chosen])]  # its rank's sessions
    else:
        keep = range(len(runs))
    profiles = {i: Profile(runs[i], source=path, devices_found=devices, key=keys[i]) for i in keep}
    # each rank's sessions, in recording order (the first is keyed by the bare rank), shared by its Profiles
    windows: dict[str, dict[str, Profile]] = {}
    for i, prof in profiles.items():
        windows.setdefault(rank_of(runs[i]), {})[prof.key] = prof
        prof._windows = windows[rank_of(runs[i])]
    if chosen is not None:
        return profiles[chosen]
    firsts = [next(iter(w.values())) for w in windows.values()]
    if len(firsts) == 1:
        return firsts[0]
    cluster = Cluster(firsts, source=path)
    cluster.engine = engine
    return cluster


def expand_runs(runs: list[RunFiles]) -> list[RunFiles]:
    """Runs as `load` sees them: a cluster_analysis_output folder becomes one run per rank listed in its
    files, an msprof database one run per device."""
    out = []
    for run in runs:
        if run.generation == "cluster_analysis" and run.device == "*":
            from ..io import ascend_ms
            for rank in ascend_ms.cluster_ranks(run):
                r = RunFiles(run.generation, run.root, rank, files=run.files, session=run.session)
                r.info["rank_id"] = rank
                out.append(r)
            if not out:
                run.device = "0"
                out.append(run)
        elif run.generation == "database" and run.has("msprof_db") and not run.has("profiler_db"):
            out.extend(_msprof_devices(run))
        else:
            out.append(run)
    return out


def _msprof_devices(run: RunFiles) -> list[RunFiles]:
    """An msprof database holds every device of the machine: one run per device with tasks."""
    from ..errors import ProfilerDataError
    from ..io import db
    try:
        devices = db.task_devices(run.get("msprof_db"))
    except ProfilerDataError:
        return [run]  # the frames report the broken database
    if not devices:
        return [run]
    out = []
    for dev in devices:
        r = RunFiles(run.generation, run.root, dev, files=run.files, session=run.session)
        r.info["db_device"] = dev
        out.append(r)
    return out


def _id_key(d):
    return (0, int(d)) if str(d).isdigit() else (1, str(d))
