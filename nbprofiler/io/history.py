"""The check history: one JSON file per checked run in a folder the user names, and summary JSON files
(``nbprofiler summary --json``) read as runs. What a record holds is `nbprofiler.analysis.checks.history_record`;
this module only finds, writes and reads the files, and never writes into profiler output."""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import MalformedFileError
from ..schema import SUMMARY_SECTIONS
from .discover import in_profiler_output

HISTORY_FORMAT = "nbprofiler-check-history"  # the "format" of every history record


class HistoryError(ValueError):
    """A history folder that cannot be used: inside profiler output, not a folder, or a record that is not
    readable JSON."""


def _history_folder(folder, *, create: bool) -> Path:
    folder = Path(folder)
    if in_profiler_output(folder.resolve()):
        raise HistoryError(f"{folder} is, or lies inside, profiler output: nbprofiler writes nothing into a "
                           "profile; name a history folder outside it")
    if folder.exists() and not folder.is_dir():
        raise HistoryError(f"the history folder {folder} is a file")
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_history(folder, records: list[dict]) -> list[Path]:
    """Append each record as its own JSON file in ``folder`` (made when missing; refused inside profiler
    output). File names start with the record's timestamp, so a listing is in run order; none is
    overwritten."""
    folder = _history_folder(folder, create=True)
    written = []
    for rec in records:
        stamp = rec["timestamp"].replace("-", "").replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", rec.get("label") or "run").strip("._")[:40] or "run"
        for k in range(1000):
            path = folder / f"{stamp}_{slug}{'' if k == 0 else f'_{k}'}.json"
            try:
                with open(path, "x", encoding="utf-8") as f:
                    json.dump(rec, f, indent=1, allow_nan=False)
                break
            except FileExistsError:
                continue
        else:
            raise HistoryError(f"cannot find a free file name for {stamp}_{slug} in {folder}")
        written.append(path)
    return written


def read_history(folder) -> list[dict]:
    """The records of a history folder in run order (timestamp, then file name); other JSON files are left
    alone. An empty list when the folder does not exist yet."""
    folder = _history_folder(folder, create=False)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise HistoryError(f"history record {path} cannot be read: {err}") from None
        if isinstance(rec, dict) and rec.get("format") == HISTORY_FORMAT:
            out.append((str(rec.get("timestamp", "")), path.name, rec))
    return [rec for _, _, rec in sorted(out, key=lambda t: (t[0], t[1]))]


def is_summary(obj) -> bool:
    """Whether a JSON document is a profile summary (`Profile.summary()`, ``nbprofiler summary --json``)."""
    return isinstance(obj, dict) and "nbprofiler_version" in obj and "generation" in obj


def looks_like_summary_file(path) -> bool:
    """A ``.json`` file whose first 4 KiB name ``nbprofiler_version``; any other file is left to the
    profile loader (a profiler's own JSON, read under its memory guard)."""
    path = Path(path)
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return '"nbprofiler_version"' in f.read(4096)
    except OSError:
        return False


def read_summary(path) -> dict:
    """The summary in a summary JSON file; `MalformedFileError` when it is not readable, not a summary, or
    a section of it has the wrong type (`schema.SUMMARY_SECTIONS`)."""
    summary = _load_json(path)
    if not is_summary(summary):
        raise MalformedFileError(path, "not a readable summary JSON document (nbprofiler summary --json)")
    for key, types in SUMMARY_SECTIONS.items():
        if key in summary and not isinstance(summary[key], types):
            want = " or ".join("null" if t is type(None) else _JSON_TYPE[t] for t in types)
            raise MalformedFileError(path, f"not a summary as nbprofiler writes it: {key!r} is "
                                           f"{_JSON_TYPE.get(type(summary[key]), 'a value')}, not {want}", field=key)
    return summary


_JSON_TYPE = {dict: "an object", list: "a list", str: "text", int: "a number", float: "a number",
              bool: "true/false", type(None): "null"}


def summary_files(folder) -> list[Path]:
    """The summary JSON files directly in ``folder`` (sorted), or [] when it holds none: a folder of runs.
    A folder inside profiler output is never one (its JSON files are the profiler's)."""
    folder = Path(folder)
    if not folder.is_dir() or in_profiler_output(folder):
        return []
    return [p for p in sorted(folder.glob("*.json")) if looks_like_summary_file(p) and is_summary(_load_json(p))]


def _load_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
