"""Realistic incident fixtures (fixtures/incidents/*): the verdict, cascade, trend and fixes
an expert gives, read from a whole session or driver console with noise around it."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from oomlens import analyze

INCIDENTS = FIXTURES / "incidents"
SCENARIOS = sorted(p.name for p in INCIDENTS.iterdir() if (p / "expected.json").exists()) if INCIDENTS.exists() else []


@pytest.fixture(scope="module", params=SCENARIOS)
def case(request):
    folder = INCIDENTS / request.param
    expected = json.loads((folder / "expected.json").read_text())["expected"]
    inputs = [str(p) for p in sorted(folder.iterdir()) if p.name != "expected.json"]
    return request.param, expected, analyze(*inputs)


def test_kinds(case):
    name, expected, diagnosis = case
    kinds = {e.kind for e in diagnosis.events}
    assert set(expected["kinds"]) <= kinds, f"{name}: missing {set(expected['kinds']) - kinds}"
    assert not set(expected["not_kinds"]) & kinds, f"{name}: unexpected {set(expected['not_kinds']) & kinds}"


def test_verdict(case):
    name, expected, diagnosis = case
    want = expected["verdict"]
    if want is None:
        assert diagnosis.verdict is None and not diagnosis.incidents, name
        return
    got = {k: diagnosis.verdict[k] for k in ("component", "memory", "root_kind")}
    assert got == want, name
    if expected.get("max_confidence") is not None:
        assert diagnosis.verdict["confidence"] <= expected["max_confidence"]
    if expected.get("framework"):
        assert diagnosis.framework == expected["framework"]


def test_cascade_trend_and_fix(case):
    name, expected, diagnosis = case
    if expected["verdict"] is None:
        return
    incident = next(i for i in diagnosis.incidents if i.id == diagnosis.verdict["incident"])
    cascade = {e.kind for e in incident.cascade}
    assert set(expected["cascade_kinds"]) <= cascade, f"{name}: cascade {cascade}"
    assert incident.trend == expected.get("trend")
    settings = " ".join(r["setting"] for r in diagnosis.remedies.get(incident.id, []))
    for setting in expected["remedy_settings"]:
        assert setting in settings, f"{name}: {setting} not among {settings}"
    for setting in expected.get("forbidden_settings", []):
        assert setting not in settings, f"{name}: {setting} must not be suggested"
