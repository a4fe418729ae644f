"""What is alive at the memory peak: `alive_at_peak(prof)` finds the peak of the allocator record's
total allocated curve and lists the operator allocations alive at that moment, by allocation, by
operator and by category; `category_curves(memory)` is that curve split into its components over time.

Categories are only what the files state:
- the allocator components of ``memory_record`` (``memory`` frame): a component named ``A+B`` is the
  sum of the components ``A`` and ``B`` (torch_npu's ``PTA+GE``: the PyTorch adapter's caching allocator
  plus CANN's graph engine); the peak is taken on that sum when the record has one, else on the
  component with the highest allocated peak;
- an operator allocation (``operator_memory``) belongs to the component whose running total it records:
  its ``Allocation Total Allocated(MB)`` equals that component's allocated curve at the allocation time
  (torch_npu writes the total of the allocator that served it). An allocation whose total matches no
  part, or several, is "uncategorised";
- what the components hold beyond the operator allocations alive (memory allocated before the recording
  started, or never recorded per operator) is the "not explained by operator allocations" remainder; the
  reserved pool above the allocated peak (allocator cache and fragmentation), the process-level ``APP``
  reservation beyond it, and the CANN modules' reservations (``npu_module_mem``) at the peak are reported
  beside it, each from its file.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ..schema import ANALYSIS_FRAMES

UNCATEGORISED = "uncategorised"
# An allocation's recorded running total matches a component's curve when they differ by less than this
# (MB): both are written from the same allocator counter, so they agree to the byte.
TOTAL_MATCH_MB = 1e-4
TOP_ALIVE = 10
ONE_BYTE_MB = 1 / 2 ** 20  # a difference smaller than a byte is the two files' rounding, not a change

SOURCE_CURVE = "memory record: the component's Total Allocated / Total Reserved"
SOURCE_TOTAL = ("operator_memory 'Allocation Total Allocated(MB)' = the component's memory_record "
                "'Total Allocated(MB)' at the allocation time")
SOURCE_NONE = "operator_memory: the allocation's recorded total matches no single component's curve"


def _empty(name: str) -> pd.DataFrame:
    spec = ANALYSIS_FRAMES[name]
    return pd.DataFrame({c.name: pd.Series(dtype="object" if c.dtype == "str" else c.dtype) for c in spec.columns})


@dataclasses.dataclass
class MemoryPeak:
    """The memory peak and what is alive at it.

    ``available`` False: ``why`` says what the files lack. Otherwise ``curve`` is the ``memory`` component
    whose ``metric`` (``allocated_mb``) peaks, ``parts`` the components it is the sum of (itself when the
    record has no sum), ``peak_mb`` its maximum, first reached at ``peak_at_us`` (the timeline's clock),
    ``reserved_mb`` the curve's reserved memory then. ``alive_mb`` / ``alive_count``: the operator
    allocations alive at that moment (allocated at or before it, released after it or never);
    ``unexplained_mb`` = ``peak_mb`` - ``alive_mb``; ``cached_mb`` = ``reserved_mb`` - ``peak_mb`` (held by
    the allocators, not allocated); ``process_reserved_mb`` (``APP``, NaN without it) and
    ``outside_mb`` = it - ``reserved_mb`` (reserved by the process outside these allocators).
    Frames (`schema.ANALYSIS_FRAMES`): ``allocations`` (``memory_peak_allocations``), ``operators``
    (``memory_peak_operators``), ``categories`` (``memory_peak_categories``), ``modules``
    (``memory_peak_modules``). ``note``: what is missing though the peak is known (no operator records)."""

    available: bool
    why: str = ""
    curve: str = ""
    metric: str = "allocated_mb"
    device: str = ""
    parts: list = dataclasses.field(default_factory=list)
    peak_mb: float = math.nan
    peak_at_us: float = math.nan
    reserved_mb: float = math.nan
    alive_mb: float = math.nan
    alive_count: int = 0
    unexplained_mb: float = math.nan
    cached_mb: float = math.nan
    process_reserved_mb: float = math.nan
    outside_mb: float = math.nan
    note: str = ""
    allocations: pd.DataFrame = dataclasses.field(default_factory=lambda: _empty("memory_peak_allocations"))
    operators: pd.DataFrame = dataclasses.field(default_factory=lambda: _empty("memory_peak_operators"))
    categories: pd.DataFrame = dataclasses.field(default_factory=lambda: _empty("memory_peak_categories"))
    modules: pd.DataFrame = dataclasses.field(default_factory=lambda: _empty("memory_peak_modules"))

    @property
    def headline(self) -> str:
        """One sentence: the peak, the allocations alive at it, the largest operator, the remainder."""
        if not self.available:
            return f"memory peak: not available ({self.why})"
        out = f"peak {mb_text(self.peak_mb)} allocated ({self.curve}) at {_time(self.peak_at_us)}"
        if self.alive_count:
            top = self.operators.iloc[0]
            out += (f"; {mb_text(self.alive_mb)} in {self.alive_count:,} operator allocation"
                    f"{'s' if self.alive_count != 1 else ''} alive, largest {top['name']} {mb_text(top['size_mb'])}")
        else:
            out += f"; no operator allocation alive ({self.note})" if self.note else "; no operator allocation alive"
        return out + f"; {mb_text(self.unexplained_mb)} not explained by operator allocations"

    def to_dict(self, top: int = TOP_ALIVE) -> dict:
        """The summary JSON's ``memory.peak``: the figures, the categories and the ``top`` operators."""
        if not self.available:
            return {"available": False, "why": self.why}
        keys = ["curve", "metric", "device", "parts", "peak_mb", "peak_at_us", "reserved_mb", "alive_mb",
                "alive_count", "unexplained_mb", "cached_mb", "process_reserved_mb", "outside_mb", "note"]
        out = {"available": True, **{k: getattr(self, k) for k in keys}, "headline": self.headline}
        out["categories"] = self.categories.to_dict("records")
        out["operators"] = self.operators.head(top).to_dict("records")
        return out


def mb_text(x: float) -> str:
    """A size in MB as the peak's sentences write it ("1,187.98 MB"; "-" for NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.2f} MB"


def _signed(mb: float) -> str:
    """A change of memory, signed, in KB below 1 MB (a 1 KB change must not read as "+0.00 MB")."""
    if abs(mb) < ONE_BYTE_MB:
        return "0 KB"
    if abs(mb) < 1:
        return f"{mb * 1024:+,.1f} KB"
    return f"{mb:+,.2f} MB"


def _time(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:,.3f} s"
    return f"{us / 1e3:,.3f} ms" if abs(us) >= 1e3 else f"{us:,.1f} us"


def sum_parts(components) -> dict[str, list[str]]:
    """The components that are the sum of others, by name (``"PTA+GE"`` -> ``["PTA", "GE"]``), where
    every part is itself a component of the record."""
    names = {str(c) for c in components}
    out = {}
    for c in names:
        parts = [p.strip() for p in c.split("+")]
        if len(parts) > 1 and all(p in names for p in parts):
            out[c] = parts
    return out


def peak_curve(memory: pd.DataFrame) -> tuple[str, str, list[str]] | None:
    """(component, device, parts) of the curve the peak is read on: the sum component when the record
    has one (the largest such), else the component with the highest allocated peak; None without an
    allocated curve."""
    if memory is None or not len(memory) or "allocated_mb" not in memory or not memory["allocated_mb"].notna().any():
        return None
    peaks = memory.dropna(subset=["allocated_mb"]).groupby(["device", "component"])["allocated_mb"].max()
    sums = sum_parts(memory["component"].unique())
    candidates = peaks[[c in sums for _, c in peaks.index]] if sums else peaks
    if not len(candidates):
        candidates = peaks
    device, comp = candidates.idxmax()
    return str(comp), str(device), sums.get(comp, [str(comp)])


def _curve(memory: pd.DataFrame, device: str, comp: str) -> pd.DataFrame:
    g = memory[(memory["device"] == device) & (memory["component"] == comp)]
    return g.sort_values("time_us", kind="stable")


def _value_at(curve: pd.DataFrame, t: float, col: str) -> float:
    """The step curve's value at ``t``: its last sample at or before ``t`` (NaN before its first)."""
    times = curve["time_us"].to_numpy(float)
    i = int(np.searchsorted(times, t, side="right")) - 1
    return float(curve[col].iloc[i]) if i >= 0 else math.nan


def _categorise(om: pd.DataFrame, memory: pd.DataFrame, device: str, parts: list[str]) -> pd.Series:
    """Each allocation's component: the part whose allocated curve at the allocation time (the sample at
    or before it, or the next) equals the allocation's recorded running total; else uncategorised."""
    out = pd.Series(UNCATEGORISED, index=om.index, dtype=object)
    col = "allocation_total_allocated_mb"
    if col not in om.columns:
        return out
    total = pd.to_numeric(om[col], errors="coerce").to_numpy(float)
    t = om["alloc_us"].to_numpy(float)
    hits = np.zeros((len(om), len(parts)), dtype=bool)
    for j, part in enumerate(parts):
        c = _curve(memory, device, part).dropna(subset=["allocated_mb"])
        if not len(c):
            continue
        times, vals = c["time_us"].to_numpy(float), c["allocated_mb"].to_numpy(float)
        i = np.searchsorted(times, t, side="right") - 1
        before = np.where(i >= 0, vals[np.clip(i, 0, len(vals) - 1)], np.nan)
        after = vals[np.clip(i + 1, 0, len(vals) - 1)]
        hits[:, j] = (np.abs(before - total) < TOTAL_MATCH_MB) | (np.abs(after - total) < TOTAL_MATCH_MB)
    one = hits.sum(axis=1) == 1
    out[one] = np.asarray(parts, dtype=object)[hits[one].argmax(axis=1)]
    return out


def alive_at_peak(prof, top: int | None = None) -> MemoryPeak:
    """The peak of ``prof``'s memory record and what is alive at it (see `MemoryPeak`). ``prof``: a
    `Profile`, or a dict with the ``memory``, ``operator_memory`` (and optionally ``npu_module_mem``)
    frames. ``top`` limits the ``operators`` frame (default: all)."""
    frames = prof if isinstance(prof, dict) else {
        "memory": prof.memory, "operator_memory": prof.operator_memory, "npu_module_mem": prof.npu_module_mem}
    memory, om = frames.get("memory"), frames.get("operator_memory")
    if memory is None or not len(memory):
        return MemoryPeak(False, why="no memory record (memory_record.csv, FRAMEWORK/cpu_ms_memory_record_*.txt "
                                     "or a database's MEMORY_RECORD)")
    chosen = peak_curve(memory)
    if chosen is None:
        return MemoryPeak(False, why="the memory record has no allocated-memory curve (only reserved memory)")
    comp, device, parts = chosen
    curve = _curve(memory, device, comp).dropna(subset=["allocated_mb"])
    at = int(np.argmax(curve["allocated_mb"].to_numpy(float)))   # the first sample of the maximum
    peak_mb, t = float(curve["allocated_mb"].iloc[at]), float(curve["time_us"].iloc[at])
    reserved = float(curve["reserved_mb"].iloc[at]) if pd.notna(curve["reserved_mb"].iloc[at]) else math.nan
    res = MemoryPeak(True, curve=comp, device=device, parts=list(parts), peak_mb=peak_mb, peak_at_us=t,
                     reserved_mb=reserved, cached_mb=reserved - peak_mb)
    app = memory[(memory["device"] == device) & (memory["component"] == "APP")].sort_values("time_us", kind="stable")
    if len(app) and app["reserved_mb"].notna().any():
        res.process_reserved_mb = _value_at(app.dropna(subset=["reserved_mb"]), t, "reserved_mb")
        res.outside_mb = res.process_reserved_mb - reserved

    # operator allocations alive at the peak: allocated at or before it, released after it (or never)
    if om is None or not len(om):
        res.note = "no operator allocation records (operator_memory.csv or OP_MEMORY)"
        alive = om.iloc[0:0] if om is not None else None
    else:
        release = om["release_us"].astype(float)
        mask = (om["alloc_us"].astype(float) <= t) & (release.isna() | (release > t))
        alive = om[mask]
    if alive is not None and len(alive):
        cats = _categorise(alive, memory, device, parts)
        allocs = pd.DataFrame({
            "name": alive["name"].astype(str), "size_mb": alive["size_kb"].astype(float) / 1024.0,
            "alloc_us": alive["alloc_us"].astype(float), "release_us": alive["release_us"].astype(float),
            "category": cats.astype(str),
            "category_source": [SOURCE_NONE if c == UNCATEGORISED else SOURCE_TOTAL for c in cats]})
        res.allocations = allocs.sort_values("size_mb", ascending=False, kind="stable", ignore_index=True)
    allocs = res.allocations
    res.alive_mb = float(allocs["size_mb"].sum()) if len(allocs) else 0.0
    res.alive_count = int(len(allocs))
    res.unexplained_mb = peak_mb - res.alive_mb

    if len(allocs):
        ops = allocs.groupby("name", sort=False).agg(
            allocations=("size_mb", "size"), size_mb=("size_mb", "sum"),
            category=("category", lambda s: s.iloc[0] if s.nunique() == 1 else "mixed"))
        ops = ops.reset_index()
        ops["share"] = ops["size_mb"] / peak_mb if peak_mb else math.nan
        ops = ops.sort_values(["size_mb", "name"], ascending=[False, True], kind="stable", ignore_index=True)
        res.operators = ops[ANALYSIS_FRAMES["memory_peak_operators"].column_names]
        if top is not None:
            res.operators = res.operators.head(top)

    rows = []
    for part in parts:
        c = _curve(memory, device, part)
        a = _value_at(c.dropna(subset=["allocated_mb"]), t, "allocated_mb") if c["allocated_mb"].notna().any() else math.nan
        # a part with no sample yet holds nothing of the sum (the sum curve equals the other parts then)
        a = 0.0 if math.isnan(a) and len(parts) > 1 else a
        r = _value_at(c.dropna(subset=["reserved_mb"]), t, "reserved_mb") if c["reserved_mb"].notna().any() else math.nan
        mine = allocs[allocs["category"] == part] if len(allocs) else allocs
        alive_mb = float(mine["size_mb"].sum()) if len(mine) else 0.0
        rows.append({"category": part, "allocated_mb": a, "reserved_mb": r, "alive_mb": alive_mb,
                     "allocations": int(len(mine)), "unexplained_mb": a - alive_mb, "source": SOURCE_CURVE})
    other = allocs[allocs["category"] == UNCATEGORISED] if len(allocs) else allocs
    if len(other):
        rows.append({"category": UNCATEGORISED, "allocated_mb": math.nan, "reserved_mb": math.nan,
                     "alive_mb": float(other["size_mb"].sum()), "allocations": int(len(other)),
                     "unexplained_mb": math.nan, "source": SOURCE_NONE})
    res.categories = pd.DataFrame(rows, columns=ANALYSIS_FRAMES["memory_peak_categories"].column_names)

    mm = frames.get("npu_module_mem")
    if mm is not None and len(mm):
        # each module's last sample at or before the peak; the modules reserving nothing left out
        before = mm[(mm["device"] == device) & (mm["time_us"] <= t)].dropna(subset=["reserved_mb"])
        last = before.sort_values("time_us", kind="stable").groupby("component", sort=False)["reserved_mb"].last()
        last = last[last > 0]
        mods = pd.DataFrame({"module": last.index.astype(str), "reserved_mb": last.to_numpy(float)})
        res.modules = mods.sort_values("reserved_mb", ascending=False, kind="stable", ignore_index=True)
    return res


def category_curves(memory: pd.DataFrame) -> pd.DataFrame:
    """The peak curve split into its parts over time (frame ``memory_category_curves``): at every sample
    time of any part, each part's allocated memory (its last sample; 0 before its first, where the sum
    curve holds only the other parts). Empty without an allocated curve."""
    chosen = peak_curve(memory)
    if chosen is None:
        return _empty("memory_category_curves")
    comp, device, parts = chosen
    curves = {p: _curve(memory, device, p).dropna(subset=["allocated_mb"]) for p in parts}
    times = np.unique(np.concatenate([c["time_us"].to_numpy(float) for c in curves.values()]))
    out = []
    for p, c in curves.items():
        ct, cv = c["time_us"].to_numpy(float), c["allocated_mb"].to_numpy(float)
        i = np.searchsorted(ct, times, side="right") - 1
        vals = np.where(i >= 0, cv[np.clip(i, 0, max(len(cv) - 1, 0))], 0.0) if len(cv) else np.zeros(len(times))
        out.append(pd.DataFrame({"time_us": times, "category": p, "allocated_mb": vals, "curve": comp}))
    return pd.concat(out, ignore_index=True)[ANALYSIS_FRAMES["memory_category_curves"].column_names]


@dataclasses.dataclass
class MemoryDiff:
    """The memory difference between runs ``a`` and ``b`` (deltas b - a): ``a`` and ``b`` (their
    `MemoryPeak`), ``available``/``why``, ``peak_delta_mb``, ``alive_delta_mb``, ``unexplained_delta_mb``
    (= peak - alive: the part of the difference no operator allocation explains), and ``operators`` (frame
    ``memory_peak_diff``: per operator, its size alive at each peak and the change, largest |change|
    first)."""

    a: MemoryPeak
    b: MemoryPeak
    available: bool
    why: str = ""
    peak_delta_mb: float = math.nan
    alive_delta_mb: float = math.nan
    unexplained_delta_mb: float = math.nan
    operators: pd.DataFrame = dataclasses.field(default_factory=lambda: _empty("memory_peak_diff"))

    @property
    def sentence(self) -> str:
        """The verdict's line: the peaks, the operators that changed most, the unexplained remainder."""
        if not self.available:
            return f"memory peak: not comparable ({self.why})"
        if abs(self.peak_delta_mb) < ONE_BYTE_MB:
            out = f"memory peak unchanged at {mb_text(self.a.peak_mb)} ({self.a.curve} allocated)"
        else:
            out = (f"memory peak {mb_text(self.a.peak_mb)} -> {mb_text(self.b.peak_mb)} ({_signed(self.peak_delta_mb)}, "
                   f"{self.a.curve} allocated)")
        moved = self.operators[self.operators["delta_mb"].abs() >= ONE_BYTE_MB].head(3)
        if len(moved):
            out += ": " + ", ".join(f"{r['name']} {_signed(r['delta_mb'])}" for _, r in moved.iterrows()) + \
                " alive at the peak"
        return out + f"; {_signed(self.unexplained_delta_mb)} not explained by operator allocations"

    def to_dict(self, top: int = TOP_ALIVE) -> dict:
        if not self.available:
            return {"available": False, "why": self.why}
        return {"available": True, "a_peak_mb": self.a.peak_mb, "b_peak_mb": self.b.peak_mb,
                "peak_delta_mb": self.peak_delta_mb, "alive_delta_mb": self.alive_delta_mb,
                "unexplained_delta_mb": self.unexplained_delta_mb, "sentence": self.sentence,
                "operators": self.operators.head(top).to_dict("records")}


def memory_diff(a, b) -> MemoryDiff:
    """The difference of two runs' memory peaks and of what is alive at them, by operator (see
    `MemoryDiff`). ``a``, ``b``: Profiles, frame dicts or their `MemoryPeak`."""
    pa = a if isinstance(a, MemoryPeak) else alive_at_peak(a)
    pb = b if isinstance(b, MemoryPeak) else alive_at_peak(b)
    if not (pa.available and pb.available):
        why = "; ".join(f"{k}: {p.why}" for k, p in (("a", pa), ("b", pb)) if not p.available)
        return MemoryDiff(pa, pb, False, why=why)
    if pa.curve != pb.curve:
        return MemoryDiff(pa, pb, False, why=f"the peaks are of different curves ({pa.curve} vs {pb.curve})")
    cols = ANALYSIS_FRAMES["memory_peak_diff"].column_names

    def by_op(p):
        o = p.allocations.groupby("name")["size_mb"].agg(["sum", "size"]) if len(p.allocations) else \
            pd.DataFrame(columns=["sum", "size"])
        return o.rename(columns={"sum": "mb", "size": "n"})
    m = by_op(pa).merge(by_op(pb), how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    ops = pd.DataFrame({"name": m.index.astype(str),
                        "a_alive_mb": m["mb_a"].astype(float).fillna(0.0).to_numpy(),
                        "b_alive_mb": m["mb_b"].astype(float).fillna(0.0).to_numpy(),
                        "a_allocations": m["n_a"].fillna(0).astype("int64").to_numpy(),
                        "b_allocations": m["n_b"].fillna(0).astype("int64").to_numpy()})
    ops["delta_mb"] = ops["b_alive_mb"] - ops["a_alive_mb"]
    ops = ops.sort_values(["delta_mb", "name"], key=lambda s: -s.abs() if s.name == "delta_mb" else s,
                          kind="stable", ignore_index=True)[cols]
    return MemoryDiff(pa, pb, True, peak_delta_mb=pb.peak_mb - pa.peak_mb, alive_delta_mb=pb.alive_mb - pa.alive_mb,
                      unexplained_delta_mb=pb.unexplained_mb - pa.unexplained_mb, operators=ops)


__all__ = ["alive_at_peak", "category_curves", "memory_diff", "MemoryPeak", "MemoryDiff", "peak_curve",
           "sum_parts", "mb_text", "UNCATEGORISED"]
