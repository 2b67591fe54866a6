"""Ranges: a big plain file (2 * RANGE_MIN and more) read as byte ranges by several
processes, its events those one process reading it whole finds.

The process that hands out the files cuts one at line breaks (ranges_of); a worker scans
each range with the lines just before and after it (read_range), and hands back its events
as rows numbered as the whole file's lines; collect_ranges joins the ranges' events and
their reductions in the order of the file."""

from __future__ import annotations

import io
import itertools
import os
from concurrent.futures import Future
from typing import TYPE_CHECKING, BinaryIO

from .events import Clue, Event, from_rows, to_rows
from .grammars import Family, cues, families
from .layout import LAYOUT_HEAD, blanks_added, newest_first, stamped_later, wrap_layout
from .reduce import NOTHING, Held, Tally, joined, restored, take_in, tally_of
from .scan import MAX_BLOCK, FileContext, Scanner, context_before, counted_problems, is_open, newlines, set_latest, told_once
from .sources import Input, error_line
from .sources.decoding import BOM, ENCODED, Text, compressed, marks_in, records_of
from .times import YEAR, Stamp, first_stamp, node_of_line

if TYPE_CHECKING:
    from .options import Options

RANGE_MIN = 32 << 20  # the least bytes of a range: a file of two ranges or more is read by several processes
READ_STEP = 4 << 20  # bytes read at a time where a range's lines are counted or its first time looked for


def ranges_of(item: Input, jobs: int, fams: tuple[Family, ...] | None = None) -> tuple[list[tuple[int, int, int, int]], int | None] | None:
    """How to read a big plain file in byte ranges: (start of what is read, start and end of
    what is its own, end of what is read) for each, and the year its head shows; None for a
    file to read whole (small, compressed, or a paste whose layout must be learned whole).

    Each range begins MAX_BLOCK before its own part and ends MAX_BLOCK after it, at line
    breaks: a block begun before the range is seen whole, so its lines are not read as new
    blocks, and one begun inside it is read to its end."""
    if jobs < 2 or item.file is None or item.size < 2 * RANGE_MIN:
        return None
    try:
        with open(item.file, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(LAYOUT_HEAD)
            # compressed or UTF-16 text is read by one, and so is a hole
            records = head.lstrip(BOM)  # a collector's records, one a line or in one JSON document: read by one
            encoded = head.startswith((*ENCODED, b"\0")) or compressed(head) or records_of(records) is not None
            told = cues(fams if fams is not None else families())
            if encoded or blanks_added(head) is not None or stamped_later(head) or newest_first(head, told.blocks) or wrap_layout(head, False, told.triggers):
                return None
            cuts = [0]
            for k in range(1, min(jobs, size // RANGE_MIN)):
                cut = _line_after(fh, size * k // min(jobs, size // RANGE_MIN))
                if cuts[-1] < cut < size:
                    cuts.append(cut)
            cuts.append(size)
            if len(cuts) < 3:
                return None
            spans = []
            for own_lo, own_hi in itertools.pairwise(cuts):
                lo = 0 if own_lo == 0 else _line_after(fh, max(0, own_lo - MAX_BLOCK))
                hi = size if own_hi == size else _line_after(fh, min(size, own_hi + MAX_BLOCK))
                spans.append((lo, own_lo, own_hi, hi))
    except OSError:
        return None
    m = YEAR.search(head, 0, min(len(head), 1 << 16))
    return spans, int(m.group(1)) if m else None


def _line_after(fh: BinaryIO, at: int) -> int:
    """The offset just after the line break at or after `at` (the file's end if none), read
    a step at a time: a line may be hundreds of megabytes long."""
    if at == 0:
        return 0
    fh.seek(at)
    while data := fh.read(READ_STEP):
        found = data.find(b"\n")
        if found >= 0:
            return at + found + 1
        at += len(data)
    return at


def read_range(
    file: str,
    role: str,
    pid: int | None,
    node: str | None,
    span: tuple[int, int, int, int],
    year: int | None,
    options: Options,
) -> tuple:
    """In a worker process: scan one byte range of a big file (see ranges_of). Returns the
    events as rows numbered as the whole file's lines, its events reduced as the whole
    file's would be, the line breaks in its own part, its problems, and the first time its
    own part prints (for events of the range before it that had no time after them)."""
    lo, own_lo, own_hi, hi = span
    ctx = FileContext(file, role, pid, node, year)
    reduction = options.reduction()
    scanner = Scanner(ctx, options.families, pools=reduction.readings if reduction is not None else None)
    found: list[Event | Clue | None] = []
    with open(file, "rb") as fh:
        # the text read has no UTF-8 marks (sources.decoding.Text): the range's own part starts sooner in it
        before, inside = marks_in(fh, lo, own_lo), marks_in(fh, own_lo, own_hi)
        shift = _count_lines(fh, 0, lo)  # the file's lines before the range: its events are numbered as the whole file's
        scanner.resume((own_lo - lo - before, own_hi - lo - before - inside), *(context_before(fh, lo, ctx) if lo else (None, None, None)), line=shift + 1)
        own = _count_lines(fh, own_lo, own_hi)
        first, first_node = _first_time(fh, own_lo, own_hi, node is None) if own_lo else (None, None)
        fh.seek(lo)
        part = _Slice(fh, hi - lo)
        for x in scanner.events(io.BufferedReader(Text(part))):
            # numbered before it is taken: a reading that prints no time is placed by its line
            take_in(found, x, reduction)
        if part.left:  # the file ended before the range: truncated since it was measured
            scanner.problems.append(f"shrank while read (truncated, as logrotate's copytruncate does): bytes {hi - part.left}-{hi} were gone")
    kept = restored(found, reduction, rows=False)
    opened = [i for i, x in enumerate(kept) if isinstance(x, Event) and is_open(x)]
    held = reduction.held() if reduction is not None else {}
    tally = reduction.tally() if reduction is not None else tally_of(kept)
    return to_rows(kept), own, (scanner.problems, scanner.counts()), (first, first_node), opened, ctx.year, held, tally


def _count_lines(fh: BinaryIO, lo: int, hi: int) -> int:
    """The line breaks in bytes lo..hi of the file, read a step at a time."""
    fh.seek(lo)
    count = 0
    while lo < hi and (data := fh.read(min(READ_STEP, hi - lo))):
        count += newlines(data, 0, len(data))
        lo += len(data)
    return count


def _first_time(fh: BinaryIO, lo: int, hi: int, nodeless: bool) -> tuple[Stamp | None, str | None]:
    """The first time printed in bytes lo..hi (lo at a line start), and the node whose line
    printed it in a file of many nodes' lines; read a step at a time, each step ending at a
    line break (a line longer than a step is read in pieces that overlap by a time's width)."""
    fh.seek(lo)
    while lo < hi and (data := fh.read(min(READ_STEP, hi - lo))):
        cut = data.rfind(b"\n") + 1 if lo + len(data) < hi else len(data)
        cut = cut or max(1, len(data) - 64)  # no line break in the step: keep the last bytes for the next
        stamp, at = first_stamp(data, 0, cut)
        if stamp is not None:
            return stamp, node_of_line(data, at, cut) if nodeless else None
        lo += cut
        fh.seek(lo)
    return None, None


class _Slice(io.RawIOBase):
    """The next `size` bytes of an open file, as a stream."""

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh, self.left = fh, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.fh.read(min(len(buffer), self.left))
        buffer[: len(data)] = data
        self.left -= len(data)
        return len(data)


def collect_ranges(item: Input, futures: list[Future]) -> tuple[list[Event | Clue], Tally, Held]:
    """One file's events from its ranges, as a scan of the whole file gives them: an event
    with no time after it in its range ends its interval at the first time a later range
    prints (the readings a range holds as bytes are told it with them); the ranges' events
    are reduced together."""
    assert item.file is not None  # only a file on disk is read in ranges (see ranges_of)
    found: list[Event | Clue] = []
    lines = 0
    pending: list[Event] = []  # open events of earlier ranges
    told: set[tuple] = set()  # what the ranges told that a file tells once (scan.told_once)
    ctx = FileContext(item.path, item.role, item.pid, item.node)
    try:
        results = [future.result() for future in futures]
    except Exception as err:  # noqa: BLE001 - a worker that died costs only its input
        item.problems.append(f"oomlens failed on this input (please report): {error_line(err)}")
        return [], NOTHING, []
    held: Held = []
    after = None  # the first time of the ranges after this one
    for *_, (first, first_node), _, _, by_kind, _ in reversed(results):
        held.insert(0, (by_kind, after))
        after = (first, first_node) if first is not None else after
    long_lines = bad_lines = 0
    for rows, own_lines, (problems, (longs, bads)), (first, first_node), open_at, year, _, _ in results:
        long_lines, bad_lines = long_lines + longs, bad_lines + bads
        ctx.year = ctx.year or year
        if first is not None and pending:
            for event in pending:
                set_latest(event, first, first_node, ctx)
            pending = []
        part = from_rows(rows)
        pending += [part[i] for i in open_at]
        for x in part:
            key = told_once(x)
            if key is None or key not in told:  # an offset or a host an earlier range told
                found.append(x)
            if key is not None:
                told.add(key)
        lines += own_lines
        item.problems.extend(problems)
    item.problems.extend(counted_problems(long_lines, bad_lines))
    item.bytes, item.lines = item.size, lines + (1 if item.size and not _ends_with_break(item.file) else 0)
    return found, joined([result[-1] for result in results]), held


def _ends_with_break(path: str) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
