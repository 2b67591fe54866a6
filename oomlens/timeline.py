"""Timeline: memory samples per process and device, read off the events, and their trend.

Host memory comes from every Top-10 table of a Ray kill report, the sizes of killed
workers, the kernel's anon-rss of its victim and veRL's `perf/cpu_memory_used_gb`; GPU
memory from the sharding-manager lines, vLLM sleep/wake and profiling lines, CUDA OOM
snapshots and step metrics. One sample is one tidy record (time, where, what, bytes), the
shape a plotly trace or a pandas frame wants.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast

from .events import Event
from .kinds import Kinds, shipped
from .text import gib

GROWTH_STEPS = 3  # a rise must hold over at least this many samples
GROWTH_MIN = 0.05  # and add at least this fraction of the last value
GROWTH_SHARE = 0.6  # with no single step taking more than this share of the rise
JUMP_MIN = 0.25  # one step that adds this fraction of the device or node total is a jump


OWN: Any = object()  # "the event's own", for a reading's pid or process


@dataclass(slots=True)
class Sample:
    """One memory reading: when, where, of what, how much."""

    time: str | None
    node: str | None
    pid: int | None
    process: str | None  # actor.method, Top-10 command, kernel comm, or the memory line's label
    rank: int | None
    gpu: int | None
    memory: str  # host | gpu
    metric: str  # used | allocated | reserved | uss | anon_rss | total
    bytes: int
    total_bytes: int | None
    label: str | None
    event: str | None  # the id of the event it was read from

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def samples(events: list[Event], kinds: Kinds) -> list[Sample]:
    """Every memory reading the events carry, in event order: what each kind adds is named
    by its `readings` in data/kinds.toml (READERS).

    A worker's memory line reaches both its own worker-*.out and the driver console; of
    the files that carry the same process's line, the one with most copies is kept."""
    return [Sample(*reading) for reading in readings(events, kinds)]


# A Sample's fields in their order, as a plain tuple: (time, node, pid, process, rank, gpu,
# memory, metric, bytes, total_bytes, label, event)
Reading = tuple[str | None, str | None, int | None, str | None, int | None, int | None, str, str, int, int | None, str | None, str | None]


def readings(events: list[Event], kinds: Kinds) -> list[Reading]:
    """What samples() returns, as plain tuples: cheaper to make, and the garbage collector
    stops walking a tuple of plain values, where it walks an object again and again (a long
    run has tens of thousands of readings)."""
    out: list[Reading] = []
    readers = {name: READERS[kind.readings] for name, kind in kinds.items() if kind.readings is not None}
    for event in _one_copy(events, kinds.memory_lines):
        reader = readers.get(event.kind)
        if reader is not None:
            reader(event, out)
    # a console's copy of a worker's line may not name its node where the worker's own file does
    node_of = {e.pid: e.node for e in events if e.kind in kinds.memory_lines and e.pid is not None and e.node is not None}
    if node_of and any(r[1] is None and r[2] in node_of for r in out):
        out = [(r[0], node_of[r[2]], *r[2:]) if r[1] is None and r[2] in node_of else r for r in out]
    return out


def _one_copy(events: list[Event], memory_lines: frozenset[str]) -> list[Event]:
    """`events` minus the copies of a memory line that another file carries with a time, or
    more often. Most lines are in one file only: copies are counted only for lines in two,
    and only looked for when some process has memory lines in two files (a line's process
    is part of what identifies it)."""
    files_of: dict[int | None, set[str]] = {}
    for event in events:
        if event.kind in memory_lines:
            files_of.setdefault(event.pid, set()).add(event.source.path)
    if all(len(paths) == 1 for paths in files_of.values()):
        return events
    lines = [(_line_of(event), event.source.path) for event in events if event.kind in memory_lines]
    first_file: dict[tuple, str] = {}
    shared = {line for line, path in lines if first_file.setdefault(line, path) != path}
    if not shared:
        return events
    # line -> (copies with a time, copies, path) of the file that keeps it: a worker's .out
    # may print no time at all where the driver console's copy lies between two stamps
    keep: dict[tuple, tuple[int, int, str]] = {}
    timed = Counter((_line_of(e), e.source.path) for e in events if e.kind in memory_lines and (e.time or e.time_latest))
    for (line, path), count in Counter(pair for pair in lines if pair[0] in shared).items():
        rank = (timed[line, path], count, path)
        if line not in keep or rank > keep[line]:
            keep[line] = rank
    kept: list[Event] = []
    in_order = iter(lines)
    for event in events:
        if event.kind in memory_lines:
            line, path = next(in_order)
            if line in keep and keep[line][2] != path:
                continue
        kept.append(event)
    return kept


def _line_of(event: Event) -> tuple:
    """What identifies a memory line whichever file carries it: its process and its numbers."""
    f = event.fields
    return (event.pid, f.get("label"), f.get("allocated_bytes"), f.get("reserved_bytes"), f.get("used_bytes"), f.get("cpu_used_bytes"))


def _process(event: Event) -> str | None:
    """actor.method, or whichever of them the event names."""
    if event.actor and event.method:
        return f"{event.actor}.{event.method}"
    return event.actor or event.method or None


def _add(
    out: list[Reading],
    event: Event,
    memory: str,
    metric: str,
    value: int | None,
    *,
    pid: Any = OWN,
    process: Any = OWN,
    total_bytes: int | None = None,
    label: str | None = None,
) -> None:
    """Add one reading of `event` to `out`; pid and process are the event's own unless given."""
    if value is None:
        return
    pid = event.pid if pid is OWN else pid
    process = _process(event) if process is OWN else process
    out.append((event.time, event.node, pid, process, event.rank, event.gpu, memory, metric, int(value), total_bytes, label, event.id))


# A memory line's readings: (metric, field) on its own device, then the host memory veRL's
# step metrics carry; used and allocated form the series Trends reads
GPU_METRICS = (("used", "used_bytes"), ("allocated", "allocated_bytes"), ("reserved", "reserved_bytes"))
CPU_USED, CPU_LABEL = "cpu_used_bytes", "perf/cpu_memory_used_gb"


def _gpu_memory(event: Event, out: list[Reading]) -> None:
    """The reader of nearly every reading of a long run, so it builds its readings itself."""
    f = event.fields
    time, node, pid, rank, gpu, number = event.time, event.node, event.pid, event.rank, event.gpu, event.id
    memory = event.memory or "gpu"
    process = _process(event)
    label, total = f.get("label"), f.get("total_bytes")
    for metric, name in GPU_METRICS:
        value = f.get(name)
        if value is not None:
            out.append((time, node, pid, process, rank, gpu, memory, metric, int(value), total, label, number))
    cpu_used = f.get(CPU_USED)
    if cpu_used is not None:
        out.append((time, node, pid, process, rank, gpu, "host", "used", int(cpu_used), None, CPU_LABEL, number))


def _ray_kill(event: Event, out: list[Reading]) -> None:
    f = event.fields
    _add(out, event, "host", "used", f.get("node_used_bytes"), pid=None, process="node", total_bytes=f.get("node_total_bytes"), label="node")
    for row in f.get("top", []):
        _add(out, event, "host", "uss", row["bytes"], pid=row["pid"], process=row["command"] or None, label="Top 10")
    listed = {row["pid"] for row in f.get("top", [])}
    for killed in f.get("killed", []):
        if killed.get("pid") not in listed:
            _add(out, event, "host", "uss", killed.get("bytes"), pid=killed.get("pid"), process=killed.get("name"), label="killed")


def _cuda_oom(event: Event, out: list[Reading]) -> None:
    f = event.fields
    used = f["total_bytes"] - f["free_bytes"] if f.get("total_bytes") is not None and f.get("free_bytes") is not None else None
    label = shipped().label(event.kind, event.device)  # "NPU OOM" on an NPU
    _add(out, event, "gpu", "used", used, total_bytes=f.get("total_bytes"), label=label)
    _add(out, event, "gpu", "allocated", f.get("allocated_bytes"), total_bytes=f.get("total_bytes"), label=label)


def _kernel_oom(event: Event, out: list[Reading]) -> None:
    f = event.fields
    _add(out, event, "host", "anon_rss", f.get("anon_rss_bytes"), pid=f.get("pid"), process=f.get("process"), label="kernel OOM")


# A reader adds an event's readings to a list; a kind names its reader (`readings` in data/kinds.toml).
READERS: dict[str, Callable[[Event, list[Reading]], None]] = {
    "gpu_memory": _gpu_memory,
    "ray_kill": _ray_kill,
    "cuda_oom": _cuda_oom,
    "kernel_oom": _kernel_oom,
}


@functools.lru_cache(maxsize=1 << 16)
def epoch(time: str) -> float:
    """Seconds of an ISO time, cached: the clock, the trends and the incidents ask for the
    same times, tens of thousands of them in a long run (bounded: `oomlens watch` runs for days).
    A time without a zone (all of them, once clock.settle has run) is read as it stands,
    never in the zone of the machine oomlens runs on (its DST would move hours)."""
    return datetime.fromisoformat(time).replace(tzinfo=UTC).timestamp()


# A memory line, as Trends keeps it: (seconds, used, allocated, total, label)
Line = tuple[float | None, int | None, int | None, int | None, str | None]
Column = Literal[1, 2]  # of a Line: used, allocated
SERIES: tuple[tuple[Column, str], ...] = (
    (1, "used"),
    (2, "allocated"),
)  # a memory line's sizes that form series, by column; the other readings are points in time


class Trends:
    """The memory trend before each incident, read off the memory lines.

    Only memory lines form series (a kill report's table or a CUDA OOM's snapshot is one
    moment): the used and allocated sizes of one process and label. The lines are grouped
    and timed once; each incident then only cuts the series at its own time."""

    def __init__(self, events: list[Event], kinds: Kinds) -> None:
        self.lines: list[Line] = []  # of each memory line, in event order
        # (memory, node, pid, rank, label) -> positions of its lines
        self.by_source: dict[tuple[str, str | None, int | None, int | None, str | None], list[int]] = {}
        self.seen: dict[tuple[str, float | None], tuple[str | None, str | None]] = {}
        lines, by_source = self.lines, self.by_source
        last_time, t = None, None
        for event in _one_copy(events, kinds.memory_lines):
            if event.kind not in kinds.memory_lines:
                continue
            if event.time is not last_time:  # a run of lines of one second shares its time
                last_time, t = event.time, epoch(event.time) if event.time else None
            f = event.fields
            label = f.get("label")
            by_source.setdefault((event.memory or "gpu", event.node, event.pid, event.rank, label), []).append(len(lines))
            lines.append((t, f.get("used_bytes"), f.get("allocated_bytes"), f.get("total_bytes"), label))
            if (cpu_used := f.get(CPU_USED)) is not None:  # veRL's host memory, in its step metrics
                by_source.setdefault(("host", event.node, event.pid, event.rank, CPU_LABEL), []).append(len(lines))
                lines.append((t, cpu_used, None, None, CPU_LABEL))

    def before(self, memory: str, until: str | None) -> tuple[str | None, str | None]:
        """('growth' | 'jump' | None, a sentence saying what was seen) for one memory kind,
        from the readings up to `until` (all of them when it is None).

        Growth: one series (same process and label) rose at every one of its last readings.
        Jump: one series took a single step up by a large part of its device or node."""
        end = epoch(until) if until else None
        if (memory, end) not in self.seen:  # incidents with no time all see every reading
            self.seen[memory, end] = self._before(memory, end)
        return self.seen[memory, end]

    def _before(self, memory: str, end: float | None) -> tuple[str | None, str | None]:
        lines = self.lines
        # ((node, pid, rank, label, metric), column, positions of the lines that have that column)
        series: list[tuple[tuple[str | None, int | None, int | None, str | None, str], Column, list[int]]] = []
        for (kind, node, pid, rank, label), positions in self.by_source.items():
            if kind != memory:
                continue
            if end is not None:
                positions = [i for i in positions if (t := lines[i][0]) is None or t <= end]
            for column, metric in SERIES:
                if found := [i for i in positions if lines[i][column] is not None]:
                    series.append(((node, pid, rank, label, metric), column, found))
        series.sort(key=lambda item: item[2][0])  # in the order their first readings came
        for (_, _, _, label, metric), column, positions in series:
            values = cast("list[int]", [lines[i][column] for i in positions])  # positions hold only lines with that column
            # most series fall at one of their first readings: look no further
            if len(values) < GROWTH_STEPS or not all(a < b for a, b in itertools.pairwise(values)):
                continue
            rise = values[-1] - values[0]
            if max(b - a for a, b in itertools.pairwise(values)) <= GROWTH_SHARE * rise and rise > GROWTH_MIN * values[-1]:
                return "growth", f"{label or metric} rose at every reading: {' -> '.join(gib(v) for v in values[-6:])}"
        by_process: dict[tuple[str | None, int | None, int | None, str], tuple[Column, list[int]]] = {}
        for (node, pid, rank, _, metric), column, positions in series:
            by_process.setdefault((node, pid, rank, metric), (column, []))[1].extend(positions)
        for (_, _, _, metric), (column, positions) in by_process.items():
            positions.sort(key=lambda i: lines[i][0] or 0)
            for a, b in itertools.pairwise(positions):
                (_, _, _, total_a, before), (_, _, _, total_b, after) = lines[a], lines[b]
                total = total_b or total_a
                # positions hold only lines with that column (as series above): neither size is None
                if total and lines[b][column] - lines[a][column] > JUMP_MIN * total:  # type: ignore[operator]
                    phase = before.replace("Before ", "", 1) if before and before.startswith("Before") else after
                    return "jump", f"{phase or metric}: {gib(lines[a][column])} -> {gib(lines[b][column])} of {gib(total)} in one step"
        return None, None
