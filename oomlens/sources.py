"""Sources: turn the paths a user names into readable inputs, each with what its name says.

A Ray session folder is walked recursively and each file gets its role from its name
(raylet, gcs, core worker, worker `.out/.err` with its pid, events, driver, kernel);
`.gz` and `.zst` are decompressed as streams, `.tar.gz`/`.tgz`/`.tar` archives are read
member by member, and `-` is standard input. Nothing that cannot be read is skipped in
silence: every problem becomes a sentence in the input's `problems`.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BOMB_RATIO = 1000  # decompressed/compressed beyond this (and past BOMB_FLOOR) is a bomb
BOMB_FLOOR = 1 << 30
SNIFF = 8192

WORKER = re.compile(r"^(?:python-core-worker|python-core-driver)-[0-9a-f]+_(\d+)\.log$")
WORKER_OUT = re.compile(r"^(?:io_)?worker-[0-9a-f]+(?:-[0-9a-f]+)?-(\d+)\.(?:out|err)$")
NODE_IN_RAYLET = re.compile(rb"node_manager address: ([\d.]+):|\[state-dump\] Node name: ([\d.]+)")

ROLES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^raylet(?:\.\d+)?\.(?:out|err)$"), "raylet"),
    (re.compile(r"^gcs_server(?:\.\d+)?\.(?:out|err)$"), "gcs"),
    (WORKER, "core_worker"),
    (WORKER_OUT, "worker"),
    (re.compile(r"^event_[A-Z_]+(?:_\d+)?\.log$"), "events"),
    (re.compile(r"^(?:job-driver-.*\.log|driver.*|.*console.*|nohup.*\.out)$"), "driver"),
    (re.compile(r"^(?:dmesg.*|kern\.log.*|syslog.*|messages.*|journal.*)$"), "kernel"),
]


@dataclass
class Input:
    """One readable stream and what is known of it before reading it."""

    path: str
    role: str = "other"
    pid: int | None = None
    node: str | None = None
    opener: Callable[[], BinaryIO] | None = None
    bytes: int = 0
    lines: int = 0
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "role": self.role, "bytes": self.bytes, "lines": self.lines, "problems": self.problems}


def role_of(name: str) -> tuple[str, int | None]:
    """The role and pid a Ray log file's name tells (formats.md §7)."""
    base = re.sub(r"\.(gz|zst)$", "", os.path.basename(name))
    for pattern, role in ROLES:
        m = pattern.match(base)
        if m:
            pid = int(m.group(1)) if m.groups() and m.group(1) else None
            return role, pid
    return "other", None


def discover(paths: list[str]) -> Iterator[Input]:
    """Every input under the given paths, in a stable order, problems included.

    Archive members stream: read each input before asking for the next."""
    for path in paths:
        if path == "-":
            yield Input("-", "driver", opener=lambda: sys.stdin.buffer)
        else:
            yield from _walk(path, set())


def _walk(path: str, seen: set[tuple[int, int]]) -> Iterator[Input]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        what = "a dangling symbolic link" if os.path.islink(path) else "no such file or folder"
        yield Input(path, problems=[f"{what}: nothing read"])
        return
    except OSError as err:
        yield Input(path, problems=[f"cannot read: {err.strerror or err}"])
        return
    if stat.S_ISDIR(st.st_mode):
        key = (st.st_dev, st.st_ino)
        if key in seen:
            yield Input(path, problems=["symbolic link loop: folder already read, not read again"])
            return
        seen.add(key)
        try:
            names = sorted(os.listdir(path))
        except OSError as err:
            yield Input(path, problems=[f"cannot list folder: {err.strerror or err}"])
            return
        children = [os.path.join(path, n) for n in names]
        if not children:
            yield Input(path, problems=["empty folder: nothing to read"])
            return
        node = _node_of_folder(path, names)
        for child in children:
            for item in _walk(child, seen):
                if item.node is None and node is not None:
                    item.node = node
                yield item
        return
    if not stat.S_ISREG(st.st_mode):
        kind = "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        yield Input(path, problems=[f"{kind}, not a regular file: not read"])
        return
    yield from _file(path, st.st_size)


def _node_of_folder(path: str, names: list[str]) -> str | None:
    """A Ray session's logs folder names its node in raylet.out."""
    if "raylet.out" not in names:
        return None
    try:
        with open(os.path.join(path, "raylet.out"), "rb") as fh:
            m = NODE_IN_RAYLET.search(fh.read(1 << 16))
    except OSError:
        return None
    return (m.group(1) or m.group(2)).decode() if m else None


def _file(path: str, size: int) -> Iterator[Input]:
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF)
    except OSError as err:
        yield Input(path, problems=[f"cannot read: {err.strerror or err}"])
        return
    lower = path.lower()
    if lower.endswith((".tar", ".tar.gz", ".tgz", ".tar.zst")) or _is_tar(path, head):
        yield from _archive(path)
        return
    role, pid = role_of(path)
    item = Input(path, role, pid)
    if head.startswith(GZIP_MAGIC):
        item.opener = lambda: Limited(gzip.open(path, "rb"), item, size, "gzip")
    elif head.startswith(ZSTD_MAGIC):
        item.opener = lambda: Limited(_zstd_reader(open(path, "rb")), item, size, "zstd")
    elif is_binary(head):
        item.problems.append("binary file (not text): not read")
    else:
        item.opener = lambda: open(path, "rb")
    yield item


def _is_tar(path: str, head: bytes) -> bool:
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as fh:
                inner = fh.read(512)
        except (OSError, EOFError, zlib.error):
            return False
        return inner[257:262] == b"ustar"
    return head[257:262] == b"ustar"


def _archive(path: str) -> Iterator[Input]:
    """Members of a session archive, streamed: each member is readable until the next is yielded."""
    size = os.path.getsize(path)
    try:
        if path.lower().endswith(".zst"):
            tar = tarfile.open(fileobj=_zstd_reader(open(path, "rb")), mode="r|")
        else:
            tar = tarfile.open(path, "r|*")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        yield Input(path, problems=[f"unreadable archive: {err}"])
        return
    count = 0
    try:
        for member in tar:
            if member.isdir():
                continue
            count += 1
            name = f"{path}:{member.name}"
            if not member.isfile():
                yield Input(name, problems=["archive member is a link or special file: not read"])
                continue
            role, pid = role_of(member.name)
            item = Input(name, role, pid)
            reader = tar.extractfile(member)
            head = reader.peek(SNIFF)[:SNIFF] if reader is not None else b""
            if reader is None:
                item.problems.append("archive member has no data")
            elif head.startswith(GZIP_MAGIC):
                item.opener = lambda r=reader, it=item: Limited(gzip.GzipFile(fileobj=r), it, size, "gzip")
            elif is_binary(head):
                item.problems.append("binary file (not text): not read")
            else:
                item.opener = lambda r=reader, it=item: Limited(r, it, size, "tar")
            yield item
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        yield Input(path, problems=[f"archive cut or damaged after {count} member(s): {err}"])
    finally:
        tar.close()
    if count == 0:
        yield Input(path, problems=["empty archive: nothing to read"])


def is_binary(head: bytes) -> bool:
    """Text logs may hold a stray NUL or bad byte; binary data is mostly such bytes."""
    if not head:
        return False
    if head.count(0) > len(head) // 10:
        return True
    control = sum(1 for b in head if b < 9 or 13 < b < 32)
    return control > len(head) // 5


def _zstd_reader(raw: BinaryIO) -> BinaryIO:
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


class Limited(io.RawIOBase):
    """A decompressing stream that stops at a bomb or a cut and says so in `problems`."""

    def __init__(self, inner: BinaryIO, item: Input, compressed: int, codec: str) -> None:
        self.inner, self.item, self.codec = inner, item, codec
        self.limit = max(BOMB_FLOOR, compressed * BOMB_RATIO)
        self.total = 0
        self.stopped = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self.stopped:
            return b""
        try:
            data = self.inner.read(size)
        except (EOFError, zlib.error, OSError) as err:
            self.stopped = True
            self.item.problems.append(f"{self.codec} stream cut or damaged after {self.total} bytes: {err}")
            return b""
        except Exception as err:  # zstandard raises its own ZstdError
            self.stopped = True
            self.item.problems.append(f"{self.codec} stream damaged after {self.total} bytes: {err}")
            return b""
        self.total += len(data)
        if self.total > self.limit:
            self.stopped = True
            self.item.problems.append(
                f"decompression stopped after {self.total} bytes: more than {BOMB_RATIO}x the compressed size "
                "(a decompression bomb?)"
            )
        return data

    def close(self) -> None:
        self.inner.close()
        super().close()
