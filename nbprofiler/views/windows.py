"""One rank's several sessions (schedule windows, repeated start/stop) as one dashboard: a window picker
above the full dashboard of the chosen window, and the windows compared side by side (the `RunSet` view
of `nbprofiler.compare_many`) folded under the picker. What `Profile.show()` shows when
``prof.windows`` holds more than one session; a single session shows the plain `Dashboard`."""
from __future__ import annotations

from html import escape

import ipywidgets as W
import traitlets

from . import theme
from .base import View
from .dashboard import TABS, Dashboard


def window_labels(windows: dict) -> dict[str, str]:
    """key -> what the picker and the comparison call each window: its number in recording order and its
    session folder (with the folder above it where several windows share the folder's name, as dynamic
    profiling's ``rank0_start2_stop5/<session>`` does)."""
    names = {k: (p.session or p.root.name) for k, p in windows.items()}
    repeated = {n for n in names.values() if list(names.values()).count(n) > 1}
    out = {}
    for i, (k, p) in enumerate(windows.items(), 1):
        name = f"{p.root.parent.name}/{names[k]}" if names[k] in repeated else names[k]
        out[k] = f"{i}: {name}"
    return out


class WindowsDashboard(traitlets.HasTraits, View):
    """The dashboard of one of a rank's windows, chosen with a picker (``.picker``, an ipywidgets
    ``Dropdown`` over ``prof.windows``). ``window`` (the key of the shown window, as ``load(device=...)``
    takes it) is the linkable state: setting it (or the picker) builds that window's `Dashboard` in place
    of the last one, opened on the same tab. ``.dashboard`` is the current `Dashboard`; ``.comparison``
    the windows compared (a `RunSet`, first window the baseline; computed when the "Compare the windows"
    fold is first opened or the attribute first read); ``.widget`` the whole."""

    window = traitlets.Unicode()

    def __init__(self, prof, top_n: int = 20):
        super().__init__()
        self.windows = prof.windows
        self.top_n = top_n
        self.labels = window_labels(self.windows)
        self._comparison = None
        self.picker = W.Dropdown(options=[(self.labels[k], k) for k in self.windows], value=prof.key,
                                 description="Window", layout=W.Layout(width="auto", min_width="420px"),
                                 style={"description_width": "initial"})
        self.note = W.HTML("")
        self._holder = W.VBox([])
        self.compare_fold = W.Accordion(children=[self._holder], titles=(f"Compare the {len(self.windows)} windows",),
                                        selected_index=None, layout=W.Layout(width="100%"))
        self.compare_fold.observe(self._on_fold, names="selected_index")
        self.dashboard = Dashboard(prof, top_n=top_n)
        self.widget = W.VBox([W.HBox([self.picker, self.note]), self.compare_fold, self.dashboard.widget],
                             layout=W.Layout(width="100%"))
        self.window = prof.key
        self._say()
        traitlets.link((self.picker, "value"), (self, "window"))

    def display(self) -> None:
        """Show the picker and the window's dashboard, then `prepare` it (`Dashboard.display`)."""
        from .bokehjs import show_with_loader
        self.prepare(show_with_loader(self.widget, self.dashboard.has_charts or bool(self._holder.children)))

    def prepare(self, send_loader=None) -> None:
        """`Dashboard.prepare` of the window's dashboard (once it is on its way to the page)."""
        self.dashboard.prepare(send_loader)

    @traitlets.validate("window")
    def _valid_window(self, proposal):
        if proposal["value"] not in self.windows:
            raise traitlets.TraitError(f"no window {proposal['value']!r}; windows are {list(self.windows)}")
        return proposal["value"]

    @traitlets.observe("window")
    def _window_changed(self, change):
        if self.dashboard.prof.key == change["new"]:
            return
        tab = self.dashboard.tab
        self.dashboard = Dashboard(self.windows[change["new"]], top_n=self.top_n)
        if tab != "Overview" and tab in TABS:
            self.dashboard.select(tab)
        self.widget.children = [*self.widget.children[:-1], self.dashboard.widget]
        self.dashboard.prepare()
        self._say()

    def _say(self) -> None:
        prof = self.dashboard.prof
        self.note.value = (f"<span style=\"{theme.MUTED_CSS}\">rank {escape(str(prof.rank))}, "
                           f"{len(self.windows)} sessions (schedule windows) recorded; this is "
                           f"<code>{escape(prof.key)}</code>: <code>load(path, device={prof.key!r})</code> "
                           "opens it alone, <code>prof.windows</code> holds them all.</span>")

    @property
    def comparison(self):
        """The windows compared (`nbprofiler.compare_many`, the first window the baseline)."""
        if self._comparison is None:
            from ..analysis.runs import compare_many
            self._comparison = compare_many(list(self.windows.values()), labels=list(self.labels.values()))
        return self._comparison

    def _on_fold(self, change):
        if change["new"] == 0 and not self._holder.children:
            from .runs import RunSetView
            self._holder.children = [RunSetView(self.comparison).widget]


__all__ = ["WindowsDashboard", "window_labels"]
