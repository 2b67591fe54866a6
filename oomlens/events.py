"""Events: the typed records every later stage works on (DESIGN.md, contract v1).

Sizes are bytes, times are timezone-less ISO strings, and every event knows the
file lines it came from. The same incident seen through several channels (raylet.out,
the driver console, events/*.log) is folded into one event with several sources.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from .envelopes import peel
from .kinds import Kind, Kinds, device_values, shipped

COMPONENTS = (
    "rollout",
    "update_weight",
    "actor_train",
    "critic",
    "ref_model",
    "reward_model",
    "checkpoint",
    "driver",
    "unknown",
)

GIB = 1024**3
# Bytes per unit as the grammars accept it (common.lark's SIZE_UNIT): every tool oomlens reads
# means binary units, whether it writes "GB", "GiB" or a bare "G", from kilo to yotta
UNITS = {"b": 1, "bytes": 1}
for _power, _prefix in enumerate("kmgtpezy", start=1):
    UNITS[_prefix] = UNITS[f"{_prefix}b"] = UNITS[f"{_prefix}ib"] = 1024**_power  # the kernel's and Ray's "kB" are KiB too
GLUED = re.compile(r"\s*([-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan))\s*([A-Za-z]*)\s*", re.IGNORECASE)


def to_bytes(number: str | float, unit: str = "GiB", signed: bool = False) -> int | None:
    """Convert a printed size to bytes; a unit glued to the number ("2.85ZB") is the one
    that counts, else `unit`. None for a size no memory has: an overflow, `inf`, `1e999`,
    past 2**63 bytes, or below zero (veRL prints -1 for a size it could not read) unless
    `signed` (a change of size). Text that is no size at all raises ValueError."""
    text = str(number)
    try:  # the common case: the number alone, its unit apart
        return sized(float(text.replace(",", "") if "," in text else text) * _factor(unit), signed)
    except ValueError:
        pass
    m = GLUED.fullmatch(text)
    if m is None:
        raise ValueError(f"not a size: {text!r}") from None
    digits, glued = m.groups()
    return sized(float(digits.replace(",", "") if "," in digits else digits) * _factor(glued or unit), signed)


def sized(size: float, signed: bool = False) -> int | None:
    """A size in bytes as an integer, or None for one no memory has: every family converts
    through this or to_bytes, so an absurd number in a log is a size not known, not a crash.
    A size below zero is not known either, unless `signed` says it is a change of size."""
    return round(size) if (-LARGEST if signed else 0) <= size < LARGEST else None  # NaN is neither


LARGEST = 2.0**63  # bytes: what JSON readers and pandas hold as an integer, and far beyond any machine


def count(text: str) -> int | None:
    """An integer a log printed (a pid, a count) that every reader of the contract holds,
    or None for one past 2**63: not known."""
    value = int(text)
    return value if -LARGEST <= value < LARGEST else None


@functools.lru_cache(maxsize=64)
def _factor(unit: str) -> int:
    """Bytes per `unit` as printed ("GiB", " KB"): memory samples convert four sizes a line."""
    return UNITS[unit.strip().lower()]


@dataclass(slots=True)
class Source:
    """Where an event was read: a file (or archive member, or '-') and its line range."""

    path: str
    line: int
    end_line: int
    # the lines as read, where a layout made them other than the file's (a wrap joined, a
    # paste turned round): how far apart two reports stand, which a wrap must not stretch
    read: tuple[int, int] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "end_line": self.end_line}

    @property
    def span(self) -> tuple[int, int]:
        """First and last line as read: the measure of distances between reports of a file."""
        return self.read or (self.line, self.end_line)


@dataclass(slots=True, weakref_slot=True)  # the scanner holds open events weakly
class Event:
    """One occurrence of a contract kind, with the context its envelope carried."""

    kind: str
    source: Source
    text: str
    time: str | None = None
    time_inferred: bool = False  # `time` is the last stamp before the line, which prints none
    node: str | None = None
    pid: int | None = None
    actor: str | None = None
    method: str | None = None
    rank: int | None = None
    gpu: int | None = None
    component: str | None = None
    memory: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    sources: list[Source] = field(default_factory=list)
    id: str | None = None
    time_latest: str | None = None  # for an inferred time: the first stamp after the line
    time_printed: str | None = None  # the time as the log printed it, where the clock corrected it
    copies: list[tuple[str, str]] = field(default_factory=list)  # (path, own time) of each report folded into it
    stamp_nodes: tuple[str | None, str | None] | None = None  # nodes whose lines lent time and time_latest, in a file of many nodes
    device: str | None = None  # the accelerator whose memory it is about (data/devices.toml: cuda, rocm, npu, xpu, mps)

    def __post_init__(self) -> None:
        if not self.sources:
            self.sources = [self.source]

    @property
    def said(self) -> str:
        """Its message as the log printed it: the first line of its block, envelopes peeled
        (what a sentence quotes where the message gives no numbers)."""
        return peel(self.text.split("\n", 1)[0]).text.strip()

    def values(self) -> dict[str, Any]:
        """What the kinds' templates (data/kinds.toml) may name: who and where, then its
        fields (a field that is None leaves who and where as they are), `fields`, `said`, and
        its device's words (`kinds.device_values`)."""
        told: dict[str, Any] = {"pid": self.pid, "actor": self.actor, "rank": self.rank, "gpu": self.gpu, "node": self.node, "method": self.method}
        told.update((k, v) for k, v in self.fields.items() if k not in told or v is not None)
        told.update(fields=self.fields, said=self.said)
        told.update(device_values(self.device, self.gpu, self.memory))
        return told

    def to_dict(self) -> dict[str, Any]:
        """The contract-v1 object (plus `sources`, `time_inferred`, `time_latest`,
        `time_printed` and `device`, all additive)."""
        source = self.source.to_dict()
        return {
            "id": self.id,
            "kind": self.kind,
            "time": self.time,
            "time_inferred": self.time_inferred,
            "time_latest": self.time_latest,
            "time_printed": self.time_printed,
            "source": source,
            "sources": [source] if len(self.sources) == 1 and self.sources[0] is self.source else [s.to_dict() for s in self.sources],
            "node": self.node,
            "pid": self.pid,
            "actor": self.actor,
            "method": self.method,
            "rank": self.rank,
            "gpu": self.gpu,
            "component": self.component,
            "memory": self.memory,
            "device": self.device,
            "fields": self.fields,
            "text": self.text,
        }


@dataclass(slots=True)
class Clue:
    """Context that is no event of the contract: traceback frames, a remote task's header, a
    setting printed in a config dump. The correlator reads clues to name a phase or a component."""

    kind: str  # "context" (frames and task headers) or "setting"
    source: Source
    fields: dict[str, Any]
    time: str | None = None
    pid: int | None = None
    actor: str | None = None
    node: str | None = None


# evidence: the wording of failures a reduction left out; alias: a collector's host name for a node's IP
CLUE_KINDS = ("context", "setting", "clock", "evidence", "alias")
CONTEXT_BEFORE = 120  # lines of traceback that may precede the line an event was read from
CONTEXT_AFTER = 40  # lines after it (a remote-task header printed below a CUDA OOM)


def to_rows(found: list[Event | Clue]) -> list[tuple]:
    """Events and clues as tuples of plain values: how they cross from the worker processes.
    Pickle writes and reads such a tuple without calling any code of ours; an object it
    takes apart and rebuilds through calls, about twice as slow each way. A clue's kind
    tells it from an event's; an event's one source is not repeated."""
    rows: list[tuple] = []
    for x in found:
        src = x.source
        if isinstance(x, Clue):
            rows.append((x.kind, src.path, src.line, src.end_line, src.read, x.fields, x.time, x.pid, x.actor, x.node))
            continue
        sources = None if len(x.sources) == 1 and x.sources[0] is src else [(s.path, s.line, s.end_line, s.read) for s in x.sources]
        rows.append(
            (
                x.kind,
                src.path,
                src.line,
                src.end_line,
                src.read,
                x.text,
                x.time,
                x.time_inferred,
                x.node,
                x.pid,
                x.actor,
                x.method,
                x.rank,
                x.gpu,
                x.component,
                x.memory,
                x.fields,
                sources,
                x.id,
                x.time_latest,
                x.time_printed,
                x.copies,
                x.stamp_nodes,
                x.device,
            )
        )
    return rows


def from_rows(rows: list[tuple]) -> list[Event | Clue]:
    """What to_rows() was given."""
    found: list[Event | Clue] = []
    for row in rows:
        if row[0] in CLUE_KINDS:
            kind, path, line, end_line, read, fields, time, pid, actor, node = row
            found.append(Clue(kind, Source(path, line, end_line, read), fields, time, pid, actor, node))
            continue
        kind, path, line, end_line, read, text, time, inferred, node, pid, actor, method, rank, gpu, component, memory, fields, sources, id_, *clock = row
        source = Source(path, line, end_line, read)
        found.append(
            Event(
                kind,
                source,
                text,
                time,
                inferred,
                node,
                pid,
                actor,
                method,
                rank,
                gpu,
                component,
                memory,
                fields,
                [source] if sources is None else [Source(*s) for s in sources],
                id_,
                *clock,
            )
        )
    return found


FOLD_WINDOW_S = 120  # two reports of one occurrence are never further apart than this
Zones = dict[str, int]  # a file's path -> its host's offset from UTC in seconds (clock.local_offsets)
FOLD_LINES = 400  # nor, in one file, more lines apart than this (an allocator's warning and its traceback's last line)


WORKER_FILE = re.compile(r"^(?:python-core-worker-|(?:io_)?worker-)([0-9a-f]{40,})[-_](?:[0-9a-f]+-)?(\d+)")


def name_workers(events: list[Event], paths: list[str]) -> None:
    """Give the pid to events that name a worker by its id alone (the GCS's "Reporting worker
    exit, worker id = ..."): a worker's own log files are named after its id and pid, and a
    kill report lists both for each worker it killed or considered."""
    pids: dict[str, int] = {}
    for path in paths:
        m = WORKER_FILE.match(path.rsplit("/", 1)[-1])
        if m:
            pids[m.group(1)] = int(m.group(2))
    for event in events:
        listed = [w for key in ("killed", "considered") if isinstance(event.fields.get(key), list) for w in event.fields[key]]
        for worker in listed:
            if isinstance(worker, dict) and worker.get("worker_id") and worker.get("pid") is not None:
                pids.setdefault(worker["worker_id"], worker["pid"])
    for event in events:
        if event.pid is None and event.fields.get("worker_id") in pids:
            event.pid = pids[event.fields["worker_id"]]
        for worker in killed if isinstance(killed := event.fields.get("killed"), list) else []:
            if isinstance(worker, dict) and worker.get("pid") is None and worker.get("worker_id") in pids:
                worker["pid"] = pids[worker["worker_id"]]


def fold(events: list[Event], kinds: Kinds | None = None, zones: Zones | None = None) -> list[Event]:
    """Fold reports of the same occurrence into one event with several sources (a new list;
    the events given are left as they were): a kind's
    `identity` in data/kinds.toml says which reports are one occurrence.

    A report cut before the numbers that identify it (a paste, a log line that ends the
    message early) joins the nearest full report of its kind on the same node. `zones`:
    each file's offset from UTC (clock.local_offsets), in which a time it printed with a
    zone is compared with local ones."""
    kinds = kinds if kinds is not None else shipped()
    zones = zones or {}
    folded = {name for name, kind in kinds.items() if kind.folded}  # others are never folded
    # the events given stay as they were: a report takes in others on a copy (a few failures
    # among tens of thousands of readings, which are never folded)
    events = [copy_of(e) if e.kind in folded else e for e in events]
    kept = _fold_identical(events, kinds, folded, zones)
    while len(again := _fold_identical(kept, kinds, folded, zones)) < len(kept):  # a report that joined brought an identity an earlier report had
        kept = again
    full = [e for e in kept if e.kind in folded and _identity(e, kinds[e.kind]) is not None]
    result = []
    for event in kept:
        partial = event.kind in folded and kinds[event.kind].partial
        home = _nearest(event, full, zones) if partial and _identity(event, kinds[event.kind]) is None else None
        if home is None:
            result.append(event)
        else:
            _absorb(home, event)
    return _fold_cut(_fold_raised(_fold_echoed(_fold_wrapped(result), kinds), kinds), kinds)


def copy_of(event: Event) -> Event:
    """An event a later stage may change without changing the one it was given: its own
    fields, sources and copies (what folding, the clock and the correlator write to)."""
    return replace(event, fields=dict(event.fields), sources=list(event.sources), copies=list(event.copies))


def number(events: list[Event]) -> list[Event]:
    """Number events e1, e2, ... in the order given: the ids the contract refers to them by."""
    for n, event in enumerate(events, 1):
        event.id = f"e{n}"
    return events


WRAPPED = "wrapped"  # the reason of a failure told only by the header of a caller's RayTaskError


def _fold_wrapped(events: list[Event]) -> list[Event]:
    """A RayTaskError(ActorDiedError) header only says that an actor died: the death's own
    report in the same file (the ActorDiedError below it, the raylet's line) tells which, and
    takes the header as one more source. A header alone stays the evidence there is."""
    told: dict[tuple[str, str], Event] = {}
    for event in events:
        if event.fields.get("reason") != WRAPPED:
            told.setdefault((event.source.path, event.kind), event)
    result = []
    for event in events:
        wrapped = event.fields.get("reason") == WRAPPED
        home = told.get((event.source.path, event.kind)) if wrapped else None
        if home is None:
            result.append(event)
            if wrapped:  # the callers' headers of one file, each a view of the same death
                told[event.source.path, event.kind] = event
        else:
            home.sources.extend(src for src in event.sources if src not in home.sources)
    return result


def _fold_echoed(events: list[Event], kinds: Kinds) -> list[Event]:
    """abseil's failure handler writes a signal twice, raw and then through Ray's logger,
    each line stamped by whatever stamps it (a collector may stamp the raw one months from
    the logger's own time): reports of a kind with `echoed_within`, of one identity and that
    many lines or fewer apart in one file, are one occurrence whatever their times."""
    reach = {name: kind.echoed_within for name, kind in kinds.items() if kind.echoed_within}
    if not reach or not any(e.kind in reach for e in events):
        return events
    last: dict[tuple, Event] = {}
    result = []
    for event in events:
        key = _identity(event, kinds[event.kind]) if event.kind in reach else None
        home = last.get((event.source.path, key)) if key is not None else None
        if home is not None and _apart(home.sources[-1], event.source) <= reach[event.kind]:
            _absorb(home, event)
            continue
        result.append(event)
        if key is not None:
            last[event.source.path, key] = event
    return result


def _apart(a: Source, b: Source) -> int:
    """Lines as read between two reports of one file (0 where they touch or overlap): a
    traceback's length is no distance, where it ends is; nor is a wrap's cut."""
    (a_lo, a_hi), (b_lo, b_hi) = a.span, b.span
    return max(0, b_lo - a_hi, a_lo - b_hi)


def _fold_cut(events: list[Event], kinds: Kinds) -> list[Event]:
    """A traceback a wrap or a paste cut before its exception (kinds.toml `traceback_of`:
    the values that say so) within its kind's `traceback_reach` lines of another failure in
    its file is that failure's traceback (or the chained one after it), broken off where a
    wrap split a frame: left out, the failure tells it."""
    reach = {name: kind.traceback_reach for name, kind in kinds.items() if kind.traceback_reach}
    if not reach or not any(e.kind in reach for e in events):
        return events
    cut = [e for e in events if e.kind in reach and kinds[e.kind].traceback_of_one(e.fields)]
    if not cut:
        return events
    by_path: dict[str, list[int]] = {}
    for event in events:
        if event.kind in kinds.failures and not (event.kind in reach and kinds[event.kind].traceback_of_one(event.fields)):
            by_path.setdefault(event.source.path, []).extend(s.span[0] for s in event.sources if s.path == event.source.path)
    for lines in by_path.values():
        lines.sort()
    dropped = set()
    for event in cut:
        lines = by_path.get(event.source.path, [])
        at = event.source.span[0]
        i = bisect.bisect_left(lines, at)
        near = [lines[j] for j in (i - 1, i) if 0 <= j < len(lines)]
        if any(abs(line - at) <= reach[event.kind] for line in near):
            dropped.add(id(event))
    return [e for e in events if id(e) not in dropped]


def _fold_raised(events: list[Event], kinds: Kinds) -> list[Event]:
    """The exception a memory failure raised (NCCL's `unhandled cuda error` under its `Cuda
    failure 'out of memory'`) is that failure told once more: a report of a kind with
    `raised_within` that many lines or fewer from a memory failure's report in its file is
    left out, the memory failure's report tells it."""
    near = {name: kind.raised_within for name, kind in kinds.items() if kind.raised_within}
    if not near or not any(e.kind in near for e in events):
        return events
    spans: dict[str, list[tuple[int, int]]] = {}
    for event in events:
        if event.kind in kinds.memory_failures:
            for source in event.sources:
                spans.setdefault(source.path, []).append(source.span)
    reports = {path: _Reports(found) for path, found in spans.items()}
    result = []
    for event in events:
        reach, s = near.get(event.kind), event.source
        if not reach or s.path not in reports or not reports[s.path].within(s.span, reach):
            result.append(event)
    return result


class _Reports:
    """The spans of a file's memory failures' reports, for the question _fold_raised asks of
    every report: is one of them within `reach` lines of this span (_apart)? A span (lo, hi)
    is, exactly where lo <= span's end + reach and hi >= span's start - reach: among the
    spans sorted by start, those that start early enough are a prefix, and the latest end
    of each prefix is kept. One search a report: a log failing in a loop has thousands of
    memory failures and as many reports to ask about (each against each was quadratic)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        spans.sort()
        self.starts = [lo for lo, _ in spans]
        self.latest = list(itertools.accumulate((hi for _, hi in spans), max))

    def within(self, span: tuple[int, int], reach: int) -> bool:
        lo, hi = span
        i = bisect.bisect_right(self.starts, hi + reach)
        return i > 0 and self.latest[i - 1] >= lo - reach


def _nearest(event: Event, full: list[Event], zones: Zones) -> Event | None:
    best, best_gap = None, float(FOLD_WINDOW_S)
    for other in full:
        if other.kind != event.kind or other.time is None or event.time is None:
            continue
        node = event.fields.get("node_id")
        if node and other.fields.get("node_id") and not other.fields["node_id"].startswith(node):
            continue
        gap = _gap(event, other, zones)
        if gap is not None and gap <= best_gap:
            best, best_gap = other, gap
    return best


def _fold_identical(events: list[Event], kinds: Kinds, folded: set[str], zones: Zones) -> list[Event]:
    kept: list[Event] = []
    index: dict[tuple, _Homes] = {}
    places: dict[int, _Places] = {}  # id of each home that took in a report -> where it was reported
    for event in events:
        if event.kind not in folded:  # a memory sample: tens of thousands of them, none folded
            kept.append(event)
            continue
        kind = kinds[event.kind]
        near = ((rank, o) for key in _identities(event, kind) if key in index for o in index[key].near(event) if (rank := _nearness(event, o, places, zones)))
        # the nearest (the first of equals): an interval open to a paste's end may reach several
        _, home = min(near, key=lambda found: found[0], default=(None, None))
        if home is None:
            kept.append(event)
            home = event
        else:
            _absorb(home, event, _places(home, places))
        for key in _identities(home, kind):  # a report that joined may have brought another identity, or another time
            index.setdefault(key, _Homes(zones)).add(home)
    return kept


class _Places:
    """Where a home was reported: its lines in each file, sorted, and its sources as a set. A
    home may take in thousands of reports (a stamp-less log that prints one failure on every
    line): each new one is compared and added in log time, not in the number before it."""

    __slots__ = ("lines", "seen")

    def __init__(self, home: Event) -> None:
        self.lines: dict[str, list[int]] = {}
        self.seen: set[tuple[str, int, int]] = set()
        for source in home.sources:
            self.add(source)

    def add(self, source: Source) -> bool:
        """Add a place; False when the home was reported there already."""
        key = (source.path, source.line, source.end_line)
        if key in self.seen:
            return False
        self.seen.add(key)
        bisect.insort(self.lines.setdefault(source.path, []), source.line)
        return True

    def apart(self, event: Event) -> int | None:
        """The fewest lines between a report of `event` and one of the home in the same file;
        None when they share no file."""
        best: int | None = None
        for source in event.sources:
            lines = self.lines.get(source.path)
            if not lines:
                continue
            at = bisect.bisect_left(lines, source.line)
            for near in lines[max(0, at - 1) : at + 1]:
                best = abs(near - source.line) if best is None else min(best, abs(near - source.line))
        return best


def _places(home: Event, places: dict[int, _Places]) -> _Places:
    found = places.get(id(home))
    if found is None:
        found = places[id(home)] = _Places(home)
    return found


class _Homes:
    """The reports of one identity kept so far, found by when they may have happened: a
    report is compared only with those whose times lie within FOLD_WINDOW_S of its own
    (a run that repeats one failure every few minutes has thousands of them), and with
    those whose time says too little to place them (no stamp on either side)."""

    __slots__ = ("filled", "loose", "order", "slots", "zones")

    def __init__(self, zones: Zones) -> None:
        self.zones = zones
        self.slots: dict[tuple[bool, int], list[Event]] = {}  # (zoned, FOLD_WINDOW_S slot) -> homes
        self.filled: dict[bool, list[int]] = {False: [], True: []}  # the slots that hold homes, sorted, zoned or not
        self.loose: list[Event] = []
        self.order: dict[int, int] = {}  # id of each home -> when it was first added

    def add(self, event: Event) -> None:
        """Add a home, or add it again where its time now lies after it took in a report (a
        place it left may still list it: every candidate is checked again)."""
        self.order.setdefault(id(event), len(self.order))
        lo, hi, zoned = _interval(event, self.zones)
        if hi - lo > SLOTS_MAX * FOLD_WINDOW_S:  # unbounded, or a very wide interval
            if not any(other is event for other in self.loose):
                self.loose.append(event)
            return
        for slot in range(int(lo // FOLD_WINDOW_S), int(hi // FOLD_WINDOW_S) + 1):
            homes = self.slots.get((zoned, slot))
            if homes is None:
                homes = self.slots[(zoned, slot)] = []
                bisect.insort(self.filled[zoned], slot)
            if not any(other is event for other in homes):
                homes.append(event)

    def near(self, event: Event) -> list[Event]:
        """The homes that may be the same occurrence as `event`, in the order they came."""
        lo, hi, zoned = _interval(event, self.zones)
        if hi - lo > SLOTS_MAX * FOLD_WINDOW_S:
            found = [*self.loose, *(home for homes in self.slots.values() for home in homes)]
        else:
            found = list(self.loose)
            first, last = int((lo - FOLD_WINDOW_S) // FOLD_WINDOW_S), int((hi + FOLD_WINDOW_S) // FOLD_WINDOW_S)
            for slot in range(first, last + 1):
                found.extend(self.slots.get((zoned, slot), ()))
            if not event.time_inferred and event.time is not None:
                # a home that printed its zone where this one printed local time (or the
                # other way round) may lie any whole-quarter-hour offset away
                reach = int(max(-ZONES_S[0], ZONES_S[1]) // FOLD_WINDOW_S) + 1
                other = self.filled[not zoned]  # those of them that hold homes: most runs print one kind of time
                for slot in other[bisect.bisect_left(other, first - reach) : bisect.bisect_right(other, last + reach)]:
                    found.extend(self.slots[(not zoned, slot)])
        unique = {id(home): home for home in found}
        return sorted(unique.values(), key=lambda home: self.order[id(home)])


SLOTS_MAX = 720  # an interval wider than this many windows (a day) is compared with every home


def _identities(event: Event, kind: Kind) -> list[tuple]:
    """Every key under which this report meets other reports of its occurrence."""
    key = _identity(event, kind)
    keys = [key] if key is not None else []
    for names in kind.also_identity:
        values = _values(event, names)
        if values[0] is not None:
            keys.append((event.kind, *names, *values))
    if key is None and kind.numberless is not None:
        values = _values(event, kind.numberless)
        if None not in values:  # without a pid, two numberless reports may be two processes
            keys.append((event.kind, *kind.numberless, *values))
    return keys


def _values(event: Event, names: tuple[str, ...]) -> tuple:
    return tuple(event.fields.get(n, getattr(event, n, None)) for n in names)


def _identity(event: Event, kind: Kind) -> tuple | None:
    names = kind.identity
    if names is None:
        return None
    values = _values(event, names)
    if all(v is None for v in values) or (kind.partial and None in values):
        return None
    return (event.kind, *values)


def seconds(time: str) -> float:
    """Seconds of an ISO time; one printed without a zone is read as it stands (as if UTC),
    never in the zone of the machine oomlens runs on."""
    from datetime import UTC, datetime

    t = datetime.fromisoformat(time)
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _zoned(time: str) -> bool:
    return time.endswith("Z") or time[-6:-5] in ("+", "-")


ZONE_STEP_S = 15 * 60  # UTC offsets are whole quarter hours,
ZONES_S = (-12 * 3600, 14 * 3600)  # from UTC-12 to UTC+14


def _nearness(event: Event, home: Event, places: dict[int, _Places], zones: Zones) -> tuple[float, float] | None:
    """How near a report lies to the occurrence `home` stands for (seconds between them at
    the least, then lines apart in a file that reports both), or None where it cannot be of
    it: one file reports both far apart (a process that fails again and again, each time in
    a traceback of its own), or their times cannot lie within FOLD_WINDOW_S. An inferred time
    is an interval: the line came after the stamped line it borrowed its time from and
    before the next one."""
    apart = _places(home, places).apart(event)
    if apart is not None and apart > FOLD_LINES:
        return None
    gap = _gap(event, home, zones)
    return None if gap is None or gap > FOLD_WINDOW_S else (gap, math.inf if apart is None else apart)


def _interval(event: Event, zones: Zones) -> tuple[float, float, bool]:
    """(earliest, latest, printed with a zone) of when a report may have been written: its own
    stamp, or the stamps before and after its line, in either order; unbounded where there
    are none. A time printed with a zone in a file whose host's zone is known is read as the
    host's local time: a collector's UTC stamp lent to a line that prints none, beside a
    line whose own time is local (each end on its own: the neighbours may show two clocks)."""
    shift = zones.get(event.source.path)
    time = event.time
    lo, zoned = _local_seconds(time, shift) if time is not None else (-math.inf, False)
    if time is not None and not event.time_inferred:
        return lo, lo, zoned
    latest = event.time_latest
    hi, zoned_hi = _local_seconds(latest, shift) if latest is not None else (math.inf, False)
    lo, hi = min(lo, hi), max(lo, hi)  # a paste whose times run backwards here
    return lo, hi, zoned if time is not None else zoned_hi


def _local_seconds(time: str, shift: int | None) -> tuple[float, bool]:
    """Seconds of a time, and whether it stays one printed with a zone: moved to the host's
    local time where its file's zone is known (`shift`)."""
    if not _zoned(time):
        return seconds(time), False
    return (seconds(time), True) if shift is None else (seconds(time) + shift, False)


def _gap(a: Event, b: Event, zones: Zones) -> float | None:
    """Seconds between two reports at the least, or None when they cannot be one occurrence."""
    lo_a, hi_a, zoned_a = _interval(a, zones)
    lo_b, hi_b, zoned_b = _interval(b, zones)
    if zoned_a != zoned_b and math.isfinite(lo_a) and math.isfinite(lo_b):
        # one printed its zone, the other its host's local time, whose offset is not known
        # yet (clock.py learns it from these very reports): any whole-quarter-hour offset
        # may lie between them
        if a.time_inferred or b.time_inferred:
            return None
        local_minus_utc = lo_b - lo_a if zoned_a else lo_a - lo_b
        offset = min(max(round(local_minus_utc / ZONE_STEP_S) * ZONE_STEP_S, ZONES_S[0]), ZONES_S[1])
        return abs(local_minus_utc - offset)
    return max(0.0, lo_b - hi_a, lo_a - hi_b)


def _richness(event: Event) -> int:
    return sum(len(v) if isinstance(v, list) else 1 for v in event.fields.values() if v is not None)


def _time_rank(event: Event) -> tuple[bool, bool, bool, int]:
    """A time read on the event's own line beats one inferred from a neighbour; finer beats
    coarser (milliseconds are 4 characters more; a zone, 6); the host's local time beats UTC."""
    time = event.time or ""
    return (event.time is not None, not event.time_inferred, not _zoned(time), len(time))


def _absorb(kept: Event, new: Event, places: _Places | None = None) -> None:
    """Keep the fullest report as the event; every other report adds its source and facts,
    and its own time: reports stamped by two clocks tell how far apart they run (clock.py)."""
    if not kept.copies and kept.time and not kept.time_inferred:
        kept.copies.append((kept.source.path, kept.time))
    if new.time and not new.time_inferred:
        kept.copies.append((new.source.path, new.time))
    if _richness(new) > _richness(kept):
        kept.fields, new.fields = new.fields, kept.fields
        kept.text, kept.source = new.text, new.source
    for name, value in new.fields.items():
        if kept.fields.get(name) is None and value is not None:
            kept.fields[name] = value
    for attr in ("time", "node", "pid", "actor", "method", "rank", "gpu", "memory", "device"):
        if getattr(kept, attr) is None and getattr(new, attr) is not None:
            setattr(kept, attr, getattr(new, attr))
    if _time_rank(new) > _time_rank(kept):
        kept.time, kept.time_inferred, kept.time_latest, kept.stamp_nodes = new.time, new.time_inferred, new.time_latest, new.stamp_nodes
    for src in new.sources:
        if places.add(src) if places is not None else src not in kept.sources:
            kept.sources.append(src)
