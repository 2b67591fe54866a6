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

import errno
import io
import os
import posixpath
import shutil
import stat
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, cast

from .decoding import (
    DECODE_ERRORS,
    RECORDS_HEAD,
    SNIFF,
    STEP,
    ZIP_MAGIC,
    Counting,
    Limited,
    Watched,
    _head,
    _tell_hole,
    _text_size,
    _unmarked,
    as_text,
    is_binary,
    records_of,
    text_stream,
)
from .inputs import Input, error_line, shown
from .naming import ARCHIVE_NAMES, LATEST, NODE_HEAD, SESSION, Pick, _kept, _made_by_ray, _session_below, _session_in, newest, node_in, role_of, session_of

MAX_NESTED = 4  # archives inside archives read this deep (a node's .tar.gz in a bundle is one)
MAX_DEPTH = 200  # folders nested deeper are not entered: a walk recurses (Ray's trees are under 10 deep)


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
