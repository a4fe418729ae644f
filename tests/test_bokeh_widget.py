"""`BokehWidget`: a batch of document changes reaches the page as one PATCH-DOC in the fragments jupyter_bokeh's
page side reads (header, metadata, content, then a header and the bytes of each large array), small
arrays inline. The fragments the widget sends are read back by Bokeh's own protocol receiver and applied
to a copy of the document, which must then equal the kernel's; and a timeline re-query sends one patch."""
from __future__ import annotations

import json

import numpy as np
from bokeh.document import Document
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure
from bokeh.protocol import Protocol
from bokeh.protocol.receiver import Receiver

import nbprofiler
from nbprofiler.views.bokeh_widget import INLINE_MAX_BYTES, BokehWidget

from .conftest import DATA


def _sent(widget) -> list[tuple[dict, list]]:
    """Record what ``widget`` sends to the page."""
    out: list[tuple[dict, list]] = []
    widget.send = lambda content, buffers=None: out.append((content, list(buffers or [])))
    return out


def _done(coroutine):
    """The result of a coroutine that never suspends (Bokeh's receiver is async only in name), run without an
    event loop: another test of the session may have left one running in this thread."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the receiver waited for something")


def _apply(messages: list[tuple[dict, list]], doc: Document) -> list:
    """Feed the fragments to Bokeh's receiver as the page does (text payloads, then binary ones) and apply
    every message it completes to ``doc``; returns the messages."""
    receiver, done = Receiver(Protocol()), []
    for content, buffers in messages:
        assert content["msg"] == "patch"
        fragment = content["payload"] if "payload" in content else bytes(buffers[0])
        msg = _done(receiver.consume(fragment))
        if msg is not None:
            msg.apply_to_document(doc)
            done.append(msg)
    return done


def _layout():
    src = ColumnDataSource({"x": np.arange(3.0), "y": np.arange(3, dtype=np.int32)}, name="src")
    flows = ColumnDataSource({"x0": np.zeros(2)}, name="flows")
    fig = figure(x_range=Range1d(0, 10, name="xr"))
    fig.scatter("x", "y", source=src)
    fig.scatter("x0", "x0", source=flows)
    return column(fig)


def test_a_batch_is_one_patch_with_small_arrays_inline_and_large_ones_binary():
    layout = _layout()
    widget = BokehWidget(layout)
    # the page's copy of the document: the JSON the widget was rendered from
    docs_json = widget.render_bundle["docs_json"]
    page = Document.from_json(next(iter(docs_json.values())))
    sent = _sent(widget)
    doc = layout.document
    src, flows, xr = (doc.get_model_by_name(n) for n in ("src", "flows", "xr"))
    big = INLINE_MAX_BYTES // 8 + 100            # float64 values: one array over the inline limit
    with widget.batched():
        xr.update(start=2.0, end=5.0)
        src.data = {"x": np.linspace(0, 1, big), "y": np.arange(big, dtype=np.int32)}
        flows.data = {"x0": np.array([1.5, 2.5])}
    # x (big float64) is binary; y (int32, 4 bytes each) is under the limit, as are the flows
    assert big * 8 > INLINE_MAX_BYTES >= big * 4
    assert len(sent) == 3 + 2 * 1, [c.get("payload", "<bytes>")[:60] for c, _ in sent]
    header = json.loads(sent[0][0]["payload"])
    assert header["msgtype"] == "PATCH-DOC" and header["num_buffers"] == 1
    events = json.loads(sent[2][0]["payload"])["events"]
    assert len(events) == 4   # start, end, the bars' data, the flows' data: one message
    assert len(_apply(sent, page)) == 1
    got = page.get_model_by_name("src").data
    np.testing.assert_array_equal(got["x"], src.data["x"])
    np.testing.assert_array_equal(got["y"], src.data["y"])
    np.testing.assert_array_equal(page.get_model_by_name("flows").data["x0"], [1.5, 2.5])
    assert (page.get_model_by_name("xr").start, page.get_model_by_name("xr").end) == (2.0, 5.0)


def test_a_change_outside_a_batch_is_sent_at_once_and_the_pages_own_change_is_not_echoed():
    layout = _layout()
    widget = BokehWidget(layout)
    page = Document.from_json(next(iter(widget.render_bundle["docs_json"].values())))
    sent = _sent(widget)
    xr = layout.document.get_model_by_name("xr")
    xr.start = 1.0
    assert len(sent) == 3
    _apply(sent, page)
    assert page.get_model_by_name("xr").start == 1.0
    sent.clear()
    # the page moved the axis: its change comes in as jupyter_bokeh's page side sends it
    widget._sync_model(widget, {"event": "jsevent", "kind": "ModelChanged", "model": {"id": xr.id}, "attr": "end",
                                "new": 7.0}, [])
    assert xr.end == 7.0 and sent == []


def test_a_timeline_requery_reaches_the_page_as_one_patch():
    from nbprofiler.views.timeline import TimelineView
    view = TimelineView(nbprofiler.load(DATA / "mindspore2" / "lenet_pynative"), debounce_s=0)
    page = Document.from_json(next(iter(view._bokeh.render_bundle["docs_json"].values())))
    sent = _sent(view._bokeh)
    lo, hi = view.x_range.bounds
    view.set_window(lo + (hi - lo) * 0.4, lo + (hi - lo) * 0.45)
    assert len(_apply(sent, page)) == 1
    got = page.get_model_by_name("timeline_src")
    assert got.tags == view.source.tags
    for col in ("left", "right", "name_code", "type_code", "y"):
        np.testing.assert_array_equal(got.data[col], view.source.data[col])
    assert page.get_model_by_name("timeline_x_range").start == view.x_range.start
