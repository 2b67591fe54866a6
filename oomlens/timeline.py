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
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from .events import Event

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


def samples(events: list[Event]) -> list[Sample]:
    """Every memory reading the events carry, in event order.

    A worker's memory line reaches both its own worker-*.out and the driver console; of
    the files that carry the same process's line, the one with most copies is kept."""
    return [Sample(*reading) for reading in readings(events)]


Reading = tuple  # a Sample's fields in their order, as a plain tuple
BYTES, TOTAL_BYTES = ([f.name for f in fields(Sample)].index(name) for name in ("bytes", "total_bytes"))


def readings(events: list[Event]) -> list[Reading]:
    """What samples() returns, as plain tuples: cheaper to make, and the garbage collector
    stops walking a tuple of plain values, where it walks an object again and again (a long
    run has tens of thousands of readings)."""
    out: list[Reading] = []
    lines: list[tuple[tuple, str, int, int]] = []  # memory lines: identity, file, span of their readings in out
    for event in events:
        reader = READERS.get(event.kind)
        if reader is None:
            continue
        start = len(out)
        line = reader(event, out)
        if line is not None:
            lines.append((line, event.source.path, start, len(out)))
    return _one_copy(out, lines)


def _one_copy(out: list[Reading], lines: list[tuple[tuple, str, int, int]]) -> list[Reading]:
    """`out` minus the readings of the copies of a memory line that another file carries
    more often. Most lines are in one file only: copies are counted only for lines in two."""
    first_file: dict[tuple, str] = {}
    shared = set()
    for line, path, _, _ in lines:
        if first_file.setdefault(line, path) != path:
            shared.add(line)
    if not shared:
        return out
    copies = Counter((line, path) for line, path, _, _ in lines if line in shared)
    keep: dict[tuple, tuple[int, str]] = {}  # line -> (copies, path) of the file that keeps it
    for (line, path), count in copies.items():
        if line not in keep or (count, path) > keep[line]:
            keep[line] = (count, path)
    kept: list[Reading] = []
    position = 0
    for line, path, start, end in lines:
        if line in keep and keep[line][1] != path:
            kept += out[position:start]
            position = end
    return kept + out[position:]


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


def _gpu_memory(event: Event, out: list[Reading]) -> tuple:
    """The reader of nearly every reading of a long run, so it builds its readings itself.

    Returns what identifies the line: a worker's memory line may be in two files."""
    f = event.fields
    time, node, pid, rank, gpu, number = event.time, event.node, event.pid, event.rank, event.gpu, event.id
    memory = event.memory or "gpu"
    process = _process(event)
    label, total = f.get("label"), f.get("total_bytes")
    used, allocated, reserved, cpu_used = f.get("used_bytes"), f.get("allocated_bytes"), f.get("reserved_bytes"), f.get("cpu_used_bytes")
    if used is not None:
        out.append((time, node, pid, process, rank, gpu, memory, "used", int(used), total, label, number))
    if allocated is not None:
        out.append((time, node, pid, process, rank, gpu, memory, "allocated", int(allocated), total, label, number))
    if reserved is not None:
        out.append((time, node, pid, process, rank, gpu, memory, "reserved", int(reserved), total, label, number))
    if cpu_used is not None:
        out.append((time, node, pid, process, rank, gpu, "host", "used", int(cpu_used), None, "perf/cpu_memory_used_gb", number))
    return (pid, label, allocated, reserved, used, cpu_used)


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
    _add(out, event, "gpu", "used", used, total_bytes=f.get("total_bytes"), label="CUDA OOM")
    _add(out, event, "gpu", "allocated", f.get("allocated_bytes"), total_bytes=f.get("total_bytes"), label="CUDA OOM")


def _kernel_oom(event: Event, out: list[Reading]) -> None:
    f = event.fields
    _add(out, event, "host", "anon_rss", f.get("anon_rss_bytes"), pid=f.get("pid"), process=f.get("process"), label="kernel OOM")


# A reader adds an event's readings to a list; for a line that several files may carry, it
# returns what identifies the line (readings() keeps one file's copies), else None.
READERS: dict[str, Callable[[Event, list[Reading]], tuple | None]] = {
    "gpu_memory": _gpu_memory,
    "ray_oom_kill": _ray_kill,
    "cuda_oom": _cuda_oom,
    "kernel_oom": _kernel_oom,
}


@functools.lru_cache(maxsize=1 << 16)
def epoch(time: str) -> float:
    """Seconds of an ISO time, cached: the clock, the trends and the incidents ask for the
    same times, tens of thousands of them in a long run (bounded: `oomlens watch` runs for days)."""
    return datetime.fromisoformat(time).timestamp()


SERIES_METRICS = frozenset(("used", "allocated"))
POINT_IN_TIME = frozenset(("CUDA OOM", "node", "Top 10", "killed"))  # labels of readings that are no series


class Trends:
    """The memory trend before each incident, read off the events' readings.

    The readings that can form a series are grouped and timed once; each incident then
    only cuts the series at its own time."""

    def __init__(self, events: list[Event]) -> None:
        self.readings = readings(events)
        self.times: list[float | None] = []  # of each reading, in seconds
        # (memory, node, pid, rank, label, metric) -> positions of the series' readings
        self.series: dict[tuple, list[int]] = {}
        self.seen: dict[tuple[str, float | None], tuple[str | None, str | None]] = {}
        times, series = self.times, self.series
        last_time, t = None, None
        for position, (time, node, pid, _, rank, _, memory, metric, _, _, label, _) in enumerate(self.readings):
            if time is not last_time:  # the readings of one line come together
                last_time, t = time, epoch(time) if time else None
            times.append(t)
            if metric in SERIES_METRICS and label not in POINT_IN_TIME:
                key = (memory, node, pid, rank, label, metric)
                if key in series:
                    series[key].append(position)
                else:
                    series[key] = [position]

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
        times, readings = self.times, self.readings
        series = []
        for key, positions in self.series.items():
            if key[0] != memory:
                continue
            if end is not None:
                positions = [i for i in positions if times[i] is None or times[i] <= end]
            if positions:
                series.append((key, positions))
        series.sort(key=lambda item: item[1][0])  # in the order their first readings came
        for (_, _, _, _, label, metric), positions in series:
            # most series fall at one of their first readings: look no further
            if len(positions) < GROWTH_STEPS or not all(readings[a][BYTES] < readings[b][BYTES] for a, b in itertools.pairwise(positions)):
                continue
            values = [readings[i][BYTES] for i in positions]
            rise = values[-1] - values[0]
            if max(b - a for a, b in itertools.pairwise(values)) <= GROWTH_SHARE * rise and rise > GROWTH_MIN * values[-1]:
                return "growth", f"{label or metric} rose at every reading: {' -> '.join(_gib(v) for v in values[-6:])}"
        by_process: dict[tuple, list[int]] = {}
        for (_, node, pid, rank, _, metric), positions in series:
            by_process.setdefault((node, pid, rank, metric), []).extend(positions)
        for (_, _, _, metric), positions in by_process.items():
            positions.sort(key=lambda i: times[i] or 0)
            for a, b in itertools.pairwise(positions):
                total = readings[b][TOTAL_BYTES] or readings[a][TOTAL_BYTES]
                if total and readings[b][BYTES] - readings[a][BYTES] > JUMP_MIN * total:
                    before, after = Sample(*readings[a]), Sample(*readings[b])
                    phase = (before.label or "").replace("Before ", "", 1) if (before.label or "").startswith("Before") else after.label
                    return "jump", f"{phase or metric}: {_gib(before.bytes)} -> {_gib(after.bytes)} of {_gib(total)} in one step"
        return None, None


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB"
