"""Bad input: every problem told once (in `inputs[].problems` and as one stderr line),
everything readable still parsed, no traceback, no hang, memory bounded."""

from __future__ import annotations

import ctypes
import errno
import gzip
import io
import json
import os
import random
import socket
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import zlib
from pathlib import Path

import pytest
import zstandard

from oomlens import analyze, scan
from oomlens.grammars import families
from oomlens.pipeline import read_input
from oomlens.scan import CHUNK, OVERLAP, FileContext, Scanner
from oomlens.sources import Input, decoding, discover
from oomlens.sources.decoding import text_stream

TRIGGER = (
    "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) "
    "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
    "351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time period."
)


def summary(killed: int) -> bytes:
    """A distinct OOM summary line per `killed`, one ray_oom_summary event each."""
    return TRIGGER.replace("1 Workers (tasks", f"{killed} Workers (tasks").encode() + b"\n"


def cli(*args: str, stdin: bytes | None = None, **kw) -> subprocess.CompletedProcess:
    """Run `oomlens parse ... --format json`; it must never hang or show a traceback."""
    run = subprocess.run(
        [sys.executable, "-m", "oomlens", "parse", *args, "--format", "json"],
        input=stdin,
        capture_output=True,
        timeout=60,
        **kw,
    )
    run.stdout, run.stderr = run.stdout.decode(), run.stderr.decode()
    assert "Traceback" not in run.stderr, run.stderr
    return run


def killed(events) -> list[int]:
    return sorted(e["fields"]["killed"] if isinstance(e, dict) else e.fields["killed"] for e in events)


def one_family() -> tuple:
    """Only the summary family: tests of the reading loop measure the loop, not the cost of
    every family's triggers."""
    return tuple(f for f in families() if f.name == "ray_oom_summary")


class Trickle(io.RawIOBase):
    """A pipe that hands out at most `step` bytes per read."""

    def __init__(self, data: bytes, step: int) -> None:
        self.inner, self.step = io.BytesIO(data), step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        return self.inner.readinto(memoryview(buffer)[: self.step])


# -- binary, invalid UTF-8 ----------------------------------------------------------------


def test_binary_file_is_not_read_and_the_rest_is(tmp_path):
    (tmp_path / "blob.bin").write_bytes(os.urandom(20000))  # few NULs: told apart by its invalid UTF-8
    (tmp_path / "driver.log").write_bytes(summary(2))
    run = cli(str(tmp_path))
    assert run.returncode == 0
    assert run.stderr.splitlines() == [f"oomlens: {tmp_path}/blob.bin: binary file (not text): not read"]
    out = json.loads(run.stdout)
    assert [(i["bytes"], i["problems"]) for i in out["inputs"]] == [(0, ["binary file (not text): not read"]), (len(summary(2)), [])]
    assert killed(out["events"]) == [2]


def test_only_binary_input_exits_1_with_one_clear_line(tmp_path):
    (tmp_path / "core").write_bytes(bytes(5000) + os.urandom(5000))
    run = cli(str(tmp_path / "core"))
    assert run.returncode == 1
    assert run.stderr.splitlines() == [f"oomlens: {tmp_path}/core: binary file (not text): not read"]  # one line: the problem says it


def test_invalid_utf8_lines_are_counted_and_still_parsed(tmp_path):
    long_bad = b"x" * (3 << 20)  # one line, two bad bytes far apart: counted once
    long_bad = long_bad[:1000] + b"\xff" + long_bad[1000 : 2 << 20] + b"\xfe" + long_bad[2 << 20 :]
    data = b"".join(
        [
            b"caf\xe9 latin-1\n",
            summary(4).rstrip(b"\n") + b" \xff\n",
            "valid UTF-8 stays quiet: h\u00e9llo \u2713 \U0001f600\n".encode(),
            "\u00e9".encode() * (3 << 19) + b"\n",  # a 3 MiB valid line of 2-byte characters
            long_bad + b"\n",
            b"ok\n",
        ]
    )
    (tmp_path / "mixed.log").write_bytes(data)
    diagnosis = analyze(str(tmp_path / "mixed.log"))
    item = diagnosis.inputs[0]
    assert item.problems == [
        "2 line(s) longer than 1 MiB: scanned in pieces of that size",
        "3 line(s) with invalid UTF-8, shown as U+FFFD",
    ]
    assert (item.bytes, item.lines) == (len(data), 6)
    [event] = diagnosis.events
    assert event.fields["killed"] == 4 and event.text.endswith("\ufffd") and event.source.line == 2


def test_valid_utf8_is_not_reported():
    s = Scanner(FileContext("x"), one_family())
    data = ("\u00e9\u4e2d\U0001f600 " * 700_000 + "\n").encode() * 3  # multi-byte characters across every cut
    assert list(s.events(io.BytesIO(data))) == [] and s.problems == ["3 line(s) longer than 1 MiB: scanned in pieces of that size"]


# -- long lines ---------------------------------------------------------------------------

LONG_LINE = textwrap.dedent(
    """
    import json, sys
    import oomlens.scan as scan
    from oomlens import analyze
    only = tuple(f for f in scan.families() if f.name == "ray_oom_summary")
    scan.families = lambda: only
    path, trigger = sys.argv[1], sys.argv[2].encode()
    with open(path, "wb") as fh:  # 200 MB in one line, the trigger in its middle
        fh.write(b"first line\\n")
        for i in range(200):
            fh.write(b"x" * 1_000_000)
            if i == 100:
                fh.write(trigger)
        fh.write(b"\\nlast line\\n")
    def peak():  # this program's own (VmHWM is reset by execve; ru_maxrss keeps the forking parent's)
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    before = peak()
    d = analyze(path)
    after = peak()
    print(json.dumps({"before_kb": before, "after_kb": after, "inputs": d.to_dict()["inputs"],
                      "events": [(e.kind, e.fields["killed"], e.source.line) for e in d.events]}))
    """
)


def test_200mb_line_bounded_memory_and_trigger_found(tmp_path):
    """The whole path (file, sources, pipeline, scan) on a 200 MB line, in a fresh process
    so its peak RSS is its own. Only the ray_oom_summary family is loaded: this measures
    the reading loop, not the speed of the other families' triggers."""
    run = subprocess.run(
        [sys.executable, "-c", LONG_LINE, str(tmp_path / "long.log"), TRIGGER],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["events"] == [["ray_oom_summary", 1, 2]]
    [item] = out["inputs"]
    assert (item["bytes"], item["lines"]) == (200_000_000 + len(TRIGGER) + len("first line\n\nlast line\n"), 3)
    assert item["problems"] == ["1 line(s) longer than 1 MiB: scanned in pieces of that size"]
    grown_mb = (out["after_kb"] - out["before_kb"]) / 1024
    assert grown_mb < 100, f"reading a 200 MB line grew the peak RSS by {grown_mb:.0f} MB"
    assert out["after_kb"] / 1024 < 300


@pytest.mark.parametrize("step", [CHUNK, 100_003])
def test_trigger_cut_by_a_piece_boundary_is_found_once(step):
    """The pieces of a long line overlap: a trigger across any cut is found, and only once."""
    trigger = TRIGGER.encode()
    first_cut = CHUNK - OVERLAP  # where the first piece of a line read in full chunks ends
    for at in [0, first_cut - len(trigger) - 1, first_cut - 40, first_cut - 1, first_cut, first_cut + 3, (9 << 20) - len(trigger)]:
        line = b"y" * at + trigger + b"y" * ((9 << 20) - at - len(trigger))
        s = Scanner(FileContext("x"), one_family())
        events = list(s.events(Trickle(b"a\n" + line + b"\nb", step)))
        assert [(e.fields["killed"], e.source.line) for e in events] == [(1, 2)], at
        assert (s.lines_read, s.bytes_read) == (3, len(line) + 4)


# -- compressed input: cuts and bombs -----------------------------------------------------


def test_truncated_gz_parses_everything_before_the_cut(tmp_path):
    text = b"".join(summary(n) for n in range(1, 2001))
    packed = gzip.compress(text)
    cut = packed[: len(packed) // 2]
    (tmp_path / "raylet.out.gz").write_bytes(cut)
    readable = zlib.decompressobj(31).decompress(cut)  # what the cut still holds
    complete = readable.count(b"\n")
    diagnosis = analyze(str(tmp_path / "raylet.out.gz"))
    item = diagnosis.inputs[0]
    assert item.bytes == len(readable) and item.lines == complete + 1
    assert item.problems == [f"gzip data cut or damaged after {len(readable)} bytes: Compressed file ended before the end-of-stream marker was reached"]
    assert killed(diagnosis.events)[:complete] == list(range(1, complete + 1))


def text_bomb(size: int) -> bytes:
    """`size` bytes of log-like text (no trigger) as a gzip of about size/500 bytes."""
    member = gzip.compress(b"spam line\n" * (1 << 20), 9)
    return member * (size // (10 << 20))  # concatenated gzip members are one valid stream


def test_gzip_bomb_is_stopped_quickly(tmp_path, monkeypatch):
    monkeypatch.setattr(decoding, "BOMB_FLOOR", 2 << 20)
    (tmp_path / "bomb.log.gz").write_bytes(gzip.compress(summary(9)) + text_bomb(1 << 30))
    started = time.monotonic()
    diagnosis = analyze(str(tmp_path / "bomb.log.gz"))
    assert time.monotonic() - started < 10
    item = diagnosis.inputs[0]
    assert (2 << 20) < item.bytes <= (2 << 20) + CHUNK
    [problem] = item.problems
    assert problem.startswith(f"decompression stopped after {item.bytes} bytes, more than 100x the ")
    assert problem.endswith(" compressed bytes read (a decompression bomb?)")
    assert killed(diagnosis.events) == [9]  # what came before the stop is parsed


def test_zstd_bomb_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(decoding, "BOMB_FLOOR", 2 << 20)
    packed = zstandard.ZstdCompressor().compress(b"spam line\n" * (5 << 20))  # 50 MiB in a few kB
    (tmp_path / "bomb.zst").write_bytes(packed)
    item = analyze(str(tmp_path / "bomb.zst")).inputs[0]
    assert item.bytes <= (2 << 20) + CHUNK
    assert len(item.problems) == 1 and "(a decompression bomb?)" in item.problems[0]


def test_default_bomb_limit_stops_a_2gb_bomb_in_seconds():
    """The shipped limits, at the stream level (decompression only, no scan)."""
    bomb = text_bomb(2 << 30)
    assert len(bomb) * 500 < 2 << 30  # about 4 MB
    item = Input("bomb.gz")
    stream = text_stream(io.BufferedReader(io.BytesIO(bomb)), item)
    started, total = time.monotonic(), 0
    while chunk := stream.read(CHUNK):
        total += len(chunk)
    assert time.monotonic() - started < 5
    assert decoding.BOMB_FLOOR < total <= decoding.BOMB_FLOOR + CHUNK
    assert len(item.problems) == 1 and "(a decompression bomb?)" in item.problems[0]


def test_gzip_of_zeros_is_binary_and_never_inflated(tmp_path):
    (tmp_path / "zeros.gz").write_bytes(gzip.compress(bytes(64 << 20)))
    started = time.monotonic()
    [item] = analyze(str(tmp_path / "zeros.gz")).inputs
    assert time.monotonic() - started < 2
    assert (item.bytes, item.problems) == (0, ["binary file (not text): not read"])


def test_truncated_tar_gz_reports_what_was_read(tmp_path):
    sizes = []
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for n in range(1, 6):
            data = summary(n) + os.urandom(60000).hex().encode() + b"\n"  # compresses 2x, evenly
            sizes.append(len(data))
            info = tarfile.TarInfo(f"session/logs/worker-{n:040x}-ffffffff-{100 + n}.out")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    packed = buf.getvalue()
    (tmp_path / "s.tgz").write_bytes(packed[: len(packed) // 2])  # the cut falls inside the third member
    diagnosis = analyze(str(tmp_path / "s.tgz"))
    first, second, third, archive = diagnosis.inputs
    assert [(first.bytes, first.problems), (second.bytes, second.problems)] == [(sizes[0], []), (sizes[1], [])]
    assert 0 < third.bytes < sizes[2]
    assert third.problems == [f"archive member data cut or damaged after {third.bytes} bytes: unexpected end of data"]
    assert archive.path == str(tmp_path / "s.tgz") and archive.problems[0].startswith("gzip data cut or damaged after ")
    assert archive.problems[1:] == ["archive cut or damaged after 3 member(s): unexpected end of data"]
    assert killed(diagnosis.events) == [1, 2, 3]  # the third member's trigger came before the cut


# -- what a folder walk meets -------------------------------------------------------------


def test_special_files_in_a_walk_are_never_opened(tmp_path):
    walk = tmp_path / "logs"
    walk.mkdir()
    os.mkfifo(walk / "fifo.log")  # opening it would block forever: no writer
    os.symlink("/dev/zero", walk / "zero.log")  # reading it would never end
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(walk / "raylet.sock"))
    os.symlink("nowhere", walk / "dangling.log")
    os.symlink("loop_b", walk / "loop_a")
    os.symlink("loop_a", walk / "loop_b")
    os.symlink(".", walk / "up")  # a folder link back to itself
    (walk / "empty").mkdir()
    (walk / "raylet.err").write_bytes(summary(3))
    try:
        run = cli(str(walk))
    finally:
        server.close()
    assert run.returncode == 0
    assert run.stderr.splitlines() == [
        f"oomlens: {walk}/dangling.log: dangling symbolic link: nothing read",
        f"oomlens: {walk}/empty: empty folder: nothing to read",
        f"oomlens: {walk}/fifo.log: a named pipe, not a regular file: not read",
        f"oomlens: {walk}/loop_a: symbolic link loop: nothing read",
        f"oomlens: {walk}/loop_b: symbolic link loop: nothing read",
        f"oomlens: {walk}/raylet.sock: a socket, not a regular file: not read",
        f"oomlens: {walk}/up: same as {walk} (a link, or a link loop): not read again",
        f"oomlens: {walk}/zero.log: a device, not a regular file: not read",
    ]
    out = json.loads(run.stdout)
    assert killed(out["events"]) == [3]
    assert [i["bytes"] for i in out["inputs"] if i["path"].endswith("raylet.err")] == [len(summary(3))]


def test_empty_folder_alone_exits_1(tmp_path):
    run = cli(str(tmp_path))
    assert run.returncode == 1
    assert run.stderr.splitlines() == [f"oomlens: {tmp_path}: empty folder: nothing to read"]
    assert json.loads(run.stdout)["inputs"] == [{"path": str(tmp_path), "role": "other", "bytes": 0, "lines": 0, "problems": ["empty folder: nothing to read"]}]


def test_empty_folder_beside_a_readable_file_exits_0(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.log").write_bytes(b"")  # an empty file is read: zero bytes, no problem
    run = cli(str(tmp_path / "empty"), str(tmp_path / "empty.log"))
    assert run.returncode == 0
    assert run.stderr.splitlines() == [f"oomlens: {tmp_path}/empty: empty folder: nothing to read"]


def test_exit_codes_for_missing_paths_and_usage(tmp_path):
    missing = cli(str(tmp_path / "nope"))
    assert missing.returncode == 1
    assert missing.stderr.splitlines()[0] == f"oomlens: {tmp_path}/nope: no such file or folder: nothing read"
    assert cli().returncode == 2  # no path at all: click's usage error
    assert cli(str(tmp_path), "--no-such-option").returncode == 2


def test_file_name_that_is_not_utf8(tmp_path):
    name = os.fsencode(tmp_path) + b"/caf\xe9.log"
    with open(name, "wb") as fh:
        fh.write(summary(6))
    run = cli(str(tmp_path))
    assert run.returncode == 0 and run.stderr == ""
    out = json.loads(run.stdout)
    assert out["inputs"][0]["path"] == f"{tmp_path}/caf\ufffd.log"
    assert killed(out["events"]) == [6]


# -- files that refuse to be read ---------------------------------------------------------


def drop_file_permission_override() -> None:
    """In the child, before exec: root loses CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so
    the kernel checks file modes for it as for anyone (PR_CAPBSET_DROP = 24)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def locked(tmp_path):
    """A readable file, a mode-000 file and a mode-000 folder, with a way to run the CLI
    under which the kernel really refuses them (EACCES), whoever runs the tests."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    (root / "good.log").write_bytes(summary(8))
    (root / "secret.log").write_bytes(summary(9))
    (root / "private").mkdir()
    (root / "private" / "inner.log").write_bytes(summary(10))
    os.chmod(root / "secret.log", 0)
    os.chmod(root / "private", 0)
    preexec = drop_file_permission_override if os.geteuid() == 0 else None
    probe = subprocess.run(["cat", str(root / "secret.log")], preexec_fn=preexec, capture_output=True)
    if probe.returncode == 0:
        pytest.skip("cannot make the kernel refuse a file here (no CAP_SETPCAP?)")
    yield root, preexec
    os.chmod(root / "private", 0o755)


def test_unreadable_file_and_folder_are_told_the_rest_is_read(locked):
    root, preexec = locked
    run = cli(str(root), preexec_fn=preexec)
    assert run.returncode == 0
    assert run.stderr.splitlines() == [
        f"oomlens: {root}/private: cannot list folder: Permission denied",
        f"oomlens: {root}/secret.log: cannot read (Permission denied): nothing read",
    ]
    assert killed(json.loads(run.stdout)["events"]) == [8]


def test_only_unreadable_input_exits_1(locked):
    root, preexec = locked
    run = cli(str(root / "secret.log"), preexec_fn=preexec)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [f"oomlens: {root}/secret.log: cannot read (Permission denied): nothing read"]


def test_open_failing_after_discovery_is_a_problem(tmp_path, monkeypatch):
    """Simulated (monkeypatched `open`): what happens when a file found readable cannot be
    opened a moment later — it proves the handling, not the kernel's refusal."""
    (tmp_path / "raylet.out").write_bytes(summary(1))
    [item] = discover([str(tmp_path / "raylet.out")])

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(decoding, "open", refuse, raising=False)
    assert read_input(item) == []
    assert (item.bytes, item.problems) == (0, ["cannot open (Permission denied): nothing read"])


class FailingDisk(io.RawIOBase):
    """A file whose disk fails (EIO) after `good` bytes."""

    def __init__(self, data: bytes, good: int) -> None:
        self.data, self.good, self.pos = data, good, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.pos >= self.good:
            raise OSError(errno.EIO, "Input/output error")
        n = min(len(buffer), self.good - self.pos)
        buffer[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def test_read_error_midway_keeps_what_was_read():
    data = b"".join(summary(n) for n in range(1, 101))
    good = len(summary(1)) * 40
    item = Input("disk.log", opener=lambda: FailingDisk(data, good))
    events = read_input(item)
    assert killed(events) == list(range(1, 41))
    assert (item.bytes, item.problems) == (good, [f"read failed after {good} bytes: Input/output error"])


def test_an_oomlens_error_costs_only_its_input(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_bytes(summary(1))
    (tmp_path / "b.log").write_bytes(summary(2))
    real = Scanner.events

    def broken(self, stream):
        if self.ctx.path.endswith("a.log"):
            raise RuntimeError("boom")
        return real(self, stream)

    monkeypatch.setattr(scan.Scanner, "events", broken)
    diagnosis = analyze(str(tmp_path))
    assert diagnosis.inputs[0].problems == ["oomlens failed on this input, rest not read (please report): RuntimeError: boom"]
    assert killed(diagnosis.events) == [2]


def test_stdin_binary_and_closed():
    binary = cli("-", stdin=bytes(4000) + os.urandom(4000))
    assert binary.returncode == 1
    assert binary.stderr.splitlines()[0] == "oomlens: -: binary data (not text): not read"
    closed = cli("-", preexec_fn=lambda: os.close(0))
    assert closed.returncode == 1
    assert closed.stderr.splitlines()[0] == "oomlens: -: closed: nothing read"


# -- what binary means: NUL bytes or control bytes, never invalid UTF-8 --------------------

OOM_LINE = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n"


def test_a_log_full_of_invalid_utf8_is_read_and_its_oom_found(tmp_path):
    """A worker log whose neighbours of the OOM line are Latin-1 and random high bytes."""
    noise = [bytes(range(0x80, 0x100)) + b"\n", "caf\u00e9 na\u00efve r\u00e9sum\u00e9\n".encode("latin-1")] * 20
    log = tmp_path / "worker-01-ffff-4242.err"
    log.write_bytes(b"".join(noise[:20]) + OOM_LINE + b"".join(noise[20:]))
    out = json.loads(cli(str(log), "--format", "json").stdout)
    assert [(e["kind"], e["fields"]["requested_bytes"]) for e in out["events"]] == [("cuda_oom", 2 << 30)]
    (item,) = out["inputs"]
    assert item["problems"] == ["40 line(s) with invalid UTF-8, shown as U+FFFD"]


def test_a_leading_hole_of_nul_bytes_is_skipped_not_called_binary(tmp_path):
    """logrotate's copytruncate leaves the old size as NUL bytes before the new text."""
    log = tmp_path / "raylet.out"
    log.write_bytes(bytes(64 << 10) + OOM_LINE)
    out = json.loads(cli(str(log), "--format", "json").stdout)
    assert [e["kind"] for e in out["events"]] == ["cuda_oom"]


@pytest.mark.parametrize("hole", [bytes(4096), bytes(8192), bytes(70_000), bytes(3585) + b"INFO torn \0write\n"])
def test_a_few_lines_before_a_hole_of_nul_bytes_are_read(hole, tmp_path):
    """A node that crashed leaves its log's last pages as NUL bytes: the lines before the hole
    are what it wrote last, too few to be judged by their share of the head (the fuzz run's
    seed 207_ray_28776: a Ray OOM kill's first line, then 70,000 NUL bytes; or 3,585 and a
    stray one behind them)."""
    log = tmp_path / "raylet.out"
    log.write_bytes(OOM_LINE + hole + OOM_LINE.replace(b"2.00 GiB", b"3.00 GiB"))
    out = json.loads(cli(str(log), "--format", "json").stdout)
    second = 2 + hole.count(b"\n")
    assert [(e["kind"], e["source"]["line"], e["fields"]["requested_bytes"] >> 30) for e in out["events"]] == [("cuda_oom", 1, 2), ("cuda_oom", second, 3)]


def test_a_few_bytes_before_a_hole_are_text_only_when_they_read_as_nothing_else():
    from oomlens.sources.decoding import is_binary

    rng = random.Random(3)
    for _ in range(200):  # random bytes never pass as the few lines before a hole
        assert is_binary(rng.randbytes(rng.randrange(1, 500)) + bytes(8000))
    assert not is_binary(OOM_LINE + bytes(8000))
    assert is_binary(b"\x01\x02 not a log line\n" + bytes(8000))  # control bytes, one in ten: no text
    assert not is_binary(OOM_LINE * 3 + b"\x01" + bytes(8000))  # one at the hole's edge, a torn write (the fuzz run's 5fa988d6)
    assert is_binary(b"no line break at all" + bytes(8000))
    assert is_binary("INFO all is well\n".encode("utf-16-le") * 20)  # a NUL every other byte: no log of ours


def test_scattered_nul_bytes_are_binary_a_stray_one_is_not():
    from oomlens.sources.decoding import is_binary

    text = b"INFO all is well\n" * 500
    assert not is_binary(text[:4000] + b"\0" + text[4000:])
    assert is_binary(bytes(b if i % 50 else 0 for i, b in enumerate(text)))
    assert is_binary(bytes(4096))
    assert not is_binary(bytes(range(0x80, 0x100)) * 30)  # invalid UTF-8 is text


def test_a_few_stray_nul_bytes_in_a_small_log_leave_it_text(tmp_path):
    """A torn write leaves a NUL or two in a line; a 1 KB log that holds two is still read
    (the fuzz run's f853feb50f66639c), while random bytes (one NUL in 256) stay binary."""
    from oomlens.sources.decoding import is_binary

    text = summary(3)
    torn = text[:40] + b"\0" + text[40:80] + b"\0" + text[80:]
    assert not is_binary(torn) and is_binary(os.urandom(4000))
    (tmp_path / "raylet.out").write_bytes(torn)
    run = cli(str(tmp_path / "raylet.out"))
    assert run.returncode == 0 and killed(json.loads(run.stdout)["events"]) == [3]
