"""Reduce: events and clues kept within a fixed budget, whatever the length of the run.

A week-long run prints millions of memory lines, and a run that fails in a loop can print
the same failure by the hundred thousand (a CUDA OOM at every step, a watchdog at every
collective). Each kind is a pool of its own, reduced on its own: a flood of one kind never
costs another its detail, and kinds never merge (a failure of one kind never stands for
another's). Each series (one file, process, device and label) is cut into time buckets on a
grid aligned to the epoch, 2**(level - 1) seconds wide (lines that print no time: that many
lines wide), and of each bucket only what matters is kept: its first and last, and of
readings the lowest and highest of each size they report. Every series of a pool shares one
level, the finest at which all its buckets fit its budget; at level 0 each event is its own
bucket, so a run that fits keeps every one. At WIDEST a series is one bucket; where even
then the series outnumber the budget, two last levels merge them: LABELLESS makes one series
of all the labels of a file, process and device (a label with a counter or an id in it
makes a series of every line), and FILEWIDE one of each file (a log whose every line names
another process or node, as Ray's deaths of workers restarted in a loop do).

A raylet that runs tasks for a week says every worker's exit, a clock's clue (the same
exit the GCS stamps on its own clock): those are a pool of their own, a series each file,
node and process.

A failure in a loop prints its traceback each time, and a CUDA OOM its hint to set
`expandable_segments`. Of the settings a file prints, only the first and last copy of each
text are kept: the remedies read the first and the last value of each setting, which those
hold. Once failures were left out, a traceback clue (kind "context") is kept only while it
may stand near a kept event, where the correlator looks for it (correlate.Context:
CONTEXT_BEFORE lines above, CONTEXT_AFTER below): the held ones are looked over each time
their number doubles, sparing those near the ends of what was read so far, which an event
not read yet may still stand near.

The kept set depends only on the events, not on the order they come in or on how they are
split: a reduction of a file's byte ranges, merged, keeps what a reduction of the whole file
keeps (a coarser bucket is the union of finer ones, and its extremes are among theirs; an
event kept in the end was kept all along, so a clue dropped on the way was near none).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

import orjson

from ._core import ReadingPool, held_rows
from .events import CLUE_KINDS, CONTEXT_AFTER, CONTEXT_BEFORE, Clue, Event, Source, from_rows, seconds
from .kinds import shipped
from .remedies import EVIDENCE_CHARS
from .shapes import zeroed
from .times import Stamp

# Buckets kept over all series of a kind of readings, at most 2 + 2 x len(SIZES) readings each.
# From the memory a run may take (300 MB over 3 processes, each about 35 MB before it reads
# anything): an event costs 2 to 5 KB (a step line of 150 metrics keeps its text), and a
# process keeps up to 8 per bucket of readings and 2 of failures.
BUCKETS = 2048
FAILURE_SHARE = 2  # a kind of failure has half the budget's buckets: a crash of a thousand ranks (a watchdog timeout each) is not reduced
# What the failures left out still say: the wording of each (the characters detection reads,
# digits zeroed), up to EVIDENCE_SHAPES of them, told by an "evidence" clue where the first of
# its wording stood, which the frameworks' and versions' detection reads (remedies.evidence_text)
EVIDENCE_SHAPES = 1024
CONTEXT_HELD = 4096  # traceback clues held before the first look for those near no kept event
SIZES = ("used_bytes", "allocated_bytes", "reserved_bytes", "cpu_used_bytes")  # what timeline.py draws
READINGS = shipped().memory_lines  # the kinds of memory readings (data/kinds.toml: role "reading"); every other kind is a failure
WIDEST = 65  # the level whose one bucket holds a whole series: 2**64 seconds or lines
LABELLESS = WIDEST + 1  # and whose one bucket holds every label's series of a file, process and device
FILEWIDE = WIDEST + 2  # and whose one bucket holds every series of a file: the last level


Slot = tuple[int, int]  # where an event stood: (input, place in that input's list)
# the readings the core read whole that reductions keep, as bytes by kind (Reduction.held), each
# with the time after those that waited for one when its reading ended (a byte range's next)
Held = list[tuple[Mapping[str, bytes], tuple[Stamp, str | None] | None]]
Entry = tuple[Event | Clue, Slot, tuple]  # and its place in its series (see _order)
Tally = Mapping[str, tuple[int, int]]  # by kind: the events added, and the level of its pool
NOTHING: Tally = MappingProxyType({})  # the tally of an input nothing was read of (shared: read-only)
MIN = {name: "min " + name for name in SIZES}  # the roles of a bucket, by size
MAX = {name: "max " + name for name in SIZES}


@dataclass
class Pool:
    """The buckets of one kind: at most `budget` of them, unless each file is one. `seen`
    counts every event added, `level` is the grid's (see _key); each bucket keeps the
    extremes of `sizes`."""

    budget: int
    sizes: tuple[str, ...]
    level: int = 0
    seen: int = 0
    buckets: dict[tuple, dict[str, Entry]] = field(default_factory=dict)


class Reduction:
    """The kept events of one or more inputs, by kind (a pool each), series and bucket:
    within `budget` buckets for a kind of readings, 1/FAILURE_SHARE of it for a kind of
    failures.

    The pools of readings are the native core's (core/src/pool.rs, the same buckets): a
    memory line the core read whole (scan.py) joins them with no Python object made, and
    becomes an event only where it is kept (`kept`)."""

    def __init__(self, budget: int = BUCKETS) -> None:
        self.budget = budget
        self.pools: dict[str, Pool] = {}
        self.readings = {kind: ReadingPool(budget) for kind in sorted(READINGS)}
        self.context: list[tuple[Clue, Slot, int]] = []  # the traceback clues held, each with a hash of its text
        self.settings: dict[tuple[str, int], dict[str, tuple[Clue, Slot]]] = {}  # by file and text: its first and last copy
        self.ends: dict[tuple[str, int], tuple[int, int]] = {}  # of each file in each input taken, the first and last line of its held clues
        self.look_at = CONTEXT_HELD  # how many held clues make the next look (see prune)
        self.texts: dict[int, dict] = {}  # the held clues' texts, one copy each: a loop's tracebacks share theirs
        self.shapes: dict[str, tuple[Event, Slot]] = {}  # each failure's text shape, with its first event (see restore)

    def take(self, x: Event | Clue, slot: Slot) -> Event | Clue | None:
        """None: the reduction takes every event and clue (`restore` puts it back at `slot`
        if it is kept); `x` itself only when it is a clue of a kind it does not know."""
        if isinstance(x, Event) or x.kind == "clock":
            if isinstance(x, Event) and x.kind not in READINGS and len(self.shapes) < EVIDENCE_SHAPES:
                self.shapes.setdefault(zeroed(x.text[:EVIDENCE_CHARS]), (x, slot))
            self.add(x, slot)
            return None
        if x.kind == "setting":
            self._setting(x, slot)
            return None
        if x.kind != "context":
            return x
        text = _text(x)
        shared = self.texts.setdefault(text, x.fields)
        if shared is not x.fields and shared == x.fields:  # the same text (equal, not only of one hash): held once
            x.fields = shared
        self.context.append((x, slot, text))
        part, line = (x.source.path, slot[0]), x.source.line
        first, last = self.ends.get(part, (line, line))
        self.ends[part] = (min(first, line), max(last, line))
        if len(self.context) > self.look_at:
            self.prune(spare_ends=True)
            self.look_at = max(CONTEXT_HELD, 2 * len(self.context))
        return None

    def _pool(self, kind: str) -> Pool:
        pool = self.pools.get(kind)
        if pool is None:
            reading = kind in READINGS
            pool = self.pools[kind] = Pool(self.budget if reading else max(1, self.budget // FAILURE_SHARE), SIZES if reading else ())
        return pool

    def add(self, event: Event | Clue, slot: Slot) -> None:
        """Take one event (or clock's clue, a pool of its own: a raylet that runs tasks for a
        week says every worker's exit); it is kept for as long as it holds a role of its bucket."""
        if isinstance(event, Event) and event.kind in self.readings:
            f = event.fields
            series = (event.source.path, event.node, event.pid, event.actor, event.rank, event.gpu, event.memory, f.get("label"))
            own = None if event.time_inferred or event.time is None else epoch_seconds(event.time)
            sizes = [v if type(v := f.get(name)) is int else None for name in SIZES]
            self.readings[event.kind].add(event, slot, series, own, event.source.line, event.text, sizes)
            return
        pool = self._pool(event.kind)
        pool.seen += 1
        key = _key(event, pool.level)
        bucket = pool.buckets.get(key)
        if bucket is None:
            pool.buckets[key] = dict.fromkeys(_roles(event, pool.sizes), (event, slot, _order(event)))
            if len(pool.buckets) > pool.budget and pool.level < FILEWIDE:
                self._coarsen(pool, pool.level + 1)
        else:
            _keep(bucket, (event, slot, _order(event)), pool.sizes)

    def coarsen(self, tally: Tally) -> None:
        """Widen the buckets of each kind to at least the level of its pool in `tally`."""
        for kind, (_, level) in tally.items():
            if kind in self.readings:
                self.readings[kind].coarsen(level)
            else:
                self._coarsen(self._pool(kind), level)

    def _coarsen(self, pool: Pool, level: int) -> None:
        """Widen every bucket of `pool` to `level`, and further until all fit the budget (or
        each file and kind is one bucket: a budget below their number is exceeded by that)."""
        level = min(level, FILEWIDE)
        while level > pool.level:
            merged: dict[tuple, dict[str, Entry]] = {}
            for bucket in pool.buckets.values():
                key = _key(bucket["first"][0], level)
                home = merged.get(key)
                if home is None:
                    merged[key] = bucket
                else:
                    for entry in _distinct(bucket):
                        _keep(home, entry, pool.sizes)
            pool.buckets, pool.level = merged, level
            if len(pool.buckets) > pool.budget and level < FILEWIDE:
                level += 1

    def tally(self) -> Tally:
        """How many events of each kind were added, and the level of its pool."""
        told = {kind: (pool.seen, pool.level) for kind, pool in self.pools.items()}
        return told | {kind: (pool.seen, pool.level) for kind, pool in self.readings.items() if pool.seen}

    def _setting(self, clue: Clue, slot: Slot) -> None:
        copies = self.settings.get(key := (clue.source.path, _text(clue)))
        if copies is None:
            self.settings[key] = {"first": (clue, slot), "last": (clue, slot)}
        elif clue.source.line < copies["first"][0].source.line:
            copies["first"] = (clue, slot)
        elif clue.source.line > copies["last"][0].source.line:
            copies["last"] = (clue, slot)

    def kept(self, rows: bool = True) -> list[Entry]:
        """Every event (and clock's clue) kept, once each, in no particular order; a reading
        the core read whole is made an event here (`rows`: or left out), its slot its input's
        and -1 (restore places it by its line)."""
        entries = [entry for pool in self.pools.values() for bucket in pool.buckets.values() for entry in _distinct(bucket)]
        made: list[tuple] = []
        slots: list[Slot] = []
        for pool in self.readings.values():
            for x, slot in pool.kept(rows):
                if slot[1] >= 0:
                    entries.append((x, slot, ()))
                else:
                    made.append(x)
                    slots.append(slot)
        entries += [(event, slot, ()) for event, slot in zip(from_rows(made), slots, strict=True)]
        return entries

    def held(self) -> Mapping[str, bytes]:
        """The readings the core read whole that the pools keep, as bytes by kind: a worker
        hands them back so, and they become events only where the concluding process keeps them."""
        return {kind: pool.dump() for kind, pool in self.readings.items() if pool.seen}

    def hold(self, held: Held, index: int) -> None:
        """Readings other reductions held, of input number `index`."""
        for by_kind, after in held:
            for kind, data in by_kind.items():
                self.readings[kind].load(data, index, after)

    def prune(self, spare_ends: bool = False) -> None:
        """Keep, of the held traceback clues, those the correlator may read for a kept
        event: within its window (correlate.Context.around), the nearest copy of each text
        (a loop prints the same traceback each time; of copies, only the nearest can name
        what the event failed in). Only once failures were left out: until then every clue
        stays (one near no event still names a framework, or an OOM whose kind the logs do
        not show). `spare_ends`: keep every clue near the first and last lines read of its
        file in its input too, which an event of a part not read yet (the rest of the file,
        another byte range of it) may stand near."""
        if not any(pool.level for kind, pool in self.pools.items() if kind not in READINGS and kind not in CLUE_KINDS):
            return  # no failure was left out (a clock's clues may have been: they are no failure's context)
        by_path: dict[str, list[int]] = {}  # places in self.context, by file, in line order
        for place in sorted(range(len(self.context)), key=lambda i: (self.context[i][0].source.path, self.context[i][0].source.line)):
            by_path.setdefault(self.context[place][0].source.path, []).append(place)
        ends = {path: [self.context[place][0].source.end_line for place in places] for path, places in by_path.items()}
        keep: set[int] = set()
        for event, _, _ in self.kept():
            for src in event.sources if isinstance(event, Event) else ():
                if src.path in by_path:
                    keep.update(self._nearest_copies(by_path[src.path], ends[src.path], src))
        if spare_ends:
            for place, (clue, (index, _), _) in enumerate(self.context):
                first, last = self.ends[clue.source.path, index]
                if clue.source.line <= first + CONTEXT_AFTER or clue.source.end_line >= last - CONTEXT_BEFORE:
                    keep.add(place)
        self.context = [self.context[place] for place in sorted(keep)]
        self.texts = {text: clue.fields for clue, _, text in self.context}

    def _nearest_copies(self, places: list[int], ends: list[int], src: Source) -> list[int]:
        """Of the clues at `places` (one file's, in line order, ending at `ends`) within the
        window of an event at `src`, the nearest of each text, ranked as Context.around ranks
        them (blocks of one file never overlap: their ends rise with their starts)."""
        lo, hi = src.line - CONTEXT_BEFORE, src.end_line + CONTEXT_AFTER
        best: dict[int, tuple[tuple[int, int], int]] = {}
        for place in itertools.islice(places, bisect.bisect_left(ends, lo), None):
            clue, _, text = self.context[place]
            line, end = clue.source.line, clue.source.end_line
            if line > hi:
                break
            rank = (min(abs(end - src.line), abs(line - src.end_line)), -line if clue.fields.get("newest_first") else line)
            if text not in best or rank < best[text][0]:
                best[text] = (rank, place)
        return [place for _, place in best.values()]


def joined(tallies: list[Tally]) -> Tally:
    """The tally of several reductions merged into one (the byte ranges of one file)."""
    out: dict[str, tuple[int, int]] = {}
    for tally in tallies:
        for kind, (seen, level) in tally.items():
            before = out.get(kind, (0, 0))
            out[kind] = (before[0] + seen, max(before[1], level))
    return out


def tally_of(found: list[Event | Clue]) -> Tally:
    """The tally of events no reduction took: every event among `found`, at level 0."""
    return {kind: (seen, 0) for kind, seen in Counter(x.kind for x in found if isinstance(x, Event)).items()}


def counts(tally: Tally) -> tuple[int, int]:
    """How many readings, and how many failures, a tally counts (not its clocks' clues)."""
    readings = sum(seen for kind, (seen, _) in tally.items() if kind in READINGS)
    return readings, sum(seen for kind, (seen, _) in tally.items() if kind not in CLUE_KINDS) - readings


def take_in(found: list, x: Event | Clue, reduction: Reduction | None) -> None:
    """Append `x` to a scan's `found` (of input 0), or the gap where `reduction` took it: its
    place is in the list before the reduction records it, so an error of oomlens inside the
    reduction leaves a gap at that place for `restore`, not a place past the list's end."""
    found.append(x if reduction is None else None)
    if reduction is not None:
        found[-1] = reduction.take(x, (0, len(found) - 1))


def reduce_found(found: list, index: int, reduction: Reduction) -> None:
    """Hand the events among `found` (the events and clues of input number `index`) to
    `reduction`, each replaced by None where it stood; `restore` puts back the kept ones."""
    for place, x in enumerate(found):
        found[place] = reduction.take(x, (index, place))


def restore(lists: list[list], reduction: Reduction, rows: bool = True) -> None:
    """Put each kept event and clue back in its place and close the gaps of the others; the
    readings the core read whole go into their input's list by their line, after what
    Python read of the same line (`rows`: or stay held, see Reduction.held)."""
    made: dict[int, list[Event]] = {}
    for event, (index, place), _ in reduction.kept(rows):
        if place < 0:
            made.setdefault(index, []).append(event)  # type: ignore[arg-type]
            continue
        lists[index][place] = event
    for clue, (index, place), _ in reduction.context:
        lists[index][place] = clue
    for copies in reduction.settings.values():
        for clue, (index, place) in copies.values():
            lists[index][place] = clue
    for shape, (event, (index, place)) in reduction.shapes.items():
        if lists[index][place] is None:  # the first failure of this wording was left out: its words stay
            lists[index][place] = Clue("evidence", event.source, {"text": shape}, None, event.pid, event.actor, event.node)
    for found in lists:
        found[:] = [x for x in found if x is not None]
    for index, events in made.items():
        lists[index][:] = _merged(lists[index], sorted(events, key=_order))


def with_held(found: list[Event | Clue], held: Held) -> list[Event | Clue]:
    """`found` with the readings `held` put in as events, by their line (as restore puts them)."""
    rows = [row for by_kind, after in held for data in by_kind.values() for row in held_rows(data, after)]
    return _merged(found, sorted(cast("list[Event]", from_rows(rows)), key=_order)) if rows else found


def _merged(found: list[Event | Clue], rows: list[Event]) -> list[Event | Clue]:
    """`rows` (in line order) among `found` (in file order): each before the first of
    `found` whose line comes after its own."""
    out: list[Event | Clue] = []
    at = 0
    for x in found:
        while at < len(rows) and rows[at].source.line < x.source.line:
            out.append(rows[at])
            at += 1
        out.append(x)
    out.extend(rows[at:])
    return out


def restored(found: list[Event | Clue | None], reduction: Reduction | None, rows: bool = True) -> list[Event | Clue]:
    """One input's `found`, its kept events put back in place and its gaps closed (as it
    is when there is no reduction: then no event left a gap); `rows`: see restore."""
    if reduction is not None:
        restore([found], reduction, rows)
    return cast("list[Event | Clue]", found)  # no None is left in it


def _text(clue: Clue) -> int:
    """A hash of what a clue says, the same for every copy of it."""
    return hash(orjson.dumps(clue.fields, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))


def _distinct(bucket: dict[str, Entry]) -> list[Entry]:
    return list({id(entry[0]): entry for entry in bucket.values()}.values())


def _roles(event: Event | Clue, sizes: tuple[str, ...]) -> list[str]:
    f = event.fields
    return ["first", "last", *(role[name] for name in sizes if f.get(name) is not None for role in (MIN, MAX))]


def _order(x: Event | Clue) -> tuple:
    """An event's place in its series: its line, then its text (two readings of one line)."""
    return x.source.line, x.text if isinstance(x, Event) else ""


def _keep(bucket: dict[str, Entry], entry: Entry, sizes: tuple[str, ...]) -> None:
    """Let an event take each role of its bucket it is better at (ties: the earlier one)."""
    event, _, order = entry
    if order < bucket["first"][2]:
        bucket["first"] = entry
    if order > bucket["last"][2]:
        bucket["last"] = entry
    fields = event.fields
    for name in sizes:
        value = fields.get(name)
        if value is None:
            continue
        low, high = bucket.get(MIN[name]), bucket.get(MAX[name])
        if low is None or value < (kept := low[0].fields[name]) or (value == kept and order < low[2]):
            bucket[MIN[name]] = entry
        if high is None or value > (kept := high[0].fields[name]) or (value == kept and order < high[2]):
            bucket[MAX[name]] = entry


def _key(event: Event | Clue, level: int) -> tuple:
    """The bucket of an event at `level`: at level 0 its own; above, its series and its
    place on a grid 2**(level - 1) wide of seconds since the epoch where its line printed a
    time (one printed without a zone read as UTC), else of line numbers (a time borrowed
    from an earlier line is shared by every line after it). At LABELLESS, its file, process
    and device whatever its label; at FILEWIDE, its file. (A pool holds one kind.)"""
    if isinstance(event, Clue):  # a clock's: its series is its file, node and process; its time its own line's
        return _clock_key(event, level)
    if level == FILEWIDE:
        return event.source.path, event.memory
    if level == LABELLESS:
        return event.source.path, event.node, event.pid, event.actor, event.rank, event.gpu, event.memory
    f = event.fields
    series = (event.source.path, event.node, event.pid, event.actor, event.rank, event.gpu, event.memory, f.get("label"))
    if level == 0:
        return series, event.source.line, event.text
    return _grid(series, None if event.time_inferred else event.time, event.source.line, level)


def _clock_key(clue: Clue, level: int) -> tuple:
    if level == FILEWIDE:
        return (clue.source.path,)
    series = (clue.source.path, clue.node, clue.pid)
    if level == 0:
        return series, clue.source.line
    if level == LABELLESS:
        return series
    return _grid(series, clue.time, clue.source.line, level)


def _grid(series: tuple, time: str | None, line: int, level: int) -> tuple:
    """A series' bucket at a level of the grid (1 to WIDEST): by the time its line printed, else by its line."""
    if time is not None and (seconds := epoch_seconds(time)) is not None:
        return series, "s", seconds >> (level - 1)
    return series, "line", line >> (level - 1)


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
