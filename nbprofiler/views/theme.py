"""The one look shared by every nbprofiler view: fonts, colours, axis labels, `style(fig)`.

Readable in JupyterLab's light and dark themes: figures have transparent backgrounds and draw text,
axes and grid lines in neutral mid greys that keep enough contrast on white and on near-black. HTML
panels (ipywidgets HTML, Bokeh Div) use JupyterLab's CSS variables with fallbacks, so they follow the
user's theme. Bokeh widgets and DataTables reset their own colour variables in each shadow root, so
`themed(layout)` gives every model of a view a stylesheet (`BOKEH_CSS`) mapping them to JupyterLab's.

Colours are stable across views: a stage always has the colour in `STAGE_COLORS`, and an operator type
keeps the colour it first got in the session (`op_type_colors`), so "MatMul" is the same colour in the
operators pie, the timeline and the comparison view. A new type gets the free palette colour most
different (CIELAB distance) from the types listed before it in its chart, so a chart's top types are
clearly distinct.
"""
from __future__ import annotations

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
MUTED_ALPHA = 0.35

# Okabe-Ito, a colour-blind-safe palette; each stage keeps its colour in every view and run format.
STAGE_COLORS: dict[str, str] = {
    # legacy / CANN step trace
    "iteration_interval_ms": "#E69F00",   # step interval (waiting for data): orange
    "fp_and_bp_ms": "#0072B2",            # forward + backward: blue
    "fp_ms": "#0072B2",                   # inference forward
    "tail_ms": "#009E73",                 # step tail: green
    # MindSpore 2.3+ / msprof-analyze step_trace_time.csv
    "preparing_ms": "#E69F00",
    "computing_ms": "#0072B2",
    "communication_not_overlapped_ms": "#CC79A7",
    "free_ms": "#999999",
    "overlapped_ms": "#56B4E9",
    "communication_ms": "#CC79A7",
    "bubble_ms": "#F0E442",
    "stage_ms": "#56B4E9",
    "total_ms": "#555555",
}

# Stage and device-kind display names: the shared vocabulary in nbprofiler.schema.
STAGE_LABELS, KIND_LABELS = schema.STAGE_LABELS, schema.KIND_LABELS

# Reduce / communication sub-stages (AllReduce, Receive ...) draw from their own ramp so they do not
# take a stage colour.
REDUCE_COLORS = ["#D55E00", "#CC79A7", "#8E44AD", "#B35806", "#F781BF", "#7F3B08"]

# Category20 without its greys (reserved for "Other"/free) followed by Category20b: 38 hues.
OP_TYPE_PALETTE = [
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
    "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#bcbd22", "#dbdb8d",
    "#17becf", "#9edae5",
    "#393b79", "#5254a3", "#6b6ecf", "#9c9ede", "#637939", "#8ca252", "#b5cf6b", "#cedb9c",
    "#8c6d31", "#bd9e39", "#e7ba52", "#e7cb94", "#843c39", "#ad494a", "#d6616b", "#e7969c",
    "#7b4173", "#a55194", "#ce6dbd", "#de9ed6",
]
# Colours handed out so far in this session, so two types never share one until the palette is used up.
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


def _assign(name: str, on_screen: list[str]) -> str:
    """A colour for a type seen for the first time: a palette colour no other type holds, the one
    farthest (in Lab) from the colours already on screen with it; with nothing on screen, its crc32
    slot (so a lone type is usually the same colour across sessions)."""
    start = zlib.crc32(name.encode("utf-8")) % len(OP_TYPE_PALETTE)
    taken = set(_OP_TYPE_ASSIGNED.values())
    # palette order starting at the type's own slot: ties go to the slot nearest its hash
    free = [c for i in range(len(OP_TYPE_PALETTE))
            if (c := OP_TYPE_PALETTE[(start + i) % len(OP_TYPE_PALETTE)]) not in taken]
    if not free:  # palette used up: share the preferred slot
        return OP_TYPE_PALETTE[start]
    others = [c for c in dict.fromkeys(on_screen) if c != OTHER]
    if not others:
        return free[0]
    return max(free, key=lambda c: min(color_distance(c, o) for o in others))


def op_type_colors(op_types) -> list[str]:
    """Colours of the operator types of one chart, most important (e.g. largest) first.

    A type keeps the colour it got first in this session, in every view. A type not seen before gets the
    free palette colour most different from the colours of the types listed before it, so the top types
    of the first chart that shows them are clearly distinct (Category20 has near-identical pairs such as
    two pinks). The folded ``"Other"`` row is grey."""
    names = [str(t) for t in op_types]
    chosen: dict[str, str] = {}
    for name in dict.fromkeys(names):
        if name.lower() == "other":
            chosen[name] = OTHER
        elif name in _OP_TYPE_ASSIGNED:
            chosen[name] = _OP_TYPE_ASSIGNED[name]
        else:
            chosen[name] = _OP_TYPE_ASSIGNED[name] = _assign(name, list(chosen.values()))
    return [chosen[n] for n in names]


def op_type_color(op_type: str) -> str:
    """Colour of one operator type, the same in every view of a session (see `op_type_colors`; a type
    first coloured alone takes its crc32 palette slot, or the next free one)."""
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


def themed(layout):
    """Add one ``InlineStyleSheet`` of `BOKEH_CSS` to ``layout`` and to every UI element in it (plots,
    widgets, tables, Divs): CSS custom properties set on one shadow host are reset by each nested
    host, so each needs the sheet. One sheet per call: a Bokeh model belongs to one document only.
    Returns ``layout``."""
    from bokeh.models import InlineStyleSheet, UIElement
    sheet = InlineStyleSheet(css=BOKEH_CSS)
    for model in layout.select({"type": UIElement}):
        model.stylesheets = [*model.stylesheets, sheet]
    return layout


# Microsecond ticks shown in the unit a person reads at that zoom (s, ms or us), chosen per redraw from the
# largest tick, so a 66 s trace reads "12 s" and a zoomed-in window "812.5 us", never "100000000".
_TIME_US_TICKS_JS = """
const m = Math.max(...ticks.map(Math.abs));
const fmt = (v, d) => v.toLocaleString('en-US', {maximumFractionDigits: d});
if (m >= 1e6) return fmt(tick / 1e6, 6) + ' s';
if (m >= 1e3) return fmt(tick / 1e3, 3) + ' ms';
return fmt(tick, 3) + ' us';
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
