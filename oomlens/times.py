"""Times: the wall-clock time layouts of `data/times.toml`, and finding them in raw bytes.

A layout is read in two places: inside an envelope (envelopes.py writes each {time:NAME}
out as the layout's pattern) and, for the layouts that say `anywhere`, wherever it stands
in a raw line: the scan asks for the last time before a hit that prints none, and the
first after it. Both are read by the native core (core/src/stamps.rs): what a layout's
groups spell is written once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from ._core import Stamps, stamp_of_groups as _stamp_of_groups
from .prefilter import fast_regex


class Stamp(NamedTuple):
    """A wall-clock time as printed; `year` is None for vLLM and c10 headers, `zone` (minutes
    east of UTC) None unless the line says it. A named tuple: made for every time a hit
    borrows, three times as fast as a frozen dataclass."""

    year: int | None
    month: int
    day: int
    hour: int
    minute: int
    second: int
    millis: int | None = None
    zone: int | None = None

    def iso(self, year: int | None = None) -> str | None:
        """ISO text, borrowing `year` when the log did not print one."""
        y = self.year or year
        if y is None:
            return None
        text = f"{y:04d}-{self.month:02d}-{self.day:02d}T{self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        if self.millis is not None:
            text = f"{text}.{self.millis:03d}"
        if self.zone is not None:  # kept until the clock moves the time to its host's local time
            text += f"{'+' if self.zone >= 0 else '-'}{abs(self.zone) // 60:02d}:{abs(self.zone) % 60:02d}"
        return text

    def iso_utc(self) -> str | None:
        """The instant as naive UTC ISO text, for a time printed with its zone and year."""
        if self.zone is None or self.year is None:
            return None
        t = datetime(self.year, self.month, self.day, self.hour, self.minute, self.second, (self.millis or 0) * 1000) - timedelta(minutes=self.zone)
        return t.isoformat(timespec="milliseconds")


def stamp_of_groups(g: dict[str, str | None], utc: bool = False) -> Stamp | None:
    """The Stamp a time layout's named groups (data/times.toml) spell, or None if they hold
    none a clock shows (a 13th month, February 30th): read by the core, as the times it finds
    in raw bytes are (core/src/stamps.rs), so a layout means one thing wherever it is read.
    Digits of another script (a `str` pattern's \\d takes them) are read as their values."""
    parts = [g.get(name) or None for name in GROUPS]
    if not all(p is None or p.isascii() for p in parts):
        parts = [p if p is None or p.isascii() else "".join(str(int(c)) if c.isdigit() else c for c in p) for p in parts]
    y, mo, mon, d, h, mi, s, frac, zone, epoch = parts
    found = _stamp_of_groups(y, mo, mon, d, h, mi, s, frac, zone, epoch, utc)
    return None if found is None else Stamp(*found)


GROUPS = ("y", "mo", "mon", "d", "h", "mi", "s", "frac", "zone", "epoch")  # a layout's groups, as the core reads them


@dataclass(frozen=True, slots=True)
class TimeLayout:
    """One layout of `data/times.toml`."""

    name: str
    pattern: str
    anywhere: bool  # looked for anywhere in a raw line
    utc: bool  # its times are UTC though it prints no zone
    samples: tuple[dict, ...]


def _load_times() -> tuple[TimeLayout, ...]:
    from .data import load

    return tuple(
        TimeLayout(t["name"], t["pattern"], t.get("anywhere", False), t.get("zone") == "utc", tuple(t.get("sample", ()))) for t in load("times.toml")["layout"]
    )


TIMES = _load_times()
TIME_BY_NAME = {t.name: t for t in TIMES}
_TIME_REF = re.compile(r"\{time:(\w+)\}")


def with_times(pattern: str) -> str:
    """A pattern with each {time:NAME} written out as that layout's pattern."""
    return _TIME_REF.sub(lambda m: TIME_BY_NAME[m.group(1)].pattern, pattern)


# A wall-clock time wherever it stands in a raw line: the layouts of data/times.toml that say
# `anywhere`, found and read by the core (core/src/stamps.rs), which also reads the node Ray's
# prefix names on the line that printed one (a driver console holds many nodes' lines). No
# time that no clock shows is one: the search goes on past it.
PREFIX_IP = r"(?:pid=\w+|raylet|gcs_server), ip=([\d.:a-fA-F]+)\)"  # envelopes.toml's ray_prefix and ray_source, its ip alone
STAMPS = Stamps([(t.name, t.pattern, t.anywhere, t.utc) for t in TIMES], PREFIX_IP)
# The year a file's head names, for headers that print none (vLLM, c10): not a time layout
# but any date with a time of day, a Ray session folder's name too (session_2026-11-24_06-38-22).
# No look-behind: a DFA reads 64 KiB in a tenth of the time.
YEAR = fast_regex(rb"(?:^|\D)(20\d\d)-\d\d-\d\d[ T_]\d\d[:-]\d\d")


def last_stamp(data: bytes | bytearray, lo: int, hi: int) -> Stamp | None:
    """The last wall-clock time standing in data[lo:hi], if any."""
    found = last_stamp_at(data, lo, hi)
    return None if found is None else found[0]


def last_stamp_at(data: bytes | bytearray, lo: int, hi: int) -> tuple[Stamp, int] | None:
    """The last wall-clock time standing in data[lo:hi] and where it starts, if any (the
    bytes before `lo` are seen by a layout that reads a line's start)."""
    found = STAMPS.last(data, lo, hi)
    return None if found is None else (Stamp(*found[0]), found[1])


def first_stamp(data: bytes | bytearray, lo: int, hi: int) -> tuple[Stamp | None, int]:
    """The first wall-clock time in data[lo:hi] and where its line begins, or (None, hi)."""
    found = STAMPS.first(data, lo, hi)
    return (None, hi) if found is None else (Stamp(*found[0]), found[1])


def every_stamp(data: bytes | bytearray, limit: int | None = None) -> list[Stamp | None]:
    """The times standing in data, in order (at most `limit`), each None where it is no time a
    clock shows."""
    return [None if t is None else Stamp(*t) for t in STAMPS.every(data, limit)]


def node_of_line(data: bytes | bytearray, pos: int, end: int) -> str | None:
    """The node the Ray prefix of the line holding `pos` names, if it names one."""
    return STAMPS.node_of_line(data, pos, end)
