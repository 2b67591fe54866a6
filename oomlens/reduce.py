"""Reduce: memory readings kept within a fixed budget, whatever the length of the run.

A week-long run prints millions of memory lines. Each series (one file, process, device and
label) is cut into time buckets on a grid aligned to the epoch, 2**(level - 1) seconds wide (lines
that print no time: that many lines wide), and of each bucket only the readings that matter
are kept: its first and last, and the lowest and highest of each size it reports. Every
series shares one level, the finest at which all buckets fit the budget; at level 0 each
reading is its own bucket, so a run that fits keeps every reading. At WIDEST a series is
one bucket; where even then the series outnumber the budget, two last levels merge them:
LABELLESS makes one series of all the labels of a file, process and device (a label with a
counter or an id in it makes a series of every line), and FILEWIDE one of each file (a
log whose every line names another process or node).

The kept set depends only on the readings, not on the order they come in or on how they are
split: a reduction of a file's byte ranges, merged, keeps what a reduction of the whole file
keeps (a coarser bucket is the union of finer ones, and its extremes are among theirs).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import cast

from .events import Clue, Event, seconds
from .kinds import shipped

# Buckets kept over all series, at most 2 + 2 x len(SIZES) readings each. From the memory a
# run may take (300 MB over 3 processes, each about 35 MB before it reads anything): a
# reading costs 2 to 5 KB as an event (a step line of 150 metrics keeps its text), and a
# process keeps up to 8 per bucket.
BUCKETS = 2048
SIZES = ("used_bytes", "allocated_bytes", "reserved_bytes", "cpu_used_bytes")  # what timeline.py draws
READINGS = shipped().memory_lines  # the kinds of memory readings (data/kinds.toml: role "reading")
WIDEST = 65  # the level whose one bucket holds a whole series: 2**64 seconds or lines
LABELLESS = WIDEST + 1  # and whose one bucket holds every label's series of a file, process and device
FILEWIDE = WIDEST + 2  # and whose one bucket holds every series of a file: the last level


Slot = tuple[int, int]  # where a reading stood: (input, place in that input's list)
Entry = tuple[Event, Slot, tuple]  # and its place in its series (see _order)
MIN = {name: "min " + name for name in SIZES}  # the roles of a bucket, by size
MAX = {name: "max " + name for name in SIZES}


@dataclass
class Reduction:
    """The kept readings of one or more inputs, by series and bucket. `seen` counts every
    reading added, `level` is the grid's (see _key)."""

    budget: int = BUCKETS
    level: int = 0
    seen: int = 0
    buckets: dict[tuple, dict[str, Entry]] = field(default_factory=dict)

    def take(self, x: Event | Clue, slot: Slot) -> Event | Clue | None:
        """`x` itself, or None when it is a reading, which the reduction takes (`restore`
        puts it back at `slot` if it is kept)."""
        if isinstance(x, Event) and x.kind in READINGS:
            self.add(x, slot)
            return None
        return x

    def add(self, event: Event, slot: Slot) -> None:
        """Take one reading; it is kept for as long as it is an extreme of its bucket."""
        self.seen += 1
        key = _key(event, self.level)
        bucket = self.buckets.get(key)
        if bucket is None:
            self.buckets[key] = dict.fromkeys(_roles(event), (event, slot, _order(event)))
            if len(self.buckets) > self.budget and self.level < FILEWIDE:
                self.coarsen(self.level + 1)
        else:
            _keep(bucket, (event, slot, _order(event)))

    def coarsen(self, level: int) -> None:
        """Widen every bucket to `level`, and further until all fit the budget (or each
        file is one bucket: a budget below the number of files is exceeded by that)."""
        level = min(level, FILEWIDE)
        while level > self.level:
            merged: dict[tuple, dict[str, Entry]] = {}
            for bucket in self.buckets.values():
                key = _key(bucket["first"][0], level)
                home = merged.get(key)
                if home is None:
                    merged[key] = bucket
                else:
                    for entry in _distinct(bucket):
                        _keep(home, entry)
            self.buckets, self.level = merged, level
            if len(self.buckets) > self.budget and level < FILEWIDE:
                level += 1

    def kept(self) -> list[Entry]:
        """Every reading kept, once each, in no particular order."""
        return [entry for bucket in self.buckets.values() for entry in _distinct(bucket)]


def reduce_found(found: list, index: int, reduction: Reduction) -> None:
    """Hand the readings among `found` (the events and clues of input number `index`) to
    `reduction`, each replaced by None where it stood; `restore` puts back the kept ones."""
    for place, x in enumerate(found):
        found[place] = reduction.take(x, (index, place))


def restore(lists: list[list], reduction: Reduction) -> None:
    """Put each kept reading back in its place and close the gaps of the others."""
    for event, (index, place), _ in reduction.kept():
        lists[index][place] = event
    for found in lists:
        found[:] = [x for x in found if x is not None]


def restored(found: list[Event | Clue | None], reduction: Reduction | None) -> list[Event | Clue]:
    """One input's `found`, its kept readings put back in place and its gaps closed (as it
    is when there is no reduction: then no reading left a gap)."""
    if reduction is not None:
        restore([found], reduction)
    return cast("list[Event | Clue]", found)  # no None is left in it


def _distinct(bucket: dict[str, Entry]) -> list[Entry]:
    return list({id(entry[0]): entry for entry in bucket.values()}.values())


def _roles(event: Event) -> list[str]:
    f = event.fields
    return ["first", "last", *(role[name] for name in SIZES if f.get(name) is not None for role in (MIN, MAX))]


def _order(event: Event) -> tuple:
    """A reading's place in its series: its line, then its text (two readings of one line)."""
    return event.source.line, event.text


def _keep(bucket: dict[str, Entry], entry: Entry) -> None:
    """Let a reading take each role of its bucket it is better at (ties: the earlier one)."""
    event, _, order = entry
    if order < bucket["first"][2]:
        bucket["first"] = entry
    if order > bucket["last"][2]:
        bucket["last"] = entry
    fields = event.fields
    for name in SIZES:
        value = fields.get(name)
        if value is None:
            continue
        low, high = bucket.get(MIN[name]), bucket.get(MAX[name])
        if low is None or value < (kept := low[0].fields[name]) or (value == kept and order < low[2]):
            bucket[MIN[name]] = entry
        if high is None or value > (kept := high[0].fields[name]) or (value == kept and order < high[2]):
            bucket[MAX[name]] = entry


def _key(event: Event, level: int) -> tuple:
    """The bucket of a reading at `level`: at level 0 its own; above, its series and its
    place on a grid 2**(level - 1) wide of seconds since the epoch where its line printed a
    time (one printed without a zone read as UTC), else of line numbers (a time borrowed
    from an earlier line is shared by every line after it). At LABELLESS, its file, process
    and device whatever its label; at FILEWIDE, its file."""
    if level == FILEWIDE:
        return event.source.path, event.memory
    if level == LABELLESS:
        return event.source.path, event.node, event.pid, event.actor, event.rank, event.gpu, event.memory
    f = event.fields
    series = (event.source.path, event.node, event.pid, event.actor, event.rank, event.gpu, event.memory, f.get("label"))
    if level == 0:
        return series, event.source.line, event.text
    if event.time is not None and not event.time_inferred and (seconds := epoch_seconds(event.time)) is not None:
        return series, "s", seconds >> (level - 1)
    return series, "line", event.source.line >> (level - 1)


def epoch_seconds(time: str) -> int | None:
    """Whole seconds since the epoch of an ISO time (one without a zone read as UTC); None
    for one that is no valid time. Readings come by the hundred thousand, a few to a minute:
    the minute is parsed once, its seconds added."""
    if len(time) >= 19 and time[16] == ":" and time[17:19].isdigit() and int(time[17:19]) < 60:
        rest = time[19:]
        zone = rest.lstrip(".0123456789") if rest[:1] == "." else rest
        minute = _minute(time[:16], zone)
        return None if minute is None else minute + int(time[17:19])
    return _whole(time)


@functools.lru_cache(maxsize=1024)
def _minute(head: str, zone: str) -> int | None:
    return _whole(f"{head}:00{zone}")


def _whole(time: str) -> int | None:
    try:
        return math.floor(seconds(time))  # floor: the second a time lies in, before 1970 too
    except (ValueError, OverflowError):
        return None
