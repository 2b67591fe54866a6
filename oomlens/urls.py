"""Sources at URLs: logs already copied to object storage (s3://, gs://, az://) or on any
file system fsspec knows (memory://, file://, ...), read as streams through this process.

A URL is walked as sources/walk.py walks a folder, with the rules for what a Ray session
folder holds (naming._kept, naming._made_by_ray): its objects in sorted order, each sniffed
as a file is (gzip and zstd decompressed, tar archives read member by member, binary objects
told), with the role and pid its name tells, the Ray session of the `session_*` part of its
key, and the node of the raylet.out nearest above it. That raylet.out is looked for above
the URL given too, so an object named alone is read as it is in the walk of its folder:
`expand` lists a URL's objects, which may then be shared among machines and each read with
`discover([object_url])`.

Credentials and endpoints are fsspec's own configuration (the AWS_* variables, FSSPEC_S3_*,
~/.config/fsspec). fsspec and the package of a protocol (s3fs, gcsfs) are imported only
when a URL is read: they are an extra, `oomlens[urls]`.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple, cast

from .sources import Input, error_line
from .sources.archives import _archive_sessions
from .sources.decoding import Wrapping
from .sources.naming import ARCHIVE_NAMES, LATEST, NODE_HEAD, SESSION, Pick, _kept, _made_by_ray, _session_in, newest, node_in, role_of
from .sources.walk import _stream

# `scheme://...`, or fsspec's chained `scheme::...` (simplecache::s3://...); a scheme of one
# letter would be a drive (C:), not that there are drives here
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+(?:://|::)")
NO_PATH = re.compile(r"://\s*$")  # a URL that ends at its scheme, as the innermost of a chain does too
RAYLET = ("raylet.out",)
RAYLETS_BESIDE = (posixpath.join("logs", "raylet.out"), "raylet.out")  # a kernel log beside a node's logs/ is of that node


class Unreadable(OSError):
    """A URL that cannot be listed: its message is the one-line problem told for it."""


def is_url(path: str) -> bool:
    """A path fsspec is to read: a URL, unless a file or folder on disk has that name."""
    return URL.match(path) is not None and not os.path.lexists(path)


class Found(NamedTuple):
    """An object the walk of a URL reads, or (`problem` set) what it tells instead."""

    rel: str  # its key below the URL given, "" for the URL itself
    key: str  # its path on the file system
    size: int
    session: str | None
    problem: str | None = None


@dataclass
class Listing:
    """What is at a URL: its objects and folders, by their keys below it."""

    url: str
    fs: Any  # an fsspec AbstractFileSystem (fsspec ships no types)
    root: str  # the URL's path on the file system
    objects: dict[str, tuple[str, int]] = field(default_factory=dict)  # key below the URL -> path, size
    dirs: set[str] = field(default_factory=lambda: {""})
    children: dict[str, set[str]] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)  # the objects' paths

    def within(self, path: str) -> bool:
        """The path lies under the URL, where the listing says what exists."""
        base = self.root.rstrip("/")
        return not base or path.startswith(base + "/")

    def joined(self, rel: str) -> str:
        """The URL of an object below the URL given, as the user wrote the URL."""
        return joined(self.url, rel)


def joined(url: str, rel: str) -> str:
    """`url` with a key below it appended."""
    if not rel:
        return url
    return url + rel if url.endswith("/") else f"{url}/{rel}"


def _filesystem(url: str) -> tuple[Any, str]:
    """The fsspec file system of `url` and the path it names there. A URL that names no
    path (`file://`, `s3://`) is refused: fsspec would read the current folder or every
    bucket, which no one asking for one place meant."""
    if NO_PATH.search(url):
        raise Unreadable("names no path: nothing read")
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise Unreadable("reading URLs needs fsspec: pip install 'oomlens[urls]'") from None
    try:
        return url_to_fs(url)
    except ImportError as err:  # fsspec knows the protocol; its package is missing (its ImportError names the module)
        missing = getattr(err.__cause__, "name", None)
        scheme = url.split(":", 1)[0]
        raise Unreadable(f"reading {scheme}:// URLs needs {missing}: pip install {missing}" if missing else error_line(err)) from None
    except Exception as err:  # noqa: BLE001 - an unknown protocol, a bad option: one line
        raise Unreadable(f"cannot read ({error_line(err)}): nothing read") from None


def _listing(url: str) -> Listing:
    """Every object and folder at or under `url` (one listing: a prefix of an object store
    is listed whole)."""
    fs, root = _filesystem(url)
    try:
        entries = fs.find(root, withdirs=True, detail=True)
    except Exception as err:  # noqa: BLE001 - no bucket, access denied, the network: each client raises its own
        raise Unreadable(f"cannot read ({error_line(err)}): nothing read") from None
    listing = Listing(url, fs, root)
    base = root.rstrip("/")
    for key, info in sorted(entries.items()):
        directory = info.get("type") == "directory" or key.endswith("/")  # a folder, or the marker object of one
        if key.rstrip("/") == base:
            if not directory:
                listing.objects[""] = (key, int(info.get("size") or 0))
                listing.keys.add(key)
            continue
        rel = key[len(base) :].strip("/") if key.startswith(base) else key.strip("/")
        parts = rel.split("/")
        for depth in range(len(parts)):
            parent = "/".join(parts[:depth])
            listing.children.setdefault(parent, set()).add(parts[depth])
            listing.dirs.add(parent)
        if directory:
            listing.dirs.add(rel)
        else:
            listing.objects[rel] = (key, int(info.get("size") or 0))
            listing.keys.add(key)
    return listing


def _found(listing: Listing, pick: Pick | None) -> Iterator[Found]:
    """The objects a walk of the URL reads, in sources' order and by its rules, and the
    problems it tells (an empty folder, another session than the one picked)."""
    at = _session_in(listing.root.split("/"))
    if pick is not None and at is not None and not pick.keeps(at):
        yield Found("", listing.root, 0, at, f"in Ray session {at}, not {pick.session}: not read")
        return
    if "" in listing.objects:  # the URL names one object
        yield Found("", *listing.objects[""], at)
        return
    if not listing.children:
        problem = "empty folder: nothing to read" if listing.fs.isdir(listing.root) else "nothing at this URL: nothing read"
        yield Found("", listing.root, 0, at, problem)
        return
    stack = [""]
    while stack:
        rel = stack.pop()
        session = _session_in(rel.split("/"), at)
        if rel in listing.objects:
            key, size = listing.objects[rel]
            # in a walk with a session picked, an object of another session (or of none) is not read, but an archive's members may be
            if pick is None or pick.keeps(session) or key.lower().endswith(ARCHIVE_NAMES):
                yield Found(rel, key, size, session)
            continue
        if rel and pick is not None and session is not None and not pick.keeps(session):
            continue
        names = _kept(rel, list(listing.children.get(rel, ())), lambda path: path in listing.dirs)
        if not names:
            if not rel or not _made_by_ray(rel, lambda path: list(listing.children.get(path, ()))):
                yield Found(rel, listing.root, 0, session, "empty folder: nothing to read")
            continue
        if any(SESSION.match(name) for name in names):  # a copy of the link to the newest session, made by a copy that follows links
            names = [name for name in names if name != LATEST]
        stack.extend(posixpath.join(rel, name) for name in reversed(names))


def discover(url: str, pick: Pick | None = None) -> Iterator[Input]:
    """Every input at `url` (sources.discover with a URL), problems included. Each object
    is opened when its Input is made: read each one before asking for the next."""
    try:
        listing = _listing(url)
    except Unreadable as err:
        yield Input(url, problems=[str(err)])
        return
    for found in _found(listing, pick):
        path = listing.joined(found.rel)
        if found.problem is not None:
            yield Input(path, problems=[found.problem], session=found.session)
        else:
            yield from _object(listing, found, path, pick)


def expand(url: str, session: str | None = None) -> list[tuple[str, int]]:
    """The URL of every object `discover([url])` reads, with its size, in its order: a list
    to share among machines, each object then read with `discover([object_url])`, which
    gives it the node, session and role it gets in the walk of `url`.

    `session`: only the objects of that Ray session (a name; "latest" is the newest at
    `url`), as `discover(..., session)`; pass the same name to each `discover`. What the
    walk tells instead of reading (an empty folder, nothing at the URL) is not listed:
    `discover([url])` tells it. Raises Unreadable when `url` cannot be listed."""
    return [each for each in plan(url, session) if isinstance(each, tuple)]


def plan(url: str, session: str | None = None) -> list[tuple[str, int] | Input]:
    """What a walk of `url` does, in its order: the URL and size of each object it reads
    (as `expand`), and an Input for what it tells instead (an empty folder, another session).
    Raises Unreadable when `url` cannot be listed."""
    listing = _listing(url)
    pick = None if session is None else Pick(newest(sessions_under(url)) if session == "latest" else session)
    return [
        (listing.joined(found.rel), found.size) if found.problem is None else Input(listing.joined(found.rel), problems=[found.problem], session=found.session)
        for found in _found(listing, pick)
    ]


def sessions_under(url: str) -> set[str]:
    """The Ray sessions at or under `url` (sources.walk.sessions_under): the session its key lies
    in, else those of the objects under it and of the members of its tar archives."""
    try:
        listing = _listing(url)
    except Unreadable:  # told when read
        return set()
    found: set[str] = set()
    for item in _found(listing, None):
        if item.problem is not None:
            continue
        if item.session is not None:
            found.add(item.session)
        elif item.key.lower().endswith(ARCHIVE_NAMES):
            found.update(_archive_sessions(listing.joined(item.rel), functools.partial(_open, listing.fs, item.key)))
    return found


def _object(listing: Listing, found: Found, path: str, pick: Pick | None) -> Iterator[Input]:
    """One object, sniffed and read once as sources.walk._stream reads a stream (an archive's
    members, text, or told as binary): the stream opened to sniff it is the one read."""
    role, pid = role_of(found.key)
    node = _node(listing, found.key, role == "kernel")
    item = Input(path, role, pid, node=node, size=found.size, session=found.session)
    for each in _stream(path, lambda: _open(listing.fs, found.key), pick, item):
        each.node = each.node or node  # an archive's member under no raylet.out of its own: the archive's folder's
        yield each


def _open(fs: Any, key: str) -> BinaryIO:
    """An object, opened to be read; any error of its client an OSError (see Remote)."""
    try:
        return cast(BinaryIO, Remote(fs.open(key, "rb")))
    except OSError:
        raise
    except Exception as err:  # noqa: BLE001 - each client raises its own
        raise OSError(error_line(err)) from err


class Remote(Wrapping):
    """An object of a file system, read: whatever its client raises (botocore's, aiohttp's
    errors are not OSErrors) becomes an OSError, which the pipeline tells as 'read failed
    after N bytes', as for a file."""

    inner: Any  # an fsspec file

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data = self.inner.read(len(buffer))
        except OSError:
            raise
        except Exception as err:  # noqa: BLE001 - each client raises its own
            raise OSError(error_line(err)) from err
        buffer[: len(data)] = data
        return len(data)


def _node(listing: Listing, key: str, kernel: bool) -> str | None:
    """The node of the raylet.out nearest at or above the object `key`, and for a kernel
    log the raylet.out of a logs/ folder beside it first (as sources.walk._folder gives it)."""
    folder = posixpath.dirname(key)
    while folder:
        for name in RAYLETS_BESIDE if kernel else RAYLET:
            path = posixpath.join(folder, name)
            # under the URL the listing says whether it exists; above it, it is looked for
            if listing.within(path) and path not in listing.keys:
                continue
            node = _raylet_node(listing.fs, path)
            if node is not None:
                return node
        up = posixpath.dirname(folder)
        if up == folder:
            return None
        folder = up
    return None


@functools.lru_cache(maxsize=4096)
def _raylet_node(fs: Any, path: str) -> str | None:
    """The node a raylet.out names in its head, None when there is none or it cannot be
    read (as for a folder on disk). Kept per process: every object of a folder asks."""
    try:
        return node_in(fs.cat_file(path, start=0, end=NODE_HEAD))
    except Exception:  # noqa: BLE001 - no such object, or not readable: no node, as on disk
        return None
