#!/usr/bin/env bash
# Set up nbprofiler in ./.venv and open JupyterLab on notebooks/quickstart.ipynb (bundled sample data).
#
#   bash scripts/demo.sh               install if needed, start JupyterLab, open the browser
#   bash scripts/demo.sh --no-browser  same, but only print the URL
#   bash scripts/demo.sh --check       install if needed, start the server on a free port, verify that
#                                      /api/status answers, that the server sees the quickstart notebook
#                                      and that it executes headless (nbclient); stop; exit 0 or 1
#   --no-install                       use the venv as it is (tests call this in their own venv)
#
# Needs Debian (or similar) with python3 >= 3.10 (+ python3-venv) and node/npm for the lab extension.
# NBPROFILER_VENV overrides the venv location (default: <repo>/.venv).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NBPROFILER_VENV:-$REPO/.venv}"
# Tools call each other by bare name (`jupyter labextension develop` runs `jupyter-builder`).
export PATH="$VENV/bin:$PATH"
NOTEBOOK="notebooks/quickstart.ipynb"
BROWSER=1 CHECK=0 INSTALL=1
for arg in "$@"; do
  case "$arg" in
    --no-browser) BROWSER=0 ;;
    --check) CHECK=1 ;;
    --no-install) INSTALL=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

source "$REPO/scripts/editable_install.sh"
say() { printf '[demo] %s\n' "$*" >&2; }

ensure_venv() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    command -v python3 >/dev/null || { say "python3 not found: apt-get install python3 python3-venv"; exit 1; }
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
      { say "python3 >= 3.10 needed, found $(python3 -V 2>&1)"; exit 1; }
    say "creating $VENV"
    python3 -m venv "$VENV" || { say "python3 -m venv failed: apt-get install python3-venv"; exit 1; }
    "$VENV/bin/python" -m pip install -q -U pip
  fi
}

# A stamp of the files that decide what gets installed: reinstall only when they change, because an
# editable install with the lab-extension build hook rebuilds the extension every time.
install_stamp() {
  cat "$REPO/pyproject.toml" "$REPO"/labextension/package.json "$REPO"/labextension/yarn.lock 2>/dev/null |
    sha256sum | cut -d' ' -f1
}

ensure_install() {
  local stamp_file="$VENV/.nbprofiler-demo-stamp" stamp
  stamp="$(install_stamp)"
  if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]] &&
     "$VENV/bin/python" -c 'import nbprofiler, jupyterlab, nbclient' 2>/dev/null; then
    return
  fi
  say "installing nbprofiler (editable) with JupyterLab into $VENV"
  # jupyterlab and nbclient are what the demo itself runs; the package brings the rest.
  install_editable "$REPO" "jupyterlab>=4.4,<5" "nbclient>=0.10"
  echo "$stamp" > "$stamp_file"
}

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

lab_args=(--ip=127.0.0.1 --ServerApp.root_dir="$REPO" --LabApp.news_url=None
          --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate)
[[ "$(id -u)" == 0 ]] && lab_args+=(--allow-root)
export BOKEH_RESOURCES=inline  # BokehJS from the package, not a CDN: the demo works offline

# JupyterLab's "get notified about Jupyter news?" pop-up and update check: off in this venv's own app
# settings (<venv>/share/jupyter/lab/settings/overrides.json), never in the user's settings.
quiet_lab() {
  local dir="$VENV/share/jupyter/lab/settings"
  mkdir -p "$dir"
  "$VENV/bin/python" - "$dir/overrides.json" <<'PY'
import json, pathlib, sys
path = pathlib.Path(sys.argv[1])
data = json.loads(path.read_text()) if path.exists() else {}
# fetchNews takes the string "false", not a boolean
data.setdefault("@jupyterlab/apputils-extension:notification", {}).update(fetchNews="false", checkForUpdates=False)
path.write_text(json.dumps(data, indent=2) + "\n")
PY
  say "news pop-up off ($dir/overrides.json)"
}

if [[ $INSTALL == 1 ]]; then ensure_venv; ensure_install; fi
[[ -x "$VENV/bin/jupyter" ]] || { say "no jupyter in $VENV: run without --no-install"; exit 1; }
[[ -f "$REPO/$NOTEBOOK" ]] || { say "missing $REPO/$NOTEBOOK"; exit 1; }
quiet_lab
if "$VENV/bin/jupyter" labextension list 2>&1 | grep -q 'nbprofiler.*enabled'; then
  say "lab extension: nbprofiler enabled"
else
  say "lab extension: nbprofiler not installed (the notebooks work without it)"
fi

if [[ $CHECK == 0 ]]; then
  [[ $BROWSER == 0 ]] && lab_args+=(--no-browser)
  say "starting JupyterLab on $NOTEBOOK (Ctrl+C to stop)"
  cd "$REPO"
  exec "$VENV/bin/jupyter" lab "${lab_args[@]}" "$NOTEBOOK"
fi

# --check: a throw-away server with its own runtime dir and token, then a headless run of the notebook.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nbprofiler-demo.XXXXXX")"
PORT="$(free_port)"
TOKEN="demo-check-$RANDOM$RANDOM"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
JUPYTER_RUNTIME_DIR="$WORK/runtime" JUPYTERLAB_WORKSPACES_DIR="$WORK/workspaces" \
  "$VENV/bin/jupyter" lab "${lab_args[@]}" --no-browser --port="$PORT" \
  --IdentityProvider.token="$TOKEN" --LabApp.extension_manager=readonly >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

"$VENV/bin/python" - "$PORT" "$TOKEN" "$SERVER_PID" "$REPO" "$NOTEBOOK" <<'PY'
import json, os, sys, time, urllib.request
from pathlib import Path

port, token, pid, repo, notebook = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]
base = f"http://127.0.0.1:{port}"


def get(path):
    req = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


t0 = time.monotonic()
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("[demo] FAIL: the JupyterLab server exited during start-up")
    try:
        status = get("/api/status")
        break
    except OSError:
        if time.monotonic() - t0 > 60:
            sys.exit("[demo] FAIL: /api/status did not answer within 60 s")
        time.sleep(0.2)
print(f"[demo] server answered /api/status after {time.monotonic() - t0:.1f} s: {json.dumps(status)}", file=sys.stderr)
model = get(f"/api/contents/{notebook}?content=0")
if model.get("type") != "notebook":
    sys.exit(f"[demo] FAIL: the server does not see {notebook} as a notebook: {model}")
print(f"[demo] server sees {notebook}", file=sys.stderr)

import nbclient, nbformat
nb = nbformat.read(repo / notebook, as_version=4)
t1 = time.monotonic()
try:
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str((repo / notebook).parent)}}).execute()
except Exception as err:  # noqa: BLE001  (report any cell failure as a failed check)
    sys.exit(f"[demo] FAIL: {notebook} did not execute: {type(err).__name__}: {str(err)[-2000:]}")
n = sum(c.cell_type == "code" for c in nb.cells)
print(f"[demo] OK: {notebook} executed {n} code cells headless in {time.monotonic() - t1:.1f} s", file=sys.stderr)
PY
