"""The dashboard (`nbprofiler.show(prof)` / `prof.show()`): an overview of `prof.summary()` with the
advisor's suggestions, then one tab per dashboard page of `nbprofiler.views.pages.PAGES` (a page declared
``within`` another is folded under that tab), built from the registry alone: the page's has-data rule, its
view (``from_profile``) and its links.

Views are built when their tab is first opened (a large timeline costs nothing until looked at). A tab
whose page has no data shows which files were looked for and what failed. Linking: choosing a step in
the step-trace view narrows the operator table to that step's operators (where kernels carry step ids)
and the timeline to the step's time span (only where the step span and the timeline share a clock: the
kernels of ``kernel_details.csv`` and the trace are both relative to the profile's origin; legacy step
points count device ticks on another clock, and the UI says so).
"""
from __future__ import annotations

import dataclasses
import gc
import sys
from html import escape
from typing import Callable

import ipywidgets as W
import traitlets

from . import pages as P
from . import theme
from .base import View
from .overview import overview_html

TABS = P.DASHBOARD_TABS  # "Overview", then the dashboard pages of `nbprofiler.views.pages` (`Dashboard.tabs`)


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
    files = P.page(tab).files if tab != "Overview" else []
    looked = "".join(f"<li><code>{escape(p)}</code></li>" for p in files)
    probs = "".join(f"<li>{escape(str(p.file))}: {escape(str(p.error))}</li>" for p in prof.problems)
    probs = f"<div>Problems while loading:</div><ul>{probs}</ul>" if probs else ""
    return (f"<div style=\"{theme.PANEL_CSS}padding:8px\"><b>No {escape(tab.lower())} data</b>"
            f"{': ' + escape(why) if why else ''} in <code>{escape(str(prof.root))}</code>."
            f"<div style='{theme.MUTED_CSS}'>Looked for:</div><ul>{looked}</ul>{probs}</div>")


def import_chart_modules() -> None:
    """Import Bokeh's layouts and plotting and jupyter_bokeh, which every chart tab draws with (the largest
    part of a chart tab's first open otherwise: benchmarks/README.md, "The dashboard after a load"). A shown
    dashboard does it once its overview is on its way to the page (`Dashboard.prepare`): neither the overview
    nor a tab opened after it waits for the import; a tab clicked sooner waits for the rest.

    The first import is followed by a full garbage collection: the import leaves tens of thousands of objects,
    and the interpreter's next full collection, which visits every object of the kernel, is then due and
    would fall in whatever allocates next, often a tab's first open; here it falls while the page draws."""
    if all(m in sys.modules for m in ("bokeh.layouts", "bokeh.plotting", "jupyter_bokeh")):
        return
    import bokeh.layouts  # noqa: F401
    import bokeh.plotting  # noqa: F401
    import jupyter_bokeh  # noqa: F401
    gc.collect()


class Dashboard(traitlets.HasTraits, View):
    """Tabs: the overview, then the dashboard pages of `nbprofiler.views.pages.PAGES` (``.tabs``), linked as
    their pages declare: by the selected step (a step clicked in the per-step operator chart selects it
    too); a range box-selected on the memory curve moves the timeline there; each suggestion of the
    overview has buttons that open the evidence it cites (`open_target`).

    ``.widget`` is the ipywidgets ``Tab``; ``.summary`` is what its overview shows (``prof.summary()``
    without what the overview does not show: `analysis.summary.summarize`); ``.views`` holds the views
    built so far by page title (folded pages too); ``.select(tab_name)`` opens a tab (building its view).
    Linkable state: ``tab`` (the open tab's name) and ``evidence`` (the last `views.suggestions.Target`
    opened, as a dict)."""

    tab = traitlets.Unicode("Overview")
    evidence = traitlets.Dict()

    def __init__(self, prof, top_n: int = 20):
        super().__init__()
        self.prof = prof
        self.top_n = top_n
        self.pages = P.PAGES
        self.tabs = P.dashboard_tabs(self.pages)
        self.views: dict[str, object] = {}
        self._extras: dict[str, list] = {}  # widgets a tab shows under its view
        self.link_note = W.HTML("")
        from ..analysis.summary import summarize
        self.summary = summarize(prof, overview_only=True)
        full = W.Layout(width="100%")   # shared by the tab and its pages (a Layout is a model of its own)
        self._panels = {name: W.VBox([], layout=full) for name in self.tabs}
        from .suggestions import SuggestionsWidget
        self.suggestions = SuggestionsWidget(self.summary.get("suggestions") or [], on_open=self.open_target)
        self._panels["Overview"].children = [W.HTML(overview_html(self.summary, root=prof.root)),
                                             self.suggestions.widget]
        self.widget = W.Tab(children=[self._panels[n] for n in self.tabs], titles=self.tabs, layout=full)
        self.widget.observe(self._on_tab, names="selected_index")
        # No view is built here (`prepare` builds the step trace's once the overview is shown): until it is,
        # the selected step is the average (`_current_step`), which is what that view opens on.

    def display(self) -> None:
        """Show the dashboard, then `prepare` its tabs while the page draws the overview."""
        self.prepare(self.show_overview())

    def show_overview(self) -> Callable[[], None] | None:
        """Show the dashboard as it is. Without a view built, the widget holds no Bokeh model yet: the BokehJS
        loader's place is kept before it, and the function that sends the loader there is returned (for
        `prepare`); else the loader is sent first, as every view sends it, and None is returned."""
        from .bokehjs import show_with_loader
        return show_with_loader(self.widget, self.has_charts)

    @property
    def has_charts(self) -> bool:
        """Whether a view is built (its Bokeh models in the widget)."""
        return any(v is not None for v in self.views.values())

    def prepare(self, send_loader: Callable[[], None] | None = None) -> None:
        """What a shown dashboard does once its overview is on its way to the page: import what the chart tabs
        draw with (`import_chart_modules`), send the BokehJS loader (``send_loader``, from
        `bokehjs.show_loader_later`; None where the loader is in the page already) and build the view whose
        step the other tabs follow (the step trace's: its tab opens at once, and a saved notebook shows it).
        A tab clicked meanwhile waits."""
        import_chart_modules()
        if send_loader is not None:
            send_loader()
        step_page = self._source("step")
        if step_page is not None:
            self._build(step_page.title)

    def _source(self, link: str):
        """The page whose view drives ``link`` (see `nbprofiler.views.pages.Page`), or None."""
        return next((p for p in self.pages if any(to == link for _, to in p.links)), None)

    def _on_tab(self, change):
        if change["new"] is None:
            return
        self.tab = self.tabs[change["new"]]
        self._build(self.tab)

    @traitlets.observe("tab")
    def _tab_changed(self, change):
        index = self.tabs.index(change["new"])
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
        if target.step is not None and any(to == "step" for _, to in P.page(target.tab).links):
            view.step = int(target.step)   # the page that drives the step (the step trace)
        if target.window_us is not None and hasattr(view, "set_window"):
            view.set_window(*target.window_us)

    def select(self, tab: str):
        """Open ``tab`` (one of ``.tabs``), building its view if needed; returns the view (or None)."""
        index = self.tabs.index(tab)
        if self.widget.selected_index == index:
            # The page may show another tab whose choice has not reached the kernel yet (a tab clicked just
            # before the evidence button): a value equal to the kernel's is not sent, so send it anyway.
            self.widget.send_state("selected_index")
        else:
            self.widget.selected_index = index
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
            self._panels[tab].children = [W.HTML(no_data_html(tab, self.prof)), *self._extras.get(tab, [])]
        else:
            if self._changed_after_build:
                from .bokehjs import resync
                resync(view.widget)  # its step / window was set after its widget was built
            # The operators view says itself what a step does to its table (`OperatorsView.step_note`);
            # the dashboard's note is about the timeline only (the page following the window), so each tab
            # shows one note.
            extra = [self.link_note] if "window" in P.page(tab, self.pages).follows else []
            self._panels[tab].children = [*extra, view.widget, *self._extras.get(tab, [])]
        return view

    def _make(self, tab: str):
        """The view of ``tab`` (None: no data), given the selected step or time window; sets
        ``_changed_after_build`` when it changed the view after building its widget (which then needs a
        `resync`: a full re-render, ~0.5 s on a big timeline, so only then)."""
        page = P.page(tab, self.pages)
        self._changed_after_build = False
        # the pages folded under this tab, shown under its no-data panel too (a CANN run's operators per step)
        folds = [self._fold(p) for p in self.pages if p.within == page.key and p.has_data(self.prof)]
        if folds:
            self._extras[tab] = folds
        if not page.has_data(self.prof):
            return None
        view = self._view(page)
        for state in page.follows:
            self._changed_after_build |= self._follow(view, state)
        return view

    def _view(self, page):
        """``page``'s view, built with ``from_profile`` and the dashboard settings it takes, its traits
        observed by the links it drives."""
        view = page.make_view(self.prof, **{o: getattr(self, o) for o in page.options})
        for trait, link in page.links:
            view.observe(getattr(self, f"_link_{link}"), names=trait)
        return view

    def _follow(self, view, state: str) -> bool:
        """Set a view just built to the dashboard's ``state`` ("step", "window"; the last "event" it is
        shown when it comes); True if it changed."""
        if state == "step":
            step = self._current_step()
            if step:
                view.set_step(step)
                return True
        if state == "window":
            window_view = self._linked_view("window")
            window = (step_window_us(self.prof, self._current_step())
                      or (window_view.window if window_view is not None else None))
            if window:
                view.set_window(*window)
                return True
        return False

    def _fold(self, page):
        """``page`` folded under its tab (e.g. operators per step and by input shape under Operators), its
        view built on first open (placing a trace's operators in steps reads the whole timeline)."""
        holder = W.VBox([])
        fold = W.Accordion(children=[holder], titles=(page.fold_title or page.title,),
                           selected_index=None, layout=W.Layout(width="100%"))

        def build(change):
            if change["new"] == 0 and not holder.children:
                view = self._view(page)
                self.views[page.title] = view
                holder.children = [view.widget]
        fold.observe(build, names="selected_index")
        return fold

    def _linked_view(self, link: str):
        """The built view of the page that drives ``link``, or None."""
        page = self._source(link)
        return self.views.get(page.title) if page is not None else None

    def _followers(self, state: str):
        """The built views of the pages that follow ``state``."""
        return [v for p in self.pages if state in p.follows if (v := self.views.get(p.title)) is not None]

    # -- the links (a page's ``links``: its view's trait -> ``_link_<name>``) -----------------------------
    def _link_select_step(self, change) -> None:
        self._set_step(change["new"])

    def _link_window(self, change) -> None:
        self._move_timeline(change["new"])

    def _link_step(self, change) -> None:
        self._on_step(change)

    def _link_event(self, change) -> None:
        self._on_event(change)

    def _set_step(self, step: int) -> None:
        """Choose a step everywhere (the step-trace view's selector drives the links)."""
        page = self._source("step")
        view = self._linked_view("step") or (self._build(page.title) if page is not None else None)
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
        shown = False
        for p in self.pages:   # the pages that show the event's operator (the operators tab), built if need be
            if "event" in p.follows:
                ops = self.views.get(p.title) or self._build(p.title)
                shown = (ops is not None and ops.show_operator(ev["name"])) or shown
        self.link_note.value = (f"<span style=\"{theme.MUTED_CSS}\">{escape(ev['name'])} ({escape(ev['op_type'])}, "
                                f"{escape(ev['track'])}) at {ev['start_us'] / 1000:,.3f} ms: {escape(where)}"
                                f"{'; its row is shown in the Operators tab' if shown else ''}.</span>")

    def _move_timeline(self, window) -> None:
        """Show ``window`` on the timeline, if it is built. Its widget is re-snapshotted too: a view created
        while the change was on its way (the Timeline tab opened a moment before) would miss it."""
        if not window:
            return
        from .bokehjs import resync
        for tl in self._followers("window"):
            tl.set_window(*window)
            resync(tl.widget)

    def _current_step(self) -> int:
        v = self._linked_view("step")
        return int(v.step) if v is not None else 0

    def _on_step(self, change):
        step = change["new"]
        for ops in self._followers("step"):
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
