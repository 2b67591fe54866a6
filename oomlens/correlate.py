"""Correlate: put all events on one clock, name components, group root failures with their cascade.

The root of an incident is the first memory failure (a Ray kill, a CUDA OOM, a kernel OOM,
a vLLM memory error); the worker deaths, unavailable actors and NCCL/keepalive timeouts
that follow it are its cascade. Failures with no memory failure before them stand as
roots of their own, with the low confidence they deserve. For a host OOM the culprit is
the biggest memory user Ray listed, not the victim it picked; both go into the evidence.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .data import load
from .events import CONTEXT_AFTER, CONTEXT_BEFORE, Clue, Event, fold
from .kinds import Kind, Kinds
from .text import gib, render, when
from .timeline import Trends, epoch

SKEW_S = 120  # node clocks may disagree by this much


@dataclass
class Incident:
    """A root failure, the failures it caused, and what the logs say about it."""

    root: Event
    cascade: list[Event] = field(default_factory=list)
    component: str | None = None
    memory: str | None = None
    confidence: float = 0.5
    evidence: list[str] = field(default_factory=list)
    phase: str | None = None  # the method the failure surfaced in
    culprit: dict[str, Any] | None = None  # the biggest memory user, for a host OOM
    trend: str | None = None  # "growth" or "jump" of memory before the failure
    id: str | None = None
    fingerprint: str | None = None  # stable across runs: what failed, where, in what (diagnosis.fingerprint)
    session: str | None = None  # the Ray session (session_* folder) it happened in, when the logs lie in one


@functools.cache
def component_rules(fallback: bool = False) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The rules of data/components.toml in order; the fallback ones (library frames) apart."""
    rules = load("components.toml")["rule"]
    return tuple((re.compile(r["pattern"]), r["component"]) for r in rules if r.get("fallback", False) == fallback)


@functools.lru_cache(maxsize=4096)
def component_of(subject: str | None, fallback: bool = False) -> str | None:
    """The component a process or code location belongs to, or None when it does not say."""
    if not subject:
        return None
    for pattern, component in component_rules(fallback):
        if pattern.search(subject):
            return component
    return None


# -- one clock -------------------------------------------------------------------------------


def seconds(event: Event | Clue) -> float | None:
    return epoch(event.time) if event.time else None


def latest_seconds(event: Event) -> float | None:
    """When an event happened at the latest: its time, or where no stamp comes before it in
    its file (a traceback at the head of a console), the stamp after it. What follows it
    within a window of that bound may have followed it."""
    return seconds(event) if event.time else epoch(event.time_latest) if event.time_latest else None


def one_clock(events: list[Event]) -> list[Event]:
    """Events in time order (clock.settle has put them on one clock), file order for ties.

    An event with no time at all keeps its place after the last timed event of its file;
    one with only a latest time (no stamp before it in its file) sorts just before that."""
    last_in_file: dict[str, float] = {}
    times = []
    for event in events:
        if event.time:
            t = last_in_file[event.source.path] = epoch(event.time)
        elif event.time_latest:
            t = epoch(event.time_latest)
        else:
            t = last_in_file.get(event.source.path, float("-inf"))
        times.append(t)
    order = sorted(range(len(events)), key=times.__getitem__)  # stable: file order for ties
    return [events[i] for i in order]


# -- context: where in the code an event surfaced ----------------------------------------


class Context:
    """Traceback clues by file, in line order, so that the clues around an event are found
    by bisection: runs have tens of thousands of events and thousands of tracebacks."""

    def __init__(self, clues: list[Clue]) -> None:
        self.titles: dict[int, set[str]] = {}  # pid -> the names the logs give that process (names_seen)
        self.names: set[str] = set()  # every worker name the logs spell in full
        self.by_path: dict[str, list[Clue]] = {}
        self.printed: dict[str | int, set[str]] = {}  # a path, and a pid: the settings printed there, or by it
        for clue in clues:
            if clue.kind == "context":
                self.by_path.setdefault(clue.source.path, []).append(clue)
            elif clue.kind == "setting":
                for where in (clue.source.path, clue.pid):
                    self.printed.setdefault(where if where is not None else "", set()).update(clue.fields.get("settings", ()))
        self.ends: dict[str, list[int]] = {}
        for path, found in self.by_path.items():
            found.sort(key=lambda c: c.source.line)
            self.ends[path] = [c.source.end_line for c in found]

    def printed_any(self, event: Event, settings: tuple[str, ...]) -> bool:
        """Did a file the event was read in, or its process (a Ray worker's .out beside its
        .err), print one of these settings?"""
        places = [s.path for s in event.sources] + ([event.pid] if event.pid is not None else [])
        return any(self.printed.get(place, set()).intersection(settings) for place in places)

    def around(self, event: Event) -> list[Clue]:
        """Clues near any of the places the event was reported, nearest first."""
        near = []
        for source in event.sources:
            found = self.by_path.get(source.path)
            if not found:
                continue
            lo, hi = source.line - CONTEXT_BEFORE, source.end_line + CONTEXT_AFTER
            # blocks of one file never overlap, so their ends rise with their starts
            for i in range(bisect.bisect_left(self.ends[source.path], lo), len(found)):  # no copy of the list's tail
                clue = found[i]
                if clue.source.line > hi:
                    break
                distance = min(abs(clue.source.end_line - source.line), abs(clue.source.line - source.end_line))
                near.append((distance, clue))
        if not near:  # most events: no traceback in their files
            return []
        # of two as near, the one read first: above the event, or below it in a paste that
        # stands newest first (a traceback ends in its exception; the next one's header follows)
        near.sort(key=lambda item: (item[0], -item[1].source.line if item[1].fields.get("newest_first") else item[1].source.line))
        return [clue for _, clue in near]


def phase_of(clues: list[Clue]) -> tuple[str | None, str | None]:
    """(component, where) from the remote-task headers and frames near an event.

    A remote-task header names the method that failed; otherwise the innermost frame whose
    code or function names a phase (`actor_rollout_wg.generate_sequences(...)`, `wake_up`),
    and only then the innermost library frame that every step of one role runs through."""
    for clue in clues:
        task = clue.fields.get("task")
        if task:
            name = f"{task['actor']}.{task['method']}" if task.get("actor") else task["method"]
            component = component_of(name)
            if component and component != "driver":  # the trainer's own task says no phase
                return component, name
    for fallback in (False, True):  # a library frame (torch.optim) only when no frame names a phase
        for clue in clues:
            for frame in reversed(clue.fields.get("frames", [])):
                subject = f"{frame['path']}:{frame['func']} {frame.get('code') or ''}"
                component = component_of(subject, fallback)
                if component:
                    return component, f"{frame['func']} ({frame.get('code') or frame['path']})"
    return None, None


def identity_of(event: Event) -> str | None:
    if event.actor and event.method:
        return f"{event.actor}.{event.method}"
    return event.method or event.actor


def attribute(events: list[Event], context: Context, kinds: Kinds) -> bool:
    """Fill each event's component and memory from its own process and nearby tracebacks.
    True when a remote-task header gave a report the process that raised it (the report named
    none, or the driver that relayed it): its copies in the worker's own lines can only be
    folded with it now."""
    told = False
    for event in events:
        kind = kinds[event.kind]
        event.memory = event.memory or kind.memory
        if kind.host_settings and event.memory == "gpu" and event.device is None and context.printed_any(event, kind.host_settings):
            event.memory = "host"  # the file printed a setting of the host's memory: vLLM's CPU backend
            event.fields.update(kind.host_fields)
        clues_near = context.around(event)
        for clue in clues_near:
            task = clue.fields.get("task")
            if task and _names_method_of(task, event, kind.task_header):
                if kind.task_header == "raiser":  # the header names the process that raised it
                    event.actor, event.method = task.get("actor") or event.actor, task.get("method")
                    told = told or task.get("pid") not in (None, event.pid)
                    event.pid = task.get("pid") or event.pid
                elif event.actor in (None, task.get("actor")):
                    event.actor = event.actor or task.get("actor")
                    if kind.task_header != "own_stack":
                        event.method = task.get("method")
                break
        if kind.task_header == "own_stack" and event.method is None:
            event.method = own_frame(clues_near, event)
        component = component_of(identity_of(event))
        if component in (None, "driver") and clues_near and kind.phase:
            # the trainer's loop (`TaskRunner.run`) only says the phase it called is below it
            component = phase_of(clues_near)[0] or component
        event.component = component
    return told


def own_frame(clues: list[Clue], event: Event) -> str | None:
    """The function of the innermost frame of the event's own traceback (the one its lines
    end or stand in) that says where the process was: not the interpreter's, Ray's, torch's
    or a framework's RPC layer (data/components.toml, `[stack]`)."""
    for clue in clues:
        if any(s.path == clue.source.path and clue.source.line <= s.line <= clue.source.end_line + 1 for s in event.sources):
            internal = _internal_frames()
            return next((f["func"] for f in reversed(clue.fields.get("frames", [])) if not internal.search(f["path"])), None)
    return None


@functools.cache
def _internal_frames() -> re.Pattern[str]:
    return re.compile(load("components.toml")["stack"]["internal"])


def _names_method_of(task: dict, event: Event, header: str) -> bool:
    """Does a remote-task header near an event name the method the event happened in? Only
    when the event names none; a kill report only takes its own victim's header, and a
    death's header (the caller that saw it) never changes the dead actor's class."""
    if event.method is not None:
        return False
    if header == "not_caller" and task.get("error") in CALLER_ERRORS:
        return False  # the header of a RayTaskError(ActorDiedError) is the caller's task, not the dead actor's
    if header == "raiser" and event.actor is not None and event.actor == task.get("actor") and task.get("pid") not in (None, event.pid):
        return False  # another worker of the header's class printed this itself: the header raised its own error
    return header != "own_pid" or event.pid is None or task.get("pid") in (None, event.pid)


CALLER_ERRORS = ("ActorDiedError", "RayActorError")


# -- incidents -------------------------------------------------------------------------------


def group(events: list[Event], kinds: Kinds) -> list[Incident]:
    """Roots and cascades. Memory failures open incidents first, and every failure that
    follows one (or follows a failure already in its cascade: a kill, then a rank hanging
    in a collective, then its watchdog abort, then its death) joins it. The failures left
    open incidents of their own, deaths before the timeouts they cause."""
    failures = [e for e in events if e.kind in kinds.failures]  # a few among tens of thousands of samples
    incidents: list[Incident] = []
    anchors = _Anchors()
    for event in failures:
        if event.kind in kinds.memory_failures:
            _join_or_open(incidents, 0, event, kinds, anchors)
    rest = []
    for event in failures:
        if event.kind not in kinds.memory_failures:
            home = _home(incidents, 0, event, kinds, anchors)
            if home is None:
                rest.append(event)
            else:
                _join(home, event, anchors)
    opened = len(incidents)
    # An exception tells the cause of the death it ends in; NCCL ranks time out waiting for a
    # dead peer, sometimes on a node whose clock runs ahead of the dead worker's: the death
    # comes first. An end on purpose (ray.kill, Ctrl-C) only joins what it follows.
    # A traceback cut before its exception is weak: it joins a failure that states its kind.
    for event in sorted(rest, key=lambda e: (on_purpose(e, kinds), kinds[e.kind].is_weak(e.fields), not kinds[e.kind].opens_first, kinds.order(e.kind))):
        if on_purpose(event, kinds):
            if (home := _home(incidents, opened, event, kinds, anchors)) is not None:
                _join(home, event, anchors)
        else:
            _join_or_open(incidents, opened, event, kinds, anchors)
    for incident in incidents:
        incident.cascade.sort(key=lambda e: (seconds(e) is None, seconds(e) or 0))
        if kinds[incident.root.kind].burst:
            _lead_with_the_one_the_caller_saw(incident)
        if kinds[incident.root.kind].lead_named:
            _lead_with_the_named(incident)
        if kinds[incident.root.kind].opens_first:
            _lead_with_what_its_file_told_first(incident, kinds)
        if (counted := kinds[incident.root.kind].counts) is not None:
            _lead_with_what_it_counts(incident, counted)
    incidents.sort(key=lambda i: (seconds(i.root) is None, seconds(i.root) or 0))
    return incidents


class _Anchors:
    """The timed failures of the incidents so far (roots and cascades) in time order, and
    the roots printed with their own time: an event's incident is looked for among those
    within its window, not among every failure of every incident (a failure that repeats
    all day makes thousands)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.items: list[tuple[int, int, Incident]] = []  # (incident's number, anchor's number in it, incident)
        self.root_times: list[float] = []
        self.roots: list[tuple[int, Incident]] = []
        self.number: dict[int, int] = {}  # id of each incident -> its place in the list of incidents

    def opened(self, incident: Incident, place: int) -> None:
        self.number[id(incident)] = place
        self.joined(incident, incident.root, 0)
        if (t := seconds(incident.root)) is not None and not incident.root.time_inferred:
            at = bisect.bisect_right(self.root_times, t)
            self.root_times.insert(at, t)
            self.roots.insert(at, (place, incident))

    def joined(self, incident: Incident, event: Event, place: int) -> None:
        if (t := latest_seconds(event)) is not None:
            at = bisect.bisect_right(self.times, t)
            self.times.insert(at, t)
            self.items.insert(at, (self.number[id(incident)], place, incident))

    def nearest(self, t: float, lo: float, hi: float) -> Iterator[tuple[float, int, int, Incident]]:
        """The anchors within [lo, hi], nearest to `t` first: a caller that wants the nearest
        one that qualifies stops at the first farther than its best, not at the window's
        end (a failure that repeats every few seconds puts hundreds in a window)."""
        times = self.times
        right = bisect.bisect_left(times, t)
        left = right - 1
        end = bisect.bisect_right(times, hi)
        start = bisect.bisect_left(times, lo)
        while left >= start or right < end:
            if right >= end or (left >= start and t - times[left] <= times[right] - t):
                yield (times[left], *self.items[left])
                left -= 1
            else:
                yield (times[right], *self.items[right])
                right += 1

    def roots_between(self, lo: float, hi: float) -> list[tuple[int, Incident]]:
        return self.roots[bisect.bisect_left(self.root_times, lo) : bisect.bisect_right(self.root_times, hi)]


def _join(incident: Incident, event: Event, anchors: _Anchors) -> None:
    incident.cascade.append(event)
    anchors.joined(incident, event, len(incident.cascade))


def _join_or_open(incidents: list[Incident], first: int, event: Event, kinds: Kinds, anchors: _Anchors) -> None:
    home = _home(incidents, first, event, kinds, anchors)
    if home is None:
        incidents.append(Incident(root=event))
        anchors.opened(incidents[-1], len(incidents) - 1)
    else:
        _join(home, event, anchors)


def _lead_with_the_one_the_caller_saw(incident: Incident) -> None:
    """When a dead peer takes its whole job down, Ray reports many deaths within seconds.
    The one the caller saw (reported most often, with its class) leads; its peers follow."""
    t = seconds(incident.root)
    peers = [e for e in incident.cascade if e.kind == incident.root.kind and (t is None or (s := seconds(e)) is None or abs(s - t) <= SKEW_S)]
    best = max([incident.root, *peers], key=lambda e: (len(e.sources), e.actor is not None))
    if best is not incident.root:
        incident.cascade.remove(best)
        incident.cascade.append(incident.root)
        incident.root = best


def on_purpose(event: Event, kinds: Kinds) -> bool:
    """Did the event end a process on purpose (its kind's `intended`: ray.kill, Ctrl-C)?"""
    return kinds[event.kind].on_purpose(event.fields)


def _lead_with_the_named(incident: Incident) -> None:
    """A caller's RayTaskError wraps the error its raiser printed: of the reports of one
    burst, the first of a process whose component is named (not the driver) leads."""
    t = seconds(incident.root)
    peers = [e for e in incident.cascade if e.kind == incident.root.kind and (t is None or (s := seconds(e)) is None or abs(s - t) <= SKEW_S)]
    named = next((e for e in [incident.root, *peers] if e.component not in (None, "driver")), None)
    if named is not None and named is not incident.root:
        incident.cascade.remove(named)
        incident.cascade.insert(0, incident.root)
        incident.root = named


def _lead_with_what_its_file_told_first(incident: Incident, kinds: Kinds) -> None:
    """A kind that opens incidents first (an exception) took in the failures within the skew
    of clocks around it; one its own file printed above it came first on that file's one
    clock, and cannot be its consequence: the first such leads."""
    root = incident.root
    before = [
        e
        for e in incident.cascade
        if e.source.path == root.source.path and e.source.line < root.source.line and not on_purpose(e, kinds) and not kinds[e.kind].is_weak(e.fields)
    ]
    if before:
        first = min(before, key=lambda e: e.source.line)
        incident.cascade.remove(first)
        incident.cascade.insert(0, root)
        incident.root = first


def _lead_with_what_it_counts(incident: Incident, counted: str) -> None:
    """raylet's summary counts the kills of the last period: a kill report in its incident
    (of its node, where both name one) is the failure it counted, though the driver may
    print it after the summary. The first such report leads; the count follows it."""
    node = incident.root.node
    failure = next((e for e in incident.cascade if e.kind == counted and (node is None or e.node is None or e.node == node)), None)
    if failure is not None:
        incident.cascade.remove(failure)
        incident.cascade.insert(0, incident.root)
        incident.root = failure


def _home(incidents: list[Incident], first: int, event: Event, kinds: Kinds, anchors: _Anchors) -> Incident | None:
    """The incident (of incidents[first:]) this event follows: after its root or after a
    failure of its cascade, the nearest in time. An inferred time is an interval (the stamps
    before and after the line), so such an event joins the first incident printed with its
    own time that may have come before it: one whose root is not after the interval's end."""
    t = seconds(event)
    latest = epoch(event.time_latest) if (event.time_inferred or event.time is None) and event.time_latest else float("inf")
    if t is None:
        return _home_untimed(incidents[first:], event, latest)
    if event.time_inferred:
        roots = [(place, incident) for place, incident in anchors.roots_between(t - SKEW_S, latest + SKEW_S) if place >= first]
        if roots:
            return roots[0][1]
    kind = kinds[event.kind]
    window = kind.cascade_s
    waited = event.fields.get(kind.waited) if kind.waited is not None else None
    best, best_key = None, None
    for anchor_t, place, anchor, incident in anchors.nearest(t, t - window, t + SKEW_S):
        if best_key is not None and abs(t - anchor_t) > best_key[0]:
            break  # the rest are farther: none can beat the best
        if place < first:
            continue
        root = incident.root
        root_t = latest_seconds(root)
        if root_t is None or (event.time_inferred and not root.time_inferred):
            continue  # an untimed root has no window; an inferred event met timed roots above
        if waited and t - waited / 1000 < root_t - window:
            continue  # a collective that started long before the root cannot have been caused by it
        key = (abs(t - anchor_t), place, anchor)
        if best_key is None or key < best_key:
            best, best_key = incident, key
    return best


def _home_untimed(incidents: list[Incident], event: Event, latest: float) -> Incident | None:
    """For an event with no stamp before it: with one after it, the root nearest before that;
    with none at all, the last untimed root reported in its file (a root folded from several
    files, a worker's exception and the driver's copy of it, is reported in each)."""
    best, best_gap = None, float("inf")
    for incident in incidents:
        root_t = seconds(incident.root)
        if root_t is not None and latest < float("inf"):
            if root_t <= latest + SKEW_S and (best is None or latest - root_t < best_gap):
                best, best_gap = incident, abs(latest - root_t)
        elif root_t is None and any(s.path == event.source.path for s in incident.root.sources):
            best = incident
    return best


# -- what each incident means -----------------------------------------------------------------


def explain(incident: Incident, context: Context, kinds: Kinds) -> None:
    """Component, memory kind, confidence and evidence of one incident: the root's kind
    names how it is explained (`explain` in data/kinds.toml)."""
    root = incident.root
    kind = kinds[root.kind]
    incident.memory = root.memory or kind.memory  # vLLM's CPU backend: its KV cache is host memory
    incident.evidence.append(f"root: {root.kind} {_at(root)} ({_where(root)})")
    if kind.evidence and (told := render(kind.evidence, root.values())):
        incident.evidence.append(told)
    if kind.explain not in EXPLAINERS:
        raise ValueError(f"kind {root.kind!r}: explain {kind.explain!r} is none of {', '.join(EXPLAINERS)}")
    EXPLAINERS[kind.explain](incident, context, kind)
    for event in incident.cascade:
        incident.evidence.append(f"then: {event.kind} {_at(event)} ({_where(event)})")


def _at(event: Event) -> str:
    """When an event happened, in words: at its time, between its neighbours' stamps, or
    not printed at all (never a `?`)."""
    at = when(event.time, event.time_latest, event.time_inferred)
    return "at " + at if event.time and not event.time_inferred else at or "at a time not printed"


def _where(event: Event) -> str:
    who = identity_of(event)
    parts = [f"{event.source.path}:{event.source.line}"]
    if event.node:
        parts.append(f"node {event.node}")
    if event.pid is not None:
        parts.append(f"pid {event.pid}")
    if who:
        parts.append(who)
    return ", ".join(parts)


def _explain_ray_kill(incident: Incident, context: Context, kind: Kind) -> None:
    root = incident.root
    f = root.fields
    culprit = _culprit(f)
    killed = [w for w in f.get("killed") or [] if isinstance(w, dict)]
    victim = killed[0] if killed else None
    phase_component, where = phase_of(context.around(root))
    incident.phase = root.method or where
    if killed:
        told = "; ".join(f"pid {w.get('pid')} {w.get('name') or ''} ({gib(w.get('bytes'))})".replace("  ", " ") for w in killed)
        picked = "the worker it picked" if len(killed) == 1 else f"the {len(killed)} workers it picked"
        incident.evidence.append(f"Ray killed {told}: {picked}, not necessarily the one that used the memory")
    if culprit is not None:
        incident.culprit = culprit
        incident.component = component_of(culprit["command"][5:])
        share = culprit["bytes"] / f["node_used_bytes"] if f.get("node_used_bytes") else None
        incident.evidence.append(
            f"top memory user: pid {culprit['pid']} {culprit['command']} {gib(culprit['bytes'])}" + (f" ({share:.0%} of node memory in use)" if share else "")
        )
        incident.confidence = 0.9 if incident.component else 0.6
    elif victim and victim.get("bytes") and f.get("node_used_bytes") and victim["bytes"] >= HELD_SHARE * f["node_used_bytes"]:
        incident.component = root.component
        incident.confidence = 0.75
    elif phase_component:
        incident.component = phase_component
        incident.evidence.append(f"surfaced in {where}")
        incident.confidence = 0.7
    else:
        incident.confidence = 0.6
    if f.get("node_used_bytes"):
        incident.evidence.append(
            f"node memory {gib(f['node_used_bytes'])} of {gib(f.get('node_total_bytes'))}"
            + (f", threshold {f['threshold']}" if f.get("threshold") is not None else "")
        )


HELD_SHARE = 0.3  # of the node's memory in use: what holds less of it did not run the node out


def _culprit(f: dict[str, Any]) -> dict[str, Any] | None:
    """The Top-10 row that names what ran the node out of memory: the biggest user of the
    whole table, when it is a Ray worker and the table is whole from its top (a paste cut
    above its rows lost the biggest), and when the rows of its component (of its command,
    where it names none) hold at least HELD_SHARE of the memory the node used, where that
    is told. A dashboard agent or an IDE server on top, or a table that holds a few
    percent of the memory in use (the rest in the object store or the page cache), names
    no component."""
    rows = [row for row in f.get("top") or [] if row.get("bytes") is not None]
    biggest = max(rows, key=lambda row: row["bytes"], default=None)
    if biggest is None or f.get("top_cut") or not biggest.get("command", "").startswith("ray::"):
        return None
    if f.get("node_used_bytes"):
        ours = component_of(biggest["command"][5:])
        held = sum(
            row["bytes"]
            for row in rows
            if row.get("command", "").startswith("ray::") and (component_of(row["command"][5:]) == ours if ours else row["command"] == biggest["command"])
        )
        if held < HELD_SHARE * f["node_used_bytes"]:
            return None
    return biggest


def _explain_summary(incident: Incident, context: Context, kind: Kind) -> None:
    f = incident.root.fields
    incident.evidence.append(
        f"raylet counted {f.get('killed')} worker(s) killed by its memory monitor on node {incident.root.node or f.get('node_id') or '?'}; the kill report itself is not in these logs"
    )
    incident.confidence = 0.6


def _explain_gpu(incident: Incident, context: Context, kind: Kind) -> None:
    """A GPU failure (or a host allocation that failed in the process: `in_process`) surfaced
    in the process that allocated: its own actor, else the phase its traceback names, else
    the kind's usual component (vLLM's start-up: rollout)."""
    root = incident.root
    component, where = phase_of(context.around(root))
    incident.component = root.component or component or kind.component
    incident.phase = root.method or where
    incident.confidence = 0.85 if incident.component else 0.7
    if where:
        incident.evidence.append(f"surfaced in {where}")


def _explain_kernel(incident: Incident, context: Context, kind: Kind) -> None:
    """The kernel names only a 15-character comm; Ray's report of the same pid's death, the
    names the logs spell in full, or the caller's traceback say which actor and method it
    was. Its task table says who held the memory: Ray sets oom_score_adj 1000 on its workers,
    so the OOM killer picks a worker first, not the biggest process."""
    f = incident.root.fields
    incident.evidence.append(f"the Linux OOM killer killed pid {f.get('pid')} ({f.get('process')}), anon-rss {gib(f.get('anon_rss_bytes'))}")
    incident.component = incident.root.component
    for death in incident.cascade:
        if death.kind == "ray_worker_died" and death.pid == f.get("pid") and death.component:
            incident.component = incident.component or death.component
            incident.phase = death.method or incident.phase
            incident.evidence.append(f"Ray reported the death of pid {death.pid} ({identity_of(death) or 'worker'}): {death.component}")
            break
    incident.component = incident.component or process_component(f.get("process"), f.get("pid"), context)
    incident.confidence = 0.85
    holder = task_holder(f)
    if holder is not None:
        rows = f["tasks"]
        held = process_component(holder["name"], holder["pid"], context)
        if held is None and _is_driver(holder["name"], rows):
            held = "driver"
        incident.culprit = {"pid": holder["pid"], "bytes": holder["bytes"], "command": holder["name"]}
        incident.evidence.append(
            f"the kernel's task table: pid {holder['pid']} ({holder['name']}) held the most memory, {gib(holder['bytes'])} "
            f"({holder['rss_pages'] / f['tasks_rss_pages']:.0%} of the rss of the {f.get('tasks_listed')} tasks listed), not the victim"
            + (f" (oom_score_adj {f['oom_score_adj']})" if f.get("oom_score_adj") is not None else "")
        )
        incident.component = held
        incident.confidence = 0.8 if held else 0.6


# -- processes as the kernel names them --------------------------------------------------------

TASK_COMM_LEN = 16  # the kernel keeps a task's name in 16 bytes, its NUL among them: a longer one is cut to 15
PAGE_SIZES = (4096, 16384, 65536)  # x86-64's, and an arm64 kernel's 16 KiB or 64 KiB pages


def names_seen(events: list[Event], context: Context) -> None:
    """The worker names the logs spell in full, and by pid: a Ray prefix `(Class pid=N)`, a
    remote-task header, a kill report's Top-10 row. The kernel's cut names are read by them."""

    def learn(name: str | None, pid: int | None) -> None:
        if name:
            context.names.add(name)
            if pid is not None:
                context.titles.setdefault(pid, set()).add(name)

    for event in events:
        learn(identity_of(event), event.pid)
        for row in event.fields.get("top") or []:
            if isinstance(row, dict) and str(row.get("command", "")).startswith("ray::"):
                learn(row["command"][5:], row.get("pid"))
    for clues in context.by_path.values():
        for clue in clues:
            learn(clue.actor, clue.pid)
            if task := clue.fields.get("task"):
                learn(f"{task['actor']}.{task['method']}" if task.get("actor") else task.get("method"), task.get("pid"))


def process_component(name: str | None, pid: int | None, context: Context) -> str | None:
    """The component of a process the kernel names by its comm: a Ray worker's title
    (`ray::Class.method`, `ray::function`) cut to 15 characters. What the logs call the same
    pid first; else the component of every full name the cut begins, the names the logs spell
    and then those the frameworks give (data/components.toml, [cut]), when they all name one."""
    if not name or not name.startswith("ray::"):
        return None
    for full in sorted(context.titles.get(pid, ())) if pid is not None else ():
        if full.startswith(name[5:].split(".")[0]) and (component := component_of(full)):
            return component
    title = name[5:]
    if len(name) < TASK_COMM_LEN - 1:
        return component_of(title)
    for names in (context.names, _known_names()):
        found = {component_of(full) for full in names if full.startswith(title)}
        if found:
            return found.pop() if len(found) == 1 else None  # a cut two names share names neither
    return component_of(title)


@functools.cache
def _known_names() -> frozenset[str]:
    return frozenset(load("components.toml")["cut"]["names"])


@functools.cache
def _driver_comm() -> re.Pattern[str]:
    return re.compile(load("components.toml")["cut"]["driver"])


def _is_driver(name: str, rows: list[dict]) -> bool:
    """A python process among Ray workers in one task table: the driver (workers are titled
    `ray::...`, the raylet and the GCS by their own names)."""
    return bool(_driver_comm().match(name)) and any(r["name"].startswith("ray::") for r in rows)


def task_holder(f: dict[str, Any]) -> dict[str, Any] | None:
    """The task that held the memory when the kernel killed another one: the biggest by rss of
    its task table, when that is not the victim, holds more than the victim and at least
    HELD_SHARE of the rss of the tasks listed. Its bytes are its pages times the page size,
    which the victim's own row and its kill line tell."""
    rows = [r for r in f.get("tasks") or [] if isinstance(r, dict)]
    if not rows or not f.get("tasks_rss_pages") or f.get("pid") is None:
        return None
    biggest = max(rows, key=lambda r: r["rss_pages"])
    victim = next((r for r in rows if r["pid"] == f["pid"]), None)
    if biggest["pid"] == f["pid"] or biggest["rss_pages"] < HELD_SHARE * f["tasks_rss_pages"]:
        return None
    if victim is not None and victim["rss_pages"] >= biggest["rss_pages"]:
        return None
    page = PAGE_SIZES[0]
    killed = sum(f.get(k) or 0 for k in ("anon_rss_bytes", "file_rss_bytes", "shmem_rss_bytes"))
    if victim is not None and victim["rss_pages"] and killed:
        page = min(PAGE_SIZES, key=lambda size: abs(killed / victim["rss_pages"] - size))
    return {**biggest, "bytes": biggest["rss_pages"] * page}


def _explain_supervisor(incident: Incident, context: Context, kind: Kind) -> None:
    """A supervisor names a container, a step or a cgroup, seldom the process: the component
    is the one its own report names, else that of the first worker whose death followed it
    (Ray's report of the dead worker names its actor and method)."""
    root = incident.root
    incident.component = root.component
    for death in incident.cascade:
        if death.kind == "ray_worker_died" and death.component and incident.component is None:
            incident.component = death.component
            incident.phase = death.method or incident.phase
            incident.evidence.append(f"Ray reported the death of pid {death.pid} ({identity_of(death) or 'worker'}): {death.component}")
    incident.confidence = 0.8 if incident.component else 0.7


def _explain_failure(incident: Incident, context: Context, kind: Kind) -> None:
    """A failure with no memory failure before it: the process it happened in, little confidence."""
    root = incident.root
    incident.component = root.component or kind.component
    incident.phase = root.method
    incident.confidence = 0.4


def _explain_death(incident: Incident, context: Context, kind: Kind) -> None:
    """A worker that vanished without a word from Ray's memory monitor may have met the kernel's."""
    _explain_failure(incident, context, kind)
    root = incident.root
    detail = str(root.fields.get("exit_detail") or root.fields.get("reason") or "")
    if "connection error code 2" in detail:
        incident.memory = "host"
        incident.confidence = 0.35
        incident.evidence.append(
            "the worker vanished (connection error code 2, End of file) with no Ray OOM kill: possibly the kernel OOM killer; check dmesg on that node"
        )


def _explain_timeout(incident: Incident, context: Context, kind: Kind) -> None:
    """A rank that timed out waited for another: it names neither the component nor the cause."""
    incident.component = None
    incident.phase = incident.root.method
    incident.confidence = 0.3
    incident.evidence.append("a collective timed out; the rank that stopped responding is the one to look at, not this one")


def _explain_process_error(incident: Incident, context: Context, kind: Kind) -> None:
    """No memory failure: an exception or a signal ended a process. Its component is the
    process's own (a Ray prefix, a remote task's header), else the phase its traceback names."""
    root = incident.root
    component, where = phase_of(context.around(root))
    incident.component = root.component if root.component not in (None, "driver") else component or root.component
    incident.phase = root.method or where
    incident.confidence = 0.7 if incident.component and (root.fields.get("exception") or root.fields.get("signal")) else 0.5 if incident.component else 0.4
    if where and not root.method:
        incident.evidence.append(f"surfaced in {where}")


# how an incident is explained, by the name a kind gives in data/kinds.toml (`explain`)
EXPLAINERS: dict[str, Callable[[Incident, Context, Kind], None]] = {
    "ray_kill": _explain_ray_kill,
    "ray_summary": _explain_summary,
    "gpu": _explain_gpu,
    "in_process": _explain_gpu,  # any allocation that failed in the process that made it (host_alloc_failure)
    "kernel": _explain_kernel,
    "supervisor": _explain_supervisor,
    "death": _explain_death,
    "timeout": _explain_timeout,
    "failure": _explain_failure,
    "process_error": _explain_process_error,
}


def correlate(events: list[Event], clues: list[Clue], kinds: Kinds) -> tuple[list[Event], list[Incident]]:
    """The events on one clock, and the incidents they form in time order, each explained."""
    context = Context(clues)
    if attribute(events, context, kinds):  # each event on its own: in the order they were read, which is their order in memory
        events = fold(events, kinds)  # the driver's copy of a worker's exception, now of the worker's pid
    ordered = one_clock(events)
    names_seen(events, context)
    incidents = group(ordered, kinds)
    trends = None  # read only when an incident needs them: a healthy run has none
    for number, incident in enumerate(incidents, 1):
        incident.id = f"i{number}"
        explain(incident, context, kinds)
        if incident.memory:
            trends = trends or Trends(ordered, kinds)
            incident.trend, seen = trends.before(incident.memory, incident.root.time)
            if seen:
                incident.evidence.append(f"memory trend: {seen}")
    return ordered, incidents
