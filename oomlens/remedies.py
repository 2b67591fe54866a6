"""Remedies: which framework wrote the logs, and which of its settings to change (data/remedies.toml)."""

from __future__ import annotations

import functools
import re
from typing import Any

from .correlate import Incident
from .data import load
from .events import Clue, Event
from .shapes import zeroed
from .text import render

SLEEP_MODE = re.compile(r"Sleep mode freed|CuMemAllocator|wake_up|enable_sleep|free_cache_engine")


@functools.cache
def _frameworks() -> tuple[tuple[str, re.Pattern[str], re.Pattern[str] | None, str | None], ...]:
    """(name, its own markers, markers it shares with its forks, the framework it refines)."""
    return tuple(
        (f["name"], re.compile(f["pattern"]), re.compile(f["shared"]) if "shared" in f else None, f.get("refines"))
        for f in load("frameworks.toml")["framework"]
    )


@functools.cache
def _rules() -> dict[str, list[dict[str, Any]]]:
    data = load("remedies.toml")
    return {"remedy": data.get("remedy", []), "guard": data.get("guard", []), "form": data.get("form", [])}


EVIDENCE_CHARS = 300  # of an event's text, what detection reads: its head, where a version's wording stands


def evidence_text(events: list[Event], clues: list[Clue], memory_lines: frozenset[str]) -> str:
    """What framework detection reads: code paths, process names, setting names, first lines."""
    parts = []
    for clue in clues:
        for frame in clue.fields.get("frames", []):
            parts.append(frame["path"])
        task = clue.fields.get("task")
        if task:
            parts.append(f"{task.get('actor')}.{task.get('method')}")
        parts.extend(clue.fields.get("settings", {}))
        if clue.kind == "evidence":  # a failure's wording whose events a reduction left out
            parts.append(clue.fields["text"])
        parts.append(clue.source.path)
    read: set[tuple] = set()
    for event in events:
        if event.kind in memory_lines:  # by the hundred thousand, all alike: one per process and label
            key = (event.source.path, event.actor, event.fields.get("label"))
            if key in read:
                continue
            read.add(key)
        parts.append(event.actor or "")
        parts.append(zeroed(event.text[:EVIDENCE_CHARS]))  # one copy per line shape: samples repeat
        parts.append(event.source.path)
    return "\n".join(dict.fromkeys(p for p in parts if p))


def detect_frameworks(text: str) -> tuple[str, ...]:
    """The frameworks the logs may come from: the one whose own markers they show (a fork or
    derivative beats its base), else a base and its forks when only markers they all print
    show (veRL's `main_task` is EasyR1's too), else none."""
    found = _frameworks()
    own = {name: refines for name, pattern, _, refines in found if pattern.search(text)}
    for name, refines in own.items():
        if refines and refines in own:
            return (name,)
    if own:
        return (next(iter(own)),)
    for name, _, shared, _ in found:
        if shared is not None and shared.search(text):
            return (name, *(fork for fork, _, _, refines in found if refines == name))
    return ()


def detect_versions(text: str, events: list[Event]) -> dict[str, str]:
    """The version (or range) of each piece of software whose wording the logs show."""
    data = load("frameworks.toml")
    versions: dict[str, str] = {}
    for entry in data["version"]:
        if entry["software"] not in versions and re.search(entry["pattern"], text, re.M):
            versions[entry["software"]] = entry["version"]
    for event in events:
        variant = event.fields.get("ray_variant")  # which generation of Ray wrote a kill report
        if variant in data["ray_variants"]:
            versions.setdefault("ray", data["ray_variants"][variant])
    return versions


def flag_style(clues: list[Clue]) -> str:
    """OpenRLHF renamed its flags to dotted groups in 0.10.2 (`--ds.zero_stage`)."""
    for clue in clues:
        for key in clue.fields.get("settings", {}):
            if key.startswith("--") and "." in key:
                return "dotted"
    return "legacy"


def current_settings(clues: list[Clue]) -> dict[str, Any]:
    """Every setting the run printed, by its full name and by its last part."""
    found: dict[str, Any] = {}
    for clue in clues:
        for key, value in clue.fields.get("settings", {}).items():
            found[key] = value
            found.setdefault(key.lstrip("-").rsplit(".", 1)[-1], value)
    return found


@functools.cache
def _cause_words() -> dict[str, str]:
    return {c["name"]: c["words"] for c in load("exceptions.toml")["cause"]}


def cause_words(cause: str) -> str:
    """How a person says a well-known cause of a crash (data/exceptions.toml)."""
    return _cause_words().get(cause, cause.replace("_", " "))


def _holds(rule: dict[str, Any], facts: dict[str, Any]) -> bool:
    for key in ("framework", "component", "memory", "root_kind", "trend", "style", "device", "cause", "supervisor", "action"):
        if key not in rule:
            continue
        wanted = rule[key] if isinstance(rule[key], list) else [rule[key]]
        given = facts.get(key)
        if not (set(given) & set(wanted) if isinstance(given, tuple) else given in wanted):
            return False
    if "named" in rule and rule["setting"] not in facts["named"].get(rule["named"], ()):
        return False  # a remedy the failure's own message asks for, only when it does, and the way it does
    return True


def _same(current: object, value: str) -> bool:
    """Does the printed setting already hold the remedy's value? ("(flag)" is a set flag.)"""
    if value.startswith("(flag"):
        return current is True
    return str(current).lower() == value.lower()


def remedies_for(incident: Incident, frameworks: tuple[str, ...], clues: list[Clue], evidence: str, own: bool = False) -> list[dict[str, Any]]:
    """The remedies whose conditions hold for any of the frameworks the logs may come from,
    minus those a guard-rail forbids (`evidence` is evidence_text(): whether vLLM's sleep
    mode is in use is read from it).

    An incident whose memory kind is a guess gets none: a setting changed on a guess costs
    a training run. A crash of a well-known cause (its `cause`) gets that cause's remedies.
    `own`: the root's kind takes only the remedies that name it (kinds.toml `own_remedies`)."""
    cause = incident.root.fields.get("cause")
    if (incident.memory is None and cause is None) or incident.confidence < 0.5:
        return []
    facts = {
        "cause": cause,
        "framework": frameworks,
        "component": incident.component,
        "memory": incident.memory,
        "root_kind": incident.root.kind,
        "device": incident.root.device,
        "named": {way: str(incident.root.fields.get(f"{way}_setting") or "").split(", ") for way in ("raise", "lower")},
        "trend": incident.trend,
        "style": flag_style(clues),
        "supervisor": incident.root.fields.get("supervisor"),  # who ended it, for a supervisor's kill
        "action": incident.root.fields.get("action"),
    }
    flags = {"sleep_mode": SLEEP_MODE.search(evidence) is not None, "host_pressure": incident.memory == "host"}
    guards = [g for g in _rules()["guard"] if flags.get(g["when"])]
    settings = current_settings(clues)
    chosen: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rule in _rules()["remedy"]:
        if not _holds(rule, facts) or rule["setting"] in seen or (incident.memory is None and "cause" not in rule):
            continue
        if any(g["setting"] == rule["setting"] and g.get("value", rule["value"]) == rule["value"] for g in guards):
            continue
        current = settings.get(rule["setting"], settings.get(rule["setting"].lstrip("-").rsplit(".", 1)[-1]))
        if rule.get("when_set") and current in (None, False, 0):
            continue
        if "unless_set" in rule and settings.get(rule["unless_set"]) not in (None, False, 0):
            continue
        if own and "root_kind" not in rule:
            continue  # a failure whose message names its own settings: no framework's remedy for memory pressure
        if current is not None and _same(current, rule["value"]):
            continue  # the run already has it
        seen.add(rule["setting"])
        value, why = (render(rule[k], incident.root.fields) if "{" in rule[k] else rule[k] for k in ("value", "why"))  # the numbers of the failure's message
        remedy = {"framework": rule.get("framework", "any"), "setting": rule["setting"], "value": value, "why": why}
        if current is not None:
            remedy["current"] = current
        elif incident.root.fields.get(rule.get("current_from", "")) is not None:
            remedy["current"] = incident.root.fields[rule["current_from"]]
        remedy.update(worked_out({**rule, "value": value}, remedy.get("current"), overshoot(incident)))  # pasted as rendered
        chosen.append(remedy)
    return chosen


# a remedy's value that names a direction: "lower", "lower (e.g. 0.4-0.5)", "higher, or ...", "raise only with care"
DIRECTION = re.compile(r"^(lower|higher|raise)\b(?:.*?\(e\.g\. ([\d.]+)(?:-[\d.]+)?\))?(.*)$")
STEP = 0.05  # a fraction (gpu_memory_utilization) is given in twentieths


def overshoot(incident: Incident) -> float | None:
    """How far past the limit the root went, as a fraction of the device: a CUDA OOM's
    allocation less the memory free, over the GPU's total."""
    fields = incident.root.fields
    requested, free, total = (fields.get(k) for k in ("requested_bytes", "free_bytes", "total_bytes"))
    if isinstance(requested, int) and isinstance(free, int) and isinstance(total, int) and total > 0:
        return max(0, requested - free) / total
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _fraction(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def new_value(direction: str, current: float, over: float | None) -> tuple[str, str] | None:
    """A value for a setting now at `current`, moved in `direction`, and what it was
    worked out from: a fraction (0 to 1) lowered by how far over the device the failure
    went (`over`), else by a tenth; raised halfway to 1; a count halved or doubled. None
    when there is nowhere to go (a count of 1 lowered)."""
    if 0 < current < 1:
        if direction == "lower":
            drop = over + STEP if over is not None else 0.1
            value = int((current - drop) / STEP + 1e-9) * STEP
            why = (
                f"the failed allocation was {over:.0%} of the GPU over what was free"
                if over is not None
                else "a tenth less: the logs do not say how far over it went"
            )
            return (_fraction(value), why) if value >= STEP else None
        value = min(0.99, current + (1 - current) / 2)
        return _fraction(value), "halfway to 1"
    if current >= 1 and current == int(current):
        value = int(current) // 2 if direction == "lower" else int(current) * 2
        return (str(value), "half of now" if direction == "lower" else "twice now") if value >= 1 else None
    return None


def worked_out(rule: dict[str, Any], current: Any, over: float | None) -> dict[str, Any]:
    """What a user pastes for a remedy (`paste`: an override, a flag, an `export`, in the
    form its name takes, data/remedies.toml [[form]]), the value it sets (`value`), the
    direction in words when no value can be worked out (`direction`), and a note said
    beside it: the value now and how the new one was found. A value is never a word."""
    setting, wanted = rule["setting"], rule["value"]
    form = next(f for f in _rules()["form"] if re.search(f["match"], setting))
    now = f"now {current}" if current is not None and current is not True else ""
    if wanted.startswith("(flag"):
        return {"paste": form.get("flag", "{setting}").format(setting=setting), "note": "add " + ("them" if wanted == "(flags)" else "it")}
    if wanted == "remove":
        return {"paste": None, "direction": "remove", "note": "remove it from the command"}
    direction = DIRECTION.match(wanted)
    if direction is None:  # a value of its own
        return {"paste": form["line"].format(setting=setting, value=wanted), "note": now}
    word, example, rest = direction.group(1), direction.group(2), direction.group(3).strip(" ,")
    word = "higher" if word == "raise" else word
    number = _number(current)
    found = new_value(word, number, over) if number is not None else None
    if found is None:
        why = f"{word}" + (f" (e.g. {example})" if example else "") + (f" {rest}" if rest else "")
        why += f": {now}, no lower value to give" if now else ": its value now is not in these logs"
        return {"paste": None, "value": word, "direction": word, "note": why}
    value, how = found
    caution = f"; {rest}" if rest else ""
    return {"paste": form["line"].format(setting=setting, value=value), "value": value, "direction": word, "note": f"{word}: {now}, {how}{caution}"}
