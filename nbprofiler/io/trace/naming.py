"""Naming: the tracks (from the ``M`` events, else by the legacy conventions, else the ids), the op type
of an event name or a kernel name, and the scope-layer tracks whose bars are not operators."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .frames import select_rows

# args.type values that name a category of ops rather than the op's type: MindSpore 2.10 puts
# "HostCpuOps" on every CPU op, the GPU writer "cuLaunchKernel" on every kernel. For these the type is
# derived from the name, as MindInsight's CPU op tables do (their types are Conv2D, MatMul, ...).
GENERIC_ARG_TYPES = {"HostCpuOps", "cuLaunchKernel", "cuLaunchKernelEx", "Kernel", "kernel", ""}

# Legacy timelines carry no M events; FORMATS 3.14 / 5.8 name the special pids and tids.
LEGACY_PROCESSES = {"9000": "AI CPU", "10000": "Communication", "11000": "Host CPU"}
LEGACY_THREADS = {"100000": ("Steps", -4), "100001": ("Scope Name", -3), "100002": ("GpuOps", -2),
                  "100003": ("HostCpuOps", -1)}

# -- tracks ---------------------------------------------------------------------------------------------
def meta_events(table: pa.Table, is_meta: np.ndarray | None = None) -> list[dict]:
    """The M events (few: one per process/thread name or sort key; the rows ``is_meta`` of ``table``, or all
    of them) as dicts with ``m_name`` / ``m_sort`` taken from their args."""
    columns = ["name", "pid", "tid", "args"]
    out = []
    for m in (table.select(columns) if is_meta is None else select_rows(table, columns, is_meta)).to_pylist():
        try:
            args = json.loads(m.pop("args")) if m.get("args") else {}
        except (ValueError, RecursionError):
            args = {}
        args = args if isinstance(args, dict) else {}
        name, sort = args.get("name"), args.get("sort_index")
        m["m_name"] = None if name is None else name if isinstance(name, str) else json.dumps(name)
        m["m_sort"] = _as_sort_key(sort)
        out.append(m)
    return out


def _as_sort_key(v) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        return int(round(float(v)))
    except (TypeError, ValueError, OverflowError):
        return None


def name_tracks(track_pid: np.ndarray, track_tid: np.ndarray, meta: list[dict], *, legacy: bool,
                 gpu: bool) -> pd.DataFrame:
    """One row per (pid, tid): names and sort keys from the M events (the last of repeated ones, as
    Chrome does), else the legacy conventions of FORMATS 3.14, else the ids. Sorted for display."""
    proc_name, proc_sort, thr_name, thr_sort = {}, {}, {}, {}
    for m in meta:
        p, t, m_name, m_sort = m["pid"] or "", m["tid"] or "", m["m_name"], m["m_sort"]
        if m["name"] == "process_name" and m_name is not None:
            proc_name[p] = m_name
        elif m["name"] == "process_sort_index" and m_sort is not None:
            proc_sort[p] = int(m_sort)
        elif m["name"] == "thread_name" and m_name is not None:
            thr_name[(p, t)] = m_name
        elif m["name"] == "thread_sort_index" and m_sort is not None:
            thr_sort[(p, t)] = int(m_sort)
    rows = []
    for i, (p, t) in enumerate(zip(track_pid, track_tid)):
        p, t = str(p), str(t)
        pnum, tnum = as_int(p), as_int(t)
        if p in proc_name:
            process = proc_name[p]
        elif legacy and p in LEGACY_PROCESSES:
            process = LEGACY_PROCESSES[p]
        elif legacy:
            process = f"GPU {p}" if gpu else f"Ascend Device {p}"
        else:
            process = f"Process {p}"
        special = LEGACY_THREADS.get(t) if legacy else None
        if (p, t) in thr_name:
            thread = thr_name[(p, t)]
        elif special:
            thread = special[0]
        elif legacy and tnum is not None:
            thread = f"Stream #{t}" if gpu else f"Stream {t}"
        else:
            thread = t if tnum is None else f"Thread {t}"
        psort = proc_sort.get(p, pnum if pnum is not None else 0)
        tsort = thr_sort.get((p, t), special[1] if special else (tnum if tnum is not None else 0))
        rows.append((i, p, t, process, thread, psort, tsort, pnum if pnum is not None else 0,
                     tnum if tnum is not None else 0))
    # Tracks are few: sorted and laid out in Python (a stable sort, as pandas' would be), then one frame
    # built from whole columns; pandas' sort and per-column casts took ~6 ms of every first open.
    rows.sort(key=lambda r: (r[5], r[7], r[1], r[6], r[8], r[2]))
    column = list(zip(*rows)) if rows else [()] * 7
    return pd.DataFrame({
        "track": np.arange(len(rows), dtype=np.int32),
        "_pair": np.array(column[0], dtype=np.int64),
        **{c: pd.array(list(column[k]), dtype=str) for c, k in (("pid", 1), ("tid", 2), ("process", 3),
                                                              ("thread", 4))},
        "process_sort": np.array(column[5], dtype=np.int64),
        "thread_sort": np.array(column[6], dtype=np.int64)})


def as_int(s: str) -> int | None:
    try:
        return int(s)
    except ValueError:
        return None


# -- op types -------------------------------------------------------------------------------------------
_OP_SUFFIX = re.compile(r"-op\d+(?:_\d+)*$")
_NUMBERED = re.compile(r"(?:[ _#]\d+)+$")
_LONG_ID = re.compile(r"\d{3,}$")


def op_type_of(name: str) -> str:
    """Operator type from an event name: last path component without ``-opN``; names without ``-opN``
    also lose a trailing instance number (``_N``, `` N``, ``#N``, or a bare run of 3+ digits), while
    short digit runs that belong to type names stay (``GatherV2``, ``Conv3D``).
    ``Default/net/Conv2D-op12`` -> ``Conv2D``; ``AllReduce-op534_0`` -> ``AllReduce``;
    ``HostToDevice38654705663`` -> ``HostToDevice``; ``Iteration 3`` -> ``Iteration``;
    ``trans_TransData_33`` -> ``trans_TransData``. A name that would become empty is kept."""
    base = name.rsplit("/", 1)[-1].strip() if "/" in name.strip("/") else name.strip()
    without_op = _OP_SUFFIX.sub("", base)
    if without_op == base:
        without_op = _LONG_ID.sub("", _NUMBERED.sub("", base)).rstrip(" _#")
    return without_op or base or name


# A name of printable ASCII characters only: the one blank `str.strip` removes from it is the space, and
# `\d` means the same to Arrow's regexes (RE2) as to Python's, so Arrow's kernels derive its type as
# `op_type_of` does.
_PRINTABLE_ASCII = r"^[ -~]*$"


def op_types_of(names: pa.Array) -> pa.Array:
    """`op_type_of` of each of ``names`` (a string array without nulls), as a string array: in Arrow's
    string kernels where a name is printable ASCII (about twice as fast as a Python call per name: a
    first open derives the type of every distinct name), in Python for the others."""
    names = names.cast(pa.string()) if names.type != pa.string() else names
    if not len(names):
        return names
    inner = pc.match_substring(pc.ascii_trim(names, "/"), "/")  # a "/" that is not at either end
    parts = pc.split_pattern(names, "/", max_splits=1, reverse=True)
    bounds = np.frombuffer(parts.buffers()[1], np.int32)[parts.offset:parts.offset + len(parts) + 1]
    last = parts.flatten().take(pa.array(bounds[1:] - 1 - bounds[0]))  # the last path component
    base = pc.ascii_trim(pc.if_else(inner, last, names), " ")
    out = pc.replace_substring_regex(base, _OP_SUFFIX.pattern, "")
    no_op = pc.equal(pc.binary_length(out), pc.binary_length(base))
    if pc.any(no_op).as_py():
        numbered = pc.replace_substring_regex(base.filter(no_op), _NUMBERED.pattern, "")
        numbered = pc.ascii_rtrim(pc.replace_substring_regex(numbered, _LONG_ID.pattern, ""), " _#")
        out = pc.replace_with_mask(out, no_op, numbered)
    keep = pc.if_else(pc.equal(pc.binary_length(base), 0), names, base)
    out = pc.if_else(pc.equal(pc.binary_length(out), 0), keep, out)
    other = pc.invert(pc.match_substring_regex(names, _PRINTABLE_ASCII))
    if pc.any(other).as_py():
        out = pc.replace_with_mask(out, other, pa.array([op_type_of(n) for n in names.filter(other).to_pylist()],
                                                        pa.string()))
    return out


def kernel_type_of(name: str) -> str:
    """Operator type of a device kernel whose file names none (kernel_details.csv / the database write
    ``N/A`` at profiler level 0): an ``aclnn<Api>_<Kernel>_<OpType>`` kernel is of its last part
    (``aclnnMuls_MulAiCore_Mul`` -> ``Mul``); any other name as `op_type_of` reads it."""
    parts = name.split("_")
    if name.startswith("aclnn") and len(parts) >= 3 and parts[-1]:
        return parts[-1]
    return op_type_of(name)


def fill_kernel_types(names: pd.Series, types: pd.Series) -> pd.Series:
    """``types`` with every missing one (empty, ``N/A``, ``NULL``) read from its kernel's name
    (`kernel_type_of`), so a profile without op types is not one "N/A" type at 100 %."""
    missing = types.isna() | types.astype(str).str.strip().isin(["", "N/A", "NULL"])
    if not missing.any():
        return types
    derived = names[missing].astype(str)
    return types.where(~missing, derived.map({n: kernel_type_of(n) for n in derived.unique()}))


def op_type_maps(derived_of: np.ndarray, derived: list, types: np.ndarray):
    """The op types of names and of args.type values: per name its derived type (``derived_of``: the
    number in ``derived`` of `op_type_of` of each name), per args.type value its own type's code where it
    is specific, else -1 (a specific args.type wins over the name's type); categories = the derived types,
    then the specific args types, in first-seen order."""
    # the used names' types renumbered in the order they first occur among them (as pd.factorize would)
    numbers, first = np.unique(derived_of, return_index=True)
    seen = numbers[np.argsort(first, kind="stable")]
    renumber = np.zeros(len(derived), dtype=np.int32)
    renumber[seen] = np.arange(len(seen), dtype=np.int32)
    of_name = renumber[derived_of]
    cats = [derived[i] for i in seen.tolist()]
    usable = [bool(t) and t not in GENERIC_ARG_TYPES for t in types.tolist()]
    code = {c: i for i, c in enumerate(cats)}
    for t, ok in zip(types.tolist(), usable):
        if ok and t not in code:
            code[t] = len(cats)
            cats.append(t)
    of_type = np.array([code[t] if ok else -1 for t, ok in zip(types.tolist(), usable)], dtype=np.int32)
    return of_name, of_type, np.array(cats, dtype=object)


# -- scope layers -----------------------------------------------------------------------------------------
SCOPE_LAYER_TYPE = "Scope Layer"


def scope_tracks(tracks: pd.DataFrame) -> set[int]:
    """Tracks that hold scope-layer bars, not operators: MindSpore's "Scope Layer" process (2.x) and the
    legacy "Scope Name" thread (tid 100001)."""
    if tracks is None or tracks.empty:
        return set()
    # tracks are few: plain Python (pandas' string methods cost ~5 ms of every first open)
    text = (tracks[c].astype(str) for c in ("process", "thread", "tid"))
    return {int(track) for track, process, thread, tid in zip(tracks["track"], *text)
            if "scope layer" in process.lower() or "scope name" in thread.lower() or tid == "100001"}


def mark_scope_layers(timeline: pd.DataFrame, tracks: pd.DataFrame) -> pd.DataFrame:
    """``is_scope`` (bool): the event is a scope-layer bar ("Default", "network-WithLossCell", ...) that
    spans the operators under it; its ``op_type`` becomes ``"Scope Layer"`` so scope names never mix
    with operator types (their time is the time of the ops inside them, counted again). A timeline that
    has ``is_scope`` already (a store built on disk marks its own: `scope_layer_codes`) is returned as is."""
    if "is_scope" in timeline.columns:
        return timeline
    op_type = timeline["op_type"]
    scope, codes, cats = scope_layer_codes(timeline["track"].to_numpy(), op_type.cat.codes.to_numpy(),
                                           op_type.cat.categories, tracks)
    out = timeline.copy(deep=False)
    out["is_scope"] = scope
    if codes is not None:
        out["op_type"] = pd.Categorical.from_codes(codes, categories=cats, validate=False)
    return out


def scope_layer_codes(track: np.ndarray, codes: np.ndarray, cats: pd.Index,
                      tracks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray | None, pd.Index | None]:
    """What `mark_scope_layers` does, on the columns' arrays: (``is_scope`` of each event, and where some
    event is on a scope track, the op-type ``codes`` with those events' set to ``"Scope Layer"`` and the
    categories still used, in their order; else None, None)."""
    marked = sorted(scope_tracks(tracks))
    if marked:  # a lookup per event (isin hashes every event's track)
        lookup = np.zeros(max(marked[-1], int(track.max(initial=0))) + 1, dtype=bool)
        lookup[marked] = True
        scope = lookup[track]
    else:
        scope = np.zeros(len(track), dtype=bool)
    if not scope.any():
        return scope, None, None
    # every step in the codes' own small integer type: a timeline of 33M events is 33 MB of int8 codes,
    # and each int64 temporary of them (bincount's input, a lookup's result) costs 265 MB of fresh pages
    if SCOPE_LAYER_TYPE not in cats:
        cats = cats.append(pd.Index([SCOPE_LAYER_TYPE], dtype=cats.dtype))
    k = cats.get_loc(SCOPE_LAYER_TYPE)
    codes = codes.astype(np.promote_types(codes.dtype, np.min_scalar_type(-k - 1)), copy=True)  # signed, holds k
    codes[scope] = k
    # the categories still used, in their order (-1, a missing value, marks the extra last slot)
    present = np.zeros(len(cats) + 1, dtype=bool)
    present[codes] = True
    used = present[:-1]
    if not used.all():
        new_code = np.full(len(cats) + 1, -1, dtype=codes.dtype)
        new_code[:-1][used] = np.arange(int(used.sum()))
        codes = new_code[codes]
    return scope, codes, cats[used]
