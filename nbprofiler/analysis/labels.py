"""How a run is named where two or more are compared: its folder's name and device."""
from __future__ import annotations

from pathlib import Path


def run_label(prof) -> str:
    """"<folder> (device <id>)" of a Profile: the name `compare`, `compare_many` and `timeline_diff` give
    a run unless labels are passed."""
    return f"{Path(prof.source).name or prof.source} (device {prof.device})"


__all__ = ["run_label"]
