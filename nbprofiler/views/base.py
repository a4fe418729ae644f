"""The display plumbing every view shares: a view has a ``widget`` (ipywidgets, holding its Bokeh models
through jupyter_bokeh) and shows it in the notebook with BokehJS loaded into the page (`bokehjs.show`).
Views with linkable state (a step, a window, a selected queue) also derive from `traitlets.HasTraits`."""
from __future__ import annotations


class View:
    """Subclasses set ``self.widget``; this adds ``display()`` and the notebook's rich display."""

    widget = None

    @classmethod
    def from_profile(cls, prof, **options):
        """The view of a `Profile` (some views take a `Cluster` too), with the dashboard's ``options`` (see
        `views.pages.Page.options`): the constructor, which also takes a dict of the view's frames."""
        return cls(prof, **options)

    def display(self) -> None:
        from .bokehjs import show
        show(self.widget)

    def _ipython_display_(self):
        self.display()


class LayoutView(View):
    """A view that is one Bokeh layout: subclasses set ``self.layout``; ``widget`` (a jupyter_bokeh
    `BokehModel`) is built on first use."""

    layout = None
    _widget = None

    @property
    def widget(self):
        if self._widget is None:
            from jupyter_bokeh import BokehModel
            self._widget = BokehModel(self.layout)
        return self._widget
