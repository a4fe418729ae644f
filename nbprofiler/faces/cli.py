"""The ``nbprofiler`` command: ``summary``, ``report``, ``check`` and ``info`` over a profiler directory;
``export`` of an executed notebook to offline HTML."""
from __future__ import annotations

import argparse
import json
import sys
import warnings

from ..errors import ProfilerDataError, ProfilerDataWarning


def _load(args):
    from ..model.loader import load
    with warnings.catch_warnings():
        # Problems are reported inside the output (summary "problems", info listing); keep stderr clean.
        warnings.simplefilter("ignore", ProfilerDataWarning)
        obj = load(args.dir, device=args.device)
        if hasattr(obj, "profiles"):  # a Cluster: pick the smallest id, as the summary schema says
            obj = obj[obj.ranks[0]]
        return obj


def cmd_summary(args) -> int:
    from ..model.loader import load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)
        # a Cluster's summary is its smallest rank's, with the diagnosis across ranks under "cluster"
        summary = load(args.dir, device=args.device).summary()
    summary["source"] = args.dir
    if args.json:
        json.dump(summary, sys.stdout, indent=2 if args.indent else None)
        sys.stdout.write("\n")
    else:
        _print_summary(summary)
    return 0


def _print_summary(s: dict) -> None:
    print(f"{s['source']}  generation={s['generation']}  device={s['device']}  devices={s['devices_found']}")
    ses = s.get("session")
    if ses:
        print(f"session {ses['key']} ({ses['folder']})" + (f"; other sessions of this rank: "
              f"{', '.join(ses['other_sessions'])} (pick one with --device KEY)" if ses["other_sessions"] else ""))
    if (s.get("cluster") or {}).get("headline"):
        print(f"cluster: {s['cluster']['headline']}")
    parallel = (s.get("cluster") or {}).get("parallel") or {}
    if parallel:
        print(f"parallel: {parallel['finding'] if parallel.get('available') else 'not available: ' + parallel['why']}")
    diag = s.get("diagnosis") or {}
    if diag.get("headline"):
        print(diag["headline"])
    if diag.get("stages"):
        steps = f"{diag['steps']} step" + ("" if diag["steps"] == 1 else "s")
        print(f"step: {steps} from the {diag['step_source']}, average {diag['step_ms']:.4f} ms = "
              + " + ".join(f"{st['label'].lower()} {st['ms']:.4f}" for st in diag["stages"]))
    for kind, rows in (s.get("op_types") or {}).items():
        top = ", ".join(f"{r['op_type']} {r['percent']:.1f}%" for r in rows[:5])
        print(f"{kind} operator types ({len(rows)}): {top}")
    md = s.get("minddata")
    if md:
        print(f"minddata: {len(md['pipeline'])} ops, bottleneck ops {md['bottleneck_op_ids']}, "
              f"host queue {md['host_queue']}, device queue {md['device_queue']}")
    tl = s.get("timeline")
    if tl:
        print(f"timeline: {tl['events']} events on {tl['tracks']} tracks, "
              f"{(tl['end_us'] - tl['start_us']) / 1000:.3f} ms")
    peak = (s.get("memory") or {}).get("peak")
    if peak:
        print(f"memory: {peak['headline'] if peak['available'] else 'peak not available (' + peak['why'] + ')'}")
    dispatch = s.get("dispatch") or {}
    if dispatch.get("available"):
        print(f"dispatch: {dispatch['sentence']}")
    from ..views.suggestions import evidence_text, unique
    for sug in unique(s.get("suggestions") or []):
        print(f"- [{sug.severity}] {sug.text}")
        for e in sug.evidence:
            print(f"    {evidence_text(e)}")
    for p in s.get("problems") or []:
        print(f"problem: {p['file']}: {p['error']}")


def cmd_report(args) -> int:
    from ..model.loader import load
    from .report import write_html_report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)
        prof = load(args.dir, device=args.device)
        others = [load(d) for d in args.compare or []]
        path = write_html_report(prof, args.output, title=args.title, compare_with=others or None)
    print(f"wrote {path}")
    return 0


def cmd_export(args) -> int:
    from .nbconvert_offline import OfflineAssetError, export_offline_html
    try:
        path = export_offline_html(args.notebook, args.output)
    except (OfflineAssetError, OSError) as err:
        print(f"nbprofiler export: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # nbformat's errors (not JSON, invalid notebook) do not name the file
        print(f"nbprofiler export: {args.notebook}: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _pair(text: str) -> tuple[str, float]:
    """``PATH=VALUE`` of --max/--min/--max-regression-pct."""
    path, sep, value = text.rpartition("=")
    if not sep or not path:
        raise argparse.ArgumentTypeError(f"expected PATH=VALUE, got {text!r}")
    try:
        return path, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number (in {text!r})") from None


def _regression(text: str) -> tuple[str, float]:
    """``PCT`` (the average step time) or ``PATH=PCT``."""
    try:
        return "step_ms", float(text)
    except ValueError:
        return _pair(text)


# Exit status of ``nbprofiler check``, so a CI job can tell a regression from a broken tool, and a threshold
# inside the runs' noise (flaky: neither passed nor failed) from both.
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_BROKEN, EXIT_FLAKY = 0, 1, 2, 3, 4


def cmd_check(args) -> int:
    """0 every check passed, 1 a check failed, 2 bad arguments (argparse's own status too; a history folder
    inside profiler output), 3 the tool could not do its job: a profile that cannot be read, a --junit-xml,
    history record or --trend-html that cannot be written, or a bug; 4 no check failed but one was flaky."""
    from ..io.history import HistoryError
    from .testing import CheckSpecError, check, write_junit_xml, write_trend_html
    try:
        regressions = dict(args.max_regression_pct)
        if regressions and not (args.baseline or args.baseline_history):
            raise CheckSpecError("--max-regression-pct needs --baseline DIR_B or --baseline-history N")
        if args.trend_html and not args.history:
            raise CheckSpecError("--trend-html draws the history: it needs --history DIR")
        if args.baseline_history is not None and not args.history:
            raise CheckSpecError("--baseline-history N needs --history DIR")
        report = check(args.dir, baseline=args.baseline or None, device=args.device, raise_on_failure=False,
                       alpha=args.alpha, history=args.history, baseline_history=args.baseline_history,
                       label=args.label,
                       max=dict(args.max), min=dict(args.min), max_regression_pct=regressions or None,
                       max_step_ms=args.max_step_ms, max_host_queue_empty_pct=args.max_host_queue_empty_pct,
                       max_device_queue_empty_pct=args.max_device_queue_empty_pct)
    except (CheckSpecError, HistoryError) as err:
        print(f"nbprofiler check: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ProfilerDataError as err:
        print(f"nbprofiler check: cannot read the profile: {err}", file=sys.stderr)
        return EXIT_BROKEN
    except OSError as err:
        print(f"nbprofiler check: cannot write the history in {args.history}: "
              f"{err.strerror or type(err).__name__}", file=sys.stderr)
        return EXIT_BROKEN
    except Exception as err:  # noqa: BLE001 - a bug must not look like a failed check (exit 1)
        import traceback
        traceback.print_exc(file=sys.stderr)
        print(f"nbprofiler check: internal error, no check was decided: {type(err).__name__}: {err}",
              file=sys.stderr)
        return EXIT_BROKEN
    for line in report.lines():
        print(line)
    print(report.tally())
    for name, write in (("--junit-xml", lambda p: write_junit_xml(report, p)),
                        ("--trend-html", lambda p: write_trend_html(args.history, p))):
        target = args.junit_xml if name == "--junit-xml" else args.trend_html
        if not target:
            continue
        try:
            write(target)
        except OSError as err:
            print(f"nbprofiler check: cannot write {name} {target}: "
                  f"{err.strerror or type(err).__name__}", file=sys.stderr)
            return EXIT_BROKEN
    return {"pass": EXIT_PASSED, "fail": EXIT_FAILED, "flaky": EXIT_FLAKY}[report.verdict]


def cmd_info(args) -> int:
    from ..io.discover import discover, run_keys
    from ..model.loader import expand_runs
    runs = expand_runs(discover(args.dir))
    for r, key in zip(runs, run_keys(runs)):
        n = sum(len(v) for v in r.files.values())
        print(f"{r.generation:16} device={key:4} files={n:3} {r.root}" + (f" [{r.session}]" if r.session else ""))
        if r.info.get("unparsed"):
            print(f"    {r.info['unparsed']}")
        if args.verbose:
            from ..model.profile import Profile
            files = Profile(r, key=key).files  # the same listing as prof.files, with the frames each file feeds
            for row in files.itertuples():
                print(f"    {row.role:32} {row.path}  -> {row.feeds or '(no frame)'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nbprofiler", description="MindSpore profiler output, summarised.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="numbers a performance engineer reads first")
    p.add_argument("dir")
    p.add_argument("--device", default=None, help="device/rank id, or a key <rank>@<session> from devices_found "
                                                 "(default: the smallest rank, its first session)")
    p.add_argument("--json", action="store_true", help="print the JSON summary")
    p.add_argument("--indent", action="store_true", help="indent the JSON")
    p.set_defaults(fn=cmd_summary)
    p = sub.add_parser("report", help="write a one-file offline HTML report")
    p.add_argument("dir")
    p.add_argument("--device", default=None)
    p.add_argument("-o", "--output", default="report.html")
    p.add_argument("--title", default=None)
    p.add_argument("--compare", nargs="+", default=None, metavar="DIR",
                   help="compare with a second profile; with several, a Runs tab shows them all side by side "
                        "against DIR (e.g. a sweep of num_parallel_workers)")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser(
        "check", help="fail (exit 1) when a performance number passes its threshold",
        description="Check numbers of the summary against thresholds and, with --baseline, against another "
                    "profile. Any number of the summary JSON can be named by its path, e.g. "
                    "step_trace.average.total_ms, minddata.host_queue.avg_get_ms, "
                    "op_types.ai_core[op_type=MatMul].total_time_us; short names: step_ms, "
                    "host_queue_empty_pct, host_queue_full_pct, device_queue_empty_pct, timeline_span_ms. "
                    "A number the profile does not hold fails its check. Several runs per side (several "
                    "paths, summary JSON files or a folder of them) decide a regression by a one-sided "
                    "Mann-Whitney U test at --alpha with its effect size; a threshold inside the baseline's "
                    "run-to-run noise is reported flaky. Exit status: 0 all passed, 1 a "
                    "check failed, 2 bad arguments (a threshold must be a finite number), 3 the tool "
                    "could not do its job (unreadable profile, --junit-xml not writable, internal error), "
                    "4 no check failed but one was flaky.")
    p.add_argument("dir", nargs="+", help="the profile: one or more runs (profiler folders, summary JSON files "
                   "from `nbprofiler summary --json`, or a folder of those files)")
    p.add_argument("--device", default=None)
    p.add_argument("--baseline", nargs="+", default=None, metavar="DIR_B",
                   help="the run(s) to compare against (the same kinds as the profile)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the regression test over several runs (default 0.05)")
    p.add_argument("--history", default=None, metavar="DIR",
                   help="append each checked run as one JSON file to this folder (never inside profiler output)")
    p.add_argument("--baseline-history", type=int, default=None, metavar="N",
                   help="take the baseline from the last N runs of --history that did not fail")
    p.add_argument("--label", default=None, help="the run's label in the history (default: its path)")
    p.add_argument("--trend-html", default=None, metavar="FILE",
                   help="write the trend of every checked number over --history as one HTML file")
    p.add_argument("--max-step-ms", type=float, default=None, help="max average step time (ms)")
    p.add_argument("--max-host-queue-empty-pct", type=float, default=None,
                   help="max share of steps whose host queue was empty (%%)")
    p.add_argument("--max-device-queue-empty-pct", type=float, default=None,
                   help="max share of steps whose device queue was empty (%%)")
    p.add_argument("--max", type=_pair, action="append", default=[], metavar="PATH=VALUE",
                   help="the number at PATH must be <= VALUE (repeatable)")
    p.add_argument("--min", type=_pair, action="append", default=[], metavar="PATH=VALUE",
                   help="the number at PATH must be >= VALUE (repeatable)")
    p.add_argument("--max-regression-pct", type=_regression, action="append", default=[],
                   metavar="[PATH=]PCT", help="the number (default: the average step time) may grow by at "
                   "most PCT %% over the baseline (repeatable)")
    p.add_argument("--junit-xml", default=None, metavar="FILE", help="also write the results as JUnit XML")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("export", help="executed notebook -> one HTML file whose widgets and plots render offline")
    p.add_argument("notebook")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("info", help="list the runs and files found")
    p.add_argument("dir")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(fn=cmd_info)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ProfilerDataError as err:
        print(f"nbprofiler: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
