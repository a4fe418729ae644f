"""The page registry (`nbprofiler.views.pages.PAGES`) is the one place a page is written: the dashboard's tabs
and the offline report's sections are built from it, so they show the same pages, and a page added to it
appears in both."""
from __future__ import annotations

import ipywidgets as W
import pytest
from bokeh.models import Div

from nbprofiler.faces.report import report_layout
from nbprofiler.views import pages as P
from nbprofiler.views.dashboard import Dashboard
from .conftest import datasets, load_quietly

# report tabs that are not pages: the overview, and what a cluster, several windows or runs add
NOT_PAGES = {"Overview", "Ranks", "Windows", "Compare", "Runs"}


def _profile(name: str):
    """The dataset as one Profile (a Cluster's first rank)."""
    try:
        prof = load_quietly(name)
    except Exception as err:  # a folder that loads as no profile has no pages to compare
        pytest.skip(f"{name} does not load as a profile: {type(err).__name__}: {err}")
    return prof[prof.ranks[0]] if hasattr(prof, "ranks") else prof


def dashboard_pages(prof) -> set[str]:
    """The pages the dashboard shows a view on: its tabs with a view, and the folds under them (opened)."""
    db = Dashboard(prof)
    shown = set()
    for tab in db.tabs[1:]:
        if db.select(tab) is not None:
            shown.add(tab)
        for fold in db._extras.get(tab, []):
            fold.selected_index = 0
            title = next(p.title for p in P.PAGES if (p.fold_title or p.title) == fold.get_title(0))
            if db.views.get(title) is not None:
                shown.add(title)
    return shown


def report_pages(prof) -> set[str]:
    tabs = report_layout(prof).select_one({"name": "report_tabs"}).tabs
    return {t.title for t in tabs} - NOT_PAGES


@pytest.mark.parametrize("name", datasets())
def test_dashboard_and_report_show_the_same_pages(name):
    prof = _profile(name)
    with_data = {p.title for p in P.PAGES if p.has_data(prof)}
    assert dashboard_pages(prof) == with_data
    assert report_pages(prof) == with_data


def test_pages_are_complete_and_their_views_build_from_a_profile():
    for p in P.PAGES:
        cls = p.view_class
        assert callable(cls.from_profile) and callable(cls.report_layout) and cls.FRAMES and p.files, p.key
        assert not p.within or P.page(p.within).dashboard, p.key
    assert P.DASHBOARD_TABS == ["Overview", *(p.title for p in P.PAGES if p.dashboard)]


class _DummyView:
    """A view as the registry needs it: ``FRAMES``, ``from_profile`` and ``report_layout``."""

    FRAMES = ("timeline",)

    def __init__(self, prof):
        self.prof = prof
        self.widget = W.HTML("dummy page")

    @classmethod
    def from_profile(cls, prof):
        return cls(prof)

    @staticmethod
    def report_layout(prof):
        return Div(text="dummy section", name="dummy_div")


def _dummy(key: str, has: bool, **kw) -> P.Page:
    return P.Page(key, key.title(), ("timeline",), _DummyView, rule=lambda prof: has, **kw)


def test_a_page_added_to_the_registry_is_in_the_dashboard_and_the_report(monkeypatch):
    prof = load_quietly("legacy/run_2_lenet")
    pages = (*P.PAGES, _dummy("dummy", True), _dummy("absent", False), _dummy("folded", True, dashboard=False,
                                                                             within="dummy"))
    monkeypatch.setattr(P, "PAGES", pages)
    db = Dashboard(prof)
    assert db.tabs[-2:] == ["Dummy", "Absent"] and "Folded" not in db.tabs
    view = db.select("Dummy")
    assert isinstance(view, _DummyView) and view.prof is prof and view.widget in db._panels["Dummy"].children
    fold, = db._extras["Dummy"]
    fold.selected_index = 0
    assert isinstance(db.views["Folded"], _DummyView)
    assert db.select("Absent") is None and "No absent data" in db._panels["Absent"].children[0].value

    layout = report_layout(prof)
    titles = [t.title for t in layout.select_one({"name": "report_tabs"}).tabs]
    assert "Dummy" in titles and "Folded" in titles and "Absent" not in titles
    assert layout.select_one({"name": "report_dummy"}).select_one({"name": "dummy_div"}) is not None
    assert layout.select_one({"name": "report_folded"}) is not None
    overview = layout.select_one({"name": "report_overview"}).text
    assert "Absent" in overview


def test_one_has_data_rule_decides_both(monkeypatch):
    """A page whose rule says no is left out of both, whatever its frames hold."""
    prof = load_quietly("legacy/run_1_widedeep")
    flops = P.page("flops")
    assert flops.has_data(prof)
    import dataclasses
    monkeypatch.setattr(P, "PAGES", tuple(dataclasses.replace(p, rule=lambda prof: False) if p is flops else p
                                          for p in P.PAGES))
    assert Dashboard(prof).select("FLOPs") is None
    assert "FLOPs" not in report_pages(prof)


def test_views_take_a_profile_or_its_frames():
    """One shape: ``View.from_profile(prof)``, or the constructor with a dict of the view's ``FRAMES``; the
    MindData page's files cover what its view reads."""
    assert set(P.page("minddata").view_class.FRAMES) < set(P.page("minddata").frames)
    prof = load_quietly("legacy/run_1_widedeep")
    for p in P.PAGES:
        if not p.has_data(prof):
            continue
        cls = p.view_class
        frames = P.frames_of(prof, cls.FRAMES)
        assert set(frames) == set(cls.FRAMES)
        assert type(cls.from_profile(prof)) is cls and type(cls(frames)) is cls
