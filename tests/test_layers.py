"""The package's layers: errors/schema -> io -> model -> analysis -> views -> faces. No module imports
from a later layer (at module level or inside a function), except the documented lazy hooks: a model or
analysis object's ``show()``/``summary()``/``to_html()``/``_repr_html_`` reaching the layer that draws it.
Nor does any module import itself back through others (`test_no_import_cycles`: every import that runs,
inside functions too, the same lazy hooks excepted).
The package root holds the facade and the model; the faces (CLI, magics, report, exporter, server
extension, test checks) live together in ``nbprofiler.faces``."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nbprofiler"
LAYERS = ["errors/schema", "io", "model", "analysis", "views", "faces"]

# The facade: what users import (it ranks with the faces, which use it): the root package, and
# nbprofiler.testing, the documented path of nbprofiler.faces.testing.
FACADE = {"__init__", "testing"}
# Old paths of moved faces, kept one release with a FutureWarning (report notebooks import nbprofiler.report).
DEPRECATED = {"report"}

# Everything the package root may hold, by name, with its layer. A new root module or subpackage must be
# placed here (the faces go into nbprofiler/faces/).
ROOT = {
    # errors/schema
    "errors": 0, "schema": 0, "_version": 0,
    "_memory": 0,  # the pages of memory-mapped frames: io registers them, analyses release them
    "_clib": 0,  # the compiled kernels' loader: io's scanner and the dispatch analysis load their libraries
    "samples": 0, "synthetic": 0,  # bundled data and seeded generators: import nothing from the package
    "io": 1,
    # the model
    "model": 2,  # Profile/Cluster, load, build, derive, parallel, sql
    "analysis": 3,
    "views": 4,
    "faces": 5,
    **{name: 5 for name in FACADE | DEPRECATED},
}

# (importing module, imported module): the lazy hooks, each inside the method named.
LAZY_HOOKS = {
    ("nbprofiler.model.profile", "nbprofiler.analysis.summary"),   # Profile.summary
    ("nbprofiler.model.profile", "nbprofiler.analysis.breakdown"), # Cluster.sql's rank_breakdown table
    ("nbprofiler.model.profile", "nbprofiler.analysis.parallel_groups"),  # Cluster.sql's parallel tables
    ("nbprofiler.model.profile", "nbprofiler.analysis.pipeline"),  # Cluster.sql's pipeline_bubbles table
    ("nbprofiler.model.profile", "nbprofiler.analysis.slow_rank_cause"),  # Cluster.sql's slow-rank tables
    ("nbprofiler.model.profile", "nbprofiler.analysis.dispatch"),  # Profile.dispatch, its sql table
    ("nbprofiler.model.profile", "nbprofiler.analysis.cluster_reduce"),  # Cluster.concat of many ranks
    ("nbprofiler.model.profile", "nbprofiler.views.dashboard"),    # Profile.show
    ("nbprofiler.model.profile", "nbprofiler.views.windows"),      # Profile.show of a rank with several windows
    ("nbprofiler.model.profile", "nbprofiler.faces.report"),       # Profile.to_html
    ("nbprofiler.model.profile", "nbprofiler.views.repr"),         # Profile/Cluster._repr_html_
    ("nbprofiler.model.profile", "nbprofiler.views.cluster"),      # Cluster.show
    ("nbprofiler.analysis.compare", "nbprofiler.views.compare"),  # Comparison.show
    ("nbprofiler.analysis.compare", "nbprofiler.views.timeline_diff"),  # Comparison.timeline
    ("nbprofiler.analysis.timeline_diff", "nbprofiler.views.timeline_diff"),  # TimelineDiff.show
    ("nbprofiler.analysis.runs", "nbprofiler.views.runs"),        # RunSet.show
}


def layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    assert part in ROOT, f"{module}: nbprofiler/{part} is in no layer (tests/test_layers.py ROOT)"
    return ROOT[part]


def root_entries() -> set[str]:
    """The modules and subpackages in the package root (not the built labextension/ or caches)."""
    return {p.stem for p in PACKAGE.glob("*.py")} | \
        {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, source: str | None = None):
    """(imported module, line) for every nbprofiler import in the file (or ``source`` as if it were that
    file), at any depth."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    source = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            if not base.startswith("nbprofiler"):
                continue
            if node.module is None:  # from . import x: x is a module
                yield from ((f"{base}.{a.name}", node.lineno) for a in node.names)
            else:
                yield base, node.lineno
        elif isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.startswith("nbprofiler"))


def test_no_module_imports_from_a_later_layer():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "labextension" in path.parts:
            continue
        mod = module_name(path)
        if mod == "nbprofiler":  # the facade re-exports every layer
            continue
        for target, line in imports(path):
            if layer(target) > layer(mod) and (mod, target) not in LAZY_HOOKS:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {LAYERS[layer(mod)]} module {mod} "
                           f"imports {target} ({LAYERS[layer(target)]})")
    assert bad == []


def test_the_root_holds_the_facade_and_the_model_and_the_faces_live_together():
    """No face module in the package root: there are only the facade, the faces package and the lower
    layers, each named in ROOT (and every name in ROOT is there)."""
    assert root_entries() == set(ROOT)
    assert {name for name, rank in ROOT.items() if rank == LAYERS.index("faces")} == {"faces", *FACADE, *DEPRECATED}
    faces = {p.stem for p in (PACKAGE / "faces").glob("*.py")} - {"__init__"}
    assert faces == {"cli", "magics", "cellprof", "report", "nbconvert_offline", "lab", "testing"}


def test_the_faces_are_found_where_their_users_look():
    """The console script, the nbconvert exporter and the Jupyter server extension name faces modules;
    IPython and Jupyter find their hooks on the package root."""
    import importlib
    import json

    import nbprofiler
    meta = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    targets = re.findall(r'^\w+ = "(nbprofiler[\w.]*):(\w+)"$', meta, re.M)
    assert {m for m, _ in targets} == {"nbprofiler.faces.cli", "nbprofiler.faces.nbconvert_offline"}
    for mod, attr in targets:
        assert callable(getattr(importlib.import_module(mod), attr))
    config = json.loads((PACKAGE.parent / "labextension" / "jupyter-config" / "nbprofiler.json").read_text())
    assert config["ServerApp"]["jpserver_extensions"] == {"nbprofiler": True}
    [point] = nbprofiler._jupyter_server_extension_points()
    assert callable(importlib.import_module(point["module"])._load_jupyter_server_extension)
    assert callable(nbprofiler.load_ipython_extension) and nbprofiler._jupyter_labextension_paths()


def runtime_imports(path: Path, source: str | None = None):
    """(imported module, line) for every nbprofiler import the file runs, at module level or inside a
    function: those of `imports`, plus ``pkg.name`` for ``from pkg import name`` where that is a module,
    without the ones under ``if TYPE_CHECKING:`` (they never run)."""
    source = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(source)
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    modules = all_modules()
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for target, line in imports(path, ast.unparse(node)):
            yield target, node.lineno
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            base = node.module
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + [node.module])
            yield from ((f"{base}.{a.name}", node.lineno) for a in node.names if f"{base}.{a.name}" in modules)


@functools.lru_cache(maxsize=1)
def all_modules() -> frozenset[str]:
    """Every module of the package, by name."""
    return frozenset(module_name(p) for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first import}, every import the package runs (at module level
    or inside a function), the declared lazy hooks left out."""
    modules = all_modules()
    graph: dict[str, dict[str, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "labextension" in path.parts:
            continue
        mod = module_name(path)
        edges = graph.setdefault(mod, {})
        for target, line in runtime_imports(path):
            while target not in modules and "." in target:  # ``import a.b.name``: the module a.b
                target = target.rsplit(".", 1)[0]
            if target != mod and (mod, target) not in LAZY_HOOKS:
                edges.setdefault(target, line)
    return graph


def find_cycles(graph: dict[str, dict]) -> list[list[str]]:
    """One cycle (a chain of modules back to its first) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v):  # Tarjan's algorithm (the graph has a few hundred modules: recursion is fine)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # the shortest way from the group's first module back to it
        start, members = group[0], set(group)
        came_from = {start: None}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in sorted(graph.get(v, ())):
                if w == start:
                    chain = [v]
                    while came_from[chain[-1]] is not None:
                        chain.append(came_from[chain[-1]])
                    cycles.append([*reversed(chain), start])
                    queue = []
                    break
                if w in members and w not in came_from:
                    came_from[w] = v
                    queue.append(w)
    return cycles


def test_no_import_cycles():
    """No module imports itself back through others: every import counts (module level or inside a
    function; not those under ``if TYPE_CHECKING:``, which never run), except the declared lazy hooks."""
    graph = import_graph()
    found = [" -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"
             for cycle in find_cycles(graph)]
    assert found == []


def test_the_cycle_check_finds_a_cycle_through_an_import_inside_a_function():
    """The check itself: an import inside a function is an edge, one under TYPE_CHECKING is not, and a cycle is
    reported as the chain of modules that closes it."""
    parser = PACKAGE / "io" / "legacy.py"
    src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..model.profile import Profile\n" \
          "def f():\n    from . import trace\n"
    assert [t for t, _ in runtime_imports(parser, src)] == ["nbprofiler.io.trace"]
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_layer_rule_catches_an_upward_import():
    """The check itself: a parser importing the model inside a function is found and ranked upward."""
    parser = PACKAGE / "io" / "legacy.py"
    found = [t for t, _ in imports(parser, "def f():\n    from ..model.profile import Profile\n")]
    assert found == ["nbprofiler.model.profile"] and layer(found[0]) > layer(module_name(parser))


def test_the_version_is_declared_once_in_step_with_the_package_metadata():
    from nbprofiler import __version__
    meta = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"', meta, re.M).group(1) == __version__


# io modules still handed a Profile: none
IO_PROFILE_EXCEPTIONS: set[str] = set()


def profile_uses(path: Path, source: str | None = None):
    """(line, what) for every way a module reaches into a Profile: a parameter named ``prof`` (or
    ``profile``), or reading ``.origin_us``/``._cache``/``.cached`` of a name ``prof``/``profile``."""
    source = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.arg in ("prof", "profile"):
                    yield node.lineno, f"parameter {arg.arg!r}"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("prof", "profile") and node.attr in ("origin_us", "_cache", "cached"):
            yield node.lineno, f"reads {node.value.id}.{node.attr}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            if "Profile" in names or any(n.endswith(".profile") or n == "profile" for n in names) \
                    or (isinstance(node, ast.ImportFrom) and (node.module or "").endswith("profile")):
                yield node.lineno, "imports the model (Profile)"


def test_parsers_never_see_a_profile():
    """nbprofiler.io turns files into frames from explicit inputs (the run's files, an origin, a frame):
    no parser takes a Profile, reads its origin or its cache, or imports the model."""
    bad = []
    for path in sorted((PACKAGE / "io").rglob("*.py")):
        if module_name(path) in IO_PROFILE_EXCEPTIONS:
            continue
        bad += [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for line, what in profile_uses(path)]
    assert bad == []


def test_the_profile_check_catches_a_parser_reading_the_profile():
    parser = PACKAGE / "io" / "legacy.py"
    src = "def f(run, prof):\n    return prof.origin_us + prof._cache['kernels']\n"
    assert [w for _, w in profile_uses(parser, src)] == ["parameter 'prof'", "reads prof.origin_us", "reads prof._cache"]


def test_a_report_notebook_of_an_earlier_version_still_imports_its_layout():
    import importlib
    import sys

    import pytest
    sys.modules.pop("nbprofiler.report", None)
    with pytest.warns(FutureWarning, match="nbprofiler.faces.report"):
        old = importlib.import_module("nbprofiler.report")
    from nbprofiler.faces.report import report_layout
    assert old.report_layout is report_layout
