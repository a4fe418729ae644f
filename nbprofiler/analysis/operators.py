"""Pure functions over the ``op_types`` / ``ops`` frames (no file access): the operator views' top-N
chart data, MindInsight's fuzzy search and its sort order (FORMATS.md 5.2-5.3)."""
from __future__ import annotations

import pandas as pd

OTHER = "Other"


def top_types(op_types: pd.DataFrame, kind: str, n: int = 20) -> pd.DataFrame:
    """The ``n`` types of ``kind`` with the largest ``total_time_us``, plus one ``"Other"`` row folding
    the rest (only when there is a rest).

    Returns the ``op_types`` columns for that kind, sorted by total time descending. The ``Other`` row
    sums ``total_time_us``, ``count`` and ``percent`` (and ``file_percent``, NaN if all NaN) of the
    folded types; its ``avg_time_us`` = total/count. Percent stays the share of the kind's whole total,
    so the returned percents still sum to 100.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rows = op_types[op_types["kind"] == kind].sort_values("total_time_us", ascending=False, kind="stable")
    if len(rows) <= n:
        return rows.reset_index(drop=True)
    top, rest = rows.iloc[:n], rows.iloc[n:]
    other = {c: None for c in rows.columns}
    other.update(kind=kind, op_type=OTHER, total_time_us=float(rest["total_time_us"].sum()),
                 count=int(rest["count"].sum()))
    other["avg_time_us"] = other["total_time_us"] / other["count"] if other["count"] else float("nan")
    if "percent" in rows:
        other["percent"] = float(rest["percent"].sum())
    if "file_percent" in rows:
        other["file_percent"] = float(rest["file_percent"].sum(min_count=1))
    out = pd.concat([top, pd.DataFrame([other], columns=rows.columns).astype(top.dtypes.to_dict(), errors="ignore")],
                    ignore_index=True)
    return out


def filter_ops(ops: pd.DataFrame, kind: str | None = None, op_type: str | list[str] | None = None,
               search: str | list[str] | None = None) -> pd.DataFrame:
    """Rows of ``ops`` (or ``op_types``) matching every given condition.

    ``kind``: exact device kind. ``op_type``: exact type, or a list of types (MindInsight's ``in``).
    ``search``: MindInsight's fuzzy search (``partial_match_str_in``): a case-insensitive substring of
    ``op_name`` or ``op_type``; a list of strings is OR-ed. Empty/blank search strings are ignored.
    The index of ``ops`` is kept, so results can be mapped back.
    """
    mask = pd.Series(True, index=ops.index)
    if kind is not None:
        mask &= ops["kind"] == kind
    if op_type is not None:
        types = [op_type] if isinstance(op_type, str) else list(op_type)
        mask &= ops["op_type"].isin(types)
    if search is not None:
        terms = [search] if isinstance(search, str) else list(search)
        terms = [t.strip().lower() for t in terms if t and t.strip()]
        if terms:
            columns = [c for c in ("op_name", "op_type") if c in ops.columns]
            hit = pd.Series(False, index=ops.index)
            for col in columns:
                text = ops[col].astype("string").str.lower()
                for t in terms:
                    hit |= text.str.contains(t, regex=False, na=False)
            mask &= hit
    return ops[mask]


def sort_ops(ops: pd.DataFrame, column: str, descending: bool = True) -> pd.DataFrame:
    """``ops`` sorted by ``column`` (stable), missing values last in either direction (MindInsight
    sorts None below any value). Raises KeyError naming the columns if ``column`` is absent."""
    if column not in ops.columns:
        raise KeyError(f"no column {column!r}; columns are {list(ops.columns)}")
    return ops.sort_values(column, ascending=not descending, na_position="last", kind="stable")
