"""Browser-test fixtures: an isolated JupyterLab server and a headless Chromium page (STACK_NOTES.md 2).

``lab`` (session): a JupyterLab 4 server on a free loopback port, with its own config/runtime/settings/
workspace/IPython directories under a per-session temp dir, a fixed token, the news toast and update check
off, ``windowingMode: none`` (off-screen outputs really render) and ``BOKEH_RESOURCES=inline``. Write the
notebooks under test into ``lab.root``; open them at ``lab.url("name.ipynb")``.

``page`` (function): a Playwright page in a fresh browser context (1400x1000) on /usr/bin/chromium. A
network guard records every request that leaves the machine and fails the test if there was any;
console errors and page errors are collected on ``page.console_errors`` / ``page.page_errors``.

``browser``: the session's Chromium (for tests that open ``file://`` reports in their own context).

Every test here is marked ``browser`` automatically. Helpers: ``from helpers import ...`` (helpers.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Browser tests import their helpers as `from helpers import ...` (tests/ is not a package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
CHROMIUM = os.environ.get("NBPROFILER_CHROMIUM", "/usr/bin/chromium")
TOKEN = "nbprofiler-test-token"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Requests that stay on this machine; anything else is a leak (CDN, news feed, PyPI, fonts).
LOCAL_PREFIXES = ("http://127.0.0.1", "data:", "blob:", "about:", "file:")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.browser)
            # under pytest-xdist (`--dist loadgroup`) one worker runs them all: one JupyterLab and one
            # Chromium per run, while the other workers take the rest of the suite
            item.add_marker(pytest.mark.xdist_group("browser"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab server: ``root`` (Path, its root dir), ``port``, ``token``, ``base``
    (``http://127.0.0.1:PORT``), ``runtime_dir`` (kernel connection files), ``log`` (server log Path)."""

    root: Path
    port: int
    token: str
    runtime_dir: Path
    log: Path
    proc: subprocess.Popen = field(repr=False)
    app: str = "lab"   # "lab" (JupyterLab) or "notebook" (Jupyter Notebook 7, same server, its own pages)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "") -> str:
        """Browser URL of a notebook/file under ``root`` (``""`` = the Lab start page)."""
        if self.app == "notebook":
            tail = f"/notebooks/{path}" if path else "/tree"
        else:
            tail = f"/lab/tree/{path}" if path else "/lab"
        return f"{self.base}{tail}?token={self.token}"

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 10):
        """Call the server's REST API (``path`` like ``/api/status``); returns the decoded JSON or None."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "<no server log>"

    def kernel_stacks(self, settle: float = 5) -> str:
        """The Python stacks of every process under the server (its kernels, and what they forked), each
        dumped by the process itself on SIGUSR1 (`_STACKS_ON_SIGNAL`): what a hung cell is waiting for. Only
        kernels and their forks (their command line names ipykernel) have that handler; others are left alone."""
        import psutil
        stacks = self.log.with_name("stacks.txt")
        try:
            procs = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return "<the server is gone>"
        for proc in procs:
            try:
                if not any("ipykernel" in part for part in proc.cmdline()):
                    continue
                header = f"\n==== pid {proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:200]}\n"
                with open(stacks, "a") as fh:
                    fh.write(header)
                size = stacks.stat().st_size
                proc.send_signal(signal.SIGUSR1)
            except (psutil.Error, OSError):
                continue
            deadline = time.monotonic() + settle   # the dump is the process's own: poll for it, bounded
            while stacks.stat().st_size == size and time.monotonic() < deadline:
                time.sleep(0.05)
        if not stacks.exists():
            return "<no process under the server>"
        text = stacks.read_text(errors="replace")
        stacks.write_text("")   # the next failure of this session reports its own (the kernels append)
        return text

    def start_kernel(self, timeout: float = 60) -> str:
        """Start a python3 kernel through the REST API and wait until it answers ``kernel_info``.

        Polling ``GET /api/kernels/<id>`` never works here: the server reports "starting" until some
        client talks to the kernel (STACK_NOTES 2.1), so we connect with a blocking client instead. The
        kernel's answer is what counts, within ``timeout``: without heartbeats, since on a busy machine a
        kernel still starting up misses one and the client then calls it dead.
        """
        from jupyter_client import BlockingKernelClient
        kid = self.api("POST", "/api/kernels", {"name": "python3"})["id"]
        conn = self.runtime_dir / f"kernel-{kid}.json"
        deadline = time.monotonic() + timeout
        while not conn.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no connection file {conn}")
            time.sleep(0.1)
        client = BlockingKernelClient(connection_file=str(conn))
        client.load_connection_file()
        client.start_channels(hb=False)
        try:
            client.wait_for_ready(timeout=timeout)
        finally:
            client.stop_channels()
        return kid


# An IPython startup file of the test servers' kernels: on SIGUSR1 a kernel, and any process it forked,
# appends the Python stacks of all its threads to stacks.txt beside the server log (`Lab.kernel_stacks`),
# as it does when it crashes (a kernel's own stderr goes to the notebook, which a crash never reaches).
_STACKS_ON_SIGNAL = """import faulthandler, signal
_nbp_stacks = open({path!r}, "a")
faulthandler.register(signal.SIGUSR1, file=_nbp_stacks, all_threads=True)
faulthandler.enable(file=_nbp_stacks, all_threads=True)
"""


def _write_startup(ipython_dir: Path, stacks: Path) -> None:
    startup = ipython_dir / "profile_default" / "startup" / "00-stacks-on-signal.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(_STACKS_ON_SIGNAL.format(path=str(stacks)))


def _write_settings(settings_dir: Path) -> None:
    overrides = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        # fetchNews takes the string "false", not a boolean (STACK_NOTES 2.1)
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
    }
    for rel, value in overrides.items():
        p = settings_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(value))


def start_lab(workdir: Path, timeout: float = 60, app: str = "lab") -> Lab:
    """Start an isolated JupyterLab (``app="lab"``) or Jupyter Notebook 7 (``"notebook"``) under ``workdir``
    and wait for ``/api/status``."""
    root = workdir / "root"
    dirs = {name: workdir / name for name in ("config", "settings", "workspaces", "ipython")}
    # Kernels talk over Unix sockets beside their connection files (`--KernelManager.transport=ipc`): TCP ports
    # picked free and bound later by the kernel can be taken meanwhile by another worker's server or kernel, and
    # a kernel that cannot bind never starts. A socket's path must fit in 107 bytes: the runtime directory is a
    # short one under /tmp, not one under pytest's deep temporary directory.
    dirs["runtime"] = Path(tempfile.mkdtemp(prefix="nbp-rt-", dir="/tmp" if os.path.isdir("/tmp") else None))
    for d in [root, *dirs.values()]:
        d.mkdir(parents=True, exist_ok=True)
    if app == "lab":  # Notebook 7 has no such plugins: a setting for one breaks its settings registry
        _write_settings(dirs["settings"])
    log = workdir / "jupyterlab.log"
    _write_startup(dirs["ipython"], log.with_name("stacks.txt"))
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
               JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
               JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), IPYTHONDIR=str(dirs["ipython"]),
               BOKEH_RESOURCES="inline",
               # kernels start in `root`; make the checkout importable even without an install
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    for attempt in range(_PORT_ATTEMPTS):
        # The server's own port is picked free here and bound by the server a moment later: where another
        # worker took it meanwhile, the server exits (no `port_retries`: it would move to a port this Lab does
        # not know) and is started again on another one.
        port = free_port()
        lab = Lab(root=root, port=port, token=TOKEN, runtime_dir=dirs["runtime"], log=log,
                  proc=_popen_lab(app, port, root, env, log), app=app)
        try:
            return _wait_ready(lab, timeout)
        except _PortTaken:
            if attempt == _PORT_ATTEMPTS - 1:
                raise RuntimeError(f"JupyterLab found each port taken:\n{lab.log_tail()}") from None


_PORT_ATTEMPTS = 3


class _PortTaken(Exception):
    pass


def _popen_lab(app: str, port: int, root: Path, env: dict, log: Path) -> subprocess.Popen:
    common = ["--no-browser", "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
              f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}", "--KernelManager.transport=ipc"]
    if app == "notebook":
        cmd = [sys.executable, "-m", "notebook", *common, "--JupyterNotebookApp.expose_app_in_browser=True"]
    else:
        cmd = [sys.executable, "-m", "jupyterlab", *common,
               "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=root)


def _wait_ready(lab: Lab, timeout: float) -> Lab:
    """``lab`` once it answers ``/api/status``; `_PortTaken` where it exited because its port was in use."""
    deadline = time.monotonic() + timeout
    while True:
        if lab.proc.poll() is not None:
            if "already in use" in lab.log_tail():
                raise _PortTaken
            raise RuntimeError(f"JupyterLab exited with {lab.proc.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("GET", "/api/status", timeout=2)
            return lab
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            stop_lab(lab)
            raise TimeoutError(f"JupyterLab did not answer /api/status in {timeout:.0f} s:\n{lab.log_tail()}")
        time.sleep(0.2)


def stop_lab(lab: Lab) -> None:
    lab.proc.terminate()
    try:
        lab.proc.wait(10)
    except subprocess.TimeoutExpired:
        lab.proc.kill()
        lab.proc.wait(5)
    shutil.rmtree(lab.runtime_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM}: run scripts/test.sh (it installs Debian chromium)")
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"))
    yield server
    stop_lab(server)


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory):
    """A Jupyter Notebook 7 server (``notebook>=7``), set up as ``lab``: users open the same outputs there."""
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM}: run scripts/test.sh (it installs Debian chromium)")
    server = start_lab(tmp_path_factory.mktemp("notebook7"), app="notebook")
    yield server
    stop_lab(server)


@pytest.fixture(scope="session")
def playwright_instance():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_instance):
    b = playwright_instance.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    yield b
    b.close()


def guard_page(page) -> None:
    """Attach the network guard and error collectors to ``page`` (also usable on extra pages)."""
    page.external_requests = []
    page.console_errors = []
    page.page_errors = []
    page.on("request", lambda r: None if r.url.startswith(LOCAL_PREFIXES) else page.external_requests.append(r.url))
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.page_error_stacks = []
    page.on("pageerror", lambda e: (page.page_errors.append(str(e)), page.page_error_stacks.append(e.stack or "")))


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    guard_page(pg)
    yield pg
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        from helpers import save_screenshot
        try:
            save_screenshot(pg, f"FAILED-{request.node.name}")
        except Exception:  # noqa: BLE001  (a failed screenshot must not hide the test's own failure)
            pass
    context.close()
    assert not pg.external_requests, f"requests left the machine: {pg.external_requests}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
    if rep.when == "call" and rep.failed:
        # what the servers were doing when the test failed and, where it gave up waiting, their kernels
        waited = call.excinfo is not None and ("Timeout" in call.excinfo.typename
                                                or "did not end" in str(call.excinfo.value))
        for name in ("lab", "notebook7"):
            server = item.funcargs.get(name)
            if isinstance(server, Lab):
                rep.sections.append((f"{name}: server log (tail)", server.log_tail(80)))
                if waited:
                    rep.sections.append((f"{name}: Python stacks under the server", server.kernel_stacks()))
