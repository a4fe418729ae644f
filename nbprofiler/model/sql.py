"""SQL over a profile's frames: ``prof.sql("SELECT op_type, sum(dur_us) FROM timeline GROUP BY 1")``.

Every frame of the data model is a table named like its property (``timeline``, ``ops``, ``step_trace``,
...). Only the frames a query names are built (a query over ``step_trace`` never parses the trace), and
DuckDB scans the pandas frames in place (no copy into a database). The connection has no file-system
access: a query reads the frames (and the ``tables`` you pass), and cannot read or write files — in
particular nothing is ever written into a profiler folder. Only queries run (``SELECT``, ``WITH ...``,
``EXPLAIN``): ``EXPORT``, ``COPY``, ``ATTACH``, ``INSTALL``, ``LOAD``, ``SET``, ``CREATE`` ... are refused
before DuckDB sees them, and DuckDB never installs or loads an extension by itself (a query naming
``sqlite_scan`` fails instead of downloading the extension), so ``prof.sql`` touches no network and
creates no ``~/.duckdb``.
"""
from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd


class SQLError(ValueError):
    """A query that DuckDB refused, with the tables that were available to it."""


# The connection: no files, no extension installed or loaded behind the query's back, and a configuration
# no statement can change.
CONFIG = {"enable_external_access": False, "autoinstall_known_extensions": False,
          "autoload_known_extensions": False, "allow_community_extensions": False,
          "lock_configuration": True}
# Statement kinds a query may hold; everything else (EXPORT, COPY, ATTACH, INSTALL/LOAD, SET, CREATE,
# PRAGMA, CALL, ...) is refused before it runs.
QUERY_KINDS = {"SELECT", "EXPLAIN"}


def run_sql(query: str, frames: Mapping[str, Callable[[], pd.DataFrame]],
            tables: Mapping[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Run ``query`` over the frames it names. ``frames``: table name -> a function building that frame
    (called only for the tables the query reads); ``tables``: extra DataFrames by name (they win over a
    frame of the same name). Returns a DataFrame."""
    import duckdb

    tables = dict(tables or {})
    con = duckdb.connect(config=CONFIG)
    try:
        _refuse_statements(con, query)
        named = _named_tables(con, query)
        for name in sorted(named):
            # DuckDB folds unquoted identifiers to lower case; frame names are lower case
            key = name if name in tables or name in frames else name.lower()
            if key in tables:
                con.register(name, tables[key])
            elif key in frames:
                con.register(name, frames[key]())
        try:
            return con.execute(query).df()
        except duckdb.Error as err:
            available = ", ".join(sorted(set(frames) | set(tables)))
            raise SQLError(f"{err}\n(tables: {available})") from None
    finally:
        con.close()


def _refuse_statements(con, query: str) -> None:
    """`SQLError` unless every statement of ``query`` is a query (`QUERY_KINDS`); only parses."""
    import duckdb
    try:
        kinds = [st.type.name for st in con.extract_statements(query)]
    except duckdb.Error as err:
        raise SQLError(f"cannot parse the query: {err}") from None
    refused = sorted({k for k in kinds if k not in QUERY_KINDS})
    if refused:
        raise SQLError(f"prof.sql runs queries only (SELECT, WITH ... SELECT, EXPLAIN); refused: "
                       f"{', '.join(refused)} (the connection reads the profile's frames, never files, "
                       "databases or extensions)")


def _named_tables(con, query: str) -> set[str]:
    """The table names a query reads. DuckDB's own answer where it can give one; it binds joins to answer,
    so ``JOIN ... USING`` over tables it does not know yet fails — then every identifier in the query
    (a superset: a column named like a frame builds that frame too, which is only slower)."""
    import duckdb
    try:
        return set(con.get_table_names(query))
    except duckdb.Error:
        pass
    try:
        tokens = duckdb.tokenize(query)
    except duckdb.Error as err:
        raise SQLError(f"cannot parse the query: {err}") from None
    names = set()
    ends = [start for start, _ in tokens[1:]] + [len(query)]
    for (start, kind), end in zip(tokens, ends):
        if kind == duckdb.token_type.identifier:
            names.add(query[start:end].strip().strip('"'))
    return names
