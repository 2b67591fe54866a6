"""The generic operations of tests/robustness/transforms.toml, each once, over bytes: a
transform may add bytes that are not UTF-8."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

RAY_PREFIX = re.compile(rb"^(\((?:raylet|gcs_server|[^\s()]*(?: rank=\d+)? ?pid=[^)]*)(?:, ip=[^)]*)?\))")
ESC = b"\x1b["


def _lines(data: bytes) -> tuple[list[bytes], bool]:
    ends = data.endswith(b"\n")
    lines = data.split(b"\n")
    return (lines[:-1] if ends else lines), ends


def _join(lines: list[bytes], ends: bool) -> bytes:
    return b"\n".join(lines) + (b"\n" if ends else b"")


def prefix(data: bytes, template: str) -> bytes:
    lines, ends = _lines(data)
    out = []
    for n, line in enumerate(lines, 1):
        hh, rest = divmod(11 * 3600 + n, 3600)
        mm, ss = divmod(rest, 60)
        values = {"n": n, "hh": f"{hh % 24:02d}", "mm": f"{mm:02d}", "ss": f"{ss:02d}", "ns": f"{n:09d}"}
        out.append(template.format(**values).encode("utf-8") + line)
    return _join(out, ends)


def colour(data: bytes, form: str) -> bytes:
    lines, ends = _lines(data)
    out = []
    for line in lines:
        if ESC not in line:
            m = RAY_PREFIX.match(line)
            if m:
                code = b"33m" if m.group(1).startswith(b"(raylet") else b"36m"
                line = ESC + code + m.group(1) + ESC + b"0m" + line[m.end() :]
        out.append(line.replace(ESC, form.encode("utf-8")))
    return _join(out, ends)


def wrap(data: bytes, width: int) -> bytes:
    lines, ends = _lines(data)
    out = []
    for line in lines:
        text = line.decode("utf-8", "surrogateescape")
        out += [text[i : i + width].encode("utf-8", "surrogateescape") for i in range(0, max(len(text), 1), width)]
    return _join(out, ends)


def crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def pad(data: bytes, width: int) -> bytes:
    lines, ends = _lines(data)
    return _join([line + b" " * (width - len(line.decode("utf-8", "replace"))) if len(line) < width and line else line for line in lines], ends)


def reverse(data: bytes) -> bytes:
    lines, ends = _lines(data)
    return _join(lines[::-1], ends)


def noise(data: bytes, lines: list[str]) -> bytes:
    junk = [bytes.fromhex(line) for line in lines]
    body, ends = _lines(data)
    return _join(junk + body + junk, ends)


OPS: dict[str, Callable[..., bytes]] = {f.__name__: f for f in (prefix, colour, wrap, crlf, pad, reverse, noise)}


def apply(transform: dict[str, Any], data: bytes) -> bytes:
    params = {k: v for k, v in transform.items() if k not in ("name", "op", "sample")}
    return OPS[transform["op"]](data, **params)
