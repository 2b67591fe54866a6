"""Complete Ray 2.49 and 2.60 session folders: each OOM kill once, with its numbers."""

from __future__ import annotations

import json

import pytest

from conftest import SESSIONS
from oomlens import analyze

SCENARIOS = sorted(p.name for p in SESSIONS.iterdir() if p.is_dir())


@pytest.fixture(scope="module", params=SCENARIOS)
def scenario(request):
    expected = json.loads((SESSIONS / f"{request.param}.expected.json").read_text())["expected"]
    return request.param, expected, analyze(str(SESSIONS / request.param))


def kills(diagnosis):
    return [e for e in diagnosis.events if e.kind == "ray_oom_kill"]


def test_each_kill_counted_once(scenario):
    name, expected, diagnosis = scenario
    assert len(kills(diagnosis)) == expected["ray_oom_kill_count"], name


def test_victims_and_sizes(scenario):
    name, expected, diagnosis = scenario
    found = {k["pid"]: k["bytes"] for e in kills(diagnosis) for k in e.fields["killed"]}
    want = {k["pid"]: k["bytes"] for k in expected["killed"]}
    assert set(found) == set(want), name
    for pid, size in want.items():
        if size is not None:
            assert found[pid] == size, f"{name}: pid {pid}"


def test_node_threshold_and_table(scenario):
    name, expected, diagnosis = scenario
    for event in kills(diagnosis):
        f = event.fields
        assert event.node == expected["node"]
        assert f["node_total_bytes"] == expected["node_total_bytes"]
        assert 0 < f["node_used_bytes"] < f["node_total_bytes"]
        assert f["threshold"] == pytest.approx(expected["threshold"], abs=1e-6)
        assert f["ray_variant"] == expected["ray_variant"]
        assert len(f["top"]) == expected["top_rows"]
        assert event.memory == "host"
        assert event.time is not None and not event.time_inferred
        assert len(event.sources) >= 3, "the kill is reported by raylet.out, the driver and others"
        if "node_id" in expected:  # several raylets in one folder: the one that killed
            assert f["node_id"] == expected["node_id"]
    for check in expected.get("kill_numbers", []):
        (event,) = [e for e in kills(diagnosis) if e.pid == check["pid"]]
        assert event.fields["node_used_bytes"] == check["node_used_bytes"]
        assert event.fields["usage_fraction"] == check["usage_fraction"]


def test_victim_component_facts(scenario):
    name, expected, diagnosis = scenario
    victim = expected.get("victim")
    if victim is None:
        pytest.skip("no actor victim in this scenario")
    (event,) = kills(diagnosis)
    assert (event.pid, event.actor, event.method) == (victim["pid"], victim["actor"], victim["method"])
    for pid in expected.get("considered_not_killed", []):
        considered = {w["pid"]: w["selected"] for w in event.fields.get("considered", [])}
        if considered:  # only the >=2.56 report lists the workers it considered
            assert considered[pid] is False


def test_summary(scenario):
    name, expected, diagnosis = scenario
    summaries = [e for e in diagnosis.events if e.kind == "ray_oom_summary"]
    if expected["ray_oom_summary_killed"] is None:
        assert not summaries
    else:
        assert [e.fields["killed"] for e in summaries] == [expected["ray_oom_summary_killed"]]


def test_sigkill_deaths_are_not_oom(scenario):
    name, expected, diagnosis = scenario
    if not expected["worker_deaths_not_oom"]:
        pytest.skip("no SIGKILL in this scenario")
    died = {e.pid for e in diagnosis.events if e.kind == "ray_worker_died"}
    assert set(expected["worker_deaths_not_oom"]) <= died
    assert not kills(diagnosis)
    assert not [e for e in diagnosis.events if e.kind in ("kernel_oom", "cuda_oom", "ray_oom_summary")]
    if expected["actor_unavailable"]:
        assert any(e.kind == "ray_actor_unavailable" for e in diagnosis.events)


def test_a_worker_named_by_its_id_alone_gets_its_pid(scenario):
    """The GCS reports a worker's exit by its id; the worker's file names and the kill report
    give the pid of that id."""
    name, expected, diagnosis = scenario
    for event in diagnosis.events:
        if event.kind == "ray_worker_died" and event.fields.get("worker_id"):
            assert event.pid is not None, (name, event.source)
