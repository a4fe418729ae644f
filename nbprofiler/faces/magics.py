"""``%load_ext nbprofiler`` then ``%nbprofiler PATH [--device ID] [--as NAME] [--compare PATH_B]``, or
``%%nbprofiler profile [options]`` over a cell of MindSpore code (`nbprofiler.faces.cellprof`).

The magic loads the profile, binds it to a variable (``prof`` unless ``--as`` names another), and shows
its dashboard; with ``--compare`` it compares PATH with PATH_B and shows the comparison view instead.
``%nbprofiler --help`` prints the usage.
"""
from __future__ import annotations

import argparse
import keyword
import shlex

from . import cellprof
from .cellprof import MagicUsageError  # raised by both magics' parsers

HELP = """\
%nbprofiler PATH [--device ID] [--as NAME] [--compare PATH_B]

Load MindSpore profiler output and show the nbprofiler dashboard.

  PATH              a legacy profiler folder, a *_ascend_ms folder (or a parent of many),
                    raw MindData files, CANN PROF_* exports, cluster_analysis_output, a trace JSON
  --device ID       the device/rank to load when PATH holds several (default: all -> a Cluster),
                    or a session key <rank>@<folder> (one rank's sessions/schedule windows
                    show the first, with a window picker)
  --as NAME         variable to bind the loaded Profile/Cluster to (default: prof)
  --compare PATH_B  compare PATH with PATH_B and show the comparison (binds NAME and NAME_b)
  --no-show         only load and bind, show nothing
  -h, --help        this text

Examples:
  %nbprofiler ./data/profiler
  %nbprofiler ./out --device 3 --as rank3
  %nbprofiler ./run_fp32 --compare ./run_fp16
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise MagicUsageError(f"{message}\n\n{HELP}")


def parse(line: str) -> argparse.Namespace | None:
    """Parse the magic's argument line; None means "help was asked for"."""
    parser = _Parser(prog="%nbprofiler", add_help=False)
    parser.add_argument("path")
    parser.add_argument("--device", default=None)
    parser.add_argument("--as", dest="name", default="prof")
    parser.add_argument("--compare", default=None)
    parser.add_argument("--no-show", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    try:
        words = shlex.split(line)
    except ValueError as err:  # an unclosed quote
        raise MagicUsageError(f"cannot split {line!r}: {err}\n\n{HELP}") from None
    if not words or "-h" in words or "--help" in words:
        return None
    args = parser.parse_args(words)
    if not args.name.isidentifier() or keyword.iskeyword(args.name):
        raise MagicUsageError(f"--as needs a Python variable name, not {args.name!r}")
    return args


def nbprofiler_magic(line: str, ipython=None):
    """The ``%nbprofiler`` line magic (see `HELP`)."""
    from IPython.display import display

    from ..analysis.compare import compare
    from ..model.loader import load

    try:
        args = parse(line)
    except MagicUsageError as err:
        from IPython.core.error import UsageError
        raise UsageError(str(err)) from None
    if args is None:
        print(HELP)
        return None
    if ipython is None:
        from IPython import get_ipython
        ipython = get_ipython()
    prof = load(args.path, device=args.device)
    ns = ipython.user_ns if ipython is not None else {}
    ns[args.name] = prof
    if args.compare:
        other = load(args.compare, device=args.device)
        ns[f"{args.name}_b"] = other
        cmp = compare(prof, other)
        if not args.no_show:
            if hasattr(cmp, "show"):
                cmp.show()
            else:
                display(cmp)
        return None
    if not args.no_show:
        prof.show()
    return None


def profile_magic(line: str, cell: str, ipython) -> None:
    """``%%nbprofiler profile [options]``: the cell under MindSpore's profiler (see `nbprofiler.faces.cellprof`)."""
    from IPython.core.error import UsageError

    words = line.split(None, 1)
    if not words or words[0] != "profile":
        raise UsageError(f"as a cell magic: %%nbprofiler profile [options]\n\n{cellprof.HELP}")
    try:
        args = cellprof.parse(words[1] if len(words) > 1 else "")
    except MagicUsageError as err:
        raise UsageError(str(err)) from None
    try:
        prof, result = cellprof.profile_cell(cell, args, ipython)
    except cellprof.MindSporeMissing as err:
        print(err)
        return None
    except ValueError as err:
        raise UsageError(str(err)) from None
    if result is not None and not result.success:
        print(f"The cell raised {type(result.error_in_exec or result.error_before_exec).__name__}; "
              f"the profile holds what ran before it ({args.name}).")
    if not args.no_show:
        prof.show()
    if result is not None and not result.success:
        result.raise_error()  # the cell's own error, after what it profiled is shown
    return None


def register(ipython) -> None:
    """Register ``%nbprofiler`` / ``%%nbprofiler profile`` on an IPython shell (``%load_ext nbprofiler``)."""
    def nbprofiler(line, cell=None):
        if cell is not None:
            return profile_magic(line, cell, ipython)
        return nbprofiler_magic(line, ipython)

    nbprofiler.__doc__ = HELP + "\n" + cellprof.HELP  # what `%nbprofiler?` shows
    ipython.register_magic_function(nbprofiler, magic_kind="line_cell", magic_name="nbprofiler")
