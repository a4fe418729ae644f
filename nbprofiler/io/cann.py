"""Raw CANN ``PROF_*/device_N/timeline/step_trace_*.json`` (msprof export, FORMATS.md 4.14) -> the
legacy step-trace stages.

The step_trace export is a Chrome-trace array per iteration, but every file of a device holds all
iterations and they are identical (quirk 17): one file is read, and only if it fails are the others
tried. Per iteration ``i`` the events used are ``Iteration i`` (args ``FP Start``, ``BP End``,
``Iteration End``, us on the host monotonic-raw clock), ``Reduce_i_k`` and the ``Data_aug Bound`` flow
whose ``t`` end carries ``Data_aug Bound(us)`` = FP Start(i) - Iteration End(i-1) (0 for iteration 1).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ..errors import MalformedFileError, MissingColumnError, ProfilerDataError
from ._util import read_json, warn_partial
from .discover import RunFiles

ITERATION = re.compile(r"Iteration (\d+)")
REDUCE = re.compile(r"Reduce_(\d+)_(\d+)")
DATA_AUG = re.compile(r"Data_aug Bound (\d+)")


def _events(run: RunFiles) -> tuple[Path, list]:
    """The events of the first readable step_trace file (all are identical); a broken file that had to
    be skipped is reported with `warn_partial`."""
    paths = run.all("cann_step_trace")
    first_err: ProfilerDataError | None = None
    for path in paths:
        try:
            obj = read_json(path)
            if not isinstance(obj, list):
                raise MalformedFileError(path, f"expected a JSON array of trace events, found {type(obj).__name__}")
            if first_err is not None:
                warn_partial(first_err)
            return path, obj
        except ProfilerDataError as err:
            first_err = first_err or err
    raise first_err  # type: ignore[misc]  # only reached when every file failed


def _num(path: Path, args: dict, key: str, where: str) -> float:
    if key not in args:
        raise MissingColumnError(path, f"missing key {key!r}", field=f"{where}.args.{key}")
    v = args[key]
    try:
        return float(v)
    except (TypeError, ValueError):
        raise MalformedFileError(path, f"not a number: {v!r}", field=f"{where}.args.{key}") from None


def _parse(run: RunFiles):
    path, events = _events(run)
    iters: dict[int, dict] = {}
    reduces: list[dict] = []
    bounds: dict[int, float] = {}
    for n, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise MalformedFileError(path, f"event {n} is not an object", field=f"[{n}]")
        name = str(ev.get("name", ""))
        args = ev.get("args") or {}
        if ev.get("ph") == "X" and (m := ITERATION.fullmatch(name)):
            where = f"[{n}] {name}"
            iters[int(m.group(1))] = {k: _num(path, args, k, where) for k in ("FP Start", "BP End", "Iteration End")}
        elif ev.get("ph") == "X" and (m := REDUCE.fullmatch(name)):
            where = f"[{n}] {name}"
            k = m.group(2)
            reduces.append({"step": int(m.group(1)), "name": name,
                            "start": _num(path, args, f"Reduce Start {k}", where),
                            "end": _num(path, args, f"Reduce End {k}", where)})
        elif ev.get("ph") == "t" and (m := DATA_AUG.fullmatch(name)) and "Data_aug Bound(us)" in args:
            bounds[int(m.group(1))] = _num(path, args, "Data_aug Bound(us)", f"[{n}] {name}")
    if not iters:
        raise MissingColumnError(path, "no 'Iteration <n>' events: not a CANN step_trace export",
                                 field="Iteration")
    return path, iters, reduces, bounds


def step_trace(run: RunFiles) -> pd.DataFrame:
    """One row per iteration with the legacy stage columns (see the schema's `step_trace`), in ms:
    ``iteration_interval_ms`` = FP Start - previous Iteration End (iteration 1: its Data_aug Bound,
    else 0), ``fp_and_bp_ms`` = BP End - FP Start, ``tail_ms`` = Iteration End - BP End, ``total_ms`` =
    their sum; ``start_ms`` (previous Iteration End), ``fp_start_ms``, ``bp_end_ms``, ``end_ms`` on the
    device's monotonic-raw clock in ms. Rounded to 5 decimals (the file's 0.01 us resolution)."""
    path, iters, _, bounds = _parse(run)
    rows = []
    prev_end = None
    for step in sorted(iters):
        it = iters[step]
        fp, bp, end = it["FP Start"], it["BP End"], it["Iteration End"]
        if prev_end is not None:
            start = prev_end
        else:
            start = fp - bounds.get(step, 0.0)
        rows.append({"step": step, "start_ms": start / 1e3, "fp_start_ms": fp / 1e3, "bp_end_ms": bp / 1e3,
                     "end_ms": end / 1e3, "iteration_interval_ms": (fp - start) / 1e3,
                     "fp_and_bp_ms": (bp - fp) / 1e3, "tail_ms": (end - bp) / 1e3})
        prev_end = end
    out = pd.DataFrame(rows)
    out["total_ms"] = out["iteration_interval_ms"] + out["fp_and_bp_ms"] + out["tail_ms"]
    cols = ["step", "iteration_interval_ms", "fp_and_bp_ms", "tail_ms", "total_ms", "start_ms", "fp_start_ms",
            "bp_end_ms", "end_ms"]
    out = out[cols].round(5)
    out["step"] = out["step"].astype("int64")
    bad = out[(out["fp_and_bp_ms"] < 0) | (out["tail_ms"] < 0)]
    if len(bad):
        raise MalformedFileError(path, f"iteration {int(bad['step'].iloc[0])}: FP Start, BP End and "
                                       "Iteration End are out of order", field=f"Iteration {int(bad['step'].iloc[0])}")
    out.attrs["path"] = str(path)
    out.attrs["clock"] = "CANN monotonic-raw (ms); see prof.info['monotonic_start_ns'] to map to wall time"
    return out


def step_trace_reduce(run: RunFiles) -> pd.DataFrame:
    """``Reduce_<step>_<k>`` events: ``step``, ``stream_id`` (Int64, <NA>: CANN does not say),
    ``name``, ``start_ms`` (relative to the step's ``start_ms``), ``dur_ms``."""
    steps = step_trace(run).set_index("step")
    _, _, reduces, _ = _parse(run)
    rows = []
    for r in reduces:
        if r["step"] not in steps.index or r["end"] <= r["start"] or r["start"] <= 0:
            continue  # like MindInsight: drop events that are missing (0) or have no duration
        rows.append({"step": r["step"], "stream_id": pd.NA, "name": r["name"],
                     "start_ms": round(r["start"] / 1e3 - steps.at[r["step"], "start_ms"], 5),
                     "dur_ms": round((r["end"] - r["start"]) / 1e3, 5)})
    out = pd.DataFrame(rows, columns=["step", "stream_id", "name", "start_ms", "dur_ms"])
    return out.astype({"step": "int64", "stream_id": "Int64", "start_ms": "float64", "dur_ms": "float64"})


__all__ = ["step_trace", "step_trace_reduce"]
