"""Prefilter: find where any of many patterns may match in big buffers, before Python reads a line.

The native core (`oomlens._core`, core/src/engine.rs) does it over raw bytes: `Prefilter`
runs many patterns as one lazy DFA and tells where every match of each ends (and, made with
`starts`, where the last one starts); `Regex` is one pattern searched leftmost-first as
Python's `re` searches it, with no backtracking. Both read bytes as Latin-1, one character a
byte, as `re` reads bytes: a byte that is not UTF-8 still matches `.` or a negated class.
The patterns are the grammars' and data files' own, handed over as written: none is written
twice.
"""

from __future__ import annotations

import re
import re._constants as _sc  # type: ignore[import-not-found]  # re's own parser: typeshed types it only as sre_parse, deprecated
import re._parser as _sre  # type: ignore[import-not-found]

from ._core import Match, Prefilter, Regex, newlines, utf8_valid

__all__ = ["Match", "Prefilter", "Regex", "fast_regex", "line_superset", "newlines", "utf8_valid"]


def fast_regex(pattern: bytes) -> Regex:
    """A bytes regex run by the core: a DFA, no backtracking over alternatives at every byte."""
    return Regex(pattern.decode("ascii"))


def line_superset(pattern: str, flags: int = 0) -> Regex | None:
    """The core's DFA for the lines `pattern` may match on (as `re` with MULTILINE): every
    such line, and maybe more, which the caller reads with `re` itself. A DFA has no
    look-arounds: one that ends an alternative is matched as text (`(?=.*X)` is a line that
    holds X), any other dropped, which only adds lines. None where the pattern holds what
    no DFA runs (a backreference, a character past ASCII)."""
    if not pattern.isascii():
        return None
    try:
        parsed = _sre.parse(pattern, flags)
        rewritten = _unparse(parsed.data, tail=True)
    except (re.error, _Unrunnable):
        return None
    inline = "m" + ("i" if parsed.state.flags & re.IGNORECASE else "") + ("s" if parsed.state.flags & re.DOTALL else "")
    try:
        return Regex(f"(?{inline}){rewritten}")
    except ValueError:
        return None


class _Unrunnable(Exception):
    """A part of a pattern the DFA has no syntax for."""


_CATEGORIES = {
    _sc.CATEGORY_DIGIT: r"\d",
    _sc.CATEGORY_NOT_DIGIT: r"\D",
    _sc.CATEGORY_SPACE: r"\s",
    _sc.CATEGORY_NOT_SPACE: r"\S",
    _sc.CATEGORY_WORD: r"\w",
    _sc.CATEGORY_NOT_WORD: r"\W",
}
_AT = {
    _sc.AT_BEGINNING: "^",
    _sc.AT_BEGINNING_LINE: "^",
    _sc.AT_BEGINNING_STRING: "^",  # the head's first line: any line's start, a superset
    _sc.AT_END: "$",
    _sc.AT_END_LINE: "$",
    _sc.AT_END_STRING: "$",
    _sc.AT_BOUNDARY: r"\b",
    _sc.AT_NON_BOUNDARY: r"\B",
}
_FLAGS = ((re.IGNORECASE, "i"), (re.DOTALL, "s"), (re.MULTILINE, "m"))


def _char(code: int) -> str:
    return chr(code) if chr(code).isalnum() else f"\\x{code:02x}"


def _unparse(items: list, tail: bool) -> str:
    """Pattern text for `items` of re's parse; `tail`: nothing of the pattern follows them."""
    out = []
    for i, (op, av) in enumerate(items):
        last = tail and i == len(items) - 1
        if op is _sc.LITERAL:
            out.append(_char(av))
        elif op is _sc.NOT_LITERAL:
            out.append(f"[^{_char(av)}]")
        elif op is _sc.ANY:
            out.append(".")
        elif op is _sc.IN:
            out.append(_class(av))
        elif op is _sc.AT:
            out.append(_AT[av])
        elif op is _sc.BRANCH:
            out.append("(?:" + "|".join(_unparse(alt.data, last) for alt in av[1]) + ")")
        elif op is _sc.SUBPATTERN:
            _, add, drop, sub = av
            on = "".join(c for f, c in _FLAGS if add & f)
            off = "".join(c for f, c in _FLAGS if drop & f)
            out.append(f"(?{on}{'-' + off if off else ''}:" + _unparse(sub.data, last) + ")")
        elif op is _sc.ATOMIC_GROUP:
            out.append("(?:" + _unparse(av.data, last) + ")")
        elif op in (_sc.MAX_REPEAT, _sc.MIN_REPEAT, _sc.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            out.append("(?:" + _unparse(sub.data, False) + ")" + (f"{{{lo},}}" if hi is _sc.MAXREPEAT else f"{{{lo},{hi}}}"))
        elif op is _sc.ASSERT and av[0] == 1 and last:
            out.append("(?:" + _unparse(av[1].data, True) + ")")  # nothing after it: the line holds it
        elif op in (_sc.ASSERT, _sc.ASSERT_NOT):
            continue  # dropped: more lines, never fewer
        else:
            raise _Unrunnable(op)
    return "".join(out)


def _class(items: list) -> str:
    parts = []
    negate = False
    for op, av in items:
        if op is _sc.NEGATE:
            negate = True
        elif op is _sc.LITERAL:
            parts.append(_char(av))
        elif op is _sc.RANGE:
            parts.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is _sc.CATEGORY and av in _CATEGORIES:
            parts.append(_CATEGORIES[av])
        else:
            raise _Unrunnable(op)
    return "[" + ("^" if negate else "") + "".join(parts) + "]"
