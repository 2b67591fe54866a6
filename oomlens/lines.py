"""Lines: peel the envelopes around a log message (formats.md §0) and keep what they say.

A line as a user pastes it may carry any chain of envelopes: what a collector, a viewer
or a CI added, Ray's `(Name pid=N, ip=X)` / `(raylet)` prefix and magic tokens, and the
header of whatever logger wrote the message. They are data (`data/envelopes.toml`, each
with sample lines the suite peels); colour codes in every form they survive in are
removed first, Ray's `[repeated Nx across cluster]` suffix after. Envelopes are peeled
in a loop until none matches; the facts they carry (time, pid, ip, actor name, rank)
become the line's context.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import io
import itertools
import json
import os
import platform
import re
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, NamedTuple

from .events import TO_ZERO
from .sources import Input, Wrapping

MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}

REPEATED = re.compile(
    r"\s*\[repeated (\d+)x across cluster\]"
    r"(?: \(Ray deduplicates logs by default\..*?more options\.\))?\s*$"
)
MAGIC = re.compile(r"^:(info_message|actor_name|task_name|job_id|event_summary):")


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


@dataclass(slots=True)
class Line:
    """A peeled line: the message and the context its envelopes carried."""

    text: str
    stamp: Stamp | None = None
    uptime: float | None = None  # kernel seconds since boot
    pid: int | None = None
    ip: str | None = None
    actor: str | None = None  # Ray prefix name: actor class, task name, or raylet
    rank: int | None = None
    repeated: int | None = None
    stream: str = ""  # the Ray prefix as printed: lines of one worker share it


def _ms(frac: str | None) -> int | None:
    return None if not frac else int(frac[:3].ljust(3, "0"))


@dataclass(frozen=True, slots=True)
class Envelope:
    """One layout of `data/envelopes.toml`: a prefix and the facts its groups carry."""

    name: str
    first: str  # the characters its match can start with, "" for any
    pattern: re.Pattern[str]
    stream: bool  # Ray's driver-side prefix: names one worker's stream
    record: bool  # a line it begins starts a record of its own (lines.starts_record)
    samples: tuple[dict, ...]
    writer: str | None = None  # the program whose logger this is, when nothing outer names one
    added: bool = False  # put before every line by a person, viewer or collector, not the program


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
    if g.get("epoch"):
        seconds = int(g["epoch"])
        millis = None
        if len(g["epoch"]) > 10:
            seconds, millis = divmod(seconds, 1000)
        t = datetime.fromtimestamp(seconds, tz=timezone.utc)
        return Stamp(t.year, t.month, t.day, t.hour, t.minute, t.second, millis, 0)
    if g.get("h") is None:
        return None
    month = MONTHS.get(g.get("mon") or "") or int(g["mo"])
    year = int(g["y"]) if g.get("y") else None
    zone = _zone(g.get("zone")) if g.get("zone") else (0 if utc else None)
    return Stamp(year, month, int(g["d"]), int(g["h"]), int(g["mi"]), int(g["s"]), _ms(g.get("frac")), zone)


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
        TimeLayout(t["name"], t["pattern"], t.get("anywhere", False), t.get("zone") == "utc", tuple(t.get("sample", ())))
        for t in load("times.toml")["layout"]
    )


TIMES = _load_times()
_TIME_BY_NAME = {t.name: t for t in TIMES}
_TIME_REF = re.compile(r"\{time:(\w+)\}")
_ASCTIME = re.compile(_TIME_BY_NAME["iso"].pattern)  # Ray's structured logs' "asctime"


def _with_times(pattern: str) -> str:
    """An envelope's pattern with each {time:NAME} written out as that layout's pattern."""
    return _TIME_REF.sub(lambda m: _TIME_BY_NAME[m.group(1)].pattern, pattern)


def _take_stamp(line: Line, stamp: Stamp) -> None:
    """The innermost time with a year wins; a time without one borrows the year of an outer
    time of the same day, else the outer time stands (envelopes.toml says why)."""
    outer = line.stamp
    if outer is None or stamp.year is not None or outer.year is None:
        line.stamp = stamp
    elif (outer.month, outer.day) == (stamp.month, stamp.day):
        line.stamp = stamp._replace(year=outer.year)


def _apply(envelope: Envelope, line: Line, m: re.Match) -> None:
    """Copy what the envelope says into the line: who wrote it from the outermost envelope
    that tells, the time by _take_stamp."""
    g = m.groupdict()
    if not g and envelope.writer is None:
        return
    stamp = stamp_of_groups(g)
    if stamp is not None:
        _take_stamp(line, stamp)
    if g.get("uptime"):
        line.uptime = float(g["uptime"])
    if envelope.stream:
        if line.stream:  # an inner prefix (a vLLM subprocess) keeps the outer worker's identity
            if line.rank is None and g.get("rank"):
                line.rank = int(g["rank"])
            return
        line.stream = m.group(0).strip()
    pid, name = g.get("pid"), g.get("name") or (g["src"].split()[0] if g.get("src") else None) or envelope.writer
    if pid is not None and not pid.isdigit():
        pid, name = None, name or pid
    if line.pid is None and pid is not None:
        line.pid = int(pid)
    if line.actor is None and name:  # interned: thousands of events name the same few
        line.actor = sys.intern(name)
    if line.ip is None and g.get("ip"):
        line.ip = sys.intern(g["ip"])
    if line.rank is None and g.get("rank"):
        line.rank = int(g["rank"])


def _load_envelopes() -> tuple[re.Pattern[str], tuple[Envelope, ...]]:
    from .data import load

    table = load("envelopes.toml")
    debris = re.compile("|".join(d["pattern"] for d in table["debris"]))
    envelopes = tuple(
        Envelope(
            e["name"], e["first"], re.compile(_with_times(e["pattern"])), e.get("stream", False), e.get("record", True),
            tuple(e.get("sample", ())), e.get("writer"), e.get("added", False),
        )
        for e in table["envelope"]
    )
    return debris, envelopes


# Each alternative of the debris begins with its own literal, so `re` skips every other
# character at C speed (an optional prefix made it try each position of the line).
ANSI, ENVELOPES = _load_envelopes()
# the envelopes worth trying on a line, by its first character
_ANY_FIRST = tuple(e for e in ENVELOPES if not e.first)
_BY_NAME = {e.name: e for e in ENVELOPES}
_STREAMS = tuple(e for e in ENVELOPES if e.stream)
_BY_FIRST = {char: tuple(e for e in ENVELOPES if not e.first or char in e.first) for e in ENVELOPES for char in e.first}


def envelope_at(text: str, at: int = 0) -> tuple[Envelope, re.Match[str]] | None:
    """The first envelope (in the table's order, among those that may start with the
    character at `at`) whose pattern matches at `at` and takes at least one character."""
    for envelope in _BY_FIRST.get(text[at : at + 1], _ANY_FIRST):
        m = envelope.pattern.match(text, at)
        if m and m.end() > at:
            return envelope, m
    return None


def _json_record(text: str) -> Line | None:
    """Ray's JSON records: events/event_*.log and structured logs (RAY_BACKEND_LOG_JSON=1).

    The message is escaped once more than JSON needs (`\\n` for a new line)."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("message"), str):
        return None
    line = Line(record["message"].replace("\\n", "\n").replace("\\t", "\t"))
    epoch = record.get("timestamp")
    if isinstance(epoch, (int, float)) and not isinstance(epoch, bool):
        # seconds (a float carries milliseconds) or milliseconds, as stamp_of_groups reads them
        whole = isinstance(epoch, int) or epoch >= 1e11
        line.stamp = stamp_of_groups({"epoch": str(int(epoch if whole else epoch * 1000))})
    elif isinstance(record.get("asctime"), str):
        m = _ASCTIME.match(record["asctime"])
        if m:
            line.stamp = stamp_of_groups(m.groupdict())
    pid = record.get("pid") or record.get("source_pid")
    if isinstance(pid, (int, str)) and str(pid).isdigit():
        line.pid = int(pid)
    return line


def peel(raw: str) -> Line:
    """Peel every envelope of one physical line; the message is what remains."""
    text = ANSI.sub("", raw.rstrip("\r\n")) if "[" in raw else raw.rstrip("\r\n")
    if text.startswith('{"'):
        record = _json_record(text)
        if record is not None:
            return record
    line = Line(text)
    m = REPEATED.search(text) if "[repeated " in text else None
    if m:
        line.repeated = int(m.group(1))
        text = text[: m.start()]
    for _ in range(16):  # each pass peels one envelope; a line has a handful at most
        found = envelope_at(text)
        if found is not None:
            _apply(found[0], line, found[1])
            text = text[found[1].end() :]
        else:
            if text[:2] != " (":
                break
            # Ray's prefix behind a blank: the ESC of its colour code, shown by a viewer as a space
            for envelope in _STREAMS:
                m = envelope.pattern.match(text, 1)
                if m:
                    _apply(envelope, line, m)
                    text = text[m.end() :]
                    break
            else:
                break
    line.text = text
    return line




def fast_regex(pattern: bytes):  # -> re.Pattern[bytes] or re2._Regexp
    """A bytes regex compiled by RE2 when it is installed: a DFA, no backtracking over
    alternatives at every byte. Python's `re` is the fallback."""
    try:
        import re2
    except ImportError:
        return re.compile(pattern)
    return re2.compile(pattern)


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

    def _matches(self, data: bytes, pos: int, end: int) -> list[tuple[int, int]]:
        """(where it ends, pattern index) of every match in data[pos:end]."""
        found: list[tuple[int, int]] = []
        self.database.scan(
            memoryview(data)[pos:end], match_event_handler=lambda pattern, _from, to, _flags, _ctx: found.append((pos + to, pattern))
        )
        return found

    def spans(self, data: bytes, pos: int, end: int) -> list[tuple[int, int, int, int, set[int]]]:
        """(start, stop, first, last, patterns) of each run of lines of data[pos:end] holding a
        match, in order: where the run's first and last matches end (none ends sooner or
        later), and the indexes of the patterns that match there."""
        found: list[tuple[int, int, int, int, set[int]]] = []
        for stop, pattern in sorted(self._matches(data, pos, end)):
            if found and stop <= found[-1][1]:  # in the run already
                lo, hi, first, _, patterns = found[-1]
                found[-1] = (lo, hi, first, stop, patterns | {pattern})
                continue
            lo, hi = _line_around(data, stop - 1, pos, end)  # the line of the match's last byte
            if found and lo <= found[-1][1]:
                lo, _, first, _, patterns = found[-1]
                found[-1] = (lo, hi, first, stop, patterns | {pattern})
            else:
                found.append((lo, hi, stop, stop, {pattern}))
        return found

    def any(self, data: bytes, pos: int, end: int) -> bool:
        """Whether any pattern matches in data[pos:end] (the scan stops at the first match)."""

        def stop(*_match: object) -> bool:
            return True

        try:
            self.database.scan(memoryview(data)[pos:end], match_event_handler=stop)
        except self.terminated:
            return True
        return False

    def first_end(self, data: bytes, pos: int, end: int) -> int | None:
        """Where the match that ends first in data[pos:end] ends, if there is one (the scan
        stops there: hyperscan reports matches in the order they end)."""
        found: list[int] = []

        def stop(_pattern: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
            found.append(pos + to)
            return True

        try:
            self.database.scan(memoryview(data)[pos:end], match_event_handler=stop)
        except self.terminated:
            pass
        return found[0] if found else None

    def last_match(self, data: bytes, pos: int, end: int) -> tuple[int, int] | None:
        """(start, end) of the match in data[pos:end] that ends last, if there is one; the
        start is known only for a Prefilter made with `starts` (else it is `pos`)."""
        last: list[tuple[int, int]] = [(pos, -1)]

        def keep(_pattern: int, start: int, stop: int, _flags: int, _context: object) -> None:
            if stop >= last[0][1]:
                last[0] = (start, stop)

        self.database.scan(memoryview(data)[pos:end], match_event_handler=keep)
        start, stop = last[0]
        return None if stop < 0 else (pos + start, pos + stop)


def _compiled(hyperscan, patterns: list[str], flags: int):  # noqa: ANN001, ANN202 - the module, a hyperscan.Database
    """A block-mode database of `patterns`, kept compiled in the user's cache folder (as
    lark keeps its parsers): compiling the triggers costs every process about 60 ms, loading
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
    database.compile(
        expressions=[p.encode() for p in patterns], ids=list(range(len(patterns))), elements=len(patterns), flags=[flags] * len(patterns)
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_bytes(hyperscan.dumpb(database))
        os.replace(partial, path)  # whole or not at all, whichever process writes it
    except OSError:
        pass
    return database


def _line_around(data: bytes, at: int, pos: int, end: int) -> tuple[int, int]:
    """The line holding byte `at`, within data[pos:end], with its line break."""
    return max(pos, data.rfind(b"\n", pos, at) + 1), data.find(b"\n", at, end) + 1 or end


# A wall-clock time wherever it stands in a raw line: the layouts of data/times.toml that
# say `anywhere`. Their alternation finds one (RE2, no captures: they cost more than the
# search); the layouts' own regexes read it.
_ANYWHERE = tuple(t for t in TIMES if t.anywhere)
_STAMP_ANY = "|".join(re.sub(r"\(\?P<\w+>", "(?:", t.pattern) for t in _ANYWHERE).encode()
_STAMP_IN = fast_regex(_STAMP_ANY)  # across a span: a DFA
_STAMP_AT = re.compile(_STAMP_ANY)  # within one line, from where a time is known to be: cheaper per call
_STAMP_READ = tuple((re.compile(t.pattern.encode()), t.utc) for t in _ANYWHERE)
_UPTIME_IN = re.compile(rb"\[ *(\d+\.\d{6})\] ")  # the kernel's seconds since boot, which orders lines of one second


_STAMP_LINES = Prefilter([_STAMP_ANY.decode()], starts=True)
_STAMP_ENDS = Prefilter([_STAMP_ANY.decode()])  # where a time ends only: no start to track, stops at the first


def last_stamp(data: bytes, lo: int, hi: int) -> Stamp | None:
    """The last wall-clock time standing in data[lo:hi], if any."""
    found = last_stamp_at(data, lo, hi)
    return None if found is None else found[0]


def last_stamp_at(data: bytes, lo: int, hi: int) -> tuple[Stamp, int] | None:
    """The last wall-clock time standing in data[lo:hi] and where it starts, if any.

    Hyperscan tells where the last time in the span starts and ends, and `re` reads it
    there; RE2 reads the whole span without hyperscan, or when that match was a false
    lead (a syslog time "at the start of a line" where the span begins mid-line). Stamps
    never cross a line break."""
    if _STAMP_LINES.usable:
        found = _STAMP_LINES.last_match(data, lo, hi)
        if found is None:
            return None
        start, stop = found
        m = _STAMP_AT.match(data, start, stop)
        if m is not None and m.end() == stop:
            return stamp_of_match(m), start
        at = max(lo, data.rfind(b"\n", lo, stop - 1) + 1)
        while (m := _STAMP_AT.search(data, at, stop)) is not None:
            if m.end() == stop:
                return stamp_of_match(m), m.start()
            at = m.end()
    last = None
    for last in _STAMP_IN.finditer(data, lo, hi):  # noqa: B007 - only the last is wanted
        pass
    return None if last is None else (stamp_of_match(last), last.start())


def first_stamp(data: bytes, lo: int, hi: int) -> tuple[Stamp | None, int]:
    """The first wall-clock time in data[lo:hi] and where its line begins, or (None, hi).

    Searched in windows that end at line breaks and double in width: the next time is
    mostly a line or two away, and a window's edge never cuts one in two."""
    start, width = lo, STAMP_AHEAD
    while start < hi:
        stop = min(hi, start + width)
        if stop < hi:
            stop = data.find(b"\n", stop, hi) + 1 or hi
        if _STAMP_ENDS.usable:  # hyperscan stops at the first time; `re` reads that line
            end = _STAMP_ENDS.first_end(data, start, stop)
            m = None
            if end is not None:
                line = max(start, data.rfind(b"\n", start, end - 1) + 1)
                m = _STAMP_AT.search(data, line, data.find(b"\n", end - 1, stop) + 1 or stop)
        else:
            m = _STAMP_IN.search(data, start, stop)
        if m is not None:
            return stamp_of_match(m), max(lo, data.rfind(b"\n", lo, m.start()) + 1)
        start, width = stop, width * 2
    return None, hi


STAMP_AHEAD = 512  # bytes searched ahead for the next time at first


def stampless_until(data: bytes, lo: int, hi: int) -> int:
    """How far from `lo` no wall-clock time stands whole in data[lo:hi]: to just short of
    where the first one ends, or to `hi` (a driver console prints none). Every match is
    taken: hyperscan does not promise to report them in order."""
    if _STAMP_LINES.usable:
        ends = [stop for stop, _pattern in _STAMP_LINES._matches(data, lo, hi)]
        return min(ends) - 1 if ends else hi
    m = _STAMP_IN.search(data, lo, hi)  # no time starts before the leftmost one
    return hi if m is None else m.start()


def stamp_of_match(m) -> Stamp:  # noqa: ANN001 - a match of _STAMP_IN or _STAMP_AT
    return _stamp_of(bytes(m.group(0)))


@functools.lru_cache(maxsize=4096)
def _stamp_of(text: bytes) -> Stamp:
    """Read once per distinct time (a Stamp is immutable): a burst of hits shares its stamps."""
    for regex, utc in _STAMP_READ:
        m = regex.fullmatch(text)
        if m is not None:
            return stamp_of_groups({k: v.decode() for k, v in m.groupdict().items() if v is not None}, utc)
    raise ValueError(f"no time layout reads {text!r}")  # the alternation matched it: one of them does


# -- the layout of a paste: hard wraps and reversed order, learned from its head ------------

WRAP_MIN = 80  # a terminal narrower than this does not wrap log lines we care about
WRAPPED_LINES = 2  # different lines cut at one width, for the text to be wrapped there
SPIKE = 2  # lines exactly as wide as the wrap, against those of any width a few columns narrower
WRAPPED_SHARE = 20  # one line in this many cut; one in five times as many when they differ in shape
WIDER_LINES = 2  # lines wider than the wrap that a wrapped text may hold (1% of a long one)
_TRACEBACK = "Traceback (most recent call last):"
ORDER_STAMPS = 64  # times read to tell the order of the lines: enough to outvote a few out of order
TRACEBACK_VOTES = 3  # a traceback's order weighs as much as three times in a row (interleaved processes put some out of order)


def _head_lines(head: bytes) -> list[str]:
    """The whole lines of a head, decoded, without their line breaks."""
    cut = head.rfind(b"\n") + 1 if len(head) > 1 << 12 else len(head)
    return [line.rstrip("\r") for line in head[:cut].decode("utf-8", "replace").split("\n")]


def wrap_width(head: bytes, varied: bool = False) -> int | None:
    """The width a terminal or viewer hard-wrapped these lines at, if it did.

    Wrapped text has (almost) no line wider than the wrap, and every logical line longer
    than it leaves a segment exactly that wide, continued by a line that starts no record
    of its own: so one width stands out, held by several different lines, each continued.
    Unwrapped logs have lines of every width, the widest seldom more than once, but for
    lines whose format fixes their width (metrics of the same keys, progress bars): those
    are few among the lines, and mostly of one shape (digits aside), where a wrap cuts
    every line longer than the terminal, of every shape."""
    width, cut, lines = _wrap_evidence(head)
    if len(cut) < WRAPPED_LINES:
        return None
    shapes = {line.split(b"\n")[0].translate(TO_ZERO) for line in cut}
    many = len(cut) * WRAPPED_SHARE >= lines and not (varied and len(shapes) < 2)
    return width if many or (len(shapes) >= 2 and len(cut) * WRAPPED_SHARE * 5 >= lines) else None


OUTER_SHARE = 0.9  # of a head's lines that carry one envelope for it to be added after a wrap


def outer_envelope(head: bytes) -> Envelope | None:
    """The envelope put before every physical line after the text was wrapped (a quote, line
    numbers, a collector's stamp): it stands before the wrapped segments as before the first,
    which the program's own header never does. None when no one envelope heads them all."""
    lines = [raw.decode("utf-8", "replace").rstrip("\r") for raw in head.split(b"\n")[:400]]
    lines = [line for line in lines if line.strip()]
    candidates: Counter[str] = Counter()
    for line in lines:  # the envelopes that head lines, most often first
        found = envelope_at(line)
        if found is not None and found[0].added:
            candidates[found[0].name] += 1
    for name, _count in candidates.most_common(3):  # one that a wider one shadowed on a few lines still heads them
        envelope = _BY_NAME[name]
        heads = sum(1 for line in lines if (m := envelope.pattern.match(line)) and m.end() > 0)
        if heads >= OUTER_SHARE * len(lines):
            return envelope
    return None


def outer_envelopes(head: bytes) -> tuple[Envelope, ...]:
    """The envelopes added before every line, outermost first (`grep -n` of a collector's
    output: the line number, then the stamp)."""
    found: list[Envelope] = []
    for _ in range(3):
        envelope = outer_envelope(head)
        if envelope is None or envelope in found:
            break
        found.append(envelope)
        head = b"\n".join(without((envelope,), line) for line in head.split(b"\n"))
    return tuple(found)


def without(envelopes: tuple[Envelope, ...], line: bytes) -> bytes:
    """The line with those envelopes taken off its start, outermost first (as it stood before
    they were added)."""
    for envelope in envelopes:
        m = envelope.pattern.match(line.decode("utf-8", "replace"))
        if m and m.end() > 0:
            line = line[len(m.group(0).encode("utf-8")) :]
    return line


def added_heads(line: str) -> list[int]:
    """Where each envelope added to every line after it was written (a quote, a line number,
    a collector's stamp) ends at the start of a line, outermost first: what a wrapped segment
    carries again when they were put there after the wrap."""
    ends: list[int] = []
    at = 0
    for _ in range(3):
        found = envelope_at(line, at)
        if found is None or not found[0].added:
            return ends
        at = found[1].end()
        ends.append(at)
    return ends


def wrap_layout(head: bytes, again: bool = False) -> tuple[int, tuple[Envelope, ...]] | None:
    """(width, envelopes) of a hard wrap: the text as it is, or beneath envelopes added to
    every line after the wrap (a quote of a terminal copy, `cat -n` of it). `again`: the
    text was unwrapped once already; a second wrap needs lines of different shapes cut, as
    lines a first join made of one fixed format are all one width."""
    width = wrap_width(head, varied=again)
    if width is not None:
        return width, ()
    outer = outer_envelopes(head)
    if not outer:
        return None
    width = wrap_width(b"\n".join(without(outer, line) for line in head.split(b"\n")), varied=again)
    return (width, outer) if width is not None else None


def _wrap_evidence(head: bytes) -> tuple[int, set[bytes], int]:
    """(the likeliest wrap width, the different lines cut there and continued (told apart by
    their continuation too), the lines).

    A few lines may stand wider than the wrap (a progress bar's carriage returns, colour
    codes a terminal does not count), so every width held by two lines or more is tried,
    the widest first, while the lines wider than it stay that few. A wrap makes a spike:
    many more lines exactly that wide than a few columns narrower, where an unwrapped log
    has about as many."""
    raw = [line.rstrip(b"\r") for line in head[: head.rfind(b"\n") + 1 if len(head) > 1 << 12 else len(head)].split(b"\n")]
    raw = [line for line in raw if line.strip()]
    widths = [len(line) if line.isascii() else len(line.decode("utf-8", "replace")) for line in raw]
    counts = Counter(widths)
    wider = 0
    best: tuple[int, set[bytes], int] = (0, set(), len(raw))
    for width in sorted(counts, reverse=True):
        if width < WRAP_MIN or wider > max(WIDER_LINES, len(raw) // 100):
            break
        spike = counts[width] > SPIKE * max(counts.get(width - k, 0) for k in range(1, 9))
        if counts[width] >= WRAPPED_LINES and spike:
            cut = {  # segments told apart by what continues them: paths that share a long prefix
                raw[i] + b"\n" + raw[i + 1][:16]
                for i in range(len(raw) - 1)
                if widths[i] == width and continues(raw[i].decode("utf-8", "replace"), raw[i + 1].decode("utf-8", "replace"), width)
            }
            if len(cut) > len(best[1]):
                best = (width, cut, len(raw))
            if len(cut) >= WRAPPED_LINES:
                break
        wider += counts[width]
    return best


def starts_record(line: str) -> bool:
    """Whether a line begins as a record of its own: with an envelope of the table that
    marks one (behind any number of those that do not, a line number, a quote)."""
    text = ANSI.sub("", line) if "[" in line else line
    for _ in range(4):  # past a line number or a quote, what begins the line
        found = envelope_at(text)
        if found is None:
            return False
        if found[0].record:
            return True
        text = text[found[1].end() :]
    return False


def _first_envelope(line: str) -> str | None:
    text = ANSI.sub("", line) if "[" in line else line
    found = envelope_at(text)
    return found[0].name if found is not None else None


def continues(line: str, following: str, width: int) -> bool:
    """Whether `following` is the rest of `line` that a wrap at `width` cut off: not after a
    line padded to the width or cut short on purpose (`...`, as Ray's Top-10 commands),
    not a line that starts a record, nor one that begins as `line` does (its first
    characters, digits aside: the next line of one fixed format, as memory lines of nearly
    one width; a line number or a service name a collector put before every line, which
    the rest of a wrapped line lacks)."""
    if len(line) != width or line.endswith(("  ", "...")) or not following.strip() or starts_record(following):
        return False
    if _head_shape(following) == _head_shape(line):  # the next record of one format (digits aside)
        return False
    first = _first_envelope(following)
    return first is None or first != _first_envelope(line)


SAME_HEAD = 16  # characters two lines share at their start when the second is the next record, not the rest


def _head_shape(line: str) -> str | None:
    """A line's first characters with every digit a 0, when it has that many."""
    return line[:SAME_HEAD].translate(_DIGITS_TO_ZERO) if len(line) >= SAME_HEAD else None


_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")


def newest_first(head: bytes) -> bool:
    """Whether the lines were pasted in reverse order, as log viewers export newest first:
    their times (or the kernel's uptimes) run backwards, and a traceback's header or its
    frames' headers stand after what they head."""
    backward = forward = 0
    last = None
    for m in itertools.islice(_STAMP_IN.finditer(head), ORDER_STAMPS):
        stamp = stamp_of_match(m)
        key = stamp[1:6] + (stamp.millis or 0,)
        if last is not None and key != last:
            backward += key < last
            forward += key > last
        last = key
    last_up = None
    for m in itertools.islice(_UPTIME_IN.finditer(head), ORDER_STAMPS):
        up = float(m.group(1))
        if last_up is not None and up != last_up:
            backward += up < last_up
            forward += up > last_up
        last_up = up
    if _TRACEBACK.encode() in head:
        lines = _head_lines(head)
        for i, line in enumerate(lines[1:-1], 1):
            if _TRACEBACK in line and peel(line).text.strip() == _TRACEBACK:
                before, after = (peel(lines[j]).text.lstrip().startswith('File "') for j in (i - 1, i + 1))
                backward += TRACEBACK_VOTES * (before and not after)
                forward += TRACEBACK_VOTES * (after and not before)
    if b'File "' in head:
        ahead, behind = _frame_runs(_head_lines(head))
        forward += TRACEBACK_VOTES * ahead
        backward += TRACEBACK_VOTES * behind
    return backward >= TRACEBACK_VOTES and backward > 3 * forward


_EXCEPTION_LINE = re.compile(r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)(?:\([\w.]*\))?:")


def _frame_runs(lines: list[str]) -> tuple[int, int]:
    """(tracebacks read forward, tracebacks read backward), told where the frames meet their
    exception: as written, the last frame's `File "..."` line, its code and then the
    exception; turned round, the exception, the code and then the `File` line. Only that
    meeting is read: a wrap or a cut breaks a run of frames anywhere else."""
    kinds = []
    for line in lines:
        text = peel(line).text if line.strip() else ""
        stripped = text.lstrip()
        if stripped.startswith('File "') and ", line " in stripped:
            kinds.append("F")
        elif text[:1].isspace() and stripped:
            kinds.append("C")
        elif _EXCEPTION_LINE.match(text):
            kinds.append("E")
        else:
            kinds.append("O")
    order = "".join(kinds)
    ahead = len(re.findall(r"(?=FC{1,6}E)", order))  # code, and Python 3.11+ carets beneath it
    behind = len(re.findall(r"(?=EC{1,6}F)", order))
    return ahead, behind


LAYOUT_HEAD = 64 << 10  # bytes of a stream's head its layout is learned from: a paste, or hundreds of lines
REVERSED_LIMIT = 64 << 20  # a paste in reverse order is read whole to turn it round: up to this size


class Layout(Wrapping):
    """A text stream laid out again as it was written: what the Scanner reads, and how its
    line numbers map back to the input's own."""

    removed = 0  # bytes of the input the layout left out (line breaks a wrap added), or added
    breaks = 0  # line breaks of the input it left out
    under: Layout | None = None  # the layout this one reads through (a wrapped paste wrapped again)

    def lines_of(self, first: int, start: int, last: int, stop: int) -> tuple[int, int]:
        """The input's own line numbers of the lines first..last read at offsets start..stop."""
        return first, last

    def totals(self) -> tuple[int, int]:
        """(bytes, line breaks) of the input left out by this layout and the ones beneath it."""
        below = self.under.totals() if self.under is not None else (0, 0)
        return self.removed + below[0], self.breaks + below[1]


class Unwrapped(Layout):
    """Lines a terminal or viewer hard-wrapped at `width` columns, joined again (lines.continues),
    so a trigger, a number or a message cut by the wrap reads whole. When an envelope was put
    before every line after the wrap (`outer`), the widths are those of the lines beneath it,
    and a continued segment loses its copy of it as it joins the line it belongs to."""

    def __init__(self, inner: BinaryIO, width: int, outer: tuple[Envelope, ...] = ()) -> None:
        self.inner, self.width, self.outer = inner, width, outer
        self.pending: bytes | None = b""  # read, not decided: the last whole line and what follows it (None: all out)
        self.ready = bytearray()
        self.given = 0  # bytes handed out so far
        self.joins: list[int] = []  # offsets handed out where a removed line break stood
        self.removed = 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while len(self.ready) < len(buffer) and self.pending is not None:
            chunk = self.inner.read(1 << 20)
            self._lay(self.pending + chunk, final=not chunk)
        size = min(len(buffer), len(self.ready))
        buffer[:size] = self.ready[:size]
        del self.ready[:size]
        self.given += size
        return size

    def _lay(self, data: bytes, final: bool) -> None:
        """Hand out the lines of `data` joined where a wrap cut them; whether the last whole
        line continues needs the next one, so it waits with what follows it, until the end.
        Only a line at least as long in bytes as the wrap is in characters can be cut: the
        others go out as they are, many at a time."""
        lines = data.split(b"\n")
        keep = 0 if final else 2
        self.pending = None if final else b"\n".join(lines[-2:])
        count = len(lines) - keep
        done = 0  # lines handed out
        bodies = [without(self.outer, line) for line in lines] if self.outer else lines
        for i in [i for i, body in enumerate(bodies[:count]) if len(body) >= self.width and i + 1 < len(lines)]:
            text = bodies[i].decode("utf-8", "replace").rstrip("\r")
            if not continues(text, bodies[i + 1].decode("utf-8", "replace").rstrip("\r"), self.width):
                continue
            if i > done:
                self.ready += b"\n".join(lines[done:i]) + b"\n"
            line = lines[i]
            body = line[:-1] if line.endswith(b"\r") else line
            self.ready += body
            self.joins.append(self.given + len(self.ready))
            self.removed += len(line) + 1 - len(body) + len(lines[i + 1]) - len(bodies[i + 1])
            lines[i + 1] = bodies[i + 1]  # the continued segment without its copy of the envelope
            self.breaks += 1
            done = i + 1
        if count > done:
            self.ready += b"\n".join(lines[done:count]) + (b"" if final else b"\n")
        if not final:  # a continued segment that waits lost its envelope above: it waits so
            self.pending = b"\n".join(lines[-2:])

    def lines_of(self, first: int, start: int, last: int, stop: int) -> tuple[int, int]:
        first += bisect.bisect_right(self.joins, start)
        last += bisect.bisect_right(self.joins, max(start, stop - 1))
        return self.under.lines_of(first, -1, last, -1) if self.under is not None else (first, last)


class Reversed(Layout):
    """A paste whose lines stand newest first (lines.newest_first), read oldest first."""

    def __init__(self, inner: BinaryIO, item: Input) -> None:
        self.inner = inner
        data = inner.read(REVERSED_LIMIT + 1)
        if len(data) > REVERSED_LIMIT:
            item.problems.append(f"lines stand newest first, but only the first {REVERSED_LIMIT >> 20} MiB were turned round")
            data = data[:REVERSED_LIMIT]
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        else:
            self.removed = -1  # the last line gets the line break it lacked
        self.count = len(lines)
        self.data = io.BytesIO(b"".join(line + b"\n" for line in reversed(lines)))

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self.data.readinto(buffer)

    def lines_of(self, first: int, start: int, last: int, stop: int) -> tuple[int, int]:
        return self.count + 1 - last, self.count + 1 - first


def laid_out(stream: io.BufferedReader, item: Input) -> tuple[io.BufferedReader, Layout | None]:
    """The stream as it was written, when its head shows it was turned round or hard-wrapped,
    and the layout that maps its lines back (None: the stream as it is)."""
    layout: Layout | None = None
    if not isinstance(stream, (io.BytesIO, io.BufferedReader)):  # raw: what a peek read would be lost with a failing read after it
        return stream, None
    stream = io.BufferedReader(stream, LAYOUT_HEAD)  # type: ignore[arg-type]  # a head that large to peek at
    head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    if newest_first(head):
        layout = Reversed(stream, item)
        stream = io.BufferedReader(layout, LAYOUT_HEAD)
        head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    for again in (False, True):  # a text wrapped twice: a wrapped paste copied again from a narrower terminal
        wrap = wrap_layout(head, again)
        if wrap is None:
            break
        layout, layout.under = Unwrapped(stream, *wrap), layout
        stream = io.BufferedReader(layout, LAYOUT_HEAD)
        head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    return stream, layout
