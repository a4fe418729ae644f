"""The widget that carries a Bokeh layout to the page and its changes after: jupyter_bokeh's ``BokehModel``,
sending each batch of changes as one message, its small arrays inline.

jupyter_bokeh sends every change of the document as a Bokeh ``PATCH-DOC`` message in fragments, each a
comm message of its own: a header, a metadata and a content fragment, then two per array (its header and
its bytes). A timeline re-query changes the bars' source (ten arrays), the flows' (six), the counters'
and the held range: ~50 comm messages, each framed and signed by the kernel, relayed by the Jupyter server
and handled in turn by the page. `BokehWidget` sends the changes made inside `batched` as one
``PATCH-DOC`` holding all of them, and writes an array of at most `INLINE_MAX_BYTES` into the content
fragment (base64 of its gzip, the form BokehJS decodes) instead of two fragments of its own; larger arrays
stay binary fragments, which no one re-encodes on the way (inline, an array costs the kernel its gzip, its
base64 and the JSON of the message: more than its two messages from ~20 KB up). The page's side is
jupyter_bokeh's own: BokehJS's receiver and deserializer take either form.
"""
from __future__ import annotations

import base64
import contextlib
import gzip
import json

from bokeh.core.serialization import BytesRep, Serializer
from bokeh.document.json import PatchJson
from bokeh.protocol.messages.patch_doc import patch_doc
from jupyter_bokeh import BokehModel

INLINE_MAX_BYTES = 16_384


class _PatchSerializer(Serializer):
    """Bokeh's serializer, with arrays of at most `INLINE_MAX_BYTES` written inline."""

    def _encode_bytes(self, obj) -> BytesRep:
        if (obj.nbytes if isinstance(obj, memoryview) else len(obj)) > INLINE_MAX_BYTES:
            return super()._encode_bytes(obj)
        data = obj.tobytes() if isinstance(obj, memoryview) else bytes(obj)
        # stored, not deflated (level 0): BokehJS gunzips every inline array, and at level 1 a 12 KB float64
        # bar column took ~0.55 ms to come out ~7 % smaller (a re-query sends a dozen such arrays)
        return BytesRep(type="bytes", data=base64.b64encode(gzip.compress(data, compresslevel=0, mtime=1)).decode())


class BokehWidget(BokehModel):
    """``BokehModel`` whose document changes go to the page as one ``PATCH-DOC`` per change, or per
    `batched` block, small arrays inline."""

    def __init__(self, model, **kwargs):
        self._held_events: list | None = None
        super().__init__(model, **kwargs)

    @contextlib.contextmanager
    def batched(self):
        """Hold the document's changes made inside the block and send them together at its end (nested
        blocks send with the outermost)."""
        outer = self._held_events is None
        if outer:
            self._held_events = []
        try:
            yield self
        finally:
            if outer:
                events, self._held_events = self._held_events, None
                if events:
                    self._send_patch(events)

    def _document_patched(self, event) -> None:
        if event.setter is self:   # a change the page made: it has it already
            return
        if self._held_events is not None:
            self._held_events.append(event)
        else:
            self._send_patch([event])

    def _send_patch(self, events: list) -> None:
        """``events`` as one ``PATCH-DOC`` (`patch_doc.create` with `_PatchSerializer`), in the fragments
        jupyter_bokeh's page side reads."""
        doc = events[0].document
        serializer = _PatchSerializer(references=doc.models.synced_references)
        content = PatchJson(events=serializer.encode(events))
        doc.models.flush_synced(lambda model: not serializer.has_ref(model))
        msg = patch_doc(patch_doc.create_header(), {}, content)
        msg.add_buffers(*serializer.buffers)
        for fragment in (msg.header_json, msg.metadata_json, msg.content_json):
            self.send({"msg": "patch", "payload": fragment})
        for buffer in msg.buffers:
            self.send({"msg": "patch", "payload": json.dumps(buffer.ref)})
            self.send({"msg": "patch"}, [buffer.to_bytes()])
