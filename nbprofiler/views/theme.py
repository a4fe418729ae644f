"""The one look shared by every nbprofiler view: fonts, colours, axis labels, `style(fig)`.

Readable in JupyterLab's light and dark themes: figures have transparent backgrounds and draw text,
axes and grid lines in neutral mid greys that keep enough contrast on white and on near-black. HTML
panels (ipywidgets HTML, Bokeh Div) use JupyterLab's CSS variables with fallbacks, so they follow the
user's theme. Bokeh widgets and DataTables reset their own colour variables in each shadow root, so
`themed(layout)` gives every model of a view a stylesheet (`BOKEH_CSS`) mapping them to JupyterLab's.

Colours are stable across views: a stage always has the colour in `STAGE_COLORS`, and an operator type
keeps its colour in the session (`op_type_colors`), so "MatMul" is the same colour in the operators pie,
the timeline and the operators-per-step chart. The types shown together on one chart are always told
apart: they get colours in their order on the chart from `OP_TYPE_PALETTE` (nine hues, then their light
and dark tones), each its own colour and, for the first nine, each its own hue; a type whose session
colour would repeat a colour or hue already on the chart takes the next free one instead (and keeps
that from then on).
"""
from __future__ import annotations

import collections
import zlib

from .. import schema

# Canvas text cannot use CSS variables, so name a font stack close to JupyterLab's UI font.
FONT = '-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Helvetica, Arial, sans-serif'
MONO_FONT = 'Menlo, Consolas, "DejaVu Sans Mono", monospace'
FONT_SIZE = "12px"
TITLE_SIZE = "13px"

# Mid greys: contrast >= 3.9:1 against both #ffffff (JupyterLab light) and #111111 (JupyterLab dark).
TEXT = "#7a7a7a"
AXIS = "#8c8c8c"
GRID = "#8c8c8c"
GRID_ALPHA = 0.25
HIGHLIGHT = "#d62728"     # the slowest rank, a selected bar's outline
OTHER = "#a0a0a0"         # the folded "other" slice/bar
GAIN = "#009E73"          # time saved in the new run of a comparison
LOSS = "#D55E00"          # time added in the new run of a comparison
MUTED_ALPHA = 0.35

# The parts of a step, one quantity one colour on every figure (the step-trace stages, the cluster page's
# per-rank breakdown and its communication per rank): Okabe-Ito hues, colour-blind-safe. Communication not
# overlapped by computing is one pink; its two parts, waiting for the other ranks and moving data, are its
# dark and light shades, so a stage bar's pink reads as their sum and neither part is mistaken for it.
COMPUTING = "#0072B2"          # device computing: blue
COMM_OVERLAPPED = "#56B4E9"    # communication hidden under computing: sky blue
COMM_EXPOSED = "#CC79A7"       # communication not overlapped: pink
COMM_WAIT = "#8E3B73"          # ... of which waiting for the other ranks: dark pink
COMM_TRANSIT = "#E7A3C9"       # ... of which moving data: light pink
COMM_IDLE = "#D8CCD3"          # inside a communication op, neither waiting nor moving data: pale mauve
FREE = "#999999"               # device idle: grey
HOST_BOUND = "#E69F00"         # device waiting for the host (data, dispatch): orange
BUBBLE = "#F0E442"             # a pipeline stage waiting for its neighbour (send/receive alone): yellow

STAGE_COLORS: dict[str, str] = {
    # legacy / CANN step trace
    "iteration_interval_ms": HOST_BOUND,  # step interval (waiting for data)
    "fp_and_bp_ms": COMPUTING,            # forward + backward
    "fp_ms": COMPUTING,                   # inference forward
    "tail_ms": "#009E73",                 # step tail: green
    # MindSpore 2.3+ / msprof-analyze step_trace_time.csv
    "preparing_ms": HOST_BOUND,
    "computing_ms": COMPUTING,
    "communication_not_overlapped_ms": COMM_EXPOSED,
    "free_ms": FREE,
    "overlapped_ms": COMM_OVERLAPPED,
    "communication_ms": "#CC79A7",
    "bubble_ms": BUBBLE,
    "stage_ms": "#56B4E9",
    "total_ms": "#555555",
}

# Stage and device-kind display names: the shared vocabulary in nbprofiler.schema.
STAGE_LABELS, KIND_LABELS = schema.STAGE_LABELS, schema.KIND_LABELS

# Reduce / communication sub-stages (AllReduce, Receive ...) draw from their own ramp so they do not
# take a stage colour.
REDUCE_COLORS = ["#D55E00", "#CC79A7", "#8E44AD", "#B35806", "#F781BF", "#7F3B08"]

# Operator-type colours: nine hue families (Category10 without its grey, kept for "Other", its pink a
# deeper one, clearly apart from its purple), each in three tones: mid, light, dark. A chart hands out
# the mid tones first, so up to nine types shown together are nine hues; 27 types get 27 colours.
OP_TYPE_FAMILIES: dict[str, tuple[str, str, str]] = {
    "blue": ("#1f77b4", "#aec7e8", "#393b79"),
    "orange": ("#ff7f0e", "#ffbb78", "#b35806"),
    "green": ("#2ca02c", "#98df8a", "#1b6e1b"),
    "red": ("#d62728", "#ff9896", "#8b1a1a"),
    "purple": ("#9467bd", "#c5b0d5", "#6a3d9a"),
    "brown": ("#8c564b", "#c49c94", "#5c3a21"),
    "pink": ("#e7298a", "#f7b6d2", "#a1306f"),
    "olive": ("#bcbd22", "#dbdb8d", "#7a7a10"),
    "cyan": ("#17becf", "#9edae5", "#0e6f7a"),
}
# The mid tones of every family, then the light ones, then the dark ones: the order a chart takes them.
OP_TYPE_PALETTE = [tones[i] for i in range(3) for tones in OP_TYPE_FAMILIES.values()]
_FAMILY_OF = {c: family for family, tones in OP_TYPE_FAMILIES.items() for c in tones}
# Each type's colour in this session (the last one a chart gave it).
_OP_TYPE_ASSIGNED: dict[str, str] = {}


def stage_color(stage: str) -> str:
    """Colour of a step-trace stage column (e.g. ``fp_and_bp_ms``); unknown stages get a stable hash colour."""
    return STAGE_COLORS.get(stage) or OP_TYPE_PALETTE[zlib.crc32(stage.encode()) % len(OP_TYPE_PALETTE)]


def stage_label(stage: str) -> str:
    """Display name of a stage column: ``fp_and_bp_ms`` -> "Forward + backward"."""
    if stage in STAGE_LABELS:
        return STAGE_LABELS[stage]
    base = stage[:-3] if stage.endswith("_ms") else stage
    return base.replace("_", " ").capitalize()


def reduce_color(index: int) -> str:
    """Colour of the ``index``-th reduce/communication sub-stage of a run."""
    return REDUCE_COLORS[index % len(REDUCE_COLORS)]


def _lab(hex_color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB hex colour: distances in Lab follow perceived colour difference."""
    rgb = [int(hex_color[i:i + 2], 16) / 255.0 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def color_distance(a: str, b: str) -> float:
    """Perceived difference of two hex colours (CIE76 delta E: ~2 just noticeable, > 25 clearly distinct)."""
    return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b))) ** 0.5


def _fits(color: str, used: set[str], families: collections.Counter) -> bool:
    """Whether ``color`` tells a type apart on a chart already showing ``used`` (whose hue families are
    counted in ``families``): a colour not on it, of a hue not on it while some hue is still unused."""
    if color in used or color not in _FAMILY_OF:
        return False
    return families[_FAMILY_OF[color]] == 0 or len(families) >= len(OP_TYPE_FAMILIES)


def _pick(used: set[str], families: collections.Counter, held: set[str]) -> str:
    """The colour for the next type on a chart: one not on it, of its least used hue, preferring one no
    other type of the session holds (``held``), in palette order. A chart with more types than the
    palette has colours repeats them in order."""
    free = [c for c in OP_TYPE_PALETTE if c not in used]
    if not free:
        return OP_TYPE_PALETTE[len(used) % len(OP_TYPE_PALETTE)]
    order = {c: i for i, c in enumerate(OP_TYPE_PALETTE)}
    return min(free, key=lambda c: (families[_FAMILY_OF[c]], c in held, order[c]))


def op_type_colors(op_types) -> list[str]:
    """Colours of the operator types shown together on one chart, in the chart's order (most important,
    e.g. largest, first); the folded ``"Other"`` row is grey.

    The types of one chart never share a colour (up to the palette's 27) and the first nine are nine
    different hues. A type keeps its colour from earlier views of the session where that keeps the chart
    so; otherwise (and the first time it is seen) it gets the palette colour of the least used hue on
    the chart, one no other type of the session holds where possible, and keeps that from then on."""
    names = [str(t) for t in op_types]
    chosen: dict[str, str] = {}
    used: set[str] = set()
    families: collections.Counter = collections.Counter()
    for name in dict.fromkeys(names):
        if name.lower() == "other":
            chosen[name] = OTHER
            continue
        color = _OP_TYPE_ASSIGNED.get(name)
        if color is None or not _fits(color, used, families):
            held = {c for t, c in _OP_TYPE_ASSIGNED.items() if t != name}
            color = _OP_TYPE_ASSIGNED[name] = _pick(used, families, held)
        chosen[name] = color
        used.add(color)
        families[_FAMILY_OF[color]] += 1
    return [chosen[n] for n in names]


def op_type_color(op_type: str) -> str:
    """Colour of one operator type, the same in every view of a session (see `op_type_colors`; a type
    first coloured alone takes the first palette colour no other type holds)."""
    return op_type_colors([op_type])[0]


def kind_label(kind: str) -> str:
    """Display name of a device kind: ``ai_core`` -> "AI Core"; an NPU core's panel ``npu_ai_vector_core``
    -> "NPU · AI Vector Core"."""
    if kind in KIND_LABELS:
        return KIND_LABELS[kind]
    if kind.startswith("npu_"):
        core = " ".join(w.upper() if len(w) <= 3 else w.capitalize() for w in kind[4:].split("_"))  # AI, SQE
        return f"NPU · {core}"
    return kind


def axis_label(quantity: str, unit: str | None = None) -> str:
    """Axis label with its unit: ``axis_label("Time", "ms")`` -> "Time (ms)"."""
    return f"{quantity} ({unit})" if unit else quantity


def style(fig, *, legend: bool = True):
    """Apply the nbprofiler look to a Bokeh figure in place and return it: transparent backgrounds,
    the font stack, grey text/axes/grid, a toolbar that hides until hovered."""
    fig.background_fill_color = None
    fig.border_fill_color = None
    fig.outline_line_color = None
    if fig.title is not None:
        fig.title.text_font = FONT
        fig.title.text_font_size = TITLE_SIZE
        fig.title.text_color = TEXT
        fig.title.text_font_style = "bold"
    for axis in list(fig.xaxis) + list(fig.yaxis):
        axis.axis_label_text_font = FONT
        axis.axis_label_text_font_size = FONT_SIZE
        axis.axis_label_text_font_style = "normal"
        axis.axis_label_text_color = TEXT
        axis.major_label_text_font = FONT
        axis.major_label_text_font_size = "11px"
        axis.major_label_text_color = TEXT
        axis.axis_line_color = AXIS
        axis.major_tick_line_color = AXIS
        axis.minor_tick_line_color = AXIS
    for grid in list(fig.xgrid) + list(fig.ygrid):
        grid.grid_line_color = GRID
        grid.grid_line_alpha = GRID_ALPHA
    if legend:
        for leg in fig.legend:
            leg.background_fill_alpha = 0.0
            leg.border_line_alpha = 0.0
            leg.label_text_font = FONT
            leg.label_text_font_size = "11px"
            leg.label_text_color = TEXT
            leg.inactive_fill_alpha = 0.0
    if fig.toolbar is not None:
        fig.toolbar.logo = None
        fig.toolbar.autohide = True
    return fig


# HTML panels (ipywidgets HTML, Bokeh Div): JupyterLab's CSS variables with fallbacks for plain HTML files.
PANEL_CSS = (
    "font-family: var(--jp-ui-font-family, " + FONT.replace('"', "'") + ");"
    "font-size: var(--jp-ui-font-size1, 13px);"
    "color: var(--jp-ui-font-color1, #333);"
)
MUTED_CSS = "color: var(--jp-ui-font-color2, #777);"
BORDER_CSS = "border: 1px solid var(--jp-border-color2, #ddd); border-radius: 4px;"

# Bokeh widgets, tables and tooltips draw in shadow roots whose `:host` sets Bokeh's own colour variables
# (white backgrounds, near-black text), so JupyterLab's dark theme left white boxes. This sheet, added
# to every Bokeh model of a view (`themed`), maps those variables to JupyterLab's; the fallbacks are
# Bokeh's defaults, so a standalone HTML file looks as before.
BOKEH_CSS = """
:host {
  --color: var(--jp-ui-font-color1, #18191D);
  --background-color: var(--jp-layout-color1, #fff);
  --hover-color: var(--jp-layout-color2, #F9F9F9);
  --border-color: var(--jp-border-color1, #BBBBBD);
  --divider-color: var(--jp-border-color2, #D7D7D8);
  --placeholder-color: var(--jp-ui-font-color3, #9A9B9D);
  --surface-background-color: var(--jp-layout-color2, #EBEBEB);
  --disabled-background-color: var(--jp-layout-color3, #EBEBEB);
  --inactive-bg: var(--jp-layout-color2, #EBEBEB);
  --inactive-fg: var(--jp-ui-font-color2, #9A9B9D);
  --default: var(--jp-layout-color1, #fff);
  --default-border: var(--jp-border-color1, #ccc);
  --default-hover: var(--jp-layout-color2, #f5f5f5);
  --default-hover-border: var(--jp-border-color1, #b8b8b8);
  --default-active: var(--jp-layout-color3, #ebebeb);
  --default-active-border: var(--jp-border-color1, #adadad);
  --special: var(--jp-layout-color2, #f5f5f5);
  --odd: var(--jp-layout-color2, #f0f0f0);
  --muted-text: var(--jp-ui-font-color2, #909090);
  --selected: var(--jp-brand-color3, #f0f8ff);
  color: var(--color);
}
.slick-header-columns, .slick-header-column.ui-state-default, .slick-row, .slick-viewport, .slick-pane,
.slick-headerrow, .slick-headerrow-column, .slick-group-totals {
  background: var(--background-color);
  color: var(--color);
}
.slick-row.odd { background: var(--odd); }
.slick-row.selected, .slick-cell.selected { background: var(--jp-layout-color3, #DFE8F6); }
.slick-header-column.ui-state-default { border-right-color: var(--divider-color); }
.slick-header-column:hover, .slick-header-column-active { background: var(--hover-color); }
.bk-input, select.bk-input, .bk-input-group > label { color: var(--color); }
.bk-input option { background: var(--background-color); color: var(--color); }
"""


def themed(layout, elements=None):
    """Add one ``InlineStyleSheet`` of `BOKEH_CSS` to ``layout`` and to every UI element in it (plots,
    widgets, tables, Divs): CSS custom properties set on one shadow host are reset by each nested
    host, so each needs the sheet. One sheet per call: a Bokeh model belongs to one document only.
    ``elements``: those UI elements when the caller has them (`ui_elements`); by default every model of
    the layout is searched. Returns ``layout``."""
    from bokeh.models import InlineStyleSheet, UIElement
    sheet = InlineStyleSheet(css=BOKEH_CSS)
    for model in (layout.select({"type": UIElement}) if elements is None else elements):
        model.stylesheets = [*model.stylesheets, sheet]
    return layout


def ui_elements(layout) -> list:
    """The UI elements ``layout`` shows, found through the properties that hold them: the children of rows
    and columns, a plot's toolbar, any element's ``elements`` and context menu, a button's icon. A search of
    every model of a page (``layout.select({"type": UIElement})``: sources, glyphs, tools, ranges, callbacks)
    costs ~10 ms of a tab's first open; this visits a dozen. A model of another kind (tabs, tables, a menu, a
    tooltip that is a model) is searched as ``select`` does. Not looked into: a plot's renderers and
    annotations, and callbacks' arguments (a page's UI elements are in its layout)."""
    from bokeh.models import AbstractButton, Column, HoverTool, Markup, Model, Plot, Row, Toolbar, UIElement
    out, seen, todo = [], set(), [layout]
    while todo:
        m = todo.pop()
        if id(m) in seen or not isinstance(m, Model):
            continue
        seen.add(id(m))
        if isinstance(m, (Column, Row)):
            todo.extend(m.children)
        elif isinstance(m, Plot):
            todo.append(m.toolbar)
        elif isinstance(m, Toolbar):
            todo.extend(t.tooltips for t in m.tools if isinstance(t, HoverTool) and isinstance(t.tooltips, Model))
        elif isinstance(m, AbstractButton):
            todo.append(m.icon)
        elif not isinstance(m, Markup):
            for x in m.select({"type": UIElement}):   # m itself among them when it is one
                if x is m or id(x) not in seen:
                    seen.add(id(x))
                    out.append(x)
            continue
        if isinstance(m, UIElement):
            out.append(m)
            todo.extend([*getattr(m, "elements", ()), m.context_menu])
    return out


# Table headers: a column is at least as wide as its title (Bokeh's DataTable otherwise squeezes every
# column into the table's width and cuts titles: "Host queue e"). Header text is ~13 px sans-serif:
# 7.5 px a character is generous for it, plus the cell padding and the sort arrow.
HEADER_PX_PER_CHAR = 7.5
HEADER_PAD_PX = 28


def header_width(title: str) -> int:
    """Pixels a table column needs to show ``title`` whole."""
    return int(len(title or "") * HEADER_PX_PER_CHAR + HEADER_PAD_PX + 0.5)


def fit_headers(table, scroll: bool = True):
    """Widen each column of a Bokeh ``DataTable`` to its title (`header_width`) and return the table.
    ``scroll``: keep those widths and scroll sideways when they do not fit (``autosize_mode="none"``);
    without it the table's own fitting (``force_fit``) may still narrow columns in a narrow cell."""
    for col in table.columns:
        col.width = max(int(col.width or 0), header_width(col.title))
    if scroll:
        table.autosize_mode = "none"
    return table


# Microsecond ticks shown in the unit a person reads at that zoom (s, ms or us), chosen per redraw from the
# largest tick, so a 66 s trace reads "12 s" and a zoomed-in window "812.5 us", never "100000000".
# ``this`` is one object per formatting of the axis's ticks (BokehJS binds it): the unit and the number
# format are chosen once for all the ticks (a format made per tick was the axis labels' largest cost in a CPU
# profile of the page zooming the timeline)
_TIME_US_TICKS_JS = """
if (this.unit === undefined) {
  const m = Math.max(...ticks.map(Math.abs));
  [this.scale, this.unit, this.digits] = m >= 1e6 ? [1e6, ' s', 6] : m >= 1e3 ? [1e3, ' ms', 3] : [1, ' us', 3];
  this.format = new Intl.NumberFormat('en-US', {maximumFractionDigits: this.digits});
}
return this.format.format(tick / this.scale) + this.unit;
"""


def format_time_us(us: float, digits: int = 3, like: float | None = None) -> str:
    """A time or duration in microseconds, in the unit a person reads at that size (s, ms or us);
    ``like``: pick the unit for that value instead (both ends of a window in one unit)."""
    a = abs(us if like is None else like)
    if a >= 1e6:
        return f"{us / 1e6:,.{digits}f} s"
    if a >= 1e3:
        return f"{us / 1e3:,.{digits}f} ms"
    return f"{us:,.{min(digits, 1)}f} us"


def time_us_axis(axis) -> None:
    """Label microsecond tick values of ``axis`` in s, ms or us, whichever the visible range calls for."""
    from bokeh.models import CustomJSTickFormatter
    axis.formatter = CustomJSTickFormatter(code=_TIME_US_TICKS_JS)
