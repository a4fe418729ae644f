"""The "Source" panel: where an operator was called from, as `nbprofiler.analysis.source.op_source` finds
it. Each distinct stack is shown innermost frame first, as text (every path, function and op name is
escaped: they are strings of the profiled program), with the first frame in user code highlighted. Where
that file is on this machine, an "Open" link (class `OPEN_CLASS`, ``data-path``/``data-line``) asks the
nbprofiler JupyterLab extension to open it in the editor at that line (its ``nbprofiler:open-source``
command, which listens for clicks on such links anywhere in the page); elsewhere the stack is all there is.
"""
from __future__ import annotations

import html

from . import theme

OPEN_CLASS = "nbprofiler-open-source"   # the lab extension opens the file of a clicked link of this class
MAX_STACKS = 3                          # stacks shown (the most frequent); the panel says how many there are
_MARK_CSS = "background: var(--jp-warn-color3, #fff3c4); font-weight: bold;"
_PRE_CSS = (f"font-family: var(--jp-code-font-family, {theme.MONO_FONT.replace(chr(34), chr(39))});"
            "font-size: var(--jp-code-font-size, 12px); white-space: pre-wrap; word-break: break-all;"
            "margin: 4px 0; padding: 4px 6px;" + theme.BORDER_CSS)


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def open_link(path: str, line: int, label: str = "Open") -> str:
    """The link the lab extension handles: opens ``path`` (a file on this machine) at ``line``."""
    return (f'<a href="#" class="{OPEN_CLASS}" data-path="{_e(path)}" data-line="{int(line)}" '
            f'title="Open {_e(path)} at line {int(line)} in JupyterLab\'s editor">{_e(label)}</a>')


def _frame_line(fr: dict, user: bool) -> str:
    text = f"#{int(fr['depth'])} {_e(fr['file'])}({fr['line']}): {_e(fr['function'])}"
    if user:
        text = f'<span style="{_MARK_CSS}" data-user-frame="1">{text}</span>'
    if fr.get("local"):
        text += " " + open_link(fr["local"], int(fr["line"]))
    return text


def source_html(src) -> str:
    """The panel's HTML for an `OpSource`."""
    head = f'<div style="{theme.PANEL_CSS}" class="nbprofiler-source"><b>Source of {_e(src.op_name)}</b>'
    if not src.stacks:
        return f'{head}<div style="{theme.MUTED_CSS}">{_e(src.reason)}</div></div>'
    calls = sum(s.calls for s in src.stacks)
    via = ("its own calls' stacks" if src.via == "own"
           else "the stacks of the framework ops that launched it (followed back along the timeline's arrows)")
    parts = [head, f'<div style="{theme.MUTED_CSS}">{len(src.stacks)} distinct stack(s) over {calls} call(s): '
                   f'{_e(via)}; innermost frame first, the first frame in your code highlighted.</div>']
    for s in src.stacks[:MAX_STACKS]:
        user = s.user_frame
        where = ""
        if user is not None:
            where = f"your code: {_e(user['file'])}, line {user['line']} in {_e(user['function'])}"
            where += (" " + open_link(user["local"], int(user["line"])) if user.get("local")
                      else " (the file is not on this machine: the stack is all there is)")
        else:
            where = "no frame of this stack is in your code (all in installed packages or Python itself)"
        lines = "\n".join(_frame_line(fr, fr["depth"] == s.user_depth) for fr in s.frames.to_dict("records"))
        parts.append(f'<div style="margin-top:6px"><b>{s.calls} call(s)</b> from {_e(s.event)}: {where}</div>'
                     f'<pre style="{_PRE_CSS}">{lines}</pre>')
    if len(src.stacks) > MAX_STACKS:
        parts.append(f'<div style="{theme.MUTED_CSS}">{len(src.stacks) - MAX_STACKS} more stack(s) not shown '
                     "(`nbprofiler.analysis.source.op_source` lists them all).</div>")
    return "".join(parts) + "</div>"


__all__ = ["source_html", "open_link", "OPEN_CLASS"]
