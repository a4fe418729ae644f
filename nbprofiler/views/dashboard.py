"""The dashboard (`nbprofiler.show(prof)` / `prof.show()`): an overview of `prof.summary()` with the
advisor's suggestions, and one tab each for step trace, operators (with operators per step and by input
shape folded below), MindData, memory, FLOPs and timeline.

Views are built when their tab is first opened (a large timeline costs nothing until looked at). A tab
whose frames are empty shows which files were looked for and what failed. Linking: choosing a step in
the step-trace view narrows the operator table to that step's operators (where kernels carry step ids)
and the timeline to the step's time span (only where the step span and the timeline share a clock: the
kernels of ``kernel_details.csv`` and the trace are both relative to the profile's origin; legacy step
points count device ticks on another clock, and the UI says so).
"""
from __future__ import annotations

import dataclasses
from html import escape

import ipywidgets as W
import traitlets

from . import theme
from .base import View
from .overview import overview_html
from .pages import DASHBOARD_TABS, page

TABS = DASHBOARD_TABS  # "Overview", then the dashboard pages of `nbprofiler.views.pages`


def step_window_us(prof, step: int) -> tuple[float, float] | None:
    """(t0_us, t1_us) of a step on the timeline's clock (relative to ``prof.origin_us``), from
    ``prof.step_windows`` (kernel step ids, a CANN step trace, or legacy step points aligned on the first
    AI Core op); None for the average (0) or when the data cannot place steps on the timeline."""
    windows = prof.step_windows
    if not step or windows is None or windows.empty:
        return None
    hit = windows[windows["step"] == int(step)]
    if hit.empty:
        return None
    return float(hit["start_us"].iloc[0]), float(hit["end_us"].iloc[0])


def step_of_time(prof, t_us: float) -> int | None:
    """The step whose window (``prof.step_windows``, on the timeline's clock) holds ``t_us``, or None."""
    windows = prof.step_windows
    if windows is None or windows.empty:
        return None
    hit = windows[(windows["start_us"] <= t_us) & (windows["end_us"] > t_us)]
    return int(hit["step"].iloc[0]) if len(hit) else None


def no_data_html(tab: str, prof, why: str = "") -> str:
    """Why a tab is empty: the file patterns it reads and the problems met with them (all escaped)."""
    files = page(tab).files if tab != "Overview" else []
    looked = "".join(f"<li><code>{escape(p)}</code></li>" for p in files)
    probs = "".join(f"<li>{escape(str(p.file))}: {escape(str(p.error))}</li>" for p in prof.problems)
    probs = f"<div>Problems while loading:</div><ul>{probs}</ul>" if probs else ""
    return (f"<div style=\"{theme.PANEL_CSS}padding:8px\"><b>No {escape(tab.lower())} data</b>"
            f"{': ' + escape(why) if why else ''} in <code>{escape(str(prof.root))}</code>."
            f"<div style='{theme.MUTED_CSS}'>Looked for:</div><ul>{looked}</ul>{probs}</div>")


class Dashboard(traitlets.HasTraits, View):
    """Tabs: overview, step trace, operators, MindData, memory, FLOPs, timeline, linked by the selected
    step (a step clicked in the per-step operator chart selects it too); a range box-selected on the
    memory curve moves the timeline there; each suggestion of the overview has buttons that open the
    evidence it cites (`open_target`).

    ``.widget`` is the ipywidgets ``Tab``; ``.views`` holds the views built so far by tab name;
    ``.select(tab_name)`` opens a tab (building its view). Linkable state: ``tab`` (the open tab's name)
    and ``evidence`` (the last `views.suggestions.Target` opened, as a dict)."""

    tab = traitlets.Unicode("Overview")
    evidence = traitlets.Dict()

    def __init__(self, prof, top_n: int = 20):
        super().__init__()
        self.prof = prof
        self.top_n = top_n
        self.views: dict[str, object] = {}
        self._extras: dict[str, list] = {}  # widgets a tab shows under its view
        self.link_note = W.HTML("")
        self.summary = prof.summary()
        self._panels = {name: W.VBox([], layout=W.Layout(width="100%")) for name in TABS}
        from .suggestions import SuggestionsWidget
        self.suggestions = SuggestionsWidget(self.summary.get("suggestions") or [], on_open=self.open_target)
        self._panels["Overview"].children = [W.HTML(overview_html(self.summary, root=prof.root)),
                                             self.suggestions.widget]
        self.widget = W.Tab(children=[self._panels[n] for n in TABS], titles=TABS,
                            layout=W.Layout(width="100%"))
        self.widget.observe(self._on_tab, names="selected_index")
        # Every chart tab draws with Bokeh: its modules are imported with the dashboard (~0.45 s; the Step trace
        # view below pays that here anyway when there is a step trace), so that no tab's first open waits for
        # them (at 1 GB the Timeline tab's first open was 0.93-1.03 s, half of it this import).
        import bokeh.layouts  # noqa: F401
        import bokeh.plotting  # noqa: F401
        self._build("Step trace")

    def _on_tab(self, change):
        if change["new"] is None:
            return
        self.tab = TABS[change["new"]]
        self._build(self.tab)

    @traitlets.observe("tab")
    def _tab_changed(self, change):
        index = TABS.index(change["new"])
        if self.widget.selected_index != index:
            self.widget.selected_index = index

    def open_target(self, target) -> None:
        """Open the place a suggestion cites (a `views.suggestions.Target`): its tab, and there the pipeline
        queue (MindData), the operator type filter (Operators), the step (Step trace) or the time window
        (Timeline). A place the view cannot show (a pipeline op without a queue) leaves the tab as it is."""
        fresh = target.tab not in self.views
        view = self.select(target.tab)
        self.evidence = {k: v for k, v in dataclasses.asdict(target).items() if v is not None}
        if view is None:
            return
        self._set_target(view, target)
        if fresh:   # built just now: its widget may render before the changes above reach it
            from .bokehjs import resync
            resync(view.widget)

    @staticmethod
    def _set_target(view, target) -> None:
        if target.queue is not None and hasattr(view, "select_op"):
            view.select_op(target.queue)
        if target.op_type is not None and hasattr(view, "set_type_filter"):
            if target.kind and hasattr(view, "select_kind"):
                view.select_kind(target.kind)
            view.set_type_filter(target.op_type)
        if target.step is not None and target.tab == "Step trace":
            view.step = int(target.step)
        if target.window_us is not None and hasattr(view, "set_window"):
            view.set_window(*target.window_us)

    def select(self, tab: str):
        """Open ``tab`` (one of `TABS`), building its view if needed; returns the view (or None)."""
        self.widget.selected_index = TABS.index(tab)
        return self._build(tab)

    def _build(self, tab: str):
        if tab == "Overview" or tab in self.views:
            return self.views.get(tab)
        view = None
        try:
            view = self._make(tab)
        except Exception as err:  # a view must never take the whole dashboard down; show why instead
            self._panels[tab].children = [W.HTML(no_data_html(tab, self.prof, f"{type(err).__name__}: {err}"))]
            self.views[tab] = None
            return None
        self.views[tab] = view
        if view is None:
            self._panels[tab].children = [W.HTML(no_data_html(tab, self.prof))]
        else:
            if self._changed_after_build:
                from .bokehjs import resync
                resync(view.widget)  # its step / window was set after its widget was built
            # The operators view says itself what a step does to its table (`OperatorsView.step_note`);
            # the dashboard's note is about the timeline only, so each tab shows one note.
            extra = [self.link_note] if tab == "Timeline" else []
            self._panels[tab].children = [*extra, view.widget, *self._extras.get(tab, [])]
        return view

    def _make(self, tab: str):
        """The view of ``tab`` (None: no data), given the selected step or time window; sets
        ``_changed_after_build`` when it changed the view after building its widget (which then needs a
        `resync`: a full re-render, ~0.5 s on a big timeline, so only then)."""
        prof = self.prof
        self._changed_after_build = False
        if tab == "Step trace":
            if prof.step_trace.empty or not prof.step_stages:
                return None
            from .step_trace import StepTraceView
            view = StepTraceView(prof)
            view.observe(self._on_step, names="step")
            return view
        if tab == "Operators":
            if not prof.op_kinds:
                return None
            from .operators import OperatorsView
            view = OperatorsView(prof, top_n=self.top_n)
            step = self._current_step()
            if step:
                view.set_step(step)
                self._changed_after_build = True
            self._add_op_steps()
            return view
        if tab == "MindData":
            if all(getattr(prof, f).empty for f in ("minddata_pipeline", "host_queue", "device_queue",
                                                     "cpu_utilization")):
                return None
            from .minddata import MindDataView
            return MindDataView(prof)
        if tab == "Memory":
            if prof.memory.empty and prof.operator_memory.empty and prof.npu_module_mem.empty:
                return None
            from .memory import MemoryView
            view = MemoryView(prof)
            view.observe(self._on_memory_window, names="window")
            return view
        if tab == "FLOPs":
            if prof.flops.empty and not prof.flops_summary:  # a legacy cluster rank may hold only the summary
                return None
            from .flops import FlopsView
            return FlopsView(prof)
        if tab == "Timeline":
            if prof.timeline.empty:
                return None
            from .timeline import TimelineView
            view = TimelineView(prof)
            view.observe(self._on_event, names="event")
            memory = self.views.get("Memory")
            window = step_window_us(prof, self._current_step()) or (memory.window if memory else None)
            if window:
                view.set_window(*window)
                self._changed_after_build = True
            return view
        raise ValueError(f"unknown tab {tab!r}; tabs are {TABS}")

    def _add_op_steps(self) -> None:
        """Operators per step and by input shape, folded under the Operators tab (built on first open:
        placing a trace's operators in steps reads the whole timeline)."""
        from .op_steps import OpStepsView, has_op_steps
        if not has_op_steps(self.prof):
            return
        holder = W.VBox([])
        fold = W.Accordion(children=[holder], titles=("Operators per step and by input shape",),
                           selected_index=None, layout=W.Layout(width="100%"))

        def build(change):
            if change["new"] == 0 and not holder.children:
                view = OpStepsView(self.prof)
                view.observe(lambda ch: self._set_step(ch["new"]), names="step")
                self.views["Operators per step"] = view
                holder.children = [view.widget]
        fold.observe(build, names="selected_index")
        self._extras["Operators"] = [fold]

    def _set_step(self, step: int) -> None:
        """Choose a step everywhere (the step-trace view's selector drives the links)."""
        view = self.views.get("Step trace") or self._build("Step trace")
        if view is not None and step:
            view.step = int(step)
        else:
            self._on_step({"new": step})

    def _on_event(self, change):
        """A clicked timeline event: say which step it ran in, and show its operator row (the Operators
        tab's table searched for its name)."""
        ev = change["new"]
        if not ev:
            return
        step = step_of_time(self.prof, ev["start_us"] + ev["dur_us"] / 2)
        where = f"step {step}" if step else "no step window (this profile cannot place events in steps)"
        ops = self.views.get("Operators") or self._build("Operators")
        shown = ops is not None and ops.show_operator(ev["name"])
        self.link_note.value = (f"<span style=\"{theme.MUTED_CSS}\">{escape(ev['name'])} ({escape(ev['op_type'])}, "
                                f"{escape(ev['track'])}) at {ev['start_us'] / 1000:,.3f} ms: {escape(where)}"
                                f"{'; its row is shown in the Operators tab' if shown else ''}.</span>")

    def _move_timeline(self, window) -> None:
        """Show ``window`` on the timeline, if it is built. Its widget is re-snapshotted too: a view created
        while the change was on its way (the Timeline tab opened a moment before) would miss it."""
        tl = self.views.get("Timeline")
        if window and tl is not None:
            from .bokehjs import resync
            tl.set_window(*window)
            resync(tl.widget)

    def _on_memory_window(self, change):
        self._move_timeline(change["new"])

    def _current_step(self) -> int:
        v = self.views.get("Step trace")
        return int(v.step) if v is not None else 0

    def _on_step(self, change):
        step = change["new"]
        ops = self.views.get("Operators")
        if ops is not None:
            ops.set_step(step or None)
        window = step_window_us(self.prof, step)
        self._move_timeline(window)
        if not step:
            self.link_note.value = ""
        elif window:
            how = escape(str(self.prof.step_windows["source"].iloc[0]))
            self.link_note.value = (f"<span style=\"{theme.MUTED_CSS}\">Step {int(step)}: "
                                    f"{window[0] / 1000:,.3f}–{window[1] / 1000:,.3f} ms on the timeline "
                                    f"({how}).</span>")
        else:
            self.link_note.value = (f"<span style=\"{theme.MUTED_CSS}\">Step {int(step)} selected: this "
                                    "profile's step points and timeline do not share a clock (no kernel step "
                                    "ids, no CANN step trace, no min_cycle_counter/output_timeline_data to align "
                                    "them), so the timeline shows the whole run.</span>")

