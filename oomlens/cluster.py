"""Cluster: read a live Ray cluster's logs where they lie, with Ray itself.

A large run spreads its logs over dozens of nodes, each in its own `session_*/logs`. While
the cluster is up, one Ray task pinned to each alive node (node affinity, not soft) reads
that node's logs in place with oomlens's own reading (pipeline.read_all) and sends back
only what it found: each input's facts and its events and clues as rows of plain values,
never a log's bytes. The driver side then concludes as for files read here (one clock,
the nodes' skew corrected as for copied folders).

oomlens reaches the nodes through Ray's runtime environment: the packages the reading
imports are the `py_modules` of the connection oomlens makes (SHIPPED), from this process's
own installation, so nothing is installed on the nodes beforehand and nothing is fetched
from outside the cluster. Compiled ones work where the nodes run this machine's platform;
Ray already asks every node to run this process's Python.

Each input is named `<node ip>:<path on that node>` and carries the node's Ray id
(`ray_node` in the JSON); a node that could not be read is one input of its own, named by
its IP, whose problem says why: dead (its logs went with it, unless they were collected
before), its task failed, or no answer within the timeout.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import importlib.util
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, BinaryIO

from .events import Clue, Event, from_rows, to_rows
from .grammars import grammar_dir
from .options import Options
from .pipeline import Read, read_all
from .reduce import NOTHING, with_held
from .sources import Input, error_line

if TYPE_CHECKING:
    from .progress import Tick
    from .watch import Told

# What the reading imports beyond the standard library and Ray's own dependencies, shipped
# to the nodes as this process has them: (package, needed). An optional one missing here
# is not shipped (the reading does without it, only slower); a missing needed one stops.
SHIPPED = (
    ("oomlens", True),
    ("lark", True),  # the grammars' parser (pure Python)
    ("zstandard", True),  # sources reads .zst logs
    ("fsspec", False),  # urls.py: objects shared out among the nodes (a protocol's own package, s3fs, must be on the nodes)
)
EXCLUDED = ("__pycache__/", "_cffi.*.so")  # compiled caches; zstandard's cffi backend, which its C one makes unused
CONNECT_TIMEOUT_S = 10.0  # a HOST:PORT nothing answers at: told at once (Ray itself would retry for minutes)
NODE_TIMEOUT_S = 600.0  # a node that has not answered by then is told as such, not waited for
INSTALL = "--cluster needs Ray: pip install 'oomlens[ray]'"


class ClusterError(Exception):
    """The cluster could not be read at all; the message says why, in one line."""


class NoRay(ClusterError, ImportError):
    """Ray is not installed where oomlens runs."""


@dataclass
class NodeInput(Input):
    """An input read on a node of a cluster, or a node that could not be read: it says which
    node (`ray_node`: its Ray id, its IP, and whether it was read, dead or failed)."""

    ray_node: dict[str, str] | None = None

    def to_dict(self) -> dict:
        out = super().to_dict()
        if self.ray_node is not None:  # additive: the Ray node it was read on
            out["ray_node"] = self.ray_node
        return out


def read_cluster(address: str, options: Options, progress: Tick | None = None, spread: list[str] | None = None) -> Generator[Read]:
    """Every input of every node of the cluster at `address` ("auto", "host:port",
    "ray://..."), as read on its node, node after node by IP (see Cluster.read); then the
    objects at the URLs `spread`, read on the cluster's nodes (see Cluster.spread)."""
    with Cluster(address) as cluster:
        yield from cluster.read(options, progress)
        for url in spread or ():
            yield from cluster.spread(url, options, progress)


class Cluster:
    """A connection to a Ray cluster, made on entering and ended on leaving (the cluster itself
    is never stopped), with oomlens in its runtime environment: Ray ships local packages only
    with a connection's own (`ray.init`), not with one task's. A process connected already
    (a driver that diagnoses its own run) keeps its connection: its nodes then need oomlens
    from that connection's runtime environment or their own installation."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.started = False

    def __enter__(self) -> Cluster:
        ray = _ray()
        if not ray.is_initialized():
            _answers(self.address)
            with tempfile.TemporaryDirectory(prefix="oomlens-ray-") as folder:  # uploaded to the cluster by ray.init
                runtime_env = {"py_modules": _modules(folder), "excludes": list(EXCLUDED)}
                try:
                    ray.init(address=self.address, runtime_env=runtime_env, log_to_driver=False, logging_level=logging.ERROR)
                except Exception as err:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError: each is one line
                    raise ClusterError(f"cannot connect to the Ray cluster at {self.address}: {error_line(err)}") from None
            self.started = True
        return self

    def __exit__(self, *_: object) -> None:
        if self.started:
            _ray().shutdown()

    def read(self, options: Options, progress: Tick | None = None, paths: dict[str, list[str]] | None = None) -> Generator[Read]:
        """What every node holds, read there: its logs of the session the cluster runs (of
        `options.session` instead: "latest" or a session_* name, looked for in the node's
        Ray folder), or the paths `paths` gives for its Ray node id (a node it leaves out is
        not asked). `options.jobs` processes read on each node (default one: a node of a
        live run is busy); a node has `options.node_timeout` seconds (NODE_TIMEOUT_S) to
        answer."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        on_node = replace(options, jobs=options.jobs or 1)
        scan = ray.remote(scan_node)
        nodes = _nodes()
        if paths is not None:
            nodes = [n for n in nodes if n["NodeID"] in paths]
        asked = {}
        for node in nodes:
            if node["Alive"]:
                strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                task = scan.options(num_cpus=0, max_retries=0, scheduling_strategy=strategy, name="oomlens.scan_node")
                asked[node["NodeID"]] = task.remote(None if paths is None else paths[node["NodeID"]], on_node)
        timeout = NODE_TIMEOUT_S if options.node_timeout is None else options.node_timeout
        _, late = ray.wait(list(asked.values()), num_returns=len(asked), timeout=timeout) if asked else ([], [])
        for ref in late:
            ray.cancel(ref, force=True)
        read_at: dict[tuple | None, str] = {}  # each logs folder read, and the IP of the node it was read as
        for node in nodes:
            ip, ref = node["NodeManagerAddress"], asked.get(node["NodeID"])
            named = {"id": node["NodeID"], "ip": ip, "state": "read"}
            if ref is None:
                reason = f" ({node['DeathReasonMessage']})" if node.get("DeathReasonMessage") else ""
                problem = f"Ray node {node['NodeID']} is dead{reason}: its logs are not reachable through Ray unless they were collected before it died"
                yield _unread(ip, named, "dead", problem)
                continue
            if ref in late:
                yield _unread(ip, named, "failed", f"Ray node {node['NodeID']} did not answer within {timeout:g} s (its task was cancelled): nothing read")
                continue
            try:
                folder, rows = ray.get(ref)
            except Exception as err:  # noqa: BLE001 - a node whose task failed costs only that node
                cause = getattr(err, "cause", None) or err  # a task's own error, not Ray's wrapping of it
                yield _unread(ip, named, "failed", f"Ray node {node['NodeID']} could not be read: {error_line(cause)}")
                continue
            if folder is not None and folder in read_at:
                shared = f"its logs folder is that of node {read_at[folder]} on the same host (raylets of one session): read once, as that node's"
                yield NodeInput(ip, ray_node=named, problems=[shared]), [], NOTHING, []
                continue
            read_at.setdefault(folder, f"{ip} ({node['NodeID'][:8]})")
            for item, found, reduced, held in _arrived(rows, ip, named):
                if progress:
                    progress(item)
                yield item, found, reduced, held

    def spread(self, url: str, options: Options, progress: Tick | None = None) -> Generator[Read]:
        """The objects at `url` (object storage every node reaches), read on the cluster's
        alive nodes rather than here: listed here (urls.plan), shared out biggest first,
        each to the node with the fewest bytes so far, read there as `discover` reads one
        object, and given back in the order a walk of `url` reads them, so the diagnosis is
        the one a read here gives. What a node could not read is read here; a URL with
        nothing to share (nothing at it, not listable) is read here, which tells why."""
        from . import urls
        from .sources.naming import newest

        name = newest(urls.sessions_under(url)) if options.session == "latest" else options.session  # one name for every node
        try:
            walk = urls.plan(url, name)
        except urls.Unreadable:
            walk = []
        objects = [each for each in walk if isinstance(each, tuple)]
        nodes = [n for n in _nodes() if n["Alive"]]
        if not objects or not nodes:
            yield from read_all([url], options, progress)
            return
        load = {n["NodeID"]: 0 for n in nodes}
        share: dict[str, list[str]] = {n["NodeID"]: [] for n in nodes}
        for path, size in sorted(objects, key=lambda o: -o[1]):
            node = min(load, key=lambda k: load[k])
            share[node].append(path)
            load[node] += size
        arrived: dict[str, list[Read]] = {}  # object -> its inputs (an archive's members, or the object)
        pending = {node: collections.deque(paths) for node, paths in share.items()}
        named = replace(options, session=name)
        for item, found, reduced, held in self.read(named, progress, {k: v for k, v in share.items() if v}):
            node = item.ray_node if isinstance(item, NodeInput) else None
            if node is None or node["state"] != "read":
                yield item, found, reduced, held  # a node not read: its objects are read here, below
                continue
            queue = pending[node["id"]]  # a node's inputs come in the order of its objects
            while len(queue) > 1 and not (item.path == queue[0] or item.path.startswith(queue[0] + ":")):
                queue.popleft()
            arrived.setdefault(queue[0], []).append((item, found, reduced, held))
        for each in walk:
            if isinstance(each, Input):  # what the walk tells instead of reading
                yield each, [], NOTHING, []
            elif each[0] in arrived:
                yield from arrived.pop(each[0])
            else:
                yield from read_all([each[0]], replace(named, jobs=1), progress)


def _nodes() -> list[dict[str, Any]]:
    """The cluster's nodes as Ray lists them, by IP: the order their inputs are read in."""
    return sorted(_ray().nodes(), key=lambda n: (n["NodeManagerAddress"], n["NodeID"]))


def _answers(address: str) -> None:
    """A HOST:PORT address must answer a TCP connection within seconds ("auto" and ray://
    addresses are Ray's to find and tell)."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {err.strerror or err}") from None


def _ray() -> Any:
    """Ray, imported on first use (it takes a second); NoRay says how to install it."""
    try:
        import ray
    except ImportError:
        raise NoRay(INSTALL) from None
    return ray


def _modules(folder: str) -> list[str]:
    """The folders `py_modules` ships (SHIPPED): oomlens copied with its grammars inside it
    (a source checkout keeps them beside the package), the others as installed."""
    shipped: list[str] = []
    for name, needed in SHIPPED:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            if needed:
                raise ClusterError(f"{name} is not installed here as a package, and the nodes need it")
            continue
        here = list(spec.submodule_search_locations)[0]
        if name == "oomlens":
            staged = os.path.join(folder, name)
            shutil.copytree(here, staged)
            if not os.path.isdir(os.path.join(staged, "grammars")):
                shutil.copytree(grammar_dir(), os.path.join(staged, "grammars"))
            here = staged
        shipped.append(here)
    return shipped


def scan_node(paths: list[str] | None, options: Options) -> tuple[tuple | None, list[tuple]]:
    """On a node, as a Ray task: read `paths`, or this node's logs of the session the cluster
    runs (of `options.session`: found in the node's Ray folder), as `parse` reads them;
    return where that folder is (folder_of) and each input's facts with its events and clues
    as rows of plain values (events.to_rows) and its readings' reduction. No log's bytes
    leave the node (and no kinds reach it: they are read where the run concludes)."""
    here = None if paths else _here(options.session)
    reading = [here] if here is not None else paths or []
    out = []
    with contextlib.closing(read_all(reading, options)) as found:
        for item, events, reduced, held in found:
            facts = (item.path, item.role, item.pid, item.node, item.bytes, item.lines, item.problems, item.session, item.opener is not None)
            out.append((facts, to_rows(with_held(events, held)), reduced))  # its paths are named as the node's below: rows of every event
    return (None if here is None else folder_of(here)), out


def folder_of(path: str) -> tuple:
    """Which folder of which running machine `path` is: nodes of one host may share their
    logs folder (several raylets in one session, as ray.cluster_utils starts them), whose
    files are then read once, not once per node."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:  # a host and its boot (Linux); the host's name otherwise
            machine = fh.read().strip()
    except OSError:
        machine = socket.gethostname()
    st = os.stat(path)
    return machine, st.st_dev, st.st_ino


def _here(session: str | None) -> str:
    """This node's logs folder of the session the cluster runs; with `session` given, its Ray
    folder, where discover finds that session among the others the node kept."""
    import ray

    context = ray.get_runtime_context()
    if hasattr(context, "get_temp_dir"):  # the public way (Ray 2.56 has it, 2.53 not yet)
        temp, name = context.get_temp_dir(), context.get_session_name()
    else:
        node = ray._private.worker.global_worker.node  # before: the worker's own Node (private)
        assert node is not None  # a task runs in a connected worker
        temp, name = node.get_temp_dir_path(), node.session_name
    return temp if session is not None else os.path.join(temp, name, "logs")


def _arrived(rows: list[tuple], ip: str, named: dict[str, str]) -> Iterator[Read]:
    """A node's answer as inputs and events, every path on the node named `<ip>:<path on
    the node>` (a URL names its object wherever it was read)."""
    from .urls import is_url

    for (path, role, pid, node, size, lines, problems, session, readable), found_rows, reduced in rows:
        shared = is_url(path)
        item = NodeInput(path if shared else f"{ip}:{path}", role, pid, node, bytes=size, lines=lines, problems=problems, session=session, ray_node=named)
        if readable:
            item.opener = _read_on(ip)
        found = from_rows(found_rows)
        if not shared:
            _rename(found, f"{ip}:")
        yield item, found, reduced, []


def _rename(found: list[Event | Clue], prefix: str) -> None:
    """Put `prefix` before the path of every place an event or clue was read from, once each
    (an event's first source is its `source`)."""
    for x in found:
        places = {id(x.source): x.source}
        if isinstance(x, Event):
            places.update((id(s), s) for s in x.sources)
            x.copies = [(prefix + path, time) for path, time in x.copies]
        for place in places.values():
            place.path = prefix + place.path


def _read_on(ip: str) -> Callable[[], BinaryIO]:
    """The opener of an input read on node `ip`: the outputs tell an input that could be read
    by its having one; it is never opened here."""

    def opener() -> BinaryIO:
        raise OSError(errno.EREMOTE, f"read on node {ip}, not here")

    return opener


def _unread(ip: str, named: dict[str, str], state: str, problem: str) -> Read:
    return NodeInput(ip, problems=[problem], ray_node={**named, "state": state}), [], NOTHING, []


class Rounds:
    """`watch --cluster`: every node's logs read again each round, as `parse --cluster` reads
    them (the nodes keep no offsets between rounds, so a round costs a whole read); the
    lines `watch` prints for an incident not told before, or told with a smaller cascade
    or another reading, and each problem once."""

    def __init__(self, address: str, paths: tuple[str, ...] = (), jobs: int | None = None, session: str | None = None, timeout: float | None = None) -> None:
        self.address, self.paths, self.jobs, self.session, self.timeout = address, paths, jobs, session, timeout
        self.told: list[Told] = []
        self.problems: set[str] = set()

    def poll(self) -> tuple[list[dict[str, Any]], list[str]]:
        """One round: the lines to print, and the problems not told before."""
        from .pipeline import analyze
        from .watch import news

        try:
            diagnosis = analyze(*self.paths, jobs=self.jobs, session=self.session, cluster=self.address, node_timeout=self.timeout)
        except Exception as err:  # noqa: BLE001 - told once, tried again next round (the cluster may come back)
            return [], self._new([f"the Ray cluster at {self.address} could not be read this round: {error_line(err)}"])
        lines = news(diagnosis, self.told, lambda source: (source.path, source.line))  # a report, read again each round
        return lines, self._new(diagnosis.problems)

    def _new(self, problems: list[str]) -> list[str]:
        new = [p for p in problems if p not in self.problems]
        self.problems.update(new)
        return new
