"""A script (or an nbconvert-executed notebook) that ends right after a load still leaves its cache entry:
the background writer runs while the interpreter shuts down."""
from __future__ import annotations

import os
import subprocess
import sys

from .conftest import DATA, REPO

SCRIPT = """
import sys
import nbprofiler
from nbprofiler.io import cache
cache.MIN_BYTES = 0     # the sample's trace is small: cache it anyway
nbprofiler.load(sys.argv[1]).timeline
"""


def test_a_script_that_exits_after_a_load_leaves_its_cache_entry(tmp_path):
    for i in range(3):  # the writer lost the race in 2 of 3 runs when it needed an executor at shutdown
        root = tmp_path / f"cache{i}"
        env = dict(os.environ, NBPROFILER_CACHE_DIR=str(root))
        run = subprocess.run([sys.executable, "-c", SCRIPT, str(DATA / "mindspore2/lenet_pynative")],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        assert len(list(root.rglob("meta.json"))) == 1, (i, run.stderr[-2000:])
