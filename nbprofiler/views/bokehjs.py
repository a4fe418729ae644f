"""BokehJS in the page, for every display of every view.

A Bokeh widget (jupyter_bokeh's ``BokehModel``) draws only when ``window.Bokeh`` exists in the browser
page showing it. The page, not the kernel, is what must have it: after a page reload or in a second tab
the kernel is the same but the page is new. So `show` puts a small loader before each widget it displays;
in the page, the loader does nothing when this BokehJS version is already there, and otherwise fetches
its bundles from the nbprofiler server extension (``GET <base_url>nbprofiler/bokehjs/<version>/
<bundle>.min.js``, the files of the installed bokeh package: offline, and never copied into the notebook)
and runs them before the widget's view is created (the request is synchronous for that reason). The
loader also keeps the page from sending a kernel's own changes back to it (``noEcho``), draws plain bars as
filled rectangles (``fastBars``: the timeline's frames are mostly its bars), reads BokehJS's CSS style
variables and a plot's font size once per view (``cssOnce``), skips rewriting a style sheet with its own
text (``sameCss``) and lets the hover tool's tooltip follow a moving plot once it rests (``hoverAtRest``).

The loader names Bokeh's version and bundles, which importing ``bokeh.resources`` gives (much of Bokeh's own
import). A display that holds no Bokeh model yet (the dashboard's overview) keeps the loader's place before
its widget and fills it once Bokeh is imported (`show_loader_later`): the page and a saved notebook get the
loader before the widget all the same.
"""
from __future__ import annotations

import functools
import json
import uuid
from typing import Callable

MIME = "application/javascript"


def version() -> str:
    """The installed bokeh's version."""
    import bokeh
    return bokeh.__version__


@functools.cache
def bundles() -> tuple[str, ...]:
    """The bundles an inline `output_notebook` would embed, in load order (bokeh first)."""
    from bokeh.resources import INLINE
    return tuple(INLINE.components_for("js"))


_LOADER = """(function () {
  var want = %(version)s, bundles = %(bundles)s;
  var have = window.Bokeh && window.Bokeh.version === want && window.Bokeh.Widgets && window.Bokeh.Tables;
  if (!have) load();
  noEcho();
  fastBars();
  cssOnce();
  sameCss();
  hoverAtRest();

  function load() {
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
  }

  // jupyter_bokeh's view sends the kernel every change of its document, those a patch from the kernel
  // makes included: each re-query's bars went back to the kernel, gzipped and base64-encoded by the page
  // (~0.2 s of the page's time for 10,000 bars). While a patch is applied, a change of a model's
  // attribute that the patch itself sets is not passed on; the changes other code makes meanwhile
  // (a CustomJS callback) still are.
  function noEcho() {
    var proto = window.Bokeh.require('document').Document.prototype;
    if (proto.__nbprofilerNoEcho) return;
    var apply = proto.apply_json_patch, trigger = proto._trigger_on_change;
    var key = function (e) { return e && e.model && e.attr ? e.model.id + ':' + e.attr : null; };
    proto.apply_json_patch = function (patch) {
      var outer = this.__nbprofilerPatched, keys = new Set(outer || []);
      ((patch && patch.events) || []).forEach(function (e) { var k = key(e); if (k) keys.add(k); });
      this.__nbprofilerPatched = keys;
      try { return apply.apply(this, arguments); } finally { this.__nbprofilerPatched = outer; }
    };
    proto._trigger_on_change = function (event) {
      var keys = this.__nbprofilerPatched, self = this;
      if (!keys || !keys.size) return trigger.call(this, event);
      var echo = function (e) { return keys.has(key(e)); };
      if (event.events) {  // a batch: as it is without echoes, else what is not an echo, event by event
        var rest = event.events.filter(function (e) { return !echo(e); });
        if (rest.length === event.events.length) return trigger.call(this, event);
        rest.forEach(function (e) { trigger.call(self, e); });
      } else if (!echo(event)) {
        trigger.call(this, event);
      }
    };
    proto.__nbprofilerNoEcho = true;
  }

  // BokehJS's modules of these names, or null where this BokehJS has not one of them (then the page
  // draws as BokehJS does)
  function modules(names) {
    try { return names.map(function (name) { return window.Bokeh.require(name); }); } catch (e) { return null; }
  }

  // BokehJS draws each bar (HBar, VBar, Quad) as a path of its own, filled with a colour string made for it:
  // ~10 us a bar in headless Chromium, most of a timeline frame's time. Bars without outline, hatch or
  // rounded corners are drawn here as filled rectangles instead, the colour set only when it changes: the
  // same picture (a bar's sub-pixel edge is anti-aliased a few levels differently). Any other bars are
  // drawn by BokehJS's own code.
  function fastBars() {
    var found = modules(['models/glyphs/lrtb', 'core/util/color']);
    if (!found) return;
    var lrtb = found[0], color = found[1];
    var proto = lrtb && lrtb.LRTBView && lrtb.LRTBView.prototype;
    if (!proto || proto.__nbprofilerFastBars || !color || !color.color2css) return;
    var paint = proto._paint;
    proto._paint = function (ctx, indices, data) {
      var v = this.visuals, r = this.border_radius, fill = v && v.fill;
      var square = r == null || (r.top_left === 0 && r.top_right === 0 && r.bottom_right === 0 &&
                                 r.bottom_left === 0);
      if (!square || !fill || !fill.fill_color || !fill.fill_alpha || !v.hatch || v.hatch.doit || !v.line ||
          v.line.doit || typeof ctx.fillRect !== 'function') {
        return paint.call(this, ctx, indices, data);
      }
      var d = data || {};
      var sl = d.sleft || this.sleft, sr = d.sright || this.sright, st = d.stop || this.stop,
          sb = d.sbottom || this.sbottom;
      var fc = fill.fill_color, fa = fill.fill_alpha, lastC = null, lastA = null;
      for (var i of indices) {
        var left = sl[i], right = sr[i], top = st[i], bottom = sb[i];
        if (!isFinite(left + right + top + bottom)) continue;
        var c = fc.get(i), a = fa.get(i);
        if (c == 0 || a == 0) continue;
        if (c !== lastC || a !== lastA) {
          ctx.fillStyle = color.color2css(c, a);
          lastC = c;
          lastA = a;
        }
        ctx.fillRect(Math.min(left, right), Math.min(top, bottom), Math.abs(right - left), Math.abs(bottom - top));
      }
    };
    proto.__nbprofilerFastBars = true;
    proto.__nbprofilerPlainPaint = paint;   // BokehJS's own, which the tests compare the pixels with
  }

  // BokehJS lets a page restyle a plot through CSS variables (--bk-fill-color, ...) and reads them, and the
  // plot's font size, with getComputedStyle each time it draws a text or a grid band: in JupyterLab, whose
  // page changes around the plot while it zooms, each read recomputed the page's styles (~40 ms of a
  // frame). nbprofiler sets no such variable and sizes its texts in px: each is read once per view.
  function cssOnce() {
    var found = modules(['core/visuals/visual', 'models/plots/plot_canvas']);
    if (!found) return;
    var visual = found[0], canvas = found[1];
    var proto = visual && visual.VisualProperties && visual.VisualProperties.prototype;
    if (proto && !proto.__nbprofilerCssOnce && typeof proto._get_css_value === 'function') {
      var read = proto._get_css_value;
      proto._get_css_value = function (name) {
        var seen = this.__nbprofilerCss || (this.__nbprofilerCss = new Map());
        var value = seen.get(name);
        if (value === undefined) {
          value = read.call(this, name);
          seen.set(name, value);
        }
        return value;
      };
      proto.__nbprofilerCssOnce = true;
    }
    var plot = canvas && canvas.PlotView && canvas.PlotView.prototype;
    var size = plot && Object.getOwnPropertyDescriptor(plot, 'base_font_size');
    if (size && size.get && !plot.__nbprofilerCssOnce) {
      Object.defineProperty(plot, 'base_font_size', {configurable: true, get: function () {
        if (this.__nbprofilerFontSize === undefined) this.__nbprofilerFontSize = size.get.call(this);
        return this.__nbprofilerFontSize;
      }});
      plot.__nbprofilerCssOnce = true;
    }
  }

  // A renderer writes its position's style sheet at every paint, mostly the same text: each write made the
  // page's styles stale, and each text the plot then drew recomputed them (a canvas resolves its font
  // against the page's styles): the axes' labels took ~36 ms of a zoom's frames in JupyterLab. A write of
  // the same text is skipped.
  function sameCss() {
    var found = modules(['core/dom']);
    var proto = found && found[0].InlineStyleSheet && found[0].InlineStyleSheet.prototype;
    if (!proto || proto.__nbprofilerSameCss || typeof proto._update !== 'function') return;
    var update = proto._update;
    proto.__nbprofilerWrite = update;   // BokehJS's own, which the tests compare with
    proto._update = function (css) {
      if (this.el && this.el.textContent === css) return;
      return update.call(this, css);
    };
    proto.__nbprofilerSameCss = true;
  }

  // The hover tool inspects the plot again after every repaint while the pointer rests on it: during a
  // zoom, a tooltip parsed from HTML and laid out in every frame (~70 ms of a zoom in JupyterLab, on the
  // thread that then draws the new bars). After repaints it inspects once the plot has rested for
  // `__nbprofilerHoverRest` ms; a move of the pointer still inspects at once.
  function hoverAtRest() {
    var found = modules(['models/tools/inspectors/hover_tool']);
    var proto = found && found[0].HoverToolView && found[0].HoverToolView.prototype;
    if (!proto || proto.__nbprofilerHoverRest != null || typeof proto._inspect !== 'function' ||
        typeof proto._move !== 'function') return;
    var inspect = proto._inspect, move = proto._move;
    proto.__nbprofilerHoverRest = 200;
    proto._move = function (ev) {
      clearTimeout(this.__nbprofilerLater);
      this.__nbprofilerMoving = true;
      try { return move.call(this, ev); } finally { this.__nbprofilerMoving = false; }
    };
    proto._inspect = function (sx, sy, dims) {
      if (this.__nbprofilerMoving || !isFinite(sx + sy)) {
        return inspect.call(this, sx, sy, dims);
      }
      var self = this;
      clearTimeout(this.__nbprofilerLater);
      this.__nbprofilerLater = setTimeout(function () {
        var at = self._current_sxy;
        if (self.model.active && at != null) inspect.call(self, at[0], at[1], at[2]);
      }, proto.__nbprofilerHoverRest);
    };
  }
})();"""


def loader_js() -> str:
    """The page-side loader (JavaScript) for this bokeh version."""
    return _LOADER % {"version": json.dumps(version()), "bundles": json.dumps(list(bundles()))}


def show(widget) -> None:
    """Display ``widget`` (an ipywidget holding Bokeh models) with the BokehJS loader before it."""
    from IPython.display import display
    display({MIME: loader_js()}, raw=True)
    display(widget)


def show_loader_later(widget) -> Callable[[], None]:
    """Display ``widget`` (an ipywidget holding no Bokeh model yet) after an empty output kept for the
    BokehJS loader; the function returned fills that output with the loader (an update of the display: the
    page runs it then, and the notebook saves it before the widget). Call it before a Bokeh model is added
    to the widget."""
    from IPython.display import display, update_display
    place = f"nbprofiler-bokehjs-{uuid.uuid4().hex}"
    display({MIME: ""}, raw=True, display_id=place)
    display(widget)

    def send_loader() -> None:
        update_display({MIME: loader_js()}, raw=True, display_id=place)
    return send_loader


def show_with_loader(widget, holds_bokeh: bool) -> Callable[[], None] | None:
    """Display ``widget`` with the BokehJS loader before it: the loader at once where the widget holds Bokeh
    models already (`show`; returns None), else its place kept (`show_loader_later`; returns the function
    that fills it, to call before a Bokeh model is added)."""
    if holds_bokeh:
        show(widget)
        return None
    return show_loader_later(widget)


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


def bundle_path(wanted: str, bundle: str):
    """The file the server extension serves for ``<wanted>/<bundle>.min.js``, or None when ``wanted`` is not
    this bokeh's version or ``bundle`` not one of its bundles (only those files are ever served)."""
    from bokeh.util.paths import bokehjs_path
    if wanted != version() or bundle not in bundles():
        return None
    return bokehjs_path() / "js" / f"{bundle}.min.js"


__all__ = ["show", "show_loader_later", "show_with_loader", "resync", "loader_js", "bundle_path", "version",
           "bundles"]
