"""``%%nbprofiler profile``: run a notebook cell under MindSpore's profiler, then load and show what it wrote.

The cell runs inside ``mindspore.profiler.profile(...)`` (MindSpore 2.x's profiler API) with
``on_trace_ready=tensorboard_trace_handler(OUTPUT)``, so MindSpore writes and analyses its usual
``<host>_<pid>_<time>_ascend_ms`` folder under OUTPUT when the cell ends. With ``--data-process`` the
dataset engine's own profiling manager samples the MindData pipeline too (the CPU build writes no pipeline
files otherwise), and its files are saved into that run's ``FRAMEWORK`` folder. A cell that raises still
stops the profiler; what it wrote is loaded and shown, then the error is raised again.

MindSpore 2.10's wheels are compiled against NumPy 1.x; with NumPy 2 (what pandas 3 needs, and what
``pip install "nbprofiler[mindspore]"`` installs beside it) importing some of its parts makes NumPy print a
"compiled using NumPy 1.x" message with a whole stack trace, a screen and more at the top of the cell's
output, while MindSpore goes on without those parts. The magic's own imports of MindSpore hide that one
message (`quiet_numpy_notice`) and say so in one line; everything else MindSpore prints is shown.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import glob
import io
import os
import shlex
import sys
from pathlib import Path

INSTALL = 'pip install "nbprofiler[mindspore]"'
HELP = """\
%%nbprofiler profile [--output DIR] [--schedule WAIT,ACTIVE[,WARMUP[,REPEAT[,SKIP]]]]
                     [--data-process] [--memory] [--with-stack] [--as NAME] [--no-show]

Run the cell's MindSpore code under MindSpore's profiler, then load the output and show the dashboard.

  --output DIR      where MindSpore writes (default: a new ./nbprofiler-runs/run-<time> folder;
                    never inside an existing profile)
  --schedule W,A,.. mindspore.profiler.schedule(wait=W, active=A, warmup=, repeat=, skip_first=):
                    call nbprof.step() once per step in the cell
  --data-process    also profile the MindData pipeline (queues, per-op CPU)
  --memory          record memory (profile_memory=True)
  --with-stack      record Python call stacks (with_stack=True)
  --as NAME         variable for the loaded profile (default: prof)
  --no-show         load and bind, show nothing
"""


class MagicUsageError(ValueError):
    """Bad arguments to ``%nbprofiler`` or ``%%nbprofiler profile`` (the message includes the help text).
    Defined here, with the cell magic's parser, and raised by the line magic's (`nbprofiler.faces.magics`)
    too, so neither module imports the other back."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise MagicUsageError(f"{message}\n\n{HELP}")


def parse(line: str) -> argparse.Namespace:
    """The options after ``profile`` on the ``%%nbprofiler`` line."""
    p = _Parser(prog="%%nbprofiler profile", add_help=False)
    p.add_argument("--output", default=None)
    p.add_argument("--schedule", default=None)
    p.add_argument("--data-process", action="store_true")
    p.add_argument("--memory", action="store_true")
    p.add_argument("--with-stack", action="store_true")
    p.add_argument("--as", dest="name", default="prof")
    p.add_argument("--no-show", action="store_true")
    args = p.parse_args(shlex.split(line))
    if args.schedule is not None:
        try:
            numbers = [int(x) for x in args.schedule.split(",")]
        except ValueError:
            numbers = []
        if not 2 <= len(numbers) <= 5 or min(numbers) < 0:
            p.error(f"--schedule takes WAIT,ACTIVE[,WARMUP[,REPEAT[,SKIP]]] (non-negative integers), "
                    f"not {args.schedule!r}")
        args.schedule = dict(zip(("wait", "active", "warmup", "repeat", "skip_first"), numbers))
    if not args.name.isidentifier():
        p.error(f"--as needs a Python variable name, not {args.name!r}")
    return args


def output_folder(requested: str | None, cwd: Path | None = None) -> Path:
    """Where MindSpore writes: ``requested``, or a new folder under ./nbprofiler-runs. A folder inside an
    existing profile is refused (nbprofiler never writes into profiler output)."""
    from .lab import is_profiler_dir
    cwd = Path(cwd or os.getcwd()).resolve()
    out = (cwd / requested).resolve() if requested else \
        cwd / "nbprofiler-runs" / _dt.datetime.now().strftime("run-%Y%m%d-%H%M%S")
    for folder in (out, *out.parents):
        if folder.exists() and is_profiler_dir(folder):
            raise ValueError(f"{out} is inside the profiler output {folder}: choose another --output")
    return out


class MindSporeMissing(ImportError):
    """The kernel has no MindSpore; the message says how to install it."""


# What NumPy 2 prints (with the stack of the import) when a module compiled against NumPy 1.x asks for
# its C API, and the errors that follow it.
NUMPY_1X_NOTICE = "compiled using NumPy 1.x"
_NUMPY_1X_FOLLOWERS = ("_ARRAY_API not found", "numpy.core.multiarray failed to import",
                       "numpy.core._multiarray_umath failed to import")


class _NoticeFilter(io.TextIOBase):
    """Stands in for ``sys.stderr`` while MindSpore is imported: every write goes through to the real
    stream at once, except NumPy's "compiled using NumPy 1.x" message (one write: the message and its
    stack) and the import errors it names. A logging handler created meanwhile keeps writing through it."""

    def __init__(self, target):
        super().__init__()
        self.target, self.active, self.hidden = target, True, 0

    def write(self, text) -> int:
        if self.active and (NUMPY_1X_NOTICE in text or any(f in text for f in _NUMPY_1X_FOLLOWERS)):
            self.hidden += 1
            return len(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name):   # fileno, encoding, isatty ... of the real stream
        return getattr(self.target, name)


@contextlib.contextmanager
def quiet_numpy_notice():
    """Hide NumPy's "compiled using NumPy 1.x" message (and its stack trace) printed while MindSpore
    is imported in this block, writing one line instead; everything else on stderr passes. Yields the
    filter (``.hidden``: how many writes it held back)."""
    real = sys.stderr
    gate = _NoticeFilter(real)
    sys.stderr = gate
    try:
        yield gate
    finally:
        gate.active = False
        if sys.stderr is gate:
            sys.stderr = real
        if gate.hidden:
            import numpy
            ms = sys.modules.get("mindspore")
            real.write(f"nbprofiler: hid NumPy {numpy.__version__}'s 'A module that was compiled using NumPy 1.x "
                       f"cannot be run in NumPy 2' message and its stack trace, printed while importing MindSpore "
                       f"{getattr(ms, '__version__', '')}".rstrip() + " (built against NumPy 1.x); MindSpore goes "
                       "on without the part that needed it.\n")


def _mindspore():
    with quiet_numpy_notice() as gate:
        try:
            import mindspore  # noqa: F401
            from mindspore import profiler
        except ImportError as err:
            if gate.hidden:
                import numpy
                raise MindSporeMissing(f"MindSpore could not be imported with NumPy {numpy.__version__} ({err}): "
                                       "this MindSpore build needs NumPy 1.x") from None
            raise MindSporeMissing(f"%%nbprofiler profile needs MindSpore in this kernel: {INSTALL} "
                                   "(the CPU build from PyPI), then restart the kernel") from None
    return profiler


class _MindData:
    """The dataset engine's profiling manager (what ``data_process`` should start; the CPU build does not)."""

    def __init__(self, interval_ms: int = 20):
        with quiet_numpy_notice():
            import mindspore.dataset as ds
            import mindspore._c_dataengine as cde
        ds.config.set_monitor_sampling_interval(interval_ms)
        self.manager = cde.GlobalContext.profiling_manager()
        self.manager.init()
        self.manager.start()

    def save(self, framework_dir: Path) -> None:
        self.manager.stop()
        framework_dir.mkdir(parents=True, exist_ok=True)
        self.manager.save(str(framework_dir))


def profile_cell(cell: str, args: argparse.Namespace, ipython) -> tuple[object, object]:
    """Run ``cell`` in ``ipython`` under the profiler; returns (the loaded Profile or Cluster, the
    cell's execution result). ``nbprof`` is bound to the running profiler (for ``nbprof.step()``)."""
    from ..model.loader import load
    mp = _mindspore()
    import mindspore as ms
    out = output_folder(args.output)
    out.mkdir(parents=True, exist_ok=True)
    before = set(glob.glob(str(out / "*_ascend_ms")))
    target = str(ms.get_context("device_target")).lower()
    activities = [mp.ProfilerActivity.CPU] + ([mp.ProfilerActivity.NPU] if target == "ascend" else []) + \
        ([mp.ProfilerActivity.GPU] if target == "gpu" else [])
    kwargs = dict(activities=activities, with_stack=args.with_stack, profile_memory=args.memory,
                  data_process=args.data_process, on_trace_ready=mp.tensorboard_trace_handler(str(out)))
    if args.schedule:
        kwargs["schedule"] = mp.schedule(**args.schedule)
    minddata = _MindData() if args.data_process else None
    with mp.profile(**kwargs) as running:
        ipython.user_ns["nbprof"] = running
        result = ipython.run_cell(cell)
    runs = sorted(set(glob.glob(str(out / "*_ascend_ms"))) - before)
    if minddata is not None and runs:
        minddata.save(Path(runs[-1]) / "FRAMEWORK")
    prof = load(runs[-1] if len(runs) == 1 else out)
    ipython.user_ns[args.name] = prof
    return prof, result


__all__ = ["HELP", "INSTALL", "MagicUsageError", "MindSporeMissing", "parse", "output_folder", "profile_cell",
           "quiet_numpy_notice"]
