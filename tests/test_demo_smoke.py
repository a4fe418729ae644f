"""`scripts/demo.sh --check` in the test venv: the server answers and the quickstart notebook executes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_demo_check_starts_server_and_runs_quickstart(tmp_path):
    env = dict(os.environ, NBPROFILER_VENV=sys.prefix, TMPDIR=str(tmp_path))
    proc = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh"), "--check", "--no-browser", "--no-install"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "server answered /api/status" in log
    assert '"started"' in log  # the /api/status body, as the server sent it
    assert "server sees notebooks/quickstart.ipynb" in log
    assert "OK: notebooks/quickstart.ipynb executed" in log
    # JupyterLab opens without the "get notified about news?" pop-up, set in the venv, not the user's settings
    import json
    overrides = json.loads((Path(sys.prefix) / "share/jupyter/lab/settings/overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert "news pop-up off" in log
    assert not list(tmp_path.glob("nbprofiler-demo.*")), "the check must remove its temp dir"


def test_demo_rejects_unknown_option():
    proc = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh"), "--bogus"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2
    assert "unknown option --bogus" in proc.stderr


def test_samples_need_no_import_of_their_own():
    """`nbprofiler.samples` (as the README and the quickstart use it) works after `import nbprofiler`."""
    code = "import nbprofiler; print(nbprofiler.samples.path('md_fast').name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "md_fast"


def test_samples_are_bundled_and_named():
    import nbprofiler.samples as samples
    assert samples.names() == ["lenet_pynative", "md_bottleneck_map", "md_fast"]
    ms = samples.path("lenet_pynative")
    assert len(list(ms.glob("*_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json"))) == 1
    for name in ("md_bottleneck_map", "md_fast"):
        assert (samples.path(name) / "pipeline_profiling_0.json").is_file()
    # MindSpore's own logs/ folders are not part of the bundle
    assert not [p for p in samples.HERE.rglob("logs") if p.is_dir()]
    with pytest.raises(ValueError, match="md_fast"):
        samples.path("nope")


def test_bundled_samples_match_shared_data():
    """The bundle is a byte-for-byte copy of the shared recordings (minus logs/)."""
    import nbprofiler.samples as samples
    shared = REPO.parent / "shared" / "data"
    pairs = [(samples.path("lenet_pynative"), shared / "mindspore2" / "lenet_pynative"),
             (samples.path("md_bottleneck_map"), shared / "minddata" / "md_bottleneck_map"),
             (samples.path("md_fast"), shared / "minddata" / "md_fast")]
    for ours, theirs in pairs:
        files = sorted(p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file() and "logs" not in p.parts)
        assert files == sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file()
                               and p.suffix != ".py" and "__pycache__" not in p.parts)
        for rel in files:
            assert (ours / rel).read_bytes() == (theirs / rel).read_bytes(), rel
