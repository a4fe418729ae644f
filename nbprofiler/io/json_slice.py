"""The event array inside a ``{"traceEvents": [...], ...}`` trace, read like a bare-array trace.

duckdb reads a bare JSON array batch by batch, each batch digested while it reads the next; an object
holding the array has to be read as one document, 4-10x slower and with the whole file in memory.
`array_span` finds the byte range of the ``traceEvents`` array (walking only the small top-level values
before and after it, never the events), and duckdb reads that range as a file of its own, so both forms
parse the same way: from `ArrayCopy`, an unnamed temporary copy of the range that duckdb reads natively,
or where no copy can be made, through `SliceFileSystem`, which shows duckdb the range of the original
file through Python (duckdb then reads it one 32 MB buffer at a time, each copied twice while holding
the GIL: 0.1 s more per 100 MB than the copy costs).
"""
from __future__ import annotations

import bisect
import io
import itertools
import json
import os
import re
import tempfile
import threading
from pathlib import Path

import numpy as np

# How far into the file the other top-level keys may reach before and after the array. Kineto writes a
# few hundred bytes of them (schemaVersion, distributedInfo, deviceProperties, traceName); a file with
# more is read the slow way, as one document.
EDGE_BYTES = 1 << 20
# A top-level value after the array longer than this is taken for the array itself (a wrong guess makes
# the sliced read fail, and the file is then read as one document).
SMALL_VALUE_BYTES = 64 * 1024
_WS = b" \t\r\n"
# The bytes `_walk_back` looks at: quotes and brackets (a lookup table: finding them with a regex, one
# match object each, took 10 ms of the 13 ms `array_span` spends on a 256 KB window).
_STRUCTURE = np.zeros(256, dtype=bool)
_STRUCTURE[list(b'"[]{}')] = True
_SPACE = re.compile(r"[ \t\r\n]*")


def _head_start(head: bytes) -> int | None:
    """Offset of the ``[`` opening ``traceEvents`` when every top-level value before it lies in
    ``head``; None otherwise. Values before it are decoded (they are small), never searched."""
    # Latin-1 maps each byte to one character, so the offsets below are byte offsets. Non-ASCII text in
    # the values decodes wrongly but stays valid JSON (bytes >= 0x80 are not control characters); the
    # key compared, traceEvents, is ASCII.
    text = head.decode("latin-1")
    dec = json.JSONDecoder()

    def skip(i):
        return _SPACE.match(text, i).end()
    i = skip(0)
    if text[i:i + 1] != "{":
        return None
    i += 1
    while True:
        try:
            key, i = dec.raw_decode(text, skip(i))
        except (ValueError, RecursionError):  # not JSON, or past the parser's limits: read as one document
            return None
        i = skip(i)
        if text[i:i + 1] != ":":
            return None
        i = skip(i + 1)
        if key == "traceEvents":
            return i if text[i:i + 1] == "[" else None
        try:
            _, i = dec.raw_decode(text, i)
        except (ValueError, RecursionError):
            return None
        i = skip(i)
        if text[i:i + 1] != ",":
            return None
        i += 1


def _string_start(data: bytes, close: int) -> int:
    """Offset of the quote opening the JSON string whose closing quote is at ``close``."""
    j = close - 1
    while True:
        j = data.rfind(b'"', 0, j + 1)
        if j < 0:
            return -1
        k = j
        while k > 0 and data[k - 1] == 0x5C:  # backslashes before the quote: an odd count escapes it
            k -= 1
        if (j - k) % 2 == 0:
            return j
        j -= 1


def _tail_end(tail: bytes, open_at: int) -> int | None:
    """Offset in ``tail`` just past the ``]`` that closes the big top-level array: walking back from the
    closing ``}`` over the small values after it, the first top-level ``]`` whose value does not close
    within `SMALL_VALUE_BYTES` or whose ``[`` is the array's (at ``open_at`` in ``tail``; negative when
    the array opens before the tail). None when the tail is not the end of an object."""
    last = len(tail.rstrip(_WS)) - 1
    if last < 0 or tail[last:last + 1] != b"}":
        return None
    window = 4 * SMALL_VALUE_BYTES
    while True:  # look at the structure characters of the last `window` bytes; widen if that is too few
        lo = max(0, last - window)
        marks = np.flatnonzero(_STRUCTURE[np.frombuffer(tail, np.uint8, last - lo, lo)]) + lo
        found = _walk_back(tail, marks.tolist(), open_at)
        if found is not _UNDECIDED or lo == 0:
            return None if found is _UNDECIDED else found
        window *= 4


_UNDECIDED = object()


def _walk_back(tail: bytes, marks: list[int], open_at: int):
    """`_tail_end`'s walk over ``marks`` (offsets of quotes and brackets, ascending): the offset, None
    (not an object's end), or _UNDECIDED when the marks ran out first."""
    depth, k = 1, len(marks) - 1
    candidate = None
    while k >= 0:
        i = marks[k]
        c = tail[i:i + 1]
        if candidate is not None and candidate - i > SMALL_VALUE_BYTES:
            return candidate  # still inside a top-level array this far back: the event array
        if c == b'"':
            i = _string_start(tail, i)
            if i < marks[0]:
                return _UNDECIDED  # the string opens before the window
            k = bisect.bisect_left(marks, i)  # the opening quote's own index
        elif c in (b"]", b"}"):
            if depth == 1 and c == b"]":
                candidate = i + 1
            depth += 1
        else:  # [ or {
            depth -= 1
            if depth == 1 and i == open_at:
                return candidate  # the event array itself, whole in the tail (a small file)
            if depth == 1:
                candidate = None  # that value opened inside the tail: a small one
            elif depth == 0:
                return None
        k -= 1
    return _UNDECIDED


def array_span(path, end: int | None = None, on_start=None) -> tuple[int, int] | None:
    """(start, end) byte offsets of the ``traceEvents`` array of an object-form trace, ``[`` to ``]``
    inclusive, checked by decoding everything around it as the rest of the object; None when the array
    cannot be placed that way (then read the file as one document). ``end``: the object ends at this
    byte (data follows it, or the file is read no further than the size its reader checked), else at the
    end of the file. ``on_start(start, end)``: called once the
    array's first byte is placed, before its end is looked for, with the end of the object."""
    path = Path(path)
    size = path.stat().st_size if end is None else end
    with open(path, "rb") as f:
        head = f.read(min(size, EDGE_BYTES))
        f.seek(max(0, size - EDGE_BYTES))
        tail = f.read(size - max(0, size - EDGE_BYTES))
    start = _head_start(head)
    if start is None:
        return None
    if on_start is not None:
        on_start(start, size)
    end_in_tail = _tail_end(tail, start - (size - len(tail)))
    if end_in_tail is None:
        return None
    end = size - len(tail) + end_in_tail
    if end <= start or size - end > EDGE_BYTES:
        return None
    rest = head[:start] + b"[]" + tail[end_in_tail:]
    try:
        doc = json.loads(rest)
    except (ValueError, RecursionError):
        return None
    return (start, end) if isinstance(doc, dict) and doc.get("traceEvents") == [] else None


class _SliceReader(io.RawIOBase):
    """Bytes ``start``..``end`` of a file as a seekable file of its own."""

    def __init__(self, path: str, start: int, end: int):
        super().__init__()
        self._f = open(path, "rb")
        self._start, self._len, self._pos = start, end - start, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self._len - self._pos)
        if n <= 0:
            return 0
        self._f.seek(self._start + self._pos)
        got = self._f.readinto(memoryview(buffer)[:n])
        self._pos += got
        return got

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._len}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self):
        self._f.close()
        super().close()


_slices: dict[str, tuple[str, int, int]] = {}
_lock = threading.Lock()
_ids = itertools.count()
PROTOCOL = "nbprofiler-slice"


def _filesystem():
    from fsspec.spec import AbstractFileSystem

    class SliceFileSystem(AbstractFileSystem):
        """Read-only files that are byte ranges of real files (registered with `slice_url`)."""

        protocol = PROTOCOL

        def _open(self, path, mode="rb", **kwargs):
            if "r" not in mode:
                raise PermissionError("slices are read-only")
            real, start, end = _slices[self._strip_protocol(path)]
            return io.BufferedReader(_SliceReader(real, start, end), buffer_size=8 << 20)

        def info(self, path, **kwargs):
            real, start, end = _slices[self._strip_protocol(path)]
            return {"name": path, "size": end - start, "type": "file"}

        def ls(self, path, detail=True, **kwargs):
            return [self.info(path)] if detail else [path]

    return SliceFileSystem()


# The largest range copied. The copy is dirty page cache of the temporary directory's file system for as
# long as the read takes; beyond this size its writeback would compete with the read for the disk.
COPY_MAX_BYTES = 2 << 30


class ArrayCopy:
    """Bytes ``start``..``end`` of ``path`` copied, on a thread of their own, to an unnamed file
    (``O_TMPFILE``: nothing is left behind, whatever happens to the process) in ``directory`` (the
    system's temporary directory by default), which duckdb reads natively as
    ``/proc/self/fd/N``. The copy runs in the kernel (``sendfile``; ~50 ms per 100 MB), without the GIL,
    so it overlaps whatever this thread does meanwhile. `start` returns None where no copy can be made (not
    Linux, a file system without ``O_TMPFILE``, a range over `COPY_MAX_BYTES` or over half the free
    space); `path` returns None when the copy failed (then read the range through `slice_url`)."""

    def __init__(self, fd: int, path, start: int, end: int):
        self._fd, self._error, self._start, self._keep = fd, None, start, None
        self._thread = threading.Thread(target=self._copy, args=(str(path), start, end),
                                        name="nbprofiler-array-copy", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, path, start: int, end: int, directory=None) -> ArrayCopy | None:
        directory = str(directory or tempfile.gettempdir())
        if not hasattr(os, "O_TMPFILE") or not os.path.isdir("/proc/self/fd") or end - start > COPY_MAX_BYTES:
            return None
        try:
            free = os.statvfs(directory)
            if 2 * (end - start) > free.f_bavail * free.f_frsize:
                return None
            fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600)
        except OSError:
            return None
        return cls(fd, path, start, end)

    def _copy(self, path: str, start: int, end: int) -> None:
        try:
            src = os.open(path, os.O_RDONLY)
            try:
                done = 0
                while done < end - start:
                    n = os.sendfile(self._fd, src, start + done, end - start - done)
                    if n == 0:
                        raise OSError(f"{path} ended at byte {start + done:,} while it was copied")
                    done += n
            finally:
                os.close(src)
        except OSError as e:  # no space left, or the file shrank: the caller reads the original instead
            self._error = e

    def trim(self, end: int) -> None:
        """Keep the bytes up to ``end`` of the source only (a copy started before the range's end was
        known, see `copied_span`)."""
        self._keep = end - self._start

    def path(self) -> str | None:
        """The copy's path for duckdb, once it is complete; None if it failed."""
        self._thread.join()
        if self._error is None and self._keep is not None:
            try:
                os.ftruncate(self._fd, self._keep)
                self._keep = None
            except OSError as e:
                self._error = e
        return None if self._error else f"/proc/self/fd/{self._fd}"

    def close(self) -> None:
        self._thread.join()
        os.close(self._fd)


def copied_span(path, end: int | None = None, directory=None) -> tuple[tuple[int, int] | None, ArrayCopy | None]:
    """`array_span`, and an `ArrayCopy` of the array (None where none can be made): the copy starts as
    soon as the array's first byte is placed, and runs while its end is looked for (a walk back over the
    array's last 64 KB, 4-7 ms: about what the kernel takes to copy 10 MB)."""
    copies = []
    span = array_span(path, end,
                      on_start=lambda start, stop: copies.append(ArrayCopy.start(path, start, stop, directory)))
    copy = copies[0] if copies else None
    if copy is not None and span is None:
        copy.close()
        copy = None
    elif copy is not None:
        copy.trim(span[1])
    return span, copy


def register(con) -> None:
    """Let duckdb connection ``con`` read slice URLs."""
    con.register_filesystem(_filesystem())


def slice_url(path, start: int, end: int) -> str:
    """A URL duckdb (after `register`) reads as bytes ``start``..``end`` of ``path``; `release` it after."""
    with _lock:
        key = f"{next(_ids)}.json"
        _slices[key] = (str(path), start, end)
    return f"{PROTOCOL}://{key}"


def release(url: str) -> None:
    with _lock:
        _slices.pop(url.split("://", 1)[1], None)


__all__ = ["array_span", "copied_span", "ArrayCopy", "register", "slice_url", "release", "EDGE_BYTES", "COPY_MAX_BYTES"]
