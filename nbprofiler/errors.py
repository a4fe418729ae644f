"""One exception family for everything that can be wrong with profiler input.

Every error names the file and, where it can, the line (1-based) and the field, so a user can open the
file and see the problem. Loaders raise these; `Profile` catches them per file, records a `Problem` in
`prof.problems` and warns with `ProfilerDataWarning`, so one bad file never stops the others.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path


class ProfilerDataError(Exception):
    """A profiler file that cannot be read as its format says.

    Attributes: ``path`` (the file), ``line`` (1-based line number or None), ``field`` (column or key
    name or None) and ``reason`` (what is wrong, in words).
    """

    def __init__(self, path, reason: str, line: int | None = None, field: str | None = None):
        self.path = Path(path) if path is not None else None
        self.reason = reason
        self.line = line
        self.field = field
        super().__init__(self._message())

    def _message(self) -> str:
        where = str(self.path) if self.path is not None else "<input>"
        if self.line is not None:
            where += f", line {self.line}"
        if self.field is not None:
            where += f", field {self.field!r}"
        return f"{where}: {self.reason}"


class EmptyFileError(ProfilerDataError):
    """The file exists but holds no data (zero bytes, or a header and nothing else where rows are needed)."""


class TruncatedFileError(ProfilerDataError):
    """The file ends in the middle of a record or a JSON document (e.g. a run that was killed)."""


class MalformedFileError(ProfilerDataError):
    """The file's content does not follow its format (bad syntax, wrong types, undecodable bytes)."""


class MissingColumnError(MalformedFileError):
    """A column (CSV) or key (JSON) that the format requires is absent."""


class FileTooLargeError(ProfilerDataError):
    """The file would not fit in the memory available; it was refused before loading."""


class NoProfilerDataError(ProfilerDataError):
    """A path that holds no file nbprofiler recognises."""


class ProfilerDataWarning(UserWarning):
    """Emitted when a file was skipped or partly loaded; the details are in ``prof.problems``."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One entry of ``prof.problems``: which file failed (or was partly skipped) and why."""

    file: str
    error: str
    kind: str = "error"  # "error" (file not loaded) or "warning" (loaded with data skipped)
    line: int | None = None
    field: str | None = None

    @classmethod
    def from_error(cls, err: ProfilerDataError, kind: str = "error") -> "Problem":
        return cls(file=str(err.path), error=f"{type(err).__name__}: {err.reason}", kind=kind,
                   line=err.line, field=err.field)

    def as_dict(self) -> dict:
        return {"file": self.file, "error": self.error}
