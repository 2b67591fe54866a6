"""Shared helpers: where the fixtures are, and how to look up a value in an event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"
SESSIONS = FIXTURES / "sessions"
INCIDENTS = FIXTURES / "incidents"


def fixture_inputs() -> list[Path]:
    """What a user would hand oomlens for every fixture: each real log, each session folder,
    each incident's session folder or driver console."""
    incidents = [p / "session" if (p / "session").exists() else p / "driver-console.log" for p in sorted(INCIDENTS.iterdir()) if p.is_dir()]
    return sorted(REAL.glob("*.log")) + sorted(p for p in SESSIONS.iterdir() if p.is_dir()) + incidents


def sample(values: list, ids: list[str] | None = None, every: int = 8) -> list:
    """The parameters of a sweep over many fixtures: one in `every` runs in `make test-quick`,
    the others are marked slow (`make test` runs them all)."""
    return [pytest.param(v, id=ids[i] if ids else None, marks=() if i % every == 0 else pytest.mark.slow) for i, v in enumerate(values)]


def lookup(event: dict[str, Any], path: str) -> Any:
    """`fields.x` first, then the event's own keys; dots walk into lists and dicts."""
    head, *rest = path.split(".")
    node: Any = event["fields"][head] if head in event["fields"] else event.get(head, KeyError)
    if node is KeyError:
        raise KeyError(path)
    while rest:
        if isinstance(node, list):
            node, rest = node[int(rest[0])], rest[1:]
            continue
        for width in range(len(rest), 0, -1):  # keys may hold dots themselves
            key = ".".join(rest[:width])
            if key in node:
                node, rest = node[key], rest[width:]
                break
        else:
            raise KeyError(path)
    return node


def expected_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@pytest.fixture(scope="session")
def real_expectations() -> dict[str, dict]:
    return {p.name.replace(".expected.json", ".log"): json.loads(p.read_text()) for p in REAL.glob("*.expected.json")}


def known_miss(name: str, check: str) -> list[pytest.MarkDecorator]:
    """A strict xfail where a real excerpt's expectation says oomlens misses that check
    (`known_misses`: "kinds" or "verdict", and why): kept as the expert read it, so the day
    it is read right the mark fails and comes off."""
    why = json.loads((REAL / name.replace(".log", ".expected.json")).read_text()).get("known_misses", {}).get(check)
    return [pytest.mark.xfail(strict=True, reason=why)] if why else []
