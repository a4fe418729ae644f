"""Cache of parsed frames, in the user's cache directory (never in a profiler directory).

Frames are stored as Arrow IPC files (Feather v2) with LZ4-compressed buffers: categorical columns
keep their dictionary encoding and string columns stay Arrow strings, so re-opening is a decompress
plus a zero-copy conversion; Arrow rather than Parquet because it opens and writes about three times
faster (the measurements: benchmarks/README.md, "Trace loading" and "Notes moved from code comments").

An entry is keyed by what was parsed (a kind, e.g. "trace", and the absolute path, size, mtime, inode and
ctime of every source file), so editing or replacing a source file makes a new key and the old entry is
simply not used again. Its meta (written last) records each frame's columns and row count; an entry that
does not match them is not served. Where: ``$NBPROFILER_CACHE_DIR`` if set (``off`` disables caching), else the platform
cache dir (``~/.cache/nbprofiler`` on Linux, ``~/Library/Caches/nbprofiler`` on macOS,
``%LOCALAPPDATA%\\nbprofiler\\Cache`` on Windows). Sources smaller than `MIN_BYTES` are not cached:
parsing them is faster than a cache round trip. A cache that cannot be read or written is ignored.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pandas as pd

from ._util import arrow_memory
from .discover import in_profiler_output, run_folder

# Bump when the layout of cached frames changes, so stale entries are not read.
FORMAT_VERSION = 3
COMPRESSION = "lz4"
MIN_BYTES = 8 * 1024 * 1024
_CHUNK_ROWS = 64 * 1024  # rows per record batch of an entry (feather's own default)
ENV = "NBPROFILER_CACHE_DIR"


def cache_dir() -> Path | None:
    """The cache root, or None when caching is disabled (``NBPROFILER_CACHE_DIR=off``)."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env).expanduser()
    import platformdirs
    return Path(platformdirs.user_cache_dir("nbprofiler", appauthor=False))


def key_for(kind: str, paths: list[Path]) -> str | None:
    """A key naming these exact file versions (path, size, mtime, inode, ctime: a same-size edit that
    keeps the mtime still changes the ctime), or None if one cannot be stat'ed."""
    ident = [kind, FORMAT_VERSION]
    for p in paths:
        try:
            st = Path(p).stat()
        except OSError:
            return None
        ident.append([str(Path(p).resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]


def entry(key: str | None, paths: list[Path]) -> Path | None:
    """The directory of the entry ``key`` of ``paths`` (which may not exist yet), or None when these sources are
    not cached (caching off, sources too small, or no cache dir outside the sources' folders)."""
    root = cache_dir()
    if key is None or root is None:
        return None
    if sum(_size(p) for p in paths) < MIN_BYTES:
        return None
    safe = root_for(paths)
    if safe != root.resolve():  # root_for moved it: it lies in or above a profile
        import warnings
        warnings.warn(f"{ENV}={root.resolve()} lies in or above profiler output (the files being cached, or "
                      "another run's); caching in the user cache directory instead", stacklevel=3)
    return None if safe is None else safe / key


def root_for(paths: list[Path]) -> Path | None:
    """The cache root that files derived from ``paths`` may be written under: `cache_dir`, or where that
    lies above or inside the run folder holding a source, the user cache directory (never into a profile,
    whatever the environment says); None when caching is off or both lie there."""
    root = cache_dir()
    if root is None:
        return None
    root = root.resolve()
    if _beside_sources(root, paths):
        import platformdirs
        root = Path(platformdirs.user_cache_dir("nbprofiler", appauthor=False)).resolve()
        if _beside_sources(root, paths):
            return None
    return root


def _beside_sources(root: Path, paths: list[Path]) -> bool:
    """Whether ``root`` is the folder of a source file's run (`discover.run_folder`: a whole ``*_ascend_ms``
    folder, not only the file's own), a folder above it, or inside it; or lies inside any other profiler
    run (`in_profiler_output`): nbprofiler writes into no profile, the one being cached or another."""
    for p in paths:
        folder = run_folder(Path(p).resolve())
        if root == folder or root in folder.parents or folder in root.parents:
            return True
    return in_profiler_output(root)


def _size(p: Path) -> int:
    try:
        return Path(p).stat().st_size
    except OSError:
        return 0


@arrow_memory()  # see there (and below: the pool is named to the IPC reader)
def load(key: str | None, paths: list[Path]) -> tuple[dict[str, pd.DataFrame], dict] | None:
    """(frames, metadata) of a cache entry, or None when absent or unreadable."""
    folder = entry(key, paths)
    if folder is None or not (folder / "meta.json").is_file():
        return None
    try:
        import pyarrow as pa
        meta = json.loads((folder / "meta.json").read_text())
        # the entry names its own key and sources: a folder renamed or swapped with another entry's is not
        # served for these files
        if meta.get("key") != folder.name or meta.get("sources") != [str(p) for p in paths]:
            return None
        frames = {}
        for name, shape in meta["schema"].items():
            # Arrow's IPC reader decompresses into the C++ default pool (mimalloc, whatever pyarrow's default
            # is) unless told; mimalloc's huge pages made a big entry's re-open slow and uneven from run to run,
            # so it decompresses into the pool a build allocates from (figures: benchmarks/README.md)
            with pa.OSFile(str(folder / f"{name}.arrow")) as f:
                table = pa.ipc.open_file(f, memory_pool=pa.default_memory_pool()).read_all()
            # an entry must hold what its meta says it holds: the frame's own columns and row count
            if table.column_names != shape["columns"] or table.num_rows != shape["rows"]:
                return None
            frames[name] = table.to_pandas()
        if set(frames) != set(meta["frames"]) or not isinstance(meta["meta"], dict):
            return None
        return frames, meta["meta"]
    except Exception:  # a half-written, incomplete or foreign entry: ignore it, the caller parses the source
        return None


def store(key: str | None, paths: list[Path], frames: dict[str, object], meta: dict,
          background: bool = False) -> Path | None:
    """Write an entry atomically (a temp dir renamed into place); returns its path, or None when
    nothing is cached. With ``background``, the frames are snapshotted here and converted, compressed
    and written by a thread (non-daemon, so a finishing interpreter completes the entry first; `wait`
    joins it); the path is returned before the entry exists. ``frames``: name -> DataFrame, snapshotted
    (`snapshot`) so that the entry keeps what was loaded whatever the user then edits in place; or name ->
    a function that waits for a frame still built on another thread and returns its `snapshot`, taken
    before the frame was handed to anyone (the writing thread calls it)."""
    folder = entry(key, paths)
    if folder is None:
        return None
    try:
        kept = {name: df if callable(df) else snapshot(df) for name, df in frames.items()}
    except Exception:  # a frame Arrow cannot hold: caching is optional
        return None
    if not background:
        return _write(folder, paths, kept, meta)
    thread = threading.Thread(target=_write, args=(folder, paths, kept, meta), name="nbprofiler-cache-write")
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()] + [thread]
    thread.start()
    return folder


_pending: list[threading.Thread] = []
_pending_lock = threading.Lock()


def wait() -> None:
    """Block until every background write has finished."""
    with _pending_lock:
        pending = list(_pending)
    for t in pending:
        t.join()


# pandas 3 always copies on write; pandas 2 when the user turned it on
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3 or pd.get_option("mode.copy_on_write") is True


def snapshot(df: pd.DataFrame):
    """What an entry keeps of ``df`` until it is written: a shallow copy where pandas copies on write (an
    in-place edit of the frame then copies its data first), else an Arrow table with its own copy of the
    numbers (`_snapshot`)."""
    return df.copy(deep=False) if _COPY_ON_WRITE else _snapshot(df)


def _snapshot(df: pd.DataFrame):
    """``df`` as an Arrow table that shares no mutable memory with it: Arrow views numpy columns (and
    categorical codes) without copying, and an in-place edit of the frame during a background write
    would change the entry. Strings are Arrow-backed already, hence immutable, and stay shared."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    table = pa.Table.from_pandas(df, preserve_index=False)
    columns = []
    for col in table.columns:
        chunks = []
        for chunk in col.chunks:
            if pa.types.is_dictionary(chunk.type):
                idx = chunk.indices
                mask = idx.is_null().to_numpy(zero_copy_only=False) if idx.null_count else None
                codes = pc.fill_null(idx, 0).to_numpy(zero_copy_only=False).copy()
                chunk = pa.DictionaryArray.from_arrays(pa.array(codes, type=idx.type, mask=mask), chunk.dictionary,
                                                       ordered=chunk.type.ordered)
            elif (pa.types.is_integer(chunk.type) or pa.types.is_floating(chunk.type)) and chunk.null_count == 0:
                chunk = pa.array(np.array(chunk.to_numpy(zero_copy_only=False), copy=True), type=chunk.type)
            chunks.append(chunk)
        columns.append(pa.chunked_array(chunks, type=col.type))
    return pa.Table.from_arrays(columns, schema=table.schema)


@arrow_memory()  # see there: the compressed buffers would churn mimalloc's huge pages
def _write(entry: Path, paths: list[Path], tables: dict, meta: dict) -> Path | None:
    """Write ``tables`` (Arrow tables, or frames that share nothing mutable with the user's, or functions
    returning either: see `store`)."""
    tmp = None
    try:
        import pyarrow as pa
        tables = {name: t() if callable(t) else t for name, t in tables.items()}
        # One thread: from_pandas's default pool is a concurrent.futures executor, which refuses work once
        # the interpreter is shutting down, and a script that ends right after a load is when this runs.
        tables = {name: t if isinstance(t, pa.Table) else pa.Table.from_pandas(t, preserve_index=False, nthreads=1)
                  for name, t in tables.items()}
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        # Feather v2 is the Arrow IPC file format. Compressed on this thread: compressing on Arrow's thread
        # pool (feather's default) took 1.7x as long on 2 cores, and writing a 100 MB trace's frames grew
        # the resident memory by 43 MB, against 17 MB.
        options = pa.ipc.IpcWriteOptions(compression=COMPRESSION, use_threads=False)
        for name, table in tables.items():
            with pa.ipc.new_file(str(tmp / f"{name}.arrow"), table.schema, options=options) as w:
                w.write_table(table, max_chunksize=_CHUNK_ROWS)
        # the meta is written last: an entry without it is never read
        schema = {name: {"columns": t.column_names, "rows": t.num_rows} for name, t in tables.items()}
        (tmp / "meta.json").write_text(json.dumps({"key": entry.name, "frames": list(tables), "schema": schema,
                                                   "meta": meta, "sources": [str(p) for p in paths]}))
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
        return entry
    except Exception:  # read-only home, full disk, a race with another process: caching is optional
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return None


def clear() -> None:
    """Remove every cached entry."""
    root = cache_dir()
    if root is not None and root.is_dir():
        shutil.rmtree(root, ignore_errors=True)
