"""Prefilter: find where any of many patterns may match in big buffers, before Python reads a line.

Two engines, fastest first: hyperscan's SIMD matcher (`Prefilter`) tells which lines hold
a match; RE2 (`fast_regex`) runs an alternation as a DFA. Both are optional: Python's `re`
reads the same bytes without them, only slower. Compiled hyperscan databases are kept in
the user's cache folder.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from pathlib import Path


def fast_regex(pattern: bytes):  # -> re.Pattern[bytes] or re2._Regexp
    """A bytes regex compiled by RE2 when it is installed: a DFA, no backtracking over
    alternatives at every byte. Python's `re` is the fallback.

    RE2 reads its text as Latin-1, one character a byte, as `re` reads bytes: in RE2's
    default UTF-8 mode a byte that is not UTF-8 matches no `.` or negated class, and a
    trigger on a line with one (a mutated or cut log) was missed where RE2 looked and
    found where `re` did."""
    try:
        import re2
    except ImportError:
        return re.compile(pattern)
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    return re2.compile(pattern, options)


class Prefilter:
    """Where in a buffer any of some patterns matches, found by hyperscan.

    Hyperscan's SIMD matcher runs several times faster than RE2 but tells only where a
    match ends; the caller's own regex then reads just the lines found (exact for patterns
    that match within one line), or runs only where the prefilter says it may find
    something. Without hyperscan (or for a pattern it cannot compile) `usable` is False
    and callers read the whole buffer themselves."""

    def __init__(self, patterns: list[str], starts: bool = False) -> None:
        self.database = None
        try:
            import hyperscan
        except ImportError:
            return
        try:
            self.database = _compiled(hyperscan, patterns, hyperscan.HS_FLAG_SOM_LEFTMOST if starts else 0)
        except hyperscan.error:
            return
        self.terminated = hyperscan.ScanTerminated

    @property
    def usable(self) -> bool:
        return self.database is not None

    def _matches(self, data: bytes | bytearray, pos: int, end: int) -> list[tuple[int, int]]:
        """(where it ends, pattern index) of every match in data[pos:end]."""
        found: list[tuple[int, int]] = []
        assert self.database is not None  # callers ask only a usable Prefilter
        self.database.scan(memoryview(data)[pos:end], match_event_handler=lambda pattern, _from, to, _flags, _ctx: found.append((pos + to, pattern)))
        return found

    def spans(self, data: bytes | bytearray, pos: int, end: int) -> list[tuple[int, int, int, dict[int, list[int]]]]:
        """(start, stop, last, ends) of each run of lines of data[pos:end] holding a match, in
        order: where the run's last match ends (none ends later), and by the index of each
        pattern that matches there, where its matches end (every end, in order)."""
        found: list[tuple[int, int, int, dict[int, list[int]]]] = []
        for stop, pattern in sorted(self._matches(data, pos, end)):
            if found and stop <= found[-1][1]:  # in the run already
                lo, hi, _, ends = found[-1]
            else:
                lo, hi = _line_around(data, stop - 1, pos, end)  # the line of the match's last byte
                if found and lo <= found[-1][1]:
                    lo, _, _, ends = found[-1]
                else:
                    ends = {}
                    found.append((lo, hi, stop, ends))
            ends.setdefault(pattern, []).append(stop)
            found[-1] = (lo, hi, stop, ends)
        return found

    def any(self, data: bytes | bytearray, pos: int, end: int) -> bool:
        """Whether any pattern matches in data[pos:end] (the scan stops at the first match)."""

        def stop(*_match: object) -> bool:
            return True

        assert self.database is not None  # callers ask only a usable Prefilter
        try:
            self.database.scan(memoryview(data)[pos:end], match_event_handler=stop)
        except self.terminated:
            return True
        return False

    def first_end(self, data: bytes | bytearray, pos: int, end: int) -> int | None:
        """Where the match that ends first in data[pos:end] ends, if there is one (the scan
        stops there: hyperscan reports matches in the order they end)."""
        found: list[int] = []

        def stop(_pattern: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
            found.append(pos + to)
            return True

        assert self.database is not None  # callers ask only a usable Prefilter
        try:
            self.database.scan(memoryview(data)[pos:end], match_event_handler=stop)
        except self.terminated:
            pass
        return found[0] if found else None

    def last_match(self, data: bytes | bytearray, pos: int, end: int) -> tuple[int, int] | None:
        """(start, end) of the match in data[pos:end] that ends last, if there is one; the
        start is known only for a Prefilter made with `starts` (else it is `pos`)."""
        last: list[tuple[int, int]] = [(pos, -1)]

        def keep(_pattern: int, start: int, stop: int, _flags: int, _context: object) -> None:
            if stop >= last[0][1]:
                last[0] = (start, stop)

        assert self.database is not None  # callers ask only a usable Prefilter
        self.database.scan(memoryview(data)[pos:end], match_event_handler=keep)
        start, stop = last[0]
        return None if stop < 0 else (pos + start, pos + stop)


def _compiled(hyperscan, patterns: list[str], flags: int):  # noqa: ANN001, ANN202 - the module, a hyperscan.Database
    """A block-mode database of `patterns`, kept compiled in the user's cache folder (as
    lark keeps its parsers): compiling the triggers costs every process about 90 ms, loading
    them well under one. A cache that cannot be read or written is only slower."""
    key = hashlib.sha256("\n".join([hyperscan.__version__, platform.machine(), str(flags), *patterns]).encode()).hexdigest()[:24]
    path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oomlens" / f"hyperscan-{key}.db"
    try:
        database = hyperscan.loadb(path.read_bytes(), hyperscan.HS_MODE_BLOCK)
        database.scratch = hyperscan.Scratch(database)
        return database
    except (OSError, hyperscan.error):
        pass
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[p.encode() for p in patterns], ids=list(range(len(patterns))), elements=len(patterns), flags=[flags] * len(patterns))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_bytes(hyperscan.dumpb(database))
        os.replace(partial, path)  # whole or not at all, whichever process writes it
    except OSError:
        pass
    return database


def _line_around(data: bytes | bytearray, at: int, pos: int, end: int) -> tuple[int, int]:
    """The line holding byte `at`, within data[pos:end], with its line break."""
    return max(pos, data.rfind(b"\n", pos, at) + 1), data.find(b"\n", at, end) + 1 or end
