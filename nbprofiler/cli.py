"""The ``nbprofiler`` command: ``summary``, ``report`` and ``info`` over a profiler directory; ``export`` of an
executed notebook to offline HTML."""
from __future__ import annotations

import argparse
import json
import sys
import warnings

from .errors import ProfilerDataError, ProfilerDataWarning


def _load(args):
    from .loader import load
    with warnings.catch_warnings():
        # Problems are reported inside the output (summary "problems", info listing); keep stderr clean.
        warnings.simplefilter("ignore", ProfilerDataWarning)
        obj = load(args.dir, device=args.device)
        if hasattr(obj, "profiles"):  # a Cluster: pick the smallest id, as the summary schema says
            obj = obj[obj.ranks[0]]
        return obj


def cmd_summary(args) -> int:
    prof = _load(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)
        summary = prof.summary()
    summary["source"] = args.dir
    if args.json:
        json.dump(summary, sys.stdout, indent=2 if args.indent else None)
        sys.stdout.write("\n")
    else:
        _print_summary(summary)
    return 0


def _print_summary(s: dict) -> None:
    print(f"{s['source']}  generation={s['generation']}  device={s['device']}  devices={s['devices_found']}")
    st = s.get("step_trace")
    if st:
        a = st["average"]
        print(f"step trace: {st['total_steps']} steps, average {a['total_ms']:.4f} ms = interval "
              f"{a['iteration_interval_ms']:.4f} + fp/bp {a['fp_and_bp_ms']:.4f} + tail {a['tail_ms']:.4f}")
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
    for sug in s.get("suggestions") or []:
        print(f"- {sug['text']}")
    for p in s.get("problems") or []:
        print(f"problem: {p['file']}: {p['error']}")


def cmd_report(args) -> int:
    from .loader import load
    from .report import write_html_report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerDataWarning)
        prof = load(args.dir, device=args.device)
        other = load(args.compare) if args.compare else None
        path = write_html_report(prof, args.output, title=args.title, compare_with=other)
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


def cmd_info(args) -> int:
    from .io.discover import discover
    runs = discover(args.dir)
    for r in runs:
        n = sum(len(v) for v in r.files.values())
        print(f"{r.generation:16} device={r.device:4} files={n:3} {r.root}" + (f" [{r.session}]" if r.session else ""))
        if args.verbose:
            for role, paths in sorted(r.files.items()):
                for p in paths:
                    print(f"    {role:32} {p}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nbprofiler", description="MindSpore profiler output, summarised.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="numbers a performance engineer reads first")
    p.add_argument("dir")
    p.add_argument("--device", default=None, help="device/rank id (default: the smallest found)")
    p.add_argument("--json", action="store_true", help="print the JSON summary")
    p.add_argument("--indent", action="store_true", help="indent the JSON")
    p.set_defaults(fn=cmd_summary)
    p = sub.add_parser("report", help="write a one-file offline HTML report")
    p.add_argument("dir")
    p.add_argument("--device", default=None)
    p.add_argument("-o", "--output", default="report.html")
    p.add_argument("--title", default=None)
    p.add_argument("--compare", default=None, metavar="DIR_B", help="compare with a second profile")
    p.set_defaults(fn=cmd_report)
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
