"""Build hook: compiles the package's C kernels, each into a shared library beside its source, loaded with
ctypes (`nbprofiler._clib`): the trace reader's scanner (nbprofiler/io/trace/_scan.c, used by
`nbprofiler.io.trace.scan`) and the host-dispatch analysis's kernels (nbprofiler/analysis/_dispatch.c, used by
`nbprofiler.analysis.dispatch`). They use no Python API, so one build serves every Python of the platform.
Where no C compiler works, the package is built without them and does the same work with duckdb and numpy
(a warning says so)."""
from __future__ import annotations

import os
import shlex
import subprocess
import sysconfig
import warnings
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Each source, and what the package does without its library.
SOURCES = {Path("nbprofiler/io/trace/_scan.c"): "traces are read by duckdb alone",
           Path("nbprofiler/analysis/_dispatch.c"): "the host-dispatch analysis works with numpy"}


def build_library(root: Path, source: Path) -> Path | None:
    """Compile ``source`` (relative to ``root``) beside itself; the library's path, or None where it could
    not be built."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    src, out = root / source, root / source.with_suffix(".so")
    cmd = [*cc, "-O3", "-std=c99", "-fPIC", "-shared", "-o", str(out), str(src)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        warnings.warn(f"nbprofiler: {source.name} was not compiled ({' '.join(cmd)}: {detail.strip()[:500]}); "
                      f"{SOURCES[source]}", stacklevel=1)
        return None
    return out


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        for source in SOURCES:
            built = build_library(Path(self.root), source)
            if built is not None and version != "editable":
                build_data["artifacts"].append(str(source.with_suffix(".so")))
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
