"""Sources: turn the paths a user names into readable inputs, each with what its name says.

A folder is walked recursively and each file gets its role from its name (raylet, gcs,
core worker, worker `.out/.err` with its pid, events, driver, kernel); a Ray `logs/`
folder gives every file under it the node its raylet.out names. `.gz` and `.zst` are
decompressed as streams, tar archives (plain, `.tar.gz`/`.tgz`, `.tar.zst`) are read
member by member, and `-` is standard input; a named pipe given by name (`<(zcat x.gz)`)
is read like standard input. In a Ray session folder (one holding `logs/`) the
`runtime_resources/` and `sockets/` folders are left out: they hold environments and
sockets, not logs. Beside `session_*` folders (in /tmp/ray) only the sessions and files
named as logs are read: a README there is no log, and `session_latest` is only a link to
the newest session. Nothing that cannot be read is skipped in silence: every problem
becomes a sentence in the input's `problems`, except the empty folders Ray itself makes
in every session's `logs/`.

Each input knows the Ray session it lies in (the `session_<date>_<time>_<pid>` folder on its
path), so that sessions are correlated apart and one of them can be read alone.

Memory stays bounded and nothing hangs: special files met in a walk (pipes, devices,
sockets, links to /dev/zero) are never opened, and a decompressed stream that grows far
beyond what its compressed bytes can honestly hold is stopped.
"""

from __future__ import annotations

import bz2
import codecs
import errno
import io
import itertools
import json
import lzma
import os
import posixpath
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, Protocol, cast

import zstandard

from ..envelopes import MAX_RECORD, Collector, collector_of, unwrapped
from .inputs import Input, error_line, shown
from .naming import ARCHIVE_NAMES, LATEST, NODE_HEAD, SESSION, Pick, _kept, _made_by_ray, _session_below, _session_in, newest, node_in, role_of, session_of

try:  # ISA-L inflates about 2.5 times as fast as zlib, with the same API and results
    from isal import isal_zlib as inflate
except ImportError:
    inflate = zlib  # type: ignore[misc]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
XZ_MAGIC = b"\xfd7zXZ\x00"
BZ2_MAGIC = b"BZh"  # then the block size, a digit 1-9
ZIP_MAGIC = b"PK\x03\x04"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # PowerShell's `>`, Windows' "Unicode" save: UTF-16 LE or BE
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark: at a file's start, and inside `cat` of two such files
ENCODED = (GZIP_MAGIC, ZSTD_MAGIC, XZ_MAGIC, ZIP_MAGIC, *UTF16_BOMS)  # heads of files whose bytes are not their text
MAX_NESTED = 4  # archives inside archives read this deep (a node's .tar.gz in a bundle is one)
# Text logs compress 5-30x; deflate cannot pass ~1030x, so a 1000x limit would stop a gzip
# bomb only at its end. A stream is a bomb when it is past BOMB_FLOOR bytes *and* more than
# BOMB_RATIO times the compressed bytes consumed so far; at scan speed the floor costs seconds.
BOMB_RATIO = 100
BOMB_FLOOR = 64 << 20
MAX_DEPTH = 200  # folders nested deeper are not entered: a walk recurses (Ray's trees are under 10 deep)
RECORDS_HEAD = 1 << 16  # bytes of a text's head whose lines tell a collector's records (envelopes.collector_of)
SNIFF = 8192  # bytes looked at to tell text from binary, and compressed from plain
STEP = 8192  # bytes asked of a decoder or archive member at a time: a cut loses at most this
INFLATE_STEP = 1 << 18  # bytes of text asked of gzip at a time: its decoder keeps all it decoded before a cut
# isal's stub declares `error` an exception (an instance); it is the class IsalError
DECODE_ERRORS = (
    EOFError,
    OSError,
    zlib.error,
    cast("type[Exception]", inflate.error),
    tarfile.TarError,
    zstandard.ZstdError,
    lzma.LZMAError,
    zipfile.BadZipFile,
)


def discover(paths: list[str], session: str | None = None) -> Iterator[Input]:
    """Every input under the given paths, in a stable order, problems included.

    `session` reads one Ray session alone: "latest" (the newest by the time in its name)
    or a session folder's name. Then only that session's files are read, and the files
    named outside any session: a path that gives none says so.

    A URL (s3://, gs://, any fsspec URL) is read by urls.py, as a folder or file would be.

    Inputs stream: read each one before asking for the next (archive members, standard
    input and objects at URLs cannot be read later)."""
    from .. import urls  # it imports this module

    pick = None if session is None else Pick(newest(sessions_under(paths)) if session == "latest" else session)
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        told = False
        if path == "-":
            found = _stream("-", lambda: sys.stdin.buffer, pick)
        elif urls.is_url(path):
            found = urls.discover(path, pick)
        else:
            found = _walk(path, seen, True, session_of(path), pick)
        for item in found:
            told = True
            yield item
        if pick is not None and not told:
            asked = f"Ray session {pick.session}" if pick.session else "Ray session folder (session_*)"
            yield Input(path, problems=[f"no {asked} in it: nothing read"])


def sessions_under(paths: list[str]) -> set[str]:
    """The Ray sessions at or under `paths`: the session a path lies in, the session_*
    folders below it (not entered), and the sessions the members of tar archives lie in
    (at a URL: urls.sessions_under)."""
    found: set[str] = set()

    def below(folder: str, names: list[str]) -> Iterator[str]:
        for name in names:
            session = _session_below(os.path.join(folder, name), name, None)
            if session is not None:
                found.add(session)  # named by its folder: not entered
            elif name != LATEST:
                yield os.path.join(folder, name)

    from .. import urls  # it imports this module

    for path in paths:
        if urls.is_url(path):
            found.update(urls.sessions_under(path))
            continue
        at = session_of(path) if path != "-" else None
        if at is not None:
            found.add(at)
        elif path != "-":
            for file, st in _walk_once(path, below):
                if stat.S_ISREG(st.st_mode) and file.lower().endswith(ARCHIVE_NAMES):
                    found.update(_archive_sessions(file))
    return found


def _archive_sessions(path: str, opener: Callable[[], BinaryIO] | None = None) -> set[str]:
    """The sessions the members of a tar archive lie in, by their names (the archive is read
    through once for them). `opener` opens it (urls.py: an object); default the file `path`."""
    found: set[str] = set()
    try:
        with (opener or (lambda: open(path, "rb")))() as raw, tarfile.open(fileobj=text_stream(raw, Input(path)), mode="r|") as tar:
            for member in tar:
                found.update(part for part in member.name.split("/") if SESSION.match(part))
    except DECODE_ERRORS:  # told when the archive is read
        pass
    return found


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def _walk(path: str, seen: dict[tuple[int, int], str], named: bool, at: str | None = None, pick: Pick | None = None, depth: int = 0) -> Iterator[Input]:
    """The inputs at `path`, which lies in session `at`, `depth` folders below a path named
    on the command line (`named`: it is one)."""
    if pick is not None and at is not None and not pick.keeps(at):  # another session than the one asked for
        if named:
            yield Input(path, problems=[f"in Ray session {at}, not {pick.session}: not read"], session=at)
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        what = "dangling symbolic link" if os.path.islink(path) else "no such file or folder"
        yield Input(path, problems=[f"{what}: nothing read"], session=at)
        return
    except OSError as err:
        what = "symbolic link loop" if err.errno == errno.ELOOP else f"cannot read ({_reason(err)})"
        yield Input(path, problems=[f"{what}: nothing read"], session=at)
        return
    key = (st.st_dev, st.st_ino)
    if key in seen:
        if LATEST not in (os.path.basename(path), os.path.basename(seen[key])):  # session_latest is the newest session: no news
            yield Input(path, problems=[f"same as {shown(seen[key])} (a link, or a link loop): not read again"], session=at)
        return
    if stat.S_ISDIR(st.st_mode):
        above = None if named else _ancestor_link(path)
        if above is not None:  # before `seen`: the folder may still be named on its own
            yield Input(path, problems=[f"a link to {shown(above)}, a folder it lies in (a loop): not read"], session=at)
            return
        seen[key] = path
        if depth >= MAX_DEPTH:
            yield Input(path, problems=[f"folder nested more than {MAX_DEPTH} deep: not read"], session=at)
            return
        yield from _folder(path, seen, named, at, pick, depth)
    elif stat.S_ISREG(st.st_mode):
        seen[key] = path
        yield from _file(path, named, at, pick)
    elif stat.S_ISFIFO(st.st_mode) and named:
        # named on the command line, e.g. `<(zcat x.gz)`: read it like standard input
        yield from _stream(path, lambda: open(path, "rb"), pick)
    else:
        kind = "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        yield Input(path, problems=[f"{kind}, not a regular file: not read"], session=at)


def _ancestor_link(path: str) -> str | None:
    """Where a link to a folder points when that folder holds the link (`parent -> ..`):
    read through, it would read the link's siblings and their parents."""
    if not os.path.islink(path):
        return None
    target, here = os.path.realpath(path), os.path.realpath(os.path.dirname(path))
    return target if here == target or here.startswith(target.rstrip(os.sep) + os.sep) else None


def _folder(path: str, seen: dict[tuple[int, int], str], named: bool, at: str | None, pick: Pick | None, depth: int) -> Iterator[Input]:
    try:
        names = _kept(path, os.listdir(path))
    except OSError as err:
        yield Input(path, problems=[f"cannot list folder: {_reason(err)}"], session=at)
        return
    if not names:
        if named or not _made_by_ray(path):
            yield Input(path, problems=["empty folder: nothing to read"], session=at)
        return
    node = _node_of_folder(path, names)
    beside = None  # a kernel log copied beside a node's logs/ was written on that node
    for name in names:
        child = os.path.join(path, name)
        for item in _walk(child, seen, False, _session_below(child, name, at), pick, depth + 1):
            if item.node is None and item.role == "kernel" and "logs" in names:
                beside = beside or _node_of_folder(path, names, os.path.join("logs", "raylet.out"))
                item.node = beside
            if item.node is None:
                item.node = node
            yield item


def files_under(path: str) -> Iterator[tuple[str, os.stat_result]]:
    """The regular files at or under `path` with their stat, in the order `discover` reads
    them, none opened: what `watch` polls for appended bytes. The folders discover leaves
    out are left out, a file or folder reached again (a link) is listed once, and what
    cannot be listed or stat'ed is passed over (it may be gone since)."""
    for at, st in _walk_once(path, lambda folder, names: (os.path.join(folder, name) for name in names)):
        if stat.S_ISREG(st.st_mode):
            yield at, st


def _walk_once(top: str, below: Callable[[str, list[str]], Iterable[str]]) -> Iterator[tuple[str, os.stat_result]]:
    """Every path at or under `top` with its stat, each once (a link reached again is passed
    over), in the order `below(folder, names)` gives a folder's paths to go into (names as
    discover keeps them). Iterative: a tree of any depth costs no recursion. What cannot be
    stat'ed or listed is passed over (it may be gone since)."""
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        at = stack.pop()
        try:
            st = os.stat(at)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        yield at, st
        if stat.S_ISDIR(st.st_mode):
            try:
                names = _kept(at, os.listdir(at))
            except OSError:
                continue
            stack.extend(reversed(list(below(at, names))))


def _node_of_folder(path: str, names: list[str], raylet: str = "raylet.out") -> str | None:
    """A Ray `logs/` folder names its node in raylet.out."""
    if raylet.split(os.sep)[0] not in names:
        return None
    try:
        with open(os.path.join(path, raylet), "rb") as fh:
            return node_in(fh.read(NODE_HEAD))
    except OSError:
        return None


def _file(path: str, named: bool = True, at: str | None = None, pick: Pick | None = None) -> Iterator[Input]:
    """A file (in session `at`): an archive's members, or the file itself, sniffed. With a
    session picked, a file met in a walk outside it is not read (its members may be)."""
    probe = Input(path)  # problems met while sniffing are met again, and told, when reading
    try:
        with open(path, "rb") as fh:
            size = _text_size(fh)
            fh.seek(0)
            stream = text_stream(fh, probe)
            head = _head(stream, probe)
            collector = None
            if not _is_tar(head) and not head.startswith(ZIP_MAGIC):
                text = _unmarked(stream, RECORDS_HEAD)
                records = text.peek(RECORDS_HEAD)[:RECORDS_HEAD]
                collector = records_of(records)
                head = _head(text, probe)
    except OSError as err:
        yield Input(path, problems=[f"cannot read ({_reason(err)}): nothing read"], session=at)
        return
    if path.lower().endswith(ARCHIVE_NAMES) or _is_tar(head):
        archive = Input(path, session=at)
        yield from _archive(archive, lambda: text_stream(open(path, "rb"), archive), pick)
        return
    if head.startswith(ZIP_MAGIC):
        yield from _zip(Input(path, session=at), pick)
        return
    if pick is not None and not named and not pick.keeps(at):
        return
    role, pid = role_of(path)
    item = Input(path, role, pid, size=size, session=at)
    if collector is None and is_binary(head):  # a collector's records are text, whatever bytes a field holds (journald's export)
        item.problems.append("binary file (not text): not read")
    else:
        _tell_hole(item, probe.hole)
        item.opener = lambda: as_text(text_stream(Watched(path, item), item), collector)
        item.file = path
    yield item


def reopen(item: Input) -> Input:
    """The same file input, readable in this process (a worker's: openers don't travel)."""
    path = item.file or item.path
    again = Input(path, item.role, item.pid, item.node, file=path)
    again.opener = lambda: as_text(text_stream(Watched(path, again), again))
    return again


def _stream(name: str, opener: Callable[[], BinaryIO], pick: Pick | None = None, item: Input | None = None) -> Iterator[Input]:
    """Standard input or a named pipe: sniffed once, since it cannot be read twice. Text is
    read whatever session is picked (it was named); a tar's members are picked from.
    `item`: what is known of the stream before it is read (urls.py: an object's)."""
    if item is None:
        role, pid = ("driver", None) if name == "-" else role_of(name)
        item = Input(name, role, pid)
    try:
        stream = text_stream(opener(), item)
        head = _head(stream, item)
    except OSError as err:
        item.problems.append(f"cannot read ({_reason(err)}): nothing read")
        yield item
        return
    except (AttributeError, ValueError):  # standard input closed: sys.stdin is None, or its file is
        item.problems.append("closed: nothing read")
        yield item
        return
    if _is_tar(head):
        item.role = "other"
        yield from _archive(item, lambda: stream, pick)
        return
    if head.startswith(ZIP_MAGIC):
        item.role = "other"
        yield from _zip(item, pick, _spooled(cast(BinaryIO, stream)))
        return
    stream = as_text(stream)
    if is_binary(_head(stream, item)):
        item.problems.append("binary data (not text): not read")
        yield item
    else:
        _tell_hole(item, item.hole)
        item.opener = lambda: stream
        yield item


def _is_tar(head: bytes) -> bool:
    return head[257:262] == b"ustar"


class _Tar(tarfile.TarFile):
    """A tar stream read as GNU tar's --ignore-zeros reads it: past the zero blocks that end
    one archive to the next one (`cat a.tar b.tar`, `tar cz >> all.tar.gz` per node). The
    blocks passed over that are neither zeros nor a header (damage) are counted."""

    passed = 0

    def _dbg(self, level: int, msg: str) -> None:  # tarfile tells each block it passes over here
        if "end of file header" not in msg and "empty" not in msg:
            self.passed += 1


def _archive(archive: Input, opener: Callable[[], BinaryIO], pick: Pick | None = None, depth: int = 0) -> Iterator[Input]:
    """Members of a session archive, streamed: each member is readable until the next is yielded.

    A member gets the node of the raylet.out nearest above it; a raylet.out met after
    some members of its folder gives them its node too (the pipeline then applies it to
    their events), and the session folder it lies in (else the archive's). With a session
    picked, the other members are passed over. A member that is itself an archive (a
    node's .tar.gz in a bundle) is read member by member, MAX_NESTED deep; a link to a
    member read before is that member's text, read once. Problems of the archive as a
    whole come last, as an input of their own."""
    nodes: dict[str, str] = {}  # folder inside the archive -> node its raylet.out names
    members: list[tuple[str, Input]] = []  # the regular files, with their folders
    read: set[str] = set()  # the members whose text was read
    count = 0
    try:
        tar = _Tar.open(fileobj=opener(), mode="r|", ignore_zeros=True)
    except DECODE_ERRORS as err:
        cut = any(p.startswith(("zstd data cut", "gzip data cut")) for p in archive.problems)
        archive.problems.append("archive cut before its first member was whole: nothing read" if cut else f"unreadable archive: {error_line(err, named=False)}")
        yield archive
        return
    try:
        for member in tar:
            if member.isdir():
                continue
            count += 1
            name = f"{archive.path}:{member.name}"
            session = _session_in(member.name.split("/"), archive.session)
            if pick is not None and not pick.keeps(session):
                continue
            reader = tar.extractfile(member) if member.isfile() else None
            if reader is None:
                yield _link(member, name, session, read)
                continue
            folder, base = posixpath.split(member.name)
            role, pid = role_of(base)
            item = Input(name, role, pid, node=_nearest(nodes, folder), session=session)
            # the reader is an ExFileObject, a BufferedReader (read1 is what Limited reads); typeshed says IO[bytes]
            stream = text_stream(io.BufferedReader(Limited(cast(io.BufferedReader, reader), item, "archive member"), NODE_HEAD), item)
            head = stream.peek(NODE_HEAD)
            if _is_tar(head) and depth < MAX_NESTED:
                inner = cast(BinaryIO, stream)
                yield from _archive(item, lambda: inner, pick, depth + 1)  # noqa: B023 - read before the loop goes on
                continue
            if head.startswith(ZIP_MAGIC) and depth < MAX_NESTED:  # a node's zip in a bundle
                yield from _zip(item, pick, _spooled(cast(BinaryIO, stream)))
                continue
            if not _is_tar(head) and not head.startswith(ZIP_MAGIC):
                stream = as_text(stream)
                head = stream.peek(NODE_HEAD)
            node = node_in(head) if base == "raylet.out" else None
            if node is not None:
                nodes[folder] = node
                for where, earlier in [*members, (folder, item)]:
                    earlier.node = _nearest(nodes, where) or earlier.node
            members.append((folder, item))
            if is_binary(head[:SNIFF] or bytes(min(item.hole, SNIFF))):
                item.problems.append("binary file (not text): not read")
            else:  # even when cut: what came before the cut is read
                _tell_hole(item, item.hole)
                item.opener = lambda s=stream: s
                read.add(member.name)
            yield item
    except DECODE_ERRORS as err:
        archive.problems.append(f"archive cut or damaged after {count} member(s): {error_line(err, named=False)}")
    finally:
        tar.close()
    if tar.passed:
        archive.problems.append(f"archive damaged: {tar.passed} block(s) of 512 bytes that are no member's header were passed over")
    if count == 0 and not archive.problems:
        archive.problems.append("empty archive: nothing to read")
    if archive.problems:
        yield archive


def _link(member: tarfile.TarInfo, name: str, session: str | None, read: set[str]) -> Input:
    """A member that holds no text of its own: a link to a member read before is read there
    (its text once, under that member's name), anything else is told."""
    if member.islnk() or member.issym():
        target = member.linkname if member.islnk() else posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
        if target in read:
            return Input(name, problems=[f"a link to {shown(target)} in the archive: its text is read there, once"], session=session)
        return Input(name, problems=[f"a link to {shown(target)}, which the archive holds before it as no text read: not read"], session=session)
    return Input(name, problems=["archive member is a special file (a device or a pipe): not read"], session=session)


def _spooled(stream: BinaryIO) -> BinaryIO:
    """A zip read from a stream (standard input, a member of a tar) in a temporary file:
    zipfile seeks, its index being at its end. The stream's own limits (an archive member's
    bomb ratio) bound what is copied."""
    spool = tempfile.TemporaryFile()
    shutil.copyfileobj(stream, spool, STEP * 8)
    spool.seek(0)
    return cast(BinaryIO, spool)


def _zip(archive: Input, pick: Pick | None = None, fileobj: BinaryIO | None = None) -> Iterator[Input]:
    """Members of a zip file on disk (or in `fileobj`, a spooled stream), as a tar's are read
    (zipfile needs to seek: its index is at its end): each decompressed as a stream, stopped
    past the bomb ratio to the compressed size its index declares."""
    try:
        zf = zipfile.ZipFile(fileobj if fileobj is not None else archive.path)
    except (*DECODE_ERRORS, ValueError) as err:
        archive.problems.append(f"unreadable zip archive: {error_line(err, named=False)}")
        yield archive
        return
    with zf:
        infos = [info for info in zf.infolist() if not info.is_dir()]
        for info in infos:
            name = f"{archive.path}:{info.filename}"
            session = _session_in(info.filename.split("/"), archive.session)
            if pick is not None and not pick.keeps(session):
                continue
            folder, base = posixpath.split(info.filename)
            role, pid = role_of(base)
            item = Input(name, role, pid, session=session)
            try:
                reader = zf.open(info)
            except (*DECODE_ERRORS, NotImplementedError, RuntimeError) as err:  # an unknown method, a password
                item.problems.append(f"zip member cannot be read: {error_line(err, named=False)}")
                yield item
                continue
            declared = Counting(io.BytesIO())
            declared.count = max(info.compress_size, 1)
            # a ZipExtFile is a BufferedIOBase (read1 is what Limited reads); typeshed says IO[bytes]
            stream = as_text(text_stream(io.BufferedReader(Limited(cast(io.BufferedReader, reader), item, "zip member", declared), NODE_HEAD), item))
            if is_binary(_head(stream, item)):
                item.problems.append("binary file (not text): not read")
            else:
                item.opener = lambda s=stream: s
            yield item
        if not infos:
            archive.problems.append("empty archive: nothing to read")
    if archive.problems:
        yield archive


def _nearest(nodes: dict[str, str], folder: str) -> str | None:
    """The node of the nearest folder at or above `folder` that has a raylet.out. A member
    named from the root (`/etc/x.log`) climbs to "/", whose dirname is itself: the top."""
    while True:
        if folder in nodes:
            return nodes[folder]
        up = posixpath.dirname(folder)
        if up == folder:
            return None
        folder = up


NUL_RUN = re.compile(rb"\0{8,}")  # a hole: logrotate's copytruncate, a file preallocated or cut by a crash


STRAY_NULS = 4  # NUL bytes outside runs that text may hold (torn writes), whatever its length
STRAY_SHARE = 100  # a file shorter than SNIFF whose other bytes read as text may hold one NUL byte in this many


def is_binary(head: bytes) -> bool:
    """Binary as ripgrep judges it: NUL bytes, or mostly control bytes. Runs of NUL bytes
    (holes a log gets from logrotate's copytruncate or a crash) are not counted, nor are a
    few stray NUL bytes (a torn write): binary data holds one in a few hundred bytes. Where
    too few bytes are left to judge by shares (a few lines before a crash's hole, a short
    file with a torn write), they are text when they read as nothing else (_clean_text).
    Invalid UTF-8 is text: its bytes are read as U+FFFD and the scanner names the lines that
    hold them."""
    if not head:
        return False
    body = NUL_RUN.sub(b"", head)
    if len(body) < min(len(head), 512):  # (almost) nothing but NUL bytes: too little to judge by shares
        return not (body.count(0) <= STRAY_NULS and _clean_text(body.replace(b"\0", b"")))  # a few lines before a crash's hole
    stray = body.count(0)
    if stray > STRAY_NULS and stray * 1000 > len(body):  # more than one in a thousand: random or compressed bytes hold one in 256
        # a file too short for shares to tell: text if all else reads as text (UTF-16 holds a NUL every other byte)
        return not (len(head) < SNIFF and stray * STRAY_SHARE <= len(body) and _clean_text(body.replace(b"\0", b"")))
    return len(_CONTROL_OR_ESC.findall(body)) > len(body) // 5


_CONTROL_BYTES = rb"\x00-\x08\x0e-\x1a\x1c-\x1f"  # control bytes but tab, the line breaks, vertical tab, form feed and ESC
_CONTROL = re.compile(b"[" + _CONTROL_BYTES + b"]")  # a few at most in text beyond doubt (_clean_text): ESC starts colour codes
_CONTROL_OR_ESC = re.compile(b"[" + _CONTROL_BYTES + b"\x1b]")  # what is_binary counts: a fifth of them and more is binary


def _clean_text(body: bytes) -> bool:
    """Whether a few bytes are text beyond doubt: printable UTF-8 (but a character the head
    cut at its end) with a line break, and stray control bytes as few as stray NULs may be
    (a torn write leaves one at a hole's edge): at most STRAY_NULS, one in STRAY_SHARE.
    Random bytes fail the UTF-8 at once; a line of a log passes."""
    try:
        codecs.utf_8_decode(body, "strict", False)
    except UnicodeDecodeError:
        return False
    stray = len(_CONTROL.findall(body))
    return b"\n" in body and body.strip() != b"" and stray <= STRAY_NULS and stray * STRAY_SHARE <= len(body)


def _past_hole(stream: io.BufferedReader, item: Input) -> io.BufferedReader:
    """`stream` read past the NUL bytes it begins with, counted in `item.hole`. A hole is as
    long as the file was when logrotate's copytruncate emptied it (gigabytes: a writer
    without O_APPEND goes on where it was), so it is read past however long; it holds no
    text, and the first line's envelope and time then stand where they are looked for."""
    hole = 0
    head = stream.peek(SNIFF)[:SNIFF]
    while head[:1] == b"\0":
        hole += len(stream.read(len(head) - len(head.lstrip(b"\0"))))
        head = stream.peek(SNIFF)[:SNIFF]
    item.hole = hole
    if hole and 0 < len(head) < SNIFF:  # the text's head is the rest of a read (a pipe's): a whole one to judge by
        head = stream.read(SNIFF)
        return io.BufferedReader(Prefixed(head, stream))
    return stream


def _head(stream: io.BufferedReader, item: Input) -> bytes:
    """The head of a stream to judge text or binary by: a stream of nothing but NUL bytes is
    judged as those bytes."""
    return stream.peek(SNIFF)[:SNIFF] or bytes(min(item.hole, SNIFF))


def hole_problem(skipped: int) -> str:
    """What a hole at the start of a file is told as: it holds no text, and is not lost."""
    return f"begins with {skipped} NUL bytes (a hole, as logrotate's copytruncate leaves): read past, the text after them read"


def _tell_hole(item: Input, hole: int) -> None:
    """Say that a hole at the start of a text was read past."""
    if hole:
        item.problems.append(hole_problem(hole))


def text_size(path: str) -> int:
    """About how many bytes of text a file holds, for reading the biggest first: a gzip file
    says it in its last four bytes (modulo 4 GiB, for one member); zstd is guessed at 8x."""
    try:
        with open(path, "rb") as fh:
            return _text_size(fh)
    except OSError:
        return 0


def _text_size(fh: BinaryIO) -> int:
    """text_size of a file open at its start (discovery sniffs it anyway: no second open)."""
    magic = fh.read(4)
    size = os.fstat(fh.fileno()).st_size
    if magic.startswith(GZIP_MAGIC) and size >= 18:
        fh.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(fh.read(4), "little"))
    return size * 8 if magic.startswith(ZSTD_MAGIC) else size


def text_stream(raw: BinaryIO | io.RawIOBase, item: Input) -> io.BufferedReader:
    """`raw` as a peekable stream of text bytes: decompressed when it starts like gzip or zstd.

    Problems met while decompressing (a cut, a bomb) go to `item`."""
    # a stream not buffered yet has readinto (a raw file, BytesIO); typing.BinaryIO does not declare it
    buffered: io.BufferedReader = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
    magic = buffered.peek(4)[:4]
    if magic.startswith(GZIP_MAGIC):
        counted = Counting(buffered)
        return _past_hole(io.BufferedReader(Limited(Gunzip(counted), item, "gzip", counted, INFLATE_STEP)), item)
    if magic.startswith(ZSTD_MAGIC):
        counted = ZstdFrames(buffered)
        # zstandard's stub asks for IO[bytes]: the reader calls only read()
        reader = zstandard.ZstdDecompressor().stream_reader(counted, read_across_frames=True)  # type: ignore[arg-type]
        return _past_hole(io.BufferedReader(Limited(reader, item, "zstd", counted)), item)
    if magic.startswith((XZ_MAGIC[:4], BZ2_MAGIC)) and compressed(buffered.peek(SNIFF)[:SNIFF]):
        counted = Counting(buffered)
        # both read concatenated streams (`cat a.xz b.xz`, pbzip2's) as one, as xz and bzip2 do
        # (typeshed asks for IO[bytes]: they call only read())
        unpacked: _Reads1 = lzma.LZMAFile(counted) if magic.startswith(XZ_MAGIC[:4]) else bz2.BZ2File(counted)  # type: ignore[arg-type]
        return _past_hole(io.BufferedReader(Limited(unpacked, item, "xz" if magic.startswith(XZ_MAGIC[:4]) else "bzip2", counted)), item)
    return _past_hole(buffered, item)


def compressed(head: bytes) -> bool:
    """Whether a head that begins like xz or bzip2 is one: xz's whole magic, or bzip2's
    block size digit and block magic (a log line may begin "BZh")."""
    return head.startswith(XZ_MAGIC) or (
        len(head) >= 10 and head[3:4] in b"123456789" and head[4:10] in (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")
    )


SNIFFED = "sniff"  # as_text: look at the head for a collector's records

DOCUMENT = "document"  # as_text: a collector's records in one JSON document (Document)
# where a document's records begin: a top-level array (gcloud logging read --format json), or the
# array an export's object holds them in (aws logs filter-log-events: "events"; get-log-events and
# a CloudWatch export: "logEvents"; the Logging API's entries.list: "entries")
_DOCUMENT_START = re.compile(r'\A\s*(?:\[|\{[^\[]*?"(?:events|logEvents|entries)"\s*:\s*\[)')
MAX_DOCUMENT_RECORD = 1 << 20  # a record longer than this, still unparsed: the document is read no further


def document_of(head: bytes) -> bool:
    """Whether a head opens one JSON document of a collector's records: its first record,
    read whole, is one a collector of the table reads (a pretty-printed array of objects
    that are no records stays a plain text)."""
    text = head.decode("utf-8", "replace")
    m = _DOCUMENT_START.match(text)
    if m is None:
        return False
    try:
        first, _ = json.JSONDecoder().raw_decode(text, m.end() + len(text[m.end() :]) - len(text[m.end() :].lstrip()))
    except ValueError:
        return False
    return isinstance(first, dict) and collector_of(json.dumps(first).encode() + b"\n") is not None


def records_of(head: bytes) -> Collector | str | None:
    """How a head's records are written: a collector's, one a line (envelopes.collector_of),
    in one JSON document (DOCUMENT), or None for plain text."""
    return collector_of(head) or (DOCUMENT if document_of(head) else None)


def _unmarked(stream: io.BufferedReader, size: int) -> io.BufferedReader:
    """Text over `stream`, buffered by `size` bytes (what a peek may see)."""
    return cast(io.BufferedReader, io.BufferedReader(Text(stream, utf16=utf16(stream.peek(SNIFF)[:SNIFF])), size))


def utf16(head: bytes) -> bool:
    """Whether a head is UTF-16 text: its mark, then lines (a line break is two bytes, one of
    them zero). Bytes that merely begin as a mark would (binary garbage before a log) decode
    to no line break."""
    if head[:2] not in UTF16_BOMS:
        return False
    text = head[2 : len(head) & ~1].decode("utf-16-le" if head[:2] == UTF16_BOMS[0] else "utf-16-be", "replace")
    return "\n" in text


def as_text(stream: io.BufferedReader, collector: Collector | str | None = SNIFFED) -> io.BufferedReader:
    """A stream's text as the scan reads it: UTF-8 with no byte-order mark (Text), and a
    collector's records (docker's json-file, journald's, a cloud's: envelopes.collector_of),
    one a line or in one JSON document (DOCUMENT), read as the lines they hold; `collector`
    when a sniff of the same file told it already (a file is then read as far as its first
    read asks, no further). Read after text_stream and its sniff of an archive: an archive's
    bytes are never touched."""
    text = _unmarked(stream, RECORDS_HEAD if collector == SNIFFED else STEP)
    if collector == SNIFFED:
        head = text.peek(RECORDS_HEAD)[:RECORDS_HEAD]
        collector = records_of(head)
    if collector == DOCUMENT:
        text = cast(io.BufferedReader, io.BufferedReader(Document(text), STEP))
        collector = collector_of(text.peek(RECORDS_HEAD)[:RECORDS_HEAD])
    return io.BufferedReader(Records(text, collector)) if isinstance(collector, Collector) else text


class _Closable(Protocol):
    def close(self) -> object: ...


class _Reads(_Closable, Protocol):
    """What Counting and Gunzip read from: a buffered file, or a Counting."""

    def read(self, size: int = ..., /) -> bytes: ...


class _Reads1(_Closable, Protocol):
    """What Limited reads from: an archive member, a Gunzip, zstandard's reader."""

    def read1(self, size: int = ..., /) -> bytes: ...


class Wrapping(io.RawIOBase):
    """A readable raw stream over another one, which it closes with itself."""

    inner: _Closable

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.inner.close()
        super().close()


class Prefixed(Wrapping):
    """Bytes already read from a stream, then the rest of it."""

    inner: _Reads

    def __init__(self, prefix: bytes, inner: _Reads) -> None:
        self.prefix, self.inner = prefix, inner

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.prefix[: len(buffer)] or self.inner.read(len(buffer))
        self.prefix = self.prefix[len(data) :]
        buffer[: len(data)] = data
        return len(data)


class Watched(Wrapping):
    """A file on disk read to its end. One that ends short of the size it had when opened
    was truncated meanwhile (logrotate's copytruncate): the bytes it lost are told."""

    inner: io.FileIO

    def __init__(self, path: str, item: Input) -> None:
        self.inner, self.item = open(path, "rb", buffering=0), item  # noqa: SIM115 - closed with this stream
        self.size, self.at = os.fstat(self.inner.fileno()).st_size, 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        got = self.inner.readinto(buffer) or 0
        self.at += got
        if not got and self.at < self.size:
            self.item.problems.append(
                f"shrank while read (truncated, as logrotate's copytruncate does): {self.at} of the {self.size} bytes it held when opened were read"
            )
            self.size = self.at  # told once
        return got


class Counting(Wrapping):
    """Counts the compressed bytes a decompressor has consumed."""

    inner: _Reads

    def __init__(self, inner: _Reads) -> None:
        self.inner = inner
        self.count = 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        self.count += len(data)
        return len(data)


class Text(Wrapping):
    """A stream's text as UTF-8 with no byte-order mark: UTF-16 told by its mark (PowerShell's
    `>`) transcoded, and every UTF-8 mark removed wherever it stands (`cat` of two files that
    begin with one puts one at a line's start), before anything reads a line: the first
    envelope, time or trigger of that line is then where it is looked for."""

    inner: _Reads

    def __init__(self, inner: _Reads, utf16: bool = False) -> None:
        self.inner = inner
        self.decoder = codecs.getincrementaldecoder("utf-16")("replace") if utf16 else None
        self.held = b""  # the start of a mark the last read ended with
        self.out, self.at = b"", 0
        self.ended = False

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self.at >= len(self.out) and not self.ended:
            self._fill(max(len(buffer), STEP))
        got = min(len(buffer), len(self.out) - self.at)
        buffer[:got] = self.out[self.at : self.at + got]
        self.at += got
        return got

    def _fill(self, size: int) -> None:
        data = self.inner.read(size)
        self.ended = not data
        if self.decoder is not None:
            data = self.decoder.decode(data, final=self.ended).encode("utf-8")
        data = self.held + data
        keep = 0 if self.ended else next((n for n in (2, 1) if data.endswith(BOM[:n])), 0)
        self.held = data[len(data) - keep :] if keep else b""
        data = data[: len(data) - keep]
        self.out, self.at = data.replace(BOM, b"") if BOM[:1] in data else data, 0


def marks_in(fh: BinaryIO, lo: int, hi: int) -> int:
    """The bytes of UTF-8 marks in bytes lo..hi of a file, which Text removes: a range read
    whole by another process starts that much sooner in its text."""
    fh.seek(lo)
    count, carry = 0, b""
    while lo < hi and (data := fh.read(min(STEP << 9, hi - lo))):
        lo += len(data)
        data = carry + data
        count += data.count(BOM)
        carry = data[-2:] if not data.endswith(BOM) else b""
    return count * len(BOM)


class Records(Wrapping):
    """The lines a stream of a collector's records holds (envelopes.unwrapped)."""

    inner: io.BufferedReader

    def __init__(self, inner: io.BufferedReader, collector: Collector) -> None:
        self.inner = inner
        self.lines = unwrapped(collector, iter(lambda: inner.readline(MAX_RECORD + 1), b""))
        self.out, self.at = b"", 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.at >= len(self.out):
            self.out, self.at = b"".join(itertools.islice(self.lines, 256)), 0
        got = min(len(buffer), len(self.out) - self.at)
        buffer[:got] = self.out[self.at : self.at + got]
        self.at += got
        return got


class Document(Wrapping):
    """The records of one JSON document (see _DOCUMENT_START), one compact JSON object a
    line, as a collector writes them one a line; read a record at a time, never whole."""

    inner: io.BufferedReader

    def __init__(self, inner: io.BufferedReader) -> None:
        self.inner, self.decoder = inner, json.JSONDecoder()
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf, self.pos, self.begun, self.ended = "", 0, False, False
        self.out, self.at = b"", 0

    def _more(self) -> bool:
        chunk = self.inner.read(1 << 16)
        self.buf = self.buf[self.pos :] + self.utf8.decode(chunk, final=not chunk)
        self.pos = 0
        return bool(chunk)

    def _record(self) -> bytes | None:
        while not self.begun:
            m = _DOCUMENT_START.match(self.buf)
            if m is not None:
                self.pos, self.begun = m.end(), True
            elif not self._more() or len(self.buf) > MAX_DOCUMENT_RECORD:
                return None
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n,":
                self.pos += 1
            if self.pos < len(self.buf):
                if self.buf[self.pos] == "]":
                    return None
                try:
                    record, self.pos = self.decoder.raw_decode(self.buf, self.pos)
                except ValueError:
                    pass  # cut by the read: more of it, unless the document ends or the record is past any record
                else:
                    return json.dumps(record, ensure_ascii=False).encode() + b"\n"
            if len(self.buf) - self.pos > MAX_DOCUMENT_RECORD or not self._more():
                return None

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self.at >= len(self.out) and not self.ended:
            record = self._record()
            if record is None:
                self.ended = True
            else:
                self.out, self.at = record, 0
        got = min(len(buffer), len(self.out) - self.at)
        buffer[:got] = self.out[self.at : self.at + got]
        self.at += got
        return got


class ZstdFrames(Counting):
    """Counts the compressed bytes and follows the zstd frames they form (RFC 8878: frame and
    block headers, block sizes, checksums; skippable frames), without decoding: zstandard's
    stream reader ends quietly where a file was cut, and this tells whether the bytes
    stopped inside a frame."""

    def __init__(self, inner: _Reads) -> None:
        super().__init__(inner)
        self.need, self.state = 4, "magic"  # bytes of header wanted next, and which
        self.header = b""
        self.skip = 0  # bytes of block content (or a skippable frame) to pass over
        self.checksum = False
        self.cut = False  # the bytes ended inside a frame

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        got = super().readinto(buffer)
        if got:
            self._follow(bytes(buffer[:got]))
        else:
            self.cut = self.state != "magic" or bool(self.header) or self.skip > 0
        return got

    def _follow(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            if self.skip:
                taken = min(self.skip, len(data) - at)
                self.skip -= taken
                at += taken
                continue
            taken = min(self.need - len(self.header), len(data) - at)
            self.header += data[at : at + taken]
            at += taken
            if len(self.header) == self.need:
                header, self.header = self.header, b""
                self._step(header)

    def _step(self, header: bytes) -> None:
        """One whole header read: what comes after it."""
        if self.state == "magic":
            if header == ZSTD_MAGIC:
                self.need, self.state = 1, "descriptor"
            elif header[1:] == b"*M" and header[0] & 0xF0 == 0x50:  # a skippable frame
                self.need, self.state = 4, "skippable"
            else:  # not zstd: the decoder says so
                self.need, self.state = 4, "magic"
        elif self.state == "skippable":
            self.skip, self.need, self.state = int.from_bytes(header, "little"), 4, "magic"
        elif self.state == "descriptor":
            d = header[0]
            single, fcs = d >> 5 & 1, d >> 6
            self.checksum = bool(d >> 2 & 1)
            rest = (0 if single else 1) + (0, 1, 2, 4)[d & 3] + ((1 if single else 0), 2, 4, 8)[fcs]
            self.need, self.state = (rest, "frame header") if rest else (3, "block")
        elif self.state == "frame header":
            self.need, self.state = 3, "block"
        elif self.state == "block":
            value = int.from_bytes(header, "little")
            last, kind, size = value & 1, value >> 1 & 3, value >> 3
            self.skip = 1 if kind == 1 else size  # an RLE block holds one byte
            if last:
                self.need, self.state = (4, "checksum") if self.checksum else (4, "magic")
        elif self.state == "checksum":
            self.need, self.state = 4, "magic"


class Damaged(ValueError):
    """A gzip member whose check (CRC-32 or length) fails. Its text was handed out as it was
    decoded, and the next member is read on: the reader says so and goes on."""


MAX_GZIP_HEADER = 1 << 20  # a member's header holds a file name and a comment: longer is not gzip


def gzip_header(data: bytes) -> int | None:
    """The length of the gzip member header `data` begins with (RFC 1952 2.3); None while
    `data` holds only part of it."""
    if len(data) < 10:
        return None
    if data[:2] != GZIP_MAGIC or data[2] != 8:
        raise OSError(f"not a gzip member: it begins {data[:4]!r}")
    flags, at = data[3], 10
    if flags & 4:  # FEXTRA: its length, then itself
        if len(data) < at + 2:
            return None
        at += 2 + int.from_bytes(data[at : at + 2], "little")
    for bit in (8, 16):  # FNAME, FCOMMENT: ended by a zero byte
        if flags & bit:
            end = data.find(b"\0", at)
            if end < 0:
                return None
            at = end + 1
    at += 2 if flags & 2 else 0  # FHCRC
    return at if len(data) >= at else None


class Gunzip(Wrapping):
    """The gzip members of a stream one after another (as `cat a.gz b.gz` makes them).

    Each member's header is read here and its deflate data inflated raw; its CRC-32 and
    length are checked here once its text has been handed out. (zlib's gzip mode checks them
    inside the call that decodes the member's end, and a bad check loses that call's text.)
    Zero padding after a member ends the stream, as gzip allows; any other bytes there must
    start a new member."""

    inner: _Reads

    def __init__(self, inner: _Reads) -> None:
        self.inner = inner
        self.member: Any = None  # the decoder of the member being read (zlib's or ISA-L's); None between members
        self.ended = False  # a member ended whose trailer is not checked yet
        self.pending = b""  # compressed bytes read but not yet given to a decoder
        self.crc = self.size = 0  # of the member's text so far

    def read1(self, size: int = -1) -> bytes:
        size = size if size > 0 else INFLATE_STEP
        while True:
            if self.member is None:
                if self.ended:
                    self._check()
                if not self._start():
                    return b""
            data = self.member.unconsumed_tail or self.pending or self.inner.read(STEP)  # small: bombs show early
            self.pending = b""
            out = self.member.decompress(data, size)  # with no data left: the text it still holds
            if not data and not out:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            if self.member.eof:
                self.pending, self.member, self.ended = self.member.unused_data, None, True
            if out:
                self.crc, self.size = inflate.crc32(out, self.crc), self.size + len(out)
                return out

    def _more(self, wanted: int) -> bool:
        """Read until `wanted` bytes are pending; False if the stream ends first."""
        while len(self.pending) < wanted:
            more = self.inner.read(STEP)
            if not more:
                return False
            self.pending += more
        return True

    def _check(self) -> None:
        """The trailer of the member that ended: its text's CRC-32 and length (mod 2**32)."""
        crc, size = self.crc, self.size & 0xFFFFFFFF
        self.ended, self.crc, self.size = False, 0, 0
        if not self._more(8):
            raise EOFError("Compressed file ended inside a member's trailer (CRC and length)")
        trailer, self.pending = self.pending[:8], self.pending[8:]
        if int.from_bytes(trailer[:4], "little") != crc:
            raise Damaged(f"a member's CRC-32 does not match its text ({int.from_bytes(trailer[:4], 'little'):#010x} != {crc:#010x})")
        if int.from_bytes(trailer[4:], "little") != size:
            raise Damaged(f"a member's length does not match its text ({int.from_bytes(trailer[4:], 'little')} != {size} bytes)")

    def _start(self) -> bool:
        """Read past zero padding and the next member's header; False at the stream's end."""
        self.pending = self.pending.lstrip(b"\0")
        while not self.pending:
            more = self.inner.read(STEP)
            if not more:
                return False
            self.pending = more.lstrip(b"\0")
        while (length := gzip_header(self.pending)) is None:
            if len(self.pending) > MAX_GZIP_HEADER:
                raise OSError(f"not a gzip member: no end of its header in {MAX_GZIP_HEADER} bytes")
            if not self._more(len(self.pending) + 1):
                raise EOFError("Compressed file ended inside a member's header")
        self.pending, self.member = self.pending[length:], inflate.decompressobj(-15)
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Limited(Wrapping):
    """A decompressing (or archive member) stream that stops at a bomb or a cut and says so.

    Reads fill the caller's buffer from small reads of the inner stream, so little or
    nothing of what comes before a cut is lost with it (tarfile drops a whole request)."""

    inner: _Reads1

    def __init__(self, inner: _Reads1, item: Input, codec: str, compressed: Counting | None = None, step: int = STEP) -> None:
        self.inner, self.item, self.codec, self.compressed, self.step = inner, item, codec, compressed, step
        self.total = 0
        self.stopped = False

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        filled = 0
        while filled < len(buffer) and not self.stopped:
            try:
                data = self.inner.read1(min(self.step, len(buffer) - filled))
            except Damaged as err:  # its text was read: say so, and read on
                self.item.problems.append(f"{self.codec} data damaged before byte {self.total}: {err}; the text was read, and what follows")
                continue
            except DECODE_ERRORS as err:
                self._stop(f"{self.codec} data cut or damaged after {self.total} bytes: {error_line(err, named=False)}")
                break
            if not data:
                if isinstance(self.compressed, ZstdFrames) and self.compressed.cut:
                    self._stop(f"zstd data cut after {self.total} bytes: the file ends inside a frame")
                break
            buffer[filled : filled + len(data)] = data
            filled += len(data)
            self.total += len(data)
            if self.compressed is not None and self.total > BOMB_FLOOR and self.total > BOMB_RATIO * self.compressed.count:
                self._stop(
                    f"decompression stopped after {self.total} bytes, more than {BOMB_RATIO}x the "
                    f"{self.compressed.count} compressed bytes read (a decompression bomb?)"
                )
        return filled

    def _stop(self, problem: str) -> None:
        self.stopped = True
        self.item.problems.append(problem)
