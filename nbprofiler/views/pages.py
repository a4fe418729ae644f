"""The pages of a profile, declared once: each dashboard tab and report section, with the frames it reads.

The dashboard's tabs and its "no data" panels, and the report's sections and their "missing" notes, are
built from `PAGES`; the files a page looked for and the discovery roles behind them come from the
frames' declarations in `nbprofiler.schema`.
"""
from __future__ import annotations

import dataclasses

from .. import schema


@dataclasses.dataclass(frozen=True)
class Page:
    """``key`` (report panel ``report_<key>``), ``title`` (the tab's name), ``frames`` (what it draws; records
    such as ``flops_summary`` included), ``note`` (what an empty page should add), ``dashboard`` (a tab of
    ``prof.show()``; the report has every page)."""

    key: str
    title: str
    frames: tuple[str, ...]
    note: str = ""
    dashboard: bool = True

    @property
    def files(self) -> list[str]:
        """The file patterns that feed the page, as the profilers write them."""
        return schema.looked_for(*self.frames)

    @property
    def roles(self) -> frozenset[str]:
        """The discovery roles of those files."""
        return schema.roles_of(*self.frames)


PAGES: tuple[Page, ...] = (
    Page("step_trace", "Step trace", ("step_trace", "step_trace_reduce"),
         note="CPU-only and PyNative runs write none"),
    Page("operators", "Operators", ("op_types", "ops")),
    Page("op_steps", "Operators per step", ("kernels", "step_windows"),
         note="it needs kernel_details.csv with step ids, or a step trace whose steps the timeline covers",
         dashboard=False),
    Page("minddata", "MindData", ("minddata_pipeline", "minddata_queues", "host_queue", "device_queue",
                                  "cpu_utilization", "op_cpu_utilization", "minddata_summary")),
    Page("memory", "Memory", ("memory", "operator_memory", "npu_module_mem")),
    Page("flops", "FLOPs", ("flops", "flops_summary")),
    Page("timeline", "Timeline", ("timeline",)),
)


def page(title_or_key: str) -> Page:
    return next(p for p in PAGES if title_or_key in (p.title, p.key))


# The dashboard's tabs: the overview, then the dashboard pages in order.
DASHBOARD_TABS = ["Overview", *(p.title for p in PAGES if p.dashboard)]
