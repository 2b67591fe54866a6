"""Times: the wall-clock time layouts of `data/times.toml`, and finding them in raw bytes.

A layout is read in two places: inside an envelope (envelopes.py writes each {time:NAME}
out as the layout's pattern) and, for the layouts that say `anywhere`, wherever it stands
in a raw line: the scan asks for the last time before a hit that prints none, and the
first after it, with one search over the bytes (the native core: prefilter.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from .prefilter import Match, Prefilter, fast_regex

MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


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


def _ms(frac: str | None) -> int | None:
    return None if not frac else int(frac[:3].ljust(3, "0"))


def _zone(text: str | None) -> int | None:
    """Minutes east of UTC of a printed offset: Z, +08:00, +0800, -05."""
    if not text:
        return None
    if text == "Z":
        return 0
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:4] or 0)
    return -minutes if text[0] == "-" else minutes


def stamp_of_groups(g: dict[str, str | None], utc: bool = False) -> Stamp | None:
    """The Stamp a time layout's named groups (data/times.toml) spell, or None if they hold none."""
    if epoch := g.get("epoch"):
        seconds = int(epoch)
        millis = None
        if len(epoch) > 10:
            seconds, millis = divmod(seconds, 1000)
        try:
            t = datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):  # no instant of the calendar
            return None
        return Stamp(t.year, t.month, t.day, t.hour, t.minute, t.second, millis, 0)
    if (hour := g.get("h")) is None:
        return None
    # a layout that reads the hour reads the month (by name or number), day, minute and second
    # too (data/times.toml; tests/test_times.py reads every layout's samples): none is None
    month = MONTHS.get(g.get("mon") or "") or int(g["mo"])  # type: ignore[arg-type]
    year = int(y) if (y := g.get("y")) else None
    zone = _zone(g.get("zone")) if g.get("zone") else (0 if utc else None)
    day, minute, second = int(g["d"]), int(g["mi"]), int(g["s"])  # type: ignore[arg-type]
    if second == 60:  # a leap second (23:59:60): Python's clock has none, the second before stands for it
        second = 59
    if not on_calendar(year, month, day, int(hour), minute, second):
        return None  # a time no clock shows (13th month, February 30th): the line's time is not known
    return Stamp(year, month, day, int(hour), minute, second, _ms(g.get("frac")), zone)


DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February's 29th checked against the year


def on_calendar(year: int | None, month: int, day: int, hour: int, minute: int, second: int) -> bool:
    """Is this a time a clock shows (in years 1 to 9999, which Python's datetime holds)?"""
    if not (1 <= month <= 12 and 1 <= day <= DAYS[month - 1] and hour < 24 and minute < 60 and second < 60):
        return False
    if year is None:
        return True
    return 1 <= year <= 9999 and (month != 2 or day < 29 or (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)))


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


# A wall-clock time wherever it stands in a raw line: the layouts of data/times.toml that
# say `anywhere`. Their alternation finds one (the core, no captures: they cost more than the
# search); the layouts' own regexes read it.
_ANYWHERE = tuple(t for t in TIMES if t.anywhere)
_STAMP_ANY = "|".join(re.sub(r"\(\?P<\w+>", "(?:", t.pattern) for t in _ANYWHERE).encode()
STAMP_IN = fast_regex(_STAMP_ANY)  # across a span: the core's DFA
_STAMP_AT = re.compile(_STAMP_ANY)  # within one line, from where a time is known to be: cheaper per call
_STAMP_READ = tuple((re.compile(t.pattern.encode()), t.utc) for t in _ANYWHERE)
# The year a file's head names, for headers that print none (vLLM, c10): not a time layout
# but any date with a time of day, a Ray session folder's name too (session_2026-11-24_06-38-22).
# No look-behind: a DFA reads 64 KiB in a tenth of the time.
YEAR = fast_regex(rb"(?:^|\D)(20\d\d)-\d\d-\d\d[ T_]\d\d[:-]\d\d")


_STAMP_LINES = Prefilter([_STAMP_ANY.decode()], starts=True)
_STAMP_ENDS = Prefilter([_STAMP_ANY.decode()])  # where a time ends only: no start to track, stops at the first


def last_stamp(data: bytes | bytearray, lo: int, hi: int) -> Stamp | None:
    """The last wall-clock time standing in data[lo:hi], if any."""
    found = last_stamp_at(data, lo, hi)
    return None if found is None else found[0]


def last_stamp_at(data: bytes | bytearray, lo: int, hi: int) -> tuple[Stamp, int] | None:
    """The last wall-clock time standing in data[lo:hi] and where it starts, if any.

    The core tells where the last time in the span starts and ends, and `re` reads it
    there; the span is searched whole when that match was a false lead (a syslog time "at
    the start of a line" where the span begins mid-line). Stamps never cross a line break."""
    found = _STAMP_LINES.last_match(data, lo, hi)
    if found is None:
        return None
    start, stop = found
    m = _STAMP_AT.match(data, start, stop)
    if m is not None and m.end() == stop:
        return _read(m, start)
    at = max(lo, data.rfind(b"\n", lo, stop - 1) + 1)
    while (m := _STAMP_AT.search(data, at, stop)) is not None:
        if m.end() == stop:
            return _read(m, m.start())
        at = m.end()
    every = STAMP_IN.finditer(data, lo, hi)
    return _read(every[-1], every[-1].start()) if every else None


def _read(m: re.Match[bytes] | Match, at: int) -> tuple[Stamp, int] | None:
    """A time found and where it starts; None when it is no time a clock shows (the search
    goes on before it, as for a line that prints none)."""
    stamp = stamp_of_match(m)
    return None if stamp is None else (stamp, at)


def first_stamp(data: bytes | bytearray, lo: int, hi: int) -> tuple[Stamp | None, int]:
    """The first wall-clock time in data[lo:hi] and where its line begins, or (None, hi).

    Searched in windows that end at line breaks and double in width: the next time is
    mostly a line or two away, and a window's edge never cuts one in two."""
    start, width = lo, STAMP_AHEAD
    while start < hi:
        stop = min(hi, start + width)
        if stop < hi:
            stop = data.find(b"\n", stop, hi) + 1 or hi
        end = _STAMP_ENDS.first_end(data, start, stop)  # the core stops at the first time; `re` reads that line
        m = None
        if end is not None:
            line = max(start, data.rfind(b"\n", start, end - 1) + 1)
            m = _STAMP_AT.search(data, line, data.find(b"\n", end - 1, stop) + 1 or stop)
        if m is not None:
            if (stamp := stamp_of_match(m)) is not None:
                return stamp, max(lo, data.rfind(b"\n", lo, m.start()) + 1)
            stop = data.find(b"\n", m.end(), hi) + 1 or hi  # no time a clock shows: look on after its line
        start, width = stop, width * 2
    return None, hi


STAMP_AHEAD = 512  # bytes searched ahead for the next time at first


def stampless_until(data: bytes | bytearray, lo: int, hi: int) -> int:
    """How far from `lo` no wall-clock time stands whole in data[lo:hi]: to just short of
    where the first one ends, or to `hi` (a driver console prints none)."""
    end = _STAMP_ENDS.first_end(data, lo, hi)
    return hi if end is None else end - 1


def stamp_of_match(m: re.Match[bytes] | Match) -> Stamp | None:
    return _stamp_of(bytes(m.group(0)))


@functools.lru_cache(maxsize=4096)
def _stamp_of(text: bytes) -> Stamp | None:
    """Read once per distinct time (a Stamp is immutable): a burst of hits shares its stamps.
    None for a time no clock shows."""
    for regex, utc in _STAMP_READ:
        m = regex.fullmatch(text)
        if m is not None:
            return stamp_of_groups({k: v.decode() for k, v in m.groupdict().items() if v is not None}, utc)
    raise ValueError(f"no time layout reads {text!r}")  # the alternation matched it: one of them does
