"""Sources: what each kind of input becomes — roles, pids and nodes from names and folders,
compressed files, session archives (streamed), standard input and named pipes."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
import zstandard

from conftest import SESSIONS
from oomlens import analyze
from oomlens.sources import discover, files_under
from oomlens.sources.naming import role_of

SESSION = SESSIONS / "ray2.60-b-rl-actor-oom"
WORKER_ID = "577e72818f8d827312e46e650d4f707c08c58d89c950d6c52c2d4f87"


def summary(killed: int, ip: str = "10.95.143.76", second: int = 0) -> str:
    """The raylet's OOM summary line, one ray_oom_summary event with `killed` and node `ip`."""
    return (
        f"(raylet) [2025-04-02 15:02:{second:02d},117 E 135782 135782] (raylet) node_manager.cc:3069: "
        f"{killed} Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to "
        f"other reasons at node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: {ip}) "
        "over the last time period.\n"
    )


def nodeless(killed: int) -> str:
    """A summary cut before its node: the event names no node, so it takes its file's.
    (Distinct counts keep reports of different files from being folded into one.)"""
    return f"{killed} Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node\n"


def parse_cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "oomlens", "parse", *args, "--format", "json"],
        input=stdin,
        capture_output=True,
        timeout=60,
        cwd=cwd,
    )


ROLES_BY_NAME = [
    ("raylet.out", "raylet", None),
    ("raylet.err", "raylet", None),
    ("raylet.1.out", "raylet", None),
    ("raylet.out.gz", "raylet", None),
    ("gcs_server.out", "gcs", None),
    ("gcs_server.1.err", "gcs", None),
    (f"python-core-worker-{WORKER_ID}_14523.log", "core_worker", 14523),
    ("python-core-driver-01000000ffffffffffffffffffffffffffffffffffffffffffffffff_14155.log", "core_worker", 14155),
    (f"worker-{WORKER_ID}-ffffffff-14523.out", "worker", 14523),
    (f"worker-{WORKER_ID}-ffffffff-14523.err", "worker", 14523),
    (f"worker-{WORKER_ID}-14523.err", "worker", 14523),  # older, job-less name
    (f"io_worker-{WORKER_ID}-01000000-777.out", "worker", 777),
    ("logs/events/event_RAYLET.log", "events", None),
    ("event_CORE_WORKER_20391.log", "events", 20391),
    ("event_EXPORT_TASK_14155.log", "events", 14155),
    ("job-driver-raysubmit_aBcD1234.log", "driver", None),
    ("driver-console.log", "driver", None),
    ("nohup.out", "driver", None),
    ("dmesg.txt", "kernel", None),
    ("kern.log.1", "kernel", None),
    ("syslog", "kernel", None),
    ("dashboard_agent.log", "other", None),
    ("monitor.out", "other", None),
    ("log_monitor.log", "other", None),
]


@pytest.mark.parametrize("name,role,pid", ROLES_BY_NAME)
def test_role_and_pid_from_name(name, role, pid):
    assert role_of(name) == (role, pid)


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".xz", ".bz2", ".GZ"])
def test_a_compressed_log_has_the_role_of_its_plain_name(suffix):
    """Every compression oomlens reads (sources.decoding) keeps the name's role and pid."""
    for name, role, pid in ROLES_BY_NAME:
        if not name.endswith((".gz", ".zst")):
            assert role_of(name + suffix) == (role, pid), name + suffix


def test_session_folder_roles_pids_and_node():
    items = list(discover([str(SESSION)]))
    by_name = {os.path.relpath(i.path, SESSION): i for i in items}
    assert list(by_name) == sorted(by_name, key=lambda p: p.split(os.sep))  # a stable order: sorted per folder
    assert by_name["driver-console.log"].role == "driver"
    assert by_name["driver-console.log"].node is None  # beside logs/, not under the raylet's folder
    assert by_name["logs/raylet.out"].role == "raylet"
    worker = by_name[f"logs/worker-{WORKER_ID}-ffffffff-14523.out"]
    assert (worker.role, worker.pid) == ("worker", 14523)
    assert by_name[f"logs/python-core-worker-{WORKER_ID}_14523.log"].pid == 14523
    assert by_name["logs/events/event_CORE_WORKER_14155.log"].role == "events"
    under_logs = [i for p, i in by_name.items() if p.startswith("logs/")]
    assert len(under_logs) > 50 and {i.node for i in under_logs} == {"192.0.2.2"}  # events/ too
    assert all(not i.problems for i in items)


def raylet_out(ip: str) -> str:
    return f"[2026-11-22 03:35:20,001 I 12399 12399] (raylet) main.cc:421: Setting node ID node_manager address: {ip}:35111\n"


def make_node(root: Path, name: str, ip: str, killed: int) -> Path:
    logs = root / name / "logs"
    (logs / "events").mkdir(parents=True)
    (logs / "raylet.out").write_text(raylet_out(ip) + nodeless(killed))
    (logs / f"worker-{WORKER_ID}-ffffffff-42.err").write_text(nodeless(killed + 1))
    (logs / "events" / "event_RAYLET.log").write_text("{}\n")
    return logs


def test_multi_node_tree_gives_each_folder_its_node(tmp_path):
    make_node(tmp_path, "node1", "10.0.0.1", 1)
    make_node(tmp_path, "node2", "10.0.0.2", 3)
    nodes = {os.path.relpath(i.path, tmp_path): i.node for i in discover([str(tmp_path)])}
    assert nodes == {
        "node1/logs/events/event_RAYLET.log": "10.0.0.1",
        "node1/logs/raylet.out": "10.0.0.1",
        f"node1/logs/worker-{WORKER_ID}-ffffffff-42.err": "10.0.0.1",
        "node2/logs/events/event_RAYLET.log": "10.0.0.2",
        "node2/logs/raylet.out": "10.0.0.2",
        f"node2/logs/worker-{WORKER_ID}-ffffffff-42.err": "10.0.0.2",
    }
    events = analyze(str(tmp_path)).events
    assert sorted((e.fields["killed"], e.node) for e in events if e.kind == "ray_oom_summary") == [
        (1, "10.0.0.1"),
        (2, "10.0.0.1"),
        (3, "10.0.0.2"),
        (4, "10.0.0.2"),
    ]


def test_session_root_reads_logs_not_runtime_resources_or_sockets(tmp_path):
    session = tmp_path / "session_2026-11-22_03-35-19_000000_1"
    shutil.copytree(SESSION / "logs", session / "logs")
    (session / "runtime_resources" / "pip" / "env").mkdir(parents=True)
    (session / "runtime_resources" / "pip" / "env" / "x.py").write_text(nodeless(1))
    (session / "sockets").mkdir()
    paths = {os.path.relpath(i.path, session).split(os.sep)[0] for i in discover([str(session)])}
    assert paths == {"logs"}


def test_the_files_watch_polls_are_the_files_parse_reads_in_its_order(tmp_path):
    """files_under (what `watch` polls, nothing opened) lists the plain files discover reads,
    in its order: a session's runtime_resources/ and sockets/ left out, a linked file once."""
    session = tmp_path / "session_2026-11-22_03-35-19_000000_1"
    shutil.copytree(SESSION / "logs", session / "logs")
    (session / "runtime_resources" / "pip").mkdir(parents=True)
    (session / "runtime_resources" / "pip" / "x.log").write_text(nodeless(1))
    (session / "sockets").mkdir()
    (session / "driver-console.log").write_text(summary(1))
    os.symlink(session / "driver-console.log", session / "zz-link.log")
    listed = [path for path, _st in files_under(str(session))]
    assert listed == [i.path for i in discover([str(session)]) if not i.problems]
    assert len(listed) > 10 and not any("runtime_resources" in p or "zz-link" in p for p in listed)
    assert [path for path, _st in files_under(str(session / "driver-console.log"))] == [str(session / "driver-console.log")]


def test_gz_and_zst_files_are_read_decompressed(tmp_path):
    text = "".join(summary(n) for n in (1, 2, 3)).encode()
    (tmp_path / "raylet.out.gz").write_bytes(gzip.compress(text))
    (tmp_path / "driver.log.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    (tmp_path / "no_suffix").write_bytes(gzip.compress(text))  # told by content, not name
    diagnosis = analyze(str(tmp_path))
    assert [(i.role, i.bytes, i.lines, i.problems) for i in diagnosis.inputs] == [
        ("driver", len(text), 3, []),
        ("other", len(text), 3, []),
        ("raylet", len(text), 3, []),
    ]
    per_file = {}
    for e in diagnosis.events:
        for s in e.sources:
            per_file.setdefault(os.path.basename(s.path), set()).add(e.fields["killed"])
    assert per_file == {"driver.log.zst": {1, 2, 3}, "no_suffix": {1, 2, 3}, "raylet.out.gz": {1, 2, 3}}


def session_tar(path: Path, mode: str) -> None:
    """A two-node session archive whose raylet.out files come after the workers' files."""
    members = [
        ("session/node1/logs/worker-" + WORKER_ID + "-ffffffff-42.err", nodeless(1)),
        ("session/node1/logs/events/event_RAYLET.log", "{}\n"),
        ("session/node2/logs/raylet.out", raylet_out("10.0.0.2") + nodeless(2)),
        ("session/node2/logs/worker-" + WORKER_ID + "-ffffffff-43.err", nodeless(3)),
        ("session/node1/logs/raylet.out", raylet_out("10.0.0.1")),
        ("session/driver-console.log", summary(7)),
    ]
    with tarfile.open(path, mode) as tar:
        for name, text in members:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("name,mode", [("s.tar.gz", "w:gz"), ("s.tgz", "w:gz"), ("s.tar", "w"), ("bundle", "w:gz")])
def test_session_archive_members_roles_and_nodes(tmp_path, name, mode):
    session_tar(tmp_path / name, mode)
    diagnosis = analyze(str(tmp_path / name))
    got = {i.path.split(":", 1)[1]: (i.role, i.pid, i.node, i.bytes > 0) for i in diagnosis.inputs}
    assert got == {
        f"session/node1/logs/worker-{WORKER_ID}-ffffffff-42.err": ("worker", 42, "10.0.0.1", True),
        "session/node1/logs/events/event_RAYLET.log": ("events", None, "10.0.0.1", True),
        "session/node2/logs/raylet.out": ("raylet", None, "10.0.0.2", True),
        f"session/node2/logs/worker-{WORKER_ID}-ffffffff-43.err": ("worker", 43, "10.0.0.2", True),
        "session/node1/logs/raylet.out": ("raylet", None, "10.0.0.1", True),
        "session/driver-console.log": ("driver", None, None, True),
    }
    # the worker of node1 was read before node1's raylet.out: its event still gets the node
    nodes = sorted((e.fields["killed"], e.node) for e in diagnosis.events if e.kind == "ray_oom_summary")
    assert nodes == [(1, "10.0.0.1"), (2, "10.0.0.2"), (3, "10.0.0.2"), (7, "10.95.143.76")]


def test_tar_zst_archive(tmp_path):
    session_tar(tmp_path / "s.tar", "w")
    (tmp_path / "s.tar.zst").write_bytes(zstandard.ZstdCompressor().compress((tmp_path / "s.tar").read_bytes()))
    diagnosis = analyze(str(tmp_path / "s.tar.zst"))
    assert len(diagnosis.inputs) == 6 and not diagnosis.problems
    assert sum(e.kind == "ray_oom_summary" for e in diagnosis.events) == 4


def test_archive_streams_from_a_pipe(tmp_path):
    """Standard input cannot seek: reading an archive from it proves members are streamed."""
    session_tar(tmp_path / "s.tgz", "w:gz")
    run = parse_cli("-", stdin=(tmp_path / "s.tgz").read_bytes())
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out["inputs"]) == 6 and all(i["path"].startswith("-:session/") for i in out["inputs"])
    assert sum(e["kind"] == "ray_oom_summary" for e in out["events"]) == 4


def test_stdin_plain_and_gzip():
    text = summary(3).encode()
    for data in (text, gzip.compress(text)):
        run = parse_cli("-", stdin=data)
        assert run.returncode == 0 and run.stderr == b""
        out = json.loads(run.stdout)
        assert out["inputs"] == [{"path": "-", "role": "driver", "bytes": len(text), "lines": 1, "problems": []}]
        assert [(e["kind"], e["fields"]["killed"], e["source"]["path"]) for e in out["events"]] == [("ray_oom_summary", 3, "-")]


def test_empty_stdin_is_read_and_exits_zero():
    run = parse_cli("-", stdin=b"")
    assert run.returncode == 0
    assert json.loads(run.stdout)["inputs"][0]["bytes"] == 0


def test_named_pipe_given_on_the_command_line_is_read(tmp_path):
    fifo = tmp_path / "driver.log"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(summary(5)))
    writer.start()
    diagnosis = analyze(str(fifo))
    writer.join(5)
    assert [(i.role, i.bytes, i.problems) for i in diagnosis.inputs] == [("driver", len(summary(5)), [])]
    assert [e.fields["killed"] for e in diagnosis.events] == [5]


def test_same_file_named_twice_is_read_once(tmp_path):
    (tmp_path / "a.log").write_text(summary(1))
    os.symlink(tmp_path / "a.log", tmp_path / "b.log")
    diagnosis = analyze(str(tmp_path), str(tmp_path / "a.log"))
    assert [(os.path.basename(i.path), i.bytes, i.problems) for i in diagnosis.inputs] == [
        ("a.log", len(summary(1)), []),
        ("b.log", 0, [f"same as {tmp_path / 'a.log'} (a link, or a link loop): not read again"]),
        ("a.log", 0, [f"same as {tmp_path / 'a.log'} (a link, or a link loop): not read again"]),
    ]
