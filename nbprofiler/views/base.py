"""A view that is one Bokeh layout shown as a widget: the plumbing shared by the compare and cluster views."""
from __future__ import annotations


class LayoutView:
    """Subclasses set ``self.layout`` (a Bokeh layout); this adds ``.widget`` (a jupyter_bokeh
    `BokehModel`, built on first use) and notebook display."""

    layout = None
    _widget = None

    @property
    def widget(self):
        if self._widget is None:
            from jupyter_bokeh import BokehModel
            self._widget = BokehModel(self.layout)
        return self._widget

    def display(self) -> None:
        from .bokehjs import show
        show(self.widget)

    def _ipython_display_(self):
        self.display()
