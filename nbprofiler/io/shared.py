"""Cluster-wide files read once per process and handed out one rank at a time.

msprof-analyze's cluster_analysis output (cluster_step_trace_time.csv, cluster_communication.json,
cluster_communication_matrix.json, communication_group.json) holds every rank of the cluster in one file,
and each rank's `Profile` takes its own rows from it. Parsing the whole file again for each rank costs
ranks x file size (4,096 ranks: hours); here the file is parsed once per process into one frame, its rows'
positions grouped by rank, and each rank gets a copy of its rows. A process keeps the last `MAX_ENTRIES`
files (keyed by path, size and mtime, so an edited file is parsed again).
"""
from __future__ import annotations

import collections
import os
import threading
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

# Files kept parsed per process: the four cluster_analysis files plus the two frames read from one of them.
MAX_ENTRIES = 8

_entries: "collections.OrderedDict[tuple, tuple[pd.DataFrame, dict]]" = collections.OrderedDict()
_lock = threading.Lock()


def _key(path: Path, what: str) -> tuple:
    st = os.stat(path)
    return str(path), what, st.st_size, st.st_mtime_ns


def whole(path: Path, what: str, parse: Callable[[], pd.DataFrame], by: str | None = None) -> tuple[pd.DataFrame, dict]:
    """(``parse()``'s frame of ``path``, {value of column ``by``: row positions}) parsed once per process
    for this ``what`` (the kind of frame read from the file)."""
    key = _key(Path(path), what)
    with _lock:
        hit = _entries.get(key)
        if hit is not None:
            _entries.move_to_end(key)
            return hit
    full = parse()
    groups = {str(k): np.asarray(v) for k, v in full.groupby(by, sort=False).indices.items()} if by and len(full) else {}
    with _lock:
        _entries[key] = (full, groups)
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return full, groups


def rows_of(path: Path, what: str, parse: Callable[[], pd.DataFrame], by: str, value: str) -> pd.DataFrame:
    """The rows of ``parse()``'s frame of ``path`` whose column ``by`` equals ``value`` (a copy, index from 0,
    the frame's attrs kept), the file parsed once per process (`whole`)."""
    full, groups = whole(path, what, parse, by)
    pos = groups.get(str(value))
    out = full.iloc[pos if pos is not None else []].reset_index(drop=True)
    out.attrs = dict(full.attrs)
    return out


def clear() -> None:
    """Forget every parsed file (tests; a process that is done with a cluster)."""
    with _lock:
        _entries.clear()


__all__ = ["whole", "rows_of", "clear", "MAX_ENTRIES"]
