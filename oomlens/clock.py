"""Clock: every event on the run's one clock, and what it took to put it there.

Each file stamps its lines with a clock of its own: its host's local time (Ray, veRL, vLLM,
torch), UTC (abseil's crash-dump epoch, `docker logs -t`, a collector's `Z`), or the local
time of a node whose clock runs ahead of the others. How they relate is learned from the
logs, never assumed:

- a host's offset from UTC, from lines that print two clocks (grammars/clock.lark: Ray
  writes abseil's UTC epoch behind its own local stamp); a time printed with a zone is
  then moved to that local time. Where no line tells the offset, zoned times stay UTC and
  their files form a clock of their own, which the next step may place;
- a node's skew, from occurrences stamped on two nodes: a worker's exit seen by its raylet
  and by the GCS (clock clues), a failure reported in files of two nodes (its folded
  copies). The median difference over a node's anchors is its offset from the reference
  clock (the head's: the node of the GCS or the driver, else the node with most events),
  chained through nodes that only meet each other.

A line that prints no time carries an interval (scan: the stamps before and after it);
both ends move with its clock. Corrected events keep the time as printed.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import overload

from .events import ZONE_STEP_S, ZONES_S, Clue, Event
from .sources import Input

# Two reports of one occurrence differ by the time the message took between processes
# (milliseconds) plus the coarser stamp's resolution (one second for vLLM, syslog, c10 <=
# 2.3): a difference within this is no evidence of skew, and is left as printed.
SKEW_MIN_S = 1.0


@dataclass(frozen=True, slots=True)
class ClockNote:
    """How one clock was put on the run's clock: what the report and the JSON say."""

    scope: str  # "node 10.0.0.4", or a file's path where the file has no node
    offset_s: float  # seconds taken off its printed times
    how: str  # the evidence, in words
    events: int  # events moved

    def sentence(self) -> str:
        hours = f" ({self.offset_s / 3600:+.2f} h)" if abs(self.offset_s) >= 3600 else ""
        return f"{self.scope} clock {self.offset_s:+.1f} s{hours}, corrected ({self.how}; {self.events} event(s) moved)"

    def to_dict(self) -> dict[str, object]:
        return {"scope": self.scope, "offset_s": round(self.offset_s, 3), "how": self.how, "events": self.events}


def settle(events: list[Event], clues: list[Clue], inputs: list[Input]) -> list[ClockNote]:
    """Put every event's time (and interval) on the run's clock, in place; what was corrected."""
    _borrow_year(events, inputs)
    clocks = _Clocks(clues, {i.path: i.node for i in inputs})
    anchors = _anchors(events, clues, clocks)
    # the clock of each end of each event's time, before any time moves (only asked when some clock may move)
    clock_of = {id(e): (clocks.reading(e.time, *_stamped_by(e, 0))[0], clocks.reading(e.time_latest, *_stamped_by(e, 1))[0]) for e in events} if anchors else {}
    notes = _to_local(events, clocks)
    if anchors:
        placed = _deskew(events, anchors, clock_of, _reference(events, inputs, clock_of))
        notes = [n for n in notes if n.scope not in {p.scope for p in placed}] + placed  # "shown in UTC" no more
    return notes


def local_offsets(events: Iterable[Event], clues: Iterable[Clue], inputs: Iterable[Input]) -> dict[str, int]:
    """Each events' file's offset from UTC in seconds, as `settle` will move the times it
    printed with a zone (its node's clock, else its own, else the run's): folding compares
    a collector's UTC stamp with a program's local time before the clock settles them."""
    clocks = _Clocks(clues, {i.path: i.node for i in inputs})
    paths = {e.source.path for e in events}
    return {path: offset for path in paths if (offset := clocks.zone(clocks.domain(path, None, zoned=True))) is not None}


def iso(t: datetime) -> str:
    """A naive datetime as the contract writes times (milliseconds when the log had them)."""
    return t.isoformat(timespec="milliseconds" if t.microsecond else "seconds")


# -- the year a log did not print ---------------------------------------------------------


def _borrow_year(events: list[Event], inputs: Iterable[Input] = ()) -> None:
    """Times printed without a year (vLLM, c10, glog, syslog) take the run's: the clock time
    is exact, only the year is borrowed (`year_from`: "run"). A run whose logs print no year
    at all takes it from the file's modification time, as lnav does: the year that puts the
    line at or before the file's last write (`year_from`: "mtime")."""
    years = [int(e.time[:4]) for e in events if e.time]
    run_year = max(set(years), key=years.count) if years else None
    written = {i.path: i.file for i in inputs if i.file}
    for event in events:
        year, source = (run_year, "run") if run_year is not None else (_year_written(written.get(event.source.path), event.fields), "mtime")
        if year is None:
            continue
        if event.time is None and (local := event.fields.get("local_time")):
            event.time = f"{year}-{local}"
            event.fields["year_inferred"] = True
            event.fields["year_from"] = source
        if event.time_latest is None and (local := event.fields.pop("local_time_latest", None)):
            event.time_latest = f"{year}-{local}"


def _year_written(path: str | None, fields: dict) -> int | None:
    """The year of a file's last write that puts a time printed without one (`local_time`,
    MM-DDTHH:MM:SS) at or before that write; None for a stream or a member of an archive."""
    local = fields.get("local_time")
    if path is None or not local:
        return None
    try:
        written = datetime.fromtimestamp(os.stat(path).st_mtime)
    except (OSError, ValueError, OverflowError):
        return None
    try:
        printed = datetime.fromisoformat(f"{written.year}-{local}")
    except ValueError:  # 02-29 in a year that has none
        return written.year - 1
    return written.year - 1 if printed > written + timedelta(days=1) else written.year


# -- zones ----------------------------------------------------------------------------------


class _Clocks:
    """Which clock a printed time was read on, and that time on its host's local clock."""

    def __init__(self, clues: Iterable[Clue], nodes: dict[str, str | None]) -> None:
        self.nodes = nodes
        self.zones = self._zones(clues)

    def domain(self, path: str, node: str | None, zoned: bool = False) -> str:
        """The clock a line was stamped with: its file's node, else the node its prefix
        names, else the file's own. A time printed with its zone in a file of no node is
        the file's: a collector stamped every line of it (docker logs -t, kubectl, a CI),
        whichever node the line came from."""
        node = self.nodes.get(path) or (None if zoned else node)
        return f"node {node}" if node else path

    @overload
    def reading(self, time: str, path: str, node: str | None) -> tuple[str, datetime]: ...
    @overload
    def reading(self, time: None, path: str, node: str | None) -> tuple[str, None]: ...
    @overload
    def reading(self, time: str | None, path: str, node: str | None) -> tuple[str, datetime | None]: ...
    def reading(self, time: str | None, path: str, node: str | None) -> tuple[str, datetime | None]:
        """(clock, naive local time) of a time printed in `path`: a zoned time moves to its
        host's local time, or stays UTC on a clock of its own when no line tells the zone."""
        if time is None:
            return self.domain(path, node), None
        t = datetime.fromisoformat(time)
        domain = self.domain(path, node, t.tzinfo is not None)
        if t.tzinfo is None:
            return domain, t
        utc = t.astimezone(UTC).replace(tzinfo=None)
        offset = self.zone(domain)
        return (f"{domain} (UTC)", utc) if offset is None else (domain, utc + timedelta(seconds=offset))

    def zone(self, domain: str) -> int | None:
        return self.zones.get(domain, self.zones.get(""))

    def _zones(self, clues: Iterable[Clue]) -> dict[str, int]:
        """Each clock's offset from UTC in seconds, from lines that print two clocks; ""
        holds the run's (the most common). Two clocks further apart than any zone (UTC-12 to
        UTC+14) tell no zone: one of them is not the line's moment (a copy that rewrote one)."""
        votes: dict[str, Counter[int]] = defaultdict(Counter)
        for clue in clues:
            if clue.kind != "clock" or clue.time is None or "utc" not in clue.fields or _aware(clue.time):
                continue
            local, utc = datetime.fromisoformat(clue.time), datetime.fromisoformat(clue.fields["utc"])
            offset = round((local - utc).total_seconds() / ZONE_STEP_S) * ZONE_STEP_S
            if not ZONES_S[0] <= offset <= ZONES_S[1]:
                continue
            votes[self.domain(clue.source.path, clue.node)][offset] += 1
            votes[""][offset] += 1
        return {domain: counts.most_common(1)[0][0] for domain, counts in votes.items()}


def _to_local(events: list[Event], clocks: _Clocks) -> list[ClockNote]:
    """Times printed with a zone, moved to the local time of their host (or kept UTC)."""
    moved: Counter[tuple[str, int | None]] = Counter()
    for event in events:
        if not (_aware(event.time) or _aware(event.time_latest)):
            continue
        if _aware(event.time):
            event.time_printed = event.time
        for end, attr in enumerate(("time", "time_latest")):
            value = getattr(event, attr)
            if _aware(value):
                path, node = _stamped_by(event, end)
                domain, local = clocks.reading(value, path, node)
                setattr(event, attr, iso(local))
                domain = domain.removesuffix(" (UTC)")
        moved[domain, clocks.zone(domain)] += 1
    notes = []
    for (domain, offset), count in sorted(moved.items(), key=str):
        if offset is None:
            notes.append(ClockNote(f"{domain} (UTC)", 0.0, "printed in UTC, and no line tells this host's zone: shown in UTC", count))
        elif offset:
            notes.append(ClockNote(domain, -offset, f"printed in UTC; this host's lines that print two clocks say UTC{offset / 3600:+g} h", count))
    return notes


def _aware(time: str | None) -> bool:
    """Does an ISO time carry its zone (the scan keeps the offset a line printed)?"""
    return time is not None and (time.endswith("Z") or time[-6:-5] in ("+", "-"))


def _stamped_by(event: Event, end: int) -> tuple[str, str | None]:
    """(file, node) of the line that printed an end of the event's time (0: time, 1:
    time_latest): of the reports folded into it, the first that printed that time (the
    kept report may be another one); in a file of many nodes' lines, the node of the line
    that lent a borrowed time."""
    path = next((path for path, time in event.copies if time == event.time), event.source.path)
    return path, event.stamp_nodes[end] if event.stamp_nodes is not None else event.node


# -- skew between nodes -----------------------------------------------------------------------


def _anchors(events: list[Event], clues: list[Clue], clocks: _Clocks) -> dict[str, list[tuple[str, datetime]]]:
    """Occurrences stamped on more than one clock: (clock, time) by occurrence."""
    seen: dict[str, list[tuple[str, datetime]]] = defaultdict(list)
    for clue in clues:
        if clue.kind == "clock" and "seen" in clue.fields and clue.time:
            seen[clue.fields["seen"]].append(clocks.reading(clue.time, clue.source.path, clue.node))
    for event in events:
        reports = event.copies or ([(event.source.path, event.time)] if event.time and not event.time_inferred else [])
        for path, time in event.copies:
            seen[f"{event.kind}:{id(event)}"].append(clocks.reading(time, path, event.node))
        worker = event.fields.get("worker_id") if event.kind == "ray_worker_died" else None
        for path, time in reports if worker else ():  # the GCS's report of an exit a raylet saw
            seen[f"worker_exit:{worker}"].append(clocks.reading(time, path, event.node))
    return {key: found for key, found in seen.items() if len({clock for clock, _ in found}) > 1}


def _reference(events: list[Event], inputs: list[Input], clock_of: dict[int, tuple[str, str]]) -> str | None:
    """The head's clock: the node of the GCS's log or the driver's, else the busiest clock."""
    for role in ("gcs", "driver"):
        for item in inputs:
            if item.role == role and item.node:
                return f"node {item.node}"
    counts = Counter(clock_of[id(e)][0] for e in events if e.time)
    return counts.most_common(1)[0][0] if counts else None


def _deskew(
    events: list[Event], anchors: dict[str, list[tuple[str, datetime]]], clock_of: dict[int, tuple[str, str]], reference: str | None
) -> list[ClockNote]:
    """Clocks that run ahead or behind the reference, by their anchors; their events moved."""
    import statistics  # here: few runs have two clocks to compare, and it imports fractions and decimal

    # pairwise differences: (a, b) -> [time on b - time on a] over the occurrences both saw
    diffs: dict[tuple[str, str], list[float]] = defaultdict(list)
    what: dict[tuple[str, str], str] = {}
    for key, found in anchors.items():
        first: dict[str, datetime] = {}
        for clock, t in found:
            first.setdefault(clock, min(t for c, t in found if c == clock))
        for a in first:
            for b in first:
                if a != b:
                    diffs[a, b].append((first[b] - first[a]).total_seconds())
                    what.setdefault((a, b), key)
    offsets: dict[str, float] = {}
    how: dict[str, str] = {}
    queue = [reference] if reference is not None else []
    if reference is None or not any(a == reference for a, _ in diffs):
        queue = [max({a for a, _ in diffs}, key=lambda c: sum(len(v) for (a, _), v in diffs.items() if a == c))]
    offsets[queue[0]] = 0.0
    while queue:
        a = queue.pop(0)
        for (x, b), values in sorted(diffs.items()):
            if x != a or b in offsets:
                continue
            offsets[b] = offsets[a] + statistics.median(values)
            how[b] = f"{len(values)} occurrence(s) seen on both this clock and {a}, e.g. {_shown(what[x, b])}"
            queue.append(b)
    notes = []
    for clock, offset in sorted(offsets.items()):
        if abs(offset) < SKEW_MIN_S:
            continue
        moved = 0
        for event in events:
            for end, attr in enumerate(("time", "time_latest")):
                if clock_of[id(event)][end] != clock or not (value := getattr(event, attr)):
                    continue
                if end == 0:
                    event.time_printed = event.time_printed or value
                    moved += 1
                setattr(event, attr, iso(datetime.fromisoformat(value) - timedelta(seconds=offset)))
        notes.append(ClockNote(clock, offset, how[clock], moved))
    return notes


def _shown(key: str) -> str:
    kind, _, rest = key.partition(":")
    if kind == "worker_exit":
        return f"the exit of worker {rest[:8]}"
    return f"a {kind} reported in files of both"
