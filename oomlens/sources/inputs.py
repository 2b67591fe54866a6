"""Inputs: one readable stream each, with what is known of it before it is read (its role,
pid, node and session) and the problems met reading it; a path or an error told as one line."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO


@dataclass
class Input:
    """One readable stream and what is known of it before reading it.

    `opener` is None when the input cannot be read at all (its problems say why)."""

    path: str
    role: str = "other"
    pid: int | None = None
    node: str | None = None
    opener: Callable[[], BinaryIO] | None = None
    file: str | None = None  # a file on disk another process may open again (not a member, not a pipe)
    size: int = 0  # about how many bytes of text the file holds (text_size): the pool reads the biggest first
    bytes: int = 0
    lines: int = 0
    problems: list[str] = field(default_factory=list)
    readings: int = 0  # memory readings read (reduce.py)
    readings_kept: int = 0  # and kept
    failures: int = 0  # other events read (reduce.py)
    failures_kept: int = 0  # and kept
    session: str | None = None  # the Ray session folder (session_*) the input lies in
    hole: int = 0  # NUL bytes its text begins after (text_stream reads past them)

    def __post_init__(self) -> None:
        self.path = shown(self.path)

    def to_dict(self) -> dict:
        out = {"path": self.path, "role": self.role, "bytes": self.bytes, "lines": self.lines, "problems": self.problems}
        if self.readings:  # additive: the memory lines read, and how many of them the diagnosis keeps
            out["readings"] = {"read": self.readings, "kept": self.readings_kept}
        if self.failures_kept < self.failures:  # additive: the other events read, where a flood of them was reduced
            out["failures"] = {"read": self.failures, "kept": self.failures_kept}
        if self.session is not None:  # additive: the Ray session it lies in
            out["session"] = self.session
        return out


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1: a newline or an escape sequence in a name


def shown(path: str) -> str:
    """A path as one line of text: bytes of a file name that are not UTF-8 become U+FFFD
    (JSON and terminals need text) and control characters are escaped as Python writes
    them, so that a name holding a newline cannot forge a line of oomlens's own; the file
    is still opened by its real name."""
    return one_line(path.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def one_line(text: str) -> str:
    """`text` with its control characters escaped (`\\n`, `\\x1b`): one line, no terminal
    escape sequence. Idempotent: a backslash is left as it is."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def error_line(err: BaseException, named: bool = True) -> str:
    """An error as one line of a problem: its class (unless `named` is False: a decoder's
    message says enough) and its message's first line (lark wraps a Transformer's error in
    three lines; a decoder's or a log's message may hold more)."""
    cause = getattr(err, "orig_exc", err)
    text = str(cause).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(cause).__name__}: {first}" if named else first
