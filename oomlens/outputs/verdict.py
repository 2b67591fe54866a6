"""The verdict block a person reads first: root cause, component, cascade, fix. When
nothing could be read it says so: an empty read is never an all clear."""

from __future__ import annotations

from typing import Any

import click

from ..diagnosis import Diagnosis
from ..events import Event
from ..kinds import device_values
from ..text import gib, render as render_template
from .terminal import wrap

LABEL = 12  # the label column; a label as long as it gets two spaces more
TEXT_MIN = 20  # narrower text than this goes under its label instead of beside it
STYLES: dict[str, dict[str, Any]] = {  # modest: the labels only
    "ROOT CAUSE": {"fg": "red", "bold": True},
    "NOTHING READ": {"fg": "red", "bold": True},
    "FIX": {"fg": "green", "bold": True},
}


def _clock(time: str | None) -> str:
    return time[11:19] if time else "?"


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


def ends(diagnosis: Diagnosis) -> list[str]:
    """The processes the logs say were ended on purpose (a kind's `intended`: ray.kill,
    Ctrl-C, SIGTERM at a job's end), each told by its kind's `ended` template, once."""
    told: dict[str, None] = {}
    for event in diagnosis.events:
        kind = diagnosis.kinds[event.kind]
        if kind.on_purpose(event.fields):
            values: dict[str, Any] = {"pid": event.pid, "actor": event.actor, "at": f" at {_clock(event.time)}" if event.time else ""}
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
    who = f"pid {k['pid']}" if k.get("pid") is not None else f"worker ID {k['worker_id']}" if k.get("worker_id") else "pid ?"
    size = f" ({gib(k['bytes'])})" if k.get("bytes") else ""
    return f"{who} {k.get('name') or ''}".rstrip() + size


def render(diagnosis: Diagnosis, width: int = 100, colour: bool = False) -> str:
    """Labelled lines, wrapped to `width` (any width from 1 up), the label column kept clear."""
    rows = _rows(diagnosis)
    label = max(LABEL, *(len(name) + 2 for name, _ in rows))
    beside = width - label >= TEXT_MIN
    lines = []
    for name, text in rows:
        styled = click.style(name, **STYLES.get(name, {"bold": True})) if colour and name else name
        if beside:
            wrapped = wrap(text, width - label)
            lines.append(styled + " " * (label - len(name)) + wrapped[0])
            lines.extend(" " * label + more for more in wrapped[1:])
        else:
            lines.extend(([styled] if len(name) <= width else wrap(name, width)) if name else [])
            lines.extend(wrap(text, width, "  "))
    return "\n".join(line.rstrip() for line in lines)


def _rows(diagnosis: Diagnosis) -> list[tuple[str, str]]:
    v = diagnosis.verdict
    if not diagnosis.readable:
        return [("NOTHING READ", nothing_read(diagnosis))]
    if v is None:
        return [("VERDICT", all_clear(diagnosis))]
    rows: list[tuple[str, str]] = [("ROOT CAUSE", v["summary"])]
    sessions = sorted({i.session for i in diagnosis.inputs if i.session})
    if v.get("session"):
        newest = f" (the newest of {len(sessions)} sessions read with an incident; --session NAME reads one alone)" if len(sessions) > 1 else ""
        rows.append(("SESSION", v["session"] + newest))
    incident = next((i for i in diagnosis.incidents if i.id == v.get("incident")), None)
    memory = f"{v['memory']} memory" if v["memory"] else "host or GPU not shown in the logs"
    if v["memory"] == "gpu" and v.get("device"):  # the accelerator's own memory, named as it is called
        memory = device_values(v["device"], None)["device_memory"]
    component = v["component"] or "unknown"
    rows.append(("COMPONENT", f"{component} ({memory}, confidence {v['confidence']:.2f})"))
    if incident is not None:
        if incident.culprit:
            c = incident.culprit
            rows.append(("", f"top memory user: pid {c['pid']} {c['command']} {gib(c['bytes'])}"))
        killed = incident.root.fields.get("killed")
        if isinstance(killed, list) and killed:  # a kill report's victims (a raylet summary's is a count)
            rows.append(("", ("killed: " if len(killed) == 1 else f"killed {len(killed)} workers: ") + victims(killed)))
        if incident.phase:
            rows.append(("", f"surfaced during {incident.phase}"))
        if incident.trend:
            rows.append(("TREND", next((e for e in incident.evidence if e.startswith("memory trend")), incident.trend)))
        if incident.cascade:
            rows.append(
                (
                    "CASCADE",
                    ", ".join(" ".join(filter(None, (diagnosis.kinds.label(e.kind, e.device), _where(e), _clock(e.time)))) for e in incident.cascade[:8]),
                )
            )
        remedies = diagnosis.remedies.get(incident.id or "", [])
        if remedies:
            rows.append(("FIX", _fixes(remedies[:5])))
    software = [f"{name} {version}" for name, version in diagnosis.versions.items()]
    if diagnosis.frameworks or software:
        rows.append(("SEEN", ", ".join(([f"framework {framework_words(diagnosis)}"] if diagnosis.frameworks else []) + software)))
    others = len(diagnosis.incidents) - (1 if incident else 0)
    if others > 0:
        rows.append(("ALSO", f"{others} more incident(s): see --format json or markdown"))
    return rows


def _where(event: Event) -> str:
    if event.rank is not None:
        return f"on rank {event.rank}"
    if event.actor:
        return f"of {event.actor}"
    return f"pid {event.pid}" if event.pid is not None else ""


def _remedy(remedy: dict) -> str:
    current = f" (now {remedy['current']})" if "current" in remedy else ""
    return f"{remedy['setting']}={remedy['value']}{current}"


def framework_words(diagnosis: Diagnosis) -> str:
    """The framework the logs come from, or those they may come from when they show only
    what a framework and its forks all print."""
    if len(diagnosis.frameworks) == 1:
        return diagnosis.frameworks[0]
    return " or ".join(diagnosis.frameworks) + " (the logs show only what these all print)"


def _fixes(remedies: list[dict]) -> str:
    """Settings under the name of the framework each belongs to, in order."""
    groups: list[tuple[str, list[str]]] = []
    for remedy in remedies:
        if not groups or groups[-1][0] != remedy["framework"]:
            groups.append((remedy["framework"], []))
        groups[-1][1].append(_remedy(remedy))
    return "; ".join(f"({framework}) " + "; ".join(settings) for framework, settings in groups)
