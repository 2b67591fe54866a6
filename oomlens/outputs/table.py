"""A readable terminal table of events: time, node, process, kind, key numbers, source.

It lists failures, memory readings on request (outputs/filters.py), and fits any width:
aligned columns while DETAILS keeps room to be read, one block of lines per event below
that; every line is wrapped to the width, never cut."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import click

from ..diagnosis import Diagnosis
from ..events import Event
from ..kinds import Kinds, device_values
from ..text import render as write
from .filters import Filters, Listing, listing
from .terminal import wrap
from .verdict import render as verdict_block

HEADER = ("TIME", "NODE", "PROCESS", "KIND", "DETAILS", "SOURCE")
GAP = "  "
INDENT = "    "  # the lines of a block after its first
# (column, narrowest) in the order columns give up room when the table is too wide: DETAILS
# keeps 60 before SOURCE and PROCESS wrap; below 40 a block per event reads better
SHRINK = ((4, 60), (5, 28), (2, 20), (4, 40))
# a worker, job or node id in a Ray file name (worker-<40 to 56 hex>-<job hex>-<pid>.out)
HEX_ID = re.compile(r"[0-9a-f]{16,}(?:-[0-9a-f]{8})?")
KIND_STYLES: dict[str, dict[str, Any]] = {"memory": {"fg": "red", "bold": True}, "failure": {"fg": "yellow"}, "reading": {"dim": True}}


def summary(event: Event, kinds: Kinds) -> str:
    """The key numbers of an event in one short phrase: its kind's `details` (data/kinds.toml)."""
    told: dict[str, Any] = {"pid": event.pid, "gpu": event.gpu, "rank": event.rank, "node": event.node}
    told.update((k, v) for k, v in event.fields.items() if k not in told or v is not None)
    told["fields"] = event.fields
    told.update(device_values(event.device, event.gpu, event.memory))
    entry = kinds.get(event.kind)
    return write(entry.details, told).strip() if entry is not None else ""


def source_name(path: str) -> str:
    """A file's name with each long hex id cut to its first 8 digits and `*`: a glob that
    still finds the file (`ls logs/worker-577e7281*-14523.out`)."""
    return HEX_ID.sub(lambda m: m.group(0)[:8] + "*", os.path.basename(path))


def render(diagnosis: Diagnosis, width: int | None = None, filters: Filters | None = None, colour: bool = False) -> str:
    """The listed events in columns (or blocks, when narrow), the verdict, then what was
    left out and how to see it. `width` defaults to 80, the width of an unknown terminal."""
    width = max(1, width or 80)
    chosen = listing(diagnosis, filters or Filters())
    rows = [_cells(event, node, diagnosis.kinds) for event, node in chosen.rows]
    roles = [diagnosis.kinds[event.kind].role for event, _ in chosen.rows]
    paint = _painter(colour)
    lines: list[str] = []
    if rows:
        widths = _fit(rows, width)
        lines += _columns(rows, roles, widths, paint) if widths else _blocks(rows, roles, width, paint)
    elif diagnosis.readable:
        lines.append("no event to list")
    if lines:
        lines.append("")
    lines.append(verdict_block(diagnosis, width, colour))
    lines.append("")
    notes = [f"clock: {note.sentence()}" for note in diagnosis.clocks]
    notes += diagnosis.reduction_notes
    read = sum(1 for i in diagnosis.inputs if i.opener is not None)
    notes.append(f"{len(diagnosis.events)} event(s) in {read} input(s), {sum(i.bytes for i in diagnosis.inputs):,} bytes read")
    if diagnosis.problems:
        notes.append(f"{len(diagnosis.problems)} problem(s) reading the inputs: listed on stderr")
    shortened = next((r[5] for r in rows if "*" in r[5]), None)
    if shortened:
        notes.append(f"SOURCE: a long id in a file name is cut at *, a glob that finds the file: ls <logs>/{shortened.split(':')[0]}")
    notes += left_out(chosen, len(rows), "reading" in roles)
    for note in notes:
        lines += wrap(note, width)
    return "\n".join(lines)


def left_out(chosen: Listing, shown: int, readings: bool) -> list[str]:
    """What the defaults and filters kept off the list, and the option that lists it;
    `readings`: some readings are listed (their copies in a second file are not)."""
    out = []
    if chosen.hidden:
        hidden = ", ".join(f"{n:,} {label}(s)" for label, n in chosen.hidden.items())
        out.append(f"{shown:,} event(s) listed; {hidden} not listed: --readings lists them")
    if chosen.narrowed:
        out.append(f"{chosen.narrowed:,} event(s) left out by --kind, --node, --since or --until")
    if readings and chosen.copies:
        out.append(f"{chosen.copies:,} reading(s) printed in a second file too (a worker's own file and the driver console) listed once")
    return out


def _cells(event: Event, node: str | None, kinds: Kinds) -> tuple[str, ...]:
    who = " ".join(x for x in (f"pid={event.pid}" if event.pid is not None else "", event.actor or "") if x)
    if event.rank is not None:
        who += f" rank{event.rank}"
    where = f"{source_name(event.source.path)}:{event.source.line}"
    if len(event.sources) > 1:
        where += f" (+{len(event.sources) - 1})"
    time = (event.time or event.fields.get("local_time") or (f"<{event.time_latest}" if event.time_latest else "-")).replace("T", " ")[:24]
    if event.time_inferred or (event.time is None and event.time_latest):
        time += "~"  # the line printed no time: it lies between its neighbours' stamps
    return (time, node or "-", who.strip() or "-", kinds.tag(event.kind, event.device), summary(event, kinds) or "-", where)


def _fit(rows: list[tuple[str, ...]], width: int) -> list[int] | None:
    """Column widths that fit `width`, or None when DETAILS would be left too little room."""
    natural = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    widths = list(natural)
    excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
    for column, narrowest in SHRINK:
        if excess <= 0:
            break
        cut = min(excess, max(0, widths[column] - narrowest))
        widths[column] -= cut
        excess -= cut
    return widths if excess <= 0 else None


def _columns(rows: list[tuple[str, ...]], roles: list[str], widths: list[int], paint: Callable[[str, str], str]) -> list[str]:
    lines = []
    for row, role in [(HEADER, "header"), *zip(rows, roles, strict=True)]:
        cells = [wrap(text, w) for text, w in zip(row, widths, strict=True)]
        for j in range(max(len(c) for c in cells)):
            texts = [c[j] if j < len(c) else "" for c in cells]
            styles = [role if role == "header" or i == 3 else "" for i in range(len(texts))]
            parts = [paint(text, style) + " " * (w - len(text)) for text, style, w in zip(texts, styles, widths, strict=True)]
            lines.append(GAP.join(parts).rstrip())
    return lines


def _blocks(rows: list[tuple[str, ...]], roles: list[str], width: int, paint: Callable[[str, str], str]) -> list[str]:
    """One event in a few lines: time, kind, node and process (on two lines when they do not
    fit on one), then its details and its source, indented."""
    lines = []
    for (time, node, who, kind, details, where), role in zip(rows, roles, strict=True):
        head = GAP.join((time, kind, node, who))
        if len(head) <= width:
            lines.append(GAP.join((time, paint(kind, role), node, who)))
        else:
            first = time + GAP + kind
            lines += [time + GAP + paint(kind, role)] if len(first) <= width else wrap(time, width) + [paint(p, role) for p in wrap(kind, width)]
            lines += wrap(f"{node}{GAP}{who}", width, INDENT)
        lines += wrap(details, width, INDENT) + wrap(where, width, INDENT)
    return lines


def _painter(colour: bool) -> Callable[[str, str], str]:
    """Style a cell by its row's role (a memory failure, another failure, a reading, the header)."""
    if not colour:
        return lambda text, role: text
    styles = {**KIND_STYLES, "header": {"bold": True}}
    return lambda text, role: click.style(text, **styles[role]) if text and role else text
