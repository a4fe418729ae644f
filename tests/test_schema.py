"""The declared data model (`nbprofiler.schema`) against the frames real profiles give, and everything
generated from it: properties, docstrings, typed empty frames, the docs/data-model.md tables, the views' lists."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from nbprofiler import schema
from nbprofiler.model.profile import FRAME_NAMES, Cluster, Profile, builder_of
from nbprofiler.views.pages import PAGES

from .conftest import DATA, datasets, load_quietly

REPO = Path(__file__).resolve().parents[1]
DATASETS = datasets()


def _profiles(dataset: str) -> list[Profile]:
    obj = load_quietly(dataset)
    return list(obj)[:4] if isinstance(obj, Cluster) else [obj]


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_frame_of_every_dataset_is_as_declared(dataset):
    """Columns present as declared, in the declared dtypes, none undeclared (unless the frame takes the
    file's further columns); the raw builder output already has every declared column and no other."""
    seen = 0
    for prof in _profiles(dataset):
        for name, spec in schema.FRAMES.items():
            df = getattr(prof, name)
            assert spec.mismatches(df) == [], (dataset, prof.key)
            raw = builder_of(name)(prof)
            if raw is not None and len(raw):
                assert [m for m in spec.mismatches(raw) if "dtype" not in m] == [], (dataset, prof.key)
                seen += 1
    assert seen, f"{dataset}: no frame has rows"


def test_the_schema_declares_exactly_the_profile_frames():
    assert FRAME_NAMES == set(schema.FRAMES)
    for name, spec in schema.FRAMES.items():
        prop = getattr(Profile, name)
        assert isinstance(prop, property) and prop.__doc__ == spec.doc()
        assert callable(builder_of(name)), f"no builder for {name}"
    for spec in schema.FRAMES.values():
        assert spec.clock in schema.CLOCKS
        assert len(spec.column_names) == len(set(spec.column_names)), spec.name


def test_every_frame_is_built_from_its_registered_sources_or_derived():
    """`FrameSpec.builder` names how a frame is built; the registry (`nbprofiler.model.build.SOURCES`) reads only
    roles the frame's spec declares (they make `prof.files`' feeds column and the views' lists)."""
    from nbprofiler.model import build
    for name, spec in schema.FRAMES.items():
        assert spec.builder in ("sources", "derive"), name
        assert (name in build.DERIVED) == (spec.builder == "derive") != (name in build.SOURCES), name
    assert set(build.SOURCES) <= set(schema.FRAMES) | set(schema.RECORDS)
    # the trace's CANN task-time and FRAMEWORK fallbacks are declared on `timeline` only (not yet on the
    # three frames the same parse gives)
    trace_only = {"timeline_tracks", "timeline_flows", "timeline_counters"}
    for name, sources in build.SOURCES.items():
        spec = schema.FRAMES.get(name) or schema.RECORDS[name]
        declared = spec.roles | (schema.FRAMES["timeline"].roles if name in trace_only else frozenset())
        for source in sources:
            assert set(source.roles) <= declared, (name, set(source.roles) - declared)


def test_a_run_without_the_data_gets_the_declared_typed_empty_frames():
    prof = load_quietly("minddata/md_fast")  # MindData only: no timeline, no operators, no step trace
    for name in ("timeline", "timeline_tracks", "ops", "op_types", "kernels", "step_trace", "communication"):
        df = getattr(prof, name)
        spec = schema.FRAMES[name]
        assert df.empty and list(df.columns) == [c.name for c in spec.columns if c.required]
        assert spec.mismatches(df) == []
    tl = prof.timeline
    assert str(tl["track"].dtype) == "int32" and isinstance(tl["name"].dtype, pd.CategoricalDtype)
    assert str(tl["start_us"].dtype) == "float64" and str(prof.ops["count"].dtype) == "Int64"
    assert not any(df.dtypes.eq(object).all() and len(df.columns) > 1
                   for df in (prof.timeline, prof.op_types, prof.memory))


def test_docs_data_model_table_is_the_schema():
    text = (REPO / schema.DATA_MODEL_PAGE).read_text(encoding="utf-8")
    m = re.search(r"<!-- data-model table:[^\n]*-->\n(.*?)\n<!-- end of data-model table -->", text, re.S)
    assert m, f"{schema.DATA_MODEL_PAGE} has no generated data-model table"
    assert m.group(1) == schema.markdown_table(), \
        f"{schema.DATA_MODEL_PAGE} drifted: run `python -m nbprofiler.schema --readme {schema.DATA_MODEL_PAGE}`"
    assert "data-model table:" not in (REPO / "README.md").read_text(encoding="utf-8"), "the table lives in docs/ only"


def test_schema_cli_rewrites_the_docs_table(tmp_path):
    page = tmp_path / "data-model.md"
    page.write_text("# x\n\n<!-- data-model table: generated -->\nstale\n<!-- end of data-model table -->\n")
    schema.write_readme(str(page))
    assert schema.markdown_table() in page.read_text()
    bare = tmp_path / "no-markers.md"
    bare.write_text("# x\n")
    with pytest.raises(SystemExit):
        schema.write_readme(str(bare))


def test_every_declared_role_is_one_discovery_gives():
    source = (REPO / "nbprofiler/io/discover.py").read_text(encoding="utf-8")
    specs = (*schema.FRAMES.values(), *schema.RECORDS.values())
    for role in sorted({r for s in specs for r in s.roles}):
        assert f'"{role}"' in source, f"role {role!r} is not one nbprofiler.io.discover assigns"


def test_files_feeds_and_views_looked_for_come_from_the_schema():
    prof = load_quietly("npu/ascend_pt_text_2rank", device="0")
    feeds = prof.files.set_index("role")["feeds"]
    assert feeds["l2_cache"] == "l2_cache"
    assert set(feeds["kernel_details"].split(", ")) == {"kernels", "op_types", "ops", "step_windows"}
    from nbprofiler.views.dashboard import TABS, no_data_html
    assert TABS == ["Overview", *(p.title for p in PAGES if p.dashboard)]
    md = load_quietly("minddata/md_fast")
    html = no_data_html("Timeline", md)
    for pattern in schema.FRAMES["timeline"].files:
        assert f"<code>{pattern}</code>" in html.replace("&#x27;", "'")
    from nbprofiler.faces.report import SECTIONS, missing_reason
    step = next(s for s in SECTIONS if s.key == "step_trace")
    assert step.roles >= {"step_trace", "step_trace_time", "cann_step_trace"}
    assert "step_trace_raw_*_detail_time.csv" in missing_reason(md, step)


def test_one_name_one_scale_one_dtype_across_frames():
    """file_percent is 0..100 whatever the writer (MindSpore's CPU files write a fraction), step is an
    integer in the communication frames (the files key ops by "stepN"), count is Int64 everywhere."""
    cpu = load_quietly("mindspore2/lenet_pynative").op_types
    assert cpu["file_percent"].max() > 1 and cpu["file_percent"].sum() == pytest.approx(100, abs=0.01)
    legacy = load_quietly("legacy/run_2_lenet").op_types
    assert legacy.set_index("op_type").loc["MatMul", "file_percent"] == 89.47
    c8 = load_quietly("npu/cluster_8rank")[0].communication
    assert str(c8["step"].dtype) == "Int64" and c8["step"].isna().all()  # written as a bare "step"
    c16 = load_quietly("npu/cluster_analysis_16rank")[0]
    assert set(c16.communication["step"]) == {2} and set(c16.communication_matrix["step"]) == {2}
    counts = {spec.column("count").dtype for spec in schema.FRAMES.values() if spec.column("count")}
    assert counts == {"Int64"}
