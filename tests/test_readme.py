"""The README and the pages it links to: every relative link resolves (file and heading), the README opens
with the demo and test commands, and every ```python block marked `<!-- run -->` on the line before it runs
against the shared real data.

Convention for runnable snippets: put `<!-- run -->` on the line just before the ```python fence. The blocks
of one page run in order in one namespace (like a notebook), in a temporary working directory (so
`prof.to_html("report.html")` writes there); the placeholder paths below are replaced by shared datasets
first, and a runnable block may hold no other `path/to` placeholder. Functions named `test_*` that a
block defines (the CI-checks example) are called too. Display calls (`.show()`) run headless: they build
the widgets and hand them to IPython's display, which prints them without a frontend.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md"]

# placeholder in a snippet -> shared dataset it stands for
PLACEHOLDERS = {
    '"path/to/profiler/output"': "legacy/run_2_lenet",
    '"path/to/cluster/output"': "legacy/cluster_4rank_pipeline",
    '"run_before"': "minddata/md_bottleneck_map",
    '"run_after"': "minddata/md_fast",
    '"w1"': "minddata/md_bottleneck_map",
    '"w2"': "minddata/md_fast",
    '"w4"': "mindspore2/lenet_pynative",
    '"out/profiler"': "legacy/run_2_lenet",
    '"baselines/profiler"': "legacy/run_2_lenet",
}

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The page without its fenced code blocks and inline code spans (links there are not links)."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r"`", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6} (.+)$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: are not checked


def test_the_pages_exist():
    for page in PAGES:
        assert page.is_file(), page
    names = {p.name for p in (REPO / "docs").glob("*.md")}
    assert {"data-model.md", "advisor.md", "security.md", "architecture.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    bad = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not bad, f"{page.relative_to(REPO)}: " + "; ".join(bad)


def test_readme_links_every_docs_page_and_the_benchmarks():
    links = {(REPO / t.partition("#")[0]).resolve() for t in _links(REPO / "README.md") if t.partition("#")[0]}
    for page in PAGES[1:]:
        assert page.resolve() in links, f"README's Further reading does not link {page.relative_to(REPO)}"


def test_readme_opens_with_the_demo_and_test_commands():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# nbprofiler" and lines[1] == ""
    assert lines[2] == "```bash"
    assert lines[3].startswith("bash scripts/demo.sh") and lines[4].startswith("bash scripts/test.sh")
    assert lines[5] == "```"


def test_readme_is_what_a_user_reads():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 260
    sections = re.findall(r"^## (.+)$", text, re.M)
    for name in ("Quick start", "What it reads", "Views", "Reports", "CI checks", "Troubleshooting",
                 "Further reading"):
        assert name in sections, name


def _runnable_blocks(page: Path) -> list[str]:
    return re.findall(r"^<!-- run -->\n```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)


def _substitute(code: str) -> str:
    for placeholder, dataset in PLACEHOLDERS.items():
        code = code.replace(placeholder, repr(str(DATA / dataset)))
    assert "path/to" not in code, f"a runnable snippet has a placeholder the test does not map:\n{code}"
    return code


def test_the_readme_marks_its_quick_start_runnable():
    blocks = _runnable_blocks(REPO / "README.md")
    assert any("nbprofiler.load(" in b and ".show()" in b and "to_html" in b for b in blocks)


RUNNABLE = [p for p in PAGES if _runnable_blocks(p)]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(REPO)))
def test_marked_python_snippets_run_against_shared_data(page, tmp_path, monkeypatch):
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA}")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    for i, block in enumerate(_runnable_blocks(page)):
        before = set(namespace)
        code = compile(_substitute(block), f"{page.relative_to(REPO)}[python block {i}]", "exec")
        exec(code, namespace)  # noqa: S102 - the documentation's own snippets
        for name in sorted(set(namespace) - before):
            if name.startswith("test_") and callable(namespace[name]):
                namespace[name]()
    written = [p for p in tmp_path.iterdir() if p.suffix == ".html"]
    if "to_html(" in "".join(_runnable_blocks(page)):
        assert written and all(p.stat().st_size > 0 for p in written)
