"""Timeline: memory samples per process and device, read off the events, and their trend.

Host memory comes from every Top-10 table of a Ray kill report, the sizes of killed
workers, the kernel's anon-rss of its victim and veRL's `perf/cpu_memory_used_gb`; GPU
memory from the sharding-manager lines, vLLM sleep/wake and profiling lines, CUDA OOM
snapshots and step metrics. One sample is one tidy record (time, where, what, bytes), the
shape a plotly trace or a pandas frame wants.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
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
    out: list[Sample] = []
    for event in _one_copy(events):
        reader = READERS.get(event.kind)
        if reader:
            out.extend(reader(event))
    return out


def _one_copy(events: list[Event]) -> list[Event]:
    copies: dict[tuple, dict[str, int]] = {}
    for event in events:
        if event.kind == "gpu_memory":
            per_file = copies.setdefault(_line_key(event), {})
            per_file[event.source.path] = per_file.get(event.source.path, 0) + 1
    keep = {key: max(files, key=lambda path: (files[path], path)) for key, files in copies.items()}
    return [e for e in events if e.kind != "gpu_memory" or keep[_line_key(e)] == e.source.path]


def _line_key(event: Event) -> tuple:
    f = event.fields
    return (event.pid, f.get("label"), f.get("allocated_bytes"), f.get("reserved_bytes"), f.get("used_bytes"), f.get("cpu_used_bytes"))


def _sample(
    event: Event,
    memory: str,
    metric: str,
    value: int | None,
    *,
    pid: Any = OWN,
    process: Any = OWN,
    total_bytes: int | None = None,
    label: str | None = None,
) -> list[Sample]:
    """One reading of `event`; pid and process are the event's own unless given."""
    if value is None:
        return []
    if process is OWN:
        process = ".".join(p for p in (event.actor, event.method) if p) or None
    return [
        Sample(
            event.time, event.node, event.pid if pid is OWN else pid, process, event.rank, event.gpu,
            memory, metric, int(value), total_bytes, label, event.id,
        )
    ]


def _gpu_memory(event: Event) -> list[Sample]:
    f = event.fields
    memory = event.memory or "gpu"
    out: list[Sample] = []
    for metric in ("used", "allocated", "reserved"):
        out += _sample(event, memory, metric, f.get(f"{metric}_bytes"), total_bytes=f.get("total_bytes"), label=f.get("label"))
    out += _sample(event, "host", "used", f.get("cpu_used_bytes"), label="perf/cpu_memory_used_gb")
    return out


def _ray_kill(event: Event) -> list[Sample]:
    f = event.fields
    out = _sample(event, "host", "used", f.get("node_used_bytes"), pid=None, process="node", total_bytes=f.get("node_total_bytes"), label="node")
    for row in f.get("top", []):
        out += _sample(event, "host", "uss", row["bytes"], pid=row["pid"], process=row["command"] or None, label="Top 10")
    listed = {row["pid"] for row in f.get("top", [])}
    for killed in f.get("killed", []):
        if killed.get("pid") not in listed:
            out += _sample(event, "host", "uss", killed.get("bytes"), pid=killed.get("pid"), process=killed.get("name"), label="killed")
    return out


def _cuda_oom(event: Event) -> list[Sample]:
    f = event.fields
    used = f["total_bytes"] - f["free_bytes"] if f.get("total_bytes") is not None and f.get("free_bytes") is not None else None
    return _sample(event, "gpu", "used", used, total_bytes=f.get("total_bytes"), label="CUDA OOM") + _sample(
        event, "gpu", "allocated", f.get("allocated_bytes"), total_bytes=f.get("total_bytes"), label="CUDA OOM"
    )


def _kernel_oom(event: Event) -> list[Sample]:
    f = event.fields
    return _sample(event, "host", "anon_rss", f.get("anon_rss_bytes"), pid=f.get("pid"), process=f.get("process"), label="kernel OOM")


READERS = {"gpu_memory": _gpu_memory, "ray_oom_kill": _ray_kill, "cuda_oom": _cuda_oom, "kernel_oom": _kernel_oom}


def _seconds(sample: Sample) -> float | None:
    return datetime.fromisoformat(sample.time).timestamp() if sample.time else None


def trend(readings: list[Sample], memory: str, until: str | None) -> tuple[str | None, str | None]:
    """('growth' | 'jump' | None, a sentence saying what was seen) for one memory kind.

    Growth: one series (same process and label) rose at every one of its last readings.
    Jump: one series took a single step up by a large part of its device or node."""
    end = datetime.fromisoformat(until).timestamp() if until else None
    series: dict[tuple, list[Sample]] = {}
    for s in readings:
        if s.memory != memory or s.metric not in ("used", "allocated") or s.label in ("CUDA OOM", "node", "Top 10", "killed"):
            continue
        t = _seconds(s)
        if end is not None and t is not None and t > end:
            continue
        series.setdefault((s.node, s.pid, s.rank, s.label, s.metric), []).append(s)
    for key, points in series.items():
        values = [p.bytes for p in points]
        steps = [b - a for a, b in zip(values, values[1:])]
        rise = values[-1] - values[0] if values else 0
        steady = steps and all(step > 0 for step in steps) and max(steps) <= GROWTH_SHARE * rise
        if len(values) >= GROWTH_STEPS and steady and rise > GROWTH_MIN * values[-1]:
            label = key[3] or key[4]
            return "growth", f"{label} rose at every reading: {' -> '.join(_gib(v) for v in values[-6:])}"
    by_process: dict[tuple, list[Sample]] = {}
    for (node, pid, rank, _label, metric), points in series.items():
        by_process.setdefault((node, pid, rank, metric), []).extend(points)
    for points in by_process.values():
        points.sort(key=lambda p: (_seconds(p) or 0))
        for before, after in zip(points, points[1:]):
            total = after.total_bytes or before.total_bytes
            if total and after.bytes - before.bytes > JUMP_MIN * total:
                phase = (before.label or "").replace("Before ", "", 1) if (before.label or "").startswith("Before") else after.label
                return "jump", f"{phase or after.metric}: {_gib(before.bytes)} -> {_gib(after.bytes)} of {_gib(total)} in one step"
    return None, None


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB"
