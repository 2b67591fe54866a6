"""Scan: read a stream's bytes, find the hits, their times and actors, and make events of their blocks.

The common line never reaches Python-level parsing: every family's triggers run together
over big chunks of bytes (the native core's DFA: prefilter.py), and only the lines they
hit (and the lines that continue their blocks: blocks.py) are decoded, peeled and parsed. The lines where a
worker file announces its actor (`:actor_name:`) are hits too, so each block knows the
actor it ran in. The time of the nearest preceding stamped line is looked up behind a
hit that has none, not kept for every line.
"""

from __future__ import annotations

import bisect
import codecs
import json
import os
import re
import weakref
from collections.abc import Generator, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, BinaryIO

from ._core import Lines, Reader, ReadingPool
from .blocks import MAX_LINE, Block, Blocks, reach_back
from .envelopes import REPEATED, Line, peel
from .events import CLUE_KINDS, Clue, Event, Source
from .grammars import Family, families
from .kinds import shipped
from .layout import Layout
from .prefilter import Prefilter, fast_regex, newlines, utf8_valid
from .sources import error_line
from .times import STAMPS, YEAR, Stamp, last_stamp_at, node_of_line

# bytes read at a time: a chunk's blocks are all read before any becomes an event (their times
# are looked up together), and a chunk dense with failures holds thousands of them at once
CHUNK = 1 << 20
OVERLAP = 4 << 10  # bytes of a piece of a long line read again with the next piece
MAX_BLOCK = 256 << 10  # a block never spans more bytes than this
STAMP_WINDOW = 2048  # bytes searched back from a resumed scan's start for the time before it, then twice as wide each try
BACK_LINES = 40  # lines of context before a hit that a block may need (watch re-reads them)

_SPARE: list[bytearray] = []  # the buffer of a stream read to its end, for the next one in this process
ANNOUNCED = r"(?m:^):(?:actor_name|task_name):"  # Ray's magic tokens in worker-*.out


@dataclass(slots=True)
class FileContext:
    """What a file tells about all of its lines: where it is, who wrote it."""

    path: str
    role: str = "other"
    pid: int | None = None
    node: str | None = None
    year: int | None = None  # for headers that print no year (vLLM, c10)


class Trigger:
    """All families' triggers, plus the lines where Ray announces the actor or task a
    worker runs: the native core's DFA finds the lines that hold any of them and where each
    match ends, and the regexes of the families it saw read only those lines.

    The hits are those of one alternation with a group per family (`pattern`; a match's
    family is `by_group[m.lastindex]`), leftmost-first, read over the whole buffer
    (tests/test_prefilter.py), because a trigger matches within one line."""

    def __init__(self, fams: tuple[Family, ...]) -> None:
        alternatives = [[f"(?:{t})" for t in fam.triggers] for fam in fams] + [[ANNOUNCED]]
        self.pattern = "|".join(f"({'|'.join(alts)})" for alts in alternatives).encode()
        # the family of each capturing group: the triggers' own groups belong to theirs
        self.by_group: list[Family | None] = [None]
        for fam, alts in zip([*fams, None], alternatives, strict=True):
            inner = re.compile("|".join(alts).encode()).groups
            self.by_group += [fam] * (inner + 1)
        self.members: list[Family | None] = [*fams, None]
        self.own = [re.compile("|".join(alts).encode()) for alts in alternatives]  # a family's triggers alone
        self.own_long = [fast_regex("|".join(alts).encode()) for alts in alternatives]  # the same, for long spans
        self.family_of = [index for index, alts in enumerate(alternatives) for _ in alts]  # of each trigger
        self.lines = Prefilter([t for alts in alternatives for t in alts])
        self.reach = [_reach(t) for alts in alternatives for t in alts]  # of each trigger's longest match

    def finditer(self, data: bytes | bytearray, pos: int, end: int, skip: dict[str, int] | None = None) -> Iterator[tuple[int, Family | None]]:
        """(offset, family) of each hit in data[pos:end]; the family is None where a worker
        file announces its actor or task.

        `skip` is the caller's: by family name, the line start before which it takes no more
        of that family's hits (the end of the block it read), read each time a hit is given."""
        return self.hits(data, self.lines.spans(data, pos, end), skip)

    def hits(self, data: bytes | bytearray, runs: list, skip: dict[str, int] | None = None) -> Iterator[tuple[int, Family | None]]:
        """The hits of `runs`, the Prefilter's runs of lines (or what the core's reader left
        of them: reader.rs), as finditer gives them."""
        for lo, hi, last, ends in runs:
            # no match of a trigger ends before its first end in the run, so none starts more
            # than its reach before that: the regex starts there, not at the start of a long line
            starts: dict[int, int] = {}
            for p, at_ends in ends.items():
                reach = self.reach[p]
                at = lo if reach is None else max(lo, at_ends[0] - reach)
                family = self.family_of[p]
                starts[family] = min(starts.get(family, at), at)
            if len(starts) == 1:
                yield from self._alone(data, hi, starts.popitem(), ends, skip or {})
            else:
                yield from self._hits(data, hi, last, starts)

    def _alone(
        self, data: bytes | bytearray, hi: int, start: tuple[int, int], ends: dict[int, list[int]], skip: dict[str, int]
    ) -> Iterator[tuple[int, Family | None]]:
        """The hits of a run of lines ending at `hi` where one family's triggers alone matched
        (most runs), as finditer gives them: each the leftmost match from where the one
        before ended. The core told where each match of each trigger ends, so no match
        starts before the next such end less that trigger's reach: the regex is asked from
        there, over the few bytes before the match, not over the rest of a long line (a step
        line of 150 metrics holds three memory triggers). Where the caller skips to the end
        of the block it read (`skip`), and that is a line start, the next hit is looked for
        from there: a trigger matches within one line, so the matches from there on are the
        ones finditer would give."""
        family, at = start
        member = self.members[family]
        name = member.name if member is not None else ""
        reaches = [(self.reach[p], at_ends) for p, at_ends in ends.items()]
        while at < hi:
            lo = nearest = hi
            for reach, at_ends in reaches:
                i = bisect.bisect_right(at_ends, at)  # the first match of it that may start at `at` or after ends past `at`
                if i < len(at_ends):
                    nearest = min(nearest, at_ends[i])
                    lo = min(lo, at if reach is None else max(at, at_ends[i] - reach))
            if lo >= hi:  # no match ends past `at`: none starts there or after
                return
            # `re` tries each alternative at every byte where no literal leads them all: over
            # a long stretch (a trigger of no bounded reach) the core's DFA is ten times faster
            m = (self.own_long if nearest - lo > LONG_SPAN else self.own)[family].search(data, lo, hi)
            if m is None:
                return
            yield m.start(), member
            at, after = max(m.end(), m.start() + 1), skip.get(name, -1)
            if after > at and data[after - 1] == 0x0A:  # a block's end inside a long line is no line start
                at = after

    def _hits(self, data: bytes | bytearray, hi: int, last: int, starts: dict[int, int]) -> Iterator[tuple[int, Family | None]]:
        """The hits the whole alternation finds in a run of lines ending at `hi` where several
        families' triggers matched, read with the regexes of just those families, each from
        where its matches may start (over a short span `re` on one family's literals answers
        several times sooner than a call into the core). Each
        family's leftmost match stands; the leftmost of them wins, the first family on a
        tie, and those it overlaps look again after it (unless it ends where the run's last
        match ends)."""
        found = {}
        for family, start in starts.items():
            m = (self.own_long if hi - start > LONG_SPAN else self.own)[family].search(data, start, hi)
            if m is not None:
                found[family] = m
        while found:
            family = min(found, key=lambda f: (found[f].start(), f))
            m = found[family]
            yield m.start(), self.members[family]
            for other in [f for f, n in found.items() if n.start() < m.end()]:
                again = (self.own_long if hi - m.end() > LONG_SPAN else self.own)[other].search(data, m.end(), hi) if m.end() < last else None
                if again is None:
                    del found[other]
                else:
                    found[other] = again


LONG_SPAN = 256  # bytes beyond which a family's triggers are looked for by the core, not `re`


def _reach(pattern: str) -> int | None:
    """The most bytes a match of `pattern` can span, if that is bounded (sre's own parse)."""
    try:
        width = re._parser.parse(pattern.encode()).getwidth()[1]
    except (AttributeError, re.error):  # a Python without re._parser: no bound
        return None
    return width if width <= MAX_LINE else None


_TRIGGERS: dict[tuple[int, ...], Trigger] = {}  # the Trigger holds its families: ids stay theirs


def trigger_for(fams: tuple[Family, ...]) -> Trigger:
    """One compiled trigger per set of families and process, whatever the number of files."""
    key = tuple(id(fam) for fam in fams)
    if key not in _TRIGGERS:
        _TRIGGERS[key] = Trigger(fams)
    return _TRIGGERS[key]


def _readings_only(fam: Family) -> bool:
    """Whether every line of a family makes a memory reading (its samples say so): only such
    lines may the core read whole; a failure's line is always read here."""
    return bool(fam.sample_kinds) and fam.sample_kinds <= READINGS


# The core's reading of whole lines (core/src/reader.rs): "0" leaves every line to Python;
# "shadow" reads none alone either, but checks every line the core would have read against
# what Python made of it (the suite's proof that the two agree).
NATIVE = os.environ.get("OOMLENS_NATIVE", "1")
READINGS = shipped().memory_lines  # the kinds a line the core reads whole may make
_LINES: dict[tuple[int, ...], Lines] = {}


def lines_for(trigger: Trigger) -> Lines:
    """The core's reader setup for a set of families, once per process: how it finds and
    shapes their lines (their triggers as the Trigger's Prefilter holds them, a family's
    `reduce` and `keep`), and the plans it learns of their shapes."""
    key = tuple(id(fam) for fam in trigger.members)
    if key not in _LINES:
        fams = [fam for fam in trigger.members if fam is not None]
        specs = [(fam.name, _readings_only(fam), fam.reduce.pattern if fam.reduce else None, fam.keep.pattern if fam.keep else None) for fam in fams]
        of_pattern = [index if index < len(fams) else None for index in trigger.family_of]
        try:
            _LINES[key] = Lines(STAMPS, specs, of_pattern, REPEATED.pattern, NATIVE == "shadow")
        except ValueError:  # a family's reduce or keep the core cannot read: its lines are shaped whole
            _LINES[key] = Lines(STAMPS, [(name, plannable, None, None) for name, plannable, _, _ in specs], of_pattern, REPEATED.pattern, NATIVE == "shadow")
    return _LINES[key]


class Scanner:
    """Scans one input stream; yields events in file order.

    Given the pools of a reduction's readings (`pools`, by kind), the core's reader
    (core/src/reader.rs) takes the memory lines whose shape it has learned and reads them
    whole into those pools: they reach Python only if the reduction keeps them (restore
    makes them events). The other lines are read here as ever; what this reader makes of a
    line of a shape the core is learning is told to it (`_study`)."""

    def __init__(
        self, ctx: FileContext, fams: tuple[Family, ...] | None = None, layout: Layout | None = None, pools: dict[str, ReadingPool] | None = None
    ) -> None:
        self.ctx = ctx
        self.layout = layout  # how the lines read map to the input's own (a paste unwrapped or turned round)
        self._base = 0  # offset in the stream of the buffer being scanned
        self.trigger = trigger_for(fams if fams is not None else families())
        self.lines = lines_for(self.trigger)
        # the stream's times, and the lines the core reads whole (never under a layout: their
        # line numbers would be the layout's to map)
        self.reader = Reader(self.lines, ctx.path, ctx.pid, ctx.node, ctx.role == "worker")
        self.reader.set_year(ctx.year)
        self.pools = pools if pools is not None and layout is None and NATIVE != "0" else None
        self.lines_read = 0
        self.bytes_read = 0
        self.problems: list[str] = []
        # unstamped events whose next stamp lies past the chunks read so far, held weakly: a
        # memory reading the reduction (reduce.py) let go needs no time after it
        self._open: list[weakref.ref[Event]] = []
        self._open_kept = OPEN_MIN  # compact _open when it has grown past this
        self._actor: str | None = None  # the actor or task a worker file announced last
        self._aliases_told: set[tuple[str, str]] = set()  # (a collector's host, the IP a line of it names)
        self._zones_told: set[int] = set()  # offsets from UTC (minutes) a collector's stamps beside the program's have told
        self._long_lines = 0
        self._counted = (0, 0)  # (offset, line breaks before it) counted in the last chunk
        self._line_start = 0  # offset in the stream where the line being read began
        self._bad_lines = 0  # lines with invalid UTF-8
        self._bad_line = 0  # the last of them
        self._failures = 0  # blocks oomlens could not read, left out
        self._first_failure = ""  # where the first was and why
        self._undecoded: list[int] = []  # lines of JSON records cut or corrupted, whose message could not be taken out
        self._partial = 0  # blocks read in part: a value in them no conversion reads (fields["unread"])
        self._first_partial = ""
        self._end = 0  # where the stream's bytes end in the buffer being scanned
        self._first_line = 1  # the number of the stream's first line
        self.blocks = Blocks()  # gathers the blocks of the hits
        # a byte range of a big file read by one of several processes: the stream offsets
        # whose blocks, bad lines and long lines are this scan's (the stream starts earlier,
        # so that blocks begun before the range are seen whole, and ends later)
        self.owned: tuple[int, int] | None = None

    def resume(
        self, owned: tuple[int, int] | None = None, stamp: Stamp | None = None, node: str | None = None, actor: str | None = None, line: int = 1
    ) -> None:
        """Scan a file from its middle, not from its start: the number of the stream's first
        line, what the bytes before the stream told (context_before: the last time, the node
        whose line printed it, the actor a worker file announced last), and for a byte range
        of a big file the stream offsets that are this scan's own."""
        self.owned, self._first_line = owned, line
        self._actor = actor
        self.reader.carry(stamp, node)
        self.reader.set_actor(actor)

    def counts(self) -> tuple[int, int]:
        """(long lines, lines with invalid UTF-8) counted in this scan's own bytes."""
        return self._long_lines, self._bad_lines

    # -- reading ---------------------------------------------------------------------------

    def events(self, stream: BinaryIO) -> Iterator[Event | Clue]:
        """Read the stream in chunks that end at a line break; scan each chunk.

        Memory stays bounded whatever the input: a line that runs on past MAX_LINE is
        scanned in pieces as it comes (each piece keeps the last OVERLAP bytes of the one
        before, so a trigger cut in two is found whole), never held whole."""
        data = _SPARE.pop() if _SPARE else bytearray(CHUNK)  # what the round before left unscanned, then the chunk read after it
        end = 0  # the bytes of `data` that hold the stream: the buffer keeps its size, so no new memory
        kept = 0  # bytes at the front of `data` left unscanned by the round before
        begin = 0  # hits before this offset of `data` were taken in the round before
        base = 0  # offset in the stream of the first byte of `data`
        line_base = self._first_line  # line number of the first byte of `data`
        failure: OSError | None = None
        try:
            while True:
                # one buffer for the whole stream (and the next ones this process reads), read
                # into in place: fresh memory each round, or a buffer resized at a short read,
                # cost page faults and copies
                if len(data) < kept + CHUNK:  # a long line or a deferred block is carried
                    data.extend(bytes(kept + CHUNK - len(data)))
                try:
                    # every stream given has readinto (a file, BytesIO, a raw stream); typing.BinaryIO does not declare it
                    with memoryview(data) as view:
                        got = stream.readinto(view[kept : kept + CHUNK]) or 0  # type: ignore[attr-defined]
                except OSError as err:  # scan what was read before, then tell
                    got, failure = 0, err.with_traceback(None)  # its frames would still hold the buffer
                end = kept + got
                eof = got == 0
                self.bytes_read += got
                if not end:
                    break
                cut = end if eof else data.rfind(b"\n", 0, end) + 1
                piece = not eof and end - cut >= MAX_LINE
                if piece:  # the last line is already too long to wait for its end
                    cut = end - OVERLAP
                elif not eof and cut == 0:
                    kept = end
                    continue
                if self.ctx.year is None and base == 0:  # the head of a file tells its year, if any
                    m = YEAR.search(data, 0, min(cut, 1 << 16))
                    if m:
                        self.ctx.year = int(m.group(1))
                        self.reader.set_year(self.ctx.year)
                self._base = base
                self.reader.begin(data, end)
                done = yield from self._scan(data, begin, cut, end, line_base, eof)
                keep = _char_start(data, done - OVERLAP) if piece and done == cut else done
                self._check_utf8(data, keep, line_base)
                self._count_long_lines(data, keep, base, eof)
                base += keep
                counted_pos, counted_lines = self._counted if self._counted[0] <= keep else (0, 0)
                line_base += counted_lines + newlines(data, counted_pos, keep)
                self.lines_read = line_base - self._first_line
                if eof:
                    if data[end - 1] != 0x0A:  # a last line without its line break
                        self.lines_read += 1
                    break
                self.reader.consumed(data, keep)
                kept = end - keep
                data[:kept] = data[keep:end]
                begin = done - keep
            if failure is not None:
                raise failure
        finally:
            if not _SPARE:
                _SPARE.append(data)
            if self.owned is None:  # a range's counts are summed with its file's other ranges'
                self.problems.extend(counted_problems(self._long_lines, self._bad_lines))
            if self._undecoded:
                self.problems.append(
                    f"{len(self._undecoded)} JSON record(s) that could not be decoded (cut or corrupted), left out: the report in it is not read "
                    f"(first at line {self._undecoded[0]})"
                )
            if self._failures:
                self.problems.append(
                    f"{self._failures} block(s) oomlens could not read, left out; the rest was read (please report; first at {self._first_failure})"
                )
            if self._partial:
                self.problems.append(
                    f"{self._partial} block(s) read only in part, their events kept with what could be read (fields.unread; first at {self._first_partial})"
                )
            mismatches, first = self.reader.mismatches
            if mismatches:
                self.problems.append(
                    f"{mismatches} memory line(s) the core read otherwise than their grammar when checked, read by the grammar from then on "
                    f"(please report; first at line {first})"
                )

    def _count_long_lines(self, data: bytes | bytearray, end: int, base: int, eof: bool) -> None:
        """Count the lines longer than MAX_LINE that end in data[:end] (or with the stream).

        No per-line Python: such a line holds a whole aligned block of MAX_LINE / 2 bytes
        without a line break, and a few C-speed `find` calls per chunk look for one."""
        last = data.rfind(b"\n", 0, end)
        if last >= 0:
            first = data.find(b"\n", 0, end)
            self._long_lines += base + first - self._line_start > MAX_LINE and self._mine(self._line_start - self._base)
            step = MAX_LINE // 2
            block = first + 1
            while block + step <= last:
                if data.find(b"\n", block, block + step) >= 0:
                    block += step
                    continue
                start = data.rfind(b"\n", 0, block) + 1
                stop = data.find(b"\n", block + step, last + 1)
                self._long_lines += stop - start > MAX_LINE and self._mine(start)
                block = stop + 1
            self._line_start = base + last + 1
        if eof:
            self._long_lines += base + end - self._line_start > MAX_LINE and self._mine(self._line_start - self._base)

    def _mine(self, pos: int) -> bool:
        """Is offset `pos` of the buffer in this scan's own range (always, for a whole file)?"""
        return self.owned is None or self.owned[0] <= self._base + pos < self.owned[1]

    def _check_utf8(self, data: bytes | bytearray, end: int, line_base: int) -> None:
        """Count the lines of data[:end] that are not valid UTF-8.

        The core tells in one pass whether it is all valid (decoding a
        chunk of progress bars to check it costs three times as much); only then are
        the lines decoded one stretch at a time (UTF8_WINDOW, smaller after a bad byte): a
        decoding error holds a copy of all it was given, and a chunk with a bad byte on every
        line made one of the rest of the chunk per line (the square of the chunk)."""
        if utf8_valid(data, end):
            return
        view = memoryview(data)
        pos, counted_pos, line, window = 0, 0, line_base, UTF8_WINDOW
        while pos < end:
            stop = min(end, pos + window)
            try:
                pos += codecs.utf_8_decode(view[pos:stop], "strict", stop == end)[1]
                window = min(UTF8_WINDOW, 2 * window)
            except UnicodeDecodeError as err:
                window = UTF8_AFTER_ERROR  # bad bytes come in runs of lines: small steps until the text is good again
                bad = pos + err.start
                line += newlines(data, counted_pos, bad)
                counted_pos = bad
                if self._mine(bad) and line != self._bad_line:  # a long line read in pieces counts once
                    self._bad_lines += 1
                    self._bad_line = line
                pos = data.find(b"\n", bad, end) + 1 or end

    def _scan(self, data: bytes | bytearray, begin: int, cut: int, end: int, line_base: int, eof: bool) -> Generator[Event | Clue, None, int]:
        """Scan the hits in data[begin:cut]; returns how many bytes were consumed (the rest is carried).

        A trigger starting before `cut` may end after it. A hit deep inside a long line
        is read from OVERLAP bytes before it, not from its line's start. The core's reader
        first takes the lines it reads whole (never one it is told to leave: a block
        carried to the next round, or one of a block read here, `skips`).

        The chunk's blocks are all read before their times are looked up, one lookup after
        the other: interleaved with parsing, each lookup found the stamp prefilter's tables
        gone from the cache, and cost twice as much."""
        counted_pos, counted_lines = 0, 0
        self._counted = (0, 0)
        skip_until: dict[str, int] = {}
        self._end = end
        self.blocks.bound(end, cut=eof and end > 0 and data[end - 1] != 0x0A)  # the last line lacks its break: cut
        blocks: list[tuple[Block, Family, list[dict], str | None, bool]] = []  # with its family, the actor announced before it, whether the core asks of it
        carried = cut
        if self._open and (after := self._stamp_after(data, 0))[0] is not None:
            for ref in self._open:  # events of earlier chunks: their next stamp came only now
                if (held := ref()) is not None:
                    self._set_latest(held, after[0], after[1])
            self._open.clear()
        runs, study = self.reader.claim(
            self.trigger.lines, data, begin, end, cut, line_base, self.pools is not None, lambda at, index, actor, new: self._learn(data, at, index, actor, new)
        )
        asked_at = set(study)
        skips: list[tuple[int, int, int]] = []  # blocks of many lines read here: no line in them is the core's
        for pos, fam in self.trigger.hits(data, runs, skip_until):
            if pos >= cut:
                break
            if fam is None:
                if self.ctx.role == "worker":
                    self._actor = announced(data, pos, end)
                continue
            if pos < skip_until.get(fam.name, -1):
                continue
            start = _line_start(data, pos)
            if pos - start > MAX_LINE // 2:
                start = _char_start(data, pos - OVERLAP)
            back = start if fam.back is None else reach_back(data, start, fam, max(begin, skip_until.get(fam.name, 0)))
            if not eof and fam.max_lines > 1 and cut - back < MAX_BLOCK:
                carried = back  # a block that may run past this chunk: scan it with the next one
                break
            counted_lines += newlines(data, counted_pos, back)
            counted_pos = back
            self._counted = (counted_pos, counted_lines)  # the chunk's line count goes on from here
            try:
                found = self.blocks.read(data, back, pos if back == start else back, fam, line_base + counted_lines, back < start)
            except Exception as err:  # noqa: BLE001 - oomlens's own failure on one block costs that block alone
                self._failed(line_base + counted_lines, err)
                skip_until[fam.name] = data.find(b"\n", pos, end) + 1 or end
                continue
            if found is None and back < start:  # the lines it reached back to are another message's: read it from its own line
                found = self.blocks.read(data, start, pos, fam, line_base + counted_lines + newlines(data, back, start))
            asked = back == start == _line_start(data, pos) and start in asked_at
            if found is None:
                if back == start == _line_start(data, pos):
                    # read from its line's start, as every other hit of this family on the
                    # line would be: none of them makes a block either
                    skip_until[fam.name] = data.find(b"\n", pos, end) + 1 or end
                    if asked:
                        self._study(data, start, fam, None, None, self._actor, line_base + counted_lines)
                continue
            skip_until[fam.name], block, drafts = found
            if block.end_line > block.line or block.offset != start:
                skips.append((block.offset, block.stop, self.trigger.members.index(fam)))
            if self.owned is None or self.owned[0] <= self._base + block.offset < self.owned[1]:
                blocks.append((block, fam, drafts, self._actor, asked))
        # a block read before the hit that stopped the chunk, but at or after where that hit's
        # block begins (a one-line family's hit on the line a traceback's header starts), is
        # read again with the next chunk, which begins there
        blocks = [b for b in blocks if b[0].offset < carried]
        stamps = [(b.head.stamp, None) if b.head.stamp is not None else self._stamp_before(data, b.offset) for b, _, _, _, _ in blocks]
        if self.pools is not None:
            self.reader.commit(self.pools, carried, skips, self.owned, self._base)
        for (block, fam, drafts, actor, asked), (stamp, node) in zip(blocks, stamps, strict=True):
            if block.head.text.startswith('{"') and not _decodes(block.head.text):
                # a record of Ray's event log or a structured log, cut or corrupted: its message
                # could not be taken out, and what a grammar reads of it raw is no report
                self._undecoded.append(block.line)
                continue
            inferred = block.head.stamp is None
            try:
                made = self._build(block, drafts, actor, stamp, inferred)
            except Exception as err:  # noqa: BLE001 - as above
                self._failed(block.line, err)
                continue
            if asked:
                self._study(data, block.offset, fam, block, drafts, actor, block.line, made)
            if inferred:  # a line that prints no time lies between its neighbours' stamps
                later, later_node = self._stamp_after(data, block.stop)
                for event in made:
                    if isinstance(event, Event) and "time" not in event.fields:
                        if self.ctx.node is None:  # many nodes' lines: whose clock lent the time
                            event.stamp_nodes = (node, None)
                        if later is None:
                            self._hold_open(event)
                        else:
                            self._set_latest(event, later, later_node)
            yield from made
        return carried

    def _failed(self, line: int, err: Exception) -> None:
        """A block oomlens itself could not read (its own bug, or text no grammar foresaw):
        left out, counted, the first told; the blocks around it are read as ever."""
        self._failures += 1
        if self._failures == 1:
            self._first_failure = f"line {line}: {error_line(err)}"

    def _build(self, block: Block, drafts: list[dict], actor: str | None, stamp: Stamp | None, inferred: bool) -> list[Event | Clue]:
        head = block.head
        first, last = block.line, block.end_line
        read = None
        if self.layout is not None:
            read = (first, last)
            first, last = self.layout.lines_of(first, self._base + block.offset, last, self._base + block.stop)
        source = Source(self.ctx.path, first, last, read if read != (first, last) else None)
        made = [self._event(d, head, stamp, inferred, head.actor or actor, source, block.raw) for d in drafts]
        for event in made:
            if "unread" in event.fields:
                self._partial += 1
                if self._partial == 1:
                    self._first_partial = f"line {source.line}: {'; '.join(event.fields['unread'])}"
        if head.utc is not None and head.stamp is not None and (local := head.stamp.iso(self.ctx.year)) is not None and (utc := head.utc.iso_utc()):
            # a collector's UTC stamp before the program's local one: the host's zone, for the
            # clock; told once per offset a file shows, not at every line a collector stamped
            offset = round((datetime.fromisoformat(local) - datetime.fromisoformat(utc)).total_seconds() / 60)
            if offset not in self._zones_told:
                self._zones_told.add(offset)
                made.append(
                    Clue("clock", source, {"utc": utc, "zone_minutes": offset}, local, head.pid, head.actor or actor, head.ip or self.ctx.node or head.host)
                )
        if head.host is not None and head.ip is None and self.ctx.node is None:
            # a collector's host on a line whose own words name its node's IP (a raylet's own
            # line: no Ray prefix, which may name another node's worker): one node, two names
            for node in {d["node"] for d in drafts if d.get("node") and d["node"] != head.host}:
                if (head.host, node) not in self._aliases_told:
                    self._aliases_told.add((head.host, node))
                    made.append(Clue("alias", source, {"host": head.host, "node": node}, None, head.pid, head.actor or actor, node))
        return made

    def _event(
        self, draft: dict, head: Line, stamp: Stamp | None, inferred: bool, actor: str | None, source: Source, raw: str, ctx: FileContext | None = None
    ) -> Event | Clue:
        """The event (or clue) of one draft, in this file's context (or `ctx`, a probe's)."""
        ctx = ctx or self.ctx
        fields = draft.get("fields", {})
        time = draft.get("time")
        if time is None and stamp is not None:
            time = stamp.iso(ctx.year)
            if time is None:
                fields["local_time"] = _local(stamp)
        if head.repeated:
            fields["repeated"] = head.repeated
        if head.uptime is not None:
            fields["uptime_s"] = head.uptime
        pid = draft.get("pid", head.pid if head.pid is not None else ctx.pid)
        rank = head.rank if head.rank is not None else draft.get("rank")  # `[rankN]:` is the global rank
        gpu = draft.get("gpu")
        if not (bounded(fields) and _small(pid) and _small(rank) and _small(gpu)):
            # a number no log means (a pid or a size past 2**63): not known
            fields, pid, rank, gpu = _bounded(fields), _bounded(pid), _bounded(rank), _bounded(gpu)
        if draft["kind"] in CLUE_KINDS:  # a clue's time is its own line's or none: the clock reads it
            if self.layout is not None and self.layout.newest_first:  # read before what lies below it (correlate.Context)
                fields["newest_first"] = True
            return Clue(draft["kind"], source, fields, None if inferred else time, pid, actor, head.ip or ctx.node or head.host)
        return Event(
            kind=draft["kind"],
            source=source,
            text=raw,
            time=time,
            time_inferred=inferred and time is not None and "time" not in draft,
            node=draft.get("node") or head.ip or ctx.node or head.host,
            pid=pid,
            actor=draft.get("actor", actor if actor not in ("raylet", "gcs_server") else None),
            method=draft.get("method"),
            rank=rank,
            gpu=gpu,
            memory=draft.get("memory"),
            fields=fields,
            device=draft.get("device"),
        )

    # -- what the core learns ----------------------------------------------------------------

    def _study(
        self,
        data: bytes | bytearray,
        start: int,
        fam: Family,
        block: Block | None,
        drafts: list[dict] | None,
        actor: str | None,
        line_no: int,
        made: list[Event | Clue] | None = None,
    ) -> None:
        """Tell the core's reader what was made here of the line at `start`, one of a shape it
        could not read alone or checks now and then: no event, one reading, or what no plan
        holds."""
        stop = data.find(b"\n", start, self._end)
        line = bytes(data[start : stop if stop >= 0 else self._end])
        told = _nothing(line, fam) if block is None else _told(block, fam, drafts or [], made or [])
        self.reader.study(self.trigger.members.index(fam), line, self.ctx.pid, self.ctx.node, actor, "" if told is _UNPLANNED else told, line_no)

    def _learn(self, data: bytes | bytearray, start: int, index: int, actor: str | None, new: bool) -> None:
        """Read the line at `start` (of a shape the core's reader is learning) alone, as this
        reader reads it in its file, and tell the plans what it made; for a new shape, the
        core asks what is made of the line as it changes it (`probe`: its values changed or
        zeroed, or read in another file's context)."""
        stop = data.find(b"\n", start, self._end)
        line = bytes(data[start : stop if stop >= 0 else self._end])
        fam = self.trigger.members[index]
        assert fam is not None  # an announcement is no family's line

        def probe(changed: bytes, pid: int | None, node: str | None, other: str | None) -> object:
            told = self._probe(changed, fam, replace(self.ctx, pid=pid, node=node), other)
            return "" if told is _UNPLANNED else told

        self.lines.learn(index, line, self.ctx.pid, self.ctx.node, actor, probe(line, self.ctx.pid, self.ctx.node, actor), probe if new else None)

    def _probe(self, line: bytes, fam: Family, ctx: FileContext, actor: str | None) -> tuple | None | object:
        """What this reader makes of one line alone, in context `ctx`: as _told tells it."""
        data = line + b"\n"
        index = self.trigger.members.index(fam)
        m = self.trigger.own[index].search(data)
        if m is None:
            return _UNPLANNED
        blocks = Blocks()
        blocks.bound(len(data), cut=False)
        try:
            found = blocks.read(data, 0, m.start(), fam, 1)
        except Exception:  # noqa: BLE001 - a line its grammar fails on is no line a plan reads
            return _UNPLANNED
        if found is None:
            return _nothing(line, fam)
        stop, block, drafts = found
        if stop != len(data):
            return _UNPLANNED
        source = Source(ctx.path, 1, 1)
        made = [self._event(d, block.head, None, block.head.stamp is None, block.head.actor or actor, source, block.raw, ctx) for d in drafts]
        return _told(block, fam, drafts, made)

    # -- context around a hit -------------------------------------------------------------

    def _stamp_after(self, data: bytes | bytearray, pos: int) -> tuple[Stamp | None, str | None]:
        """The time of the first stamped line at or after `pos` in this chunk (None when
        none stands before the chunk's end) and the node that line names in a file of many
        nodes' lines (the core's reader: each byte is searched once)."""
        found = self.reader.after(data, pos)
        return (None, None) if found is None else (Stamp(*found[0]), found[1])

    def _stamp_before(self, data: bytes | bytearray, start: int) -> tuple[Stamp | None, str | None]:
        """The time of the nearest stamped line before `start` in this file, and the node
        that line names in a file of many nodes' lines."""
        found = self.reader.before(data, start)
        return (None, None) if found is None else (Stamp(*found[0]), found[1])

    def _hold_open(self, event: Event) -> None:
        self._open.append(weakref.ref(event))
        if len(self._open) > self._open_kept:  # let go of the references to events gone
            self._open = [ref for ref in self._open if ref() is not None]
            self._open_kept = max(OPEN_MIN, 2 * len(self._open))

    def _set_latest(self, event: Event, stamp: Stamp, node: str | None) -> None:
        set_latest(event, stamp, node, self.ctx)


_UNPLANNED = object()  # what was made of a line is what no plan makes: more than one event, a clue, a block of many lines


def _alone(text: str, fam: Family) -> bool:
    """Whether a message of `fam` is a block of its own whatever the lines after it say."""
    if fam.after is not None and fam.after.match(text):
        return False
    return fam.continues is None or fam.max_lines <= 1 or (fam.ends is not None and fam.ends.match(text) is not None)


def _nothing(line: bytes, fam: Family) -> object:
    """A line of `fam` that made no block: nothing, where the lines after it could not have
    changed that (its message is a block of its own, or it holds none)."""
    head = peel(line.decode("utf-8", "replace"))
    m = fam.start.search(head.text)
    return None if m is None or _alone(head.text[m.start() :], fam) else _UNPLANNED


def _told(block: Block, fam: Family, drafts: list[dict], made: list[Event | Clue]) -> object:
    """What a reader of plans is told was made of a one-line block: (its outputs, the line's
    own time, where a local time goes among its fields), or _UNPLANNED."""
    head = block.head
    m = fam.start.search(head.text)
    if (
        block.end_line != block.line
        or len(drafts) != 1
        or len(made) != 1
        or not isinstance(event := made[0], Event)
        or event.kind not in READINGS
        or "time" in drafts[0]
        or "unread" in event.fields
        or "truncated" in event.fields
        or head.utc is not None
        or head.host is not None
        or m is None
        or not _alone(head.text[m.start() :], fam)
    ):
        return _UNPLANNED
    fields = [(k, v) for k, v in event.fields.items() if k not in ("local_time", "local_time_latest")]
    keys = list(event.fields)
    local_at = keys.index("local_time") if "local_time" in keys else len(fields) - bool(head.repeated) - (head.uptime is not None)
    outputs = [
        ("kind", event.kind),
        ("node", event.node),
        ("pid", event.pid),
        ("actor", event.actor),
        ("method", event.method),
        ("rank", event.rank),
        ("gpu", event.gpu),
        ("memory", event.memory),
        ("device", event.device),
        *fields,
    ]
    return outputs, None if head.stamp is None else tuple(head.stamp), local_at


_LENIENT = json.JSONDecoder(parse_int=str, strict=False)


def _decodes(text: str) -> bool:
    """Whether a line that opens as a JSON object is one (the envelope then chose not to peel
    it): a whole object first, whatever follows it (a line a paste's layout joined to it); an
    integer past Python's digit limit, or a raw tab in a string (Ray's GCS writes one), is still JSON."""
    try:
        _LENIENT.raw_decode(text)
    except (ValueError, RecursionError):
        return False
    return True


def told_once(found: Event | Clue) -> tuple | None:
    """What a clue a scan tells once per file says (a collector's offset from UTC, a host's
    IP; each a vote of the clock or the names): a file read in byte ranges, a scan each,
    tells it once too (ranges.collect_ranges). None for anything else."""
    if isinstance(found, Clue) and found.kind == "clock" and "zone_minutes" in found.fields:
        return ("clock", found.fields["zone_minutes"])
    if isinstance(found, Clue) and found.kind == "alias":
        return ("alias", found.fields["host"], found.fields["node"])
    return None


def counted_problems(long_lines: int, bad_lines: int) -> list[str]:
    """What a scan counted of a file's lines, in words."""
    found = []
    if long_lines:
        found.append(f"{long_lines} line(s) longer than {MAX_LINE >> 20} MiB: scanned in pieces of that size")
    if bad_lines:
        found.append(f"{bad_lines} line(s) with invalid UTF-8, shown as U+FFFD")
    return found


def context_before(fh: BinaryIO, lo: int, ctx: FileContext) -> tuple[Stamp | None, str | None, str | None]:
    """What a scan of a file from byte `lo` on needs to know of the bytes before it, as a
    scan from its start would: the last time printed (and the node whose line printed it,
    in a file of many nodes' lines), and in a worker's file the actor announced last.
    Read backwards in windows that double, each ending at a line break."""
    stamp = node = actor = None
    hi, width = lo, STAMP_WINDOW
    need_actor = ctx.role == "worker"
    while hi > 0 and (stamp is None or (need_actor and actor is None)):
        start = max(0, hi - width)
        fh.seek(start)
        data = fh.read(hi - start)
        if start > 0:  # begin at a line start: no time or name is read cut in two
            cut = data.find(b"\n", 0, len(data) - 1) + 1
            if not cut:  # no line starts in the window: it is the inside of one long line
                hi, width = start, min(width * 2, CONTEXT_STEP)
                continue
            data, start = data[cut:], start + cut
        if stamp is None and (found := last_stamp_at(data, 0, len(data))) is not None:
            stamp = found[0]
            if ctx.node is None:
                node = node_of_line(data, found[1], len(data))
        if need_actor and actor is None:
            last = None
            for last in ANNOUNCED_AT.finditer(data):  # noqa: B007 - only the last is wanted
                pass
            if last is not None:
                actor = announced(data, last.start())
        hi, width = start, min(width * 2, CONTEXT_STEP)
    return stamp, node, actor


CONTEXT_STEP = 4 << 20  # the widest window context_before reads at once: memory stays flat


OPEN_MIN = 1024  # open events held before the first look for ones gone

ANNOUNCED_AT = re.compile(ANNOUNCED.encode())


def set_latest(event: Event, stamp: Stamp, node: str | None, ctx: FileContext) -> None:
    """End an unstamped event's interval at `stamp`, printed on `node`'s line (in a file of
    many nodes' lines)."""
    latest = stamp.iso(ctx.year)
    if latest is None:  # no year printed: the correlator gives it the run's
        event.fields["local_time_latest"] = _local(stamp)
    else:
        event.time_latest = latest
    if ctx.node is None:
        event.stamp_nodes = ((event.stamp_nodes or (None, None))[0], node)


def is_open(event: Event) -> bool:
    """An event whose line prints no time and whose file had no stamp after it (so far)."""
    return (event.time_inferred or event.time is None) and event.time_latest is None and "local_time_latest" not in event.fields and "time" not in event.fields


def _local(stamp: Stamp) -> str:
    """A time printed without a year, as "MM-DDTHH:MM:SS": the correlator adds the run's year."""
    text = f"{stamp.month:02d}-{stamp.day:02d}T{stamp.hour:02d}:{stamp.minute:02d}:{stamp.second:02d}"
    return text if stamp.millis is None else f"{text}.{stamp.millis:03d}"


def announced(data: bytes | bytearray, pos: int, end: int | None = None) -> str | None:
    """The name on the `:actor_name:` or `:task_name:` line (ANNOUNCED) at `pos` (of data[:end])."""
    end = len(data) if end is None else end
    stop = data.find(b"\n", pos, end)
    line = data[pos : stop if stop >= 0 else end]
    return line.split(b":", 2)[-1].decode("utf-8", "replace").strip() or None


def _line_start(data: bytes | bytearray, pos: int) -> int:
    return data.rfind(b"\n", 0, pos) + 1


def _char_start(data: bytes | bytearray, pos: int) -> int:
    """`pos` moved back to the first byte of the UTF-8 character it falls in."""
    for _ in range(3):
        if pos <= 0 or data[pos] & 0xC0 != 0x80:
            break
        pos -= 1
    return pos


UTF8_WINDOW = 16 << 10  # bytes decoded at a time where a chunk may hold invalid UTF-8
UTF8_AFTER_ERROR = 128  # and after a bad byte, doubling back to UTF8_WINDOW as the text decodes
INT_MAX = 1 << 63  # the integers JSON readers, orjson and pandas hold


def bounded(values: dict) -> bool:
    """Are all integers among `values` (nested in lists and tables too) ones every reader of
    the contract holds? The common case, a memory line's few numbers, costs one pass."""
    for value in values.values():
        if type(value) is int:
            if not -INT_MAX <= value < INT_MAX:
                return False
        elif isinstance(value, dict):
            if not bounded(value):
                return False
        elif isinstance(value, list) and not all(bounded(v) if isinstance(v, dict) else not (type(v) is int and not -INT_MAX <= v < INT_MAX) for v in value):
            return False
    return True


def _small(value: object) -> bool:
    return type(value) is not int or -INT_MAX <= value < INT_MAX


def _bounded(values: Any) -> Any:
    """`values` with every integer no reader holds made None (not known)."""
    if type(values) is int:
        return values if -INT_MAX <= values < INT_MAX else None
    if isinstance(values, dict):
        return {k: _bounded(v) for k, v in values.items()}
    if isinstance(values, list):
        return [_bounded(v) for v in values]
    return values
