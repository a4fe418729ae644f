"""The pages of a profile, declared once: `PAGES` is the registry the dashboard (`nbprofiler.views.dashboard`,
its tabs) and the offline report (`nbprofiler.faces.report`, its sections) are both built from.

A `Page` is all there is to know about one page: its name (``key``, ``title``), the ``frames`` it reads
(their file patterns and discovery roles come from `nbprofiler.schema`), the one rule saying whether a
profile has anything for it (`Page.has_data`: the dashboard's "no data" panel and the report's "missing"
note both follow it), its view class (``"module:Class"`` under `nbprofiler.views`, imported when first
needed: importing this module imports no view), and its links in the dashboard (what its view's traits
drive, what it follows, which tab it is folded under). The view class is the page's one way in from a
profile: ``Class.from_profile(prof)`` is the dashboard's view (`Page.make_view`), ``Class.report_layout(prof)``
the report's static section (`Page.report`); its ``FRAMES`` are what it reads of the profile, and its
constructor also takes them as a dict (`frames_of`).

Adding a page: a view module (a view class with ``FRAMES``, ``from_profile`` and ``report_layout``), then
one `Page` in `PAGES`. Nothing else lists the pages.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

from .. import schema


def frames_of(prof_or_frames, names) -> dict:
    """The frames ``names`` of a `Profile` (its properties of these names), of a dict of them, or of a tuple
    of them in that order (the older positional shape), as one dict by name; missing ones are None."""
    if isinstance(prof_or_frames, dict):
        return {k: prof_or_frames.get(k) for k in names}
    if isinstance(prof_or_frames, (tuple, list)):
        values = list(prof_or_frames)
        return {k: values[i] if i < len(values) else None for i, k in enumerate(names)}
    return {k: getattr(prof_or_frames, k) for k in names}


def holds_records(value) -> bool:
    """A frame with rows, or a record (dict) with content."""
    return value is not None and len(value) > 0


@dataclasses.dataclass(frozen=True)
class Page:
    """One page: a dashboard tab (``dashboard``; or folded under the tab of the page ``within``) and a
    report section (every page; its panel child is named ``report_<key>``).

    ``frames``: what it draws, records such as ``flops_summary`` included (their files are listed when it is
    empty). ``note``: what an empty page should add. ``view``: the view class, ``"module:Class"`` under
    `nbprofiler.views` (or the class). ``rule``: profile -> bool (or ``"module:function"``), whether it has
    data; default: any of ``frames`` holds records. ``options``: the dashboard settings passed to
    ``Class.from_profile`` as keywords. Dashboard links: ``links`` maps a trait of the view to the link of
    the dashboard it drives ("step": the selected step, "select_step": choose a step everywhere, "window":
    a time range to show on the timeline, "event": a clicked timeline event); ``follows`` the dashboard
    state the view follows ("step": `set_step`, "window": `set_window`, "event": `show_operator`; step and
    window also when it is built). ``fold_title``: its fold's title when shown ``within`` another tab.
    ``why_empty``: profile -> why it has no data (or ``"module:function"``), for a page whose files can be
    present without it having data (the report's "left out" note); default: said from its files."""

    key: str
    title: str
    frames: tuple[str, ...]
    view: str | type
    rule: Callable | str | None = None
    note: str = ""
    dashboard: bool = True
    options: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    follows: tuple[str, ...] = ()
    within: str = ""
    fold_title: str = ""
    why_empty: Callable | str | None = None

    @property
    def files(self) -> list[str]:
        """The file patterns that feed the page, as the profilers write them."""
        return schema.looked_for(*self.frames)

    @property
    def roles(self) -> frozenset[str]:
        """The discovery roles of those files."""
        return schema.roles_of(*self.frames)

    def has_data(self, prof) -> bool:
        """Whether ``prof`` (a `Profile`) has anything to show on this page: the one rule of the dashboard
        and the report."""
        if self.rule is not None:
            return bool(resolve(self.rule)(prof))
        return any(holds_records(getattr(prof, f)) for f in self.frames)

    @property
    def view_class(self) -> type:
        """The view class, imported on first use."""
        return resolve(self.view)

    def make_view(self, prof, **options):
        """The notebook view of ``prof`` on this page: ``Class.from_profile(prof, **options)``."""
        return self.view_class.from_profile(prof, **options)

    def report(self, prof):
        """The report's section of ``prof`` (``Class.report_layout(prof)``: a static Bokeh layout), or None
        when it has no data for this page."""
        return self.view_class.report_layout(prof) if self.has_data(prof) else None


def resolve(path):
    """``"module:name"`` (the module under `nbprofiler.views` unless dotted) imported; anything else as is.
    The registry names the view modules this way: importing `pages` imports none of them."""
    if not isinstance(path, str):
        return path
    module, name = path.split(":")
    return getattr(importlib.import_module(module if "." in module else f"{__package__}.{module}"), name)


# What the MindData page draws (MindSpore's summary alone draws nothing; it is listed among the page's files).
_MINDDATA = ("minddata_pipeline", "minddata_queues", "host_queue", "device_queue", "cpu_utilization",
             "op_cpu_utilization")


PAGES: tuple[Page, ...] = (
    Page("step_trace", "Step trace", ("step_trace", "step_trace_reduce"), "step_trace:StepTraceView",
         rule=lambda prof: not prof.step_trace.empty and bool(prof.step_stages),
         note="CPU-only and PyNative runs write none", links=(("step", "step"),)),
    Page("operators", "Operators", ("op_types", "ops"), "operators:OperatorsView",
         rule=lambda prof: bool(prof.op_kinds),   # a panel per device kind: operators of a known kind
         options=("top_n",), follows=("step", "event")),
    Page("op_steps", "Operators per step", ("kernels", "step_windows"), "op_steps:OpStepsView",
         rule="op_steps:has_op_steps",
         note="it needs kernel_details.csv with step ids, or a step trace whose steps the timeline covers",
         dashboard=False, within="operators", fold_title="Operators per step and by input shape",
         links=(("step", "select_step"),)),
    Page("minddata", "MindData", (*_MINDDATA, "minddata_summary"), "minddata:MindDataView",
         rule=lambda prof: any(holds_records(getattr(prof, f)) for f in _MINDDATA)),
    Page("memory", "Memory", ("memory", "operator_memory", "npu_module_mem"), "memory:MemoryView",
         links=(("window", "window"),)),
    Page("flops", "FLOPs", ("flops", "flops_summary"), "flops:FlopsView"),
    Page("timeline", "Timeline", ("timeline",), "timeline:TimelineView",
         links=(("event", "event"),), follows=("window",)),
    Page("dispatch", "Host dispatch", ("timeline", "timeline_flows"), "dispatch:DispatchView",
         rule="dispatch:has_dispatch",
         note="it needs device tasks joined to the host calls that launched them: trace_view.json's HostToDevice "
              "or async_npu flows, or a profiler database's CANN_API/TASK connectionIds",
         dashboard=False, within="timeline", fold_title="Where the device waited for the host",
         links=(("window", "window"),), why_empty="dispatch:why_not"),
)


def page(title_or_key: str, pages=None) -> Page:
    """The page of this title or key (in ``pages``, default `PAGES`)."""
    pages = PAGES if pages is None else pages
    for p in pages:
        if title_or_key in (p.title, p.key):
            return p
    raise ValueError(f"unknown page {title_or_key!r}; pages are {[p.title for p in pages]}")


def dashboard_tabs(pages=None) -> list[str]:
    """The dashboard's tabs: the overview, then the dashboard pages in order."""
    return ["Overview", *(p.title for p in (PAGES if pages is None else pages) if p.dashboard)]


DASHBOARD_TABS = dashboard_tabs()
