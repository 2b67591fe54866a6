"""Shared helpers: where the fixtures are, and how to look up a value in an event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Every property test's examples, whichever files a run collects: drawn from a seed of each
# test's own (the suite fails or passes the same way each time), none kept between runs
settings.register_profile(
    "default", max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("default")

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


# files handed out test by test, not whole: the robustness sweep (thirty-odd cases, each
# seconds long) handed out whole kept one core busy after the other had finished. The other
# files stay whole: some share a costly fixture made once a module, and spreading them all
# cost more in what each process reads and caches again than it balanced.
SPREAD = ("tests/test_robustness.py::",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test`'s --dist loadfile, its bookkeeping linear in the suite's size: xdist's own
    counts every test a worker was ever given after each test a worker reports, and finds each
    test it hands out by searching the whole collection (pytest-xdist issue #279). Over the
    robustness sweep's 14,392 cases that kept the controller busy most of a core-minute."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Linear(LoadFileScheduling):
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self.left: dict[str, int] = {}  # file -> its tests not yet reported by the worker it went to
            self.where: dict[Any, dict[str, int]] = {}  # worker -> each test's place in its collection

        def _assign_work_unit(self, node: Any) -> None:
            scope, unit = self.workqueue.popitem(last=False)
            self.assigned_work.setdefault(node, {})[scope] = unit
            self.left[scope] = sum(not done for done in unit.values())
            if node not in self.where:
                self.where[node] = {nodeid: i for i, nodeid in enumerate(self.registered_collections[node])}
            node.send_runtest_some([self.where[node][nodeid] for nodeid, done in unit.items() if not done])

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            nodeid = self.registered_collections[node][item_index]
            scope = self._split_scope(nodeid)
            if not self.assigned_work[node][scope][nodeid]:
                self.left[scope] -= 1
            super().mark_test_complete(node, item_index, duration)

        def _pending_of(self, workload: dict[str, dict[str, bool]]) -> int:
            return sum(self.left[scope] for scope in workload)

        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(SPREAD) else super()._split_scope(nodeid)

    return Linear(config, log)
