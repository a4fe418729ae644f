"""Build hook: compiles the trace reader's C scanner (nbprofiler/io/trace/_scan.c) into a shared library
beside it, loaded with ctypes by `nbprofiler.io.trace.scan`. It uses no Python API, so one build serves
every Python of the platform. Where no C compiler works, the package is built without it and reads
traces with duckdb alone (a warning says so)."""
from __future__ import annotations

import os
import shlex
import subprocess
import sysconfig
import warnings
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("nbprofiler/io/trace/_scan.c")
LIBRARY = SOURCE.with_suffix(".so")


def build_scanner(root: Path) -> Path | None:
    """Compile the scanner under ``root``; its path, or None where it could not be built."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    src, out = root / SOURCE, root / LIBRARY
    cmd = [*cc, "-O3", "-std=c99", "-fPIC", "-shared", "-o", str(out), str(src)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        warnings.warn(f"nbprofiler: the trace scanner was not compiled ({' '.join(cmd)}: {detail.strip()[:500]}); "
                      "traces are read by duckdb alone", stacklevel=1)
        return None
    return out


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        built = build_scanner(Path(self.root))
        if built is not None and version != "editable":
            build_data["artifacts"].append(str(LIBRARY))
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
