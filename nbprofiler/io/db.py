"""Reader of the database (SQLite) exports: MindSpore's ``ascend_mindspore_profiler_{rank}.db`` and the
Ascend PyTorch profiler's ``ascend_pytorch_profiler_{rank}.db`` (``export_type`` db), their
``analysis.db`` (step trace), and CANN msprof's ``msprof_*.db``.

The tables are documented by msprof ("Profile Data File Reference (DB)") and MindSpore's profiler docs:
times are integers in ns (Unix epoch), sizes in bytes, and every text column is an id into
``STRING_IDS``. Each function here returns the same frame, with the same columns and units, as the
text export's parser (`nbprofiler.io.ascend_ms`, `nbprofiler.io.trace`), so views and analyses never
know which export they read.

Read-only, strictly: every connection is ``file:...?mode=ro&immutable=1`` (SQLite opens no journal or
WAL file and takes no lock, so the profiler folder stays byte-identical). A database with a ``-wal`` (or
hot ``-journal``) file beside it holds commits an immutable read would miss: it is read through a private
copy of the database and that file in a temporary folder, as any reader would see it (`connect`). Each frame
is one SQL query per table over only the columns it needs, its rows fetched a block at a time into typed
columns (`read_rows`: no Python object per cell is kept); ``STRING_IDS`` texts are fetched once per
distinct id (`decode_strings`), so rows sharing a text share one string; aggregates are computed in SQL.

Hostile files: every sqlite3 error is a `ProfilerDataError` naming the file and the table (`query`); a
frame whose queries' rows would not fit in memory together is refused with `FileTooLargeError` naming its
tables before a row of any is read (`weigh`: each table's row count x the query's columns x `CELL_BYTES`,
against the memory guard of `nbprofiler.io._util`); a text longer than `MAX_STRING_BYTES` is left empty
with a warning; a row whose time is NULL, not a number or impossible (negative start, end before start,
over 30 days, as the trace readers) is skipped with a warning naming its table and rowid (`clean_times`),
and past `BAD_ROW_LIMIT` of the rows its table fails.
"""
from __future__ import annotations

import re
import sqlite3
import urllib.parse
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import EmptyFileError, FileTooLargeError, MalformedFileError, MissingColumnError, ProfilerDataError
from ..schema import FRAMES, STAGE_SETS
from . import _util
from ._util import BAD_ROW_LIMIT, too_many_bad, warn_partial
from .discover import RunFiles
from .trace.frames import MAX_DURATION_US

NS_PER_US = 1000.0
BYTES_PER_MB = 1024.0 * 1024.0

# The frames' columns, from their declaration (nbprofiler.schema), in the order the text export's parser
# (`nbprofiler.io.ascend_ms`) gives them: a communication record's keys first, then the declared columns.
COMM_KEYS = ["step", "group", "kind", "op_name", "rank"]
COMM_COLUMNS = COMM_KEYS + [c.name for c in FRAMES["communication"].columns if c.name not in COMM_KEYS]
LINK_COLUMNS = COMM_KEYS + [c.name for c in FRAMES["communication_links"].columns if c.name not in COMM_KEYS]
# step_trace_time's stage columns (the declared step_trace columns from preparing_ms on), and the ones that
# stack up to the step
_STEP_COLUMNS = [c.name for c in FRAMES["step_trace"].columns]
STEP_TIME_COLUMNS = _STEP_COLUMNS[_STEP_COLUMNS.index("preparing_ms"):]
STACKED = list(STAGE_SETS[2])

# The device task type (TASK.taskType) -> the accelerator core kernel_details.csv names.
CORE_OF_TASK = {"KERNEL_AICORE": "AI_CORE", "AI_CORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE",
                "AI_VECTOR_CORE": "AI_VECTOR_CORE", "KERNEL_MIX_AIC": "MIX_AIC", "MIX_AIC": "MIX_AIC",
                "KERNEL_MIX_AIV": "MIX_AIV", "MIX_AIV": "MIX_AIV", "KERNEL_AICPU": "AI_CPU", "AI_CPU": "AI_CPU",
                "DSA": "DSA", "DVPP": "DVPP", "FFTS_PLUS": "FFTS_PLUS"}


FRAMEWORK_NAMES = {"PYTORCH": "PyTorch", "MINDSPORE": "MindSpore"}

# -- reading a database: what a reader sees, typed errors, bounded memory ------------------------------
# Peak memory of a frame's build per cell (row x column) its queries return, as `weigh` charges it: the
# typed columns `read_rows` makes, the frames derived from them and the frame assembled from those (every
# query of a frame is held until it is assembled). Measured as the peak RSS of the build over the process's
# before it, on the 100 MB database of `benchmarks/db_export.py`: operator_memory 56 bytes per cell, the
# timeline 50 (367 MB for 7.6M cells), memory 45, kernels 44; the timeline 46 at 1 GB (`bench_db_load.py
# --sizes 1000 --methods timeline`: 3.0 GB over the imports for 68.6M cells); the highest x 1.3. A query
# is charged for every row of the table it reads.
CELL_BYTES = 75
# The longest text a frame takes from STRING_IDS (an op name, a shape list: real ones are < 64 KB). A
# longer value is not profiler data; it is left empty with a warning, as a bad cell of a CSV is, so one
# hostile value never reaches the frames (each row holding it would be a copy of it in SQL, and in Arrow).
MAX_STRING_BYTES = 1 << 20
# The longest duration a row can have, as in the trace readers: 30 days (in ns)
MAX_DURATION_NS = int(MAX_DURATION_US * NS_PER_US)

_copies: dict[tuple, Path] = {}  # (db, its stat, its journal's stat) -> the private copy read instead
_copies_dir: list[Path] = []


def _stat_key(p: Path):
    try:
        s = p.stat()
        return (s.st_size, s.st_mtime_ns, s.st_ino)
    except OSError:
        return None


def _pending(path: Path) -> list[Path]:
    """The database's ``-wal`` / ``-journal`` file when one exists and is not empty: a commit still in a
    WAL file, or a transaction a hot journal rolls back, which an immutable read would not see."""
    out = []
    for suffix in ("-wal", "-journal"):
        side = Path(str(path) + suffix)
        try:
            if side.is_file() and side.stat().st_size > 0:
                out.append(side)
        except OSError:
            pass
    return out


def _private_copy(path: Path, sides: list[Path]) -> Path | None:
    """A copy of the database with its ``-wal``/``-journal`` in a private temporary folder (the profiler
    folder is never written), made once per version of the files; None (with a warning) when it cannot be
    made."""
    import atexit
    import shutil
    import tempfile
    key = (str(Path(path).resolve()), _stat_key(path), tuple((s.name, _stat_key(s)) for s in sides))
    if key in _copies and _copies[key].exists():
        return _copies[key]
    try:
        need = Path(path).stat().st_size + sum(s.stat().st_size for s in sides)
        if not _copies_dir:
            _copies_dir.append(Path(tempfile.mkdtemp(prefix="nbprofiler-db-")))
            atexit.register(shutil.rmtree, _copies_dir[0], True)
        if shutil.disk_usage(_copies_dir[0]).free < 2 * need:
            raise OSError(f"{need / 1e9:.1f} GB to copy, not enough free space in {_copies_dir[0]}")
        folder = Path(tempfile.mkdtemp(dir=_copies_dir[0]))
        copy = folder / Path(path).name
        shutil.copyfile(path, copy)
        for s in sides:
            shutil.copyfile(s, folder / (copy.name + s.name[len(Path(path).name):]))
    except OSError as e:
        warn_partial(ProfilerDataError(path, f"has a {sides[0].name[len(Path(path).name):]} file with changes not "
                                             f"yet in the database, and no private copy could be made to read them "
                                             f"({e.strerror or e}): READ WITHOUT THEM, the frames may miss the "
                                             "last commits"))
        return None
    for old in [k for k in _copies if k[0] == key[0]]:  # an earlier version of these files: its copy goes
        shutil.rmtree(_copies.pop(old).parent, ignore_errors=True)
    _copies[key] = copy
    return copy


def connect(path: Path) -> sqlite3.Connection:
    """A connection that never writes into the profiler folder: ``mode=ro&immutable=1`` (no journal/WAL
    file, no lock) on the file itself, or, when a ``-wal`` (or hot ``-journal``) file beside it holds
    changes a reader would see, a connection to a private copy of the database with that file (read as
    any reader would, query-only)."""
    try:
        size = Path(path).stat().st_size
    except OSError as e:
        raise ProfilerDataError(path, f"cannot read: {e.strerror or e}") from None
    if size == 0:  # SQLite would open it as a new, empty database
        raise EmptyFileError(path, "file is empty (not a database)")
    sides = _pending(Path(path))
    copy = _private_copy(Path(path), sides) if sides else None
    if copy is not None:
        uri = "file:" + urllib.parse.quote(str(copy)) + "?mode=rw"
    else:
        uri = "file:" + urllib.parse.quote(str(Path(path).resolve())) + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        if copy is not None:
            con.execute("PRAGMA query_only = 1")
        n = con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    except sqlite3.DatabaseError as e:
        raise MalformedFileError(path, f"not a readable SQLite database: {e}") from None
    if not n:
        con.close()
        raise MalformedFileError(path, "SQLite database without tables")
    return con


def _table_of(sql: str) -> str | None:
    m = re.search(r'\bFROM\s+"?(\w+)', sql, re.IGNORECASE)
    return m.group(1) if m else None


def _db_error(path: Path, e: Exception, table: str | None) -> ProfilerDataError:
    """A sqlite3/pandas error of a query over ``table`` as the `ProfilerDataError` naming file, table and
    (where SQLite says) column."""
    msg = str(e)
    where = f"table {table}: " if table else ""
    m = re.search(r"no such column: ([\w.\"]+)", msg)
    if m:
        col = m.group(1).split(".")[-1].strip('"')
        return MissingColumnError(path, f"{where}no column {col} ({msg})", field=f"{table}.{col}" if table else col)
    m = re.search(r"no such table: ([\w.\"]+)", msg)
    if m:
        return MissingColumnError(path, f"no table {m.group(1)} ({msg})", field=m.group(1))
    return MalformedFileError(path, f"{where}query failed: {msg}", field=table)


def _refuse(path: Path, what: str, need: float) -> None:
    """`FileTooLargeError` when ``need`` bytes are past the memory guard's share of the available memory."""
    avail = _util.available_memory_bytes()
    if need > avail * _util.MEMORY_FRACTION:
        raise FileTooLargeError(path, f"{what} would need ~{need / 1e9:.1f} GB of memory, {avail / 1e9:.1f} GB "
                                      "available; refused before loading")


_counts: dict[tuple, int] = {}


def _rows(con: sqlite3.Connection, path: Path, table: str) -> int:
    """The table's row count (SQLite counts the b-tree's cells: no value, no overflow page is read), once
    per version of the file."""
    key = (str(path), _stat_key(Path(path)), table)
    if key not in _counts:
        _counts[key] = int(con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
    return _counts[key]


def query(path: Path, sql: str, params=(), table: str | None = None, estimate: bool = True) -> pd.DataFrame:
    """One SQL query's rows as a DataFrame (`read_rows`). ``table``: the table it reads (else its first
    FROM), named by the `ProfilerDataError` any database error becomes; with ``estimate``, the memory its
    rows would take (`weigh`) is checked first and a query past the memory guard raises `FileTooLargeError`
    before a row is read."""
    table = table or _table_of(sql)
    if estimate and table:
        weigh(path, [(sql, params, table)])
    with closing(connect(path)) as con:
        try:
            df = read_rows(con.execute(sql, params))
        except sqlite3.Error as e:
            raise _db_error(path, e, table) from None
        except (OverflowError, MemoryError) as e:  # an integer past 64 bits; an allocation refused
            raise MalformedFileError(path, f"table {table}: unreadable value ({type(e).__name__}: {e})",
                                     field=table) from None
    # a BLOB where text belongs (no writer stores one) as the text its bytes say
    for c in df.columns[df.dtypes == object]:
        if pd.api.types.infer_dtype(df[c], skipna=True) not in ("string", "integer", "floating", "empty"):
            df[c] = df[c].map(lambda v: bytes(v).decode("utf-8", "replace") if isinstance(v, (bytes, memoryview))
                              else v)
    return df


def weigh(path: Path, queries, what: str = "") -> None:
    """Refuse (`FileTooLargeError`, naming every table and the memory needed) the queries ``[(sql, params,
    table), ...]`` that a frame reads, before any of them is read, when together their rows would not fit:
    each is charged its table's row count x its columns x `CELL_BYTES`, as its rows are all held until the
    frame is assembled."""
    parts, need = [], 0
    with closing(connect(path)) as con:
        for sql, params, table in queries:
            try:
                cols = len(con.execute(f"SELECT * FROM ({sql}) LIMIT 0", params).description)
                rows = _rows(con, path, table)
            except sqlite3.Error as e:
                raise _db_error(path, e, table) from None
            parts.append(f"table {table}: {rows:,} rows x {cols} columns")
            need += rows * cols * CELL_BYTES
    _refuse(path, (f"{what} (" + "; ".join(parts) + ")") if what else "; ".join(parts), need)


# Rows fetched from SQLite at a time: the Python objects sqlite3 makes for them live only while their
# block is turned into typed arrays (64K rows of 20 integers: ~60 MB of them).
FETCH_ROWS = 65536
_STR = pd.api.types.pandas_dtype("str")


def read_rows(cur: sqlite3.Cursor) -> pd.DataFrame:
    """A cursor's rows as the DataFrame `pandas.read_sql_query` makes of them (the same dtypes and values),
    without holding a Python object per cell: the rows are fetched `FETCH_ROWS` at a time and each block's
    columns turned into Arrow arrays (`_block`), then each column's blocks into one array (`_column`).
    Integers stay exact int64 (float64 with NaN where a NULL is among them, as pandas); a column of texts is
    pandas' ``str``; a column mixing kinds (integers and texts, blobs, integers past int64) is converted by
    pandas itself from its Python objects."""
    names = [d[0] for d in cur.description]
    blocks: list[list] = [[] for _ in names]
    n = 0
    while chunk := cur.fetchmany(FETCH_ROWS):
        n += len(chunk)
        for j, values in enumerate(zip(*chunk)):
            blocks[j].append(_block(values))
        del chunk
    if not n:
        return pd.DataFrame(columns=names)
    columns = {}
    for j in range(len(names)):
        columns[j] = _column(blocks[j], n)
        blocks[j] = None  # its blocks go as soon as the column is built
    df = pd.DataFrame(columns, copy=False)
    df.columns = names
    return df


def _block(values: tuple):
    """One block of a column: an Arrow array of int64, float64 (of floats only), text or nulls, else (mixed
    kinds, blobs, integers past int64) a NumPy array of the Python objects themselves."""
    try:
        a = pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        a = None
    if a is not None:
        t = a.type
        if t == pa.int64() or pa.types.is_string(t) or pa.types.is_null(t):
            return a
        # integers among the floats: pandas keeps them apart only when the column is of objects
        if t == pa.float64() and not any(type(v) is int for v in values):
            return a
    obj = np.empty(len(values), dtype=object)
    obj[:] = values
    return obj


def _column(blocks: list, n: int):
    """A column's blocks as the array pandas' inference gives the same values (see `read_rows`)."""
    kinds = {"obj" if isinstance(b, np.ndarray) else str(b.type) for b in blocks}
    typed = kinds - {"null"}
    if not typed:
        return np.full(n, None, dtype=object)
    if "obj" not in kinds:
        if typed == {"int64"}:
            if "null" not in kinds and not any(b.null_count for b in blocks):
                return np.concatenate([b.to_numpy() for b in blocks])
            return np.concatenate([b.to_numpy(zero_copy_only=False).astype("float64") if b.type != pa.null()
                                   else np.full(len(b), np.nan) for b in blocks])
        if typed <= {"int64", "double"}:
            return np.concatenate([np.full(len(b), np.nan) if b.type == pa.null()
                                   else b.to_numpy(zero_copy_only=False).astype("float64") for b in blocks])
        if typed == {"string"}:
            return _STR.__from_arrow__(pa.chunked_array([b.cast(pa.string()) for b in blocks], pa.string()))
    obj = np.concatenate([b if isinstance(b, np.ndarray) else np.array(b.to_pylist(), dtype=object)
                          for b in blocks]) if len(blocks) > 1 else (
        blocks[0] if isinstance(blocks[0], np.ndarray) else np.array(blocks[0].to_pylist(), dtype=object))
    # what pandas.read_sql_query converts each column with, so such a column is what it was read as before
    from pandas.core.internals.construction import convert_object_array
    return convert_object_array([obj], dtype=None, dtype_backend="numpy", coerce_float=True)[0]


def tables(path: Path) -> dict[str, set[str]]:
    """Table name -> its column names."""
    with closing(connect(path)) as con:
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return {n: {r[1] for r in con.execute(f'PRAGMA table_info("{n}")')} for n in names}
        except sqlite3.DatabaseError as e:
            raise MalformedFileError(path, f"not a readable SQLite database: {e}") from None


def _require(path: Path, have: dict[str, set[str]], table: str, columns=()) -> None:
    if table not in have:
        raise MissingColumnError(path, f"no table {table}", field=table)
    missing = [c for c in columns if c not in have[table]]
    if missing:
        raise MissingColumnError(path, f"table {table} lacks column(s) {missing}", field=f"{table}.{missing[0]}")


def main_db(run: RunFiles) -> Path | None:
    """The run's profiler database: the framework's (MindSpore/torch_npu) one, else msprof's."""
    return run.get("profiler_db") or run.get("msprof_db")


def has_db(run: RunFiles) -> bool:
    return main_db(run) is not None


def task_devices(path: Path) -> list[str]:
    """The device ids with tasks in an (msprof) database, one run each."""
    have = tables(path)
    if "TASK" not in have or "deviceId" not in have["TASK"]:
        return []
    return [str(int(d)) for d in query(path, "SELECT DISTINCT deviceId AS d FROM TASK ORDER BY d")["d"].dropna()]


def _on_device(run: RunFiles, alias: str) -> str:
    """SQL condition keeping one device's rows of a database that holds several (msprof collects every
    device of the machine into one file; `nbprofiler.load` makes one run per device)."""
    dev = run.info.get("db_device")
    return f"{alias}.deviceId = {int(dev)}" if dev is not None else "1"


def decode_strings(path: Path, df: pd.DataFrame, columns: list[str], table: str = "") -> None:
    """Replace STRING_IDS ids in ``columns`` of ``df`` by their text, in place: one lookup per distinct id
    (in chunks of 500 parameters), not one per row, so rows that share a text share one string. A text
    longer than `MAX_STRING_BYTES` is left empty with a warning naming its id (SQLite measures it; it never
    reaches Python); the texts' total is checked against the memory guard first (`FileTooLargeError`)."""
    ids = pd.unique(pd.concat([pd.to_numeric(df[c], errors="coerce") for c in columns]).dropna())
    ids = ids[(ids == np.floor(ids)) & (np.abs(ids) < 2 ** 63)].astype("int64") if len(ids) else ids
    text: dict[int, str] = {}
    too_long: list[tuple[int, int]] = []
    with closing(connect(path)) as con:
        try:
            # at most the file's bytes, at most MAX_STRING_BYTES each; a str costs ~2x its UTF-8 bytes at worst
            file_bytes = con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
            _refuse(path, f"table STRING_IDS: {len(ids):,} texts", 2 * min(len(ids) * MAX_STRING_BYTES, file_bytes))
            for i in range(0, len(ids), 500):
                chunk = [int(x) for x in ids[i:i + 500]]
                rows = con.execute(f"""SELECT id, CASE WHEN length(CAST(value AS BLOB)) > {int(MAX_STRING_BYTES)}
                                       THEN NULL ELSE value END, length(CAST(value AS BLOB)) FROM STRING_IDS
                                       WHERE id IN ({','.join('?' * len(chunk))})""", chunk)
                for k, v, n in rows:
                    if v is None and n is not None and n > MAX_STRING_BYTES:
                        too_long.append((k, n))
                    elif v is not None:
                        text[k] = v if isinstance(v, str) else bytes(v).decode("utf-8", "replace")
        except (sqlite3.Error, pd.errors.DatabaseError) as e:
            raise _db_error(path, e, "STRING_IDS") from None
    if too_long:
        k, n = too_long[0]
        used = f" (used by {table})" if table else ""
        warn_partial(MalformedFileError(path, f"table STRING_IDS: {len(too_long)} text(s) longer than "
                                              f"{MAX_STRING_BYTES:,} bytes{used} left empty, the rows that use "
                                              f"them loaded (the first is id {k}, {n:,} bytes)",
                                        field="STRING_IDS.value"))
    for c in columns:
        df[c] = _per_distinct(pd.to_numeric(df[c], errors="coerce"), lambda u: u.map(text).astype(object))


def _per_distinct(keys: pd.Series, convert) -> pd.Series:
    """``convert`` (a Series -> an object Series of the same length) applied to the distinct values of
    ``keys`` only, and each row given its key's value (None for a missing key): rows sharing a key share
    one Python object, where a Series.map with a dict of texts makes a string per row (~60 bytes a row
    more for a name or a label)."""
    codes, uniq = pd.factorize(keys)
    vals = np.empty(len(uniq) + 1, dtype=object)  # the last one for a missing key (code -1)
    vals[:-1] = convert(pd.Series(uniq, dtype=keys.dtype)).to_numpy(dtype=object)
    vals[-1] = None
    return pd.Series(vals[codes], index=keys.index, dtype=object)


# A NULL time comes out of SQL as this integer (`_t`): a column with a NULL would otherwise be read as
# floats, which cannot hold ns since the epoch exactly.
NULL_NS = -(2 ** 63)


def _t(expr: str) -> str:
    """SQL for the time ``expr`` with NULL as `NULL_NS` (see `clean_times`). The text of a non-negative
    integer as SQLite writes integers (torch_npu writes PYTORCH_API's times as text) comes out as that
    integer, so a column of such texts is read as int64 and not as a Python string per row; any other value
    (another text, a text past int64, whose cast would not give it back) comes out as written."""
    as_int = (f"CASE typeof({expr}) WHEN 'text' THEN CASE WHEN {expr} >= '0' AND "
              f"CAST(CAST({expr} AS INTEGER) AS TEXT) = {expr} THEN CAST({expr} AS INTEGER) ELSE {expr} END "
              f"ELSE {expr} END")
    return f"ifnull({as_int}, -9223372036854775807 - 1)"


def clean_times(path: Path, df: pd.DataFrame, table: str, start: str, end: str | None = None,
                rowid: str = "rid", what: tuple[str, str | None] | None = None) -> pd.DataFrame:
    """``df`` with its ``start`` (and ``end``) time columns (ns, read through `_t`) as int64 and the rows
    that cannot be placed dropped, with a warning naming the table, the column and the first such row's
    rowid (column ``rowid`` of ``df``): a NULL or non-numeric time, and (as the trace readers skip
    impossible durations) a negative start, an end before the start or a duration over
    `MAX_DURATION_US`. Past `BAD_ROW_LIMIT` of the rows the table is garbage: `MalformedFileError`.
    ``what``: the (start, end) column names as the table has them (for the messages)."""
    names = what or (start, end)
    n = len(df)
    rid = df[rowid] if rowid in df else pd.Series(np.arange(1, n + 1), index=df.index)

    def parse(col):
        v = pd.to_numeric(df[col], errors="coerce")
        return v, (v.isna() | (v == NULL_NS)).to_numpy()
    s, bad_s = parse(start)
    e, bad_e = parse(end) if end else (None, np.zeros(n, dtype=bool))
    bad_e = bad_e & ~bad_s
    unplaced = bad_s | bad_e
    sf = s.to_numpy(dtype="float64", na_value=np.nan)
    with np.errstate(invalid="ignore"):
        absurd = ~unplaced & ((sf < 0) | (np.abs(sf) >= 2.0 ** 63))
        if end:
            ef = e.to_numpy(dtype="float64", na_value=np.nan)
            exact = s.dtype.kind == "i" and e.dtype.kind == "i"
            before = (e.to_numpy() < s.to_numpy()) if exact else (ef < sf)
            absurd |= ~unplaced & (before | (np.abs(ef) >= 2.0 ** 63) | ((ef - sf) > MAX_DURATION_NS))

    def raw(col, i):
        v = df[col].iloc[i]
        return "NULL" if isinstance(v, (int, np.integer, float)) and v == NULL_NS else repr(v)
    n_bad = int(unplaced.sum() + absurd.sum())
    if too_many_bad(n_bad, n):
        i = int(np.flatnonzero(unplaced | absurd)[0])
        col, name = (start, names[0]) if bad_s[i] or not end or not bad_e[i] else (end, names[1])
        raise MalformedFileError(path, f"table {table}: {n_bad} of {n} rows have no possible time (more than "
                                       f"{BAD_ROW_LIMIT:.0%}: not a table with a damaged row); first: rowid "
                                       f"{rid.iloc[i]}, {name} = {raw(col, i)}", field=f"{table}.{name}")
    if unplaced.any():
        i = int(np.flatnonzero(unplaced)[0])
        col, name = (start, names[0]) if bad_s[i] else (end, names[1])
        warn_partial(MalformedFileError(path, f"table {table}: {int(unplaced.sum())} row(s) without a numeric "
                                              f"{name!r} skipped (the first is rowid {rid.iloc[i]}: "
                                              f"{raw(col, i)})", field=f"{table}.{name}"))
    if absurd.any():
        i = int(np.flatnonzero(absurd)[0])
        shown = f"{names[0]} {raw(start, i)}" + (f", {names[1]} {raw(end, i)}" if end else "")
        warn_partial(MalformedFileError(path, f"table {table}: {int(absurd.sum())} row(s) with an impossible "
                                              f"time ({shown}: a negative start, an end before the start or a "
                                              f"duration over {MAX_DURATION_US:.0e} us) skipped (the first is "
                                              f"rowid {rid.iloc[i]})", field=f"{table}.{names[0]}"))
    keep = ~(unplaced | absurd)
    out = df[keep].copy() if not keep.all() else df.copy()
    out[start] = _exact_ints(df[start][keep], s[keep])
    if end:
        out[end] = _exact_ints(df[end][keep], e[keep])
    return out


def _exact_ints(raw: pd.Series, approx: pd.Series) -> pd.Series:
    """int64 of the numbers ``raw`` holds (``approx``: them as `pd.to_numeric` reads them): exact for
    integers and texts of integers, which floats are not at ns since the epoch."""
    if raw.dtype != object:
        return approx.astype("int64")
    vals = [int(v) if isinstance(v, (int, np.integer)) else int(v.strip())
            if isinstance(v, str) and v.strip().lstrip("-").isdigit() else int(a) for v, a in zip(raw, approx)]
    return pd.Series(np.array(vals, dtype="int64"), index=raw.index)


def _ints(values) -> pd.Series:
    """Integer ids/counts as Int64: what is not an integer (text, a float past int64, a fraction) is <NA>."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").astype("float64")
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (v.abs() < 2.0 ** 63) & (v == np.floor(v))
    return v.where(ok).astype("Int64")


def _int(expr: str) -> str:
    """SQL for the integer ``expr`` holds, as an integer or as the text of one (torch_npu writes PYTORCH_API's
    times as text), else NULL."""
    return (f"(CASE WHEN typeof({expr}) = 'integer' THEN {expr} WHEN typeof({expr}) = 'text' AND {expr} <> '' "
            f"AND {expr} NOT GLOB '*[^0-9]*' AND length({expr}) <= 19 THEN CAST({expr} AS INTEGER) END)")


def _placeable(alias: str) -> str:
    """SQL true for a row whose times `clean_times` keeps (for the aggregates computed in SQL)."""
    s, e = _int(f"{alias}.startNs"), _int(f"{alias}.endNs")
    return f"{s} >= 0 AND {e} >= {s} AND {e} - {s} <= {MAX_DURATION_NS}"


def _s(alias: str, column: str, name: str) -> str:
    """SQL for the STRING_IDS id in ``alias.column`` as ``name`` (decoded afterwards by `decode_strings`:
    one string per distinct id, never one per row)."""
    return f"{alias}.{column} AS {name}"
# -- metadata ---------------------------------------------------------------------------------------
def info(run: RunFiles) -> dict:
    """META_DATA (name -> value), RANK_DEVICE_MAP, SESSION_TIME_INFO and HOST_INFO: keys ``db_meta``
    (dict as written), ``rank_id`` (str, where the map says), ``device_id``, ``session_start_us``,
    ``session_end_us`` (float, Unix epoch us), ``host_name``."""
    path = main_db(run)
    if path is None:
        return {}
    have = tables(path)
    out: dict = {}
    if "META_DATA" in have:
        out["db_meta"] = dict(query(path, "SELECT name, value FROM META_DATA").itertuples(index=False))
    if "RANK_DEVICE_MAP" in have:
        m = query(path, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP LIMIT 1").apply(pd.to_numeric, errors="coerce")
        if len(m):
            if pd.notna(m["rankId"].iloc[0]) and int(m["rankId"].iloc[0]) >= 0:
                out["rank_id"] = str(int(m["rankId"].iloc[0]))
            if pd.notna(m["deviceId"].iloc[0]):
                out["device_id"] = str(int(m["deviceId"].iloc[0]))
    if "SESSION_TIME_INFO" in have:
        t = query(path, "SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO LIMIT 1").apply(pd.to_numeric,
                                                                                           errors="coerce")
        if len(t) and t.notna().all(axis=None):
            out["session_start_us"] = float(t["startTimeNs"].iloc[0]) / NS_PER_US
            out["session_end_us"] = float(t["endTimeNs"].iloc[0]) / NS_PER_US
    if "HOST_INFO" in have:
        h = query(path, "SELECT hostName FROM HOST_INFO LIMIT 1")
        if len(h):
            out["host_name"] = str(h["hostName"].iloc[0])
    return out


def origin_us(run: RunFiles) -> float:
    """The earliest event (device task, CANN API, framework API), absolute us: what the text export's
    trace_view.json starts with."""
    path = main_db(run)
    have = tables(path)
    starts = []
    for table in ("TASK", "CANN_API", "PYTORCH_API", "MSTX_EVENTS", "COMMUNICATION_OP"):
        if table in have and "startNs" in have[table]:
            # the rows `clean_times` keeps: an integer start, not negative (LIMIT -1 keeps SQLite from
            # flattening the subquery, which would evaluate the text check twice a row: 1.8x the time)
            v = query(path, f"SELECT min(v) AS t FROM (SELECT {_int('startNs')} AS v FROM {table} LIMIT -1) "
                            "WHERE v >= 0", table=table, estimate=False)["t"].iloc[0]
            if pd.notna(v):
                starts.append(int(v))
    return min(starts) / NS_PER_US if starts else 0.0


def _rel_us(ns: pd.Series, origin_us: float) -> pd.Series:
    """Absolute ns -> us relative to ``origin_us``, exact: the subtraction is done on integers."""
    origin_ns = int(round(origin_us * NS_PER_US))
    return (pd.to_numeric(ns).astype("int64") - origin_ns).astype("float64") / NS_PER_US


def _origin(run: RunFiles, origin: float | None) -> float:
    """The origin (absolute us) relative times count from: ``origin``, else the database's own
    (`origin_us`)."""
    return float(origin) if origin is not None else origin_us(run)


# -- steps ------------------------------------------------------------------------------------------
STEP_SQL = f"SELECT rowid AS rid, id, {_t('startNs')} AS startNs, {_t('endNs')} AS endNs FROM STEP_TIME"


def step_windows_ns(path: Path, have) -> pd.DataFrame:
    if "STEP_TIME" not in have:
        return pd.DataFrame({"id": pd.Series(dtype="int64"), "startNs": pd.Series(dtype="int64"),
                             "endNs": pd.Series(dtype="int64")})
    df = query(path, STEP_SQL)
    df = clean_times(path, df, "STEP_TIME", "startNs", "endNs")
    df["id"] = pd.to_numeric(df["id"], errors="coerce")
    if df["id"].isna().any():
        warn_partial(MalformedFileError(path, f"table STEP_TIME: {int(df['id'].isna().sum())} row(s) without a "
                                              "numeric 'id' skipped", field="STEP_TIME.id"))
        df = df[df["id"].notna()]
    return df.astype({"id": "int64"}).sort_values("startNs", kind="stable")[["id", "startNs", "endNs"]] \
        .reset_index(drop=True)


def _step_of(ns: pd.Series, steps: pd.DataFrame) -> pd.Series:
    """The STEP_TIME window each absolute ns time falls in (<NA> outside every window)."""
    out = pd.Series(pd.NA, index=ns.index, dtype="Int64")
    if steps.empty or ns.empty:
        return out
    starts = steps["startNs"].to_numpy(dtype="int64")
    ends = steps["endNs"].to_numpy(dtype="int64")
    t = ns.to_numpy(dtype="int64")
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t <= ends[np.clip(i, 0, None)])
    vals = steps["id"].to_numpy(dtype="int64")[np.clip(i, 0, None)]
    out[ok] = vals[ok]
    return out


def step_trace(run: RunFiles) -> pd.DataFrame | None:
    """analysis.db ``StepTraceTime`` (the step_trace_time.csv columns, us) -> the step frame in ms, as
    `ascend_ms.step_trace_time`; else the profiler database's ``STEP_TIME`` windows: ``step``,
    ``total_ms`` (window length), ``start_ms``, ``end_ms`` (absolute)."""
    path = run.get("analysis_db")
    if path is not None and "StepTraceTime" in tables(path):
        df = query(path, "SELECT * FROM StepTraceTime")
        cols = {c.lower(): c for c in df.columns}
        out = pd.DataFrame({"step": pd.to_numeric(df[cols["step"]].replace({"": "0"}), errors="coerce")
                            .fillna(0).astype("int64")})
        for col in STEP_TIME_COLUMNS:
            key = col[:-3]  # computing_ms -> computing, as the table names its columns
            if key in cols:
                out[col] = pd.to_numeric(df[cols[key]], errors="coerce").astype("float64") / 1000.0
        if "computing_ms" not in out:
            raise MissingColumnError(path, "table StepTraceTime lacks column computing", field="computing")
        out["total_ms"] = out[[c for c in STACKED if c in out]].fillna(0.0).sum(axis=1)
        out.attrs["path"] = str(path)
        return out
    path = main_db(run)
    if path is None:
        return None
    steps = step_windows_ns(path, tables(path))
    if steps.empty:
        return None
    out = pd.DataFrame({"step": steps["id"].astype("int64"),
                        "total_ms": (steps["endNs"] - steps["startNs"]).astype("float64") / 1e6,
                        "start_ms": steps["startNs"].astype("float64") / 1e6,
                        "end_ms": steps["endNs"].astype("float64") / 1e6})
    out.attrs["path"] = str(path)
    return out


# -- kernels ----------------------------------------------------------------------------------------
_SHAPES = [("inputShapes", "input_shapes"), ("inputDataTypes", "input_data_types"),
           ("inputFormats", "input_formats"), ("outputShapes", "output_shapes"),
           ("outputDataTypes", "output_data_types"), ("outputFormats", "output_formats")]


def kernels(run: RunFiles, origin_us: float | None = None) -> pd.DataFrame | None:
    """Device tasks as kernel_details.csv lists them: every compute task (TASK joined with
    COMPUTE_TASK_INFO) and every communication op (COMMUNICATION_OP, accelerator core ``HCCL``).
    Columns as `ascend_ms.kernels`: ``step`` (the STEP_TIME window, Int64), ``model_id``, ``task_id``,
    ``stream_id``, ``name``, ``type``, ``accelerator_core`` (from the task type: KERNEL_AIVEC ->
    AI_VECTOR_CORE ...), ``start_us`` (relative to the origin), ``dur_us``, ``wait_us`` (NaN where the
    database has no wait), ``block_dim``, ``mix_block_dim``, shapes/types/formats, ``device_id``."""
    path = main_db(run)
    if path is None:
        return None
    have = tables(path)
    _require(path, have, "TASK", ["startNs", "endNs", "globalTaskId"])
    _require(path, have, "COMPUTE_TASK_INFO", ["name", "globalTaskId"])
    _require(path, have, "STRING_IDS", ["id", "value"])
    ci = have["COMPUTE_TASK_INFO"]
    block = "c.blockDim" if "blockDim" in ci else "c.block_dim" if "block_dim" in ci else "NULL"
    mix = "c.mixBlockDim" if "mixBlockDim" in ci else "NULL"
    wait = "c.waitNs" if "waitNs" in ci else "NULL"
    shapes = ", ".join(f"c.{raw} AS {col}" for raw, col in _SHAPES if raw in ci)
    # string columns come out as STRING_IDS ids (cheap integers) and are decoded once per distinct id
    compute_sql = f"""
        SELECT t.rowid AS rid, {_t('t.startNs')} AS start_ns, {_t('t.endNs')} AS end_ns, t.modelId AS model_id,
               t.taskId AS task_id,
               t.streamId AS stream_id, t.deviceId AS device_id, c.name AS name, c.opType AS type,
               t.taskType AS task_type, {'c.taskType' if 'taskType' in ci else 'NULL'} AS compute_type,
               {block} AS block_dim, {mix} AS mix_block_dim, {wait} AS wait_ns{', ' + shapes if shapes else ''}
        FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
        WHERE {_on_device(run, 't')}"""
    typed = "COMMUNICATION_OP" in have and "opType" in have["COMMUNICATION_OP"]
    comm_sql = f"""
            SELECT o.rowid AS rid, {_t('o.startNs')} AS start_ns, {_t('o.endNs')} AS end_ns,
                   {_s('o', 'opName', 'name')}, {_s('o', 'opType', 'type') if typed else "'' AS type"},
                   {'o.waitNs' if 'waitNs' in have.get('COMMUNICATION_OP', ()) else 'NULL'} AS wait_ns
            FROM COMMUNICATION_OP o"""
    weigh(path, [(compute_sql, (), "TASK")] + ([(comm_sql, (), "COMMUNICATION_OP")] if "COMMUNICATION_OP" in have
                                               else []) + ([(STEP_SQL, (), "STEP_TIME")] if "STEP_TIME" in have
                                                           else []), "the kernels frame")
    compute = query(path, compute_sql, estimate=False)
    compute = clean_times(path, compute, "TASK", "start_ns", "end_ns", what=("startNs", "endNs"))
    text_cols = ["name", "type", "task_type", "compute_type"] + [col for raw, col in _SHAPES if raw in ci]
    decode_strings(path, compute, text_cols, "COMPUTE_TASK_INFO/TASK")
    # msprof names the core in COMPUTE_TASK_INFO.taskType; the framework databases leave it N/A there and
    # name it in TASK.taskType (KERNEL_AIVEC ...)
    core = compute.pop("compute_type")
    task = compute.pop("task_type")
    core = core.where(core.notna() & ~core.isin(["N/A", "", "NULL"]), task)
    compute["accelerator_core"] = core.map({v: CORE_OF_TASK.get(str(v), str(v)) for v in pd.unique(core)})
    parts = [compute]
    if "COMMUNICATION_OP" in have:
        comm = query(path, comm_sql, estimate=False)
        comm = clean_times(path, comm, "COMMUNICATION_OP", "start_ns", "end_ns", what=("startNs", "endNs"))
        decode_strings(path, comm, ["name", "type"] if typed else ["name"], "COMMUNICATION_OP")
        comm["accelerator_core"] = "HCCL"
        parts.append(comm)
    df = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else compute
    df = df.sort_values("start_ns", kind="stable").reset_index(drop=True)
    origin = _origin(run, origin_us)
    out = pd.DataFrame({"step": _step_of(df["start_ns"], step_windows_ns(path, have))})
    for col in ("model_id", "task_id", "stream_id", "block_dim", "mix_block_dim"):
        vals = pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(np.nan, index=df.index)
        # 4294967295 (uint32 -1) is how the writer says "none", as N/A in the text export
        out[col] = _ints(vals.where(vals != 4294967295))
    for col in ("name", "type", "accelerator_core"):
        out[col] = df[col].fillna("").astype(str)
    from .trace import fill_kernel_types
    out["type"] = fill_kernel_types(out["name"], out["type"])
    out["start_us"] = _rel_us(df["start_ns"], origin)
    out["dur_us"] = (df["end_ns"] - df["start_ns"]).astype("float64") / NS_PER_US
    out["wait_us"] = pd.to_numeric(df["wait_ns"], errors="coerce").astype("float64") / NS_PER_US
    for _, col in _SHAPES:
        if col in df:
            # as in kernel_details.csv, shapes are written with literal quotes: "1,2048,2048"
            out[col] = df[col].fillna("").astype(str).str.strip('"').replace({"N/A": "", "NULL": ""})
    out["device_id"] = _ints(df["device_id"]) \
        if "device_id" in df else pd.array([pd.NA] * len(df), dtype="Int64")
    out.attrs["origin_us"] = float(df["start_ns"].min()) / NS_PER_US if len(df) else 0.0
    out.attrs["origin_used_us"] = origin
    out.attrs["path"] = str(path)
    return out


def op_type_totals(run: RunFiles) -> pd.DataFrame | None:
    """The op-type table of the kernels (`nbprofiler.io.ops.npu_types_from_kernels`'s columns: ``kind``
    "npu"/"communication", ``op_type``, ``total_time_us``, ``count``, ``accelerator_core`` (the type's
    most frequent core), ``avg_time_us``, ``file_percent``) aggregated in SQL: only one row per
    (type, core) leaves the database (what a cluster-wide reduce of many ranks needs)."""
    path = main_db(run)
    if path is None:
        return None
    have = tables(path)
    _require(path, have, "TASK", ["startNs", "endNs", "globalTaskId"])
    _require(path, have, "COMPUTE_TASK_INFO", ["name", "globalTaskId"])
    ci = have["COMPUTE_TASK_INFO"]
    # grouped by STRING_IDS ids, decoded once per distinct id (`decode_strings`), then by their texts;
    # only the rows `kernels` keeps (`clean_times`, which warns about the others) are summed
    rows = query(path, f"""
        SELECT 'npu' AS kind, c.opType AS op_type, c.name AS name,
               {'c.taskType' if 'taskType' in ci else 'NULL'} AS named, t.taskType AS task_type,
               count(*) AS count, sum(t.endNs - t.startNs) / 1000.0 AS total_time_us
        FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
        WHERE {_on_device(run, 't')} AND {_placeable('t')} GROUP BY 2, 3, 4, 5""", estimate=False)
    decode_strings(path, rows, ["op_type", "name", "named", "task_type"], "COMPUTE_TASK_INFO/TASK")
    named = rows.pop("named")
    rows["core"] = named.where(named.notna() & ~named.isin(["N/A", "NULL"]), rows.pop("task_type"))
    if "COMMUNICATION_OP" in have:
        typed = "opType" in have["COMMUNICATION_OP"]
        comm = query(path, f"""
            SELECT 'communication' AS kind, {'o.opType' if typed else "''"} AS op_type, o.opName AS name,
                   'HCCL' AS core, count(*) AS count, sum(o.endNs - o.startNs) / 1000.0 AS total_time_us
            FROM COMMUNICATION_OP o WHERE {_placeable('o')} GROUP BY 2, 3""", estimate=False)
        decode_strings(path, comm, ["op_type", "name"] if typed else ["name"], "COMMUNICATION_OP")
        rows = pd.concat([rows, comm], ignore_index=True)
    if rows.empty:
        return None
    rows = rows.groupby(["kind", "op_type", "name", "core"], sort=False, dropna=False, as_index=False) \
        .agg(count=("count", "sum"), total_time_us=("total_time_us", "sum"))
    # grouped by kernel name too: where the database names no type (N/A), the name says it
    from .trace import fill_kernel_types
    rows["op_type"] = fill_kernel_types(rows["name"].fillna("").astype(str), rows["op_type"].fillna("").astype(str))
    rows["core"] = rows["core"].map(lambda v: CORE_OF_TASK.get(str(v), str(v)))
    top = rows.sort_values("count", ascending=False, kind="stable").drop_duplicates(["kind", "op_type"])
    out = rows.groupby(["kind", "op_type"], sort=False, as_index=False).agg(
        total_time_us=("total_time_us", "sum"), count=("count", "sum"))
    out = out.merge(top[["kind", "op_type", "core"]].rename(columns={"core": "accelerator_core"}),
                    on=["kind", "op_type"], how="left")
    out["total_time_us"] = out["total_time_us"].astype("float64")
    out["count"] = out["count"].astype("int64")
    out["avg_time_us"] = out["total_time_us"] / out["count"]
    out["file_percent"] = np.nan
    return out


def kernel_type_totals(path: Path) -> pd.DataFrame:
    """Per kernel type: ``type``, ``count``, ``total_us`` computed entirely in SQL (a cluster-wide reduce
    needs only these; nothing but the aggregate per type and kernel name leaves the database). A kernel
    the database types ``N/A`` is of the type its name says (`trace.kernel_type_of`), as in `kernels`."""
    from .trace import fill_kernel_types
    rows = query(path, f"""
        SELECT type, name, count(*) AS count, sum(dur) / 1000.0 AS total_us FROM (
            SELECT {_s('c', 'opType', 'type')}, {_s('c', 'name', 'name')}, t.endNs - t.startNs AS dur
            FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId WHERE {_placeable('t')}
            UNION ALL SELECT {_s('o', 'opType', 'type')}, {_s('o', 'opName', 'name')}, o.endNs - o.startNs
            FROM COMMUNICATION_OP o WHERE {_placeable('o')})
        GROUP BY type, name""", table="TASK", estimate=False)
    # grouped by STRING_IDS ids: decoded once per distinct id, then summed per text
    decode_strings(path, rows, ["type", "name"], "COMPUTE_TASK_INFO/COMMUNICATION_OP")
    rows["type"] = fill_kernel_types(rows["name"].fillna("").astype(str), rows["type"].fillna("").astype(str))
    out = rows.groupby("type", as_index=False, sort=False).agg(count=("count", "sum"), total_us=("total_us", "sum"))
    return out.sort_values("total_us", ascending=False, kind="stable", ignore_index=True)


# -- memory -----------------------------------------------------------------------------------------
def memory(run: RunFiles, origin_us: float | None = None) -> pd.DataFrame | None:
    """MEMORY_RECORD (ns, bytes) -> the memory_record.csv frame: ``component``, ``time_us`` (relative),
    ``allocated_mb``, ``reserved_mb``, ``active_mb`` (MB = 2^20 bytes, as the text export), ``device``
    ("NPU:<id>")."""
    path = main_db(run)
    if path is None or "MEMORY_RECORD" not in (have := tables(path)):
        return None
    record_sql = f"""SELECT m.rowid AS rid, {_s('m', 'component', 'component')}, {_t('m.timestamp')} AS ts,
                                m.totalAllocated AS a, m.totalReserved AS r, m.totalActive AS act, m.deviceId AS dev
                         FROM MEMORY_RECORD m"""
    # the whole process's device memory (memory_record.csv's "APP" rows): NPU_MEM of type "app"
    app_sql = f"""SELECT n.rowid AS rid, 'APP' AS component, {_t('n.timestampNs')} AS ts, NULL AS a,
                         n.ddr + n.hbm AS r, NULL AS act, n.deviceId AS dev FROM NPU_MEM n
                  WHERE (SELECT value FROM STRING_IDS WHERE id = n.type) = 'app'"""
    has_app = "NPU_MEM" in have and {"type", "ddr", "hbm", "timestampNs"} <= have["NPU_MEM"]
    weigh(path, [(record_sql, (), "MEMORY_RECORD")] + ([(app_sql, (), "NPU_MEM")] if has_app else []),
          "the memory frame")
    df = query(path, record_sql, estimate=False)
    df = clean_times(path, df, "MEMORY_RECORD", "ts", what=("timestamp", None))
    decode_strings(path, df, ["component"], "MEMORY_RECORD")
    if has_app:
        app = query(path, app_sql, estimate=False)
        app = clean_times(path, app, "NPU_MEM", "ts", what=("timestampNs", None))
        df = pd.concat([app, df], ignore_index=True)
    df = df.sort_values("ts", kind="stable").reset_index(drop=True)
    origin = _origin(run, origin_us)
    out = pd.DataFrame({"component": df["component"].fillna("").astype(str),
                        "time_us": _rel_us(df["ts"], origin),
                        "allocated_mb": pd.to_numeric(df["a"], errors="coerce") / BYTES_PER_MB,
                        "reserved_mb": pd.to_numeric(df["r"], errors="coerce") / BYTES_PER_MB,
                        "active_mb": pd.to_numeric(df["act"], errors="coerce") / BYTES_PER_MB,
                        "device": "NPU:" + df["dev"].astype(str)})
    out.attrs["origin_us"] = origin
    out.attrs["path"] = str(path)
    return out


def operator_memory(run: RunFiles, origin_us: float | None = None) -> pd.DataFrame | None:
    """OP_MEMORY -> the operator_memory.csv frame: ``name``, ``size_kb``, ``alloc_us``, ``release_us``,
    ``active_release_us`` (relative), ``dur_us``, ``active_dur_us``, the ``*_mb`` totals, ``stream_ptr``,
    ``device_type``."""
    path = main_db(run)
    if path is None or "OP_MEMORY" not in tables(path):
        return None
    times = (("allocationTime", "alloc_us"), ("releaseTime", "release_us"), ("activeReleaseTime", "active_release_us"))
    # the times also as integers (NULL as NULL_NS): ns since the epoch need all 64 bits, and a float loses up
    # to 128 ns of them, enough to put an allocation after the memory sample it was recorded at
    exact = ", ".join(f"{_t('m.' + raw)} AS {col}_ns" for raw, col in times)
    df = query(path, f"SELECT *, {_s('m', 'name', 'op_name')}, {exact} FROM OP_MEMORY m")
    decode_strings(path, df, ["op_name"], "OP_MEMORY")
    origin = _origin(run, origin_us)
    num = lambda c: pd.to_numeric(df[c], errors="coerce").astype("float64")  # noqa: E731
    out = pd.DataFrame({"name": df["op_name"].fillna("").astype(str), "size_kb": num("size") / 1024.0})
    for raw, col in times:
        ns = df[f"{col}_ns"]
        if ns.dtype == "int64":
            rel = pd.Series(np.nan, index=df.index)
            known = (ns != NULL_NS).to_numpy()
            rel[known] = _rel_us(ns[known], origin)
            out[col] = rel
        else:  # a time column holding other values than integers: read as numbers where they are
            out[col] = (num(raw) - origin * NS_PER_US) / NS_PER_US
    out["dur_us"] = num("duration") / NS_PER_US
    out["active_dur_us"] = num("activeDuration") / NS_PER_US
    for raw in ("allocationTotalAllocated", "allocationTotalReserved", "allocationTotalActive",
                "releaseTotalAllocated", "releaseTotalReserved", "releaseTotalActive"):
        snake = "".join("_" + ch.lower() if ch.isupper() else ch for ch in raw)
        out[f"{snake}_mb"] = num(raw) / BYTES_PER_MB
    out["stream_ptr"] = df["streamPtr"].astype(str)
    out["device_type"] = "NPU:" + df["deviceId"].astype(str)
    out.attrs["origin_us"] = origin
    out.attrs["path"] = str(path)
    return out


def npu_module_mem(run: RunFiles, origin_us: float | None = None) -> pd.DataFrame | None:
    """NPU_MODULE_MEM joined with ENUM_MODULE -> the npu_module_mem.csv frame: ``component`` (the CANN
    module), ``time_us`` (relative), ``reserved_mb``, ``device``."""
    path = main_db(run)
    if path is None or "NPU_MODULE_MEM" not in (have := tables(path)):
        return None
    name = "(SELECT name FROM ENUM_MODULE WHERE id = m.moduleId)" if "ENUM_MODULE" in have else "m.moduleId"
    df = query(path, f"""SELECT m.rowid AS rid, {name} AS component, {_t('m.timestampNs')} AS ts,
                                m.totalReserved AS r, m.deviceId AS dev FROM NPU_MODULE_MEM m""")
    df = clean_times(path, df, "NPU_MODULE_MEM", "ts", what=("timestampNs", None))
    df = df.sort_values("ts", kind="stable").reset_index(drop=True)
    origin = _origin(run, origin_us)
    out = pd.DataFrame({"component": df["component"].astype(str), "time_us": _rel_us(df["ts"], origin),
                        "reserved_mb": pd.to_numeric(df["r"], errors="coerce").astype("float64") / BYTES_PER_MB,
                        "device": "NPU:" + df["dev"].astype(str)})
    out.attrs["path"] = str(path)
    return out


# -- communication ----------------------------------------------------------------------------------
def communication(run: RunFiles) -> pd.DataFrame | None:
    """COMMUNICATION_OP -> the communication frame: one row per op of this rank. ``step`` ("step<N>" from
    the STEP_TIME window, as communication.json keys steps), ``group`` (group name), ``kind`` (the op
    type), ``op_name``, ``rank``, ``start_us`` (absolute), ``elapse_ms``, ``wait_ms`` (where written);
    the transit/sync/idle split is not in the database (NaN)."""
    path = main_db(run)
    if path is None or "COMMUNICATION_OP" not in (have := tables(path)):
        return None
    cols = have["COMMUNICATION_OP"]
    sql = f"""SELECT o.rowid AS rid, {_s('o', 'opName', 'op_name')}, {_s('o', 'groupName', 'grp')},
                     {_s('o', 'opType', 'op_type') if 'opType' in cols else "'' AS op_type"},
                     {_t('o.startNs')} AS s, {_t('o.endNs')} AS e, {'o.waitNs' if 'waitNs' in cols else 'NULL'} AS w
              FROM COMMUNICATION_OP o"""
    weigh(path, [(sql, (), "COMMUNICATION_OP")] + ([(STEP_SQL, (), "STEP_TIME")] if "STEP_TIME" in have else []),
          "the communication frame")
    df = query(path, sql, estimate=False)
    df = clean_times(path, df, "COMMUNICATION_OP", "s", "e", what=("startNs", "endNs"))
    df = df.sort_values("s", kind="stable").reset_index(drop=True)
    decode_strings(path, df, ["op_name", "grp"] + (["op_type"] if "opType" in cols else []), "COMMUNICATION_OP")
    steps = _step_of(df["s"], step_windows_ns(path, have))
    rank = str(run.info.get("rank_id", run.device))
    out = pd.DataFrame({"step": ["step" + str(s) if pd.notna(s) else "step" for s in steps],
                        "group": df["grp"].fillna("").astype(str), "kind": df["op_type"].fillna("").astype(str),
                        "op_name": df["op_name"].fillna("").astype(str), "rank": rank,
                        "start_us": df["s"].astype("float64") / NS_PER_US,
                        "elapse_ms": (df["e"] - df["s"]).astype("float64") / 1e6,
                        "transit_ms": np.nan,
                        "wait_ms": pd.to_numeric(df["w"], errors="coerce").astype("float64") / 1e6,
                        "sync_ms": np.nan, "idle_ms": np.nan, "wait_ratio": np.nan, "sync_ratio": np.nan})
    out = out[COMM_COLUMNS]
    out.attrs["path"] = str(path)
    return out


# -- analysis.db / communication_analyzer.db: per-rank communication analysis -------------------------
def _analysis_table(run: RunFiles, table: str) -> tuple[Path, set[str]] | None:
    """(file, columns) of the analysis database holding ``table`` (torch_npu's analysis.db, MindSpore's
    communication_analyzer.db, msprof-analyze's cluster_analysis.db), or None."""
    for path in run.all("analysis_db") + run.all("cluster_analysis_db"):
        have = tables(path)
        if table in have:
            return path, have[table]
    return None


def _col(cols: set[str], *names: str) -> str:
    """The first of ``names`` the table has, as SQL, else NULL (the writers disagree on a few names)."""
    return next((f'"{n}"' for n in names if n in cols), "NULL")


def _rank_filter(run: RunFiles, cols: set[str], column: str = "rank_id") -> str:
    """SQL keeping this run's rows of a cluster table (one rank's rows of the cluster database)."""
    if column not in cols or not str(run.device).isdigit():
        return "1"
    return f'CAST("{column}" AS INTEGER) = {int(run.device)}'


def analysis_communication(run: RunFiles, cluster: bool = False) -> pd.DataFrame | None:
    """CommAnalyzerTime (communication.json's time info, ms) -> the `communication` frame; ``cluster``:
    this rank's rows of cluster_analysis.db's ClusterCommAnalyzerTime."""
    found = _analysis_table(run, "ClusterCommAnalyzerTime" if cluster else "CommAnalyzerTime")
    if found is None:
        return None
    path, cols = found
    table = "ClusterCommAnalyzerTime" if cluster else "CommAnalyzerTime"
    df = query(path, f"""SELECT {_col(cols, 'step')} AS step, {_col(cols, 'group_name')} AS "group",
        {_col(cols, 'type')} AS kind, {_col(cols, 'hccl_op_name', 'op_name')} AS op_name,
        {_col(cols, 'start_timestamp')} AS start_us, {_col(cols, 'elapse_time', 'elapsed_time')} AS elapse_ms,
        {_col(cols, 'transit_time')} AS transit_ms, {_col(cols, 'wait_time')} AS wait_ms,
        {_col(cols, 'synchronization_time')} AS sync_ms, {_col(cols, 'idle_time')} AS idle_ms,
        {_col(cols, 'wait_time_ratio')} AS wait_ratio, {_col(cols, 'synchronization_time_ratio')} AS sync_ratio
        FROM {table} WHERE {_rank_filter(run, cols)}""")
    df["rank"] = str(run.info.get("rank_id", run.device))
    for c in ("step", "group", "kind", "op_name"):
        df[c] = df[c].fillna("").astype(str)
    for c in COMM_COLUMNS[5:]:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    out = df[COMM_COLUMNS]
    out.attrs["path"] = str(path)
    return out


def analysis_links(run: RunFiles, cluster: bool = False) -> pd.DataFrame | None:
    """CommAnalyzerBandwidth (one row per op, transport and packet size) -> the `communication_links`
    frame: per op and transport ``size_mb``, ``transit_ms``, ``bandwidth_gbps``, ``large_packet_ratio``
    as written (the same on every packet-size row) and ``packets`` (the counts summed)."""
    table = "ClusterCommAnalyzerBandwidth" if cluster else "CommAnalyzerBandwidth"
    found = _analysis_table(run, table)
    if found is None:
        return None
    path, cols = found
    df = query(path, f"""SELECT {_col(cols, 'step')} AS step, {_col(cols, 'group_name')} AS "group",
        {_col(cols, 'type')} AS kind, {_col(cols, 'hccl_op_name', 'op_name')} AS op_name,
        {_col(cols, 'band_type', 'transport_type')} AS transport, max({_col(cols, 'transit_size')}) AS size_mb,
        max({_col(cols, 'transit_time')}) AS transit_ms, max({_col(cols, 'bandwidth')}) AS bandwidth_gbps,
        max({_col(cols, 'large_packet_ratio')}) AS large_packet_ratio, sum({_col(cols, 'count')}) AS packets
        FROM {table} WHERE {_rank_filter(run, cols)} GROUP BY 1, 2, 3, 4, 5""")
    df["rank"] = str(run.info.get("rank_id", run.device))
    for c in ("step", "group", "kind", "op_name", "transport"):
        df[c] = df[c].fillna("").astype(str)
    for c in ("size_mb", "transit_ms", "bandwidth_gbps", "large_packet_ratio"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    df["packets"] = _ints(df["packets"]).fillna(0).astype("int64")
    out = df[LINK_COLUMNS]
    out.attrs["path"] = str(path)
    return out


def analysis_matrix(run: RunFiles, cluster: bool = False) -> pd.DataFrame | None:
    """CommAnalyzerMatrix (communication_matrix.json as a table) -> the `communication_matrix` frame;
    ``cluster``: the links of cluster_analysis.db's ClusterCommAnalyzerMatrix whose source is this rank."""
    table = "ClusterCommAnalyzerMatrix" if cluster else "CommAnalyzerMatrix"
    found = _analysis_table(run, table)
    if found is None:
        return None
    path, cols = found
    from .families import MATRIX_COLUMNS
    df = query(path, f"""SELECT {_col(cols, 'step')} AS step, {_col(cols, 'group_name', 'type')} AS "group",
        {_col(cols, 'op_name', 'hccl_op_name')} AS op_name, {_col(cols, 'src_rank')} AS src,
        {_col(cols, 'dst_rank')} AS dst, {_col(cols, 'transport_type')} AS transport,
        {_col(cols, 'transit_size')} AS size_mb, {_col(cols, 'transit_time')} AS transit_ms,
        {_col(cols, 'bandwidth')} AS bandwidth_gbps FROM {table}
        WHERE {_rank_filter(run, cols, 'src_rank') if cluster else '1'}""")
    for c in ("step", "group", "op_name", "transport"):
        df[c] = df[c].fillna("").astype(str)
    for c in ("src", "dst"):
        df[c] = _ints(df[c]).astype(str)
    for c in ("size_mb", "transit_ms", "bandwidth_gbps"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    out = df[MATRIX_COLUMNS]
    out.attrs["path"] = str(path)
    return out


def cluster_step_trace(run: RunFiles) -> pd.DataFrame | None:
    """cluster_analysis.db's ClusterStepTraceTime (cluster_step_trace_time.csv as a table, us): the rows of
    this rank (``type`` rank, ``index`` = the rank) as a step frame in ms."""
    found = _analysis_table(run, "ClusterStepTraceTime")
    if found is None:
        return None
    path, cols = found
    df = query(path, 'SELECT * FROM ClusterStepTraceTime WHERE lower("type") = \'rank\' AND "index" = ?',
               (str(run.device),))
    out = pd.DataFrame({"step": pd.to_numeric(df["step"].astype(str).str.extract(r"(\d+)")[0], errors="coerce")
                        .fillna(0).astype("int64")})
    for col in STEP_TIME_COLUMNS:
        if col[:-3] in df.columns:
            out[col] = pd.to_numeric(df[col[:-3]], errors="coerce").astype("float64") / 1000.0
    if "computing_ms" not in out:
        raise MissingColumnError(path, "table ClusterStepTraceTime lacks column computing", field="computing")
    out["total_ms"] = out[[c for c in STACKED if c in out]].fillna(0.0).sum(axis=1)
    out.attrs["path"] = str(path)
    return out


def cluster_ranks(run: RunFiles) -> list[str]:
    """Rank ids of cluster_analysis.db: ClusterStepTraceTime's rank rows, else ClusterCommAnalyzerTime's."""
    found = _analysis_table(run, "ClusterStepTraceTime")
    if found is not None:
        ranks = query(found[0], 'SELECT DISTINCT "index" AS r FROM ClusterStepTraceTime '
                                "WHERE lower(\"type\") = 'rank'")["r"]
    else:
        found = _analysis_table(run, "ClusterCommAnalyzerTime")
        if found is None:
            return []
        ranks = query(found[0], "SELECT DISTINCT rank_id AS r FROM ClusterCommAnalyzerTime")["r"]
    ranks = {str(int(r)) if str(r).strip().lstrip("-").isdigit() else str(r) for r in ranks.dropna()}
    return sorted(ranks, key=lambda r: (0, int(r)) if r.isdigit() else (1, r))


def cluster_groups(run: RunFiles) -> pd.DataFrame | None:
    """cluster_analysis.db's CommunicationGroup -> the `communication_groups` frame."""
    found = _analysis_table(run, "CommunicationGroup")
    if found is None:
        return None
    path, cols = found
    df = query(path, f"SELECT {_col(cols, 'type')} AS kind, {_col(cols, 'rank_set')} AS rank_set "
                     "FROM CommunicationGroup")
    import re as _re
    ranks = [tuple(sorted((str(int(x)) for x in _re.findall(r"\d+", str(v))), key=int)) for v in df["rank_set"]]
    out = pd.DataFrame({"kind": df["kind"].fillna("").astype(str),
                        "group": df.groupby("kind").cumcount().astype("int64"),
                        "ranks": ranks, "size": [len(r) for r in ranks]})
    out["size"] = out["size"].astype("int64")
    out.attrs["path"] = str(path)
    return out


# -- timeline ---------------------------------------------------------------------------------------
def timeline(run: RunFiles, origin_us: float | None = None) -> tuple[pd.DataFrame, ...] | None:
    """(timeline, timeline_tracks, timeline_flows) as the trace_view.json parser gives them (times relative
    to ``origin_us``, else to the database's own origin), from the database: device
    tasks per stream (process "Ascend Hardware", thread "Stream <id>"), communication ops (process
    "Communication"), CANN API calls and framework (PyTorch/MindSpore) API calls per host thread."""
    path = main_db(run)
    if path is None:
        return None
    have = tables(path)
    # the queries first, weighed together (`weigh`) before the first is read or the origin computed:
    # (what, table, sql), text columns as STRING_IDS ids decoded once per distinct id (`decode_strings`)
    plan = []
    if "TASK" in have:
        comp = "COMPUTE_TASK_INFO" in have
        plan.append(("task", "TASK", f"""
            SELECT t.rowid AS rid, t.streamId AS thread, {_t('t.startNs')} AS s, {_t('t.endNs')} AS e,
                   {"c.name" if comp else "NULL"} AS name, {"c.opType" if comp else "NULL"} AS op_type,
                   t.taskType AS cat, {"t.connectionId" if "connectionId" in have["TASK"] else "NULL"} AS conn
            FROM TASK t {"LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId" if comp else ""}
            WHERE {_on_device(run, 't')}"""))
    if "COMMUNICATION_OP" in have:
        plan.append(("comm", "COMMUNICATION_OP", f"""SELECT o.rowid AS rid, o.groupName AS thread,
                     {_t('o.startNs')} AS s, {_t('o.endNs')} AS e, o.opName AS name, NULL AS op_type
                     FROM COMMUNICATION_OP o"""))
    if "CANN_API" in have:
        plan.append(("cann", "CANN_API", f"""
            SELECT a.rowid AS rid, a.globalTid % 4294967296 AS thread, {_t('a.startNs')} AS s,
                   {_t('a.endNs')} AS e, a.name AS name, a.type AS op_type,
                   {"a.connectionId" if "connectionId" in have["CANN_API"] else "NULL"} AS conn
            FROM CANN_API a"""))
    # framework APIs: PYTORCH_API (torch_npu), the framework's own <NAME>_API table (MindSpore), MSTX marks
    api_tables = [t for t in sorted(have) if t.endswith("_API") and t != "CANN_API"] + ["MSTX_EVENTS"]
    for table in api_tables:
        cols = have.get(table, set())
        if not {"startNs", "endNs", "globalTid"} <= cols or not {"name", "message"} & cols:
            continue
        name = "name" if "name" in cols else "message"
        kind = "a.type" if "type" in cols and "ENUM_API_TYPE" in have else "NULL"
        # a framework op's CONNECTION_IDS id: its connectionIds are the TASK rows' it launched
        # (`_framework_flows`) and the ids its Enqueue/Dequeue or forward/backward partner shares (`_queue_flows`)
        links = "connectionId" in cols and "CONNECTION_IDS" in have and table != "MSTX_EVENTS"
        plan.append((table, table, f"""
            SELECT a.rowid AS rid, a.globalTid % 4294967296 AS thread, {_t('a.startNs')} AS s,
                   {_t('a.endNs')} AS e, a."{name}" AS name, NULL AS op_type, {kind} AS cat,
                   {"a.connectionId" if links else "NULL"} AS links FROM "{table}" a"""))
    weigh(path, [(sql, (), table) for _, table, sql in plan], "the timeline")
    origin = _origin(run, origin_us)
    parts = []
    for what, table, sql in plan:
        df = query(path, sql, table=table, estimate=False)
        df = clean_times(path, df, table, "s", "e", what=("startNs", "endNs"))
        if what == "task":
            df["thread"] = _labels("Stream ", df["thread"])
            df["process"] = "Ascend Hardware"
            decode_strings(path, df, ["name", "op_type", "cat"], "COMPUTE_TASK_INFO/TASK")
            df["name"] = df["name"].where(df["name"].notna(), df["cat"])  # a task without compute info
        elif what == "comm":
            df["process"], df["cat"] = "Communication", "communication"
            decode_strings(path, df, ["thread", "name"], "COMMUNICATION_OP")
        elif what == "cann":
            df["thread"] = _labels("Thread ", df["thread"])
            if "ENUM_API_TYPE" in have:
                df["op_type"] = _enum(path, "ENUM_API_TYPE", df["op_type"])
            df["process"], df["cat"] = "CANN", "cann_api"
            decode_strings(path, df, ["name"], "CANN_API")
        else:
            df["thread"] = _labels("Thread ", df["thread"])
            df["process"] = ("MSTX" if table == "MSTX_EVENTS"
                             else f"{FRAMEWORK_NAMES.get(table[:-4], table[:-4].title())} API")
            typed = "type" in have[table] and "ENUM_API_TYPE" in have
            df["cat"] = _enum(path, "ENUM_API_TYPE", df["cat"]) if typed else table.lower()
            decode_strings(path, df, ["name"], table)
        parts.append(df)
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    procs = list(dict.fromkeys(p["process"].iloc[0] for p in parts))  # one process per part, in their order
    ev = pd.concat(parts, ignore_index=True)
    del parts
    # tracks: the (process, thread label) pairs in order of appearance, found among the rows that first show
    # each pair of row values (the labels are shared objects: no string is made per row)
    pcodes, _ = pd.factorize(ev["process"])
    tcodes, tuniq = pd.factorize(ev["thread"])
    pair, _ = pd.factorize(pcodes.astype("int64") * (len(tuniq) + 1) + tcodes + 1)
    first = ev.iloc[np.unique(pair, return_index=True)[1]][["process", "thread"]].reset_index(drop=True)
    first["thread"] = first["thread"].fillna("").astype(str)
    keys = first.drop_duplicates().reset_index(drop=True)
    keys["process_sort"] = keys["process"].map({p: i for i, p in enumerate(procs)}).astype("int64")
    keys = keys.sort_values(["process_sort", "thread"], kind="stable").reset_index(drop=True)
    keys["track"] = np.arange(len(keys), dtype="int32")
    ev["track"] = first.merge(keys[["process", "thread", "track"]], on=["process", "thread"], how="left")[
        "track"].to_numpy(dtype="int32")[pair]
    name_codes, names = pd.factorize(ev["name"].fillna(""))
    # the type the database names where it names one, else derived from the name as for trace_view.json
    from .trace import op_type_of
    derived = np.array([op_type_of(n) for n in pd.Series(names, dtype=object).astype(str)] + [None], dtype=object)
    op_type = ev["op_type"].to_numpy(dtype=object, copy=True)
    own = ev["op_type"].notna().to_numpy() & ~ev["op_type"].isin(["N/A", ""]).to_numpy()
    op_type[~own] = derived[name_codes[~own]]
    n = len(ev)
    tl = pd.DataFrame({"track": ev["track"].astype("int32"), "name": _categorical(name_codes, names),
                       "op_type": _categorical(*pd.factorize(op_type)),
                       "ph": pd.Categorical.from_codes(np.zeros(n, dtype="int8"), categories=pd.Index(["X"])),
                       "cat": _categorical(*pd.factorize(ev["cat"].fillna(""))),
                       "start_us": _rel_us(ev["s"], origin),
                       "dur_us": (pd.to_numeric(ev["e"]) - pd.to_numeric(ev["s"])).astype("float64") / NS_PER_US,
                       "args": pd.Series(np.full(n, None, dtype=object))})
    flows = _launch_flows(ev, tl["start_us"])
    if "links" in ev and ev["links"].notna().any():
        flows = pd.concat([flows, _framework_flows(path, ev, tl["start_us"]), _queue_flows(path, ev, tl["start_us"])],
                          ignore_index=True)
    tl = tl.sort_values(["track", "start_us"], kind="stable").reset_index(drop=True)
    counts = tl.groupby("track").size()
    tracks = pd.DataFrame({"track": keys["track"], "pid": keys["process"], "tid": keys["thread"],
                           "process": keys["process"], "thread": keys["thread"],
                           "process_sort": keys["process_sort"], "thread_sort": np.arange(len(keys), dtype="int64"),
                           "events": keys["track"].map(counts).fillna(0).astype("int64")})
    tl.attrs["path"] = tracks.attrs["path"] = flows.attrs["path"] = str(path)
    return tl, tracks, flows


def call_stacks(run: RunFiles, origin_us: float | None = None) -> pd.DataFrame | None:
    """The Python stacks a framework recorded (torch_npu's ``with_stack``) for its API calls, one row per
    event with a stack: ``process``/``thread`` as `timeline` labels the call's track, ``name``, ``start_us``
    (as `timeline` places the call) and ``text``, the stack's frame texts as a tuple, innermost
    (stackDepth 0) first. Read from each ``<FRAMEWORK>_API`` table with a ``callchainId`` and its
    ``<FRAMEWORK>_CALLCHAINS`` (PYTORCH_API and PYTORCH_CALLCHAINS; texts in STRING_IDS). None when the
    database has no stacks."""
    path = main_db(run)
    if path is None:
        return None
    have = tables(path)
    pairs = [(t, t[:-4] + "_CALLCHAINS") for t in sorted(have) if t.endswith("_API") and t != "CANN_API"
             and {"startNs", "endNs", "globalTid", "name", "callchainId"} <= have[t]
             and {"id", "stack", "stackDepth"} <= have.get(t[:-4] + "_CALLCHAINS", set())]
    plan = [(api, chains, f"""SELECT a.rowid AS rid, a.globalTid % 4294967296 AS thread, {_t('a.startNs')} AS s,
                              {_t('a.endNs')} AS e, a.name AS name, a.callchainId AS stack
                              FROM "{api}" a WHERE a.callchainId IS NOT NULL""",
             f'SELECT id, stack AS frame, stackDepth AS depth FROM "{chains}" ORDER BY id, stackDepth')
            for api, chains in pairs]
    if not plan:
        return None
    weigh(path, [q for api, chains, sql_api, sql_chain in plan
                 for q in ((sql_api, (), api), (sql_chain, (), chains))], "the call stacks")
    origin = _origin(run, origin_us)
    parts = []
    for api, chains, sql_api, sql_chain in plan:
        ev = query(path, sql_api, table=api, estimate=False)
        ev = clean_times(path, ev, api, "s", "e", what=("startNs", "endNs"))
        stack = _ints(ev["stack"])
        ev, stack = ev[stack.notna().to_numpy()].reset_index(drop=True), stack.dropna().reset_index(drop=True)
        if ev.empty:
            continue
        chain = query(path, sql_chain, table=chains, estimate=False)
        decode_strings(path, chain, ["frame"], chains)
        texts = {int(k): tuple("" if f is None or f != f else f for f in g["frame"])
                 for k, g in chain.groupby("id", sort=False)}
        decode_strings(path, ev, ["name"], api)
        parts.append(pd.DataFrame({"process": f"{FRAMEWORK_NAMES.get(api[:-4], api[:-4].title())} API",
                                   "thread": _labels("Thread ", ev["thread"]).to_numpy(),
                                   "name": ev["name"].fillna("").astype(str).to_numpy(),
                                   "start_us": _rel_us(ev["s"], origin).to_numpy(),
                                   "text": [texts.get(int(k)) for k in stack]}))
    return pd.concat(parts, ignore_index=True) if parts else None


def _categorical(codes: np.ndarray, uniques) -> pd.Categorical:
    """The categorical ``pd.Categorical(values.astype(str))`` gives, from ``values`` factorized (``codes``,
    ``uniques``; code -1 is missing): only the distinct values are made texts."""
    cat = pd.Categorical(pd.Series(uniques, dtype=object).astype(str))
    return pd.Categorical.from_codes(np.append(cat.codes, -1)[codes], dtype=cat.dtype)


def _enum(path: Path, table: str, codes: pd.Series) -> pd.Series:
    """The names an ``id, name`` enum table gives ``codes`` (None where it has none), as a subquery
    ``(SELECT name FROM table WHERE id = code)`` would: a code is compared as a number."""
    names = dict(query(path, f"SELECT id, name FROM {table}", estimate=False).itertuples(index=False))
    num = pd.to_numeric(codes, errors="coerce")
    return _per_distinct(num, lambda u: u.map({v: names.get(v) for v in u}).astype(object))


def _labels(prefix: str, keys: pd.Series) -> pd.Series:
    """``prefix`` + each key as SQL's ``||`` writes it ("Stream 2", "Thread 7"; NULL stays NULL), one string
    per distinct key."""
    def text(v):
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if keys.dtype.kind == "f" and abs(v) < 2 ** 53 and v == int(v):  # integer keys read as floats (NULLs)
            v = int(v)
        return prefix + str(v)
    return _per_distinct(keys, lambda u: u.map({v: text(v) for v in u}).astype(object))


def _framework_flows(path: Path, ev: pd.DataFrame, start_us: pd.Series) -> pd.DataFrame:
    """The arrows between framework calls that trace_view.json draws: from an ``Enqueue`` to the
    ``Dequeue@...`` that took its work off torch_npu's task queue on another thread (``async_task_queue``),
    and from a forward op to its backward op (``fwdbwd``): the calls whose CONNECTION_IDS sets share a
    connection id, from the earliest to each later one on another thread."""
    cols = ["cat", "id", "name", "start_track", "start_us", "end_track", "end_us"]
    links = query(path, "SELECT id, connectionId AS conn FROM CONNECTION_IDS", table="CONNECTION_IDS",
                  estimate=False)
    calls = pd.DataFrame({"queue_ids": _ints(ev["links"]).to_numpy(), "track": ev["track"].to_numpy(),
                          "start_us": start_us.to_numpy(), "name": ev["name"].to_numpy()}).dropna(subset=["queue_ids"])
    links = links.assign(id=_ints(links["id"]).to_numpy(), conn=_ints(links["conn"]).to_numpy()).dropna()
    m = calls.merge(links, left_on="queue_ids", right_on="id").sort_values(["conn", "start_us"], kind="stable")
    first = m.drop_duplicates("conn", keep="first")
    rest = m[~m.index.isin(first.index)].merge(first[["conn", "track", "start_us", "name"]], on="conn",
                                                suffixes=("", "_s"))
    rest = rest[rest["track"] != rest["track_s"]]
    cat = np.where(rest["name_s"].astype(str).to_numpy() == "Enqueue", "async_task_queue", "fwdbwd")
    return pd.DataFrame({"cat": cat, "id": rest["conn"].astype("int64").astype(str),
                         "name": rest["name_s"].fillna("").astype(str),
                         "start_track": rest["track_s"].astype("int32"),
                         "start_us": rest["start_us_s"].astype("float64"),
                         "end_track": rest["track"].astype("int32"), "end_us": rest["start_us"].astype("float64")},
                        columns=cols).drop_duplicates(cols[3:]).reset_index(drop=True)


def _launch_flows(ev: pd.DataFrame, start_us: pd.Series) -> pd.DataFrame:
    """HostToDevice arrows, as trace_view.json draws them: from the CANN ``node`` API call that launched a
    kernel to the first device task of the same ``connectionId``."""
    cols = ["cat", "id", "name", "start_track", "start_us", "end_track", "end_us"]
    if "conn" not in ev or ev["conn"].isna().all():
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    ev = ev.assign(start_us=start_us.to_numpy())
    launches = ev[(ev["process"] == "CANN") & ev["conn"].notna()]
    if (launches["op_type"] == "node").any():
        launches = launches[launches["op_type"] == "node"]
    tasks = ev[(ev["process"] == "Ascend Hardware") & ev["conn"].notna()]
    src = launches.sort_values("start_us").drop_duplicates("conn", keep="last")
    dst = tasks.sort_values("start_us").drop_duplicates("conn", keep="first")
    m = src.merge(dst, on="conn", suffixes=("_s", "_d"))
    return pd.DataFrame({"cat": "HostToDevice", "id": _ints(m["conn"]).astype(str),
                         "name": m["name_s"].fillna("").astype(str),
                         "start_track": m["track_s"].astype("int32"), "start_us": m["start_us_s"].astype("float64"),
                         "end_track": m["track_d"].astype("int32"), "end_us": m["start_us_d"].astype("float64")},
                        columns=cols)


def _queue_flows(path: Path, ev: pd.DataFrame, start_us: pd.Series) -> pd.DataFrame:
    """``async_npu`` arrows, as trace_view.json draws them: from the framework op (PYTORCH_API, MindSpore's
    API table) to the first device task of each connectionId its CONNECTION_IDS id lists."""
    ids = query(path, "SELECT id, connectionId FROM CONNECTION_IDS", estimate=False)
    ev = ev.assign(start_us=start_us.to_numpy())
    ops = ev[ev["links"].notna()].assign(links=lambda d: _ints(d["links"]).to_numpy())
    ops = ops.merge(ids.assign(id=_ints(ids["id"]).to_numpy(), conn=_ints(ids["connectionId"]).to_numpy())[
        ["id", "conn"]], left_on="links", right_on="id", suffixes=("_x", ""))
    tasks = ev[(ev["process"] == "Ascend Hardware") & ev["conn"].notna()]
    tasks = tasks.assign(conn=_ints(tasks["conn"]).to_numpy())
    src = ops.sort_values("start_us").drop_duplicates("conn", keep="last")
    dst = tasks.sort_values("start_us").drop_duplicates("conn", keep="first")
    m = src.merge(dst, on="conn", suffixes=("_s", "_d"))
    name = m["process_s"].map(lambda p: f"{str(p).split()[0].lower().replace('pytorch', 'torch')}_to_npu")
    return pd.DataFrame({"cat": "async_npu", "id": m["conn"].astype(str), "name": name.astype(str),
                         "start_track": m["track_s"].astype("int32"), "start_us": m["start_us_s"].astype("float64"),
                         "end_track": m["track_d"].astype("int32"), "end_us": m["start_us_d"].astype("float64")})


__all__ = ["connect", "query", "tables", "main_db", "has_db", "task_devices", "info", "origin_us", "step_trace",
           "kernels", "kernel_type_totals", "op_type_totals", "analysis_communication", "analysis_links",
           "analysis_matrix", "cluster_step_trace", "cluster_ranks", "cluster_groups", "memory", "operator_memory",
           "npu_module_mem", "communication", "timeline", "call_stacks"]
