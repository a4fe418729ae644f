"""How a run is named where two or more are compared (its folder's name and device), and how a duration is
written in a sentence."""
from __future__ import annotations

from pathlib import Path


def run_label(prof) -> str:
    """"<folder> (device <id>)" of a Profile: the name `compare`, `compare_many` and `timeline_diff` give
    a run unless labels are passed."""
    return f"{Path(prof.source).name or prof.source} (device {prof.device})"


def fmt_ms(ms: float) -> str:
    """A duration in ms as a sentence prints it: 0.279, 8.83, 81.5, 1,484."""
    ms = float(ms)
    if abs(ms) >= 100:
        return f"{ms:,.0f}"
    if abs(ms) >= 10:
        return f"{ms:.1f}"
    return f"{ms:.3g}"


__all__ = ["run_label", "fmt_ms"]
