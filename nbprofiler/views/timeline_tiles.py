"""The offline report's zoomable timeline: levels of detail computed at export, picked by the page.

`lod_tiles(index, t0, t1, width_px, budget_bytes)` cuts the run into a tree of tiles: the root (level 0)
is the whole run, each split tile has two children of half its span (level k + 1), and every tile holds
the `lod_query` bars of its span at ``width_px`` pixels, so a tile of level k carries the detail of a
view 2^k times narrower than the run. The tiles that hide the most events in merged bars are split
first, until their bars would pass ``budget_bytes``; a tile whose bars are all single events, or whose
span has none, is never split.

`tiled_timeline(...)` puts the tiles under the report's timeline figure: their bars in one
``timeline_tiles_src`` (numbers only, sent as binary arrays), the tree as small lists, and a CustomJS on
the time axis (debounced) that copies the bars of the finest tiles the view needs into ``timeline_src``
and says in ``timeline_level_note`` which level is shown. No kernel is needed to zoom from the whole
run to single ops where the budget reached them.
"""
from __future__ import annotations

import dataclasses
import heapq
import html
import zlib

import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource, CustomJS, Div
from bokeh.settings import settings

from ..analysis.timeline import lod_query
from .timeline_bars import AGGREGATE_MIN_ALPHA, bar_data, track_table

TILE_BUDGET_BYTES = 6_000_000   # bar data and names of all the tiles in the file, as Bokeh embeds them
TILE_GLYPHS = 4_000             # bars per tile: a view spans at most ~5 tiles (with its neighbours)
MAX_LEVEL = 30                  # deeper than this a tile's pixel is below a nanosecond on any real run
MIN_PX_US = 1e-3                # no tile is split below a nanosecond per pixel (the traces' resolution)
DEBOUNCE_MS = 30
# The store's columns and their types: what the page needs to rebuild ``timeline_src``'s columns (right
# and alpha are derived from these and the tile's pixel).
_STORE = {"y": np.int16, "left": np.float64, "dur_us": np.float32, "busy_us": np.float32, "count": np.int32,
          "name_code": np.int32, "type_code": np.int16}  # y, type_code: int32 if a code passes int16


def stored_bytes(bars: pd.DataFrame) -> float:
    """What `lod_query` bars cost in the HTML: their columns in the store's types, compressed and
    base64-encoded as Bokeh embeds arrays (each tile compressed alone: a little more than in one store)."""
    if not len(bars):
        return 0.0
    start = bars["start_us"].to_numpy(np.float64)
    cols = {"y": bars["track"].to_numpy(), "left": start, "dur_us": bars["end_us"].to_numpy(np.float64) - start,
            "busy_us": bars["busy_us"].to_numpy(), "count": bars["count"].to_numpy(),
            "name_code": bars["name_code"].to_numpy(), "type_code": bars["type_code"].to_numpy()}
    level = settings.compression_level()
    return sum(len(zlib.compress(np.ascontiguousarray(v, dtype=_STORE[c]).tobytes(), level)) + 18
               for c, v in cols.items()) * 4 / 3


def _hidden(bars: pd.DataFrame) -> int:
    """Events a tile's bars hide in merged bars (what splitting it could show)."""
    count = bars["count"].to_numpy()
    return int(count[count > 1].sum())


def lod_tiles(index, t0: float, t1: float, width_px: int, budget_bytes: float = TILE_BUDGET_BYTES,
              root: pd.DataFrame | None = None, max_glyphs: int = TILE_GLYPHS) -> tuple[pd.DataFrame, list]:
    """The tile tree of [t0, t1] (see the module). ``root``: the level-0 bars if already queried.

    Returns ``tiles`` (one row per tile, the root first, children of a split tile next to each other):
    ``level``, ``tile`` (its position in its level, 0 .. 2^level - 1), ``t0``, ``t1``, ``px`` (µs per
    pixel of its bars), ``child`` (row of its first child, -1 when not split) and ``hidden`` (events in
    its merged bars), with ``attrs["bytes"]``, what they cost in the HTML (`stored_bytes` and their
    names); and ``bars``, the `lod_query` bars (``codes=True``) of each tile, in the tiles' order.
    """
    span = max(t1 - t0, 1e-9)
    if root is None:
        root = lod_query(index, t0, t1, width_px, max_glyphs=max_glyphs, codes=True)
    rows = [{"level": 0, "tile": 0, "t0": t0, "t1": t1, "px": span / width_px, "child": -1,
             "hidden": _hidden(root)}]
    bars = [root]
    names = index.name_values
    seen: set[int] = set()

    def cost(b: pd.DataFrame, keep: bool) -> float:
        """The bars' bytes and those of the names they bring (the page is sent the names in use only)."""
        new = set(b.loc[b["count"] == 1, "name_code"].tolist()) - seen
        if keep:
            seen.update(new)
        return stored_bytes(b) + sum(len(str(names[c])) + 3 for c in new if 0 <= c < len(names))

    used = cost(root, True)
    heap = [(-rows[0]["hidden"], 0)]
    while heap:
        neg, i = heapq.heappop(heap)
        if neg == 0:
            break
        r = rows[i]
        if r["level"] >= MAX_LEVEL or r["px"] / 2 < MIN_PX_US:
            continue
        mid = (r["t0"] + r["t1"]) / 2
        halves = [(r["t0"], mid), (mid, r["t1"])]
        kids = [lod_query(index, a, b, width_px, max_glyphs=max_glyphs, codes=True) for a, b in halves]
        if used + sum(cost(k, False) for k in kids) > budget_bytes:
            break   # the tiles hiding the most are split first: the rest hide fewer
        used += sum(cost(k, True) for k in kids)
        r["child"] = len(rows)
        for j, ((a, b), k) in enumerate(zip(halves, kids)):
            rows.append({"level": r["level"] + 1, "tile": 2 * r["tile"] + j, "t0": a, "t1": b,
                         "px": (b - a) / width_px, "child": -1, "hidden": _hidden(k)})
            bars.append(k)
            heapq.heappush(heap, (-rows[-1]["hidden"], len(rows) - 1))
    tiles = pd.DataFrame(rows)
    tiles.attrs["bytes"] = used
    return tiles, bars


def names_in_use(bars: list, dictionary) -> tuple[list, object]:
    """The bars with their name codes pointing into a `Dictionary` of the names they use alone (a run
    of millions of events may have as many names; the page needs those of the single bars it holds)."""
    codes = [b.loc[b["count"] == 1, "name_code"].to_numpy() for b in bars]
    used = np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)
    used = used[(used >= 0) & (used < len(dictionary.names))]
    out = []
    for b in bars:
        code = b["name_code"].to_numpy()
        single = (b["count"].to_numpy() == 1) & (code >= 0)
        b = b.copy()
        b["name_code"] = np.where(single, np.searchsorted(used, code), code).astype(code.dtype)
        out.append(b)
    return out, dataclasses.replace(dictionary, names=[dictionary.names[int(c)] for c in used])


def tile_store(tiles: pd.DataFrame, bars: list, tracks: pd.DataFrame) -> tuple[dict, dict]:
    """The page's copy of the tiles below the root (the root's bars are ``timeline_src``'s own data):
    the bars as `bar_data` numbers in the store's types (``timeline_tiles_src``), and the tree as lists
    (``level``, ``t0``, ``t1``, ``px``, ``child``, ``offset``, ``length``: each tile's rows in the store;
    the root's offset is -1)."""
    cols = {c: [] for c in _STORE}
    offset, length, at = [-1], [len(bars[0])], 0
    for (_, r), b in zip(list(tiles.iterrows())[1:], bars[1:]):
        d = bar_data(b, tracks, r["px"])
        n = len(d["left"])
        for c in _STORE:
            cols[c].append(np.asarray(d[c]))
        offset.append(at)
        length.append(n)
        at += n
    store = {c: (np.concatenate(v) if v else np.zeros(0)).astype(np.int32 if t == np.int16 else t)
             for (c, v), t in zip(cols.items(), _STORE.values())}
    for c in ("y", "type_code"):  # int16 where every code fits (one in ~10 bytes of a bar)
        v = store[c]
        fits = not len(v) or (int(v.min()) >= np.iinfo(np.int16).min and int(v.max()) <= np.iinfo(np.int16).max)
        store[c] = v.astype(np.int16 if fits else np.int32)
    tree = {"level": tiles["level"].astype(int).tolist(), "t0": tiles["t0"].astype(float).tolist(),
            "t1": tiles["t1"].astype(float).tolist(), "px": tiles["px"].astype(float).tolist(),
            "child": tiles["child"].astype(int).tolist(), "hidden": tiles["hidden"].astype(int).tolist(),
            "offset": offset, "length": length}
    return store, tree


def select_tiles(tree: dict, v0: float, v1: float, width_px: int) -> list[int]:
    """The tiles the page draws for the view [v0, v1] (the same walk as the page's script, for tests):
    from the root down, into a split tile's children while its pixel is coarser than the view's, keeping
    those that meet the view widened by half its width on each side; in time order."""
    pad = (v1 - v0) / 2
    a, b, want = v0 - pad, v1 + pad, (v1 - v0) / width_px
    out, stack = [], [0]
    while stack:
        i = stack.pop()
        if tree["t1"][i] < a or tree["t0"][i] > b:
            continue
        c = tree["child"][i]
        if c >= 0 and tree["px"][i] > want:
            stack += [c + 1, c]
        else:
            out.append(i)
    return out


def level_note(tree: dict, shown: list[int], v0: float, v1: float, width_px: int, bars: int) -> str:
    """What ``timeline_level_note`` says for the view [v0, v1] drawn from tiles ``shown`` (the page's
    script writes the same)."""
    deepest = max(tree["level"])
    level = max(tree["level"][i] for i in shown)
    want = (v1 - v0) / width_px
    finest = all(tree["child"][i] < 0 for i in shown)
    coarse = any(tree["px"][i] > want for i in shown)
    text = f"Level {level} of {deepest}: {bars:,} bars"
    if coarse and finest:
        hidden = sum(tree["hidden"][i] for i in shown)
        text += ("; finest level stored: zoom further shows the same bars" +
                 (f" ({hidden:,} events stay merged; open the profile in a notebook for them)" if hidden else ""))
    elif finest:
        text += "; finest level stored"
    else:
        text += "; zoom in for finer levels"
    return text + "."


# The page's side: the same walk as `select_tiles` and the same note as `level_note`.
_TILES_JS = """
const col = (s, c) => (s.data instanceof Map ? s.data.get(c) : s.data[c]);
const tree = tiles instanceof Map ? Object.fromEntries(tiles) : tiles;
if (store._nbp_root === undefined) {   // the root's bars: timeline_src as the file opened
  store._nbp_root = {};
  for (const c of ['y', 'left', 'right', 'dur_us', 'busy_us', 'count', 'name_code', 'type_code', 'alpha', 'row'])
    store._nbp_root[c] = col(src, c);
}
clearTimeout(store._nbp_timer);
store._nbp_timer = setTimeout(() => {
  const v0 = xr.start, v1 = xr.end, pad = (v1 - v0) / 2, a = v0 - pad, b = v1 + pad;
  const want = (v1 - v0) / width;
  const shown = [], stack = [0];
  while (stack.length) {
    const i = stack.pop();
    if (tree.t1[i] < a || tree.t0[i] > b) continue;
    const c = tree.child[i];
    if (c >= 0 && tree.px[i] > want) { stack.push(c + 1, c); } else { shown.push(i); }
  }
  const key = shown.join(',');
  if (key !== store._nbp_shown) {
    store._nbp_shown = key;
    if (shown.length === 1 && shown[0] === 0) {
      src.data = Object.assign({}, store._nbp_root);
    } else {
      // a single event across a tile's start is also in the tile before it, when that one is shown
      const pick = [];
      shown.forEach((i, k) => pick.push([i, k > 0]));
      const R = store._nbp_root;
      const len = (i) => (tree.offset[i] < 0 ? R.left.length : tree.length[i]);
      let n = 0;
      for (const [i] of pick) n += len(i);
      const y = new Int32Array(n), left = new Float64Array(n), right = new Float64Array(n), dur = new Float64Array(n),
        busy = new Float64Array(n), count = new Int32Array(n), name = new Int32Array(n), type = new Int32Array(n),
        alpha = new Float32Array(n), row = new Float64Array(n).fill(-1);
      const S = {};
      for (const c of ['y', 'left', 'dur_us', 'busy_us', 'count', 'name_code', 'type_code']) S[c] = col(store, c);
      let m = 0;
      for (const [i, skip] of pick) {
        const root = tree.offset[i] < 0, o = root ? 0 : tree.offset[i], px = tree.px[i], t0 = tree.t0[i];
        const get = root ? {y: R.y, left: R.left, dur_us: R.dur_us, busy_us: R.busy_us, count: R.count,
                            name_code: R.name_code, type_code: R.type_code} : S;
        for (let j = o; j < o + len(i); j++) {
          const cnt = get.count[j], l = get.left[j];
          if (skip && cnt === 1 && l < t0) continue;
          const d = get.dur_us[j];
          y[m] = get.y[j]; left[m] = l; dur[m] = d; right[m] = l + Math.max(d, px); busy[m] = get.busy_us[j];
          count[m] = cnt; name[m] = get.name_code[j]; type[m] = get.type_code[j];
          alpha[m] = cnt > 1 ? Math.min(Math.max(busy[m] / Math.max(d, 1e-9), min_alpha), 1) : 0.9;
          m++;
        }
      }
      src.data = {y: y.slice(0, m), left: left.slice(0, m), right: right.slice(0, m), dur_us: dur.slice(0, m),
                  busy_us: busy.slice(0, m), count: count.slice(0, m), name_code: name.slice(0, m),
                  type_code: type.slice(0, m), alpha: alpha.slice(0, m), row: row.slice(0, m)};
    }
  }
  const bars = col(src, 'left').length;
  const deepest = Math.max(...tree.level);
  const level = Math.max(...shown.map(i => tree.level[i]));
  const finest = shown.every(i => tree.child[i] < 0), coarse = shown.some(i => tree.px[i] > want);
  let text = 'Level ' + level + ' of ' + deepest + ': ' + bars.toLocaleString('en-US') + ' bars';
  if (coarse && finest) {
    const hidden = shown.reduce((s, i) => s + tree.hidden[i], 0);
    text += '; finest level stored: zoom further shows the same bars'
      + (hidden ? ' (' + hidden.toLocaleString('en-US')
                  + ' events stay merged; open the profile in a notebook for them)' : '');
  } else {
    text += finest ? '; finest level stored' : '; zoom in for finer levels';
  }
  note.text = text + '.';
}, delay);
"""


def tiled_timeline(fig_layout, tiles: pd.DataFrame, bars: list, tracks_df: pd.DataFrame,
                   width_px: int) -> tuple[Div, ColumnDataSource]:
    """Give the report's timeline (``fig_layout``: `timeline_figure`'s layout, drawn from the root's
    bars ``bars[0]``) its finer levels: the tiles (`lod_tiles`) in ``timeline_tiles_src`` and a script on
    the time axis that draws the ones the view needs. Returns the ``timeline_level_note`` Div that says
    which level is shown, and the store."""
    fig = fig_layout.select_one({"name": "timeline_fig"})
    src = fig.select_one({"name": "timeline_src"})
    store_data, tree = tile_store(tiles, bars, track_table(tracks_df))
    store = ColumnDataSource(store_data, name="timeline_tiles_src")
    first = level_note(tree, [0], float(fig.x_range.start), float(fig.x_range.end), width_px, len(bars[0]))
    note = Div(text=html.escape(first), name="timeline_level_note", sizing_mode="stretch_width",
               styles={"color": "var(--jp-ui-font-color2, #777)", "font-size": "12px"})
    js = CustomJS(args=dict(store=store, src=src, xr=fig.x_range, tiles=tree, note=note, width=width_px,
                            min_alpha=AGGREGATE_MIN_ALPHA, delay=DEBOUNCE_MS), code=_TILES_JS)
    fig.x_range.js_on_change("start", js)
    fig.x_range.js_on_change("end", js)
    return note, store
