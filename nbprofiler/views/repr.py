"""Compact HTML shown when a `Profile` or `Cluster` is the value of a notebook cell.

Only cheap facts: what discovery found (files by role), the step count and operator kinds (small
files), problems so far, and how to open the dashboard. The timeline is never parsed here. Every
string that comes from the data or the file system is passed through `html.escape`.
"""
from __future__ import annotations

from html import escape

from . import theme

_TABLE = "border-collapse:collapse;margin:2px 0"
_CELL = "padding:1px 10px 1px 0;text-align:left;vertical-align:top"


def _rows(pairs) -> str:
    return "".join(f"<tr><th style='{_CELL};font-weight:600'>{escape(str(k))}</th>"
                   f"<td style='{_CELL}'>{escape(str(v))}</td></tr>" for k, v in pairs)


def _files_by_role(prof) -> str:
    counts = prof.files.groupby("role").size() if len(prof.files) else {}
    return ", ".join(f"{role} ×{n}" if n > 1 else str(role) for role, n in dict(counts).items()) or "none"


def profile_facts(prof) -> list[tuple[str, str]]:
    """(label, value) pairs of the compact summary, all plain strings (escaped when rendered)."""
    facts = [("generation", prof.generation), ("device", getattr(prof, "key", prof.device)),
             ("devices found", ", ".join(map(str, prof.devices_found))), ("folder", str(prof.root))]
    if prof.session:
        facts.append(("session", prof.session))
    others = getattr(prof, "other_sessions", [])
    if others:
        facts.append(("other sessions", f"{', '.join(others)} (open one with nbprofiler.load(path, device=KEY))"))
    facts.append(("files", _files_by_role(prof)))
    steps = prof.step_trace
    if len(steps):
        avg = prof.step_trace_average
        total = f", average step {avg['total_ms']:.4f} ms (as written)" if avg and "total_ms" in avg else ""
        facts.append(("step trace", f"{len(steps)} steps{total}"))
    kinds = prof.op_kinds
    if kinds:
        facts.append(("operators", ", ".join(theme.kind_label(k) for k in kinds)))
    return facts


def _problems_html(problems) -> str:
    if not problems:
        return ""
    items = "".join(f"<li>{escape(str(p.file))}: {escape(str(p.error))}</li>" for p in problems[:10])
    more = f"<li>… {len(problems) - 10} more (see <code>.problems</code>)</li>" if len(problems) > 10 else ""
    return (f"<div style='{theme.MUTED_CSS}'>{len(problems)} problem(s) while loading:</div>"
            f"<ul style='margin:2px 0 2px 18px;padding:0'>{items}{more}</ul>")


def profile_html(prof) -> str:
    """The compact HTML summary of a `Profile` (its ``_repr_html_``)."""
    facts = profile_facts(prof)
    return (f"<div style=\"{theme.PANEL_CSS}\" class='nbprofiler-repr'>"
            f"<div style='font-weight:600'>nbprofiler.Profile</div>"
            f"<table style='{_TABLE}'>{_rows(facts)}</table>{_problems_html(prof.problems)}"
            f"<div style='{theme.MUTED_CSS}'>Open the dashboard with <code>.show()</code>; "
            f"frames: <code>.step_trace</code>, <code>.ops</code>, <code>.timeline</code>, …</div></div>")


def cluster_html(cluster) -> str:
    """The compact HTML summary of a `Cluster`: one row per rank (its key, generation, session, files,
    problems so far)."""
    head = "".join(f"<th style='{_CELL};font-weight:600'>{h}</th>"
                   for h in ("rank", "generation", "session", "files", "problems"))
    body = ""
    for key, p in cluster.profiles.items():
        cells = (key, p.generation, p.session or "", sum(len(v) for v in p.run.files.values()), len(p.problems))
        body += "<tr>" + "".join(f"<td style='{_CELL}'>{escape(str(c))}</td>" for c in cells) + "</tr>"
    return (f"<div style=\"{theme.PANEL_CSS}\" class='nbprofiler-repr'>"
            f"<div style='font-weight:600'>nbprofiler.Cluster: {len(cluster)} ranks</div>"
            f"<div style='{theme.MUTED_CSS}'>{escape(cluster.source)}</div>"
            f"<table style='{_TABLE}'><tr>{head}</tr>{body}</table>"
            f"<div style='{theme.MUTED_CSS}'>Index a rank with <code>cluster[\"0\"]</code>; "
            f"compare ranks with <code>.show()</code>.</div></div>")
