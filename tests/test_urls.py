"""Logs at URLs (urls.py): a real Ray session copied into fsspec's memory file system, named
by a file:// URL, or uploaded to an S3 server (moto's, started here and stopped at the end)
reads as the same folder on disk: the same JSON, byte for byte, once the URL is written as
the folder's path. What cannot be read is one line naming the URL."""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import orjson
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import oomlens
from conftest import SESSIONS
from oomlens import urls
from oomlens.sources import discover
from test_sessions_layout import KILL, SIGKILL, ray_temp

TWO_NODES = SESSIONS / "ray2.58-m-two-node-oom"
RL_ACTOR = SESSIONS / "ray2.60-b-rl-actor-oom"


def upload(fs: Any, local: Path, to: str) -> None:
    """Copy a folder as `aws s3 sync` or `gsutil rsync` would: links followed (session_latest
    becomes a copy of the newest session), each file an object; an empty folder is made
    where the file system has folders (memory://; S3 has none)."""
    for folder, dirs, files in os.walk(local, followlinks=True):
        rel = Path(folder).relative_to(local).as_posix()
        prefix = to if rel == "." else f"{to}/{rel}"
        if not dirs and not files:
            fs.makedirs(prefix, exist_ok=True)
        for name in files:
            fs.pipe_file(f"{prefix}/{name}", (Path(folder) / name).read_bytes())


def as_local(diagnosis_or_json: Any, url: str, local: Path | str) -> bytes:
    """The contract, with the URL written as the local path it was copied from."""
    text = diagnosis_or_json if isinstance(diagnosis_or_json, bytes) else orjson.dumps(diagnosis_or_json.to_dict())
    return text.replace(url.encode(), str(local).encode())


def in_memory(tmp_path: Path, local: Path) -> str:
    """`local` copied into the memory file system under a name of this test's own (a folder's
    raylet.out node is kept per process: no two tests share a key)."""
    url = f"memory://{tmp_path.name}/{local.name}"
    upload(fsspec.filesystem("memory"), local, url)
    return url


def cli(*args: str, env: dict[str, str] | None = None, python: str | None = None) -> subprocess.CompletedProcess:
    """`oomlens parse ARGS --format json` as a user runs it (`python`: code run first)."""
    command = [sys.executable, "-m", "oomlens"] if python is None else [sys.executable, "-c", f"{python}\nfrom oomlens.cli import run\nrun()"]
    run = subprocess.run([*command, "parse", *args, "--format", "json"], capture_output=True, timeout=120, env={**os.environ, **(env or {})})
    run.stdout, run.stderr = run.stdout.decode(), run.stderr.decode()
    assert "Traceback" not in run.stderr, run.stderr
    return run


def inputs_of(items: Iterator[oomlens.sources.Input]) -> list[tuple]:
    return [(i.path, i.role, i.pid, i.node, i.session, i.size, i.problems) for i in items]


@pytest.mark.parametrize("local", [RL_ACTOR, TWO_NODES], ids=["rl-actor", "two-node"])
def test_a_session_in_memory_reads_as_the_folder_on_disk(tmp_path, local):
    url = in_memory(tmp_path, local)
    remote, here = oomlens.analyze(url, jobs=1), oomlens.analyze(str(local), jobs=1)
    assert as_local(remote, url, local) == orjson.dumps(here.to_dict())  # events, verdict, inputs, bytes, lines, problems
    assert here.incidents and not here.problems
    assert {i.node for i in remote.inputs} == {i.node for i in here.inputs} != {None}
    assert all(i.opener is not None and i.file is None for i in remote.inputs)  # read as streams, through this process
    raylet = next(i for i in remote.inputs if i.path.endswith("/logs/raylet.out"))
    assert (raylet.path, raylet.size) == (f"{url}/logs/raylet.out", (local / "logs" / "raylet.out").stat().st_size)


def test_a_file_url_through_the_command_is_the_local_parse():
    url = f"file://{TWO_NODES}"
    remote, here = cli(url), cli(str(TWO_NODES), "-j", "1")
    assert (remote.returncode, remote.stderr, here.returncode) == (0, "", 0)
    assert remote.stdout.replace(url, str(TWO_NODES)) == here.stdout
    assert json.loads(remote.stdout)["inputs"][0]["path"].startswith(f"{url}/")


def test_ray_s_tmp_folder_with_its_sessions_reads_as_on_disk(tmp_path):
    """Two sessions, Ray's empty folders, session_latest (a copy of the newest, as a copy that
    follows links makes it: not read twice), a README beside them (no log), and a kernel log
    beside a node's logs/ (that node's)."""
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    (ray / "README.md").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    shutil.copy(SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log", ray / KILL / "dmesg.log")
    url = in_memory(tmp_path, ray)
    assert fsspec.filesystem("memory").isdir(f"{url}/session_latest/logs") and fsspec.filesystem("memory").isdir(f"{url}/{KILL}/logs/nsight")
    remote, here = oomlens.analyze(url, jobs=1), oomlens.analyze(str(ray), jobs=1)
    assert as_local(remote, url, ray) == orjson.dumps(here.to_dict())
    assert not remote.problems and len(remote.incidents) == 2
    [dmesg] = [i for i in remote.inputs if i.path.endswith("dmesg.log")]
    assert (dmesg.role, dmesg.session, dmesg.node) == ("kernel", KILL, next(i.node for i in remote.inputs if i.path.endswith(f"{KILL}/logs/raylet.out")))


@pytest.mark.parametrize("how", ["latest", KILL])
def test_session_latest_or_named_at_a_url(tmp_path, how):
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    url = in_memory(tmp_path, ray)
    remote, here = oomlens.analyze(url, session=how, jobs=1), oomlens.analyze(str(ray), session=how, jobs=1)
    assert as_local(remote, url, ray) == orjson.dumps(here.to_dict())
    assert {i.session for i in remote.inputs} == {SIGKILL if how == "latest" else KILL}
    other = KILL if how == "latest" else SIGKILL
    told = oomlens.analyze(f"{url}/{other}/logs/raylet.out", session=SIGKILL if how == "latest" else KILL, jobs=1)
    assert told.problems == [f"{url}/{other}/logs/raylet.out: in Ray session {other}, not {SIGKILL if how == 'latest' else KILL}: not read"]


def test_expand_lists_what_the_walk_reads_and_each_object_alone_reads_the_same(tmp_path):
    """The split --cluster makes: the object URLs of a prefix, each read on its own (on
    another machine) with the node, session and role the walk gives it."""
    ray = ray_temp(tmp_path, KILL, SIGKILL)
    shutil.copy(SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log", ray / SIGKILL / "kern.log")
    shutil.copytree(TWO_NODES, ray / "copied")  # no session folder: read, but not with a session picked
    url = in_memory(tmp_path, ray)
    walked = inputs_of(discover([url]))
    listed = urls.expand(url)
    assert listed == [(path, size) for path, *_, size, _problems in walked]
    assert walked and not any(problems for *_, problems in walked)
    urls._raylet_node.cache_clear()  # as in another process
    assert [row for object_url, _ in listed for row in inputs_of(discover([object_url]))] == walked
    assert [row[3] for row in walked if row[0].endswith(f"{SIGKILL}/kern.log")] == [next(r[3] for r in walked if r[0].endswith(f"{SIGKILL}/logs/raylet.out"))]

    picked = urls.expand(url, session="latest")
    assert picked == [(path, size) for path, *_, size, _ in inputs_of(discover([url], session=SIGKILL))]
    assert picked and all(f"/{SIGKILL}/" in path for path, _ in picked)
    assert [row for object_url, _ in picked for row in inputs_of(discover([object_url], session=SIGKILL))] == inputs_of(discover([url], session=SIGKILL))


def test_a_tar_gz_object_is_read_member_by_member(tmp_path):
    archive = tmp_path / "session.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(TWO_NODES, arcname=KILL)
    url = f"memory://{tmp_path.name}/uploads/session.tar.gz"
    fsspec.filesystem("memory").pipe_file(url, archive.read_bytes())
    remote, here = oomlens.analyze(url, jobs=1), oomlens.analyze(str(archive), jobs=1)
    assert as_local(remote, url, archive) == orjson.dumps(here.to_dict())
    assert len(remote.inputs) == len(oomlens.analyze(str(TWO_NODES), jobs=1).inputs)
    assert {i.session for i in remote.inputs} == {KILL} and all(i.path.startswith(f"{url}:{KILL}/") for i in remote.inputs)
    folder = oomlens.analyze(str(TWO_NODES), jobs=1)
    assert [(e.kind, e.time, e.node, e.pid, e.component) for e in remote.events] == [(e.kind, e.time, e.node, e.pid, e.component) for e in folder.events]
    assert remote.verdict == {**folder.verdict, "session": KILL}  # the archive holds the logs under a session's name


def test_a_zip_object_is_read_member_by_member(tmp_path):
    """zipfile seeks (its index is at its end): an object is spooled to a temporary file,
    as a zip on standard input is, and read as the same zip on disk."""
    import zipfile

    archive = tmp_path / "session.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in TWO_NODES.rglob("*") if p.is_file()):
            zf.write(path, f"{KILL}/{path.relative_to(TWO_NODES)}")
    url = f"memory://{tmp_path.name}/uploads/session.zip"
    fsspec.filesystem("memory").pipe_file(url, archive.read_bytes())
    remote, here = oomlens.analyze(url, jobs=1), oomlens.analyze(str(archive), jobs=1)
    assert [(e.kind, e.time, e.pid, e.component) for e in remote.events] == [(e.kind, e.time, e.pid, e.component) for e in here.events]
    assert remote.events and remote.verdict == here.verdict and not remote.problems


def test_a_gz_object_a_binary_object_and_a_prefix_with_nothing(tmp_path):
    raylet = (RL_ACTOR / "logs" / "raylet.out").read_bytes()
    fs = fsspec.filesystem("memory")
    base = f"memory://{tmp_path.name}"
    fs.pipe_file(f"{base}/logs/raylet.out.gz", gzip.compress(raylet))
    fs.pipe_file(f"{base}/logs/core.dump", bytes(range(256)) * 64)
    (tmp_path / "raylet.out.gz").write_bytes(gzip.compress(raylet))
    remote = oomlens.analyze(f"{base}/logs", f"{base}/nothing-here", jobs=1)
    assert [(i.path, i.role, i.bytes, i.problems) for i in remote.inputs] == [
        (f"{base}/logs/core.dump", "other", 0, ["binary data (not text): not read"]),
        (f"{base}/logs/raylet.out.gz", "raylet", len(raylet), []),
        (f"{base}/nothing-here", "other", 0, ["nothing at this URL: nothing read"]),
    ]
    here = oomlens.analyze(str(tmp_path / "raylet.out.gz"), jobs=1)
    assert [(e.kind, e.time, e.node, e.fields) for e in remote.events] == [(e.kind, e.time, e.node, e.fields) for e in here.events] != []
    assert not oomlens.analyze(f"{base}/nothing-here", jobs=1).readable


class Reset(Exception):
    """What an HTTP client raises when the connection drops midway (not an OSError)."""


class Cut:
    """An object whose connection drops after `at` bytes."""

    def __init__(self, data: bytes, at: int) -> None:
        self.data, self.at, self.pos = data, at, 0

    def read(self, size: int = -1) -> bytes:
        if self.pos >= self.at:
            raise Reset("connection reset by peer")
        size = min(self.at - self.pos, 1 << 20 if size < 0 else size, 1 << 20)
        self.pos += size
        return self.data[self.pos - size : self.pos]

    def close(self) -> None:
        pass


class Dropping(MemoryFileSystem):
    """The memory file system, with every object's connection dropping after 6 MB."""

    protocol = "dropping"
    store: dict = {}
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.removeprefix("dropping://"))

    def _open(self, path, mode="rb", **kwargs):
        return Cut(super()._open(path, mode, **kwargs).read(), 6 << 20)


def test_a_connection_dropped_midway_is_read_failed_after_n_bytes():
    fsspec.register_implementation("dropping", Dropping, clobber=True)
    raylet = (RL_ACTOR / "logs" / "raylet.out").read_bytes()
    Dropping().pipe_file("/run/logs/raylet.out", raylet + b"a line of no interest\n" * ((10 << 20) // 22))
    diagnosis = oomlens.analyze("dropping://run/logs/raylet.out", jobs=1)
    [item] = diagnosis.inputs
    assert item.problems == [f"read failed after {item.bytes} bytes: Reset: connection reset by peer"]
    assert 0 < item.bytes <= 6 << 20
    assert [e.kind for e in diagnosis.events] == ["ray_oom_kill"]  # read before the drop


@pytest.mark.parametrize("path", ["s3://bucket/key", "memory://x", "file:///tmp/x", "simplecache::s3://bucket/key", "gs://b"])
def test_urls_are_urls(path):
    assert urls.is_url(path)


@pytest.mark.parametrize("path", ["C:/logs", "c:\\logs", "logs/raylet.out", "-", "/tmp/ray", "x:y", "driver.log"])
def test_paths_are_paths(path):
    assert not urls.is_url(path)


def test_a_folder_named_like_a_url_is_a_folder(tmp_path, monkeypatch):
    (tmp_path / "s3:" / "bucket").mkdir(parents=True)
    (tmp_path / "s3:" / "bucket" / "driver.log").write_bytes((RL_ACTOR / "driver-console.log").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert not urls.is_url("s3://bucket")
    assert [i.path for i in oomlens.analyze("s3://bucket", jobs=1).inputs] == ["s3://bucket/driver.log"]


def test_without_fsspec_a_url_says_what_to_install():
    run = cli("s3://bucket/x", python="import sys; sys.modules['fsspec'] = None")
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "oomlens: s3://bucket/x: reading URLs needs fsspec: pip install 'oomlens[urls]'",
    ]


def test_without_the_protocol_s_package_a_url_says_which(tmp_path):
    run = cli("s3://bucket/x", str(RL_ACTOR / "driver-console.log"), python="import sys; sys.modules['s3fs'] = None")
    assert run.returncode == 0
    assert run.stderr.splitlines() == ["oomlens: s3://bucket/x: reading s3:// URLs needs s3fs: pip install s3fs"]
    assert oomlens.analyze("nope://x", jobs=1).problems == ["nope://x: cannot read (ValueError: Protocol not known: nope): nothing read"]


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """An S3 server (moto's, on a free port of this machine) holding bucket `logs`, and the
    environment that points fsspec at it; stopped at the end."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        }
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            fs = fsspec.filesystem("s3", skip_instance_cache=True)
            fs.mkdir("logs")
            upload(fs, TWO_NODES, "logs/runs/two-node")
            yield env
            fsspec.filesystem("s3").clear_instance_cache()
    finally:
        server.stop()


def test_s3_through_the_command_is_the_local_parse(s3):
    url = "s3://logs/runs/two-node"
    remote, here = cli(url, env=s3), cli(str(TWO_NODES), "-j", "1")
    assert (remote.returncode, remote.stderr, here.returncode) == (0, "", 0)
    assert remote.stdout.replace(url, str(TWO_NODES)) == here.stdout
    assert urls.expand(url)[0] == (f"{url}/driver-console.log", (TWO_NODES / "driver-console.log").stat().st_size)


def test_s3_a_missing_bucket_or_an_empty_prefix_is_one_line_and_exit_1(s3):
    for url, problem in [
        ("s3://no-such-bucket/runs", "cannot read (FileNotFoundError: The specified bucket does not exist): nothing read"),
        ("s3://logs/no-such-run", "nothing at this URL: nothing read"),
    ]:
        run = cli(url, env=s3)
        assert run.returncode == 1, url
        assert run.stderr.splitlines() == [f"oomlens: {url}: {problem}"]


@pytest.mark.parametrize("url", ["file://", "file:// ", "s3://", "memory://", "simplecache::file://"])
def test_a_url_that_names_no_path_is_refused_not_read_as_the_current_folder(url, tmp_path):
    (tmp_path / "driver.log").write_bytes((RL_ACTOR / "driver-console.log").read_bytes())
    run = subprocess.run([sys.executable, "-m", "oomlens", "parse", url, "--format", "json"], capture_output=True, timeout=120, cwd=tmp_path)
    stderr = run.stderr.decode()
    assert run.returncode == 1
    assert stderr.splitlines() == [f"oomlens: {url}: names no path: nothing read"]  # one line, as for a missing path
    assert json.loads(run.stdout)["events"] == []


def test_s3_one_bad_url_of_two_is_told_and_the_good_one_read(s3):
    good, bad = "s3://logs/runs/two-node/logs", "s3://no-such-bucket/runs"
    run = cli(bad, good, env=s3)
    assert run.returncode == 0
    assert run.stderr.splitlines() == [f"oomlens: {bad}: cannot read (FileNotFoundError: The specified bucket does not exist): nothing read"]
    out = json.loads(run.stdout)
    assert out["inputs"][0]["path"] == bad and all(i["path"].startswith(f"{good}/") for i in out["inputs"][1:])
    assert out["verdict"]["root_kind"] == "ray_oom_kill"
