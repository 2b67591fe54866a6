"""What the terminal allows, through rich: how wide to write (or not to wrap at all, on a
pipe), whether to colour, and log text made safe to show.

Every piece of text that came from a log goes through `escape` before it reaches rich: a
control character (C0, DEL, C1) or a bidirectional override is written as Python writes
it (`\\x1b`, `\\u202e`), so an OSC 52 in a task name cannot write the user's clipboard and
a right-to-left override cannot turn a path round. Only the tool's own styles, which rich
writes, reach the terminal raw."""

from __future__ import annotations

import io
import os
import re
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

FALLBACK = 80  # a pty nobody sized (`script`, CI runners, containers report 0 columns)
UNWRAPPED = 1 << 16  # the width a pipe is written at: a line as long as it is, never wrapped
# C0, DEL, C1, and the bidirectional marks, embeddings, overrides and isolates (Unicode's
# Bidi_Control): what a terminal acts on, or shows in an order that is not the text's
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape(text: str) -> str:
    """`text` with every control character and bidi control written as an escape
    (`\\x1b`, `\\n`, `\\u202e`): what a log holds is shown, never acted on."""
    return UNSAFE.sub(lambda m: repr(m.group())[1:-1] if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def width(stream: TextIO) -> int | None:
    """The width to wrap at: `COLUMNS` when it is a positive number, else the terminal's
    width when it knows one, else FALLBACK on a terminal; None (never wrap) when `stream`
    is no terminal, as ripgrep and sqlite-utils write to a pipe or a file."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    if not _is_terminal(stream):
        return None
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # a stream with no descriptor
        columns = 0
    return columns if columns > 0 else FALLBACK


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


def colour(choice: str, stream: TextIO) -> bool:
    """--color: "always", "never", or "auto": as rich decides for `stream` (a terminal,
    or FORCE_COLOR set; never with NO_COLOR set to any value, https://no-color.org)."""
    if choice != "auto":
        return choice == "always"
    from rich.console import Console

    console = Console(file=stream)
    return console.is_terminal and not console.no_color and console.color_system is not None


def console(width: int | None, colour: bool) -> Console:
    """A rich console that writes into a string: `width` columns (None: unwrapped), the
    tool's styles in colour or none; it never reads the environment for either, the
    caller decided (`width`, `colour`)."""
    from rich.console import Console

    return Console(
        file=io.StringIO(),
        width=max(1, width) if width is not None else UNWRAPPED,
        force_terminal=colour,
        no_color=not colour,
        color_system="standard" if colour else None,
        highlight=False,
        markup=False,
        emoji=False,
        legacy_windows=False,
        _environ={},
    )


def rendered(out: Console, *parts: RenderableType) -> str:
    """`parts` printed on `out`, each line's trailing blanks dropped (rich pads a table's
    last column; a pipe's unwrapped lines are as long as their text)."""
    with out.capture() as captured:
        for part in parts:
            out.print(part, crop=False)
    return "\n".join(_TRAILING.sub(lambda m: "".join(_SGR.findall(m.group())), line) for line in captured.get().rstrip("\n").split("\n"))


_SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's own styles
_TRAILING = re.compile(r"(?:\s|\x1b\[[0-9;]*m)+$")  # blanks at a line's end, among the styles around them
