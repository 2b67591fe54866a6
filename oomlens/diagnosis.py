"""Diagnosis: everything oomlens concluded from one set of inputs; outputs only render it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from .correlate import Incident, component_of, correlate
from .events import Clue, Event
from .remedies import detect_framework, detect_versions, evidence_text, remedies_for
from .sources import Input

CONTRACT_VERSION = 1
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

    @property
    def problems(self) -> list[str]:
        return [f"{i.path}: {p}" for i in self.inputs for p in i.problems]

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
        return {
            "oomlens": CONTRACT_VERSION,
            "inputs": [i.to_dict() for i in self.inputs],
            "events": [e.to_dict() for e in self.events],
            "incidents": [self.incident_dict(i) for i in self.incidents],
            "verdict": self.verdict,
        }


def fingerprint(incident: Incident, framework: str | None) -> str:
    """Stable across runs and across pids, IPs and times: what failed, where, in what."""
    phase = re.match(r"[\w.]*", incident.phase or "").group(0).rsplit(".", 1)[-1]
    key = "|".join([incident.root.kind, incident.component or "", phase, framework or "", incident.memory or ""])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def diagnose(inputs: list[Input], events: list[Event], clues: list[Clue]) -> Diagnosis:
    """Correlate the events, choose remedies and say the verdict."""
    ordered, incidents = correlate(events, clues)
    for number, event in enumerate(ordered, 1):
        event.id = f"e{number}"
    text = evidence_text(events, clues)
    framework = detect_framework(text)
    diagnosis = Diagnosis(inputs, ordered, incidents, framework=framework, versions=detect_versions(text, events), clues=clues)
    for incident in incidents:
        diagnosis.remedies[incident.id or ""] = remedies_for(incident, framework, clues, events)
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
    node = f" on node {root.node}" if root.node else ""
    if root.kind == "ray_oom_kill":
        usage = f"{_gib(f.get('node_used_bytes'))}/{_gib(f.get('node_total_bytes'))} GiB" if f.get("node_used_bytes") else "usage not shown"
        threshold = f", threshold {f['threshold']}" if f.get("threshold") is not None else ""
        return f"host memory OOM{node}{at} (Ray memory monitor, {usage}{threshold})"
    if root.kind == "ray_oom_summary":
        return f"host memory OOM{node}{at}: raylet reports {f.get('killed')} worker(s) killed by its memory monitor"
    if root.kind == "cuda_oom":
        return (
            f"GPU memory OOM on GPU {f.get('gpu', '?')}{node}{at} (CUDA out of memory: tried to allocate "
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
