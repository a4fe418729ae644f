"""The server extension's path handling against hostile layouts (issue 37, item 5), without a server: a
symlink loop, a lone surrogate, a name over 255 bytes are a `PathError` with a 4xx status and a short
message (never a RuntimeError/OSError, which the server answers with 500 and a traceback quoting the whole
path), and a loop inside a listed folder is skipped while the rest is listed. The same requests against a
real server: tests/browser/test_lab_hardening.py."""
from __future__ import annotations

import os
import shutil

import pytest

from nbprofiler.faces import lab

from .conftest import DATA

LONG = "n" * 300


@pytest.fixture()
def root(tmp_path):
    """A server root holding a real run, a two-link loop (a -> b -> a), a self loop, and a folder whose
    loop sits next to profiler files."""
    root = (tmp_path / "root").resolve()
    shutil.copytree(DATA / "minddata" / "md_fast", root / "proj" / "md_fast")
    loop = root / "proj" / "loop"
    loop.mkdir()
    os.symlink("b", loop / "a")
    os.symlink("a", loop / "b")
    os.symlink(loop, loop / "self")
    os.symlink("x", root / "proj" / "md_fast" / "x")   # a one-link loop inside the run folder itself
    return root


@pytest.mark.parametrize("api_path, status, names", [
    ("proj/loop/a", 400, "symlink loop"),
    ("proj/loop/b/deeper", 400, "symlink loop"),
    ("proj/md_fast/x", 400, "symlink loop"),
    ("\ud800", 400, "lone surrogate"),
    ("proj/\udcff", 400, "lone surrogate"),
    (LONG, 400, "over 255 bytes"),
    (f"proj/{LONG}/x", 400, "over 255 bytes"),
    ("proj/" + "é" * 200, 400, "over 255 bytes"),   # 200 characters, 400 bytes
    ("a/" * 3000, 413, "over 4,096 characters"),
    ("proj/\x00", 400, "NUL"),
])
def test_hostile_paths_are_client_errors_with_a_short_message(root, api_path, status, names):
    for call in (lambda: lab.resolve_api_path(root, api_path), lambda: lab.suggested_report_dir(root, api_path),
                 lambda: lab.create_report(root, api_path),
                 lambda: lab.create_report(root, "proj", dir_api_path=api_path),
                 lambda: lab._runs_folder(root, api_path)):
        with pytest.raises(lab.PathError) as err:
            call()
        assert err.value.status == status and names in str(err.value)
        message = str(err.value)
        assert len(message) < 300, message          # bounded: never the whole hostile path
        assert LONG not in message and "\n" not in message and message.isprintable()
        message.encode("utf-8")                      # no lone surrogate in the answer either


def test_a_loop_in_a_listed_folder_is_skipped_not_fatal(root):
    runs = lab.list_runs(root, lab.resolve_api_path(root, "proj"))
    assert [r["name"] for r in runs] == ["md_fast"]
    assert lab.list_runs(root, lab.resolve_api_path(root, "proj/loop")) == []
    # is_profiler_dir looks past the loop: md_fast is still profiler output, so no report goes into it
    assert lab.is_profiler_dir(root / "proj" / "md_fast")
    assert lab.suggested_report_dir(root, "proj/md_fast") == "proj"
    nb_path, _, _ = lab.create_report(root, "proj/md_fast")
    assert nb_path == "proj/md_fast-nbprofiler.ipynb"


def test_a_run_linked_from_outside_the_root_is_not_listed(root, tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(DATA / "minddata" / "md_fast", outside / "elsewhere")
    os.symlink(outside / "elsewhere", root / "proj" / "linked")
    assert [r["name"] for r in lab.list_runs(root, root / "proj")] == ["md_fast"]


def test_a_long_but_legal_name_gets_a_report_name_that_fits(root):
    name = "r" * 250
    shutil.copytree(DATA / "minddata" / "md_fast", root / "proj" / name)
    nb_path, _, rel = lab.create_report(root, f"proj/{name}")
    assert rel == name and len(nb_path.rpartition("/")[2].encode()) <= 255
    assert (root / nb_path).exists()


def test_shown_and_the_log_uri_are_bounded_and_escaped():
    assert lab.shown("proj/md_fast") == "'proj/md_fast'"
    long = lab.shown("a\n" * 500)
    assert len(long) < 200 and "\n" not in long and "more characters" in long
    assert lab.shown("\ud800") == "'\\ud800'"
    uri = lab._bounded_uri("/nbprofiler/runs?path=" + "%41" * 1000)
    assert len(uri) < 220 and uri.endswith("more characters)")
    assert lab._bounded_uri("/nbprofiler/runs?path=a\x1b[2J") == "/nbprofiler/runs?path=a\\x1b[2J"
    assert lab._bounded_uri("/nbprofiler/runs?path=proj") == "/nbprofiler/runs?path=proj"
