"""The exact validator of Chrome-trace JSON: a slow parse with the standard library's json, one element
of an event array at a time, that tells what is wrong with a file and where.

The fast reader (`nbprofiler.io.trace.parse`, duckdb) says only that a file cannot be read; when it
rejects one, `exact_check` finds the error and raises `TruncatedFileError` / `MalformedFileError` /
`MissingColumnError` with its line number. A file whose JSON document is followed by other data gets
`_TrailingData` instead: `document_end` gives the byte where the document ends (the fast reader then
reads the document alone) and `warn_trailing` reports what was ignored. `line_of_event` gives the line
of an event by its index (for the warnings about skipped events), and `exact_events` is the reference
parse the tests check the fast path against.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ...errors import EmptyFileError, MalformedFileError, MissingColumnError, ProfilerDataError, TruncatedFileError
from .._util import decode, json_limit_error, read_bytes, warn_partial

_WS = re.compile(r"[ \t\r\n]*")


def exact_events(path: Path) -> list[dict]:
    """The slow exact reference parse (stdlib json): the list of events. Used to locate errors (line
    numbers) and by the tests to check the fast path. Data after the document is an error here."""
    doc = exact_check(path, keep=True)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def exact_check(path: Path, need_trace_events: bool = False, keep: bool = False, upto: int | None = None,
                size: int | None = None):
    """Parse ``path`` exactly and raise the typed error (with its line) for whatever is wrong with it;
    `_TrailingData` (a `MalformedFileError`) when the only thing wrong is data after a valid document.

    Array files are decoded one element at a time so a huge file needs no more than its text in memory
    (events are kept only with ``keep``). ``upto``: check only the file's first ``upto`` bytes. Returns
    the document (with ``keep`` or for an object-form file; else an empty list) when nothing is wrong.
    ``size``: the file's size when the reader's memory guard checked it; no more than that is read.
    Nesting or numbers past what the parser can read raise `MalformedFileError` with the line."""
    data = read_bytes(path, "trace_exact", size)  # no more than the reader checked
    if upto is not None:
        data = data[:upto]
    if not data.strip():
        raise EmptyFileError(path, "file is empty")
    bom = 0
    while data.startswith(b"\xef\xbb\xbf", bom):
        bom += 3
    text = decode(path, data)
    del data
    dec = json.JSONDecoder()
    end = len(text.rstrip())

    def fail(e: json.JSONDecodeError):
        if e.pos >= end - 1 or "Unterminated" in e.msg:
            raise TruncatedFileError(path, f"JSON ends early ({e.msg})", line=e.lineno) from None
        raise MalformedFileError(path, f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def byte_of(pos: int) -> int:
        return bom + (pos if text.isascii() else len(text[:pos].encode("utf-8")))

    def after(doc_end: int) -> None:
        """Raise `_TrailingData` when anything but blank space follows the document ending at ``doc_end``."""
        rest = _WS.match(text, doc_end).end()
        if rest < len(text):
            raise _TrailingData(path, byte_of(doc_end), byte_of(rest), line_of(rest))

    i = _WS.match(text, 0).end()
    if text.startswith("{", i):
        try:
            doc, doc_end = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            fail(e)
        except (RecursionError, ValueError) as e:
            raise json_limit_error(path, text, e, i) from None
        if "traceEvents" not in doc:
            raise MissingColumnError(path, "a JSON object without 'traceEvents'", line=1, field="traceEvents")
        if not isinstance(doc["traceEvents"], list):
            raise MalformedFileError(path, "'traceEvents' is not a list", field="traceEvents")
        for n, e in enumerate(doc["traceEvents"]):
            if not isinstance(e, dict):
                raise MalformedFileError(path, f"event {n} is not an object", field="traceEvents")
        after(doc_end)
        return doc
    if not text.startswith("[", i):
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            fail(e)
        except (RecursionError, ValueError) as e:
            raise json_limit_error(path, text, e, i) from None
        raise MalformedFileError(path, "not a Chrome trace: expected a JSON array or an object with "
                                       "'traceEvents'", line=line_of(i))
    events = []
    n = 0
    i = _WS.match(text, i + 1).end()
    if not text.startswith("]", i):
        while True:
            start = i
            try:
                obj, i = dec.raw_decode(text, i)
            except json.JSONDecodeError as e:
                fail(e)
            except (RecursionError, ValueError) as e:  # nested too deep, a number of too many digits
                raise json_limit_error(path, text, e, start) from None
            if not isinstance(obj, dict):
                raise MalformedFileError(path, f"event {n} is not an object", line=line_of(start))
            if keep:
                events.append(obj)
            n += 1
            i = _WS.match(text, i).end()
            if i >= len(text):
                raise TruncatedFileError(path, "JSON ends early (the event array is not closed)", line=line_of(i))
            if text[i] == "]":
                break
            if text[i] != ",":
                raise MalformedFileError(path, f"invalid JSON: expected ',' or ']' after event {n - 1}",
                                         line=line_of(i))
            i = _WS.match(text, i + 1).end()
    after(i + 1)
    return events


def line_of_event(path: Path, index: int) -> int | None:
    """Line (1-based) where event number ``index`` (0-based, file order) starts; exact but slow."""
    try:
        text = decode(path, read_bytes(path, "trace"))
    except ProfilerDataError:
        return None
    dec = json.JSONDecoder()
    i = _WS.match(text, 0).end()
    if text.startswith("{", i):
        k = text.find("[", text.find('"traceEvents"'))
        if k < 0:
            return None
        i = k
    i = _WS.match(text, i + 1).end()
    n = 0
    try:
        while n < index:
            _, i = dec.raw_decode(text, i)
            i = _WS.match(text, i).end() + 1  # the comma
            i = _WS.match(text, i).end()
            n += 1
    except (ValueError, IndexError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    return text.count("\n", 0, i) + 1


class _TrailingData(MalformedFileError):
    """The JSON document ends at byte ``end`` and other data starts at byte ``at`` (on line ``line``)."""

    def __init__(self, path, end: int, at: int, line: int):
        super().__init__(path, f"invalid JSON: data after the end of the document (byte {at:,})", line=line)
        self.end, self.at = end, at


def document_end(path: Path, size: int | None = None) -> int | None:
    """The byte offset where the JSON document ends when data that is not blank follows it (reported
    with `warn_trailing`); None when the whole file is one valid document. Raises the error of a file
    that is invalid otherwise. ``size``: see `exact_check`."""
    try:
        exact_check(path, size=size)
    except _TrailingData as t:
        warn_trailing(path, t)
        return t.end
    return None


def warn_trailing(path: Path, t: _TrailingData | None) -> None:
    where = f" at byte {t.at:,}" if t is not None else " (a second JSON document; its offset was not located)"
    warn_partial(MalformedFileError(path, f"data after the end of the JSON document{where} was ignored (the file "
                                          "is not valid JSON past that point); the document's events loaded",
                                    line=t.line if t is not None else None))
