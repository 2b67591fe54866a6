"""The verdict block a person reads first: root cause, component, cascade, fix."""

from __future__ import annotations

import textwrap

from ..diagnosis import Diagnosis
from ..events import Event
from ..text import gib


def _clock(time: str | None) -> str:
    return time[11:19] if time else "?"


def render(diagnosis: Diagnosis, width: int = 100) -> str:
    """Labelled lines, wrapped to `width`, the label column kept clear."""
    v = diagnosis.verdict
    if v is None:
        return "VERDICT     no OOM or crash found in these logs"
    rows: list[tuple[str, str]] = [("ROOT CAUSE", v["summary"])]
    incident = next((i for i in diagnosis.incidents if i.id == v.get("incident")), None)
    memory = f"{v['memory']} memory" if v["memory"] else "host or GPU not shown in the logs"
    component = v["component"] or "unknown"
    rows.append(("COMPONENT", f"{component} ({memory}, confidence {v['confidence']:.2f})"))
    if incident is not None:
        if incident.culprit:
            c = incident.culprit
            rows.append(("", f"top memory user: pid {c['pid']} {c['command']} {gib(c['bytes'])}"))
        killed = incident.root.fields.get("killed")
        if isinstance(killed, list) and killed:  # a kill report's victims (a raylet summary's is a count)
            k = killed[0]
            size = f" ({gib(k['bytes'])})" if k.get("bytes") else ""
            rows.append(("", f"killed: pid {k.get('pid')} {k.get('name') or ''}{size}"))
        if incident.phase:
            rows.append(("", f"surfaced during {incident.phase}"))
        if incident.trend:
            rows.append(("TREND", next((e for e in incident.evidence if e.startswith("memory trend")), incident.trend)))
        if incident.cascade:
            rows.append(
                ("CASCADE", ", ".join(" ".join(filter(None, (diagnosis.kinds.label(e.kind), _where(e), _clock(e.time)))) for e in incident.cascade[:8]))
            )
        remedies = diagnosis.remedies.get(incident.id or "", [])
        if remedies:
            rows.append(("FIX", f"({remedies[0]['framework']}) " + "; ".join(_remedy(r) for r in remedies[:5])))
    software = [f"{name} {version}" for name, version in diagnosis.versions.items()]
    if diagnosis.framework or software:
        rows.append(("SEEN", ", ".join(([f"framework {diagnosis.framework}"] if diagnosis.framework else []) + software)))
    others = len(diagnosis.incidents) - (1 if incident else 0)
    if others > 0:
        rows.append(("ALSO", f"{others} more incident(s): see --format json or markdown"))
    lines = []
    for label, text in rows:
        wrapped = textwrap.wrap(text, width - 12) or [""]
        lines.append(f"{label:<12}{wrapped[0]}")
        lines.extend(f"{'':<12}{more}" for more in wrapped[1:])
    return "\n".join(lines)


def _where(event: Event) -> str:
    if event.rank is not None:
        return f"on rank {event.rank}"
    if event.actor:
        return f"of {event.actor}"
    return f"pid {event.pid}" if event.pid is not None else ""


def _remedy(remedy: dict) -> str:
    current = f" (now {remedy['current']})" if "current" in remedy else ""
    return f"{remedy['setting']}={remedy['value']}{current}"
