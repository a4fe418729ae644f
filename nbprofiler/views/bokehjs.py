"""BokehJS in the page, for every display of every view.

A Bokeh widget (jupyter_bokeh's ``BokehModel``) draws only when ``window.Bokeh`` exists in the browser
page showing it. The page, not the kernel, is what must have it: after a page reload or in a second tab
the kernel is the same but the page is new. So `show` puts a small loader before each widget it displays;
in the page, the loader does nothing when this BokehJS version is already there, and otherwise fetches
its bundles from the nbprofiler server extension (``GET <base_url>nbprofiler/bokehjs/<version>/
<bundle>.min.js``, the files of the installed bokeh package: offline, and never copied into the notebook)
and runs them before the widget's view is created (the request is synchronous for that reason).
"""
from __future__ import annotations

import json

import bokeh
from bokeh.resources import INLINE

VERSION = bokeh.__version__
# The bundles an inline `output_notebook` would embed, in load order (bokeh first).
BUNDLES = tuple(INLINE.components_for("js"))
MIME = "application/javascript"

_LOADER = """(function () {
  var want = %(version)s, bundles = %(bundles)s;
  var have = window.Bokeh && window.Bokeh.version === want && window.Bokeh.Widgets && window.Bokeh.Tables;
  if (have) return;
  var base = '/';
  var cfg = document.getElementById('jupyter-config-data');
  if (cfg) { try { base = JSON.parse(cfg.textContent).baseUrl || '/'; } catch (e) {} }
  for (var i = 0; i < bundles.length; i++) {
    var url = base + 'nbprofiler/bokehjs/' + want + '/' + bundles[i] + '.min.js';
    var xhr = new XMLHttpRequest();
    xhr.open('GET', url, false);  // synchronous: the widget below must find Bokeh when it renders
    xhr.send();
    if (xhr.status !== 200) {
      throw new Error('nbprofiler could not load BokehJS ' + want + ' from ' + url + ' (HTTP ' + xhr.status +
                      '): is the nbprofiler server extension enabled? (jupyter server extension list)');
    }
    var script = document.createElement('script');
    script.text = xhr.responseText;
    document.head.appendChild(script);  // runs now, in page scope
  }
})();"""


def loader_js() -> str:
    """The page-side loader (JavaScript) for this bokeh version."""
    return _LOADER % {"version": json.dumps(VERSION), "bundles": json.dumps(list(BUNDLES))}


def show(widget) -> None:
    """Display ``widget`` (an ipywidget holding Bokeh models) with the BokehJS loader before it."""
    from IPython.display import display
    display({MIME: loader_js()}, raw=True)
    display(widget)


def resync(widget) -> None:
    """Make the Bokeh widgets inside ``widget`` (an ipywidget tree) render their models as they are now.

    jupyter_bokeh sends a model change to the views that exist; a widget whose view is created later
    renders the state it was built with. A view that is changed between being built and being shown
    (a dashboard tab given the selected step or time window first) calls this before it is shown."""
    from jupyter_bokeh import BokehModel
    stack = [widget]
    while stack:
        w = stack.pop()
        if isinstance(w, BokehModel):
            w.update_from_model(w._model)
        stack.extend(getattr(w, "children", ()) or ())


def bundle_path(version: str, bundle: str):
    """The file the server extension serves for ``<version>/<bundle>.min.js``, or None when that is not
    this bokeh's version or not one of its bundles (only those files are ever served)."""
    from bokeh.util.paths import bokehjs_path
    if version != VERSION or bundle not in BUNDLES:
        return None
    return bokehjs_path() / "js" / f"{bundle}.min.js"


__all__ = ["show", "resync", "loader_js", "bundle_path", "VERSION", "BUNDLES"]
