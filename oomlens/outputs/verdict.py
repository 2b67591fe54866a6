"""The verdict block a person reads first: root cause, component, cascade, fix. When
nothing could be read it says so: an empty read is never an all clear."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..diagnosis import Diagnosis
from ..events import Event
from ..kinds import Kinds, device_values
from ..text import at, gib, render as render_template
from .terminal import console, escape, rendered

if TYPE_CHECKING:
    from rich.console import RenderableType

LABEL = 12  # the label column; a label as long as it gets two spaces more
TEXT_MIN = 20  # narrower text than this goes under its label instead of beside it
STYLES = {"ROOT CAUSE": "bold red", "NOTHING READ": "bold red", "UNRECOGNISED": "bold red", "FIX": "bold green"}  # modest: the labels only


def coverage(diagnosis: Diagnosis) -> tuple[int, int, int]:
    """(inputs read, inputs that could not be read, inputs read only in part), as
    Diagnosis.readable judges an input."""
    read = [i for i in diagnosis.inputs if i.opener is not None and (i.bytes or not i.problems)]
    return len(read), len(diagnosis.inputs) - len(read), sum(1 for i in read if i.problems)


def all_clear(diagnosis: Diagnosis, where: str = "above") -> str:
    """What to say when no incident was found: a blanket all clear only when every input
    was read whole, else how much was read and how much was not; and how the run ended
    when it ended on purpose (ray.kill, Ctrl-C, SIGTERM at a job's end)."""
    read, unread, part = coverage(diagnosis)
    size = sum(i.bytes for i in diagnosis.inputs)
    if not size:  # empty files or an empty stdin: read, and nothing in them
        inputs = "the input read holds" if read == 1 else f"the {read} inputs read hold"
        return f"{inputs} no text at all: this says nothing about the run"
    if not diagnosis.recognised and not unread and not part:  # read whole, and none of it known
        return unrecognised(diagnosis)
    ended = ends(diagnosis)
    found = "no OOM or crash found in {}" + (f"; {listed_ends(ended)}" if ended else "")
    if not unread and not part:
        return found.format("these logs")
    missing = [f"{unread} could not be read" if unread else "", f"{part} could be read only in part" if part else ""]
    return (
        found.format(f"what could be read ({read} of {len(diagnosis.inputs)} input(s), {size:,} bytes)")
        + f"; {' and '.join(m for m in missing if m)}: see the problems {where}, they may hold what went wrong"
    )


ENDS_TOLD = 3  # the ends on purpose an all clear names; the rest are counted
NAMES_TOLD = 3  # the inputs an unrecognised read names; the rest are counted


def unrecognised(diagnosis: Diagnosis) -> str:
    """What to say when nothing read looked like a log oomlens knows: what was read, and
    that it says nothing about the run."""
    read = [i for i in diagnosis.inputs if i.opener is not None]
    size = sum(i.bytes for i in read)
    more = len(read) - NAMES_TOLD
    names = ", ".join(i.path for i in read[:NAMES_TOLD]) + (f" and {more} more" if more > 0 else "")
    said = "the input read ({}) looked" if len(read) == 1 else f"none of the {len(read)} inputs read ({{}}) looked"
    return (
        ("nothing in " if len(read) == 1 else "")
        + said.format(f"{names}; {size:,} bytes")
        + " like a Ray or framework log oomlens reads (no Ray log name, no memory line, failure, traceback or setting it knows): "
        "this says nothing about the run"
    )


def ends(diagnosis: Diagnosis) -> list[str]:
    """The processes the logs say were ended on purpose (a kind's `intended`: ray.kill,
    Ctrl-C, SIGTERM at a job's end), each told by its kind's `ended` template, once."""
    told: dict[str, None] = {}
    for event in diagnosis.events:
        kind = diagnosis.kinds[event.kind]
        if kind.on_purpose(event.fields):
            values: dict[str, Any] = {"pid": event.pid, "actor": event.actor, "at": at(event.time, event.time_latest, event.time_inferred)}
            values.update((k, v) for k, v in event.fields.items() if v is not None)
            told.setdefault(render_template(kind.ended, values))
    return list(told)


def listed_ends(ended: list[str]) -> str:
    """The ends on purpose named, up to ENDS_TOLD, the rest counted."""
    more = len(ended) - ENDS_TOLD
    return "the run ended on purpose: " + ", ".join(ended[:ENDS_TOLD]) + (f" and {more} more" if more > 0 else "")


def nothing_read(diagnosis: Diagnosis, where: str = "above") -> str:
    count = len(diagnosis.inputs)
    inputs = "the input could not be read" if count == 1 else f"none of the {count} inputs could be read"
    return f"{inputs}: see the problems {where}; this says nothing about the run"


def victims(killed: list[dict[str, Any]]) -> str:
    """Every worker a kill report says Ray killed, with its size where the report gives one."""
    return "; ".join(_victim(k) for k in killed)


def _victim(k: dict[str, Any]) -> str:
    who = f"pid {k['pid']}" if k.get("pid") is not None else f"worker ID {k['worker_id']}" if k.get("worker_id") else "a worker"
    size = f" ({gib(k['bytes'])})" if k.get("bytes") else ""
    return f"{who} {k.get('name') or ''}".rstrip() + size


def renderable(diagnosis: Diagnosis, width: int | None = None) -> RenderableType:
    """Labelled lines for rich: the label column kept clear, the text wrapped beside it (or
    under it, indented, when `width` leaves it less than TEXT_MIN or less than a fix to
    paste needs; None: never wrapped). Every text is escaped (terminal.escape): a verdict
    quotes names and messages of the logs."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    rows = _rows(diagnosis)
    label = max(LABEL, *(len(name) + 2 for name, _ in rows))
    pasted = max((len(line.strip().split(NOTE)[0]) + 2 for name, lines in rows if name == "FIX" for line in lines), default=0)
    beside = width is None or width - label >= max(TEXT_MIN, pasted)  # a line to paste is never broken where it can be whole
    indent = 0 if beside or width is None or width <= 10 else 2
    room = None if width is None else width - (label if beside else indent)
    if beside:
        grid = Table.grid(padding=(0, 0))
        grid.add_column(width=label, no_wrap=True)
        grid.add_column(overflow="fold")
        for name, lines in rows:
            grid.add_row(Text(name, style=STYLES.get(name, "bold")), _text(lines, room))
        return grid
    parts: list[RenderableType] = []
    for name, lines in rows:
        if name:
            parts.append(Text(name, style=STYLES.get(name, "bold"), overflow="fold"))
        parts.append(Padding(_text(lines, room), (0, 0, 0, indent)))
    return Group(*parts)


NOTE = "   # "  # what stands between a fix to paste and the words beside it


def _text(lines: list[str], room: int | None) -> RenderableType:
    """Lines escaped, each wrapped under its own indent; a fix whose note does not fit
    beside it in `room` has the note on the next line, so the fix itself stays whole."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    parts: list[RenderableType] = []
    for line in lines:
        body = line.lstrip(" ")
        lead = len(line) - len(body)
        pieces = (
            [body]
            if room is None or lead + len(body) <= room or NOTE not in body
            else [body.split(NOTE, 1)[0], "  " + NOTE.strip() + " " + body.split(NOTE, 1)[1]]
        )
        parts += [Padding(Text(escape(piece), overflow="fold"), (0, 0, 0, lead)) for piece in pieces]
    return Group(*parts)


def render(diagnosis: Diagnosis, width: int | None = 100, colour: bool = False) -> str:
    """The verdict block alone, as text (`width` None: unwrapped)."""
    return rendered(console(width, colour), renderable(diagnosis, width))


def _rows(diagnosis: Diagnosis) -> list[tuple[str, list[str]]]:
    v = diagnosis.verdict
    if not diagnosis.readable:
        return [("NOTHING READ", [nothing_read(diagnosis)])]
    if v is None:
        clear = all_clear(diagnosis)
        return [("UNRECOGNISED" if clear == unrecognised(diagnosis) else "VERDICT", [clear])]
    rows: list[tuple[str, list[str]]] = [("ROOT CAUSE", [v["summary"]])]
    sessions = sorted({i.session for i in diagnosis.inputs if i.session})
    if v.get("session"):
        newest = f" (the newest of {len(sessions)} sessions read with an incident; --session NAME reads one alone)" if len(sessions) > 1 else ""
        rows.append(("SESSION", [v["session"] + newest]))
    incident = next((i for i in diagnosis.incidents if i.id == v.get("incident")), None)
    memory = f"{v['memory']} memory" if v["memory"] else "host or GPU not shown in the logs"
    if v["memory"] == "gpu" and v.get("device"):  # the accelerator's own memory, named as it is called
        memory = device_values(v["device"], None)["device_memory"]
    component = v["component"] or "unknown"
    rows.append(("COMPONENT", [f"{component} ({memory}, confidence {v['confidence']:.2f})"]))
    if incident is not None:
        if incident.culprit:
            c = incident.culprit
            rows.append(("", [f"top memory user: pid {c['pid']} {c['command']} {gib(c['bytes'])}"]))
        killed = incident.root.fields.get("killed")
        if isinstance(killed, list) and killed:  # a kill report's victims (a raylet summary's is a count)
            rows.append(("", [("killed: " if len(killed) == 1 else f"killed {len(killed)} workers: ") + victims(killed)]))
        if incident.phase:
            rows.append(("", [f"surfaced during {incident.phase}"]))
        if incident.trend:
            rows.append(("TREND", [next((e for e in incident.evidence if e.startswith("memory trend")), incident.trend)]))
        if incident.cascade:
            rows.append(("CASCADE", grouped(incident.cascade, diagnosis.kinds)))
        remedies = diagnosis.remedies.get(incident.id or "", [])
        if remedies:
            rows.append(("FIX", fix_lines(remedies)))
    software = [f"{name} {version}" for name, version in diagnosis.versions.items()]
    if diagnosis.frameworks or software:
        rows.append(("SEEN", [", ".join(([f"framework {framework_words(diagnosis)}"] if diagnosis.frameworks else []) + software)]))
    others = len(diagnosis.incidents) - (1 if incident else 0)
    if others > 0:
        rows.append(("ALSO", [f"{others} more incident(s): see --format json or markdown"]))
    return rows


def grouped(cascade: list[Event], kinds: Kinds) -> list[str]:
    """A cascade told in a few lines, however long: its members of one kind on one line,
    counted, with who they hit and when ("8× watchdog timeout, ranks 0-7, 09:12:58-09:13:01").
    Every member is counted; the JSON lists each one."""
    by_kind: dict[tuple[str, str | None], list[Event]] = {}
    for event in cascade:
        by_kind.setdefault((event.kind, event.device), []).append(event)
    lines = []
    for (kind, device), members in by_kind.items():
        label = kinds.label(kind, device)
        head = label if len(members) == 1 else f"{len(members)}× {label}"
        times = sorted(t[11:19] for e in members for t in [e.time or e.time_latest] if t and len(t) >= 19)
        span = (times[0] if times[0] == times[-1] else f"{times[0]}–{times[-1]}") if times else ""
        lines.append(", ".join(part for part in (head, _who(members), span) if part))
    return lines


TOLD = 4  # names a group of a cascade lists; the rest are counted


def _who(members: list[Event]) -> str:
    """Who a group of like failures hit: ranks as ranges when each names its rank, else each
    process as far as it is named (actor and pid), the first TOLD named and the rest counted."""
    ranks = sorted({e.rank for e in members if e.rank is not None})
    if ranks and all(e.rank is not None for e in members):
        return ("rank " if len(ranks) == 1 else "ranks ") + spans(ranks)
    names = list(dict.fromkeys(_name(e) for e in members if _name(e)))
    unnamed = sum(1 for e in members if not _name(e))
    if not names:
        return ""
    more = len(names) - TOLD
    told = ", ".join(names[:TOLD]) + (f" and {more} more" if more > 0 else "")
    return told + (f" ({unnamed} of them name no process)" if unnamed and len(members) > 1 else "")


def _name(event: Event) -> str:
    pid = f"pid {event.pid}" if event.pid is not None else ""
    rank = f"rank {event.rank}" if event.rank is not None else ""
    return f"{event.actor} ({pid})" if event.actor and pid else event.actor or pid or rank


def spans(numbers: list[int]) -> str:
    """Sorted distinct numbers as ranges: [0, 1, 2, 3, 5, 7, 8] -> "0–3, 5, 7–8"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def framework_words(diagnosis: Diagnosis) -> str:
    """The framework the logs come from, or those they may come from when they show only
    what a framework and its forks all print."""
    if len(diagnosis.frameworks) == 1:
        return diagnosis.frameworks[0]
    return " or ".join(diagnosis.frameworks) + " (the logs show only what these all print)"


def fix_lines(remedies: list[dict]) -> list[str]:
    """One fix a line, as it is pasted (a Hydra override, a flag, an `export`) and what
    it is worked out from beside it; a setting whose value cannot be worked out is named
    with the direction in words. Under the framework's name when fixes of several are given."""
    several = len({r["framework"] for r in remedies}) > 1
    lines: list[str] = []
    for n, remedy in enumerate(remedies):
        if several and (n == 0 or remedy["framework"] != remedies[n - 1]["framework"]):
            lines.append(f"{remedy['framework'] if remedy['framework'] != 'any' else 'any framework'}:")
        said = remedy.get("paste") or remedy["setting"]
        note = remedy.get("note")
        lines.append(("  " if several else "") + (f"{said}{NOTE}{note}" if note else said))
    return lines


def html(diagnosis: Diagnosis) -> str:
    """The verdict block as a small HTML table, for a notebook (`Diagnosis._repr_html_`):
    the same rows as the terminal's, every text escaped, fixes as code to copy."""
    from html import escape as quoted

    cells = []
    for name, lines in _rows(diagnosis):
        if name == "FIX":
            body = "<br>".join(
                f"<code>{quoted(escape(line.split(NOTE)[0].strip()))}</code>" + (f" {quoted(escape(line.split(NOTE, 1)[1]))}" if NOTE in line else "")
                for line in lines
            )
        else:
            body = "<br>".join(quoted(escape(line)) for line in lines)
        cells.append(f'<tr><th style="text-align:left;vertical-align:top">{quoted(name)}</th><td style="text-align:left">{body}</td></tr>')
    return f"<table>{''.join(cells)}</table>"
