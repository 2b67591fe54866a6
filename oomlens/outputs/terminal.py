"""What the terminal allows: how wide to write, whether to colour, and lines wrapped to it."""

from __future__ import annotations

import os
import re
import textwrap
from typing import TextIO

FALLBACK = 80  # a pipe, a file, or a pty nobody sized (`script`, CI runners, containers report 0 columns)


def width(stream: TextIO) -> int:
    """`COLUMNS` when it is a positive number, else the terminal's width when it knows one,
    else FALLBACK: never 0 or less, whatever the terminal says."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # not a terminal, or a stream with no descriptor
        columns = 0
    return columns if columns > 0 else FALLBACK


def colour(choice: str, stream: TextIO) -> bool:
    """--color: "always", "never", or "auto": only on a terminal, and not when NO_COLOR
    holds any value (https://no-color.org). FORCE_COLOR is not read: some CI runners set it
    for every step, and colour codes would then reach the files `parse` is piped into."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


_UNIT = re.compile(r"(?<=\d) (?=[KMGT]i?B\b)")


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` in lines of at most `width` characters (any width from 1 up; words longer than
    a line are split), each after `indent` when there is room for it; a size and its unit
    stay on one line."""
    indent = indent if width > len(indent) + 8 else ""
    kept = _UNIT.sub("\xa0", text)  # textwrap breaks at ASCII whitespace only
    lines = textwrap.wrap(kept, max(1, width), initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
    return [line.replace("\xa0", " ") for line in lines] or [""]
