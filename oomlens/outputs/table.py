"""A readable terminal table of events: time, node, pid/actor, kind, key numbers, source."""

from __future__ import annotations

import os
from typing import Any

from ..diagnosis import Diagnosis
from ..events import Event
from ..kinds import Kinds
from ..text import render as write


def summary(event: Event, kinds: Kinds) -> str:
    """The key numbers of an event in one short phrase: its kind's `details` (data/kinds.toml)."""
    told: dict[str, Any] = {"pid": event.pid, "gpu": event.gpu, "rank": event.rank, "node": event.node}
    told.update((k, v) for k, v in event.fields.items() if k not in told or v is not None)
    told["fields"] = event.fields
    entry = kinds.get(event.kind)
    return write(entry.details, told).strip() if entry is not None else ""


def render(diagnosis: Diagnosis, width: int | None = None) -> str:
    """The events as aligned columns, then a line per input problem."""
    width = width or _width()
    rows = []
    for e in diagnosis.events:
        who = " ".join(x for x in (f"pid={e.pid}" if e.pid is not None else "", e.actor or "") if x)
        if e.rank is not None:
            who += f" rank{e.rank}"
        where = f"{os.path.basename(e.source.path)}:{e.source.line}"
        if len(e.sources) > 1:
            where += f" (+{len(e.sources) - 1})"
        time = (e.time or e.fields.get("local_time") or (f"<{e.time_latest}" if e.time_latest else "-")).replace("T", " ")[:24]
        if e.time_inferred or (e.time is None and e.time_latest):
            time += "~"  # the line printed no time: it lies between its neighbours' stamps
        rows.append((time, e.node or "-", who or "-", e.kind, summary(e, diagnosis.kinds), where))
    header = ("TIME", "NODE", "PROCESS", "KIND", "DETAILS", "SOURCE")
    if not rows:
        lines = ["no OOM, crash or memory event found"]
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
        fixed = sum(widths) - widths[4] + 10
        widths[4] = max(20, min(widths[4], width - fixed))
        lines = ["  ".join(c.ljust(widths[i])[: widths[i]] if i == 4 else c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in [header, *rows]]
    from .verdict import render as verdict_block

    lines.append("")
    lines.append(verdict_block(diagnosis, width))
    lines.append("")
    lines.extend(f"clock: {note.sentence()}" for note in diagnosis.clocks)
    if diagnosis.readings_note:
        lines.append(diagnosis.readings_note)
    read = sum(1 for i in diagnosis.inputs if i.opener is not None)
    lines.append(f"{len(diagnosis.events)} event(s) in {read} input(s), {sum(i.bytes for i in diagnosis.inputs)} bytes read")
    if diagnosis.problems:
        lines.append(f"{len(diagnosis.problems)} problem(s) reading the inputs: listed on stderr")
    return "\n".join(lines)


def _width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 160
