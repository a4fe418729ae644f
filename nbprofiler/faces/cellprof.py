"""``%%nbprofiler profile``: run a notebook cell under MindSpore's profiler, then load and show what it wrote.

The cell runs inside ``mindspore.profiler.profile(...)`` (MindSpore 2.x's profiler API) with
``on_trace_ready=tensorboard_trace_handler(OUTPUT)``, so MindSpore writes and analyses its usual
``<host>_<pid>_<time>_ascend_ms`` folder under OUTPUT when the cell ends. With ``--data-process`` the
dataset engine's own profiling manager samples the MindData pipeline too (the CPU build writes no pipeline
files otherwise), and its files are saved into that run's ``FRAMEWORK`` folder. A cell that raises still
stops the profiler; what it wrote is loaded and shown, then the error is raised again.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import os
import shlex
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


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        from .magics import MagicUsageError
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


def _mindspore():
    try:
        import mindspore  # noqa: F401
        from mindspore import profiler
    except ImportError:
        raise MindSporeMissing(f"%%nbprofiler profile needs MindSpore in this kernel: {INSTALL} "
                               "(the CPU build from PyPI), then restart the kernel") from None
    return profiler


class _MindData:
    """The dataset engine's profiling manager (what ``data_process`` should start; the CPU build does not)."""

    def __init__(self, interval_ms: int = 20):
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
    import nbprofiler
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
    prof = nbprofiler.load(runs[-1] if len(runs) == 1 else out)
    ipython.user_ns[args.name] = prof
    return prof, result


__all__ = ["HELP", "INSTALL", "MindSporeMissing", "parse", "output_folder", "profile_cell"]
