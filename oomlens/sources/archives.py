"""Archives: the members of tar archives (plain or compressed, concatenated, damaged, inside
other archives) and of zip files, each read as a stream with the role its name tells, the
node of the raylet.out nearest above it and the Ray session it lies in."""

from __future__ import annotations

import io
import posixpath
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from typing import BinaryIO, cast

from .decoding import DECODE_ERRORS, SNIFF, STEP, ZIP_MAGIC, Counting, Limited, _head, _tell_hole, as_text, is_binary, text_stream
from .inputs import Input, error_line, shown
from .naming import NODE_HEAD, SESSION, Pick, _session_in, node_in, role_of

MAX_NESTED = 4  # archives inside archives read this deep (a node's .tar.gz in a bundle is one)


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
