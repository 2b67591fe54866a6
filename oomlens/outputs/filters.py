"""Which events the table and markdown's event list show: failures by default, memory
readings on request, narrowed by kind, node and time. The JSON outputs never filter: they
are the whole contract."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..diagnosis import Diagnosis
from ..events import Event
from ..timeline import _one_copy, epoch


@dataclass(frozen=True, slots=True)
class Filters:
    """What a user asked to see (`parse --readings --kind --node --since --until`)."""

    readings: bool = False
    kinds: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()
    since: datetime | None = None  # zone-less, on the events' one clock
    until: datetime | None = None

    @property
    def narrowing(self) -> bool:
        return bool(self.kinds or self.nodes or self.since or self.until)


@dataclass(slots=True)
class Listing:
    """The rows to show, and what was left out so a footer can say how to see it."""

    rows: list[tuple[Event, str | None]]  # an event and its node (a console copy's is taken from the timeline)
    hidden: Counter[str] = field(default_factory=Counter)  # readings left out by default, by kind label
    narrowed: int = 0  # events the kind, node and time filters left out
    copies: int = 0  # readings printed in two files, listed once


def listing(diagnosis: Diagnosis, filters: Filters) -> Listing:
    """The events `filters` keep, one row each: a worker's memory line that its own file and
    the driver console both carry is one reading (timeline._one_copy decides which copy)."""
    kinds = diagnosis.kinds
    readings = kinds.memory_lines
    pool = _one_copy(diagnosis.events, readings) if any(e.kind in readings for e in diagnosis.events) else diagnosis.events
    out = Listing(rows=[], copies=len(diagnosis.events) - len(pool))
    # the timeline names the node of a reading whose copy kept does not (the driver console's)
    node_of = {s.event: s.node for s in diagnosis.timeline if s.node} if out.copies else {}
    low = _seconds(filters.since)
    high = _seconds(filters.until)
    for event in pool:
        node = event.node or node_of.get(event.id)
        if not _kept(event, node, filters, low, high):
            out.narrowed += 1
        elif event.kind in readings and not filters.readings and event.kind not in filters.kinds:
            out.hidden[kinds.label(event.kind)] += 1
        else:
            out.rows.append((event, node))
    return out


def _kept(event: Event, node: str | None, filters: Filters, low: float | None, high: float | None) -> bool:
    if filters.kinds and event.kind not in filters.kinds:
        return False
    if filters.nodes and node not in filters.nodes:
        return False
    if low is None and high is None:
        return True
    time = event.time or event.time_latest  # a line that prints no time lies after the one and before the other
    if time is None:
        return False
    seconds = epoch(time)
    return (low is None or seconds >= low) and (high is None or seconds <= high)


def _seconds(moment: datetime | None) -> float | None:
    """A bound as timeline.epoch reads the events' zone-less times."""
    return None if moment is None else moment.replace(tzinfo=UTC).timestamp()
