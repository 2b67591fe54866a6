"""Diagnosis: everything oomlens concluded from one set of inputs; outputs only render it."""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from . import collector
from .clock import ClockNote, settle
from .correlate import Incident, component_of, correlate
from .events import Clue, Event, copy_of, number
from .kinds import Kinds, shipped
from .remedies import cause_words, detect_frameworks, detect_versions, evidence_text, remedies_for
from .sources import Input
from .text import at, render
from .timeline import Sample, samples

if TYPE_CHECKING:
    import pandas

CONTRACT_VERSION = 1  # the "oomlens" key of every JSON object oomlens prints (DESIGN.md)
CONFIDENT = 0.5  # below this the verdict names no memory kind: a wrong guess is worse than none


@dataclass(repr=False)
class Diagnosis:
    """The inputs read, the events found, the incidents they form, and the verdict."""

    inputs: list[Input]
    events: list[Event]
    incidents: list[Incident] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    framework: str | None = None  # the framework the logs come from, when they say which
    frameworks: tuple[str, ...] = ()  # those they may come from: one, or a base and its forks when only what all print shows
    versions: dict[str, str] = field(default_factory=dict)  # software -> version seen in its wording
    remedies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by incident id
    clues: list[Clue] = field(default_factory=list)  # context for the correlator, not in the contract
    clocks: list[ClockNote] = field(default_factory=list)  # the clocks corrected to put events on one
    kinds: Kinds = field(default_factory=shipped)  # what the events' kinds mean (data/kinds.toml and any added)

    def __repr__(self) -> str:
        """One line a notebook cell shows: the verdict and how much was read, not every event."""
        v = self.verdict
        said = v["summary"] if v else "no incident" if self.readable else "nothing read"
        counts = f"{len(self.incidents)} incident(s), {len(self.events):,} event(s) from {len(self.inputs):,} input(s)"
        return f"<Diagnosis: {_short(said)}; {counts}>"

    def _repr_html_(self) -> str:
        """What a notebook shows: the verdict block (outputs/verdict.html)."""
        from .outputs.verdict import html

        return html(self)

    @property
    def problems(self) -> list[str]:
        return [f"{i.path}: {p}" for i in self.inputs for p in i.problems]

    @property
    def reduction_notes(self) -> list[str]:
        """What the reduction of memory readings and of failures left out (reduce.py), if anything."""
        notes = []
        read, kept = sum(i.readings for i in self.inputs), sum(i.readings_kept for i in self.inputs)
        if read != kept:
            notes.append(f"memory readings: {read:,} read, {kept:,} kept (the first, last, lowest and highest of each stretch of each series)")
        read, kept = sum(i.failures for i in self.inputs), sum(i.failures_kept for i in self.inputs)
        if read != kept:
            notes.append(f"failures: {read:,} read, {kept:,} kept (a flood: the first and last of each stretch of each process and kind)")
        if notes:
            notes[-1] += "; --all-events keeps every one"
        return notes

    @property
    def readable(self) -> bool:
        """True when at least one input could be read at all."""
        return any(i.opener is not None and (i.bytes or not i.problems) for i in self.inputs)

    @property
    def recognised(self) -> bool:
        """True when anything read looked like a Ray or framework log: an event, a clue (a
        traceback, a task header, a printed setting, a stamp), a Ray log file's name, or a
        framework's marks. Nothing found in what nothing was recognised in is no all clear."""
        return bool(self.events or self.clues or self.frameworks or any(i.role != "other" for i in self.inputs if i.opener is not None))

    @functools.cached_property
    def timeline(self) -> list[Sample]:
        """Every memory reading of the events (timeline.samples), made once for every output."""
        return samples(self.events, self.kinds)

    # The Python API of DESIGN.md: each method hands the finished diagnosis to its output.

    def to_dict(self) -> dict[str, Any]:
        """The public JSON contract (DESIGN.md, version 1; extra keys are additive)."""
        from .outputs.json import contract

        return contract(self)

    def write_json(self, stream: BinaryIO) -> None:
        """to_dict() as indented JSON, a few events at a time (what `parse --format json` prints)."""
        from .outputs.json import write

        write(self, stream)

    def to_frame(self, form: str = "events") -> pandas.DataFrame:
        """ "events": one row per event, sizes in bytes, times as datetimes; "readings": one
        row per memory reading, a tidy long frame (metric, bytes, step) that one plot draws
        for every framework (outputs/frame.py). pandas is imported here, not with oomlens."""
        from .outputs.frame import frame, readings_frame

        if form not in ("events", "readings"):
            raise ValueError(f"to_frame: form {form!r} is none of 'events', 'readings'")
        return frame(self) if form == "events" else readings_frame(self)

    def to_markdown(self) -> str:
        """The summary to paste into a GitHub issue (what `parse --format markdown` prints)."""
        from .outputs.markdown import render

        return render(self)

    def to_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the self-contained HTML report (what `oomlens report` writes); plotly is
        imported here, not with oomlens. Returns the path written, for attaching it."""
        from .outputs.html import write

        return write(self, path)


SHORT = 160  # the characters of a sentence a repr keeps


def _short(text: str) -> str:
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def fingerprint(incident: Incident, framework: str | None) -> str:
    """Stable across runs and across pids, IPs and times: what failed, where, in what."""
    import hashlib  # here: a run with no incident needs none (OpenSSL's module loads slowly)

    word = re.match(r"[\w.]*", incident.phase or "")
    assert word is not None  # the pattern matches any text, if only its empty start
    phase = word.group(0).rsplit(".", 1)[-1]
    key = "|".join([incident.root.kind, incident.component or "", phase, framework or "", incident.memory or ""])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def named(events: list[Event], clues: list[Clue]) -> None:
    """Each node by one name: a collector names a record's host (`gpu-node-3`) where Ray's
    own lines name the node's IP; the lines that carry both (alias clues) tell which host is
    which IP, and the events and clues named by the host take the IP, in place."""
    votes: dict[str, Counter[str]] = {}
    for clue in clues:
        if clue.kind == "alias":
            votes.setdefault(clue.fields["host"], Counter())[clue.fields["node"]] += 1
    if not votes:
        return
    ip = {host: counts.most_common(1)[0][0] for host, counts in votes.items()}
    for event in events:
        event.node = ip.get(event.node or "", event.node)
    for clue in clues:
        clue.node = ip.get(clue.node or "", clue.node)


def diagnose(inputs: list[Input], events: list[Event], clues: list[Clue], kinds: Kinds | None = None, sessions: list[str | None] | None = None) -> Diagnosis:
    """Correlate the events, choose remedies and say the verdict.

    `sessions` names the Ray session of each event (in the order of `events`): each
    session is correlated on its own, so that no incident spans two runs; events and
    incidents are then numbered session after session. None: one run.

    The events given are left as they were: the clock and the correlator work on copies,
    so a caller (`watch`, a bot) may diagnose the same events again as more arrive."""
    kinds = kinds if kinds is not None else shipped()
    unknown = sorted({e.kind for e in events} - set(kinds))
    if unknown:  # a grammar made a kind no entry says the meaning of
        raise ValueError(f"event kind(s) {', '.join(unknown)} have no entry in the kinds table (data/kinds.toml or kinds given)")
    with collector.paused():
        events = [copy_of(e) for e in events]
        named(events, clues)
        clocks = settle(events, clues, inputs)
        ordered, incidents = _correlate_each(events, clues, kinds, sessions)
        number(ordered)
        text = evidence_text(events, clues, kinds.memory_lines)
        frameworks = detect_frameworks(text)
        framework = frameworks[0] if len(frameworks) == 1 else None
        diagnosis = Diagnosis(
            inputs,
            ordered,
            incidents,
            framework=framework,
            frameworks=frameworks,
            versions=detect_versions(text, events),
            clues=clues,
            clocks=clocks,
            kinds=kinds,
        )
        for incident in incidents:
            incident.fingerprint = fingerprint(incident, framework)
            diagnosis.remedies[incident.id or ""] = remedies_for(incident, frameworks, clues, text, kinds[incident.root.kind].own_remedies)
        diagnosis.verdict = verdict(incidents, clues, diagnosis)
    return diagnosis


def _correlate_each(events: list[Event], clues: list[Clue], kinds: Kinds, sessions: list[str | None] | None) -> tuple[list[Event], list[Incident]]:
    """correlate() run on each session's events apart (with the clues of their files), the
    results one after the other, incidents numbered i1, i2, ... across them."""
    groups: dict[str | None, list[Event]] = {}
    for event, session in zip(events, sessions or [None] * len(events), strict=True):
        groups.setdefault(session, []).append(event)
    by_path: dict[str, list[Clue]] = {}
    for clue in clues if len(groups) > 1 else ():
        by_path.setdefault(clue.source.path, []).append(clue)
    ordered: list[Event] = []
    incidents: list[Incident] = []
    for session, members in groups.items():
        context = clues
        if by_path:  # one session among several: the clues of its events' files
            paths = dict.fromkeys(source.path for event in members for source in event.sources)
            context = [clue for path in paths for clue in by_path.get(path, ())]
        in_order, found = correlate(members, context, kinds)
        ordered += in_order
        for incident in found:
            incident.session = session
        incidents += found
    for number_, incident in enumerate(incidents, 1):
        incident.id = f"i{number_}"
    return ordered, incidents


def verdict(incidents: list[Incident], clues: list[Clue], diagnosis: Diagnosis) -> dict[str, Any] | None:
    """The answer for the user: of the newest Ray session with an incident (the run that just
    died, when /tmp/ray holds many), the first memory incident, else its first incident whose
    root is no weak evidence, else its first;
    else an out-of-memory error named in a traceback whose kind the logs do not show."""
    newest = incidents[-1].session if incidents else None
    ran = [i for i in incidents if i.session == newest]  # sessions follow one another in time order
    chosen = next((i for i in ran if i.root.kind in diagnosis.kinds.memory_failures), None)
    # a root that is weak evidence (a traceback cut before its exception) only when nothing else failed
    chosen = chosen or next((i for i in ran if not diagnosis.kinds[i.root.kind].is_weak(i.root.fields)), None)
    chosen = chosen or (ran[0] if ran else None)
    if chosen is None:
        return _named_oom(clues)
    memory = chosen.memory if chosen.confidence >= CONFIDENT else None
    return {
        "component": chosen.component,
        "memory": memory,
        "device": chosen.root.device if memory == "gpu" else None,
        "root_kind": chosen.root.kind,
        "confidence": chosen.confidence,
        "incident": chosen.id,
        "framework": diagnosis.framework,
        "frameworks": list(diagnosis.frameworks),
        "session": chosen.session,
        "versions": diagnosis.versions,
        "summary": summary(chosen, diagnosis.kinds),
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


def summary(incident: Incident, kinds: Kinds) -> str:
    """One sentence a person reads first: the root's kind's `summary` (data/kinds.toml),
    told when and where it happened as far as the logs say."""
    root = incident.root
    told_at = at(root.time, root.time_latest, root.time_inferred)  # its line may print no time: what is known, no more
    told = root.values()
    told.update(at=told_at, on_node=f" on node {root.node}" if root.node else "")
    told.update(component=incident.component, followed=followed(incident, kinds))
    if (cause := root.fields.get("cause")) is not None:
        told["cause_words"] = cause_words(cause)
    return render(kinds[root.kind].summary, told)


def followed(incident: Incident, kinds: Kinds) -> str:
    """The failures that followed the root, counted by kind: "; 7 watchdog timeouts followed"."""
    counts: dict[str, int] = {}
    for event in incident.cascade:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    if not counts:
        return ""
    told = [f"{n} {kinds.label(name)}{'s' if n > 1 else ''}" for name, n in counts.items()]
    return f"; {', '.join(told)} followed"
