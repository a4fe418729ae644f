"""The compiled reader of Chrome-trace event arrays (`nbprofiler.io.trace.scan`): the same record batches
as duckdb's read (`parse._READ_SQL`) on every real trace, on the shapes the benchmarks read and on events
built to hold every kind of value; events it leaves to duckdb re-read there; text it does not take read by
duckdb, with duckdb's errors."""
from __future__ import annotations

import json
import random
import shutil
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from nbprofiler.errors import ProfilerDataError
from nbprofiler.io import json_slice
from nbprofiler.io.trace import load_trace, parse, scan

from .conftest import DATA

REAL_TRACES = sorted(p for pattern in ("trace_view.json", "*timeline_display*.json", "msprof_*.json")
                     for p in DATA.rglob(pattern) if p.stat().st_size > 1000) if DATA.is_dir() else []


def _duckdb_batches(path: Path, span: tuple[int, int]) -> pa.Table:
    """The reader's statement over ``span`` of ``path``, read by duckdb (as `parse._read_span` does: dur as a
    number, else as text cast where it casts)."""
    url = json_slice.slice_url(path, *span)
    parse._register_slices(parse._connection())
    try:
        for columns, dur, size in ((parse._COLUMNS, "dur", parse._MAX_EVENT),
                                   (parse._DUR_AS_TEXT, "TRY_CAST(dur AS DOUBLE)", parse._MAX_OBJECT)):
            source = parse._read_json(url, "array", columns, size)
            try:
                return parse.query(parse._READ_SQL.format(source=source, dur=dur, extra=""))
            except Exception:
                if columns is parse._DUR_AS_TEXT:
                    raise
    finally:
        json_slice.release(url)


def _span(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        first = f.read(1)
    return (0, path.stat().st_size) if first == b"[" else json_slice.array_span(path)


def _scanned(path: Path, rows: int = 4096, rereads: list | None = None) -> pa.Table:
    def reread(text):
        if rereads is not None:
            rereads.append(text.count(b"\n") + 1)
        return parse._reread(text)
    batches = list(scan.batches(path, *_span(path), rows, reread))
    # the columns the scanner writes as dictionaries, as text
    text = [pa.RecordBatch.from_arrays([c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c for c in b.columns],
                                       names=b.schema.names) for b in batches]
    return pa.Table.from_batches(text).select(list(scan.COLUMNS))


def _assert_same_batches(path: Path, **kwargs) -> pa.Table:
    ours = _scanned(path, **kwargs)
    theirs = _duckdb_batches(path, _span(path)).select(list(scan.COLUMNS)).cast(ours.schema)
    for col in scan.COLUMNS:
        a, b = ours.column(col).to_pylist(), theirs.column(col).to_pylist()
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y and not (x != x and y != y)]
        assert len(a) == len(b) and not diff, f"{path.name}: {col} differs at rows {diff[:5]}: " \
                                              f"{[(a[i], b[i]) for i in diff[:3]]}"
    return ours


def _assert_same_events(path: Path, monkeypatch) -> pa.Table:
    """`parse.parse_events` (the digest: kinds, codes, exact ns, args.type) with and without the scanner."""
    ours = parse.parse_events(path)
    with monkeypatch.context() as m:
        m.setenv("NBPROFILER_NO_SCAN", "1")
        theirs = parse.parse_events(path)
    assert ours.equals(theirs), path
    return ours


def test_the_scanner_is_built_where_a_compiler_is():
    """The build hook compiled it (`pip install` of the package): a machine with a C compiler reads traces
    with it."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}): traces are read by duckdb alone")
    assert scan.available()


pytestmark = pytest.mark.skipif(not scan.available(), reason="the trace scanner is not built (no C compiler)")


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_real_trace_reads_as_duckdb_reads_it(path, monkeypatch):
    table = _assert_same_batches(path)
    assert table.num_rows > 10
    _assert_same_events(path, monkeypatch)


def test_the_benchmark_shapes_read_as_duckdb_reads_them(tmp_path, monkeypatch):
    """The MindSpore shape (ts as text with 3 decimals past 1e15, dur as numbers of 16 digits) and the
    Kineto one (ts as numbers of 16 digits, object form, arrays in args): no event is left to duckdb."""
    import sys
    from nbprofiler.synthetic import write_trace
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from kineto_trace import write_kineto_trace
    ms, kineto = tmp_path / "ms.json", tmp_path / "kineto.json"
    write_trace(ms, 3_000_000, seed=5)
    write_kineto_trace(kineto, 3_000_000, seed=5, array_at="last")
    for path in (ms, kineto):
        rereads: list = []
        table = _assert_same_batches(path, rereads=rereads)
        assert table.num_rows > 10_000 and rereads == []
        events = _assert_same_events(path, monkeypatch)
        if path is ms:   # MindSpore's host events carry args.type (Kineto's none)
            assert events.column("arg_type").null_count < events.num_rows
        assert events.column("ts_ns").null_count < events.num_rows // 10


# Values of every kind, and the ones whose text the scanner leaves to duckdb (exponents, 17 digits, -0,
# zero, integers past 64 bits, escapes in args, lone surrogates, keys written with escapes).
_NUMBERS = [0, -1, 7, 2 ** 63 - 1, 2 ** 64 + 5, -2 ** 63 - 3, 1.5, -0.0, 0.0, 1e-7, 3.25e20, 123.456, 0.0001,
            1700000000018.093, 4398046511104.125, 5e-324, 123456789.123456789, 12345678901234.5]
_TEXTS = ["", "a", "é", "中文", "😀", '"', "\\", "/", "\n", "\t", "\u2028", "\x01", "\x7f", "type", ',"type":', "X"]


def _value(rnd: random.Random, depth: int = 0):
    r = rnd.random()
    if depth < 3 and r < 0.15:
        return {rnd.choice(_TEXTS + ["type"] * 3): _value(rnd, depth + 1) for _ in range(rnd.randrange(4))}
    if depth < 3 and r < 0.25:
        return [_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    if r < 0.55:
        return "".join(rnd.choice(_TEXTS) for _ in range(rnd.randrange(5)))
    if r < 0.9:
        return rnd.choice(_NUMBERS)
    return rnd.choice([True, False, None])


def _events(seed: int, n: int) -> str:
    rnd = random.Random(seed)
    events = []
    for _ in range(n):
        event = {}
        for key in rnd.sample(["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "args", "other"], rnd.randrange(3, 10)):
            if key == "ph":
                event[key] = rnd.choice(["X", "B", "E", "M", "C", "s", "f", "t", "i", "XX", None, 1])
            elif key == "args":
                event[key] = rnd.choice([_value(rnd), {"type": _value(rnd)}, {"a": 1, "type": "HostCpuOps"}, None])
            elif key in ("ts", "dur"):
                event[key] = rnd.choice([rnd.choice(_NUMBERS), str(rnd.choice(_NUMBERS)), "12.5", "abc", None, "1e3"])
            else:
                event[key] = _value(rnd)
        events.append(event)
    text = json.dumps(events, ensure_ascii=rnd.random() < 0.5, indent=rnd.choice([None, 1]))
    return text.replace("/", "\\/") if rnd.random() < 0.5 else text


@pytest.mark.parametrize("seed", range(12))
def test_events_of_every_kind_read_as_duckdb_reads_them(tmp_path, monkeypatch, seed):
    path = tmp_path / "events.json"
    path.write_text(_events(seed, 300), encoding="utf-8")
    rereads: list = []
    _assert_same_batches(path, rows=64, rereads=rereads)
    assert sum(rereads) > 0   # the values left to duckdb were there
    _assert_same_events(path, monkeypatch)


def test_events_across_blocks_and_larger_than_a_block(tmp_path, monkeypatch):
    """The text is read block by block: events cut at every place by a block's end, and events many blocks
    long, read whole."""
    events = [{"ph": "X", "name": f"op{i}", "pid": 1, "tid": i % 3, "ts": str(1000 + i), "dur": 1.5,
               "args": {"type": "t", "pad": "x" * (i * 37 % 500)}} for i in range(400)]
    events[17]["args"]["pad"] = "y" * 5000
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(events, indent=1))
    monkeypatch.setattr(scan, "BLOCK_BYTES", 97)
    table = _assert_same_batches(path, rows=50)
    assert table.column("name").to_pylist() == [f"op{i}" for i in range(400)]


@pytest.mark.parametrize("text", ['[{"ph": "X", "ts": 1,}]', '[{"ph": "X"} {"ph": "X"}]', '[{"ph": "X", "ph": "B"}]',
                                  '[{"ph": "X"}', '[{"ph": "X"}] x', '{"ph": "X"}', '[{"ph": "X", "ts": 01}]',
                                  '[{"ph": "X", "name": "a\x01"}]', '[{"ph": "X", "name": "\\q"}]', '[NaN]'])
def test_what_the_scanner_does_not_take_raises(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(scan.ScanError):
        list(scan.batches(path, 0, len(text), 100, parse._reread))


@pytest.mark.parametrize("tail", ['{"ph": "X", "name": "b", "ts": 2, "dur": 1,}]',
                                  '{"ph": "X", "name": "b", "name": "c", "ts": 2, "dur": 1}]',
                                  '{"ph": "X", "name": "b", "ts": 2, "dur": 1}',
                                  '{"ph": "X", "name": "b", "ts": 2, "dur": 1}] [1]'])
def test_text_the_scanner_does_not_take_loads_as_duckdb_takes_it(tmp_path, monkeypatch, tail):
    """Text the scanner does not take goes to duckdb and the exact validator: the same frames (duckdb takes a
    trailing comma) or the same error, naming the file, as a load without the scanner."""
    events = ",\n".join(json.dumps({"ph": "X", "name": f"a{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}) for i in range(50))
    path = tmp_path / "trace.json"
    path.write_text("[" + events + ",\n" + tail)

    def load():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return load_trace([path], progress=False).timeline
            except ProfilerDataError as e:
                return str(e)
    ours = load()
    monkeypatch.setenv("NBPROFILER_NO_SCAN", "1")
    theirs = load()
    if isinstance(theirs, str):
        assert ours == theirs and str(path) in ours
    else:
        assert ours.equals(theirs) and len(ours) >= 50


def test_a_scan_that_fails_midway_lets_go_of_what_it_kept(tmp_path, monkeypatch):
    """A scan that fails after several batches discards what its digest kept, then duckdb reads the file:
    the frames are those of a load without the scanner."""
    from nbprofiler.io.trace import disk as trace_disk
    from nbprofiler.synthetic import write_trace
    path = tmp_path / "trace.json"
    write_trace(path, 20_000_000, seed=3)
    calls, real_scan = [], scan._scan

    def failing(*args):
        calls.append(1)
        n = real_scan(*args)
        if len(calls) == 4:
            args[-1]._obj.value = 2   # the status: an error here
        return n
    monkeypatch.setattr(scan, "_scan", failing)
    monkeypatch.setattr(scan, "BLOCK_BYTES", 1 << 20)
    discarded, real_discard = [], trace_disk._Sink.discard

    def discard(sink):
        discarded.append(len(sink.kept))
        real_discard(sink)
    monkeypatch.setattr(trace_disk._Sink, "discard", discard)
    data = load_trace([path], progress=False)
    assert len(calls) == 4 and discarded and discarded[0] >= 3
    monkeypatch.setenv("NBPROFILER_NO_SCAN", "1")
    plain = load_trace([path], progress=False)
    assert data.timeline.equals(plain.timeline) and len(data.timeline) > 50_000


def test_the_scanner_reads_ts_to_exact_nanoseconds(tmp_path):
    """ts as text past 2^53 ns, and as numbers of 3 decimals below 2^42 us: the integer ns of the decimal
    cast, with no float in between."""
    ts = ["1795235132857961.500", "1795235132857961.501", "-12.25", "7", "0.001"]
    nums = ["1700000000018.093", "4398046511103.999", "12.5", "0"]
    events = [{"ph": "X", "ts": t, "dur": 1} for t in ts]
    text = json.dumps(events)[:-1] + ", " + ", ".join(f'{{"ph": "X", "ts": {n}, "dur": 1}}' for n in nums) + "]"
    path = tmp_path / "trace.json"
    path.write_text(text)
    batch = next(scan.batches(path, 0, len(text), 100, parse._reread))
    assert batch.column("ts_known").to_pylist() == [True] * 9
    want = [1795235132857961500, 1795235132857961501, -12250, 7000, 1, 1700000000018093, 4398046511103999, 12500, 0]
    assert batch.column("ts_ns").to_pylist() == want
    assert np.array_equal(parse.parse_events(path).column("ts_ns").to_numpy(), np.array(want))


def test_an_event_over_the_size_limit_is_left_to_duckdb(tmp_path, monkeypatch):
    """An event larger than `scan.MAX_EVENT_BYTES` stops the scan (duckdb's reads charge the memory guard for
    it first); the trace loads as it does without the scanner."""
    events = [{"ph": "X", "name": f"op{i}", "pid": 1, "tid": 1, "ts": str(i), "dur": 1, "args": {"pad": "p" * 3000}}
              for i in range(30)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(events))
    monkeypatch.setattr(scan, "MAX_EVENT_BYTES", 2000)
    monkeypatch.setattr(scan, "BLOCK_BYTES", 1000)
    with pytest.raises(scan.ScanError, match="over 2,000 bytes"):
        list(scan.batches(path, 0, path.stat().st_size, 100, parse._reread))
    ours = load_trace([path], progress=False).timeline
    monkeypatch.setenv("NBPROFILER_NO_SCAN", "1")
    assert ours.equals(load_trace([path], progress=False).timeline) and len(ours) == 30


def test_a_library_of_another_layout_is_not_used(tmp_path):
    """A library built from another version of _scan.c (a stale build beside newer Python) is left alone:
    passing it this module's buffers would write outside them."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    import subprocess
    for name, body in (("old", ""), ("other", "int nbp_scan_abi(void) { return 999; }")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "_scan.c").write_text(body + "\nint nbp_scan(void) { return 0; }\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(folder / "_scan.so"), str(folder / "_scan.c")], check=True)
        assert scan._load(folder) is None
    assert scan._load() is not None   # the package's own


def _counting_sets(monkeypatch) -> list:
    """Each `scan._Rows` made (a set of the scanner's buffers) appends to the list returned."""
    made, real_init = [], scan._Rows.__init__

    def init(rows, *args):
        made.append(rows)
        real_init(rows, *args)
    monkeypatch.setattr(scan._Rows, "__init__", init)
    return made


def test_the_buffers_of_a_batch_let_go_are_used_again(tmp_path, monkeypatch):
    """Batches share the scanner's buffers; once nothing holds a batch's arrays, the next call writes into
    the same buffers. Batches still held (every third one here, whole, and a column of another) keep their
    values: the rows duckdb reads."""
    from nbprofiler.synthetic import write_trace
    path = tmp_path / "trace.json"
    write_trace(path, 2_000_000, seed=7)
    made = _counting_sets(monkeypatch)
    n_batches = sum(1 for _ in scan.batches(path, *_span(path), 500, parse._reread))
    assert n_batches > 20 and len(made) <= 2   # the batch before is held while the next is made
    made.clear()
    held, names, offset = [], [], 0
    for i, batch in enumerate(scan.batches(path, *_span(path), 500, parse._reread)):
        if i % 3 == 0:
            held.append((offset, batch))
        elif i % 3 == 1:
            names.append((offset, batch.column("name")))
        offset += batch.num_rows
    assert len(held) + 1 <= len(made) < n_batches
    theirs = _duckdb_batches(path, _span(path))
    for at, batch in held:
        for col in scan.COLUMNS:
            ours = batch.column(col)
            ours = ours.cast(pa.string()) if pa.types.is_dictionary(ours.type) else ours
            assert ours.to_pylist() == theirs.column(col).slice(at, batch.num_rows).to_pylist(), (at, col)
    for at, column in names:
        assert column.cast(pa.string()).to_pylist() == theirs.column("name").slice(at, len(column)).to_pylist()


@pytest.mark.parametrize("on_disk", [False, True], ids=["in memory", "on disk"])
def test_a_trace_load_reuses_the_scanners_buffers(tmp_path, monkeypatch, on_disk):
    """The trace's build holds no batch of the reader's past its digest (the names' dictionaries it keeps
    are copies): a few sets of buffers serve every batch, whatever the trace's length."""
    from nbprofiler.synthetic import write_trace
    path = tmp_path / "trace.json"
    write_trace(path, 8_000_000, seed=11)
    monkeypatch.setattr(parse, "_BATCH_ROWS", 1000)
    monkeypatch.setattr(parse, "_MIN_BATCH_ROWS", 1000)
    if on_disk:
        monkeypatch.setenv("NBPROFILER_TRACE_ON_DISK", "1")
    calls, real_take = [], scan._Pool.take
    monkeypatch.setattr(scan._Pool, "take", lambda pool, n: calls.append(n) or real_take(pool, n))
    made = _counting_sets(monkeypatch)
    data = load_trace([path], progress=False)
    assert len(data.timeline) > 10_000 and len(calls) > 30
    assert len(made) <= 8


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_text_gathered_from_chunks_is_what_arrows_take_gives(seed):
    """`scan.gather_text` (the compiled gather a sorted track's args go through) gives Arrow's take of the
    chunks: chunks that are slices of larger arrays, empty ones, missing values, empty strings, any order."""
    rng = np.random.default_rng(seed)
    chunks = []
    for k in range(int(rng.integers(1, 12))):
        n = int(rng.integers(0, 400))
        values = [None if rng.random() < 0.1 else "é" * int(rng.integers(0, 3)) + "x" * int(rng.integers(0, 60))
                  for _ in range(n + 7)]
        lo = int(rng.integers(0, 7))
        chunks.append(pa.array(values, pa.large_string()).slice(lo, n))   # a slice: offset > 0
    column = pa.chunked_array(chunks, pa.large_string())
    take = rng.permutation(len(column))
    if seed == 2:
        take = np.concatenate([take, take[:50]])   # a row taken twice
    got = scan.gather_text(column, take)
    want = column.take(pa.array(take, pa.int64())).combine_chunks()
    assert got.validate(full=True) is None
    assert got.equals(want) and got.null_count == want.null_count
    assert scan.gather_text(column, np.zeros(0, np.int64)).to_pylist() == []
    assert scan.gather_text(pa.chunked_array([pa.array([1, 2])]), np.array([1])) is None   # not text


def test_a_sorted_track_is_the_same_with_and_without_the_compiled_gather(monkeypatch):
    """`disk._sorted_track` gathers the args with the library, else with Arrow's take: the same table."""
    from nbprofiler.io.trace import disk
    rng = np.random.default_rng(5)
    spans = []
    for b in range(6):
        n = 300
        spans.append((b, pa.record_batch({
            "name": pa.array(rng.integers(0, 9, n), pa.int32()), "cat": pa.array(rng.integers(0, 3, n), pa.int32()),
            "arg_type": pa.array(rng.integers(0, 3, n), pa.int32()),
            "ts_ns": pa.array(rng.integers(0, 10_000, n), pa.int64()), "dur": pa.array(rng.random(n)),
            "args": pa.array([None if i % 11 == 0 else f'{{"b": {b}, "i": {i}}}' for i in range(n)], pa.large_string()),
            "row": pa.array(np.arange(n), pa.uint32())})))
    with_library = disk._sorted_track(spans, None)
    monkeypatch.setattr(scan, "_gather", None)
    assert scan.gather_text(pa.chunked_array([spans[0][1].column("args")]), np.arange(3)) is None
    without = disk._sorted_track(spans, None)
    assert with_library.equals(without)
    assert with_library.column("ts_ns").to_numpy().tolist() == sorted(with_library.column("ts_ns").to_numpy().tolist())
