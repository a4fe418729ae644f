"""The one renderer of the advisor's suggestions, used by the dashboard's overview, the MindData view and
the report, so a suggestion reads the same everywhere.

- `suggestion_html(s)`: one suggestion as an HTML fragment: a severity mark, the advice, and a "why?"
  toggle (``<details>``) with the rule, each measured value with its human label, unit and threshold
  ("Host queue empty: 100 % (62 of 62 steps; threshold > 30 %)"), where the number comes from
  ("prof.host_queue[size], steps 1–62"), and the findings of other rules folded into it.
- `suggestions_html(suggestions)`: the list (repeats by id or text dropped), as one HTML fragment.
- `evidence_targets(s)`: the places a suggestion cites, as `Target`s a view can open (tab, queue, operator
  type filter, step, time window).
- `SuggestionsWidget(suggestions, on_open)`: the list as ipywidgets, each suggestion with a button per
  target; a click calls ``on_open(target)`` (the dashboard opens the tab and sets its state).
- `suggestions_layout(suggestions, find, ...)`: the same for pages without a kernel (the report, the
  MindData page): Bokeh buttons whose CustomJS opens the tab and sets the queue, filter or window.

Every string from the data (operator names, op types, texts built from them) is escaped with
`html.escape`. Suggestions come as `nbprofiler.analysis.advisor.Suggestion` or as the summary's dicts.
"""
from __future__ import annotations

import dataclasses
from html import escape

from ..analysis.advisor import RULES_BY_ID, Evidence, Suggestion, format_number, format_us
from . import theme
from .pages import PAGES

SEVERITY_STYLE = {"high": ("#d62728", "high"), "medium": ("#E69F00", "medium"), "info": ("#0072B2", "info")}

# Which dashboard tab shows a frame (the frames the advisor's evidence cites); a step's window is
# evidence on the timeline.
FRAME_TABS = {f: p.title for p in PAGES if p.dashboard for f in p.frames} | {"step_windows": "Timeline"}


def as_suggestion(s) -> Suggestion:
    return s if isinstance(s, Suggestion) else Suggestion.from_dict(s)


# -- numbers as a person reads them -----------------------------------------------------------------
def format_value(value, unit: str) -> str:
    """``value`` in ``unit`` for reading: "31.25 %", "148.5 ms", "20.66 ms" (from us), "yes"."""
    if unit == "bool" or isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    if unit == "us":
        return format_us(value)
    if unit == "ms":
        return format_us(float(value) * 1000)
    if unit == "x":
        return f"{format_number(float(value), 1)}×"
    return f"{format_number(value)} {unit}".rstrip()


def evidence_text(e: Evidence) -> str:
    """One line of plain text: label, value, the count behind it, the threshold."""
    extra = [e.detail] if e.detail else []
    if e.threshold is not None:
        extra.append(f"threshold {e.compare or ''} {format_value(e.threshold, e.unit)}".replace("  ", " "))
    return f"{e.label}: {format_value(e.value, e.unit)}" + (f" ({'; '.join(extra)})" if extra else "")


def source_text(e: Evidence) -> str:
    """Where the number lives: the Profile frame and column, the steps, the time window, the queue."""
    parts = []
    if e.frame:
        parts.append(f"prof.{e.frame}" + (f"[{e.column}]" if e.column else ""))
    if e.steps:
        a, b = e.steps
        parts.append(f"step {a}" if a == b else f"steps {a}–{b}")
    if e.window_us:
        t0, t1 = e.window_us
        parts.append(f"timeline {t0 / 1000:,.3f}–{t1 / 1000:,.3f} ms")
    if e.op_id is not None:
        parts.append(f"pipeline op {e.op_type}_{e.op_id}" if e.op_type else f"pipeline op {e.op_id}")
    elif e.op_type:
        parts.append(f"{theme.kind_label(e.kind) if e.kind else ''} type {e.op_type}".strip())
    return ", ".join(parts)


# -- where a suggestion points ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Target:
    """A place in the dashboard: ``tab``, and what to set there: ``queue`` (pipeline op id whose output queue
    to select), ``kind``/``op_type`` (operator table filter), ``step``, ``window_us`` (timeline window)."""

    tab: str
    label: str
    queue: int | None = None
    kind: str | None = None
    op_type: str | None = None
    step: int | None = None
    window_us: tuple[float, float] | None = None


def evidence_target(e: Evidence) -> Target | None:
    """Where ``e`` can be seen: its time window on the timeline, its queue in the MindData graph, its
    operator type in the operator table, its step in the step trace, else its frame's tab."""
    if e.window_us:
        step = e.steps[0] if e.steps and e.steps[0] == e.steps[1] else None
        return Target("Timeline", f"Timeline: step {step}" if step is not None else "Timeline: window",
                      step=step, window_us=tuple(e.window_us))
    if e.op_id is not None and e.frame in ("minddata_pipeline", "minddata_queues", "op_cpu_utilization"):
        return Target("MindData", f"MindData: {e.op_type}_{e.op_id}" if e.op_type else f"MindData: op {e.op_id}",
                      queue=int(e.op_id))
    if e.op_type and e.frame in ("op_types", "ops"):
        return Target("Operators", f"Operators: {e.op_type}", kind=e.kind, op_type=e.op_type)
    tab = FRAME_TABS.get(e.frame or "")
    if tab is None:
        return None
    if tab == "Step trace" and e.steps and e.steps[0] == e.steps[1]:
        return Target(tab, f"Step trace: step {e.steps[0]}", step=e.steps[0])
    return Target(tab, tab)


def evidence_targets(s, limit: int = 2) -> list[Target]:
    """The distinct places the suggestion's evidence cites, in evidence order (at most ``limit``); a bare
    tab is left out when a more precise place in the same tab is cited."""
    found: list[Target] = []
    for e in as_suggestion(s).evidence:
        t = evidence_target(e)
        if t is not None and all(o.label != t.label for o in found):
            found.append(t)
    precise = {t.tab for t in found if t.label != t.tab}
    return [t for t in found if t.label != t.tab or t.tab not in precise][:limit]


# -- HTML -------------------------------------------------------------------------------------------
def _evidence_items(s: Suggestion) -> str:
    rows = []
    for e in s.evidence:
        src = source_text(e)
        rows.append(f"<li data-evidence='{escape(e.key, quote=True)}'>{escape(evidence_text(e))}"
                    + (f" <span style=\"{theme.MUTED_CSS}font-size:11px\">— {escape(src)}</span>" if src else "")
                    + "</li>")
    return f"<ul style='margin:2px 0 2px 0;padding-left:18px'>{''.join(rows)}</ul>"


def _why(s: Suggestion) -> str:
    rule = RULES_BY_ID.get(s.rule)
    head = (f"<div><b>Rule:</b> {escape(rule.title)} <span style=\"{theme.MUTED_CSS}\">({escape(rule.origin)})"
            f"</span></div>") if rule else ""
    parts = [head, _evidence_items(s)]
    for a in s.also:
        other = RULES_BY_ID.get(a.rule)
        parts.append("<div style='margin-top:4px'><b>Also found</b>"
                     + (f" by {escape(other.origin)}" if other else "") + f": {escape(a.text)}</div>"
                     + _evidence_items(a))
    return (f"<details class='nbprofiler-why' style='margin:2px 0 0 0'><summary style='cursor:pointer;"
            f"{theme.MUTED_CSS}font-size:12px'>why?</summary><div style='font-size:12px;padding:2px 0 4px 14px'>"
            f"{''.join(parts)}</div></details>")


def suggestion_html(s) -> str:
    """One suggestion: severity, the advice, and its evidence behind a "why?" toggle. All escaped."""
    s = as_suggestion(s)
    color, word = SEVERITY_STYLE.get(s.severity, ("#777", s.severity))
    return (f"<div class='nbprofiler-suggestion' data-suggestion-id='{escape(s.id, quote=True)}' "
            f"style='margin:4px 0;line-height:1.45'><span title='{escape(word, quote=True)}' "
            f"style='display:inline-block;min-width:64px;font-size:11px;font-weight:600;color:{color}'>"
            f"● {escape(word)}</span> "
            f"{escape(s.text)}{_stake(s)}{_why(s)}</div>")


def _stake(s) -> str:
    """The time per step the finding concerns (`Suggestion.cost_ms`), what the suggestions are ranked by."""
    if s.cost_ms is None:
        return ""
    return (f" <span class='nbprofiler-stake' title='time per average step this finding concerns: the most "
            f"acting on it could save' style='{theme.MUTED_CSS}'>(at stake: {escape(format_cost(s.cost_ms))} a step)"
            "</span>")


def format_cost(ms: float) -> str:
    """``cost_ms`` as a person reads it: 120.1 ms, 0.7333 ms, 4 us."""
    return format_us(ms * 1000.0)


def unique(suggestions) -> list[Suggestion]:
    """The suggestions with repeats (same id, or the same text) dropped, order kept."""
    out, seen = [], set()
    for s in map(as_suggestion, suggestions or []):
        if s.id in seen or s.text in seen:
            continue
        seen.update((s.id, s.text))
        out.append(s)
    return out


def suggestions_html(suggestions, title: str | None = "Suggestions", empty: str = "None.") -> str:
    """The suggestions as one HTML panel (static pages: the report, the MindData layout)."""
    items = unique(suggestions)
    body = "".join(suggestion_html(s) for s in items) if items else f"<p>{escape(empty)}</p>"
    head = f"<h3 style='margin:8px 0 2px'>{escape(title)}</h3>" if title else ""
    return f"<div class='nbprofiler-suggestions'>{head}{body}</div>"


# -- widget -----------------------------------------------------------------------------------------
class SuggestionsWidget:
    """The suggestions as ipywidgets: each one's HTML, then one button per place it cites; a click calls
    ``on_open(target)`` with the `Target`. ``.widget`` is the VBox; ``.buttons`` maps suggestion id to its
    buttons (for tests and programmatic clicks)."""

    def __init__(self, suggestions, on_open=None, title: str = "Suggestions"):
        import ipywidgets as W
        self.suggestions = unique(suggestions)
        self.on_open = on_open
        self.buttons: dict[str, list] = {}
        # one Layout per kind of widget and one style for the buttons, shared: each is a model of its own
        # that the kernel creates and the page renders
        full, indented, button, text = (W.Layout(width="100%"), W.Layout(margin="0 0 0 64px"),
                                        W.Layout(width="auto", height="24px"), W.Layout())
        button_style = W.ButtonStyle()
        rows = [W.HTML(f"<h4 style='margin:8px 0 2px'>{escape(title)}</h4>", layout=text)] if title else []
        for s in self.suggestions:
            buttons = []
            for t in evidence_targets(s) if on_open else []:
                b = W.Button(description=f"Show {t.label}", tooltip=f"Open {t.label}", icon="arrow-right",
                             layout=button, style=button_style)
                b.add_class("nbprofiler-evidence-link")
                b.add_class(f"nbprofiler-open-{_css_id(s.id)}")
                b.on_click(lambda _b, t=t: self.on_open(t))
                buttons.append(b)
            self.buttons[s.id] = buttons
            rows.append(W.VBox([W.HTML(suggestion_html(s), layout=text), W.HBox(buttons, layout=indented)],
                               layout=full))
        if not self.suggestions:
            rows.append(W.HTML("<p>None.</p>", layout=text))
        self.widget = W.VBox(rows, layout=full)


def _css_id(text: str) -> str:
    """A suggestion id as a CSS class fragment (ids hold dots)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text)


# -- static pages (Bokeh): the same buttons, run in the browser by CustomJS --------------------------
# What a button does in a page without a kernel: open the tab, then set the cited state on the models of
# that page (each may be missing: that part is skipped). BokehJS 3 keeps ColumnDataSource data in a Map.
_OPEN_JS = """
if (tabs !== null && tab >= 0) { tabs.active = tab; }
if (edges !== null && queue !== null) {
  const col = (c) => Array.from(edges.data.get ? edges.data.get(c) : edges.data[c]).map(Number);
  let i = col('op_id').indexOf(queue);
  if (i < 0) { i = col('parent_id').indexOf(queue); }   // the root op has no output queue: its input queue
  if (i >= 0) { edges.selected.indices = [i]; }
}
if (kind_tabs !== null && kind_index >= 0) { kind_tabs.active = kind_index; }
if (type_filter !== null && op_type !== null) { type_filter.value = op_type; }
if (x_range !== null && t0 !== null) { x_range.start = t0; x_range.end = t1; }
"""


def open_callback(target: Target, find, tabs=None, tab_index: int = -1):
    """A CustomJS that opens ``target`` in a static page: ``find(name)`` returns the page's Bokeh model of
    that name (or None), ``tabs``/``tab_index`` the page's Tabs and the target tab's index in it."""
    from bokeh.models import CustomJS
    kind_tabs, kind_index, type_filter = None, -1, None
    if target.op_type is not None:
        type_filter = find(f"op_type_filter_{target.kind}")
        kind_tabs = find("operators_tabs")
        if kind_tabs is not None:
            titles = [p.title for p in kind_tabs.tabs]
            label = theme.kind_label(target.kind) if target.kind else None
            kind_index = titles.index(label) if label in titles else -1
    x_range = find("timeline_x_range") if target.window_us is not None else None
    edges = find("minddata_edges_src") if target.queue is not None else None
    return CustomJS(args=dict(tabs=tabs, tab=tab_index, edges=edges, queue=target.queue, kind_tabs=kind_tabs,
                              kind_index=kind_index, type_filter=type_filter, op_type=target.op_type,
                              x_range=x_range, t0=target.window_us[0] if target.window_us else None,
                              t1=target.window_us[1] if target.window_us else None), code=_OPEN_JS)


def suggestions_layout(suggestions, find, tab_of=None, tabs=None, name: str = "suggestions",
                       title: str | None = None, empty: str | None = "None."):
    """The suggestions as Bokeh models for a static page: each one's HTML (a Div) and a button per place
    it cites that the page can show. ``find(name)``: the page's model by name; ``tab_of(tab)``: the index
    of a dashboard tab name in ``tabs`` (None: the target is not in this page, no button; without
    ``tab_of`` every target is on the page itself, as in the MindData layout); ``empty``: what to say when
    there is no suggestion (None: nothing)."""
    from bokeh.layouts import column, row
    from bokeh.models import Button, Div
    items = unique(suggestions)
    parts = [Div(text=f"<h3 style='margin:8px 0 2px'>{escape(title)}</h3>", sizing_mode="stretch_width")] \
        if title else []
    for s in items:
        parts.append(Div(text=f"<div style=\"{theme.PANEL_CSS}\">{suggestion_html(s)}</div>",
                         sizing_mode="stretch_width", name=f"{name}_{_css_id(s.id)}"))
        buttons = []
        for t in evidence_targets(s):
            index = tab_of(t.tab) if tab_of else -1
            if (tab_of and index is None) or (not tab_of and t.label == t.tab):
                continue   # not in this page, or (a page of its own) the page itself
            b = Button(label=f"Show {t.label}", button_type="default", height=26,
                       name=f"{name}_open_{_css_id(s.id)}_{len(buttons)}")
            b.js_on_click(open_callback(t, find, tabs, index))
            buttons.append(b)
        if buttons:
            parts.append(row(*buttons, styles={"margin-left": "64px"}))
    if not items and empty:
        parts.append(Div(text=f"<p style=\"{theme.PANEL_CSS}\">{escape(empty)}</p>"))
    return column(*parts, sizing_mode="stretch_width", name=name)
