"""Envelopes: peel what was put around a log message (formats.md §0) and keep what it says.

A line as a user pastes it may carry any chain of envelopes: what a collector, a viewer
or a CI added, Ray's `(Name pid=N, ip=X)` / `(raylet)` prefix and magic tokens, and the
header of whatever logger wrote the message. They are data (`data/envelopes.toml`, each
with sample lines the suite peels); colour codes in every form they survive in are
removed first, Ray's `[repeated Nx across cluster]` suffix after. Envelopes are peeled
in a loop until none matches; the facts they carry (time, pid, ip, actor name, rank)
become the line's context.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass

from .times import TIME_BY_NAME, Stamp, stamp_of_groups, with_times

REPEATED = re.compile(
    r"\s*\[repeated (\d+)x across cluster\]"
    r"(?: \(Ray deduplicates logs by default\..*?more options\.\))?\s*$"
)


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
    utc: Stamp | None = None  # a collector's zoned time outside the program's own local one: the two tell the host's zone


@dataclass(frozen=True, slots=True)
class Envelope:
    """One layout of `data/envelopes.toml`: a prefix and the facts its groups carry."""

    name: str
    first: str  # the characters its match can start with, "" for any
    pattern: re.Pattern[str]
    stream: bool  # Ray's driver-side prefix: names one worker's stream
    record: bool  # a line it begins starts a record of its own (starts_record)
    samples: tuple[dict, ...]
    writer: str | None = None  # the program whose logger this is, when nothing outer names one
    added: bool = False  # put before every line by a person, viewer or collector, not the program


def _take_stamp(line: Line, stamp: Stamp) -> None:
    """The innermost time with a year wins; a time without one borrows the year of an outer
    time of the same day, else the outer time stands (envelopes.toml says why)."""
    outer = line.stamp
    if outer is None or stamp.year is not None or outer.year is None:
        line.stamp = stamp
    elif (outer.month, outer.day) == (stamp.month, stamp.day):
        line.stamp = stamp._replace(year=outer.year)
    if line.stamp is not outer and outer is not None and outer.zone is not None and stamp.zone is None:
        line.utc = outer  # `docker logs -t` before a program's local stamp


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


def _lead(pattern: str) -> int | None:
    """How many characters at most a match of a debris pattern runs before the `[` it holds
    (every colour code has one), from sre's parse of its top level; None when no `[` stands
    there."""
    from re import _constants, _parser

    parsed = _parser.parse(pattern)
    width = 0
    for item in parsed:
        if item == (_constants.LITERAL, ord("[")):
            return width
        width += _parser.SubPattern(parsed.state, [item]).getwidth()[1]
    return None


def _load_envelopes() -> tuple[re.Pattern[str], int | None, tuple[Envelope, ...]]:
    from .data import load

    table = load("envelopes.toml")
    debris = re.compile("|".join(d["pattern"] for d in table["debris"]))
    leads = [_lead(d["pattern"]) for d in table["debris"]]
    lead = None if None in leads else max(n for n in leads if n is not None)
    envelopes = tuple(
        Envelope(
            e["name"],
            e["first"],
            re.compile(with_times(e["pattern"])),
            e.get("stream", False),
            e.get("record", True),
            tuple(e.get("sample", ())),
            e.get("writer"),
            e.get("added", False),
        )
        for e in table["envelope"]
    )
    return debris, lead, envelopes


# Each alternative of the debris begins with its own literal, so `re` skips every other
# character at C speed (an optional prefix made it try each position of the line).
ANSI, DEBRIS_LEAD, ENVELOPES = _load_envelopes()


def without_debris(text: str) -> str:
    """The text with every colour code removed, as ANSI.sub removes them. Each code holds a
    `[` at most DEBRIS_LEAD characters after its start, so none starts before the next `[`
    less that: the codes are looked for from there, and the text after the last `[` (most
    of a 4 KB step line behind its Ray prefix) is not searched."""
    at = text.find("[")
    if at < 0:
        return text
    if DEBRIS_LEAD is None:  # a code of the table without a `[` of its own
        return ANSI.sub("", text)
    pieces, pos = [], 0
    while at >= 0:
        m = ANSI.search(text, max(pos, at - DEBRIS_LEAD))
        if m is None:
            break
        pieces.append(text[pos : m.start()])
        pos = m.end()
        at = text.find("[", pos)
    pieces.append(text[pos:])
    return "".join(pieces)


# the envelopes worth trying on a line, by its first character
_ANY_FIRST = tuple(e for e in ENVELOPES if not e.first)
_ASCTIME = re.compile(TIME_BY_NAME["iso"].pattern)  # Ray's structured logs' "asctime"
BY_NAME = {e.name: e for e in ENVELOPES}
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
    except (ValueError, RecursionError):  # not JSON, or nested past what a record is
        return None
    if not isinstance(record, dict) or not isinstance(record.get("message"), str):
        return None
    line = Line(record["message"].replace("\\n", "\n").replace("\\t", "\t"))
    epoch = record.get("timestamp")
    if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) and math.isfinite(epoch):  # JSON's NaN and 1e999 are no time
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
    text = without_debris(raw.rstrip("\r\n"))
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


def starts_record(line: str) -> bool:
    """Whether a line begins as a record of its own: with an envelope of the table that
    marks one (behind any number of those that do not, a line number, a quote)."""
    text = without_debris(line)
    for _ in range(4):  # past a line number or a quote, what begins the line
        found = envelope_at(text)
        if found is None:
            return False
        if found[0].record:
            return True
        text = text[found[1].end() :]
    return False


def first_envelope(line: str) -> str | None:
    """The name of the envelope a line begins with, colour codes aside."""
    text = without_debris(line)
    found = envelope_at(text)
    return found[0].name if found is not None else None
