"""Property tests (hypothesis) of the reading primitives every parser uses: whatever bytes a file holds,
they either parse or raise a typed nbprofiler error that names the file; never anything else."""
from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nbprofiler.errors import (EmptyFileError, MalformedFileError, MissingColumnError, ProfilerDataError,
                               ProfilerDataWarning, TruncatedFileError)
from nbprofiler.io import _util
from nbprofiler.samples import path as sample_path

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.binary(max_size=400))
@example(data=b"\xef\xbb\xbf")  # a byte-order mark alone (found by this test): empty, not an IndexError
def test_read_csv_on_any_bytes_parses_or_raises_typed(tmp_path, data):
    f = tmp_path / "any.csv"
    f.write_bytes(data)
    try:
        df = _util.read_csv(f)
        assert isinstance(df, pd.DataFrame)
    except ProfilerDataError as e:
        assert e.path == f and str(f) in str(e)


_CELLS = st.sampled_from(["1", "2.5", "", " ", "a b", '"q,1"', '"x""y"', "nan", "N/A", '"two\nlines"', "é", "\t3\t",
                          '"', "x\r", "-"])


def _read_both(monkeypatch, f):
    """`read_csv` of ``f`` by Arrow (`_arrow_rows`, whatever the size) and by pandas alone: for each, the frame,
    its attrs, the warnings, or the error."""
    out = []
    for arrow_from in (0, float("inf")):
        monkeypatch.setattr(_util, "ARROW_CSV_BYTES", arrow_from)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                df = _util.read_csv(f)
                out.append((df.to_dict("list"), list(df.columns), [str(t) for t in df.dtypes], list(df.index),
                            repr(df.attrs), [str(w.message) for w in caught]))
            except ProfilerDataError as e:
                out.append((type(e).__name__, str(e)))
    return out


@SETTINGS
@given(header=st.sampled_from([["a", "b", "c"], ["a", "a", "b"], ["a", "", "c"], [" a ", "b", "c"], ['"h,1"', "b", "c"]]),
       rows=st.lists(st.lists(_CELLS, min_size=2, max_size=4), max_size=6),
       eol=st.sampled_from(["\n", "\r\n"]), end=st.sampled_from(["", "\n", "\n\n"]), bom=st.booleans())
@example(header=["a", "b", "c"], rows=[['"', "\t3\t", "a b"], ["2.5", "N/A"], ['"q,1"', '"', ""]], eol="\r\n",
         end="\r\n", bom=False)  # one record over three lines (found by a fuzzer): the careful reader's line
def test_a_csv_read_by_arrow_is_the_csv_read_by_pandas(tmp_path, monkeypatch, header, rows, eol, end, bom):
    """Arrow's CSV reader (large files) gives what pandas gives (small files, and every file Arrow leaves
    to it): the same rows, columns, line numbers, warnings and errors."""
    f = tmp_path / "x.csv"
    f.write_text(("\ufeff" if bom else "") + eol.join([",".join(header)] + [",".join(r) for r in rows]) + end,
                 encoding="utf-8")
    by_arrow, by_pandas = _read_both(monkeypatch, f)
    assert by_arrow == by_pandas


def test_a_large_csv_is_read_by_arrow(monkeypatch):
    """The bundled sample's memory record (1.5 MB) is read by Arrow, to the values the file holds."""
    (path,) = sample_path("lenet_pynative").glob("*/FRAMEWORK/cpu_ms_memory_record_0.txt")
    reads = []
    monkeypatch.setattr(_util, "_arrow_rows", lambda *a, _read=_util._arrow_rows: reads.append(_read(*a)) or reads[-1])
    df = _util.read_csv(path)
    assert len(reads) == 1 and reads[0] is not None
    lines = path.read_text().splitlines()
    assert list(df.columns) == lines[0].split(",") and len(df) == len(lines) - 1
    assert df.iloc[0].tolist() == lines[1].split(",") and df.iloc[-1].tolist() == lines[-1].split(",")


def test_a_csv_read_by_arrow_allocates_from_jemalloc(monkeypatch):
    """The read of a large CSV by Arrow and the cast of its numbers allocate from jemalloc, not from
    mimalloc, whose huge pages made the memory record's read take four times as long in one open of ten
    (`_util.arrow_memory`); the default pool is back after."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    from nbprofiler.io import cache
    from nbprofiler.io.trace import disk as trace_disk
    cache.wait()  # an earlier test's cache entry, written in the background, holds the switch until it is done
    trace_disk._PAIRING.submit(lambda: None).result()  # and so do the flows it left to be paired
    (path,) = sample_path("lenet_pynative").glob("*/FRAMEWORK/cpu_ms_memory_record_0.txt")
    seen = []

    def watched(fn, what):
        def call(*a, **k):
            seen.append((what, pa.default_memory_pool().backend_name))
            return fn(*a, **k)
        return call
    monkeypatch.setattr(pcsv, "read_csv", watched(pcsv.read_csv, "read"))
    monkeypatch.setattr(pc, "cast", watched(pc.cast, "cast"))
    before = pa.default_memory_pool()
    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        df = _util.read_csv(path)
        allocated = _util.numeric(df, "Total Allocated(Byte)", path)
        build = _util.jemalloc_pool().backend_name
        assert ("read", build) in seen and ("cast", build) in seen and build in ("jemalloc", "system")
        assert {pool for _, pool in seen} == {build}
        assert pa.default_memory_pool().backend_name == "mimalloc"
    finally:
        pa.set_memory_pool(before)
    assert allocated.iloc[0] == int(path.read_text().splitlines()[1].split(",")[1])


@SETTINGS
@given(data=st.binary(max_size=400))
def test_read_json_on_any_bytes_parses_or_raises_typed(tmp_path, data):
    f = tmp_path / "any.json"
    f.write_bytes(data)
    try:
        _util.read_json(f)
    except ProfilerDataError as e:
        assert e.path == f


@SETTINGS
@given(doc=st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=5),
                        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=3), c, max_size=4),
                        max_leaves=20),
       cut=st.integers(min_value=1, max_value=200))
def test_truncated_json_is_reported_as_truncated_with_a_line(tmp_path, doc, cut):
    text = json.dumps(doc, indent=1)
    if not isinstance(doc, (list, dict)) or cut >= len(text):
        return
    f = tmp_path / "cut.json"
    f.write_text(text[:cut])
    with pytest.raises((TruncatedFileError, MalformedFileError)) as e:
        _util.read_json(f)
    assert e.value.line is not None and e.value.line >= 1


@SETTINGS
@given(rows=st.lists(st.lists(st.integers(-10**6, 10**6), min_size=3, max_size=3), min_size=1, max_size=30),
       bad_row=st.integers(min_value=0, max_value=29))
def test_extra_fields_cost_the_row_and_name_the_line(tmp_path, rows, bad_row):
    bad_row %= len(rows)
    lines = ["a,b,c"] + [",".join(map(str, r)) + (",9" if i == bad_row else "") for i, r in enumerate(rows)]
    f = tmp_path / "x.csv"
    f.write_text("\n".join(lines) + "\n")
    with pytest.warns(ProfilerDataWarning) as w:
        df = _util.read_csv(f)
    (err,) = [x.message.error for x in w]
    assert err.line == bad_row + 2 and err.path == f  # 1-based, after the header
    assert df.values.tolist() == [[str(v) for v in r] for i, r in enumerate(rows) if i != bad_row]
    assert [_util.line_of(df, i) for i in range(len(df))] == [i + 2 for i in range(len(rows)) if i != bad_row]


@SETTINGS
@given(rows=st.lists(st.lists(st.integers(-10**6, 10**6), min_size=3, max_size=3), min_size=2, max_size=30),
       data=st.data())
def test_a_mostly_malformed_csv_is_rejected_whole(tmp_path, rows, data):
    bad = data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=2))
    lines = ["a,b,c"] + [",".join(map(str, r[:2] if i in bad else r)) for i, r in enumerate(rows)]
    f = tmp_path / "x.csv"
    f.write_text("\n".join(lines) + "\n")
    if len(bad) > _util.BAD_ROW_LIMIT * len(rows):
        with pytest.raises(MalformedFileError) as e:
            _util.read_csv(f)
        assert e.value.line == min(bad) + 2 and f"{len(bad)} of {len(rows)} rows" in e.value.reason
    else:
        with pytest.warns(ProfilerDataWarning):
            assert len(_util.read_csv(f)) == len(rows) - len(bad)


@SETTINGS
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=20),
       junk=st.sampled_from(["abc", "1.2.3", "--", "0x"]), where=st.integers(0, 19))
def test_numeric_names_line_and_field_of_a_non_number(tmp_path, values, junk, where):
    where %= len(values)
    cells = [repr(float(v)) for v in values]
    cells[where] = junk
    df = pd.DataFrame({"dur": cells})
    with pytest.warns(ProfilerDataWarning) as w:
        out = _util.numeric(df, "dur", tmp_path / "f.csv")
    (err,) = [x.message.error for x in w]
    assert (err.line, err.field) == (where + 2, "dur")
    assert out.isna().tolist() == [i == where for i in range(len(values))]
    if len(values) >= 3:  # the same junk in most rows: the column is garbage, rejected whole
        with pytest.raises(MalformedFileError) as e:
            _util.numeric(pd.DataFrame({"dur": [junk] * len(values)}), "dur", tmp_path / "f.csv")
        assert (e.value.line, e.value.field) == (2, "dur")


def _numeric_outcome(col, path, dtype):
    """What `numeric` makes of a column: its dtype and values (NaN as None), or the error; and its warnings."""
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = _util.numeric(pd.DataFrame({"v": col}), "v", path, dtype=dtype)
            res = (str(out.dtype), [None if pd.isna(x) else x for x in out.tolist()], list(out.index))
        except Exception as e:  # noqa: BLE001  (whatever it raises, both paths raise it alike)
            res = ("error", type(e).__name__, str(e))
    return res, [str(x.message) for x in w]


@SETTINGS
@given(cells=st.lists(st.one_of(st.integers(-2**62, 2**62).map(str),
                                st.floats(allow_nan=False, allow_infinity=False).map(repr),
                                st.sampled_from(["", "N/A", "nan", "inf", "-inf", " 12", '"3.5"', "1e3", "abc",
                                                 "+7", "7\t", "-", "1.5"])), min_size=1, max_size=20),
       as_int=st.booleans())
def test_numeric_reads_arrow_text_as_the_cell_by_cell_path_does(tmp_path, cells, as_int):
    """`read_csv` gives Arrow-backed text, which `numeric` parses in one cast when every cell is a plain
    finite number: same numbers, dtype, errors and warnings as the cell-by-cell path (object text)."""
    dtype = int if as_int else float
    arrow = _numeric_outcome(pd.Series(cells, dtype="string[pyarrow]"), tmp_path / "f.csv", dtype)
    assert arrow == _numeric_outcome(pd.Series(cells, dtype=object), tmp_path / "f.csv", dtype)


def test_missing_column_and_empty_file(tmp_path):
    f = tmp_path / "h.csv"
    f.write_text("x,y\n1,2\n")
    with pytest.raises(MissingColumnError, match="'op_type'"):
        _util.read_csv(f, required=["op_type"])
    f.write_text("")
    with pytest.raises(EmptyFileError):
        _util.read_csv(f)


def test_truncated_last_row_is_dropped_with_a_warning(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("a,b,c\n1,2,3\n4,5")
    with pytest.warns(Warning, match="last row has 2 of 3 fields"):
        df = _util.read_csv(f)
    assert df.values.tolist() == [["1", "2", "3"]]


def test_snake_case_units():
    assert _util.snake("Start Time(us)") == "start_time_us"
    assert _util.snake("cube_utilization(%)") == "cube_utilization_pct"
    assert _util.snake("Bandwidth(GB/s)") == "bandwidth_gbps"
    assert _util.snake("Communication(Not Overlapped)") == "communication_not_overlapped"
