"""The one direction of data flow: sources → scan (lines, grammars) → events → diagnosis."""

from __future__ import annotations

import gc
import io
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING

from . import collector
from .events import Clue, Event, fold, from_rows, name_workers, to_rows
from .lines import laid_out
from .scan import FileContext, Scanner
from .sources import Input, discover, reopen

if TYPE_CHECKING:
    from .diagnosis import Diagnosis

WORKER_GC_THRESHOLD = 20_000  # new objects between two young collections in a worker (Python's default: 700)


def read_input(item: Input) -> list[Event | Clue]:
    """Scan one input; whatever goes wrong while reading becomes a problem of that input.

    Even an error of oomlens itself costs only the rest of this input, never the others."""
    events: list[Event | Clue] = []
    try:
        _read(item, events)
    except Exception as err:  # noqa: BLE001 - reported as a problem, the other inputs still read
        item.problems.append(f"oomlens failed on this input, rest not read (please report): {type(err).__name__}: {err}")
    return events


def _read(item: Input, events: list[Event | Clue]) -> None:
    """Scan `item` into `events`; an error of oomlens itself propagates."""
    if item.opener is None:
        return
    try:
        stream, layout = laid_out(item.opener(), item)
    except OSError as err:
        item.problems.append(f"cannot open ({err.strerror or err}): nothing read")
        return
    scanner = Scanner(FileContext(item.path, item.role, item.pid, item.node), layout=layout)
    try:
        for event in scanner.events(stream):
            events.append(event)
    except OSError as err:
        scanner.problems.append(f"read failed after {scanner.bytes_read} bytes: {err.strerror or err}")
    finally:
        item.bytes, item.lines = scanner.bytes_read, scanner.lines_read
        if layout is not None:
            removed, breaks = layout.totals()
            item.bytes, item.lines = item.bytes + removed, item.lines + breaks
        item.problems.extend(scanner.problems)
        if item.path != "-":
            stream.close()


def number(events: list[Event]) -> list[Event]:
    for i, event in enumerate(events, 1):
        event.id = f"e{i}"
    return events


def analyze(*paths: str, jobs: int | None = None, progress: Callable[[Input], None] | None = None) -> Diagnosis:
    """Read every input under `paths` and diagnose what they show.

    Files on disk are scanned by `jobs` processes (default: one per core); archive members
    and pipes stream through this process. Results are merged in input order, so the
    diagnosis is the same whatever `jobs` is."""
    jobs = jobs or os.cpu_count() or 1
    read: list[tuple[Input, list[Event | Clue] | Future | None]] = []
    waiting: list[int] = []  # files found but not yet handed to the pool (their place in `read`)
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_started) if jobs > 1 else None
    with collector.paused():  # the events come in by the ten thousand, and stay
        try:
            for item in discover(list(paths)):
                if pool is not None and item.file is not None:
                    waiting.append(len(read))
                    read.append((item, None))
                    continue
                if pool is not None:  # keep the pool busy while this process reads a stream
                    _hand_out(pool, read, waiting, progress)
                read.append((item, read_input(item)))
                if progress:
                    progress(item)
            if pool is not None:
                _hand_out(pool, read, waiting, progress)
            from .diagnosis import diagnose  # while the pool reads: the processes it forked need none of it

            results = [(item, _collect(item, found)) for item, found in read]
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        events: list[Event] = []
        clues: list[Clue] = []
        for item, found in results:
            for event in found:
                if event.node is None:  # an archive member may learn its node after it was read
                    event.node = item.node
                (clues if isinstance(event, Clue) else events).append(event)
        name_workers(events, [item.path for item, _ in results])
        return diagnose([item for item, _ in results], fold(events), clues)


def _hand_out(
    pool: ProcessPoolExecutor, read: list, waiting: list[int], progress: Callable[[Input], None] | None
) -> None:
    """Submit the waiting files, the biggest first: a big file started last would leave the
    other processes idle while it alone is read."""
    for index in sorted(waiting, key=lambda i: -read[i][0].size):
        item = read[index][0]
        future = pool.submit(_read_elsewhere, item.file, item.role, item.pid, item.node)
        if progress:
            future.add_done_callback(lambda _f, it=item: progress(it))
        read[index] = (item, future)
    waiting.clear()


def _worker_started() -> None:
    """Once in each worker process. What it inherited from the parent (modules, grammars,
    compiled patterns) goes to the cycle collector's permanent generation: walking those
    found nothing, and wrote to their pages, which the process then had to copy. And it
    collects less often: a file's events all live until they are sent back. (It was forked
    while the parent's collector was paused.)"""
    gc.freeze()
    gc.set_threshold(WORKER_GC_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()


def _read_elsewhere(file: str, role: str, pid: int | None, node: str | None) -> tuple[list[tuple], int, int, list[str]]:
    """In a worker process: scan one file, return what the parent needs of its Input (the
    events as rows of plain values, events.to_rows)."""
    item = reopen(Input(file, role, pid, node, file=file))
    found = read_input(item)
    return to_rows(found), item.bytes, item.lines, item.problems


def _collect(item: Input, found: list[Event | Clue] | Future) -> list[Event | Clue]:
    if not isinstance(found, Future):
        return found
    try:
        rows, item.bytes, item.lines, problems = found.result()
    except Exception as err:  # noqa: BLE001 - a worker that died costs only its input
        item.problems.append(f"oomlens failed on this input (please report): {type(err).__name__}: {err}")
        return []
    item.problems.extend(problems)
    return from_rows(rows)


def parse_text(text: str, name: str = "<text>") -> list[Event]:
    """Events in a snippet pasted into an issue or a chat: whole lines, even without the last
    line break a file would have (a file that lacks it was cut while written or copied)."""
    text = text if text.endswith("\n") else text + "\n"
    item = Input(name, "other", opener=lambda: io.BytesIO(text.encode("utf-8", "surrogateescape")))
    found: list[Event | Clue] = []
    _read(item, found)
    events = fold([e for e in found if isinstance(e, Event)])
    from .clock import settle

    settle(events, [c for c in found if isinstance(c, Clue)], [item])  # times as a diagnosis shows them
    return number(events)
