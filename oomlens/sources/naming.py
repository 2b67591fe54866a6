"""Ray's names: what a log file's name tells (its role and pid: raylet, gcs, core worker,
worker `.out/.err`, events, driver, kernel), the Ray session a path lies in (its
`session_<date>_<time>_<pid>` folder, `session_latest`) and the session picked to read,
which entries of a folder may hold logs, and the node a raylet.out names."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

NODE_HEAD = 1 << 16  # raylet.out names its node within its first lines
SESSION_SKIP = ("runtime_resources", "sockets")  # beside a session's logs/: environments and sockets
# A session folder, as ray/_private/node.py names it: session_{%Y-%m-%d_%H-%M-%S_%f}_{pid}
SESSION = re.compile(r"^session_(\d{4}-\d\d-\d\d)_(\d\d)-(\d\d)-(\d\d)_(\d+)_\d+$")
LATEST = "session_latest"  # node.py's link to the newest session, beside the session_* folders
# Folders Ray makes in a session's logs/ whether or not anything is ever written there:
# node.py (old, and tpu_logs, a link to libtpu's folder when there is one), the nsight,
# rocprof_sys and omnitrace runtime-env plugins, the event writers of the raylet, GCS and
# workers (events, export_events), and the dashboard agent's JAX and GPU profilers (profiles,
# dashboard/modules/reporter/*_profile_manager.py: made when the agent starts, Ray >= 2.5x)
RAY_FOLDERS = frozenset({"events", "export_events", "nsight", "old", "omnitrace", "profiles", "rocprof_sys", "tpu_logs"})
RAY_LOG_ROLES = frozenset({"raylet", "gcs", "core_worker", "worker"})  # a file of these tells a Ray logs/ folder
COMPRESSED = r"\.(?:gz|zst|xz|bz2)"  # the suffixes of a file compressed whole (sources.decoding reads each)
LOG_NAME = re.compile(rf"\.(?:log|out|err|txt)(?:\.\d+)?(?:{COMPRESSED})?$", re.IGNORECASE)  # beside sessions: a log by its name
ARCHIVE_NAMES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tbz")

WORKER = re.compile(r"^(?:python-core-worker|python-core-driver)-[0-9a-f]+_(\d+)(?:\.\d+)?\.log$")
WORKER_OUT = re.compile(r"^(?:io_)?worker-[0-9a-f]+(?:-[0-9a-f]+)?-(\d+)(?:\.\d+)?\.(?:out|err)(?:\.\d+)?$")
NODE_IN_RAYLET = re.compile(rb"node_manager address: ([\d.]+):|\[state-dump\] Node name: ([\d.]+)")

ROLES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^raylet(?:\.\d+)?\.(?:out|err)(?:\.\d+)?$"), "raylet"),
    (re.compile(r"^gcs_server(?:\.\d+)?\.(?:out|err)(?:\.\d+)?$"), "gcs"),
    (WORKER, "core_worker"),
    (WORKER_OUT, "worker"),
    (re.compile(r"^event_[A-Z_]+?(?:_(\d+))?\.log$"), "events"),
    (re.compile(r"^(?:job-driver-.*\.log|driver.*|.*console.*|nohup.*\.out)$"), "driver"),
    (re.compile(r"^(?:dmesg.*|kern\.log.*|syslog.*|messages.*|journal.*)$"), "kernel"),
]


def role_of(name: str) -> tuple[str, int | None]:
    """The role and pid a Ray log file's name tells (formats.md §7)."""
    base = re.sub(f"{COMPRESSED}$", "", os.path.basename(name), flags=re.IGNORECASE)
    for pattern, role in ROLES:
        m = pattern.match(base)
        if m:
            pid = int(m.group(1)) if m.groups() and m.group(1) else None
            return role, pid
    return "other", None


@dataclass(frozen=True)
class Pick:
    """The one Ray session to read (`--session`); `session` is None when none was found."""

    session: str | None

    def keeps(self, at: str | None) -> bool:
        return at is not None and at == self.session


def session_of(path: str) -> str | None:
    """The Ray session a path on disk lies in: the last session_* folder of its real path
    (session_latest is resolved)."""
    return _session_in(os.path.realpath(path).split(os.sep))


def _session_in(parts: list[str], default: str | None = None) -> str | None:
    return next((part for part in reversed(parts) if SESSION.match(part)), default)


def session_start(name: str) -> str | None:
    """When a session began, as an ISO time (the time in its name: the head node's clock)."""
    m = SESSION.match(name)
    return f"{m.group(1)}T{m.group(2)}:{m.group(3)}:{m.group(4)}.{m.group(5)}" if m else None


def newest(sessions: set[str]) -> str | None:
    """The session begun last, by the time in its name (what session_latest points to)."""
    return max(sessions, key=lambda name: (session_start(name), name), default=None)


def _session_below(path: str, name: str, at: str | None) -> str | None:
    """The session of a folder entry: its own name for a session folder, the one it points
    to for session_latest, else the session of the folder it is in."""
    if SESSION.match(name):
        return name
    return session_of(path) if name == LATEST else at


def _kept(path: str, names: list[str], isdir: Callable[[str], bool] = os.path.isdir) -> list[str]:
    """A folder's entries that may hold logs, in the order they are read: in a Ray session
    folder (one holding logs/) the other subfolders hold none; beside session_* folders
    (/tmp/ray) a file is read when its name says it is a log (a README or notes are not).
    `isdir` tells a folder (urls.py walks object stores by the same rules)."""
    names = sorted(names)
    if "logs" in names:
        return [n for n in names if n not in SESSION_SKIP]
    if any(SESSION.match(n) for n in names):
        return [n for n in names if SESSION.match(n) or _log_named(n) or isdir(os.path.join(path, n))]
    return names


def _log_named(name: str) -> bool:
    """A file name that says the file is a log: a Ray log's, a driver's or kernel's, a
    `.log/.out/.err/.txt` (rotated or compressed), or an archive of them."""
    return role_of(name)[0] != "other" or LOG_NAME.search(name) is not None or name.lower().endswith(ARCHIVE_NAMES)


def _made_by_ray(path: str, listdir: Callable[[str], list[str]] = os.listdir) -> bool:
    """An empty folder Ray itself makes in every session's logs/ (RAY_FOLDERS): no problem.
    `listdir` lists a folder (urls.py: an object store's listing)."""
    if os.path.basename(path) not in RAY_FOLDERS:
        return False
    try:
        return any(role_of(name)[0] in RAY_LOG_ROLES for name in listdir(os.path.dirname(path)))
    except OSError:
        return False


def node_in(raylet_head: bytes) -> str | None:
    """The node IP in the first lines of a raylet.out."""
    m = NODE_IN_RAYLET.search(raylet_head)
    return (m.group(1) or m.group(2)).decode() if m else None
