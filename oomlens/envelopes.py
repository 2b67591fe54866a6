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

import csv
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any, cast

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
    host: str | None = None  # the host a collector's record names (envelope collector_host)
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
    layer: re.Pattern[str] | None = None  # one copy of it, where its pattern reads several at once (nested quotes): what one more added


class _Uncompiled:
    """An envelope's pattern until its first use, which compiles it into the envelope's
    place: every later use is the compiled pattern's own, with nothing in between (a line
    tries several envelopes, and lines come by the million). A run tries the few envelopes
    its lines' first characters call for, and compiling the whole table cost every process
    more than reading most files."""

    __slots__ = ("envelope", "written")

    def __init__(self, written: str) -> None:
        self.written = written
        self.envelope: Envelope | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self.written)
        object.__setattr__(self.envelope, "pattern", compiled)  # frozen: set once, as a __post_init__ would
        return getattr(compiled, name)


def _envelope(entry: dict[str, Any]) -> Envelope:
    """An envelope of the table, its pattern compiled where it is first used (_Uncompiled)."""
    pattern = _Uncompiled(with_times(entry["pattern"]))
    envelope = Envelope(
        entry["name"],
        entry["first"],
        cast("re.Pattern[str]", pattern),
        entry.get("stream", False),
        entry.get("record", True),
        tuple(entry.get("sample", ())),
        entry.get("writer"),
        entry.get("added", False),
        re.compile(entry["layer"]) if "layer" in entry else None,
    )
    pattern.envelope = envelope
    return envelope


TAKE_REACH_S = 26 * 3600  # the same moment on a host's clock lies within 14 h of UTC either way, and a collector stamps a line a little after


def _take_stamp(line: Line, stamp: Stamp) -> None:
    """The innermost time with a year wins; a time without one takes the year that puts it
    nearest an outer time, within TAKE_REACH_S of it (a zone's evening is UTC's next day,
    New Year's Eve another year), else the outer time stands (envelopes.toml says why). The
    core's plans.rs `take` is the same rule."""
    outer = line.stamp
    if outer is None or stamp.year is not None or outer.year is None:
        line.stamp = stamp
    elif (year := _year_near(outer, stamp)) is not None:
        line.stamp = stamp._replace(year=year)
    if line.stamp is not outer and outer is not None and outer.zone is not None and stamp.zone is None:
        line.utc = outer  # `docker logs -t` before a program's local stamp


def _year_near(outer: Stamp, inner: Stamp) -> int | None:
    """The year (the outer's, or one either side) in which `inner` lies nearest `outer`, if
    within TAKE_REACH_S of it."""
    if outer.year is None or (at := _wall_seconds(outer.year, outer)) is None:
        return None
    years = (outer.year - 1, outer.year, outer.year + 1)
    near = min(((abs(t - at), y) for y in years if (t := _wall_seconds(y, inner)) is not None), default=None)
    return near[1] if near is not None and near[0] <= TAKE_REACH_S else None


def _wall_seconds(year: int, stamp: Stamp) -> int | None:
    """A stamp's wall-clock seconds in `year`; None where that year has no such day."""
    try:
        day = date(year, stamp.month, stamp.day).toordinal()
    except ValueError:
        return None
    return day * 86400 + stamp.hour * 3600 + stamp.minute * 60 + stamp.second


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
    if line.host is None and g.get("host"):
        line.host = sys.intern(g["host"])
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
    return debris, lead, tuple(_envelope(e) for e in table["envelope"])


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
    """A JSON record of a collector of the table (`[[record]]` of data/envelopes.toml) alone on
    its line: Ray's own (events/event_*.log, RAY_BACKEND_LOG_JSON=1: its message whole, its
    time and pid), or a line a collector wrote (docker's json-file, journald's, a cloud's),
    peeled as the line it holds with its facts (written), wherever it stands in a paste."""
    for c in _JSON_COLLECTORS:
        found = read_record(c, text)
        if found is None:
            continue
        if not c.peel:
            return peel(written(found)[0])
        line = Line(found.text)
        if found.time is not None and (m := _ISO.match(found.time)):
            line.stamp = stamp_of_groups(m.groupdict())
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):  # read once above: cannot fail here
            return line
        pid = _first(record, c.pid)
        if isinstance(pid, (int, str)) and str(pid).isdigit():
            line.pid = int(pid)
        return line
    return None


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
    return _peeled(line, text)


def peel_shorter(raw: str) -> Iterator[Line]:
    """The line peeled again with each envelope that fits its start but ends sooner than
    the one the table puts first: where that one took the message's first words for its
    own (behind `ts`'s stamp, "Considered workers: [" reads as a journal's host and unit).
    A block's reader asks, for a line that as peeled does not go on with the block."""
    text = without_debris(raw.rstrip("\r\n"))
    first = envelope_at(text)
    if first is None:
        return
    for envelope in _BY_FIRST.get(text[:1], _ANY_FIRST):
        m = envelope.pattern.match(text)
        if envelope is not first[0] and m and 0 < m.end() < first[1].end():
            line = Line(text)
            _apply(envelope, line, m)
            yield _peeled(line, text[m.end() :])


def _peeled(line: Line, text: str) -> Line:
    """`line` with the envelopes that `text` begins with peeled into it; its text, the rest."""
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
    they were added): one copy of each (its `layer`), so a quote of a quote keeps the inner one."""
    for envelope in envelopes:
        m = (envelope.layer or envelope.pattern).match(line.decode("utf-8", "replace"))
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


# -- collector records: a whole line, or several, is one record of a collector ------------


@dataclass(frozen=True, slots=True)
class Collector:
    """One `[[record]]` of `data/envelopes.toml`: how a collector writes a log's lines as
    records, and where in a record its line and facts stand."""

    name: str
    form: str  # json (an object a line), export (journald's export format), csv, line (a pattern a line)
    needs: tuple[str, ...]  # json, csv: the fields every record holds (dotted paths, or columns)
    needs_any: tuple[str, ...]  # json: and one of these at least
    line: tuple[str, ...]  # where the line stands: the first of these that holds a string
    time: tuple[str, ...]
    stream: tuple[str, ...]
    pod: tuple[str, ...]
    container: tuple[str, ...]
    host: tuple[str, ...]
    pid: tuple[str, ...]  # the writer's pid, where the record is the program's own (Ray's)
    pattern: re.Pattern[str] | None  # line: the record's head, its groups the facts; the line follows
    unended: bool  # a record whose line does not end in a line break goes on in the next (docker's 16 KiB pieces)
    escaped: bool  # the line is escaped once more than JSON needs (Ray's: `\\n` for a new line)
    peel: bool  # read where it stands, a line at a time (Ray's own records), not by the stream
    samples: tuple[dict, ...]
    piece: int = 0  # unended: the bytes of text a piece holds (docker's 16 KiB), each but the last
    continued: tuple[tuple[str, str], ...] = ()  # (field, value): a record so marked goes on in the next (journald's LineMax)


def _collectors() -> tuple[Collector, ...]:
    from .data import load

    def paths(r: dict, key: str) -> tuple[str, ...]:
        value = r.get(key, ())
        return (value,) if isinstance(value, str) else tuple(value)

    return tuple(
        Collector(
            r["name"],
            r["form"],
            paths(r, "needs"),
            paths(r, "needs_any"),
            paths(r, "line"),
            paths(r, "time"),
            paths(r, "stream"),
            paths(r, "pod"),
            paths(r, "container"),
            paths(r, "host"),
            paths(r, "pid"),
            re.compile(with_times(r["pattern"])) if "pattern" in r else None,
            r.get("unended", False),
            r.get("escaped", False),
            r.get("peel", False),
            tuple(r.get("sample", ())),
            r.get("piece", 0),
            tuple(r.get("continued", {}).items()),
        )
        for r in load("envelopes.toml")["record"]
    )


COLLECTORS = _collectors()
RECORD_BY_NAME = {c.name: c for c in COLLECTORS}
_JSON_COLLECTORS = tuple(c for c in COLLECTORS if c.form == "json")
_ISO = re.compile(TIME_BY_NAME["iso"].pattern)
LABEL = re.compile(r'([\w.-]+)\s*[=:]\s*"((?:[^"\\]|\\.)*)"|([\w.-]+)=([^,\s}]*)')  # logcli's {k="v"}, Grafana's k=v


def _at(record: Any, path: str) -> Any:
    """The value at a dotted path of a JSON record (a key may hold dots itself: tried whole first)."""
    if isinstance(record, dict) and path in record:
        return record[path]
    head, dot, rest = path.partition(".")
    if dot and isinstance(record, dict) and head in record:
        return _at(record[head], rest)
    return None


def _first(record: Any, paths: tuple[str, ...]) -> Any:
    for path in paths:
        value = _at(record, path)
        if value is not None:
            return value
    return None


def _text(value: Any) -> str | None:
    """A field's text: a string, or journald's array of bytes (a field that is not UTF-8)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def _rfc3339(value: Any) -> str | None:
    """A record's time as RFC 3339 with its zone: an ISO text as written (a zone it lacks stays
    lacking), or an epoch in seconds, milliseconds, microseconds or nanoseconds as UTC."""
    if isinstance(value, str) and value.strip().lstrip("-").replace(".", "", 1).isdigit():
        value = float(value) if "." in value else int(value)
    if isinstance(value, str):
        m = _ISO.match(value.strip())
        if m is None:
            return None
        g = m.groupdict()
        frac = f".{g['frac']}" if g["frac"] else ""
        return f"{g['y']}-{g['mo']}-{g['d']}T{g['h']}:{g['mi']}:{g['s']}{frac}{g['zone'] or ''}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        scale = next((s for s, limit in ((1, 1e11), (1e3, 1e14), (1e6, 1e17)) if value < limit), 1e9)
        try:
            t = datetime.fromtimestamp(value / scale, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
        return t.strftime("%Y-%m-%dT%H:%M:%SZ" if isinstance(value, int) and scale == 1 else "%Y-%m-%dT%H:%M:%S.%fZ")  # whole seconds print none
    return None


def _labels(value: Any) -> dict[str, str]:
    """Labels as a dict: a JSON object's, or written `{k="v", ...}` (logcli) or `k=v, ...`."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        if value.startswith("{"):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return _labels(parsed)
        return {m.group(1) or m.group(3): m.group(2) if m.group(1) else m.group(4) for m in LABEL.finditer(value)}
    return {}


@dataclass(slots=True)
class Record:
    """What one record says: its line (one or several), and the facts around it."""

    text: str
    time: str | None = None
    stream: str | None = None
    pod: str | None = None
    container: str | None = None
    host: str | None = None
    ended: bool = True  # its line ends here (else the next record goes on with it)


def _facts(c: Collector, record: Any, text: str) -> Record:
    time = _first(record, c.time)
    stream = _text(_first(record, c.stream))
    return Record(
        text,
        _rfc3339(time) if time is not None else None,
        stream.lower() if stream and stream.lower() in ("stdout", "stderr") else None,
        _text(_first(record, c.pod)) or None,
        _text(_first(record, c.container)) or None,
        _text(_first(record, c.host)) or None,
    )


def read_record(c: Collector, raw: str) -> Record | None:
    """One physical line read as a record of collector `c` (json or line), or None if it is none."""
    if c.form == "json":
        if not raw.startswith("{"):
            return None
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(record, dict) or any(_at(record, need) is None for need in c.needs):
            return None
        if c.needs_any and all(_at(record, need) is None for need in c.needs_any):
            return None
        text = _text(_first(record, c.line))
        if text is None:
            return None
        if c.escaped:
            text = text.replace("\\n", "\n").replace("\\t", "\t")
        found = _facts(c, record, text)
        found.ended = (not c.unended or text.endswith("\n")) and not _continued(c, record)
        return found
    if c.form == "line" and c.pattern is not None:
        m = c.pattern.match(raw)
        if m is None:
            return None
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        labels = _labels(g.pop("labels", None))
        found = _facts(c, {**labels, **g}, raw[m.end() :])
        found.ended = g.get("partial") != "P"
        return found
    return None


def written(record: Record) -> list[str]:
    """A record's lines as a collector that prints them would: the pod and container as
    `kubectl logs --prefix` does, the host as `[host/NAME]`, the time and stream as a
    Kubernetes node's CRI log does; what is peeled then (envelopes kubectl_prefix,
    collector_host, rfc3339) gives the line's facts back."""
    head = ""
    if record.host:
        head += f"[host/{_token(record.host)}] "
    if record.pod:
        head += f"[pod/{_token(record.pod)}{'/' + _token(record.container) if record.container else ''}] "
    if record.time:
        head += f"{record.time} {record.stream + ' F ' if record.stream else ''}"
    lines = record.text.rstrip("\r\n").split("\n") if record.text.strip("\r\n") else [""]
    return [head + line.rstrip("\r") for line in lines]


def _token(name: str) -> str:
    """A name as one token of a prefix: no blank, no bracket."""
    return re.sub(r"[\s\[\]]", "_", name)


def collector_of(head: bytes) -> Collector | None:
    """The collector whose records every whole line of a stream's head is (and there are at
    least two, or one whole head), else None: a file of records is read record by record,
    never a plain log whose lines only look like one."""
    if head.startswith(b"__CURSOR=") or head.startswith(b"__REALTIME_TIMESTAMP="):
        return RECORD_BY_NAME.get("journald_export")
    cut = head.rfind(b"\n")
    lines = [ln for ln in head[: cut + 1].decode("utf-8", "replace").split("\n") if ln.strip()][:32]
    if not lines:
        return None
    try:
        header = next(iter(csv.reader([lines[0].rstrip("\r")])), [])
    except csv.Error:  # a NUL or a lone carriage return: no header of a CSV
        header = []
    for c in COLLECTORS:
        if c.form == "csv":
            if len(lines) > 1 and set(c.needs) <= set(header) and any(name in header for name in c.line):
                return c
        elif c.form in ("json", "line") and (len(lines) > 1 or cut == len(head) - 1):
            records = [read_record(c, ln.rstrip("\r")) for ln in lines]
            if all(r is not None for r in records):
                if c.peel:  # the program's own records (Ray's, before any look-alike): read where they stand
                    return None
                return c if not c.unended or _pieces(c, head[: cut + 1]) else replace(c, unended=False)
    return None


def _pieces(c: Collector, whole: bytes) -> bool:
    """Whether `c`'s records in a stream's head (all its whole lines: a line longer than 32
    pieces is no rarity) may be pieces of longer lines. A line cut in pieces is told by a
    record without the line break the others end with; where none ends with one, every
    record is a whole line (fluent-bit's CRI parser), unless one is a piece as the collector
    cuts them (docker: 16 KiB of text), the head being within one long line."""
    texts = [r.text for ln in whole.decode("utf-8", "replace").split("\n") if ln.strip() and (r := read_record(c, ln.rstrip("\r"))) is not None]
    return any(t.endswith("\n") or len(t.encode()) == c.piece for t in texts)


MAX_RECORD = 1 << 20  # a record longer than this is passed on as it is; a line joined from pieces ends here


def unwrapped(c: Collector, lines: Iterator[bytes]) -> Iterator[bytes]:
    """The lines a stream of `c`'s records holds, as written() writes them: a line a
    collector split in pieces is joined again; a line that is no record is passed on."""
    if c.form == "export":
        yield from _export_lines(lines)
        return
    if c.form == "csv":
        yield from _csv_lines(c, lines)
        return
    pending: Record | None = None
    for raw in lines:
        found = read_record(c, raw.decode("utf-8", "replace").rstrip("\r\n")) if len(raw) <= MAX_RECORD else None
        if found is None:
            if pending is not None:
                yield from _encoded(pending)
                pending = None
            yield raw if raw.endswith(b"\n") else raw + b"\n"
            continue
        if pending is not None:  # the line goes on: its first piece's facts, its last piece's end
            pending.text += found.text
            pending.ended = found.ended
            found, pending = pending, None
        if found.ended or len(found.text) > MAX_RECORD:
            yield from _encoded(found)
        else:
            pending = found
    if pending is not None:
        yield from _encoded(pending)


def _encoded(record: Record) -> Iterator[bytes]:
    for line in written(record):
        yield line.encode("utf-8", "surrogateescape") + b"\n"


def _csv_lines(c: Collector, lines: Iterator[bytes]) -> Iterator[bytes]:
    """A CSV download (Grafana's of a Loki query): a header, then a row a line."""
    text = (raw.decode("utf-8", "replace") for raw in lines)
    rows = csv.reader(text)
    try:
        header = next(rows)
        for row in rows:
            record = dict(zip(header, row, strict=False))
            labels = _labels(record.get("labels") or record.get("Labels"))
            line = _first(record, c.line)
            if not isinstance(line, str):
                continue
            yield from _encoded(_facts(c, {**labels, **record}, line))
    except (csv.Error, StopIteration):
        return


def _continued(c: Collector, record: dict[str, Any]) -> bool:
    """Whether a record says its line goes on in the next (`continued` of envelopes.toml)."""
    return any(_at(record, name) == value for name, value in c.continued)


def _export_lines(lines: Iterator[bytes]) -> Iterator[bytes]:
    """journalctl -o export: an entry is `FIELD=value` lines up to a blank one; a field whose
    value is not text (a line break in it, or bytes) is its name, a line break, its length
    as 64 bits little-endian, the bytes and a line break (systemd's Journal Export Format).
    A message of several lines is each of them, with the entry's time and host; a line
    journald split at LineMax is joined again (`continued`)."""
    entry: dict[str, Any] = {}
    stream = _Joined(lines)
    c = RECORD_BY_NAME["journald_export"]
    pending: Record | None = None
    while True:
        raw = stream.readline()
        if not raw or raw == b"\n":
            if entry:
                text = _text(_first(entry, c.line))
                if text is not None:
                    found = _facts(c, entry, text)
                    if pending is not None:
                        pending.text += found.text
                        found = pending
                    pending = found if _continued(c, entry) and len(found.text) <= MAX_RECORD else None
                    if pending is None:
                        yield from _encoded(found)
                entry = {}
            if not raw:
                if pending is not None:
                    yield from _encoded(pending)
                return
            continue
        name, eq, value = raw.rstrip(b"\n").partition(b"=")
        if eq:
            entry[name.decode("ascii", "replace")] = value.decode("utf-8", "replace")
            continue
        size = stream.read(8)
        if len(size) < 8:
            return
        data = stream.read(min(int.from_bytes(size, "little"), MAX_RECORD))
        entry[name.decode("ascii", "replace")] = data.decode("utf-8", "replace")
        stream.readline()  # the line break after the bytes


class _Joined:
    """Lines read as a stream again: the bytes of a binary field span lines."""

    def __init__(self, lines: Iterator[bytes]) -> None:
        self.lines, self.held = lines, b""

    def readline(self) -> bytes:
        if b"\n" in self.held:
            line, _, self.held = self.held.partition(b"\n")
            return line + b"\n"
        line, self.held = self.held + next(self.lines, b""), b""
        return line

    def read(self, size: int) -> bytes:
        while len(self.held) < size:
            more = next(self.lines, b"")
            if not more:
                break
            self.held += more
        data, self.held = self.held[:size], self.held[size:]
        return data
