"""Reading primitives shared by all parsers: every failure becomes a typed `ProfilerDataError` that
names the file and the line/field, never a bare pandas/json/UnicodeDecodeError."""
from __future__ import annotations

import io
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import (EmptyFileError, FileTooLargeError, MalformedFileError, MissingColumnError,
                      ProfilerDataError, ProfilerDataWarning, TruncatedFileError)

# A file is refused when parsing it would need more than this fraction of the available memory,
# given a parser's memory per byte of input (``expansion``).
MEMORY_FRACTION = 0.8


def available_memory_bytes() -> int:
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or unsupported platform: fall back to /proc/meminfo
        try:
            for line in open("/proc/meminfo"):
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
    return 1 << 62


def check_size(path: Path, expansion: float = 10.0) -> int:
    """The file's size; raises `FileTooLargeError` if parsing it would exhaust memory."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ProfilerDataError(path, f"cannot read: {e.strerror or e}") from None
    need = size * expansion
    avail = available_memory_bytes()
    if need > avail * MEMORY_FRACTION:
        raise FileTooLargeError(path, f"{size / 1e9:.1f} GB would need ~{need / 1e9:.1f} GB of memory to "
                                      f"parse, {avail / 1e9:.1f} GB available; refused before loading")
    return size


def warn_partial(err: ProfilerDataError) -> None:
    """Report data that was skipped while the rest of the file loaded (recorded in prof.problems)."""
    w = ProfilerDataWarning(str(err))
    w.error = err
    warnings.warn(w, stacklevel=2)


def _line_of_offset(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_bytes(path: Path, expansion: float = 10.0) -> bytes:
    check_size(path, expansion)
    try:
        return path.read_bytes()
    except OSError as e:
        raise ProfilerDataError(path, f"cannot read: {e.strerror or e}") from None


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


def read_text(path: Path, expansion: float = 10.0) -> str:
    data = read_bytes(path, expansion)
    if not data.strip():
        raise EmptyFileError(path, "file is empty")
    return decode(path, data)


def read_json(path: Path, expansion: float = 12.0):
    """Parse a JSON file. Truncation (the document ends early) raises `TruncatedFileError`."""
    text = read_text(path, expansion)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        tail_ws = len(text) - len(text.rstrip())
        if e.pos >= len(text) - tail_ws - 1 or "Unterminated" in e.msg:
            raise TruncatedFileError(path, f"JSON ends early ({e.msg})", line=e.lineno) from None
        raise MalformedFileError(path, f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None


_BAD_LINE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def read_csv(path: Path, required: list[str] | tuple = (), *, header_map: dict | None = None,
             skipinitialspace: bool = False, **kwargs) -> pd.DataFrame:
    """Read a CSV with a single header row, every column as str (convert with `numeric`).

    ``required``: column names (after ``header_map`` renaming and stripping) that must exist.
    A row with too many fields raises `MalformedFileError` naming its line; a file that stops in the
    middle of its last row is loaded without that row and warns (`TruncatedFileError`).
    """
    data = read_bytes(path, expansion=8.0)
    if not data.strip():
        raise EmptyFileError(path, "file is empty")
    text = decode(path, data)
    try:
        # index_col=False: otherwise pandas silently turns a first row with one extra field into an index.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            # bytes, not StringIO: StringIO holds 4 bytes per character and pandas re-encodes it to UTF-8,
            # which doubles the parse time of a large CSV (the text is already checked by `decode`)
            df = pd.read_csv(io.BytesIO(text.encode("utf-8")), encoding="utf-8", dtype=str, keep_default_na=False,
                             na_values=[],
                             skipinitialspace=skipinitialspace, index_col=False, **kwargs)
        if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
            _raise_long_row(path, text, kwargs.get("sep", ","))
    except pd.errors.EmptyDataError:
        raise EmptyFileError(path, "file is empty") from None
    except pd.errors.ParserError as e:
        m = _BAD_LINE.search(str(e))
        if m:
            raise MalformedFileError(path, f"row has {m.group(3)} fields, the header has {m.group(1)}",
                                     line=int(m.group(2))) from None
        raise MalformedFileError(path, f"not a readable CSV: {str(e).strip()}") from None
    df.columns = [str(c).strip() for c in df.columns]
    if header_map:
        df = df.rename(columns={k: v for k, v in header_map.items() if k in df.columns})
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise MissingColumnError(path, f"missing column(s) {missing}; header is {list(df.columns)}",
                                 line=1, field=missing[0])
    # A truncated last row: the file does not end with a newline and its last row is short.
    if len(df) and not text.endswith(("\n", "\r")):
        last = df.iloc[-1]
        n_fields = text.rstrip("\r\n").rsplit("\n", 1)[-1].count(",") + 1
        if n_fields < len(df.columns) and any(last[c] == "" for c in df.columns[n_fields:]):
            warn_partial(TruncatedFileError(path, f"last row has {n_fields} of {len(df.columns)} fields; "
                                                  "dropped", line=len(df) + 1))
            df = df.iloc[:-1]
    df.attrs["path"] = str(path)
    return df


def _raise_long_row(path: Path, text: str, sep: str) -> None:
    import csv
    rows = csv.reader(io.StringIO(text), delimiter=sep)
    width = None
    for n, row in enumerate(rows, start=1):
        if width is None:
            width = len(row)
        elif len(row) > width:
            raise MalformedFileError(path, f"row has {len(row)} fields, the header has {width}", line=n)
    raise MalformedFileError(path, "rows and header have different numbers of fields")


def numeric(df: pd.DataFrame, col: str, path: Path, *, dtype=float, allow_missing: bool = True,
            missing=("", "N/A", "NA", "nan", "-", "None"), first_data_line: int = 2) -> pd.Series:
    """Column ``col`` as numbers. Blank/N/A cells become NaN (or raise if not ``allow_missing``);
    anything else that is not a number raises `MalformedFileError` naming the line and field.
    Strips whitespace, tabs and surrounding quotes (CANN writes ``"123.4\\t"``)."""
    raw = df[col].astype(str).str.strip().str.strip('"').str.strip()
    is_missing = raw.isin(missing)
    vals = pd.to_numeric(raw.where(~is_missing, None), errors="coerce")
    bad = vals.isna() & ~is_missing
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise MalformedFileError(path, f"not a number: {raw.iloc[i]!r}", line=int(df.index[i]) + first_data_line
                                 if isinstance(df.index[i], (int, np.integer)) else None, field=col)
    infinite = np.isinf(vals.to_numpy(dtype="float64", na_value=np.nan))
    if infinite.any():
        i = int(np.flatnonzero(infinite)[0])
        raise MalformedFileError(path, f"not a finite number: {raw.iloc[i]!r}", line=i + first_data_line, field=col)
    if not allow_missing and is_missing.any():
        i = int(np.flatnonzero(is_missing.to_numpy())[0])
        raise MalformedFileError(path, "empty value", line=i + first_data_line, field=col)
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
           "warn_partial", "check_size", "available_memory_bytes"]
