"""The one direction of data flow: sources → scan (lines, grammars) → events → diagnosis."""

from __future__ import annotations

import bisect
import contextlib
import gc
import io
import os
import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from . import collector
from .events import Clue, Event, fold, from_rows, name_workers, number, to_rows
from .grammars import Family, cues, families
from .layout import laid_out
from .options import Options
from .progress import Tick, counted
from .ranges import collect_ranges, ranges_of, read_range
from .reduce import BUCKETS, NOTHING, Held, Reduction, Tally, counts, reduce_found, restore, restored, take_in, tally_of
from .registry import Registry
from .scan import FileContext, Scanner
from .sources import Input, discover, error_line, reopen
from .sources.naming import session_start

if TYPE_CHECKING:
    from .diagnosis import Diagnosis
    from .kinds import Kinds

WORKER_GC_THRESHOLD = 20_000  # new objects between two young collections in a worker (Python's default: 700)


def read_input(item: Input, reduction: Reduction | None = None, fams: tuple[Family, ...] | None = None, tick: Tick | None = None) -> list[Event | Clue]:
    """Scan one input; whatever goes wrong while reading becomes a problem of that input.
    Its events are reduced by `reduction` while they are read (reduce.py), if given;
    `tick` is told the bytes of each read (progress.py).

    Even an error of oomlens itself costs only the rest of this input, never the others."""
    return restored(_scanned(item, reduction, fams, tick), reduction)


def _scanned(item: Input, reduction: Reduction | None, fams: tuple[Family, ...] | None, tick: Tick | None = None) -> list[Event | Clue | None]:
    """read_input's events, a gap (None) where one was handed to `reduction`."""
    events: list[Event | Clue | None] = []
    try:
        _read(item, events, reduction, fams, tick)
    except Exception as err:  # noqa: BLE001 - reported as a problem, the other inputs still read
        item.problems.append(f"oomlens failed on this input, rest not read (please report): {error_line(err)}")
    return events


def read_held(item: Input, options: Options, tick: Tick | None = None) -> tuple[list[Event | Clue], Tally, Held]:
    """An input's events as the process that concludes takes them: the readings the core
    read whole that its reduction (to `options.budget`) keeps stay bytes (Reduction.held),
    the others are events."""
    reduction = options.reduction()
    found = restored(_scanned(item, reduction, options.families, tick), reduction, rows=False)
    return (found, reduction.tally(), [(reduction.held(), None)]) if reduction is not None else (found, tally_of(found), [])


def _read(item: Input, events: list, reduction: Reduction | None = None, fams: tuple[Family, ...] | None = None, tick: Tick | None = None) -> None:
    """Scan `item` into `events` (an event handed to `reduction` leaves None in its place);
    an error of oomlens itself propagates."""
    if item.opener is None:
        return
    try:
        stream, layout = laid_out(item.opener(), item, cues(fams if fams is not None else families()))
    except OSError as err:
        item.problems.append(f"cannot open ({err.strerror or err}): nothing read")
        return
    scanner = Scanner(FileContext(item.path, item.role, item.pid, item.node), fams, layout=layout, pools=reduction.readings if reduction is not None else None)
    try:
        for event in scanner.events(stream if tick is None else counted(stream, item, tick)):
            take_in(events, event, reduction)
    except OSError as err:
        scanner.problems.append(f"read failed after {scanner.bytes_read} bytes: {err.strerror or err}")
    finally:
        item.bytes, item.lines = item.hole + scanner.bytes_read, scanner.lines_read
        if layout is not None:
            removed, breaks = layout.totals()
            item.bytes, item.lines = item.bytes + removed, item.lines + breaks
        item.problems.extend(scanner.problems)
        if item.path != "-":
            stream.close()


def analyze(
    *paths: str,
    jobs: int | None = None,
    progress: Tick | None = None,
    budget: int | None = BUCKETS,
    registry: Registry | None = None,
    session: str | None = None,
    cluster: str | None = None,
    node_timeout: float | None = None,
) -> Diagnosis:
    """Read every input under `paths` and diagnose what they show.

    Files on disk are scanned by `jobs` processes (default: one per core); archive members
    and pipes stream through this process. Results are merged in input order, so the
    diagnosis is the same whatever `jobs` is. Memory readings, and failures, are each kept
    within `budget` buckets (reduce.py); None keeps every one. `registry`: the families read and what their
    kinds mean (registry.py; default: the shipped ones). `session`: read only one Ray
    session, "latest" or a session folder's name (sources.discover); each session read is
    correlated on its own.

    `cluster`: also read every node of the live Ray cluster at that address, where its logs
    lie (cluster.py; `jobs` is then the processes per node for the nodes' logs, one by
    default, and `node_timeout` the seconds a node has to answer); the objects at URLs
    among `paths` are shared out among its nodes and read there, the other paths here."""
    registry = registry or Registry.shipped()
    options = Options(jobs=jobs, budget=budget, session=session, added=registry.added, node_timeout=node_timeout)
    with collector.paused(), contextlib.closing(_inputs(list(paths), options, progress, cluster)) as found:
        return conclude(found, options, registry.kinds)  # the events come in by the ten thousand, and stay


def _inputs(paths: list[str], options: Options, progress: Tick | None, cluster: str | None) -> Generator[Read]:
    """The inputs of analyze: the cluster's nodes' first, when it names one, then those under `paths`."""
    if cluster is not None:
        from .cluster import read_cluster
        from .urls import is_url

        shared = [p for p in paths if is_url(p)]  # objects every node reaches: read on the nodes
        paths = [p for p in paths if not is_url(p)]
        yield from read_cluster(cluster, options, progress, shared)
    yield from read_all(paths, options, progress)


Read = tuple[Input, list[Event | Clue], Tally, Held]  # one input, what was found in it, its events' reduction, and the readings it holds as bytes


def read_all(paths: list[str], options: Options, progress: Tick | None = None) -> Generator[Read]:
    """Every input under `paths` with what it holds, in input order (see analyze): files
    on disk are handed to a pool of `options.jobs` processes first, then each result is
    waited for in turn; `progress` is told of each (progress.Tick). What was yielded is no
    longer held here."""
    jobs = options.jobs or os.cpu_count() or 1
    read: list[tuple[Input, Any]] = []
    waiting: list[int] = []  # files found but not yet handed to the pool (their place in `read`)
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_started) if jobs > 1 else None
    try:
        for item in discover(paths, options.session):
            if progress:
                progress(item, 0)  # found: its size joins the total to read
            if pool is not None and item.file is not None:
                waiting.append(len(read))
                read.append((item, None))
                continue
            if pool is not None:  # keep the pool busy while this process reads a stream
                _hand_out(pool, jobs, read, waiting, options, progress)
            read.append((item, read_held(item, options, progress)))
            if progress:
                progress(item)
        if pool is not None:
            _hand_out(pool, jobs, read, waiting, options, progress)
        for index, (item, found) in enumerate(read):
            read[index] = (item, None)  # the future's result (rows) goes with it, once made into events
            yield (item, *_collect(item, found))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def conclude(read: Iterable[Read], options: Options, kinds: Kinds) -> Diagnosis:
    """The diagnosis of inputs read (by read_all, or on a cluster's nodes): each input's
    readings join the others' as it comes in (within `options.budget`), events are placed
    in their Ray session, workers named, reports of one occurrence folded within each
    session (the identity of their kind in `kinds`), and the whole diagnosed."""
    kept = options.reduction()
    results = []
    for index, (item, found, tally, held) in enumerate(read):
        item.readings, item.failures = counts(tally)
        if kept is not None:
            kept.coarsen(tally)
            kept.hold(held, index)  # first: the tracebacks held are looked over (Reduction.prune) with every kept reading of their input
            reduce_found(found, index, kept)
        results.append((item, found))
    if kept is not None:
        kept.prune()
        restore([found for _, found in results], kept)
    events: list[Event] = []
    clues: list[Clue] = []
    sessions = sorted({item.session for item, _ in results if item.session is not None})
    by_session: dict[str | None, list[Event]] = {name: [] for name in [*sessions, None]}
    for item, found in results:
        item.readings_kept, item.failures_kept = counts(tally_of(found))
        place = _placer(item, sessions)
        for event in found:
            if event.node is None:  # an archive member may learn its node after it was read
                event.node = item.node
            if isinstance(event, Clue):
                clues.append(event)
            else:
                events.append(event)
                by_session[place(event)].append(event)
    name_workers(events, [item.path for item, _ in results])
    from .clock import local_offsets
    from .diagnosis import diagnose

    inputs = [item for item, _ in results]
    zones = local_offsets(events, clues, inputs)  # a zoned time is folded where the clock will show it
    folded: list[Event] = []
    of: list[str | None] = []
    for name, of_session in by_session.items():  # reports of one occurrence are of one session
        of_session = fold(of_session, kinds, zones)
        folded += of_session
        of += [name] * len(of_session)
    return diagnose(inputs, folded, clues, kinds, of)


def _placer(item: Input, sessions: list[str]) -> Callable[[Event], str | None]:
    """Which Ray session an event of `item` belongs to: the one the input lies in. An input
    outside any session (a driver log named beside them) belongs to the only session; among
    several, each event to the session begun last by its time as printed (a session's name
    tells when it began; a time before them all goes to the first), an event with no time to
    that of the event before it in the input; None when it has none."""
    if item.session is not None or len(sessions) < 2:
        only = item.session or (sessions[0] if sessions else None)
        return lambda _event: only
    starts = [(session_start(name) or "")[:19] for name in sessions]
    last: list[str | None] = [None]

    def place(event: Event) -> str | None:
        time = event.time or event.time_latest
        if time:
            last[0] = sessions[max(0, bisect.bisect_right(starts, time[:19]) - 1)]
        return last[0]

    return place


def _hand_out(pool: ProcessPoolExecutor, jobs: int, read: list, waiting: list[int], options: Options, progress: Tick | None) -> None:
    """Submit the waiting files to the `jobs` processes of `pool`, the biggest first: a big
    file started last would leave the other processes idle while it alone is read. A file
    too big for one process is read as byte ranges by several."""
    for index in sorted(waiting, key=lambda i: -read[i][0].size):
        item = read[index][0]
        spans = ranges_of(item, jobs, options.families)
        if spans is None:
            future: Future | list[Future] = pool.submit(_read_elsewhere, item.file, item.role, item.pid, item.node, options)
        else:
            future = [pool.submit(read_range, item.file, item.role, item.pid, item.node, span, spans[1], options) for span in spans[0]]
        if progress:
            _tell(progress, item, future, spans[0] if spans is not None else None)
        read[index] = (item, future)
    waiting.clear()


def _tell(progress: Tick, item: Input, future: Future | list[Future], spans: list[tuple[int, int, int, int]] | None) -> None:
    """Tell `progress` the bytes of each of a file's byte ranges as its process is done with
    it, and the file as read once every range is (a file read whole: when it is)."""
    if isinstance(future, Future):
        future.add_done_callback(lambda _: progress(item))
        return
    left, lock = [len(future)], threading.Lock()  # ranges not done yet (a range done before its callback is added calls it here)
    for part, (_, own_lo, own_hi, _) in zip(future, spans or (), strict=True):

        def done(_: Future, size: int = own_hi - own_lo) -> None:
            progress(item, size)
            with lock:
                left[0] -= 1
                last = not left[0]
            if last:
                progress(item)

        part.add_done_callback(done)


def _worker_started() -> None:
    """Once in each worker process. What it inherited from the parent (modules, grammars,
    compiled patterns) goes to the cycle collector's permanent generation: walking those
    found nothing, and wrote to their pages, which the process then had to copy. And it
    collects less often: a file's events all live until they are sent back. (It was forked
    while the parent's collector was paused.)"""
    gc.freeze()
    gc.set_threshold(WORKER_GC_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()


def _read_elsewhere(file: str, role: str, pid: int | None, node: str | None, options: Options) -> tuple:
    """In a worker process: scan one file, return what the parent needs of its Input (the
    events as rows of plain values, events.to_rows) and of its events' reduction."""
    item = reopen(Input(file, role, pid, node, file=file))
    found, reduced, held = read_held(item, options)
    return to_rows(found), item.bytes, item.lines, item.problems, reduced, held


def _collect(item: Input, found: Any) -> tuple[list[Event | Clue], Tally, Held]:
    if isinstance(found, list) and found and isinstance(found[0], Future):
        return collect_ranges(item, found)
    if not isinstance(found, Future):
        return found
    try:
        rows, item.bytes, item.lines, problems, reduced, held = found.result()
    except Exception as err:  # noqa: BLE001 - a worker that died costs only its input
        item.problems.append(f"oomlens failed on this input (please report): {error_line(err)}")
        return [], NOTHING, []
    item.problems.extend(problems)
    return from_rows(rows), reduced, held


def parse_text(text: str, name: str = "<text>", registry: Registry | None = None) -> list[Event]:
    """Events in a snippet pasted into an issue or a chat: whole lines, even without the last
    line break a file would have (a file that lacks it was cut while written or copied)."""
    registry = registry or Registry.shipped()
    text = text if text.endswith("\n") else text + "\n"
    item = Input(name, "other", opener=lambda: io.BytesIO(_utf8(text)))
    found: list[Event | Clue] = []
    _read(item, found, None, registry.families)
    from .clock import local_offsets, settle

    clues = [c for c in found if isinstance(c, Clue)]
    events = [e for e in found if isinstance(e, Event)]
    events = fold(events, registry.kinds, local_offsets(events, clues, [item]))

    settle(events, clues, [item])  # times as a diagnosis shows them
    return number(events)


def _utf8(text: str) -> bytes:
    """The bytes of a snippet: those a surrogateescape decoding kept as they were, and any
    other lone surrogate as the invalid bytes it stands for (counted as invalid UTF-8)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
