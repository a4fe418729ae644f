"""Generators of damaged copies of real profiler files, for the damaged-input suite.

Each damage is a function bytes -> bytes (or None when it does not apply to that file). They model what
users meet: runs killed mid-write (truncation), copies that failed (empty, garbage), files edited by
hand or written by another version (columns removed or renamed, extra fields), encodings, and values
a buggy writer produces (NaN, inf, negative durations, repeated or shuffled records).
"""
from __future__ import annotations

import random
import re

_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _is_csv(name: str) -> bool:
    return name.endswith(".csv") or (name.endswith(".txt") and name.startswith(("flops_", "cpu_ms_memory")))


def truncate(fraction: float):
    def damage(data: bytes, name: str):
        return data[: int(len(data) * fraction)] if len(data) > 8 else None
    damage.__name__ = f"truncated_{int(fraction * 100)}pct"
    return damage


def empty(data, name):
    return b""


def garbage(data, name):
    rng = random.Random(len(data))
    return bytes(rng.randrange(256) for _ in range(min(len(data), 4096) or 64))


def non_utf8(data, name):
    lines = _lines(data)
    if len(lines) < 2 and len(data) < 4:
        return None
    mid = len(data) // 2
    return data[:mid] + b"\xff\xfe\xc3\x28" + data[mid:]


def column_removed(data, name):
    if not _is_csv(name):
        return None
    out = []
    for line in _lines(data):
        cells = line.split(b",")
        out.append(b",".join(cells[:1] + cells[2:]) if len(cells) > 2 else line)
    return b"\n".join(out)


def header_renamed(data, name):
    if not _is_csv(name):
        return None
    lines = _lines(data)
    head = lines[0].split(b",")
    head[0] = b"bogus_column"
    return b"\n".join([b",".join(head)] + lines[1:])


def too_many_fields(data, name):
    if not _is_csv(name):
        return None
    lines = _lines(data)
    if len(lines) < 2 or not lines[1].strip():
        return None
    lines[1] = lines[1] + b",1,2,3"
    return b"\n".join(lines)


def _replace_number(token: bytes):
    def damage(data: bytes, name: str):
        lines = _lines(data)
        # the second data line of text files, or a number in the middle of a JSON document
        target = 2 if len(lines) > 3 else 0
        m = _NUMBER.search(lines[target], len(lines[target]) // 3) or _NUMBER.search(lines[target])
        if not m:
            return None
        lines[target] = lines[target][: m.start()] + token + lines[target][m.end():]
        return b"\n".join(lines)
    damage.__name__ = f"value_{token.decode().replace('-', 'minus')}"
    return damage


def duplicated_record(data, name):
    lines = _lines(data)
    if len(lines) < 3 or name.endswith(".json"):
        return None
    return b"\n".join(lines[:2] + [lines[1]] + lines[2:])


def records_out_of_order(data, name):
    lines = _lines(data)
    if len(lines) < 4 or name.endswith(".json"):
        return None
    body = [ln for ln in lines[1:] if ln.strip()]
    return b"\n".join([lines[0]] + body[::-1]) + b"\n"


DAMAGES = [truncate(0.25), truncate(0.5), truncate(0.9), empty, garbage, non_utf8, column_removed,
           header_renamed, too_many_fields, _replace_number(b"NaN"), _replace_number(b"inf"),
           _replace_number(b"-5"), duplicated_record, records_out_of_order]
# Damages after which a file that nbprofiler reads can never be loaded as if nothing happened.
DESTRUCTIVE = {"empty", "garbage", "non_utf8"}
