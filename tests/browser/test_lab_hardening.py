"""The server extension against hostile input, on a real JupyterLab server: a planted dangling symlink is
never written through, concurrent report requests each get their own notebook, bad bodies get 400/413
(never 500), a symlink loop under the root does not break the runs listing, and a loop, a lone surrogate
or an over-long name as the path of any endpoint is a 4xx with a short JSON message and a bounded log
line (issue 37, item 5; the same without a server: tests/test_lab_paths.py)."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import REPO

DATA = (REPO.parent / "shared" / "data").resolve()


def _post(lab, body: bytes, path: str = "/nbprofiler/report"):
    req = urllib.request.Request(lab.base + path, data=body, method="POST",
                                 headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


@pytest.fixture(scope="module")
def hostile(lab, tmp_path_factory):
    """(root under the server root, a folder outside it) with a planted link and symlink loops."""
    import shutil
    root = lab.root / "hostile"
    outside = tmp_path_factory.mktemp("outside")
    shutil.copytree(DATA / "minddata" / "md_fast", root / "md_fast")
    # a planted link named like the report nbprofiler would write, pointing outside the root
    os.symlink(outside / "x.ipynb", root / "md_fast-nbprofiler.ipynb")
    os.mkdir(root / "loop")
    os.symlink(root / "loop", root / "loop" / "self")
    os.symlink("b", root / "loop" / "a")
    os.symlink("a", root / "loop" / "b")
    return root, outside


def test_a_dangling_symlink_is_never_written_through(lab, hostile):
    hostile, outside = hostile
    status, answer = _post(lab, json.dumps({"path": "hostile/md_fast"}).encode())
    assert status == 201, answer
    assert answer["path"] == "hostile/md_fast-nbprofiler-2.ipynb"
    assert not list(outside.iterdir()), "the server wrote through the link"
    assert os.path.islink(hostile / "md_fast-nbprofiler.ipynb")
    assert json.loads((hostile / "md_fast-nbprofiler-2.ipynb").read_text())["cells"]


def test_concurrent_requests_get_distinct_notebooks(lab, hostile):
    hostile, _ = hostile
    body = json.dumps({"path": "hostile/md_fast"}).encode()
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: _post(lab, body), range(12)))
    assert all(status == 201 for status, _ in answers), answers
    paths = [a["path"] for _, a in answers]
    assert len(set(paths)) == 12
    for p in paths:  # each one a complete notebook, none overwritten by another request
        assert json.loads((lab.root / p).read_text())["cells"]


@pytest.mark.parametrize("body, status", [(b"[]", 400), (b'"x"', 400), (b"123", 400), (b"null", 400),
                                          (b"[" * 100_000 + b"]" * 100_000, 413),
                                          (b"[" * 20_000 + b"]" * 20_000, 400),
                                          (json.dumps({"path": "a" * 10_000}).encode(), 413),
                                          (b"{not json", 400)])
def test_bad_bodies_get_a_client_error(lab, body, status):
    got, text = _post(lab, body)
    assert got == status, text


def test_a_symlink_loop_under_the_root_does_not_break_the_listing(lab, hostile):
    hostile, _ = hostile
    answer = lab.api("GET", "/nbprofiler/runs?path=hostile")
    assert [r["name"] for r in answer["runs"]] == ["md_fast"]
    assert lab.api("GET", "/nbprofiler/report-dir?path=hostile/md_fast")["dir"] is not None


def _get(lab, path: str):
    req = urllib.request.Request(lab.base + path, headers={"Authorization": f"token {lab.token}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


LONG = "L" * 300


@pytest.mark.parametrize("api_path, names", [("hostile/loop/a", "symlink loop"),
                                             ("hostile/loop/b/deeper", "symlink loop"),
                                             (f"hostile/{LONG}", "over 255 bytes"),
                                             (f"hostile/{LONG}/x", "over 255 bytes"),
                                             ("hostile/\ud800", "lone surrogate")])
def test_hostile_paths_get_a_short_4xx_on_every_endpoint(lab, hostile, api_path, names):
    log_before = lab.log.read_text(errors="replace")
    quoted = urllib.parse.quote(api_path, errors="surrogatepass")
    answers = [_get(lab, f"/nbprofiler/runs?path={quoted}"), _get(lab, f"/nbprofiler/report-dir?path={quoted}")]
    body = json.dumps({"path": api_path}).encode()          # json escapes the lone surrogate as \ud800
    answers.append(_post(lab, body))
    answers.append(_post(lab, json.dumps({"path": "hostile/md_fast", "dir": api_path}).encode()))
    for status, text in answers:
        assert 400 <= status < 500, (status, text)
        message = json.loads(text)["message"]
        # a GET query holding an encoded surrogate is refused by tornado itself, quoting 40 bytes of it
        assert names in message or (names == "lone surrogate" and "Invalid unicode" in message), message
        assert len(message) < 300 and LONG not in message, message
        assert "traceback" not in json.loads(text) or not json.loads(text)["traceback"]
    log = lab.log.read_text(errors="replace")[len(log_before):]
    assert "Traceback" not in log and "Uncaught exception" not in log, log
    assert LONG not in log, log                               # bounded: never the whole hostile path
    assert all(len(line) < 1000 for line in log.splitlines()), log
    # the rest still works
    assert [r["name"] for r in lab.api("GET", "/nbprofiler/runs?path=hostile")["runs"]] == ["md_fast"]
