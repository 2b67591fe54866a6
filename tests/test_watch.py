"""`oomlens watch`: a live session folder is followed; an incident is printed as soon as its
root is written, again when its cascade arrives; rotation, truncation and cut blocks are
followed; `--once` tells what `parse` tells."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

import oomlens
from conftest import INCIDENTS, SESSIONS
from oomlens.cli import main
from oomlens.watch import Watcher

SESSION = SESSIONS / "ray2.60-b-rl-actor-oom"
RAYLET = (SESSION / "logs" / "raylet.out").read_text().splitlines(keepends=True)
DRIVER = (SESSION / "driver-console.log").read_text().splitlines(keepends=True)
BOOT, KILL = "".join(RAYLET[:207]), "".join(RAYLET[207:253])  # raylet start-up; its OOM kill report
# the driver's ActorDiedError from another real session: a death that follows the kill
DEATH = "".join((SESSIONS / "ray2.60-d-dead-actor-calls" / "driver-console.log").read_text().splitlines(keepends=True)[55:78])
SCHEMA = oomlens.schema()
LINE = jsonschema.Draft202012Validator({"$ref": "#/$defs/watch_line", "$defs": SCHEMA["$defs"]})


def live_session(tmp_path: Path) -> Path:
    """A session as Ray writes it at start-up: raylet.out names the node, the driver has begun."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "raylet.out").write_text(BOOT)
    (tmp_path / "driver-console.log").write_text("".join(DRIVER[:3]))
    return tmp_path


def append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


class Lines:
    """The stdout lines of a running process, read by a thread so a test can wait with a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.queue.put(line) for line in process.stdout], daemon=True).start()

    def next(self, timeout: float = 4.0) -> dict:
        return json.loads(self.queue.get(timeout=timeout))

    def none_within(self, seconds: float) -> bool:
        try:
            self.queue.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


def test_watch_prints_a_crash_appended_while_it_runs_then_its_cascade(tmp_path):
    session = live_session(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "oomlens", "watch", str(session), "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = Lines(process)
        assert lines.none_within(0.5)  # a healthy start-up is no incident

        append(session / "logs" / "raylet.out", KILL)
        first = lines.next()
        LINE.validate(first)
        incident = first["incident"]
        assert first["update"] is False
        assert (incident["root_kind"], incident["component"], incident["memory"]) == ("ray_oom_kill", "reward_model", "host")
        assert incident["cascade"] == []
        (root,) = first["events"]
        assert root["id"] == incident["root"] and root["node"] == "192.0.2.2" and root["time"] == "2026-11-22T03:37:43.197"
        assert root["source"]["path"].endswith("raylet.out") and root["source"]["line"] == 208  # line numbers of the whole file

        append(session / "driver-console.log", DEATH)
        update = lines.next()
        LINE.validate(update)
        assert update["update"] is True
        assert update["events"][0] | {"id": None} == root | {"id": None}  # the same root, its cascade grown
        (death,) = [e for e in update["events"] if e["id"] in update["incident"]["cascade"]]
        assert death["kind"] == "ray_worker_died" and death["actor"] == "ActorRolloutRefWorker"
        assert lines.none_within(0.5)  # told once
    finally:
        process.terminate()
        process.wait(timeout=5)


@pytest.mark.parametrize(
    "source",
    [SESSION, SESSIONS / "ray2.49-d-dead-actor-calls", INCIDENTS / "openrlhf-reward-model-host-oom" / "session", INCIDENTS / "cascade-vllm-wakeup-cuda-oom"],
    ids=lambda p: p.parent.name if p.name == "session" else p.name,
)
def test_once_tells_what_parse_tells(source):
    result = CliRunner().invoke(main, ["watch", str(source), "--once"])
    assert result.exit_code == 0, result.output
    told = [json.loads(line) for line in result.output.splitlines()]
    for line in told:
        LINE.validate(line)
    parsed = oomlens.analyze(str(source), jobs=1).to_dict()["incidents"]
    assert parsed
    assert [(t["incident"]["fingerprint"], len(t["incident"]["cascade"])) for t in told] == [(i["fingerprint"], len(i["cascade"])) for i in parsed]


def test_a_block_cut_by_a_poll_is_read_whole_with_the_next(tmp_path):
    session = live_session(tmp_path)
    watcher = Watcher(str(session))
    assert watcher.poll() == []
    cut = KILL.index("Top 10 memory users")
    append(session / "logs" / "raylet.out", KILL[:cut])
    first = watcher.poll()
    append(session / "logs" / "raylet.out", KILL[cut:])
    later = watcher.poll()
    told = first + later
    assert [line["update"] for line in told] == [False, True][: len(told)]
    assert told[-1]["incident"]["culprit"]["pid"] == 14522  # the Top-10 table was read after all
    assert len(watcher.events) == 1  # the rescan replaced the cut report, it did not add one


def test_rotation_and_truncation_are_followed(tmp_path):
    session = live_session(tmp_path)
    raylet = session / "logs" / "raylet.out"
    watcher = Watcher(str(session))
    watcher.poll()
    os.rename(raylet, session / "logs" / "raylet.1.out")  # Ray's rotation: rename, then a new file
    raylet.write_text(BOOT[:2000])
    assert watcher.poll() == []
    append(raylet, "\n" + KILL)
    (line,) = watcher.poll()
    assert line["events"][0]["source"]["path"] == str(raylet)

    driver = session / "driver-console.log"
    append(driver, "".join(DRIVER[3:60]))
    watcher.poll()
    driver.write_text("".join(DRIVER[:2]))  # copytruncate: the file starts again, shorter
    append(driver, DEATH)
    (update,) = watcher.poll()
    assert update["update"] is True
    assert [e["kind"] for e in update["events"]] == ["ray_oom_kill", "ray_worker_died"]
    assert update["events"][1]["source"]["line"] == 2 + DEATH[: DEATH.index("ray.exceptions.ActorDiedError")].count("\n") + 1  # counted from the new start


def test_the_window_stays_bounded_and_incidents_are_told_before_they_leave(tmp_path, monkeypatch):
    monkeypatch.setattr("oomlens.watch.MAX_EVENTS", 3)
    monkeypatch.setattr("oomlens.watch.MAX_SAMPLES", 5)
    monkeypatch.setattr("oomlens.watch.MAX_CLUES", 5)
    session = live_session(tmp_path)
    watcher = Watcher(str(session))
    told = []
    for day in range(1, 9):  # eight days, one OOM kill each, and memory samples between
        append(session / "driver-console.log", "".join(DRIVER[3:40]))
        append(session / "logs" / "raylet.out", KILL.replace("2026-11-22", f"2026-11-{day:02d}"))
        told += watcher.poll()
        assert len(watcher.events) <= 3 and len(watcher.samples) <= 5 and len(watcher.clues) <= 5
    kills = sorted({line["events"][0]["time"][:10] for line in told if not line["update"]})
    assert kills == [f"2026-11-{day:02d}" for day in range(1, 9)]
    assert len(watcher.told) <= 3


def test_a_log_rewritten_in_place_to_its_very_size_is_read_again(tmp_path):
    """An editor's save or a job that writes its log again: same inode, same size, other bytes."""
    session = live_session(tmp_path)
    raylet = session / "logs" / "raylet.out"
    quiet = "".join(f"[state-dump] quiet line {n:05d}\n" for n in range(len(KILL) // 30 + 1))[: len(KILL) - 1] + "\n"
    before, rewritten = BOOT + quiet, BOOT + KILL
    raylet.write_text(before)
    watcher = Watcher(str(session))
    assert watcher.poll() == [] and len(before) == len(rewritten)
    inode, size = raylet.stat().st_ino, raylet.stat().st_size
    with open(raylet, "r+") as fh:  # in place: the same inode
        fh.write(rewritten)
    stat = raylet.stat()
    os.utime(raylet, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert (raylet.stat().st_ino, raylet.stat().st_size) == (inode, size)
    (line,) = watcher.poll()
    assert line["incident"]["culprit"]["pid"] == 14522


def test_a_file_only_appended_to_is_not_read_again(tmp_path):
    session = live_session(tmp_path)
    watcher = Watcher(str(session))
    watcher.poll()
    append(session / "logs" / "raylet.out", KILL)
    assert len(watcher.poll()) == 1
    append(session / "logs" / "raylet.out", "[state-dump] more\n")
    assert watcher.poll() == [] and len(watcher.events) == 1
