"""Complete Ray session folders: each OOM kill once, with its numbers; and for the real runs
that carry an expert's verdict (the kernel's OOM killer in a memory cgroup, `ray job submit`,
torch's CPU allocator, healthy ends by `ray.kill` and `ray stop`), that verdict."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import SESSIONS
from oomlens import analyze

SCENARIOS = sorted(p.name for p in SESSIONS.iterdir() if p.is_dir())


def expectation(name: str) -> dict:
    return json.loads((SESSIONS / f"{name}.expected.json").read_text())


def known_miss(name: str, check: str) -> list[pytest.MarkDecorator]:
    """A strict xfail where a run's expectation says oomlens misses that check (`known_misses`:
    "kinds" or "verdict", and why): the expert's reading stays, and the mark comes off the day
    oomlens reads the run right."""
    why = expectation(name).get("known_misses", {}).get(check)
    return [pytest.mark.xfail(strict=True, reason=why)] if why else []


JUDGED = [name for name in SCENARIOS if "verdict" in expectation(name)["expected"]]
_DIAGNOSES: dict = {}


def diagnosed(name: str):
    if name not in _DIAGNOSES:
        _DIAGNOSES[name] = analyze(str(SESSIONS / name), jobs=1)
    return _DIAGNOSES[name]


@pytest.fixture(scope="module", params=SCENARIOS)
def scenario(request):
    expected = json.loads((SESSIONS / f"{request.param}.expected.json").read_text())["expected"]
    return request.param, expected, diagnosed(request.param)


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


@pytest.mark.parametrize("name", [pytest.param(name, marks=known_miss(name, "kinds")) for name in JUDGED])
def test_real_run_kinds(name):
    expected = expectation(name)["expected"]
    kinds = {e.kind for e in diagnosed(name).events}
    assert set(expected["kinds"]) <= kinds, f"{name}: missing {set(expected['kinds']) - kinds} ({expected['why']})"
    assert not set(expected["not_kinds"]) & kinds, f"{name}: unexpected {set(expected['not_kinds']) & kinds}"


@pytest.mark.parametrize("name", [pytest.param(name, marks=known_miss(name, "verdict")) for name in JUDGED])
def test_real_run_verdict(name):
    """Root kind, component, host or GPU memory and the obvious remedies, as an expert reads
    the run; a healthy run (verdict null) has no incident and no root."""
    expected, diagnosis = expectation(name)["expected"], diagnosed(name)
    if expected["verdict"] is None:  # a verdict may still say the run ended on purpose, naming no root
        assert not diagnosis.incidents and (diagnosis.verdict or {}).get("root_kind") is None, f"{name}: {diagnosis.verdict} ({expected['why']})"
        return
    got = {k: (diagnosis.verdict or {}).get(k) for k in ("root_kind", "component", "memory")}
    assert got == expected["verdict"], f"{name}: {got} ({expected['why']})"
    incident = next(i for i in diagnosis.incidents if i.id == diagnosis.verdict["incident"])
    settings = " ".join(r["setting"] for r in diagnosis.remedies.get(incident.id, []))
    for setting in expected["remedy_settings"]:
        assert setting in settings, f"{name}: {setting} not among {settings!r}"


def kernel_kills(name: str, diagnosis) -> list:
    """The kernel's kills, first first: as many as the expectation counts, the first its victim."""
    expected = expectation(name)["expected"]
    kills = sorted((e for e in diagnosis.events if e.kind == "kernel_oom"), key=lambda e: e.time or "")
    assert len(kills) == expected.get("kernel_kills", 1), name
    assert kills[0].pid == expected["kernel_victim"]["pid"], name
    return kills


@pytest.mark.parametrize("name", [name for name in JUDGED if "kernel_victim" in expectation(name)["expected"]])
def test_kernel_victim(name):
    """The pid and 15-character name the kernel's `Killed process` line gives the victim."""
    (first, *_) = kernel_kills(name, diagnosed(name))
    assert expectation(name)["expected"]["kernel_victim"]["name"] in str(first.fields), name


STAMP = re.compile(r"^\[(\w{3}) (\w{3}) +(\d+) (\d\d:\d\d:\d\d) (\d{4})\] ")
KERNEL_LAYOUTS = {
    # what `dmesg -T` printed, as kept
    "dmesg-T": ("dmesg.log", lambda m, rest, i: m.group(0) + rest),
    # syslog's kern.log: no year, the host's name, `kernel:`, the seconds since boot kept
    "kern.log": ("kern.log", lambda m, rest, i: f"{m.group(2)} {int(m.group(3)):2d} {m.group(4)} vm kernel: [{1000 + i / 1e4:12.6f}] {rest}"),
    # journalctl -k -o short-iso
    "journal": ("journal.log", lambda m, rest, i: f"{m.group(5)}-11-{int(m.group(3)):02d}T{m.group(4)}+0000 vm kernel: {rest}"),
}


@pytest.mark.parametrize("layout", list(KERNEL_LAYOUTS))
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=known_miss(name, "verdict"))
        for name in JUDGED
        if (SESSIONS / name / "dmesg.log").exists() and "kernel_victim" in expectation(name)["expected"]
    ],
)
def test_kernel_report_in_each_layout_a_user_pastes(tmp_path, name, layout):
    """The kernel's report of a real run as dmesg -T, kern.log or the journal wrote it, beside
    the same Ray logs: the same victim and the same verdict."""
    target, render = KERNEL_LAYOUTS[layout]
    folder = tmp_path / name
    shutil.copytree(SESSIONS / name, folder)
    lines = (folder / "dmesg.log").read_text().splitlines()
    (folder / "dmesg.log").unlink()
    out = []
    for i, line in enumerate(lines):
        m = STAMP.match(line)
        assert m, line
        out.append(render(m, line[m.end() :], i))
    (folder / target).write_text("\n".join(out) + "\n")
    expected, diagnosis = expectation(name)["expected"], analyze(str(folder), jobs=1)
    kernel_kills(name, diagnosis)
    got = {k: (diagnosis.verdict or {}).get(k) for k in ("root_kind", "component", "memory")}
    assert got == expected["verdict"], f"{name} as {layout}: {got}"


ROBUSTNESS = Path(__file__).parent / "robustness"


def _transforms() -> dict:
    """tests/robustness' transforms and chains, by name (its ops apply them)."""
    table = tomllib.loads((ROBUSTNESS / "transforms.toml").read_text(encoding="utf-8"))
    one = {t["name"]: [t] for t in table["transform"]}
    return one | {c["name"]: [one[s][0] for s in c["steps"]] for c in table.get("chain", [])}


TRANSFORMS = _transforms()


def _console_marks(name: str, case: str, i: int) -> list[pytest.MarkDecorator]:
    """A strict xfail where the run's expectation knows the transform is missed
    (`known_misses.robustness`: transform → why); all but one in eight are slow."""
    why = expectation(name).get("known_misses", {}).get("robustness", {}).get(case)
    return ([pytest.mark.xfail(strict=True, reason=why)] if why else []) + ([] if i % 8 == 0 else [pytest.mark.slow])


CONSOLES = [(name, case) for name in JUDGED for case in TRANSFORMS]
_CONSOLE_FACTS: dict = {}


def console_facts(path: Path) -> tuple:
    """What a transform must not change (as tests/test_robustness.py reads it): each event's
    kind, pid, GPU and numbers, and the verdict."""
    from test_robustness import facts

    return facts(analyze(str(path), jobs=1))


@pytest.mark.parametrize("name,case", [pytest.param(name, case, marks=_console_marks(name, case, i)) for i, (name, case) in enumerate(CONSOLES)])
def test_driver_console_under_each_transform(tmp_path, name, case):
    """Each real run's driver console, through every transform a terminal, collector or person
    applies (tests/robustness), gives the events and verdict of the untouched console."""
    sys.path.insert(0, str(ROBUSTNESS))
    from ops import apply

    console = SESSIONS / name / "driver-console.log"
    if name not in _CONSOLE_FACTS:
        _CONSOLE_FACTS[name] = console_facts(console)
    data = console.read_bytes()
    for step in TRANSFORMS[case]:
        data = apply(step, data)
    (tmp_path / console.name).write_bytes(data)
    events, verdict = _CONSOLE_FACTS[name]
    got_events, got_verdict = console_facts(tmp_path / console.name)
    assert sorted(map(str, events - got_events)) == [] and sorted(map(str, got_events - events)) == [], f"{name} {case}: events lost / gained"
    assert got_verdict == verdict, f"{name} {case}"
