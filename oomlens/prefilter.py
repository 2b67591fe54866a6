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

from ._core import Match, Prefilter, Regex, newlines, utf8_valid

__all__ = ["Match", "Prefilter", "Regex", "fast_regex", "newlines", "utf8_valid"]


def fast_regex(pattern: bytes) -> Regex:
    """A bytes regex run by the core: a DFA, no backtracking over alternatives at every byte."""
    return Regex(pattern.decode("ascii"))
