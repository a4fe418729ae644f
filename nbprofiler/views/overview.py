"""The overview of a run, rendered once from its summary (`Profile.summary()`): the dashboard's Overview
tab and the offline report's Overview tab show this HTML (the dashboard adds the suggestions as widgets,
the report as buttons that work without a kernel). Every value is escaped."""
from __future__ import annotations

import math
from html import escape

from . import theme


def _num(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{float(value):,.{digits}f}"


def _row(key, value) -> str:
    return (f"<tr><th style='text-align:left;padding:1px 12px 1px 0'>{escape(str(key))}</th>"
            f"<td>{escape(str(value))}</td></tr>")


def _facts(summary: dict, root, headline: str = "") -> str:
    rows = [_row("generation", summary.get("generation")), _row("device", summary.get("device")),
            _row("devices found", ", ".join(map(str, summary.get("devices_found") or [])))]
    ses = summary.get("session")
    if ses:  # the rank was profiled several times: which session is shown, and how to pick another
        rows.append(_row("session", f"{ses['key']} ({ses['folder']})" if ses.get("folder") else ses["key"]))
        if ses.get("other_sessions"):
            rows.append(_row("other sessions", f"{', '.join(ses['other_sessions'])}: nbprofiler.load(path, "
                                               "device=KEY), %nbprofiler PATH --device KEY or --device KEY on "
                                               "the command line"))
    return (f"<div style='font-size:1.2em;font-weight:600'>{escape(str(root))}</div>{headline}"
            f"<table>{''.join(rows)}</table>")


def _diagnosis(diag: dict) -> str:
    """The first sentence of the page (`analysis.diagnosis`): what sets the step time."""
    return (f"<p class='nbprofiler-diagnosis' style='font-size:1.1em;margin:6px 0'>"
            f"{escape(diag['headline'])}</p>")


def _step_trace(st: dict, diag: dict) -> str:
    """The run's own stages (a MindSpore 2.x / Ascend step trace's Computing, Communication (not overlapped),
    Free, Preparing; a legacy one's step interval, forward+backward and tail), as the diagnosis reads them."""
    cells = "".join(
        f"<span style='display:inline-block;margin:4px 18px 4px 0'><span style='color:"
        f"{theme.stage_color(s['stage'])}'>■</span> {escape(s['label'])}: <b>{_num(s['ms'])} ms</b>"
        + (f" ({_num(s['percent'], 2)} %)" if s.get("percent") is not None else "") + "</span>"
        for s in diag.get("stages") or [])
    n = st["total_steps"]
    out = (f"<h4 style='margin:8px 0 2px'>Step trace: average of {n:,} step{'s' if n != 1 else ''}, "
           f"{_num(diag.get('step_ms') or 0.0)} ms per step</h4><div>{cells}</div>")
    note = average_note(st)
    if note:
        out += f"<div style='{theme.MUTED_CSS}' class='nbprofiler-note'>{escape(note)}</div>"
    return out


def average_note(step_trace: dict | None) -> str | None:
    """Plain text for an overview when the written average contradicts itself (`inconsistent_average`):
    both numbers, and the mean of the recorded steps; None when there is nothing to say."""
    from ..analysis.summary import inconsistent_average
    bad = inconsistent_average(step_trace)
    if bad is None:
        return None
    n = len(step_trace["steps"])
    return (f"The profiler's average row says {bad['written_total_ms']:.4f} ms per step but its stages add up "
            f"to {bad['stages_sum_ms']:.4f} ms; the {n} recorded step{'s' if n != 1 else ''} average "
            f"{bad['mean']['total_ms']:.4f} ms (MindInsight shows the row as written).")


def _folded(diag: dict) -> str:
    """Advice whose premise the data contradicts, folded under the findings with the reason."""
    folded = diag.get("folded") or []
    if not folded:
        return ""
    items = "".join(f"<li>{escape(f['text'])} <i>(folded: {escape(f['why'])})</i></li>" for f in folded)
    return (f"<details class='nbprofiler-folded' style='margin:4px 0'><summary>{len(folded)} suggestion"
            f"{'s' if len(folded) != 1 else ''} folded: the data contradicts their premise</summary>"
            f"<ul style='margin:0'>{items}</ul></details>")


def _operators(op_types: dict) -> str:
    lines = []
    for kind, types in op_types.items():
        if not types:
            continue
        top = ", ".join(f"{escape(str(t['op_type']))} {t['percent']:.1f} % ({_num(t['total_time_us'] / 1000, 3)} ms, "
                        f"{_num(t['count'])} calls)" for t in types[:5])
        lines.append(f"<div><b>{escape(theme.kind_label(kind))} top types:</b> {top}</div>")
    return "".join(lines)


def _minddata(md: dict) -> str:
    lines = []
    hq = md.get("host_queue")
    if hq:
        lines.append(f"host queue: empty at {hq['empty_steps']:,} of {hq['steps']:,} steps, full at "
                     f"{hq['full_steps']:,}; average get time {_num(hq.get('avg_get_ms'), 3)} ms")
    if md.get("pipeline"):
        names = {p["op_id"]: f"{p['op_type']} (op {p['op_id']})" for p in md["pipeline"]}
        b = md.get("bottleneck_op_ids") or []
        lines.append("pipeline bottleneck: " + (", ".join(names.get(i, str(i)) for i in b) if b else "none found"))
    return f"<div><b>MindData:</b> {escape('; '.join(lines))}</div>" if lines else ""


def overview_html(summary: dict, root=None, comparison=None, runset=None,
                  missing: list[tuple[str, str]] | None = None, problems: bool = True) -> str:
    """The overview: (``root`` given) the run's folder and facts; the diagnosis's first sentence (what sets the
    step time); a `RunSet`'s or a `Comparison`'s verdicts;
    the average step and its stages; the top operator types per kind; the MindData digest; the timeline's
    size; ``missing`` ((view title, reason) of the views without data); (``problems``) what failed to load."""
    diag = summary.get("diagnosis") or {}
    headline = _diagnosis(diag) if diag.get("headline") else ""
    parts = [_facts(summary, root, headline)] if root is not None else ([headline] if headline else [])
    if runset is not None:
        items = "".join(f"<li><b>{escape(str(r.run))}</b>: {escape(str(r.verdict))}</li>"
                        for r in runset.verdicts.itertuples())
        parts.append(f"<h4 style='margin:8px 0 2px'>{len(runset.headline)} runs, against the baseline "
                     f"{escape(str(runset.baseline))}</h4><ul class='nbprofiler-verdict'>{items}</ul>")
    if comparison is not None:
        heads = comparison.headlines or {}
        items = "".join(f"<li>{escape(lab)}: {escape(heads[k])}</li>"
                        for k, lab in (("a", comparison.a_label), ("b", comparison.b_label)) if heads.get(k))
        items += "".join(f"<li>{escape(s)}</li>" for s in comparison.verdict)
        parts.append(f"<h4 style='margin:8px 0 2px'>Compared with {escape(comparison.b_label)} (this run: "
                     f"{escape(comparison.a_label)})</h4><ul class='nbprofiler-verdict'>{items}</ul>")
    body = []
    if (summary.get("step_trace") or {}).get("average") and diag.get("stages"):
        body.append(_step_trace(summary["step_trace"], diag))
    body.append(_operators(summary.get("op_types") or {}))
    body.append(_minddata(summary.get("minddata") or {}))
    tl = summary.get("timeline")
    if tl:
        body.append(f"<div><b>Timeline:</b> {tl['events']:,} events on {tl['tracks']:,} tracks over "
                    f"{_num((tl['end_us'] - tl['start_us']) / 1000, 3)} ms</div>")
    body.append(_folded(diag))
    body = [b for b in body if b]
    parts += body or ["<p>No step trace, operator, MindData or timeline data was found.</p>"]
    if missing:
        items = "".join(f"<li><b>{escape(title)}</b>: {escape(reason)}</li>" for title, reason in missing)
        parts.append(f"<h4 style='margin:8px 0 2px'>Not in this report (no data)</h4>"
                     f"<ul class='nbprofiler-missing'>{items}</ul>")
    if problems and summary.get("problems"):
        items = "".join(f"<li>{escape(str(p.get('file')))}: {escape(str(p.get('error')))}</li>"
                        for p in summary["problems"])
        parts.append(f"<h4 style='margin:8px 0 2px'>Problems</h4><ul style='margin:0'>{items}</ul>")
    return f"<div style=\"{theme.PANEL_CSS}\" class='nbprofiler-overview'>{''.join(parts)}</div>"
