"""Jupyter server extension behind the JupyterLab extension (labextension/).

Three JSON endpoints, all under the server's base URL, each requiring the usual Jupyter auth:

``GET /nbprofiler/runs?path=<api path>``
    The profiler runs under a folder, found by `nbprofiler.io.discover.discover` (bounded in depth,
    entries and time) in a worker thread so the server's event loop never waits on a big tree.
    Answer: ``{"path": str, "runs": [run, ...]}``, each run a dict made by `run_entry`.

``POST /nbprofiler/report`` with body ``{"path": str, "device": str | null, "dir": str | null}``
    Writes a report notebook for the profiler output at ``path`` through the contents manager and
    answers ``{"path": <notebook api path>, "profile_path": <path written into the notebook>}``
    (status 201). The notebook goes next to the profiler output, never inside a profiler folder
    (see `report_dir`), or into ``dir`` when given, which must not be inside profiler output (409,
    with a message naming the profiler folder, shown to the user as is).

``GET /nbprofiler/report-dir?path=<api path>``
    Where the report for ``path`` goes when no ``dir`` is given: ``{"path": str, "dir": <api path>}``,
    so the UI can offer it as the default of a folder choice. 409 when there is no such place (the
    root itself is profiler output).

"API paths" are what the file browser and the contents API use: relative to the server's root
directory, "/"-separated. Paths that resolve outside the root (``..``, symlinks) are refused (403), and so
is what no file system can hold (400): a NUL, a lone surrogate (``"\\ud800"``: not text a file name can
be encoded from), a name over 255 bytes, a symlink loop; a path over `MAX_PATH_CHARS` is 413. Errors are
short JSON (``{"message": ...}``) naming the problem, with the path shortened and escaped (`shown`), so
neither the answer nor the server log carries a hostile path whole; a symlink loop inside a listed
folder is skipped, the rest of the listing answered.

Registered by ``labextension/jupyter-config/nbprofiler.json`` (installed into
``etc/jupyter/jupyter_server_config.d``), which enables the package ``nbprofiler``; its
``_jupyter_server_extension_points`` names this module.
"""
from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
import sqlite3
from pathlib import Path, PurePosixPath

from ..errors import NoProfilerDataError
from ..io.discover import ASCEND_MS, CANN_TIMELINE, PROF_DIR, RunFiles, classify, discover, run_keys

# Folder names that only occur inside profiler output (a run's sub-folders).
PROFILER_SUBDIRS = {"ASCEND_PROFILER_OUTPUT", "FRAMEWORK", "mindstudio_profiler_output", "timeline",
                    "profiler", "cluster_analysis_output"}
REPORT_SUFFIX = "-nbprofiler"
# Request limits: a report request is a few short paths; anything far larger is refused (413), not parsed.
MAX_BODY_BYTES = 64 * 1024
MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255    # NAME_MAX of Linux and macOS file systems: no file has a longer name
SHOWN_CHARS = 80        # a path in a message or the log: at most this many characters of it


class PathError(ValueError):
    """A request path that is not usable: outside the root, missing, or profiler output."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` for a message or a log line: quoted and escaped (``repr``: control characters and lone
    surrogates as ``\\x..``/``\\ud800``), and over ``limit`` characters cut in the middle, saying how much
    was left out."""
    if len(text) > limit:
        keep = max(limit // 2 - 4, 1)
        return f"{text[:keep]!r}...({len(text) - 2 * keep:,} more characters)...{text[-keep:]!r}"
    return repr(text)


def _bounded_uri(uri: str, limit: int = 2 * SHOWN_CHARS) -> str:
    """A request URI for the server log: non-printable characters escaped, at most about ``limit`` long."""
    if len(uri) <= limit and uri.isprintable():
        return uri
    escaped = uri.encode("ascii", "backslashreplace").decode("ascii")
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in escaped)
    if len(escaped) > limit:
        escaped = f"{escaped[:limit]}...({len(escaped) - limit:,} more characters)"
    return escaped


def check_text(value: str, what: str = "path") -> None:
    """`PathError` (400) for a string no file name and no notebook can hold: a NUL or a lone surrogate."""
    if "\x00" in value:
        raise PathError(f"the {what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PathError(f"the {what} is not valid text: it holds a lone surrogate "
                        f"(e.g. \"\\ud800\"), which no file name can hold") from None


def check_api_path(api_path: str) -> None:
    """`PathError` for an API path no file system can hold, before the file system is asked: over
    `MAX_PATH_CHARS` (413), a NUL or a lone surrogate, a name over `MAX_NAME_BYTES` bytes (400)."""
    if len(api_path) > MAX_PATH_CHARS:
        raise PathError(f"a path over {MAX_PATH_CHARS:,} characters", status=413)
    check_text(api_path)
    for part in api_path.split("/"):
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathError(f"a name in the path is over {MAX_NAME_BYTES} bytes ({shown(part)}); "
                            "no file has such a name")


def _fs_error(api_path: str, err: BaseException) -> PathError:
    """The `PathError` for a file-system error met while resolving or reading ``api_path``."""
    if isinstance(err, RuntimeError) or getattr(err, "errno", None) == errno.ELOOP:
        return PathError(f"{shown(api_path)} is a symlink loop")
    code = getattr(err, "errno", None)
    if code == errno.ENAMETOOLONG:
        return PathError(f"{shown(api_path)} has a name too long for the file system")
    if code in (errno.EACCES, errno.EPERM):
        return PathError(f"{shown(api_path)}: permission denied", status=403)
    if code in (errno.ENOENT, errno.ENOTDIR):
        return PathError(f"{shown(api_path)} does not exist", status=404)
    reason = getattr(err, "strerror", None) or type(err).__name__
    return PathError(f"{shown(api_path)} cannot be read ({reason})")


def resolve_api_path(root: Path, api_path: str) -> Path:
    """The real path of ``api_path`` under ``root``; `PathError` if it leaves the root, is missing, or is
    no usable path (`check_api_path`, a symlink loop: never a RuntimeError or OSError)."""
    check_api_path(api_path)
    rel = PurePosixPath(api_path.strip("/"))
    try:
        target = (root / rel).resolve()
    except (RuntimeError, OSError) as err:  # Python < 3.13: a symlink loop is a RuntimeError
        raise _fs_error(api_path, err) from None
    if target != root and root not in target.parents:
        raise PathError(f"{shown(api_path)} is outside the Jupyter root directory", status=403)
    try:
        exists = target.exists()
    except OSError as err:
        raise _fs_error(api_path, err) from None
    if not exists:
        raise PathError(f"{shown(api_path)} does not exist", status=404)
    return target


def to_api_path(root: Path, path: Path) -> str:
    rel = path.resolve().relative_to(root)
    return "" if rel == Path(".") else rel.as_posix()


def is_profiler_dir(folder: Path) -> bool:
    """Whether ``folder`` is (part of) profiler output: its name or a file directly in it says so.

    Only the folder's own entries are looked at, so this stays cheap on any folder.
    """
    name = folder.name
    if ASCEND_MS.match(name) or PROF_DIR.match(name) or name in PROFILER_SUBDIRS:
        return True
    if name.startswith("device_") and PROF_DIR.match(folder.parent.name):
        return True
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file() and (classify(entry.name) or CANN_TIMELINE.fullmatch(entry.name)):
                        return True
                    if entry.is_dir() and entry.name in ("ASCEND_PROFILER_OUTPUT", "FRAMEWORK"):
                        return True
                except OSError:  # a symlink loop, an unreadable link: that entry says nothing
                    continue
    except OSError:
        return False
    return False


def outermost_profiler_folder(root: Path, folder: Path) -> Path | None:
    """The highest folder from ``folder`` up to ``root`` (included) that is profiler output, or None."""
    found = None
    for candidate in [folder, *folder.parents]:
        if candidate != root and root not in candidate.parents:
            break
        if is_profiler_dir(candidate):
            found = candidate
    return found


def report_dir(root: Path, target: Path) -> Path:
    """Where the report notebook for ``target`` goes: next to it, but never inside profiler output.

    Start at the folder holding ``target``; if that folder or one above it is profiler output, use the
    parent of the outermost such folder, e.g. a right-click on ``run_ascend_ms/ASCEND_PROFILER_OUTPUT``
    puts the notebook beside ``run_ascend_ms``. If the root itself is profiler output there is no such
    place and `PathError` asks the user to choose a folder.
    """
    folder = target.parent if target != root else root
    inside = outermost_profiler_folder(root, folder)
    if inside is None:
        return folder
    if inside == root:
        raise PathError("the Jupyter root directory holds profiler output itself; choose another folder "
                        "for the report notebook (nbprofiler never writes into profiler directories)",
                        status=409)
    return inside.parent


def report_template_path() -> Path:
    """``report_template.ipynb``: inside the installed package (a wheel carries it), else the source tree's
    ``notebooks/`` (an editable install)."""
    packaged = Path(__file__).with_name("report_template.ipynb")
    return packaged if packaged.is_file() else Path(__file__).resolve().parents[2] / "notebooks" / packaged.name


def report_notebook(profile_path: str, device: str | None = None, kernel_name: str = "python3",
                    kernel_display_name: str = "Python 3") -> dict:
    """The report notebook (nbformat 4 JSON) for profiler output at ``profile_path``: the report template
    with its parameters set the way papermill does (a cell tagged ``injected-parameters`` after the cell
    tagged ``parameters``), then the interactive dashboard.

    ``profile_path`` is relative to the notebook's folder (the kernel's working directory), so the
    notebook keeps working when the two are moved together. The path goes into code as a Python string
    literal (``repr``), never into markdown, so no file name can inject code or HTML.
    """
    nb = json.loads(report_template_path().read_text(encoding="utf-8"))
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        cell["id"] = f"nbprofiler-{i}"
        if isinstance(cell["source"], list):  # nbformat on disk may split a source into lines
            cell["source"] = "".join(cell["source"])
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    at = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    cells.insert(at + 1, {"cell_type": "code", "execution_count": None, "id": "nbprofiler-parameters",
                          "metadata": {"tags": ["injected-parameters"]}, "outputs": [],
                          "source": f"path = {profile_path!r}\ndevice = {device!r}\ntitle = None"})
    cells.append({"cell_type": "markdown", "id": "nbprofiler-dashboard-title", "metadata": {}, "source": (
        "## Interactive dashboard\n\nThe same views with a live kernel: choose a step, click an operator type, "
        "zoom the timeline. `prof` holds the loaded profile's DataFrames for your own cells.")})
    cells.append({"cell_type": "code", "execution_count": None, "id": "nbprofiler-dashboard", "metadata": {},
                  "outputs": [], "source": "prof.show()"})
    nb["metadata"] = {"kernelspec": {"name": kernel_name, "display_name": kernel_display_name,
                                     "language": "python"},
                      "language_info": {"name": "python"},
                      "nbprofiler": {"generated": _dt.datetime.now().isoformat(timespec="seconds")}}
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    return nb


def unique_name(folder: Path, stem: str, suffix: str = ".ipynb") -> str:
    """``stem + suffix``, or ``stem-2 + suffix``, ... the first name not taken in ``folder`` (a dangling
    symlink takes its name: writing through it would write wherever it points)."""
    name, n = stem + suffix, 1
    while os.path.lexists(folder / name):
        n += 1
        name = f"{stem}-{n}{suffix}"
    return name


def reserve_name(folder: Path, stem: str, suffix: str = ".ipynb", attempts: int = 1000) -> str:
    """Create an empty file under the first free name (`unique_name`) with ``O_CREAT | O_EXCL`` and return
    the name: never a file or link that exists, and two concurrent requests never get the same name."""
    for _ in range(attempts):
        name = unique_name(folder, stem, suffix)
        try:
            fd = os.open(folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue  # taken between the check and the create: try the next free name
        os.close(fd)
        return name
    raise PathError(f"no free report name in {shown(folder.name)}", status=409)


def _newest_mtime(run: RunFiles) -> float | None:
    times = []
    for paths in run.files.values():
        for p in paths:
            try:
                times.append(p.stat().st_mtime)
            except OSError:
                continue
    return max(times) if times else None


# Where a run's date comes from (``date_source``), best first; the last is a stand-in, and says so.
FOLDER_NAME, PROFILER_INFO, DATABASE, CANN_START_INFO, FILE_TIME = (
    "folder name", "profiler_info", "database", "start_info", "file time")
# MindSpore's ``<worker>_<YYYYMMDDhhmmssmmm>_ascend_ms`` (torch_npu: ``_ascend_pt``): the UTC start of the
# profiling session, 17 digits (14 without milliseconds).
_FOLDER_TIME = re.compile(r"_(\d{17}|\d{14})_ascend_(?:ms|pt)$")
_SMALL_JSON = 1 << 20   # metadata files are a few KB: a huge one is not read here


def _local(when: _dt.datetime) -> str:
    """``when`` as the server's local time, ISO to the second, without an offset (as the sidebar shows it)."""
    if when.tzinfo is not None:
        when = when.astimezone().replace(tzinfo=None)
    return when.isoformat(timespec="seconds")


def _from_epoch(value, unit: float) -> _dt.datetime | None:
    """A Unix time in ``unit`` seconds (1e-9 for ns, 1e-6 for us); None unless it is a plausible date."""
    try:
        seconds = float(value) * unit
    except (TypeError, ValueError):
        return None
    if not 946684800 <= seconds <= 4102444800:  # 2000 .. 2100
        return None
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)


def folder_time(name: str) -> _dt.datetime | None:
    """The profiling start a ``*_<YYYYMMDDhhmmssmmm>_ascend_ms`` / ``_ascend_pt`` folder name holds (UTC)."""
    m = _FOLDER_TIME.search(name or "")
    if not m:
        return None
    digits = m.group(1)
    try:
        when = _dt.datetime.strptime(digits[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return when.replace(microsecond=int(digits[14:] or 0) * 1000, tzinfo=_dt.timezone.utc)


def _small_json(path: Path | None):
    if path is None:
        return None
    try:
        if path.stat().st_size > _SMALL_JSON:
            return None
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None


def info_time(path: Path | None) -> _dt.datetime | None:
    """The profiling start a ``profiler_info_*.json`` says: ``start_info.collectionTimeBegin`` where written,
    else its end (``end_info.collectionTimeEnd``, ns) less the session's length on the monotonic clock
    (``MonotonicTimeEnd - start_info.start_monotonic``, ns), else the legacy ``profiling_stop_time``
    (local time: the nearest thing to a profiling time such a file holds)."""
    info = _small_json(path)
    if not isinstance(info, dict):
        return None
    start = info.get("start_info") if isinstance(info.get("start_info"), dict) else {}
    end = info.get("end_info") if isinstance(info.get("end_info"), dict) else {}
    for key, unit in (("collectionTimeBegin", 1e-6), ("collectionTimeBeginNs", 1e-9)):
        when = _from_epoch(start.get(key), unit)
        if when is not None:
            return when
    try:
        begin_ns = float(end["collectionTimeEnd"]) - (float(end["MonotonicTimeEnd"]) - float(start["start_monotonic"]))
    except (KeyError, TypeError, ValueError):
        begin_ns = None
    when = _from_epoch(begin_ns, 1e-9) if begin_ns is not None else _from_epoch(end.get("collectionTimeEnd"), 1e-9)
    if when is not None:
        return when
    stop = info.get("profiling_stop_time")
    if isinstance(stop, str):
        try:
            return _dt.datetime.strptime(stop.strip(), "%Y-%m-%d %H:%M:%S")   # local time, as written
        except ValueError:
            return None
    return None


def db_time(path: Path | None) -> _dt.datetime | None:
    """``SESSION_TIME_INFO.startTimeNs`` of a profiler database (read only, never waited on)."""
    if path is None:
        return None
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
    except (sqlite3.Error, OSError, ValueError, RuntimeError):
        return None
    try:
        row = con.execute("SELECT startTimeNs FROM SESSION_TIME_INFO LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        con.close()
    return _from_epoch(row[0], 1e-9) if row else None


def cann_time(path: Path | None) -> _dt.datetime | None:
    """``collectionTimeBegin`` (us since the epoch) of a CANN ``start_info.N`` file."""
    info = _small_json(path)
    return _from_epoch(info.get("collectionTimeBegin"), 1e-6) if isinstance(info, dict) else None


def run_date(run: RunFiles) -> tuple[str | None, str | None]:
    """(local ISO time, where it comes from) of when a run was profiled: the start time in its session
    folder's name, else its ``profiler_info_*.json`` / ``profiler_metadata.json``, else its profiler
    database's session start, else its CANN ``start_info``; only failing all of those the newest
    modification time of its files (`FILE_TIME`: a copy or a checkout sets that, not the profiler)."""
    for name in (run.session, run.root.name):
        when = folder_time(name)
        if when is not None:
            return _local(when), FOLDER_NAME
    for role in ("profiler_info", "profiler_metadata"):
        for path in run.all(role):
            when = info_time(path)
            if when is not None:
                return _local(when), PROFILER_INFO
    for role in ("profiler_db", "msprof_db"):
        for path in run.all(role):
            when = db_time(path)
            if when is not None:
                return _local(when), DATABASE
    for path in run.all("cann_start_info"):
        when = cann_time(path)
        if when is not None:
            return _local(when), CANN_START_INFO
    mtime = _newest_mtime(run)
    if mtime is None:
        return None, None
    return _local(_dt.datetime.fromtimestamp(mtime)), FILE_TIME


def run_entry(root: Path, searched: Path, run: RunFiles, devices_in_folder: list[str], key: str | None = None) -> dict:
    """One run for the sidebar: where it is, what it is and when it was profiled.

    ``path``: api path of the run's folder (or of the trace file for a single-file run); ``name``:
    that path relative to the searched folder ("." when it is the folder itself); ``generation``,
    ``device``, ``session`` from discovery; ``key``: how ``load(searched, device=...)`` names the run
    (``"<rank>@<session>"`` for a later session of a rank); ``devices_in_folder``: the devices sharing the folder;
    ``date``: local ISO time the run was profiled (`run_date`) and ``date_source`` where that comes from
    (``"file time"``: only its files' modification time was found); ``files``: how many files the run has.
    """
    location = run.root
    if run.generation == "trace" and run.session:
        location = run.root / run.session
    date, source = run_date(run)
    rel = os.path.relpath(location, searched)
    return {
        "path": to_api_path(root, location),
        "name": Path(rel).as_posix(),
        "generation": run.generation,
        "device": run.info.get("rank_id", run.device),
        "devices_in_folder": devices_in_folder,
        "session": run.session,
        "key": key or str(run.info.get("rank_id", run.device)),
        "date": date,
        "date_source": source,
        "files": sum(len(v) for v in run.files.values()),
    }


def list_runs(root: Path, folder: Path) -> list[dict]:
    """The runs under ``folder`` (blocking; the handler calls it in a worker thread)."""
    try:
        runs = discover(folder)
    except NoProfilerDataError:
        return []
    by_folder: dict[Path, list[str]] = {}
    for run in runs:
        by_folder.setdefault(run.root, []).append(run.info.get("rank_id", run.device))
    entries = []
    for run, key in zip(runs, run_keys(runs)):
        try:
            entries.append(run_entry(root, folder, run, by_folder[run.root], key))
        except (OSError, RuntimeError, ValueError):
            # a loop or an unreadable link on the way, or a run that resolves outside the root: not listed
            continue
    return sorted(entries, key=lambda e: (e["name"], _device_key(e["device"])))


def _device_key(device: str):
    return (0, int(device)) if device.isdigit() else (1, device)


def _runs_folder(root: Path, api_path: str) -> Path:
    """The folder whose runs ``GET nbprofiler/runs`` lists: ``api_path``, or the folder holding that file."""
    target = resolve_api_path(root, api_path)
    return target if target.is_dir() else target.parent


def chosen_report_dir(root: Path, dir_api_path: str) -> Path:
    """The folder the user chose for a report; `PathError` (409) if it is inside profiler output.

    The message names the profiler folder, as the UI shows it to the user verbatim.
    """
    folder = resolve_api_path(root, dir_api_path)
    if not folder.is_dir():
        raise PathError(f"{shown(dir_api_path)} is not a folder")
    inside = outermost_profiler_folder(root, folder)
    if inside is None:
        return folder
    where = ("is profiler output" if inside == folder
             else f"is inside the profiler output folder {shown(to_api_path(root, inside))}")
    raise PathError(f"{shown(dir_api_path)} {where}; nbprofiler never writes into profiler directories. "
                    "Choose a folder outside it.", status=409)


def suggested_report_dir(root: Path, api_path: str) -> str:
    """API path of the folder `create_report` uses for ``api_path`` when no folder is chosen."""
    return to_api_path(root, report_dir(root, resolve_api_path(root, api_path)))


def create_report(root: Path, api_path: str, device: str | None = None, dir_api_path: str | None = None,
                  kernel_name: str = "python3", kernel_display_name: str = "Python 3") -> tuple[str, dict, str]:
    """(notebook api path, notebook JSON, profile path written into it) for a report on ``api_path``.

    The notebook's name is reserved here (an empty file, created exclusively); the handler saves the
    notebook into it through the contents manager.
    """
    target = resolve_api_path(root, api_path)
    if dir_api_path:
        folder = chosen_report_dir(root, dir_api_path)
    else:
        folder = report_dir(root, target)
    stem = (target.stem if target.is_file() else target.name) or "profile"
    while len(stem.encode("utf-8")) > MAX_NAME_BYTES - 40:  # room for "-nbprofiler-NNN.ipynb"
        stem = stem[:-1]
    name = reserve_name(folder, stem + REPORT_SUFFIX)
    profile_path = Path(os.path.relpath(target, folder)).as_posix()
    nb = report_notebook(profile_path, device, kernel_name, kernel_display_name)
    folder_api = to_api_path(root, folder)
    return (f"{folder_api}/{name}" if folder_api else name), nb, profile_path


# -- tornado handlers (jupyter_server is only imported when the server loads the extension) ----------

def _handlers():
    from jupyter_core.utils import ensure_async
    from jupyter_server.base.handlers import APIHandler
    from tornado import web
    from tornado.ioloop import IOLoop

    class _Base(APIHandler):
        @property
        def root(self) -> Path:
            return Path(self.settings["server_root_dir"]).expanduser().resolve()

        async def prepare(self):
            # the access log and tornado's error lines quote the URI: never a hostile path whole
            self.request.uri = _bounded_uri(self.request.uri or "")
            await super().prepare()

        async def run(self, api_path: str, fn, *args):
            """``fn(*args)`` in a worker thread; a `PathError`, or a file-system error met on ``api_path``,
            is a 4xx naming the problem (never a 500 with a traceback quoting the path)."""
            try:
                return await IOLoop.current().run_in_executor(None, fn, *args)
            except PathError as err:
                raise web.HTTPError(err.status, str(err)) from None
            except (OSError, RuntimeError) as err:
                problem = _fs_error(api_path, err)
                raise web.HTTPError(problem.status, str(problem)) from None

    class RunsHandler(_Base):
        @web.authenticated
        async def get(self):
            api_path = self.get_query_argument("path", "")
            folder = await self.run(api_path, _runs_folder, self.root, api_path)
            runs = await self.run(api_path, list_runs, self.root, folder)
            self.finish(json.dumps({"path": to_api_path(self.root, folder), "runs": runs}))

    class ReportDirHandler(_Base):
        @web.authenticated
        async def get(self):
            api_path = self.get_query_argument("path", "")
            folder = await self.run(api_path, suggested_report_dir, self.root, api_path)
            self.finish(json.dumps({"path": api_path, "dir": folder}))

    class ReportHandler(_Base):
        @web.authenticated
        async def post(self):
            if len(self.request.body or b"") > MAX_BODY_BYTES:
                raise web.HTTPError(413, f"request body over {MAX_BODY_BYTES:,} bytes")
            try:
                body = json.loads(self.request.body or b"{}")
            except (ValueError, RecursionError):
                raise web.HTTPError(400, "request body is not JSON") from None
            expected = "expected {\"path\": str, \"device\": str|null, \"dir\": str|null}"
            if not isinstance(body, dict):
                raise web.HTTPError(400, expected)
            api_path = body.get("path")
            device, dir_api_path = body.get("device"), body.get("dir")
            if not isinstance(api_path, str) or not all(v is None or isinstance(v, str)
                                                        for v in (device, dir_api_path)):
                raise web.HTTPError(400, expected)
            if any(v is not None and len(v) > MAX_PATH_CHARS for v in (api_path, device, dir_api_path)):
                raise web.HTTPError(413, f"a path over {MAX_PATH_CHARS:,} characters")
            try:
                for what, value in (("path", api_path), ("device", device), ("dir", dir_api_path)):
                    if value is not None:
                        check_text(value, what)
            except PathError as err:
                raise web.HTTPError(err.status, str(err)) from None
            # The server's default kernel, so the report runs in the environment Lab would pick itself.
            kernel_name = getattr(self.kernel_manager, "default_kernel_name", None) or "python3"
            try:
                display = (await ensure_async(self.kernel_spec_manager.get_kernel_spec(kernel_name))).display_name
            except Exception:  # noqa: BLE001 - a missing spec only changes the label
                display = kernel_name
            nb_path, nb, profile_path = await self.run(
                api_path, create_report, self.root, api_path, device, dir_api_path, kernel_name, display)
            try:
                await ensure_async(self.contents_manager.save({"type": "notebook", "format": "json",
                                                                "content": nb}, nb_path))
            except Exception:
                (self.root / nb_path).unlink(missing_ok=True)  # the reserved, still empty name
                raise
            self.set_status(201)
            self.finish(json.dumps({"path": nb_path, "profile_path": profile_path}))

    return RunsHandler, ReportDirHandler, ReportHandler


def _bokehjs_handler():
    """Serves the installed bokeh's own BokehJS bundles to the page (views/bokehjs.py loads them)."""
    from jupyter_server.base.handlers import JupyterHandler
    from tornado import web

    class BokehJSHandler(JupyterHandler):
        @web.authenticated
        def get(self, version: str, bundle: str):
            from ..views.bokehjs import bundle_path
            path = bundle_path(version, bundle)
            if path is None or not path.is_file():
                raise web.HTTPError(404, "not a BokehJS bundle of the installed bokeh")
            self.set_header("Content-Type", "application/javascript; charset=utf-8")
            # the URL names the version: the file behind it never changes
            self.set_header("Cache-Control", "private, max-age=31536000, immutable")
            self.finish(path.read_bytes())

    return BokehJSHandler


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join

    runs_handler, report_dir_handler, report_handler = _handlers()
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base, "nbprofiler", "runs"), runs_handler),
        (url_path_join(base, "nbprofiler", "report-dir"), report_dir_handler),
        (url_path_join(base, "nbprofiler", "report"), report_handler),
        (url_path_join(base, "nbprofiler", "bokehjs", r"([0-9A-Za-z.+-]+)", r"([a-z-]+)\.min\.js"),
         _bokehjs_handler()),
    ])
    serverapp.log.info("nbprofiler server extension loaded: %s", url_path_join(base, "nbprofiler"))
