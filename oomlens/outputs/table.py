"""A readable terminal table of events: time, node, process, kind, key numbers, source.

It lists failures, memory readings on request (outputs/filters.py). rich lays it out: on a
terminal, aligned columns wrapped to its width while DETAILS keeps room to be read, one
block of lines per event when too narrow for that; on a pipe or in a file, every line as
long as it is, never wrapped (as ripgrep and sqlite-utils write). Nothing is cut, and every
text that came from a log is escaped (terminal.escape)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from ..diagnosis import Diagnosis
from ..events import Event
from ..kinds import Kinds
from ..text import render as write, when
from .filters import Filters, Listing, listing
from .terminal import UNWRAPPED, console, escape, rendered
from .verdict import renderable as verdict_block

if TYPE_CHECKING:
    from rich.console import RenderableType

HEADER = ("TIME", "NODE", "PROCESS", "KIND", "DETAILS", "SOURCE")
DETAILS_MIN = 32  # below this room for DETAILS a block per event reads better than columns
INDENT = 4  # the lines of a block after its first
# a worker, job or node id in a Ray file name (worker-<40 to 56 hex>-<job hex>-<pid>.out)
HEX_ID = re.compile(r"[0-9a-f]{16,}(?:-[0-9a-f]{8})?")
KIND_STYLES = {"memory": "bold red", "failure": "yellow", "reading": "dim"}


def summary(event: Event, kinds: Kinds) -> str:
    """The key numbers of an event in one short phrase: its kind's `details` (data/kinds.toml)."""
    entry = kinds.get(event.kind)
    return write(entry.details, event.values()).strip() if entry is not None else ""


def source_name(path: str) -> str:
    """A file's name with each long hex id cut to its first 8 digits and `*`: a glob that
    still finds the file (`ls logs/worker-577e7281*-14523.out`)."""
    return HEX_ID.sub(lambda m: m.group(0)[:8] + "*", os.path.basename(path))


def render(diagnosis: Diagnosis, width: int | None = None, filters: Filters | None = None, colour: bool = False) -> str:
    """The listed events in columns (or blocks, when narrow), the verdict, then what was
    left out and how to see it. `width`: the terminal's columns; None (a pipe, a file):
    lines as long as they are."""
    from rich.text import Text

    chosen = listing(diagnosis, filters or Filters())
    rows = [_cells(event, node, diagnosis.kinds) for event, node in chosen.rows]
    roles = [diagnosis.kinds[event.kind].role for event, _ in chosen.rows]
    parts: list[RenderableType] = []
    plain = _plain_columns(rows) if rows and width is None and not colour else None
    if rows and plain is None:
        parts.append(_columns(rows, roles) if width is None or _room(rows, width) >= DETAILS_MIN else _blocks(rows, roles, width))
    elif not rows and diagnosis.readable:
        parts.append(Text("no event to list"))
    if parts or plain is not None:
        parts.append(Text(""))
    parts += [verdict_block(diagnosis, width), Text("")]
    notes = [f"clock: {note.sentence()}" for note in diagnosis.clocks]
    notes += years_taken(diagnosis.events)
    notes += diagnosis.reduction_notes
    read = sum(1 for i in diagnosis.inputs if i.opener is not None)
    notes.append(f"{len(diagnosis.events)} event(s) in {read} input(s), {sum(i.bytes for i in diagnosis.inputs):,} bytes read")
    if diagnosis.problems:
        notes.append(f"{len(diagnosis.problems)} problem(s) reading the inputs: listed on stderr")
    shortened = next((r[5] for r in rows if "*" in r[5]), None)
    if shortened:
        notes.append(f"SOURCE: a long id in a file name is cut at *, a glob that finds the file: ls <logs>/{shortened.split(':')[0]}")
    notes += left_out(chosen, len(rows), "reading" in roles)
    parts += [Text(escape(note), overflow="fold") for note in notes]
    out = rendered(console(width, colour), *parts)
    return out if plain is None else plain + "\n" + out


def _plain_columns(rows: list[tuple[str, ...]]) -> str | None:
    """The columns as _columns lays them out unwrapped and uncoloured (each cell padded to
    its column's width in terminal cells, two blanks between, no trailing blanks), written
    here: rich measures and wraps every cell, seconds for thousands of rows a pipe never
    wraps. None where a line would pass the width rich folds at."""
    from rich.cells import cell_len

    table = [HEADER, *rows]
    widths = [max(cell_len(row[i]) for row in table) for i in range(len(HEADER))]
    if sum(widths) + 2 * (len(widths) - 1) > UNWRAPPED:
        return None
    return "\n".join("  ".join(cell + " " * (w - cell_len(cell)) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


YEAR_FROM = {"run": "the year the run's other stamps print", "mtime": "the year of their file's last change (as lnav takes it)"}


def years_taken(events: list[Event]) -> list[str]:
    """Where the year of times printed without one was taken from (clock._borrow_year)."""
    taken: dict[str, int] = {}
    for event in events:
        source = event.fields.get("year_from")
        if source in YEAR_FROM:
            taken[source] = taken.get(source, 0) + 1
    return [f"year: {n:,} event(s) printed a time without a year; given {YEAR_FROM[source]}" for source, n in taken.items()]


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
    """The row of an event, every cell escaped: all of it came from a log."""
    who = " ".join(x for x in (f"pid={event.pid}" if event.pid is not None else "", event.actor or "") if x)
    if event.rank is not None:
        who += f" rank{event.rank}"
    where = f"{source_name(event.source.path)}:{event.source.line}"
    if len(event.sources) > 1:
        where += f" (+{len(event.sources) - 1})"
    time = when(event.time or event.fields.get("local_time"), event.time_latest, event.time_inferred) or "-"
    cells = (time, node or "-", who.strip() or "-", kinds.tag(event.kind, event.device), summary(event, kinds) or "-", where)
    return tuple(escape(cell) for cell in cells)


def _room(rows: list[tuple[str, ...]], width: int) -> int:
    """The columns DETAILS gets when the others keep their width (SOURCE and PROCESS give
    up room down to 20 first, as rich shrinks the widest)."""
    natural = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    others = sum(natural) - natural[4] - max(0, natural[5] - 20) - max(0, natural[2] - 20)
    return width - others - 2 * (len(HEADER) - 1)


def _columns(rows: list[tuple[str, ...]], roles: list[str]) -> RenderableType:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for name in HEADER:
        table.add_column(
            name, overflow="fold", no_wrap=name in ("TIME", "KIND")
        )  # DETAILS_MIN is checked before: a min_width would push the table past the width
    for row, role in zip(rows, roles, strict=True):
        table.add_row(*row[:3], _styled(row[3], role), *row[4:])
    return table


def _blocks(rows: list[tuple[str, ...]], roles: list[str], width: int) -> RenderableType:
    """One event in a few lines: time, kind, node and process (folded to the width), then
    its details and its source, indented where there is room."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    indent = INDENT if width > INDENT + 8 else 0
    lines: list[RenderableType] = []
    for (time, node, who, kind, details, where), role in zip(rows, roles, strict=True):
        head = Text(overflow="fold")
        head.append(time + "  ")
        head.append_text(_styled(kind, role))
        head.append(f"  {node}  {who}")
        lines.append(head)
        lines += [Padding(Text(text, overflow="fold"), (0, 0, 0, indent)) for text in (details, where)]
    return Group(*lines)


def _styled(kind: str, role: str) -> Any:
    from rich.text import Text

    return Text(kind, style=KIND_STYLES.get(role, ""), overflow="fold")


def watch_text(line: dict[str, Any], width: int | None = None, colour: bool = False) -> str:
    """One line of `watch` (the contract's watch line) for people: the incident's sentence,
    component and memory, its cascade grouped and its fixes, labelled as the verdict is;
    every text of a log escaped."""
    from rich.table import Table
    from rich.text import Text

    from ..correlate import Incident
    from ..diagnosis import summary as sentence
    from ..events import Source
    from ..kinds import shipped
    from .verdict import fix_lines, grouped

    kinds = shipped()
    made = {
        e["id"]: Event(
            kind=e["kind"],
            source=Source(e["source"]["path"], e["source"]["line"], e["source"]["end_line"]),
            text=e.get("text") or "",
            time=e.get("time"),
            time_inferred=bool(e.get("time_inferred")),
            time_latest=e.get("time_latest"),
            node=e.get("node"),
            pid=e.get("pid"),
            actor=e.get("actor"),
            method=e.get("method"),
            rank=e.get("rank"),
            gpu=e.get("gpu"),
            fields=e.get("fields") or {},
        )
        for e in line["events"]
        if e.get("kind") in kinds
    }
    incident = line["incident"]
    root = made.get(incident["root"])
    told = sentence(Incident(root=root), kinds) if root is not None else f"an incident rooted in {incident.get('root_kind')}"
    rows = [("UPDATE" if line.get("update") else "INCIDENT", [f"{incident['id']}: {told}"])]
    memory = f"{incident['memory']} memory" if incident.get("memory") else "host or GPU not shown in the logs"
    rows.append(("COMPONENT", [f"{incident.get('component') or 'unknown'} ({memory}, confidence {incident.get('confidence', 0):.2f})"]))
    cascade = [made[i] for i in incident.get("cascade", []) if i in made]
    if cascade:
        rows.append(("CASCADE", grouped(cascade, kinds)))
    if incident.get("remedies"):
        rows.append(("FIX", fix_lines(incident["remedies"])))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, lines in rows:
        grid.add_row(Text(name, style="bold red" if name in ("INCIDENT", "UPDATE") else "bold"), Text("\n".join(escape(x) for x in lines), overflow="fold"))
    return rendered(console(width, colour), grid, Text(""))
