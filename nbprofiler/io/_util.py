"""Reading primitives shared by all parsers: every failure becomes a typed `ProfilerDataError` that
names the file and the line/field, never a bare pandas/json/UnicodeDecodeError."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import (EmptyFileError, FileTooLargeError, MalformedFileError, MissingColumnError,
                      ProfilerDataError, ProfilerDataWarning, TruncatedFileError)

# A file is refused when parsing it would need more than this fraction of the available memory,
# given the parser family's peak memory per byte of input (`EXPANSION`).
MEMORY_FRACTION = 0.8

# Peak memory of loading a file (through nbprofiler.load and its frame), per byte of the file, by parser
# family and shape: the worst case measured by benchmarks/bench_memory_guard.py on 100 MB files (peak RSS
# of a fresh process minus that of an import-only one) x 1.25. Every `check_size` caller names its row.
# Shapes that cost much more than their family's usual ones are charged only when they are seen:
# ``trace_big_event`` when an event is too large for the first read (`io.trace.parse._MAX_EVENT`),
# ``trace_document`` when an object-form trace has to be read as one document, ``trace_exact`` before the
# stdlib parse that locates an error, ``csv_careful`` when a CSV's rows are not all as wide as its header.
EXPANSION = {
    "trace": 3.6,             # measured 2.82 (array form, many small events; object form 2.71)
    "trace_disk": 0.2,        # measured 0.11 (per byte between 1 and 10 GB; plus `TRACE_DISK_BASE_BYTES`)
    "trace_big_event": 10.8,  # measured 8.60 (one 100 MB name string; in args 3.47)
    "trace_document": 10.0,   # measured 8.00 (object form whose event array cannot be placed)
    "trace_exact": 9.3,       # measured 7.38 (invalid JSON 90 % into an object-form trace; array form 4.69)
    "csv": 8.7,               # measured 6.94 (short numeric fields; kernel_details rows 6.50, one field 6.06)
    "csv_careful": 24.7,      # measured 19.70 (kernel_details rows + one short row; a row of commas 16.03)
    "json": 12.8,             # measured 10.22 (arrays of numbers; nested objects 5.97, one string 5.96)
    "text": 19.7,             # measured 15.73 (one line of numbers; short records 14.94, op records 13.19)
}

# What a trace loaded on disk (`nbprofiler.io.trace.disk`) needs whatever its size (the reader's batches,
# one output batch, duckdb pairing the flows under its memory limit): measured 600 MB x 1.25.
TRACE_DISK_BASE_BYTES = 750_000_000


def available_memory_bytes() -> int:
    """Memory that can be allocated without swapping: the kernel's MemAvailable (what psutil reports on
    Linux, read without importing it: the first file a profile reads asks), else psutil's ``available``."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # another platform, or a kernel without MemAvailable
        import psutil
        return int(psutil.virtual_memory().available)
    except Exception:
        return 1 << 62


def check_size(path: Path, family: str, extra_bytes: int = 0) -> int:
    """The file's size; raises `FileTooLargeError` if parsing it as ``family`` (a key of `EXPANSION`)
    would need more than `MEMORY_FRACTION` of the available memory. ``extra_bytes``: memory the parse
    needs besides the file's share (e.g. for one event the size of the reader's largest object)."""
    try:
        factor = EXPANSION[family]
    except KeyError:
        raise ValueError(f"unknown parser family {family!r}; the memory guard knows {sorted(EXPANSION)}") from None
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ProfilerDataError(path, f"cannot read: {e.strerror or e}") from None
    need = size * factor + extra_bytes
    avail = available_memory_bytes()
    if need > avail * MEMORY_FRACTION:
        raise FileTooLargeError(path, f"{size / 1e9:.1f} GB would need ~{need / 1e9:.1f} GB of memory to "
                                      f"parse ({family}: {factor:g}x the file), {avail / 1e9:.1f} GB available; "
                                      "refused before loading")
    return size


def warn_partial(err: ProfilerDataError) -> None:
    """Report data that was skipped while the rest of the file loaded (recorded in prof.problems)."""
    w = ProfilerDataWarning(str(err))
    w.error = err
    warnings.warn(w, stacklevel=2)


def _line_of_offset(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_bytes(path: Path, family: str = "text", limit: int | None = None) -> bytes:
    """The file's bytes, at most as many as its size when the memory guard checked it (as ``family``,
    see `EXPANSION`): a file that grows while it is read (a profiler still writing it) is read up to that
    size, with a warning. ``limit``: the size an earlier check allowed (a reader's check at open), read
    no further than that either (a file larger now is still checked at its size now)."""
    size = check_size(path, family)
    if limit is not None:
        size = min(size, limit)
    try:
        with open(path, "rb") as f:
            data = f.read(size + 1)
    except OSError as e:
        raise ProfilerDataError(path, f"cannot read: {e.strerror or e}") from None
    if len(data) > size:
        warn_partial(ProfilerDataError(path, f"the file grew while it was read (is it still being written?); "
                                             f"read its first {size:,} bytes"))
        data = data[:size]
    return data


def decode(path: Path, data: bytes) -> str:
    """UTF-8 text (BOM stripped); undecodable bytes raise `MalformedFileError` with their line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedFileError(path, f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
                                 line=_line_of_offset(data, e.start)) from None
    if "\x00" in text:
        off = text.index("\x00")
        raise MalformedFileError(path, "binary data (NUL byte) in a text file", line=text.count("\n", 0, off) + 1)
    return text.lstrip("\ufeff")


def read_text(path: Path, family: str = "text") -> str:
    data = read_bytes(path, family)
    if not data.strip():
        raise EmptyFileError(path, "file is empty")
    return decode(path, data)


# Python refuses to turn a longer run of digits into an int (sys.get_int_max_str_digits, 4300 by default).
_LONG_DIGITS = re.compile(r"\d{4000,}")
# Where nesting gets deep: 100 opening brackets in a row (blank space between them allowed).
_DEEP_NESTING = re.compile(r"(?:[\[{][ \t\r\n]{0,8}){100}")


def json_limit_error(path: Path, text: str, exc: BaseException, start: int = 0) -> MalformedFileError:
    """The typed error for what the standard library's json parser raises past its own limits, not as a
    `json.JSONDecodeError`: ``RecursionError`` (arrays/objects nested some thousand deep) and ``ValueError``
    (an integer of more than 4,300 digits). ``start``: where in ``text`` the value being decoded begins
    (its line is named; for a number, the line of the first overlong run of digits after it; for nesting,
    of the first run of 100 opening brackets after it, when there is one)."""
    if isinstance(exc, RecursionError):
        m = _DEEP_NESTING.search(text, start)
        return MalformedFileError(path, "JSON nested deeper than it can be read (no profiler writes that)",
                                  line=text.count("\n", 0, m.start() if m else start) + 1)
    m = _LONG_DIGITS.search(text, start)
    at = m.start() if m else start
    digits = f"{len(m.group()):,} digits" if m else "too many digits"
    return MalformedFileError(path, f"a JSON number of {digits}, longer than can be read (no profiler writes that)",
                              line=text.count("\n", 0, at) + 1)


def read_json(path: Path, family: str = "json"):
    """Parse a JSON file. Truncation (the document ends early) raises `TruncatedFileError`."""
    text = read_text(path, family)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        tail_ws = len(text) - len(text.rstrip())
        if e.pos >= len(text) - tail_ws - 1 or "Unterminated" in e.msg:
            raise TruncatedFileError(path, f"JSON ends early ({e.msg})", line=e.lineno) from None
        raise MalformedFileError(path, f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None
    except (RecursionError, ValueError) as e:
        raise json_limit_error(path, text, e) from None


# Row-level recovery: a row whose field count differs from the header's, or a cell that is not the
# number its column holds, costs that row (or cell) with a warning naming the line; the rest loads. A
# file where more than this fraction of the data rows is bad (and more than one row) is garbage, not a
# file with a damaged row: it is rejected whole with `MalformedFileError` naming the first bad line.
BAD_ROW_LIMIT = 0.10


def too_many_bad(n_bad: int, n_rows: int) -> bool:
    """True when ``n_bad`` of ``n_rows`` bad rows is past `BAD_ROW_LIMIT` (one bad row is always tolerated)."""
    return n_bad > 1 and n_bad > BAD_ROW_LIMIT * max(n_rows, 1)


def skipped_rows(path: Path, bad: list[tuple[int, str]], n_rows: int, what: str = "row") -> None:
    """Warn about skipped rows ``bad`` = [(line, reason)] of ``n_rows``, or raise when they are too many."""
    if not bad:
        return
    line, reason = bad[0]
    if too_many_bad(len(bad), n_rows):
        raise MalformedFileError(path, f"{len(bad)} of {n_rows} {what}s are malformed (more than "
                                       f"{BAD_ROW_LIMIT:.0%}: not a file with a damaged {what}); first: {reason}",
                                 line=line)
    more = f"; {len(bad) - 1} more {what}(s) skipped too, lines {', '.join(str(b[0]) for b in bad[1:6])}" \
        f"{'...' if len(bad) > 6 else ''}" if len(bad) > 1 else ""
    warn_partial(MalformedFileError(path, f"{reason}; {what} skipped, the other {n_rows - len(bad)} loaded{more}",
                                    line=line))


# The longest duration any reader accepts, in us (30 days: no profiled run is that long): a time that is
# negative or longer (1e300 ms makes one operator 100 % of its run) is an impossible one. The trace
# readers skip such events (`nbprofiler.io.trace.frames`), the table readers such rows (`drop_impossible_times`).
MAX_DURATION_US = 30 * 24 * 3600 * 1e6


def drop_impossible_times(out: pd.DataFrame, df: pd.DataFrame, path: Path, columns: dict,
                          first_data_line: int = 2) -> pd.DataFrame:
    """``out`` without its rows whose time is impossible: negative or over `MAX_DURATION_US` (a value that
    is not finite is already NaN, reported by `numeric`). ``out`` has ``df``'s rows in ``df``'s order (the
    frame `read_csv` returned, for the lines); ``columns`` maps a column of ``out`` to (the file's field,
    its factor to us). Worded as the trace readers word an impossible ``dur``; past `BAD_ROW_LIMIT` of the
    rows the file is garbage (`MalformedFileError`)."""
    bad = np.zeros(len(out), dtype=bool)
    first = None  # (position, field, value in us)
    for col, (field, to_us) in columns.items():
        if col not in out:
            continue
        v = out[col].to_numpy(dtype="float64", na_value=np.nan) * to_us
        with np.errstate(invalid="ignore"):
            here = (v < 0) | (v > MAX_DURATION_US)
        if here.any():
            i = int(np.flatnonzero(here)[0])
            if first is None or i < first[0]:
                first = (i, field, float(v[i]))
            bad |= here
    if first is None:
        return out
    i, field, value = first
    n = int(bad.sum())
    what = f"with an impossible {field!r} ({value!r} us: negative, not finite or over {MAX_DURATION_US:.0e} us)"
    line = line_of(df, i, first_data_line)
    if too_many_bad(n, len(out)):
        raise MalformedFileError(path, f"{n} of {len(out)} rows {what} (more than {BAD_ROW_LIMIT:.0%}: not a file "
                                       "with a damaged row)", line=line, field=field)
    warn_partial(MalformedFileError(path, f"{n} row(s) {what} skipped (the first is shown)", line=line,
                                    field=field))
    return out[~bad]


# Cells that hold no value: a row made of nothing else is no record (never an operator named "nan").
NO_VALUE = ("", "nan", "NaN", "NAN", "N/A", "NA", "None", "null", "NULL", "-")


def _drop_empty_rows(path: Path, df: pd.DataFrame, some_columns: bool) -> pd.DataFrame:
    """``df`` without the rows whose every field is empty or ``nan`` (`NO_VALUE`), with `skipped_rows`'
    warning naming their lines (rejected whole past `BAD_ROW_LIMIT`)."""
    if not len(df) or not len(df.columns):
        return df
    empty = df.iloc[:, 0].str.strip().isin(NO_VALUE).to_numpy()
    if not empty.any():
        return df
    rows = np.flatnonzero(empty)
    for c in range(1, len(df.columns)):
        col = df.iloc[rows, c]
        rows = rows[col.str.strip().isin(NO_VALUE).to_numpy()]
        if not len(rows):
            return df
    reason = f"every field{' read' if some_columns else ''} is empty or 'nan' (no record)"
    skipped_rows(path, [(line_of(df, int(i)), reason) for i in rows], len(df))
    keep = np.ones(len(df), dtype=bool)
    keep[rows] = False
    return df[keep]


def cut_last_record(path: Path, text: str, bad: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``bad`` ([(line, record text)] of a line reader's malformed records) without the file's last line
    when that line is one of them and the file ends without a newline: a record cut off mid-write, warned
    about as such (`TruncatedFileError` naming the line) rather than as a malformed one."""
    if bad and text and not text.endswith(("\n", "\r")) and bad[-1][0] == len(text.splitlines()):
        line, raw = bad[-1]
        warn_partial(TruncatedFileError(path, f"the file ends in the middle of its last record {raw.strip()[:60]!r} "
                                              "(no final newline: cut off); record dropped", line=line))
        return bad[:-1]
    return bad


def line_of(df: pd.DataFrame, i: int, first_data_line: int = 2) -> int | None:
    """The 1-based file line of the ``i``-th row of a frame from `read_csv` (its index is the row's
    position among the file's rows; ``attrs["lines"]`` maps positions to lines when they differ)."""
    idx = df.index[i]
    if not isinstance(idx, (int, np.integer)):
        return None
    lines = df.attrs.get("lines")
    if lines is not None and 0 <= idx < len(lines):
        return int(lines[idx])
    return int(idx) + first_data_line


def _record_widths(data: bytes, sep: str) -> np.ndarray | None:
    """Fields per non-blank record of a CSV, found without parsing it: separators and line ends outside
    double quotes, vectorised (a position is inside quotes when an odd number of quotes precede it, so the
    quoted spans are the quote pairs (0, 1), (2, 3), ...; a doubled quote closes and reopens a span). None
    when the text has a quote inside an unquoted field, an unterminated quote or a lone ``\\r`` line end,
    which only a real parser reads right."""
    if len(sep) != 1 or data.count(b"\r") != data.count(b"\r\n"):
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(buf == 34)
    seps = np.flatnonzero(buf == ord(sep))
    ends = np.flatnonzero(buf == 10)
    if len(quotes) % 2:
        return None
    if len(quotes):
        # a quote must open a field (after a separator/line start) or close one (before sep/line end/quote)
        prev = buf[np.maximum(quotes - 1, 0)]
        prev[quotes == 0] = 10
        nxt = buf[np.minimum(quotes + 1, len(buf) - 1)]
        nxt[quotes == len(buf) - 1] = 10
        edge = np.array([34, ord(sep), 10, 13], dtype=np.uint8)
        if not (np.isin(prev, edge[:3]) | np.isin(nxt, edge)).all():
            return None
        opens, closes = quotes[0::2], quotes[1::2]
        ends = ends[np.searchsorted(quotes, ends) % 2 == 0]  # line ends inside quotes are data
    if not len(ends) or ends[-1] != len(buf) - 1:
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1] + 1))
    per = np.diff(np.concatenate(([0], np.searchsorted(seps, ends))))
    if len(quotes):
        inside = np.searchsorted(seps, closes) - np.searchsorted(seps, opens)
        per = per - np.bincount(np.searchsorted(ends, opens), weights=inside, minlength=len(ends)).astype(per.dtype)
    length = ends - starts
    blank = (per == 0) & ((length == 0) | ((length == 1) & (buf[np.minimum(starts, len(buf) - 1)] == 13)))
    return per[~blank] + 1


# -- Arrow's allocator while frames are built, written or read back ----------------------------------------
# pyarrow's default allocator on Linux is mimalloc, which advises its 1 GiB arena for transparent huge pages.
# A trace build allocates and frees many 0.1-5 MB buffers per batch (casts, dictionary codes, the args
# gather), and a cache write its compressed buffers: as mimalloc purges freed pages and reuses them, each
# first touch zeroes a whole 2 MB page, which made some loads markedly slower in the kernel; with jemalloc or
# the system allocator none were. jemalloc, where pyarrow has it: glibc's malloc kept what a large build
# freed, raising the session's peak (the measurements: benchmarks/README.md, "Notes moved from code comments").
# The switch is pyarrow's default pool: Arrow's C++ code that takes no pool from Python (the IPC reader's
# decompression, unless named to it: see `cache.load`) still allocates from the C++ default, mimalloc.
_pool_lock = threading.Lock()
_pool_users = 0
_pool_before = None


def jemalloc_pool():
    """pyarrow's jemalloc memory pool, else the system allocator's."""
    import pyarrow as pa
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without it (Windows)
        return pa.system_memory_pool()


@contextlib.contextmanager
def arrow_memory():
    """Within: pyarrow allocates from jemalloc (else the system allocator), on every thread, where its
    default is mimalloc; a default the user chose is left alone. Nested and concurrent uses share one
    switch, and the last to leave restores the default."""
    import pyarrow as pa
    global _pool_users, _pool_before
    with _pool_lock:
        if _pool_users == 0 and pa.default_memory_pool().backend_name == "mimalloc":
            _pool_before = pa.default_memory_pool()
            pa.set_memory_pool(jemalloc_pool())
        _pool_users += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_users -= 1
            if _pool_users == 0 and _pool_before is not None:
                pa.set_memory_pool(_pool_before)
                _pool_before = None


class ColdFile:
    """An output file written once, front to back, and rarely read afterwards (the args text of a trace
    loaded on disk, which only a selected event's details read): a `pyarrow.OSFile` whose pages leave the
    page cache once written back, two chunks behind the end (`written`). Memory stays free for what is
    read, and the writer's next pages are the ones it gave back: on a VM that returns free memory to its
    host, as this project's benchmark machine does, a page the host took back costs several times more to
    fill (benchmarks/README.md, "Written pages recycled"). A plain file where ``posix_fadvise`` is missing."""

    CHUNK = 64 << 20

    def __init__(self, path: Path):
        import pyarrow as pa
        self.file = pa.OSFile(str(path), "wb")
        self.kicked = 0  # the writeback of every whole chunk below this offset was started

    def written(self) -> None:
        """After a write: start the writeback of each whole chunk written since the last call, and drop the
        pages of the chunk two before it (written back by then; pages still dirty are kept, not lost)."""
        if not hasattr(os, "posix_fadvise"):
            return
        end, fd = self.file.tell(), self.file.fileno()
        while end - self.kicked >= self.CHUNK:
            os.posix_fadvise(fd, self.kicked, self.CHUNK, os.POSIX_FADV_DONTNEED)  # dirty: writeback starts
            if self.kicked >= 2 * self.CHUNK:
                os.posix_fadvise(fd, self.kicked - 2 * self.CHUNK, self.CHUNK, os.POSIX_FADV_DONTNEED)
            self.kicked += self.CHUNK

    def close(self) -> None:
        self.file.close()


# The widest CSV a profiler writes: legacy step_trace_raw files carry a start/end pair per reduce event, a
# thousand columns on large models; 30,000 fields already cost pandas 3 s.
MAX_CSV_COLUMNS = 10_000


def read_csv(path: Path, required: list[str] | tuple = (), *, header_map: dict | None = None,
             skipinitialspace: bool = False, usecols=None, sep: str = ",", **kwargs) -> pd.DataFrame:
    """Read a CSV with a single header row, every column as str (convert with `numeric`); a large one whose
    records all have the header's width by Arrow's CSV reader (`_arrow_rows`), to the same frame.

    ``required``: column names (after ``header_map`` renaming and stripping) that must exist.
    A row with more or fewer fields than the header is dropped with a warning naming its line (the
    frame's index keeps each row's position among the file's rows, ``attrs["lines"]`` its line when they
    differ); more than `BAD_ROW_LIMIT` of the rows bad rejects the file (`MalformedFileError`). A file
    that stops in the middle of its last row loads without that row and warns (`TruncatedFileError`). A
    row whose every field is empty or ``nan`` is dropped with a warning naming its line (`NO_VALUE`).
    ``usecols`` (list or callable on the stripped-or-not header name) selects columns as in pandas.
    """
    data = read_bytes(path, "csv")
    if not data.strip():
        raise EmptyFileError(path, "file is empty")
    text = decode(path, data)
    if not text.strip():  # a byte-order mark and nothing else
        raise EmptyFileError(path, "file is empty")
    header_fields = text.split("\n", 1)[0].count(sep) + 1
    if header_fields > MAX_CSV_COLUMNS:
        # pandas builds one column object per field: a 1,000,000-field header would take minutes
        raise MalformedFileError(path, f"header has {header_fields:,} fields; no profiler CSV has more than "
                                       f"{MAX_CSV_COLUMNS:,}", line=1)
    raw = text.encode("utf-8")
    df = None
    widths = _record_widths(raw, sep)
    uniform = widths is not None and len(widths) and (widths == widths[0]).all()
    if uniform and len(raw) >= ARROW_CSV_BYTES and usecols is None and not skipinitialspace and not kwargs:
        df = _arrow_rows(raw, sep, int(widths[0]), len(widths) - 1)
    if df is None and uniform:
        try:
            # index_col=False: otherwise pandas silently turns a first row with one extra field into an index.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", pd.errors.ParserWarning)
                # bytes, not StringIO: StringIO holds 4 bytes per character and pandas re-encodes it to UTF-8,
                # which doubles the parse time of a large CSV (the text is already checked by `decode`)
                df = pd.read_csv(io.BytesIO(raw), encoding="utf-8", dtype=str, keep_default_na=False,
                                 na_values=[], skipinitialspace=skipinitialspace, index_col=False,
                                 usecols=usecols, sep=sep, **kwargs)
            if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught) or \
                    len(df) != len(widths) - 1:
                df = None  # the fast count and pandas disagree: let the careful reader decide
        except pd.errors.EmptyDataError:
            raise EmptyFileError(path, "file is empty") from None
        except pd.errors.ParserError:
            df = None
    if df is None:
        # rows as Python lists cost ~3x the fast path: checked now that this reader is needed
        check_size(path, "csv_careful")
        df = _read_rows(path, text, sep, skipinitialspace, usecols)
    df.columns = [str(c).strip() for c in df.columns]
    df = _drop_empty_rows(path, df, usecols is not None)
    if header_map:
        df = df.rename(columns={k: v for k, v in header_map.items() if k in df.columns})
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise MissingColumnError(path, f"missing column(s) {missing}; header is {list(df.columns)}",
                                 line=1, field=missing[0])
    df.attrs["path"] = str(path)
    return df


# From this size on, a CSV is read by Arrow (`_arrow_rows`); a smaller one by pandas, which costs less
# than Arrow's fixed cost per read (the first read in a process most).
ARROW_CSV_BYTES = 64 * 1024


@arrow_memory()   # see there: the columns are fresh buffers of a MB or more
def _arrow_rows(raw: bytes, sep: str, width: int, n_rows: int) -> pd.DataFrame | None:
    """``raw`` (a CSV whose every record has ``width`` fields, a header and ``n_rows`` rows) read by
    Arrow's CSV reader, every column as str, as pandas reads it, without the Python string of every field
    that pandas' parser makes. None where pandas might read it otherwise: a header
    name that is empty or repeated (pandas renames it), a record Arrow does not split as the count did, or a
    value with a line break in it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    names = [f"f{i}" for i in range(width)]
    try:
        table = pcsv.read_csv(io.BytesIO(raw),
                              read_options=pcsv.ReadOptions(column_names=names, use_threads=False),
                              parse_options=pcsv.ParseOptions(delimiter=sep),
                              convert_options=pcsv.ConvertOptions(
                                  column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False,
                                  quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != n_rows + 1:
        return None
    if b'"' in raw and any(pc.any(pc.match_substring(col, brk)).as_py()
                           for col in table.columns for brk in "\r\n"):
        return None  # a record over several lines: the careful reader says which line each row starts on
    header = [table.column(i)[0].as_py() for i in range(width)]
    if "" in header or len(set(header)) < width:
        return None
    df = table.slice(1).to_pandas(use_threads=False)
    df.columns = header
    return df


def _read_rows(path: Path, text: str, sep: str, skipinitialspace: bool, usecols) -> pd.DataFrame:
    """The careful reader (Python's csv module, line by line): rows of the wrong width are dropped with
    a warning naming their line; a short last row of a file without a final newline is a cut-off row."""
    import csv
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, skipinitialspace=skipinitialspace)
    header, rows, lines, bad, widths = None, [], [], [], []
    cut = None
    start = 1
    try:
        for row in reader:
            line, start = start, reader.line_num + 1
            if not row or row == [""]:
                continue
            if header is None:
                header = row
                continue
            if len(row) == len(header):
                rows.append(row)
                lines.append(line)
            else:
                bad.append((line, f"row has {len(row)} fields, the header has {len(header)}"))
                widths.append(len(row))
    except csv.Error as e:
        raise MalformedFileError(path, f"not a readable CSV: {e}", line=start) from None
    if header is None:
        raise EmptyFileError(path, "file is empty")
    if bad and bad[-1][0] == line and widths[-1] < len(header) and not text.endswith(("\n", "\r")):
        cut = bad.pop()
        warn_partial(TruncatedFileError(path, f"last row has {widths[-1]} of {len(header)} fields; dropped",
                                        line=cut[0]))
    skipped_rows(path, bad, len(rows) + len(bad))
    names = _dedupe(header)
    df = pd.DataFrame(rows, columns=names, dtype=str) if rows else \
        pd.DataFrame({c: pd.Series(dtype=str) for c in names})
    if usecols is not None:
        keep = [c for c in names if (usecols(c) if callable(usecols) else c in set(usecols))]
        df = df[keep]
    # the index is each row's position among the file's rows (bad ones included) so positions map to lines
    positions = sorted([(ln, True) for ln in lines] + [(b[0], False) for b in bad] +
                       ([(cut[0], False)] if cut else []))
    good_pos = [i for i, (_, ok) in enumerate(positions) if ok]
    df.index = pd.Index(good_pos, dtype="int64")
    df.attrs["lines"] = np.array([ln for ln, _ in positions], dtype="int64")
    return df


def _dedupe(names: list[str]) -> list[str]:
    """pandas' rule for repeated header names: the second ``x`` becomes ``x.1``."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            seen[n] += 1
            out.append(f"{n}.{seen[n]}")
        else:
            seen[n] = 0
            out.append(n)
    return out


def _clean_numbers(col: pd.Series, dtype) -> pd.Series | None:
    """``col`` as int64 (``dtype`` int) or float64 when it is Arrow-backed text whose every cell is a finite
    number written plainly, parsed by one Arrow cast (~2 ms for 30k rows, against ~20 ms for the cell-by-cell
    path); None for any other column (blank, N/A, padded, quoted or bad cells: `numeric` reads those)."""
    if not (isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow"):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    arr = pa.chunked_array(pa.array(col.array))
    if arr.null_count:
        return None
    with arrow_memory():   # see there: the values are a fresh buffer, a MB or more in a large file
        try:
            vals = pc.cast(arr, pa.int64() if dtype is int else pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    if dtype is not int and not pc.all(pc.is_finite(vals)).as_py():
        return None
    return pd.Series(vals.to_numpy(), index=col.index, name=col.name)


# What `numeric` reads as an empty cell unless told otherwise.
MISSING = ("", "N/A", "NA", "nan", "-", "None")


def numeric(df: pd.DataFrame, col: str, path: Path, *, dtype=float, allow_missing: bool = True,
            missing=MISSING, first_data_line: int = 2) -> pd.Series:
    """Column ``col`` as numbers. Blank/N/A cells become NaN (or raise if not ``allow_missing``).
    A cell that is not a (finite) number costs that value: NaN, with a warning naming its line and
    field; past `BAD_ROW_LIMIT` of the rows the column is garbage and `MalformedFileError` names the
    first bad line. Strips whitespace, tabs and surrounding quotes (CANN writes ``"123.4\\t"``)."""
    # (other markers of an empty cell may be numbers, which the one cast would read as such)
    clean = _clean_numbers(df[col], dtype) if tuple(missing) == MISSING else None
    if clean is not None:
        return clean
    raw = df[col].astype(str).str.strip().str.strip('"').str.strip()
    is_missing = raw.isin(missing)
    vals = pd.to_numeric(raw.where(~is_missing, None), errors="coerce")
    bad = np.array((vals.isna() & ~is_missing).to_numpy(), dtype=bool)
    bad |= np.isinf(vals.to_numpy(dtype="float64", na_value=np.nan))
    if bad.any():
        where = np.flatnonzero(bad)
        i = int(where[0])
        what = "not a finite number" if pd.notna(vals.iloc[i]) else "not a number"
        if not allow_missing or too_many_bad(len(where), len(df)):
            raise MalformedFileError(path, f"{what}: {raw.iloc[i]!r}"
                                     + (f" ({len(where)} of {len(df)} values)" if len(where) > 1 else ""),
                                     line=line_of(df, i, first_data_line), field=col)
        more = f"; {len(where) - 1} more bad value(s), lines " \
               f"{', '.join(str(line_of(df, int(j), first_data_line)) for j in where[1:6])}" if len(where) > 1 else ""
        warn_partial(MalformedFileError(path, f"{what}: {raw.iloc[i]!r}; value left empty (NaN), the rest of "
                                              f"the row loaded{more}", line=line_of(df, i, first_data_line),
                                        field=col))
        vals = vals.where(~bad, np.nan)
        is_missing = is_missing | bad
    if not allow_missing and is_missing.any():
        i = int(np.flatnonzero(is_missing.to_numpy())[0])
        raise MalformedFileError(path, "empty value", line=line_of(df, i, first_data_line), field=col)
    if dtype is int:
        return vals.astype("Int64") if is_missing.any() else vals.astype("int64")
    return vals.astype("float64")


def require_keys(obj, keys, path: Path, where: str = "") -> None:
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object{where}, found {type(obj).__name__}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise MissingColumnError(path, f"missing key(s) {missing}{where}", field=missing[0])


_UNIT = {"us": "us", "ms": "ms", "ns": "ns", "%": "pct", "kb": "kb", "mb": "mb", "gb/s": "gbps",
         "byte": "bytes", "bytes": "bytes"}


def snake(name: str) -> str:
    """Header name -> snake_case column name with its unit as suffix: ``Start Time(us)`` ->
    ``start_time_us``, ``cube_utilization(%)`` -> ``cube_utilization_pct``."""
    name = name.strip().strip("\t")
    unit = ""
    m = re.search(r"\(([^)]*)\)\s*$", name)
    if m:
        unit = _UNIT.get(m.group(1).strip().lower(), re.sub(r"\W+", "_", m.group(1)).strip("_").lower())
        name = name[:m.start()]
    base = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    base = re.sub(r"\W+", "_", base).strip("_").lower()
    return f"{base}_{unit}" if unit else base


__all__ = ["read_text", "read_json", "read_csv", "read_bytes", "decode", "numeric", "require_keys", "snake",
           "warn_partial", "check_size", "available_memory_bytes", "EXPANSION", "skipped_rows", "too_many_bad",
           "line_of", "BAD_ROW_LIMIT", "arrow_memory", "json_limit_error",
           "MAX_DURATION_US", "drop_impossible_times", "NO_VALUE", "cut_last_record"]
