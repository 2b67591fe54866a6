"""The JSON contract (DESIGN.md, version 1): one object per diagnosis, as `parse --format
json` prints it and `Diagnosis.to_dict()` returns it."""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from .. import collector
from ..correlate import Incident
from ..diagnosis import CONTRACT_VERSION, Diagnosis

# DEL, the C1 controls and the bidi controls (U+061C, U+200E/F, U+202A-E, U+2066-9), as UTF-8:
# valid raw in a JSON string, but a terminal acts on them (a C1 CSI, a Trojan Source reordering).
# Lead bytes all, never inside another character: written as \u escapes, the same string.
UNSAFE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


UNSAFE_LEADS = (b"\x7f", b"\xc2", b"\xd8", b"\xe2")  # the first byte of every match of UNSAFE


def escaped(data: bytes) -> bytes:
    """JSON text with every character a terminal would act on written as its \\u escape.
    Most text holds no byte that may begin one: a search for each of those bytes is a
    memchr, where the pattern is tried at every byte."""
    if not any(lead in data for lead in UNSAFE_LEADS):
        return data
    return UNSAFE.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data)


EVENTS_PER_WRITE = 256  # write(): small enough that each slice's dicts reuse the last one's memory
SLICE_OPEN, SLICE_CLOSE = b'{\n  "events": [\n', b"\n  ]\n}"  # around a slice of events, indented


def incident(diagnosis: Diagnosis, incident: Incident) -> dict[str, Any]:
    """One incident as the contract writes it."""
    return {
        "id": incident.id,
        "root": incident.root.id,
        "cascade": [e.id for e in incident.cascade],
        "component": incident.component,
        "memory": incident.memory,
        "confidence": incident.confidence,
        "evidence": incident.evidence,
        "remedies": diagnosis.remedies.get(incident.id or "", []),
        "fingerprint": incident.fingerprint,
        "root_kind": incident.root.kind,
        "phase": incident.phase,
        "culprit": incident.culprit,
        "trend": incident.trend,
        "framework": diagnosis.framework,
        "session": incident.session,
    }


def contract(diagnosis: Diagnosis) -> dict[str, Any]:
    """The whole diagnosis as plain values."""
    return _contract(diagnosis, [e.to_dict() for e in diagnosis.events])


def _contract(diagnosis: Diagnosis, events: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "oomlens": CONTRACT_VERSION,
        "inputs": [i.to_dict() for i in diagnosis.inputs],
        "events": events,
        "incidents": [incident(diagnosis, i) for i in diagnosis.incidents],
        "verdict": diagnosis.verdict,
        "clocks": [note.to_dict() for note in diagnosis.clocks],
    }


def write(diagnosis: Diagnosis, stream: BinaryIO) -> None:
    """Write to_dict() as indented JSON (what `parse --format json` prints) a few events
    at a time: a long run's document is tens of megabytes, and made whole it would cost
    as much again in fresh memory, which takes longer to get than to fill."""
    import orjson

    head = escaped(orjson.dumps(_contract(diagnosis, []), option=orjson.OPT_INDENT_2))
    # the first '"events": [' is the key: a quote inside a string is escaped
    cut = head.index(b'"events": [') + len(b'"events": [')
    stream.write(head[:cut])
    with collector.paused():  # each slice's dicts are gone before the next is made
        for start in range(0, len(diagnosis.events), EVENTS_PER_WRITE):
            events = [e.to_dict() for e in diagnosis.events[start : start + EVENTS_PER_WRITE]]
            # under an "events" key, as in the document, the events are indented as there
            part = escaped(orjson.dumps({"events": events}, option=orjson.OPT_INDENT_2))
            stream.write(b",\n" if start else b"\n")
            stream.write(memoryview(part)[len(SLICE_OPEN) : -len(SLICE_CLOSE)])
    stream.write(b"\n  " + head[cut:] if diagnosis.events else head[cut:])
    stream.write(b"\n")
