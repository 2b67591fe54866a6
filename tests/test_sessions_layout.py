"""Ray's own folders and sessions: a /tmp/ray laid out as Ray leaves it parses with no
problem, each session is correlated on its own, and `--session` reads one alone.

The sessions are real ones (fixtures/sessions, PROVENANCE.md) copied under the names Ray
gives its session folders (ray/_private/node.py: session_{%Y-%m-%d_%H-%M-%S_%f}_{pid}, the
driver's pid and a time just before each raylet's first line). Git keeps no empty folder,
so the ones Ray makes in every session are made here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import jsonschema
import pytest

import oomlens
from conftest import SESSIONS

KILL = "session_2026-11-22_03-37-27_512000_14155"  # ray2.60-b: the memory monitor kills the reward model
SIGKILL = "session_2026-11-22_03-38-36_104000_16288"  # ray2.60-c, a minute later: a critic SIGKILLed, no OOM
FIXTURE = {KILL: "ray2.60-b-rl-actor-oom", SIGKILL: "ray2.60-c-actor-sigkill"}
# what node.py and the runtime-env plugins make in a session, empty until used
RAY_EMPTY = ("logs/old", "logs/nsight", "logs/rocprof_sys", "logs/profiles", "sockets", "runtime_resources")


def ray_temp(root: Path, *names: str) -> Path:
    """A /tmp/ray: each session's logs/ as Ray wrote it, Ray's empty folders, and the
    session_latest link to the newest."""
    ray = root / "ray"
    for name in names:
        shutil.copytree(SESSIONS / FIXTURE[name] / "logs", ray / name / "logs")
        for folder in RAY_EMPTY:
            (ray / name / folder).mkdir()
    os.symlink(max(names), ray / "session_latest")
    return ray


def cli(*args: str) -> subprocess.CompletedProcess:
    """`oomlens parse ... --format json` as a user runs it."""
    run = subprocess.run([sys.executable, "-m", "oomlens", "parse", *args, "--format", "json"], capture_output=True, timeout=120)
    run.stdout, run.stderr = run.stdout.decode(), run.stderr.decode()
    assert "Traceback" not in run.stderr, run.stderr
    return run


def sessions_of(contract: dict) -> set[str | None]:
    return {i.get("session") for i in contract["inputs"]}


def test_a_session_as_ray_leaves_it_parses_with_no_problem(tmp_path):
    ray = ray_temp(tmp_path, KILL)
    assert not any((ray / KILL / "logs" / "nsight").iterdir())  # the empty folders are there
    run = cli(str(ray), "-j", "1")
    assert (run.returncode, run.stderr) == (0, "")
    out = json.loads(run.stdout)
    assert [i for i in out["inputs"] if i["problems"]] == []
    assert sessions_of(out) == {KILL}  # read once, through the session folder, not again through session_latest
    assert not any("session_latest" in i["path"] for i in out["inputs"])
    [incident] = out["incidents"]
    assert (incident["root_kind"], incident["component"], incident["session"]) == ("ray_oom_kill", "reward_model", KILL)


def test_the_session_latest_link_alone_reads_its_session(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    run = cli(str(ray / "session_latest"), "-j", "1")
    assert (run.returncode, run.stderr) == (0, "")
    assert sessions_of(json.loads(run.stdout)) == {SIGKILL}


def test_an_empty_folder_named_is_still_a_problem_and_nothing_read_exits_1(tmp_path):
    ray = ray_temp(tmp_path, KILL)
    nsight = ray / KILL / "logs" / "nsight"
    run = cli(str(nsight))
    assert run.returncode == 1
    assert run.stderr.splitlines() == [f"oomlens: {nsight}: empty folder: nothing to read"]  # one problem: one line
    assert json.loads(run.stdout)["inputs"] == [
        {"path": str(nsight), "role": "other", "bytes": 0, "lines": 0, "problems": ["empty folder: nothing to read"], "session": KILL}
    ]


def test_an_empty_folder_of_ray_s_name_outside_a_ray_logs_folder_is_told(tmp_path):
    (tmp_path / "notes" / "old").mkdir(parents=True)
    (tmp_path / "notes" / "driver.log").write_text("nothing happened\n")
    run = cli(str(tmp_path / "notes"))
    assert run.returncode == 0
    assert run.stderr.splitlines() == [f"oomlens: {tmp_path}/notes/old: empty folder: nothing to read"]


def test_two_sessions_are_correlated_apart(tmp_path):
    """Merged, the SIGKILLed critic of the second run would join the first run's OOM kill as
    its cascade (it died 70 s after it); apart, each run has its own incident."""
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    merged = tmp_path / "merged"
    for name in (KILL, SIGKILL):
        shutil.copytree(ray / name / "logs", merged / FIXTURE[name] / "logs")
    together = oomlens.analyze(str(merged), jobs=1)
    [spanning] = together.incidents
    assert {Path(s.path).relative_to(merged).parts[0] for e in [spanning.root, *spanning.cascade] for s in e.sources} == {FIXTURE[KILL], FIXTURE[SIGKILL]}

    apart = oomlens.analyze(str(ray), jobs=1)
    assert [(i.id, i.root.kind, i.session) for i in apart.incidents] == [("i1", "ray_oom_kill", KILL), ("i2", "ray_worker_died", SIGKILL)]
    for incident in apart.incidents:
        paths = {s.path for e in [incident.root, *incident.cascade] for s in e.sources}
        assert all(f"{os.sep}{incident.session}{os.sep}" in p for p in paths), incident.id
    contract = apart.to_dict()
    assert [e["id"] for e in contract["events"]] == [f"e{n}" for n in range(1, len(contract["events"]) + 1)]
    assert [i["session"] for i in contract["incidents"]] == [KILL, SIGKILL]
    assert sessions_of(contract) == {KILL, SIGKILL}
    jsonschema.Draft202012Validator(oomlens.schema()).validate(contract)  # the keys added to contract v1 are in its schema


def test_two_sessions_give_the_same_json_whatever_the_jobs(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    one, two = cli(str(ray), "-j", "1"), cli(str(ray), "-j", "2")
    assert (one.returncode, one.stderr, two.returncode, two.stderr) == (0, "", 0, "")
    assert one.stdout == two.stdout
    assert len(json.loads(one.stdout)["incidents"]) == 2


def test_a_driver_log_named_beside_the_sessions_joins_the_session_of_its_time(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    consoles = []
    for name in (KILL, SIGKILL):
        consoles.append(tmp_path / f"{FIXTURE[name]}.log")
        shutil.copy(SESSIONS / FIXTURE[name] / "driver-console.log", consoles[-1])
    diagnosis = oomlens.analyze(str(ray), *map(str, consoles), jobs=1)
    assert [(i.root.kind, i.session) for i in diagnosis.incidents] == [("ray_oom_kill", KILL), ("ray_worker_died", SIGKILL)]
    for incident, console in zip(diagnosis.incidents, consoles, strict=True):  # the console's report folded into its run's
        assert {s.path for s in incident.root.sources} & {str(c) for c in consoles} == {str(console)}
    assert [i.to_dict().get("session") for i in diagnosis.inputs if i.path in map(str, consoles)] == [None, None]  # lies in none


@pytest.mark.parametrize("how", ["latest", SIGKILL])
def test_session_latest_or_named_reads_only_that_session(tmp_path, how):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    run = cli(str(ray), "--session", how, "-j", "1")
    assert (run.returncode, run.stderr) == (0, "")
    out = json.loads(run.stdout)
    assert sessions_of(out) == {SIGKILL}
    assert [(i["root_kind"], i["session"]) for i in out["incidents"]] == [("ray_worker_died", SIGKILL)]
    assert oomlens.analyze(str(ray), session=how, jobs=1).to_dict() == out


def test_session_picks_the_older_one_by_name(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    diagnosis = oomlens.analyze(str(ray), session=KILL, jobs=1)
    assert {i.session for i in diagnosis.inputs} == {KILL}
    assert [i.root.kind for i in diagnosis.incidents] == ["ray_oom_kill"]


def test_latest_is_the_newest_by_the_time_in_its_name_without_the_link(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    (ray / "session_latest").unlink()
    assert {i.session for i in oomlens.analyze(str(ray), session="latest", jobs=1).inputs} == {SIGKILL}


def test_a_session_not_there_reads_nothing_and_says_so(tmp_path):
    ray = ray_temp(tmp_path, KILL)
    run = cli(str(ray), "--session", "session_2026-01-01_00-00-00_000000_1")
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == f"oomlens: {ray}: no Ray session session_2026-01-01_00-00-00_000000_1 in it: nothing read"
    logs = tmp_path / "copied-logs"
    shutil.copytree(ray / KILL / "logs", logs)
    run = cli(str(logs), "--session", "latest")
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == f"oomlens: {logs}: no Ray session folder (session_*) in it: nothing read"


def test_a_file_named_in_another_session_is_told_and_one_outside_any_is_read(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    old = ray / KILL / "logs" / "raylet.out"
    console = tmp_path / "driver.log"
    shutil.copy(SESSIONS / FIXTURE[SIGKILL] / "driver-console.log", console)
    run = cli(str(ray), str(old), str(console), "--session", "latest", "-j", "1")
    assert run.returncode == 0
    assert run.stderr.splitlines() == [f"oomlens: {old}: in Ray session {KILL}, not {SIGKILL}: not read"]
    out = json.loads(run.stdout)
    assert str(console) in [i["path"] for i in out["inputs"] if not i["problems"]]
    assert [i["session"] for i in out["incidents"]] == [SIGKILL]


def test_a_readme_beside_the_sessions_is_no_log_unless_named(tmp_path):
    """Its quote of a CUDA OOM is no failure of these runs; a driver log beside them is read."""
    ray = ray_temp(tmp_path, KILL)
    readme = ray / "README.md"
    readme.write_text("Runs of 22 Nov. Last week's failure, for the record:\n\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    (ray / "notes.md").write_text(readme.read_text())
    shutil.copy(SESSIONS / FIXTURE[KILL] / "driver-console.log", ray / "train.log")
    out = json.loads(cli(str(ray), "-j", "1").stdout)
    paths = [i["path"] for i in out["inputs"]]
    assert str(ray / "train.log") in paths and not any(p.endswith(".md") for p in paths)
    assert "cuda_oom" not in {e["kind"] for e in out["events"]}

    named = cli(str(ray), str(readme), "-j", "1")
    assert (named.returncode, named.stderr) == (0, "")
    named_out = json.loads(named.stdout)
    assert [e["source"]["path"] for e in named_out["events"] if e["kind"] == "cuda_oom"] == [str(readme)]


def test_an_archive_of_two_sessions_is_read_one_session_at_a_time(tmp_path):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    archive = tmp_path / "ray.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(ray, arcname="ray")
    whole = oomlens.analyze(str(archive), jobs=1)
    assert [(i.root.kind, i.session) for i in whole.incidents] == [("ray_oom_kill", KILL), ("ray_worker_died", SIGKILL)]
    latest = oomlens.analyze(str(archive), session="latest", jobs=1)
    assert {i.session for i in latest.inputs} == {SIGKILL}
    assert [(i.root.kind, i.session) for i in latest.incidents] == [("ray_worker_died", SIGKILL)]


def test_the_verdict_is_about_the_newest_run_and_says_which_session(tmp_path):
    """/tmp/ray after two runs: the user asks about the one that just died (the SIGKILLed
    critic, a minute after the older run's OOM kill), and the terminal says which session
    that is and how to read the other."""
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    found = oomlens.analyze(str(ray), jobs=1)
    assert (found.verdict["session"], found.verdict["root_kind"], found.verdict["incident"]) == (SIGKILL, "ray_worker_died", "i2")
    table = subprocess.run(
        [sys.executable, "-m", "oomlens", "parse", str(ray), "--color", "never"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    ).stdout
    assert f"SESSION     {SIGKILL} (the newest of 2 sessions read with an incident; --session NAME reads one alone)" in table
    only = oomlens.analyze(str(ray / KILL), jobs=1)
    assert (only.verdict["session"], only.verdict["root_kind"]) == (KILL, "ray_oom_kill")
    md = oomlens.analyze(str(ray), jobs=1).to_markdown()
    assert md.index(f"**Session:** `{KILL}`") < md.index(f"**Session:** `{SIGKILL}`")
