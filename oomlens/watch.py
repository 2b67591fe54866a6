"""Watch: follow a live Ray session folder and tell each incident as soon as its root is seen.

Files are followed by (device, inode) with the offset read so far, polled with os.stat (no
inotify, so it works on NFS and in containers): a file that shrank was truncated and is
read again from its start, and so is one rewritten in place (its modification time moved
and the bytes it began and ended with as read are not there any more, whatever its size);
a path whose inode changed was rotated (the renamed file is
read to its end under its new name, the new one from its start). Only appended bytes are
scanned, with the lines just before them as context (the time of a stamped line above a
hit, an `:actor_name:` a worker file announced at its top). The last lines of a file are
scanned again with the next poll, since the block they start may not be written whole
yet; what that rescan finds replaces what the last one found.

Memory stays bounded over hours: the correlator sees a window of at most MAX_EVENTS
failures, MAX_SAMPLES memory samples and MAX_CLUES clues, the oldest leaving first, and
every incident is told before the events it stands on leave the window. A file costs a
few integers, whatever its size.

Each poll that took a failure or a clue runs the correlation again on the window. An
incident whose root was not told before is printed as one JSON line (`update: false`);
when its cascade grows or its reading changes (a fuller report of its root, a traceback
naming its phase), it is printed again with `update: true`. Event ids are local to one line.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from .clock import local_offsets
from .diagnosis import CONTRACT_VERSION, Diagnosis, diagnose
from .events import Clue, Event, Source, fold
from .outputs.json import incident as contract_incident
from .reduce import READINGS
from .scan import ANNOUNCED, BACK_LINES, FileContext, Scanner, announced
from .sources import error_line, files_under
from .sources.decoding import BOM, SNIFF, hole_problem, is_binary
from .sources.inputs import shown
from .sources.naming import ARCHIVE_NAMES, node_in, role_of

MAX_EVENTS = 500  # failures in the window
MAX_SAMPLES = 500  # memory samples (gpu_memory) in the window: enough for a trend
MAX_CLUES = 1000  # tracebacks, task headers, printed settings
READ = 4 << 20  # bytes taken from one file at a time
MARK = 4096  # bytes of a file's head and of the end of what was read, kept as a hash: a rewrite in place changes them
REOPEN_LINES = 3  # a file's last lines are scanned again with the next poll
MAX_CONTEXT = 1 << 20  # bytes before the new ones scanned again, at most
COMPRESSED = (".gz", ".zst", ".bz2", ".xz", ".zip", *ARCHIVE_NAMES)  # rotated away, never appended to
NEWLINE = re.compile(b"\n")
ANNOUNCEMENT = re.compile(ANNOUNCED.encode())  # what a Ray worker file says it runs, as the scanner finds it

Key = tuple[int, int, str, int]  # (file serial, line, kind, n-th of that kind on that line)
Uid = tuple[int, int]  # (file serial, line): one report, whatever its path is now


@dataclass
class Followed:
    """A file being followed: where it is, what its name says, how far it was read."""

    serial: int  # unique per file and generation: a truncated file starts a new one
    path: str
    role: str
    pid: int | None
    node: str | None
    year: int | None = None  # learned from the first stamped lines, for headers without one
    actor: str | None = None  # the last `:actor_name:` announced before `context`
    offset: int = 0  # bytes taken
    context: int = 0  # where the next scan begins: a line start at or before `offset`
    context_line: int = 1  # the number of the line at `context`
    accept_line: int = 1  # reports starting at or after this line are taken from the next scan
    open_keys: list[Key] = field(default_factory=list)  # reports the next scan replaces
    binary: bool = False
    sniffed: bool = False  # its text's head was judged text (past any hole it begins with)
    hole: int = 0  # NUL bytes it begins with
    mtime_ns: int = 0  # when it was last changed, as of the last poll that read it
    marks: bytes = b""  # the hash of its first and last MARK bytes as read (marks_of)


@dataclass
class Told:
    """What was printed about an incident, to tell only what changed."""

    root: frozenset[Hashable]  # what stays of each report from one round to the next (watch: Uid)
    cascade: frozenset[Hashable]
    reading: tuple[Any, ...]


def news(diagnosis: Diagnosis, told: list[Told], uid: Callable[[Source], Hashable]) -> list[dict[str, Any]]:
    """The lines to print of `diagnosis`: each incident not in `told` (by `uid`, what stays of
    a report from one round to the next), or told with a smaller cascade or another reading;
    `told` learns them. Shared by `watch` and `watch --cluster`."""
    lines = []
    for incident in diagnosis.incidents:
        root = frozenset(uid(s) for s in incident.root.sources)
        cascade = frozenset(uid(s) for e in incident.cascade for s in e.sources)
        shown = contract_incident(diagnosis, incident)
        reading = tuple(shown[k] for k in ("fingerprint", "component", "memory", "confidence", "phase", "culprit"))
        known = next((t for t in told if t.root & root), None)
        if known is not None and cascade <= known.cascade and reading == known.reading:
            continue
        if known is None:
            told.append(Told(root, cascade, reading))
        else:
            known.root, known.cascade, known.reading = known.root | root, known.cascade | cascade, reading
        events = [e.to_dict() for e in (incident.root, *incident.cascade)]
        lines.append({"oomlens": CONTRACT_VERSION, "update": known is not None, "incident": shown, "events": events})
    return lines


class Watcher:
    """Follows the files under `path`; `poll()` returns the JSON lines to print."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.files: dict[tuple[int, int], Followed] = {}
        self.events: dict[Key, Event] = {}
        self.samples: dict[Key, Event] = {}
        self.clues: dict[Key, Clue] = {}
        self.uids: dict[int, Uid] = {}  # id(Source) of every report in the window -> its uid
        self.told: list[Told] = []
        self.problems: list[str] = []  # for stderr; the caller empties it
        self.unreadable: set[tuple[int, int]] = set()  # files told unreadable: told once, until read again
        self._serial = 0
        self._dirty = False  # a failure or clue came in since the last correlation
        self._said_empty = False  # an empty folder was told

    # -- following files ---------------------------------------------------------------------

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        """Read what was appended since the last poll; the incidents new or changed since.

        `final` reads unfinished last lines too (`--once`: nothing more will come)."""
        lines: list[dict[str, Any]] = []
        seen: dict[tuple[int, int], tuple[str, os.stat_result]] = {}
        for path, st in files_under(self.path):  # as `parse` finds them, none opened
            if not path.lower().endswith(COMPRESSED):
                seen.setdefault((st.st_dev, st.st_ino), (path, st))
        if not seen and not self._said_empty:  # told once: a folder that fills later is followed as ever
            self._said_empty = True
            self.problems.append(f"{shown(self.path)}: no log file in it yet: watching for new ones")
        for gone in self.files.keys() - seen.keys():
            del self.files[gone]
        for inode, (path, st) in seen.items():
            followed = self.files.get(inode)
            if followed is None or st.st_size < followed.offset or self._rewritten(followed, path, st):  # new, truncated or rewritten: from the start
                followed = self.files[inode] = self._follow(path)
            followed.path = path  # a rotated file is read to its end under its new name
            while not followed.binary and st.st_size > followed.offset and self._take(followed, inode, final):
                if len(self.events) > MAX_EVENTS or len(self.samples) > MAX_SAMPLES or len(self.clues) > MAX_CLUES:
                    lines += self._tell()  # before the window forgets what an incident stands on
                    self._trim()
            if followed.mtime_ns != st.st_mtime_ns:
                followed.mtime_ns, followed.marks = st.st_mtime_ns, marks_of(path, followed.offset)
        return lines + self._tell()

    @staticmethod
    def _rewritten(f: Followed, path: str, st: os.stat_result) -> bool:
        """Whether a file changed since it was read, other than by appending: its modification
        time moved and its head or the end of what was read holds other bytes now (an editor's
        save, a log written again in place to the very size it had)."""
        return st.st_mtime_ns != f.mtime_ns and f.offset > 0 and marks_of(path, f.offset) != f.marks

    def _follow(self, path: str) -> Followed:
        self._serial += 1
        role, pid = role_of(path)
        return Followed(self._serial, path, role, pid, self._node(path))

    def _node(self, path: str) -> str | None:
        """The node named by the raylet.out of the nearest folder above that has one, up to
        the watched folder (a file watched alone has the nodes its lines name, as in `parse`)."""
        if path == self.path:
            return None
        folder = os.path.dirname(path)
        while True:
            try:
                with open(os.path.join(folder, "raylet.out"), "rb") as fh:
                    node = node_in(fh.read(1 << 16))
                if node:
                    return node
            except OSError:
                pass
            if os.path.abspath(folder) == os.path.abspath(self.path):
                return None
            folder = os.path.dirname(folder)

    def _take(self, f: Followed, inode: tuple[int, int], final: bool) -> bool:
        """Scan the next appended bytes of `f` with their context; False when nothing was taken."""
        try:
            with open(f.path, "rb") as fh:
                if (os.fstat(fh.fileno()).st_dev, os.fstat(fh.fileno()).st_ino) != inode:
                    return False  # rotated between the listing and now: the next poll sees it
                fh.seek(f.context)
                data = fh.read(f.offset - f.context + READ)
        except FileNotFoundError:  # gone since the listing (rotated away): the next poll drops it
            return False
        except OSError as err:
            if inode not in self.unreadable:
                self.unreadable.add(inode)
                self.problems.append(f"{shown(f.path)}: cannot read ({err.strerror or err}): still watched, read when it can be")
            return False
        self.unreadable.discard(inode)
        start = f.offset - f.context  # where the new bytes begin in `data`
        if len(data) <= start:
            return False
        if not f.sniffed:
            hole = len(data) - len(data.lstrip(b"\0"))
            if hole:  # a hole the file begins with (logrotate's copytruncate): read past, to the text
                f.hole, f.context, f.offset = f.hole + hole, f.offset + hole, f.offset + hole
                return True
            if is_binary(data[:SNIFF]):
                f.binary = True
                self.problems.append(f"{shown(f.path)}: binary file (not text): not read, not followed")
                return False
            f.sniffed = True
            if f.hole:
                self.problems.append(f"{shown(f.path)}: {hole_problem(f.hole)}")
        cut = data.rfind(b"\n", start) + 1
        if cut == 0:  # no line finished yet: wait for it, unless it never will or is too long to wait
            if not final and len(data) - start < READ:
                return False
            cut = len(data)
        try:
            self._scan(f, data[:cut], final)
        except Exception as err:  # noqa: BLE001 - an oomlens error costs these bytes, not the watch
            self.problems.append(f"{f.path}: oomlens failed on bytes {f.context}-{f.context + cut}, skipped (please report): {error_line(err)}")
            f.context_line += data.count(b"\n", 0, cut)
            f.context = f.offset = f.context + cut
            f.accept_line, f.open_keys = max(f.accept_line, f.context_line), []
        return True

    def _scan(self, f: Followed, text: bytes, final: bool) -> None:
        f.node = f.node or self._node(f.path)  # raylet.out may name the node after the file began
        scanner = Scanner(FileContext(f.path, f.role, f.pid, f.node, f.year))
        scanner.resume(actor=f.actor if f.role == "worker" else None, line=f.context_line)
        # UTF-8 marks removed before a line is read (sources.decoding.Text); the lines stay where they are
        found: list[Event | Clue] = list(scanner.events(io.BytesIO(text.replace(BOM, b"") if BOM in text else text)))
        f.year = scanner.ctx.year
        for key in f.open_keys:
            self._drop(key)
        taken = [report for report in found if report.source.line >= f.accept_line]
        count: dict[tuple[int, str], int] = {}
        keys = []
        for report in taken:
            n = count[(report.source.line, report.kind)] = count.get((report.source.line, report.kind), 0) + 1
            key = (f.serial, report.source.line, report.kind, n)
            self._add(key, report)
            keys.append(key)

        # where the next scan of this file begins: the last lines, and any report that
        # reaches the end of what was written, are read again with what follows them
        tail = 0 if len(text) <= MAX_CONTEXT else text.find(b"\n", len(text) - MAX_CONTEXT) + 1 or len(text)
        starts = [tail] + [m.end() for m in NEWLINE.finditer(text, tail) if m.end() < len(text)]
        first = f.context_line + text.count(b"\n", 0, tail)  # the number of the line at `tail`
        last = first + len(starts) - 1
        accept = last + 1
        if not final:
            accept = min([last - REOPEN_LINES + 1] + [r.source.line for r in taken if r.source.end_line >= last - 2])
        accept = max(accept, f.accept_line, first)
        begin = max(first, accept - BACK_LINES)
        position = starts[begin - first] if begin - first < len(starts) else len(text)
        for m in ANNOUNCEMENT.finditer(text, 0, position):
            f.actor = announced(text, m.start())
        f.open_keys = [k for k in keys if k[1] >= accept]
        f.accept_line = accept
        f.offset = f.context + len(text)
        f.context += position
        f.context_line = begin

    # -- the window ------------------------------------------------------------------------

    def _store(self, report: Event | Clue) -> dict:
        if isinstance(report, Clue):
            return self.clues
        return self.samples if report.kind in READINGS else self.events

    def _add(self, key: Key, report: Event | Clue) -> None:
        self._store(report)[key] = report
        self.uids[id(report.source)] = (key[0], key[1])
        self._dirty = self._dirty or not (isinstance(report, Event) and report.kind in READINGS)

    def _drop(self, key: Key) -> None:
        for store in (self.events, self.samples, self.clues):
            report = store.pop(key, None)
            if report is not None:
                del self.uids[id(report.source)]
                return

    def _trim(self) -> None:
        for store, limit in ((self.events, MAX_EVENTS), (self.samples, MAX_SAMPLES), (self.clues, MAX_CLUES)):
            while len(store) > limit:
                self._drop(next(iter(store)))
        here = set(self.uids.values())
        self.told = [t for t in self.told if t.root & here]

    # -- telling ---------------------------------------------------------------------------

    def _tell(self) -> list[dict[str, Any]]:
        """Correlate the window; a line for each incident not told before or changed since."""
        if not self._dirty:
            return []
        self._dirty = False
        try:
            return self._correlate()
        except Exception as err:  # noqa: BLE001 - told on stderr; the next report tries again
            self.problems.append(f"oomlens failed to correlate (please report): {error_line(err)}")
            return []

    def _correlate(self) -> list[dict[str, Any]]:
        ordered = sorted([*self.events.items(), *self.samples.items()], key=lambda item: item[0][:2])
        events = [e for _, e in ordered]  # fold and diagnose work on copies: these stay for the next round
        clues = [c for _, c in sorted(self.clues.items(), key=lambda item: item[0][:2])]
        return news(diagnose([], fold(events, zones=local_offsets(events, clues, [])), clues), self.told, self._uid)

    def _uid(self, source: Source) -> Uid:
        return self.uids[id(source)]


def marks_of(path: str, offset: int) -> bytes:
    """A hash of a file's first MARK bytes and the MARK bytes before `offset`: what a poll
    compares to tell a file rewritten in place from one appended to (empty if unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(min(MARK, offset))
            fh.seek(max(0, offset - MARK))
            tail = fh.read(min(MARK, offset))
    except OSError:
        return b""
    return hashlib.blake2b(head + b"\0" + tail, digest_size=16).digest()
