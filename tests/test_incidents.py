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
    return request.param, expected, analyze(*inputs, jobs=1)


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
    got = {k: diagnosis.verdict.get(k) for k in ("component", "memory", "root_kind", "device") if k in want or k != "device"}
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


SUMMARY = (
    "(raylet) [2026-01-20 08:13:{s:02d},391 E 2105 2105] (raylet) node_manager.cc:3099: 1 Workers (tasks / actors) killed due to "
    "memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 87d772fad6a1e8e28022131ee0c15591d7d109361ad677a9e64c71e2, "
    "IP: {ip}) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip {ip}`"
)
KILL = (
    "2026-01-20 08:13:{s:02d},002\tERROR worker.py:422 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: {ip}, ID: 87d772fad6a1e8e28022131ee0c15591d7d109361ad677a9e64c71e2) where the task (actor ID: "
    "9e43ace6a1234e13df7b456b01000000, name=WorkerDict.actor_rollout_generate_sequences, pid=4100606, memory used=56.57GB) was running "
    "was 246.41GB / 251.54GB (0.979583), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: "
    "1f2e3d4c5b6a79880716253443526170819a0b1c2d3e4f5061728394) because it was the most recently scheduled task; to see more "
    "information about memory usage on this node, use `ray logs raylet.out -ip {ip}`. To see the logs of the worker, use "
    "`ray logs worker-1f2e3d4c5b6a79880716253443526170819a0b1c2d3e4f5061728394*out -ip {ip}. Top 10 memory users:\n"
    "PID\tMEM(GB)\tCOMMAND\n" + "".join(f"41006{i:02d}\t56.5{i}\tray::WorkerDict.actor_rollout_generate_sequences\n" for i in range(4))
)


@pytest.mark.parametrize("kill_after", [0, 3, 40])
@pytest.mark.parametrize("summary_first", [True, False])
def test_a_kill_report_leads_the_raylet_count_of_it_whichever_was_printed_first(tmp_path, kill_after, summary_first):
    """raylet counts the kills of the last period; the driver may print the kill report
    after that count. The kill report is the failure; the count follows it."""
    summary, kill = SUMMARY.format(s=10, ip="10.22.68.9"), KILL.format(s=10 + kill_after, ip="10.22.68.9")
    log = tmp_path / "driver-console.log"
    log.write_text(f"{summary}\n{kill}" if summary_first else f"{kill}{summary}\n")
    diagnosis = analyze(str(log), jobs=1)
    (incident,) = diagnosis.incidents
    assert incident.root.kind == "ray_oom_kill"
    assert [e.kind for e in incident.cascade] == ["ray_oom_summary"]
    assert (diagnosis.verdict["root_kind"], diagnosis.verdict["component"]) == ("ray_oom_kill", "rollout")


def test_a_count_of_another_node_is_not_led_by_this_node_s_kill(tmp_path):
    log = tmp_path / "driver-console.log"
    log.write_text(SUMMARY.format(s=10, ip="10.22.68.7") + "\n" + KILL.format(s=12, ip="10.22.68.9"))
    incident = analyze(str(log), jobs=1).incidents[0]
    assert (incident.root.kind, incident.root.node) == ("ray_oom_summary", "10.22.68.7")
