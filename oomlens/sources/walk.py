"""Walks: the paths named (files, folders, `-` and named pipes; URLs through urls.py) and the
folders under them, in a stable order, each file sniffed and made an Input (an archive, its
members), with a Ray session picked read alone; and the files `watch` polls."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, cast

from .archives import _archive, _archive_sessions, _is_tar, _spooled, _zip
from .decoding import RECORDS_HEAD, ZIP_MAGIC, Watched, _head, _tell_hole, _text_size, _unmarked, as_text, is_binary, records_of, text_stream
from .inputs import Input, shown
from .naming import ARCHIVE_NAMES, LATEST, NODE_HEAD, Pick, _kept, _made_by_ray, _session_below, newest, node_in, role_of, session_of

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
