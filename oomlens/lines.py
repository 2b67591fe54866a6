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

import functools
import hashlib
import json
import os
import platform
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}

REPEATED = re.compile(
    r"\s*\[repeated (\d+)x across cluster\]"
    r"(?: \(Ray deduplicates logs by default\..*?more options\.\))?\s*$"
)
MAGIC = re.compile(r"^:(info_message|actor_name|task_name|job_id|event_summary):")
_ASCTIME = re.compile(r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[ T](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:,(?P<frac>\d{3}))?")


class Stamp(NamedTuple):
    """A wall-clock time as printed; `year` is None for vLLM and c10 headers. A named tuple:
    made for every time a hit borrows, three times as fast as a frozen dataclass."""

    year: int | None
    month: int
    day: int
    hour: int
    minute: int
    second: int
    millis: int | None = None

    def iso(self, year: int | None = None) -> str | None:
        """ISO text, borrowing `year` when the log did not print one."""
        y = self.year or year
        if y is None:
            return None
        text = f"{y:04d}-{self.month:02d}-{self.day:02d}T{self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        return text if self.millis is None else f"{text}.{self.millis:03d}"


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
    samples: tuple[dict, ...]


def _stamp_of_groups(g: dict[str, str | None]) -> Stamp | None:
    if g.get("h") is None:
        return None
    month = MONTHS.get(g["mon"] or "") if "mon" in g else None
    month = month or int(g["mo"])
    year = int(g["y"]) if g.get("y") else None
    return Stamp(year, month, int(g["d"]), int(g["h"]), int(g["mi"]), int(g["s"]), _ms(g.get("frac")))


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
    if not g:
        return
    stamp = _stamp_of_groups(g)
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
    pid, name = g.get("pid"), g.get("name") or (g["src"].split()[0] if g.get("src") else None)
    if pid is not None and not pid.isdigit():
        pid, name = None, name or pid
    if line.pid is None and pid is not None:
        line.pid = int(pid)
    if line.actor is None and name:
        line.actor = name
    if line.ip is None and g.get("ip"):
        line.ip = g["ip"]
    if line.rank is None and g.get("rank"):
        line.rank = int(g["rank"])


def _load_envelopes() -> tuple[re.Pattern[str], tuple[Envelope, ...]]:
    from .data import load

    table = load("envelopes.toml")
    debris = re.compile("|".join(d["pattern"] for d in table["debris"]))
    envelopes = tuple(
        Envelope(e["name"], e["first"], re.compile(e["pattern"]), e.get("stream", False), tuple(e.get("sample", ())))
        for e in table["envelope"]
    )
    return debris, envelopes


# Each alternative of the debris begins with its own literal, so `re` skips every other
# character at C speed (an optional prefix made it try each position of the line).
ANSI, ENVELOPES = _load_envelopes()
# the envelopes worth trying on a line, by its first character
_ANY_FIRST = tuple(e for e in ENVELOPES if not e.first)
_BY_FIRST = {char: tuple(e for e in ENVELOPES if not e.first or char in e.first) for e in ENVELOPES for char in e.first}
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
    if isinstance(epoch, (int, float)):
        t = datetime.fromtimestamp(epoch / 1000 if epoch > 1e11 else epoch, tz=timezone.utc)
        line.stamp = Stamp(t.year, t.month, t.day, t.hour, t.minute, t.second)
    elif isinstance(record.get("asctime"), str):
        m = _ASCTIME.match(record["asctime"])
        if m:
            line.stamp = _stamp_of_groups(m.groupdict())
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
        for envelope in _BY_FIRST.get(text[:1], _ANY_FIRST):
            m = envelope.pattern.match(text)
            if m and m.end() > 0:
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


# A wall-clock time wherever it stands in a raw line, by kind; the alternation finds one
# (RE2, no captures: they cost more than the search), the kind's own regex reads it.
_STAMP_KINDS = {
    b"full": rb"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{3}))?",
    b"vllm": rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)",
    b"c10": rb"\[[A-Z](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)",
    b"wall": rb"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (\w{3}) +(\d+) (\d\d):(\d\d):(\d\d) (\d{4})\]",
    b"syslog": rb"(?m:^)(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d+) (\d\d):(\d\d):(\d\d) \S+ kernel:",
}
_STAMP_ANY = b"|".join(re.sub(rb"\((?!\?)", b"(?:", pattern) for pattern in _STAMP_KINDS.values())
_STAMP_IN = fast_regex(_STAMP_ANY)  # across a span: a DFA
_STAMP_AT = re.compile(_STAMP_ANY)  # within one line, from where a time is known to be: cheaper per call
_STAMP_READ = {kind.decode(): re.compile(pattern) for kind, pattern in _STAMP_KINDS.items()}


_STAMP_LINES = Prefilter([_STAMP_ANY.decode()], starts=True)


def last_stamp(data: bytes, lo: int, hi: int) -> Stamp | None:
    """The last wall-clock time standing in data[lo:hi], if any.

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
            return stamp_of_match(m)
        at = max(lo, data.rfind(b"\n", lo, stop - 1) + 1)
        while (m := _STAMP_AT.search(data, at, stop)) is not None:
            if m.end() == stop:
                return stamp_of_match(m)
            at = m.end()
    last = None
    for last in _STAMP_IN.finditer(data, lo, hi):  # noqa: B007 - only the last is wanted
        pass
    return None if last is None else stamp_of_match(last)


def stampless_until(data: bytes, lo: int, hi: int) -> int:
    """How far from `lo` no wall-clock time stands whole in data[lo:hi]: to just short of
    where the first one ends, or to `hi` (a driver console prints none). Every match is
    taken: hyperscan does not promise to report them in order."""
    if _STAMP_LINES.usable:
        ends = [stop for stop, _pattern in _STAMP_LINES._matches(data, lo, hi)]
        return min(ends) - 1 if ends else hi
    m = _STAMP_IN.search(data, lo, hi)  # no time starts before the leftmost one
    return hi if m is None else m.start()


def _stamp_kind(text: bytes) -> str:
    """Which kind of stamp a match is, from its first bytes (cheaper than RE2's lastgroup)."""
    first = text[:1]
    if first.isdigit():
        return "full"
    if first == b"[":
        return "c10" if text[2:3].isdigit() else "wall"
    return "vllm" if text.split(b" ", 1)[0] in (b"DEBUG", b"INFO", b"WARNING", b"ERROR", b"CRITICAL") else "syslog"


def stamp_of_match(m) -> Stamp:  # noqa: ANN001 - a match of _STAMP_IN or _STAMP_AT
    return _stamp_of(bytes(m.group(0)))


@functools.lru_cache(maxsize=4096)
def _stamp_of(text: bytes) -> Stamp:
    """Read once per distinct time (a Stamp is immutable): a burst of hits shares its stamps."""
    kind = _stamp_kind(text)
    g = _STAMP_READ[kind].match(text).groups()  # int() reads ASCII digits from bytes as they are
    if kind == "full":
        y, mo, d, h, mi, s = map(int, g[0:6])
        return Stamp(y, mo, d, h, mi, s, _ms(g[6] and g[6].decode()))
    if kind == "vllm":
        return Stamp(None, *map(int, g))
    if kind == "c10":
        mo, d, h, mi, s = map(int, g[0:5])
        return Stamp(None, mo, d, h, mi, s, _ms(g[5].decode()))
    if kind == "wall":
        d, h, mi, s, y = map(int, g[1:6])
        return Stamp(y, MONTHS[g[0].decode()], d, h, mi, s)
    d, h, mi, s = map(int, g[1:5])
    return Stamp(None, MONTHS[g[0].decode()], d, h, mi, s)
