"""Diagnosis: everything oomlens concluded from one set of inputs; outputs only render it."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from . import collector
from .clock import ClockNote, settle
from .correlate import Incident, component_of, correlate
from .events import COMPONENTS, KINDS, Clue, Event
from .remedies import detect_framework, detect_versions, evidence_text, remedies_for
from .sources import Input

if TYPE_CHECKING:
    import pandas

CONTRACT_VERSION = 1
EVENTS_PER_WRITE = 256  # write_json: small enough that each slice's dicts reuse the last one's memory
SLICE_OPEN, SLICE_CLOSE = b'{\n  "events": [\n', b"\n  ]\n}"  # around a slice of events, indented
CONFIDENT = 0.5  # below this the verdict names no memory kind: a wrong guess is worse than none


@dataclass
class Diagnosis:
    """The inputs read, the events found, the incidents they form, and the verdict."""

    inputs: list[Input]
    events: list[Event]
    incidents: list[Incident] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    framework: str | None = None
    versions: dict[str, str] = field(default_factory=dict)  # software -> version seen in its wording
    remedies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by incident id
    clues: list[Clue] = field(default_factory=list)  # context for the correlator, not in the contract
    clocks: list[ClockNote] = field(default_factory=list)  # the clocks corrected to put events on one

    @property
    def problems(self) -> list[str]:
        return [f"{i.path}: {p}" for i in self.inputs for p in i.problems]

    @property
    def readings_note(self) -> str | None:
        """What the reduction of memory readings left out (reduce.py), if anything."""
        read, kept = sum(i.readings for i in self.inputs), sum(i.readings_kept for i in self.inputs)
        if read == kept:
            return None
        return (
            f"memory readings: {read:,} read, {kept:,} kept (the first, last, lowest and highest of each stretch "
            "of each series; --all-readings keeps every one)"
        )

    @property
    def readable(self) -> bool:
        """True when at least one input could be read at all."""
        return any(i.opener is not None and (i.bytes or not i.problems) for i in self.inputs)

    def incident_dict(self, incident: Incident) -> dict[str, Any]:
        return {
            "id": incident.id,
            "root": incident.root.id,
            "cascade": [e.id for e in incident.cascade],
            "component": incident.component,
            "memory": incident.memory,
            "confidence": incident.confidence,
            "evidence": incident.evidence,
            "remedies": self.remedies.get(incident.id or "", []),
            "fingerprint": fingerprint(incident, self.framework),
            "root_kind": incident.root.kind,
            "phase": incident.phase,
            "culprit": incident.culprit,
            "trend": incident.trend,
            "framework": self.framework,
        }

    def to_dict(self) -> dict[str, Any]:
        """The public JSON contract (DESIGN.md, version 1; extra keys are additive)."""
        return self._contract([e.to_dict() for e in self.events])

    def _contract(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "oomlens": CONTRACT_VERSION,
            "inputs": [i.to_dict() for i in self.inputs],
            "events": events,
            "incidents": [self.incident_dict(i) for i in self.incidents],
            "verdict": self.verdict,
            "clocks": [note.to_dict() for note in self.clocks],
        }

    def write_json(self, stream: BinaryIO) -> None:
        """Write to_dict() as indented JSON (what `parse --format json` prints) a few events
        at a time: a long run's document is tens of megabytes, and made whole it would cost
        as much again in fresh memory, which takes longer to get than to fill."""
        import orjson

        head = orjson.dumps(self._contract([]), option=orjson.OPT_INDENT_2)
        # the first '"events": [' is the key: a quote inside a string is escaped
        cut = head.index(b'"events": [') + len(b'"events": [')
        stream.write(head[:cut])
        with collector.paused():  # each slice's dicts are gone before the next is made
            for start in range(0, len(self.events), EVENTS_PER_WRITE):
                events = [e.to_dict() for e in self.events[start : start + EVENTS_PER_WRITE]]
                # under an "events" key, as in the document, the events are indented as there
                part = orjson.dumps({"events": events}, option=orjson.OPT_INDENT_2)
                stream.write(b",\n" if start else b"\n")
                stream.write(memoryview(part)[len(SLICE_OPEN) : -len(SLICE_CLOSE)])
        stream.write(b"\n  " + head[cut:] if self.events else head[cut:])
        stream.write(b"\n")

    def to_frame(self) -> pandas.DataFrame:
        """One row per event, sizes in bytes, times as datetimes: for notebooks and dashboards.

        The columns and their dtypes are the same for every diagnosis (FRAME_COLUMNS), even
        an empty one, so code written against one run works on the next. pandas is
        imported here, not with oomlens."""
        import pandas as pd

        role = {}
        for incident in self.incidents:
            role[id(incident.root)] = (incident.id, "root")
            role.update((id(e), (incident.id, "cascade")) for e in incident.cascade)
        rows: dict[str, list[Any]] = {name: [] for name in FRAME_COLUMNS}
        for event in self.events:
            incident_id, place = role.get(id(event), (None, None))
            values = {
                "id": event.id, "kind": event.kind, "time": event.time, "time_inferred": event.time_inferred,
                "time_latest": event.time_latest,
                "node": event.node, "pid": event.pid, "actor": event.actor, "method": event.method,
                "rank": event.rank, "gpu": event.gpu, "component": event.component, "memory": event.memory,
                "incident": incident_id, "incident_role": place,
                "path": event.source.path, "line": event.source.line, "end_line": event.source.end_line,
                "label": event.fields.get("label"),
            }
            for name in FRAME_COLUMNS:
                rows[name].append(values[name] if name in values else event.fields.get(name))
        columns = {}
        for name, dtype in FRAME_COLUMNS.items():
            if dtype == "datetime64[ns]":
                columns[name] = pd.to_datetime(pd.Series(rows[name], dtype="object"), format="ISO8601").astype(dtype)
            elif dtype == "category":
                columns[name] = pd.Series(rows[name], dtype=pd.CategoricalDtype(CATEGORIES[name]))
            else:
                columns[name] = pd.Series(rows[name], dtype=dtype)
        return pd.DataFrame(columns)

    def to_markdown(self) -> str:
        """The summary to paste into a GitHub issue (what `parse --format markdown` prints)."""
        from .outputs.markdown import render

        return render(self)

    def to_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the self-contained HTML report (what `oomlens report` writes); plotly is
        imported here, not with oomlens. Returns the path written, for attaching it."""
        from .outputs.html import render

        target = Path(path)
        target.write_text(render(self), encoding="utf-8")
        return target


# to_frame() columns and dtypes; every `*_bytes` column is a size field of the contract
FRAME_COLUMNS: dict[str, str] = {
    "id": "string",
    "kind": "category",
    "time": "datetime64[ns]",
    "time_inferred": "bool",
    "time_latest": "datetime64[ns]",
    "node": "string",
    "pid": "Int64",
    "actor": "string",
    "method": "string",
    "rank": "Int64",
    "gpu": "Int64",
    "component": "category",
    "memory": "category",
    "incident": "string",
    "incident_role": "category",
    "path": "string",
    "line": "Int64",
    "end_line": "Int64",
    "label": "string",
    "node_used_bytes": "Int64",
    "node_total_bytes": "Int64",
    "usage_fraction": "Float64",
    "threshold": "Float64",
    "requested_bytes": "Int64",
    "total_bytes": "Int64",
    "free_bytes": "Int64",
    "allocated_bytes": "Int64",
    "reserved_bytes": "Int64",
    "process_bytes": "Int64",
    "used_bytes": "Int64",
    "anon_rss_bytes": "Int64",
    "total_vm_bytes": "Int64",
}
CATEGORIES = {  # closed vocabularies of the contract, every value a category even when unused
    "kind": KINDS,
    "component": COMPONENTS,
    "memory": ("host", "gpu"),
    "incident_role": ("root", "cascade"),
}


def fingerprint(incident: Incident, framework: str | None) -> str:
    """Stable across runs and across pids, IPs and times: what failed, where, in what."""
    phase = re.match(r"[\w.]*", incident.phase or "").group(0).rsplit(".", 1)[-1]
    key = "|".join([incident.root.kind, incident.component or "", phase, framework or "", incident.memory or ""])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def diagnose(inputs: list[Input], events: list[Event], clues: list[Clue]) -> Diagnosis:
    """Correlate the events, choose remedies and say the verdict."""
    with collector.paused():
        clocks = settle(events, clues, inputs)
        ordered, incidents = correlate(events, clues)
        for number, event in enumerate(ordered, 1):
            event.id = f"e{number}"
        text = evidence_text(events, clues)
        framework = detect_framework(text)
        diagnosis = Diagnosis(
            inputs, ordered, incidents, framework=framework, versions=detect_versions(text, events), clues=clues, clocks=clocks
        )
        for incident in incidents:
            diagnosis.remedies[incident.id or ""] = remedies_for(incident, framework, clues, text)
        diagnosis.verdict = verdict(incidents, clues, diagnosis)
    return diagnosis


def verdict(incidents: list[Incident], clues: list[Clue], diagnosis: Diagnosis) -> dict[str, Any] | None:
    """The answer for the user: the first memory incident, else the first incident, else
    an out-of-memory error named in a traceback whose kind the logs do not show."""
    chosen = next((i for i in incidents if i.root.kind in ("ray_oom_kill", "cuda_oom", "kernel_oom", "vllm_memory_error", "ray_oom_summary")), None)
    chosen = chosen or (incidents[0] if incidents else None)
    if chosen is None:
        return _named_oom(clues)
    memory = chosen.memory if chosen.confidence >= CONFIDENT else None
    return {
        "component": chosen.component,
        "memory": memory,
        "root_kind": chosen.root.kind,
        "confidence": chosen.confidence,
        "incident": chosen.id,
        "framework": diagnosis.framework,
        "versions": diagnosis.versions,
        "summary": summary(chosen),
    }


def _named_oom(clues: list[Clue]) -> dict[str, Any] | None:
    for clue in clues:
        task = clue.fields.get("task") or {}
        if "OutOfMemory" in (task.get("error") or ""):
            name = f"{task['actor']}.{task['method']}" if task.get("actor") else task.get("method")
            return {
                "component": component_of(name),
                "memory": None,
                "root_kind": None,
                "confidence": 0.3,
                "incident": None,
                "framework": None,
                "summary": f"an OutOfMemoryError surfaced in {name}; the text that says whether host or GPU memory ran out is not in these logs",
            }
    return None


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1024**3:.2f}"


def summary(incident: Incident) -> str:
    """One sentence a person reads first."""
    root, f = incident.root, incident.root.fields
    at = f" at {root.time.replace('T', ' ')}" if root.time else ""
    if root.time_inferred or root.time is None:  # its line prints no time: say what is known, no more
        early, late = (t.replace("T", " ") if t else None for t in (root.time, root.time_latest))
        at = f" between {early} and {late}" if early and late else f" after {early}" if early else f" before {late}" if late else ""
    node = f" on node {root.node}" if root.node else ""
    if root.kind == "ray_oom_kill":
        usage = f"{_gib(f.get('node_used_bytes'))}/{_gib(f.get('node_total_bytes'))} GiB" if f.get("node_used_bytes") else "usage not shown"
        threshold = f", threshold {f['threshold']}" if f.get("threshold") is not None else ""
        return f"host memory OOM{node}{at} (Ray memory monitor, {usage}{threshold})"
    if root.kind == "ray_oom_summary":
        return f"host memory OOM{node}{at}: raylet reports {f.get('killed')} worker(s) killed by its memory monitor"
    if root.kind == "cuda_oom":
        return (
            f"GPU memory OOM on GPU {'?' if f.get('gpu') is None else f['gpu']}{node}{at} (CUDA out of memory: tried to allocate "
            f"{_gib(f.get('requested_bytes'))} GiB, {_gib(f.get('free_bytes'))} GiB free of {_gib(f.get('total_bytes'))} GiB)"
        )
    if root.kind == "kernel_oom":
        return f"host memory OOM{node}{at}: the Linux OOM killer killed pid {f.get('pid')} ({f.get('process')})"
    if root.kind == "vllm_memory_error":
        return f"GPU memory: vLLM could not fit its KV cache{node}{at} ({f.get('error', 'memory error')})"
    if root.kind == "ray_worker_died":
        who = f" {root.actor}" if root.actor else ""
        return f"worker pid {root.pid}{who} died{at} ({f.get('exit_type') or 'exit'}); no memory failure is in these logs"
    if root.kind == "ray_actor_unavailable":
        return f"an actor became unavailable{at} ({f.get('reason') or f.get('error') or 'no reason given'})"
    return (
        f"{f.get('watchdog') or 'watchdog'} timeout on rank {root.rank if root.rank is not None else '?'}{at}"
        f" ({f.get('op') or 'collective'} seq {f.get('seq', '?')}): a hang whose cause is not in these logs"
    )
