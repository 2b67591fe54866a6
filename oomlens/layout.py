"""Layout: a paste laid out again as it was written, learned from its head.

A log copied from a terminal or a viewer may have been hard-wrapped at the terminal's
width (and an envelope put before every line after that: a quote, line numbers), or
exported newest first. The scanner reads it as written: `laid_out` wraps the stream in
a Layout that joins the wrapped lines again or turns the lines round, and maps the line
numbers read back to the input's own.
"""

from __future__ import annotations

import bisect
import io
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from .grammars import Block, Cues, Triggers

from .envelopes import BY_NAME, Envelope, envelope_at, first_envelope, peel, starts_record, without, without_debris
from .shapes import TEXT_TO_ZERO, TO_ZERO
from .sources import Input
from .sources.decoding import Wrapping
from .times import Stamp, every_stamp, stamp_of_groups

WRAP_MIN = 80  # a terminal narrower than this does not wrap log lines we care about
AS_WRITTEN, ON_TERMINAL, CODES_AS_TEXT_LATER = 0, 1, 2  # how a wrap's width was measured (columns)
MEASURES = (AS_WRITTEN, ON_TERMINAL, CODES_AS_TEXT_LATER)  # tried in this order; the first of the most cut lines wins
WRAPPED_LINES = 2  # different lines cut at one width, for the text to be wrapped there
SPIKE = 2  # lines exactly as wide as the wrap, against those of any width a few columns narrower
WRAPPED_SHARE = 20  # one line in this many cut; one in five times as many when they differ in shape
WIDER_LINES = 2  # lines wider than the wrap that a wrapped text may hold (1% of a long one)
_TRACEBACK = "Traceback (most recent call last):"
ORDER_STAMPS = 64  # times read to tell the order of the lines: enough to outvote a few out of order
FEW_STEPS = ORDER_STAMPS // 4  # steps of time or uptime below which the order of reports' own lines is read too
TRACEBACK_VOTES = 3  # a traceback's order weighs as much as three times in a row (interleaved processes put some out of order)
_UPTIME_IN = re.compile(rb"\[ *(\d+\.\d{6})\] ")  # the kernel's seconds since boot, which orders lines of one second


def _head_lines(head: bytes) -> list[str]:
    """The whole lines of a head, decoded, without their line breaks."""
    cut = head.rfind(b"\n") + 1 if len(head) > 1 << 12 else len(head)
    return [line.rstrip("\r") for line in head[:cut].decode("utf-8", "replace").split("\n")]


def wrap_width(head: bytes, varied: bool = False, triggers: Triggers | None = None) -> int | None:
    """The width a terminal or viewer hard-wrapped these lines at, if it did (wrap_measure)."""
    wrap = wrap_measure(head, varied, triggers)
    return None if wrap is None else wrap[0]


def wrap_measure(head: bytes, varied: bool = False, triggers: Triggers | None = None) -> tuple[int, int] | None:
    """(width, measure) of a hard wrap of these lines, if there is one: how its width was
    measured (columns, MEASURES). A viewer may wrap at characters; a terminal wraps at the
    columns it shows, a tab to its stop; a colour code written as text before the wrap
    (`^[[`) took columns, one rewritten so after it (`#033[`) did not. Each is tried, and
    the measure under which most lines are cut at one width wins.

    Wrapped text has (almost) no line wider than the wrap, and every logical line longer
    than it leaves a segment exactly that wide, continued by a line that starts no record
    of its own: so one width stands out, held by several different lines, each continued.
    Unwrapped logs have lines of every width, the widest seldom more than once, but for
    lines whose format fixes their width (metrics of the same keys, progress bars): those
    are few among the lines, and mostly of one shape (digits aside), where a wrap cuts
    every line longer than the terminal, of every shape.

    Where a single line reached the wrap (one long report among short lines), one cut is
    evidence only when it cut a trigger (`triggers`: every family's, over text) in two: the
    widest line, continued, whose end and the next line's start make a trigger together."""
    raw = [line.rstrip(b"\r") for line in head[: head.rfind(b"\n") + 1 if len(head) > 1 << 12 else len(head)].split(b"\n")]
    raw = [line for line in raw if line.strip()]
    texts = [line.decode("utf-8", "replace") for line in raw]
    found: tuple[int, int, int] | None = None
    measured: dict[int, list[int]] = {}
    for measure in MEASURES:
        widths = [columns(text, measure) for text in texts]
        if widths in measured.values():  # no line this measure counts otherwise (no tab, no colour code): the same evidence
            continue
        measured[measure] = widths
        width, cut, lines = _wrap_evidence(raw, texts, widths, measure, triggers)
        if len(cut) < WRAPPED_LINES or (found is not None and len(cut) <= found[2]):
            continue
        shapes = {line.split(b"\n")[0].translate(TO_ZERO) for line in cut}
        many = len(cut) * WRAPPED_SHARE >= lines and not (varied and len(shapes) < 2)
        if many or (len(shapes) >= 2 and len(cut) * WRAPPED_SHARE * 5 >= lines):
            found = (width, measure, len(cut))
    if found is None and triggers is not None:
        return _cut_trigger(texts, triggers, measured)
    return None if found is None else found[:2]


TRIGGER_REACH = 512  # characters on either side of a cut a trigger may span


def _cut_trigger(texts: list[str], triggers: Triggers, measured: dict[int, list[int]]) -> tuple[int, int] | None:
    """(width, measure) of a wrap told by one cut line: the widest line (under a measure), at
    least WRAP_MIN wide, continued by the segments after it, where a trigger runs across a
    cut with a letter or digit of it on each side ('the n' / 'ode running low on memory'),
    or where the segments lack the envelope a tool put before the line and all the others
    (a quote or a collector's stamp, then the wrap)."""
    heads: list[str | None] | None = None
    for measure, widths in measured.items():  # each measure's widths of the lines, as wrap_measure took them
        if not widths:
            continue
        width = max(widths)
        if width < WRAP_MIN:
            continue
        i = 0
        while i < len(texts) - 1:
            j = i
            while j < len(texts) - 1 and widths[j] == width and continues(texts[j], texts[j + 1], width, measure, triggers):
                j += 1
            if j > i:
                if _across(texts[i : j + 1], triggers):
                    return width, measure
                heads = heads if heads is not None else [first_envelope(text) for text in texts]
                if _lost_envelope(heads, i, j):
                    return width, measure
            i = j + 1
    return None


LOST_MIN = 4  # other lines an envelope must head for its loss to tell a wrap


def _lost_envelope(heads: list[str | None], i: int, j: int) -> bool:
    """Whether the segments i+1..j lack the envelope a tool put on every line (a quote, a
    collector's stamp: envelopes.toml `added`) that heads line i and at least OUTER_SHARE of
    the other lines from the first it heads on, LOST_MIN of them or more."""
    head = heads[i]
    if head is None or not BY_NAME[head].added or any(heads[k] == head for k in range(i + 1, j + 1)):
        return False  # a program's own header (Ray's prefix) is missing from many a line it wrote
    first = heads.index(head)
    others = [h for k, h in enumerate(heads) if k >= first and not i <= k <= j]
    headed = sum(h == head for h in others)
    return headed >= LOST_MIN and headed >= OUTER_SHARE * len(others)


def _across(pieces: list[str], triggers: Triggers) -> bool:
    """Whether a trigger matches across a cut between the pieces of one line."""
    joined, cuts = "".join(pieces), list(itertools.accumulate(len(piece) for piece in pieces[:-1]))
    for cut in cuts:
        at = max(0, cut - TRIGGER_REACH)
        while (m := triggers.search(joined, at, cut + TRIGGER_REACH)) is not None and m.start() < cut:
            if m.end() > cut and any(c.isalnum() for c in joined[m.start() : cut]) and any(c.isalnum() for c in joined[cut : m.end()]):
                return True
            at = m.start() + 1  # a match that ends before the cut may hide one that begins after it
    return False


OUTER_SHARE = 0.9  # of a head's lines that carry one envelope for it to be added after a wrap


def outer_envelope(head: bytes) -> Envelope | None:
    """The envelope put before every physical line after the text was wrapped (a quote, line
    numbers, a collector's stamp): it stands before the wrapped segments as before the first,
    which the program's own header never does. None when no one envelope heads them all."""
    lines = [raw.decode("utf-8", "replace").rstrip("\r") for raw in head.split(b"\n")[:400]]
    lines = [line for line in lines if line.strip()]
    candidates: Counter[str] = Counter()
    for line in lines:  # the envelopes that head lines, most often first
        found = envelope_at(line)
        if found is not None and found[0].added:
            candidates[found[0].name] += 1
    for name, _count in candidates.most_common(3):  # one that a wider one shadowed on a few lines still heads them
        envelope = BY_NAME[name]
        heads = sum(1 for line in lines if (m := envelope.pattern.match(line)) and m.end() > 0)
        if heads >= OUTER_SHARE * len(lines):
            return envelope
    return None


def outer_envelopes(head: bytes) -> tuple[Envelope, ...]:
    """The envelopes added before every line, outermost first (`grep -n` of a collector's
    output: the line number, then the stamp)."""
    found: list[Envelope] = []
    for _ in range(3):
        envelope = outer_envelope(head)
        if envelope is None or envelope in found:
            break
        found.append(envelope)
        head = b"\n".join(without((envelope,), line) for line in head.split(b"\n"))
    return tuple(found)


def wrap_layout(head: bytes, again: bool = False, triggers: Triggers | None = None) -> tuple[int, tuple[Envelope, ...], int] | None:
    """(width, envelopes, measure) of a hard wrap: the text as it is, or beneath envelopes
    added to every line after the wrap (a quote of a terminal copy, `cat -n` of it), and
    how its width was measured (wrap_measure). `again`: the text was unwrapped once
    already; a second wrap needs lines of different shapes cut, as lines a first join made
    of one fixed format are all one width."""
    wrap = wrap_measure(head, again, triggers)
    if wrap is not None:
        return wrap[0], (), wrap[1]
    outer = outer_envelopes(head)
    if not outer:
        return None
    wrap = wrap_measure(b"\n".join(without(outer, line) for line in head.split(b"\n")), again, triggers)
    return (wrap[0], outer, wrap[1]) if wrap is not None else None


def _wrap_evidence(raw: list[bytes], texts: list[str], widths: list[int], measure: int, triggers: Triggers | None = None) -> tuple[int, set[bytes], int]:
    """(the likeliest wrap width, the different lines cut there and continued (told apart by
    their continuation too), the lines) of the head's non-blank lines, as written and decoded.

    A line's width is as `measure` takes it (columns). A few lines may stand wider than the
    wrap (a progress bar's carriage returns; colour codes, counted as written), so every
    width held by two lines or more is tried, the widest first, while the lines wider than
    it stay that few. A wrap makes a spike:
    many more lines exactly that wide than a few columns narrower, where an unwrapped log
    has about as many."""
    counts = Counter(widths)
    wider = 0
    best: tuple[int, set[bytes], int] = (0, set(), len(raw))
    for width in sorted(counts, reverse=True):
        if width < WRAP_MIN or wider > max(WIDER_LINES, len(raw) // 100):
            break
        spike = counts[width] > SPIKE * max(counts.get(width - k, 0) for k in range(1, 9))
        if counts[width] >= WRAPPED_LINES and spike:
            cut = {  # segments told apart by what continues them: paths that share a long prefix
                raw[i] + b"\n" + raw[i + 1][:16]
                for i in range(len(raw) - 1)
                if widths[i] == width and continues(texts[i], texts[i + 1], width, measure, triggers)
            }
            if len(cut) > len(best[1]):
                best = (width, cut, len(raw))
            if len(cut) >= WRAPPED_LINES:
                break
        wider += counts[width]
    return best


def continues(line: str, following: str, width: int, measure: int = AS_WRITTEN, triggers: Triggers | None = None, began: str | None = None) -> bool:
    """Whether `following` is the rest of `line` that a wrap at `width` cut off: not after a
    line padded to the width or cut short on purpose (`...`, as Ray's Top-10 commands),
    not a line that starts a record, nor one that begins as `line` does, or as the line
    `began` that `line` itself continues (its first characters, digits aside: the next line
    of one fixed format, as memory lines of nearly one width, or of a record whose last
    piece filled the width to its end; a line number or a service name a collector put
    before every line, which the rest of a wrapped line lacks), nor after blanks that pad the line (padded) unless a
    trigger runs across them (DeepSpeed's `CPU Virtual Memory:  used`, cut after its two
    blanks), nor a frame's code after its whole `File` line, indented deeper (a frame as wide
    as the wrap)."""
    if columns(line, measure) != width or line.endswith("...") or not following.strip() or starts_record(following):
        return False
    if padded(line, following, width, measure) and (triggers is None or not _across([line, following], triggers)):
        return False
    if (frame := _FRAME_HEADER.search(line)) and following.startswith(frame.group(1) + "  "):
        return False
    head = _head_shape(following)
    if head == _head_shape(line) or (began is not None and head is not None and head == _head_shape(began)):  # the next record of one format (digits aside)
        return False
    first = first_envelope(following)
    return first is None or first != first_envelope(line)


_FRAME_HEADER = re.compile(r'(?:^|(?<=\s))(\s*)File "[^"\n]+", line \d+,? in [\w<>.]+$')  # ... and its indentation (faulthandler writes no comma)


def padded(line: str, following: str, width: int, measure: int = AS_WRITTEN) -> bool:
    """Whether the blanks that end `line` pad it: a terminal capture pads every line to its
    width, the next one too. Where the next line begins with blanks and is no padded line
    itself, the wrap fell inside a run of them (DeepSpeed's figures stand nine apart)."""
    if not line.endswith("  "):
        return False
    return not following[:1].isspace() or (following.endswith(" ") and columns(following, measure) == width)


ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # a terminal's own control sequences: they take no column


def columns(line: str, measure: int) -> int:
    """A line's width as a wrap measured it (MEASURES): its characters as written; the
    columns a terminal shows, a control sequence none and a tab to its next stop of eight;
    or those with every colour code none, in whatever form it survived (one a collector
    wrote out as text after the wrap, `#033[`, was a control sequence when it was cut)."""
    if measure == AS_WRITTEN:
        return len(line)
    if "[" in line:
        line = ESCAPES.sub("", line) if measure == ON_TERMINAL else without_debris(line)
    return len(line.expandtabs())


SAME_HEAD = 16  # characters two lines share at their start when the second is the next record, not the rest


def _head_shape(line: str) -> str | None:
    """A line's first characters with every digit a 0, when it has that many."""
    return line[:SAME_HEAD].translate(TEXT_TO_ZERO) if len(line) >= SAME_HEAD else None


def newest_first(head: bytes, blocks: Sequence[Block] = ()) -> bool:
    """Whether the lines were pasted in reverse order, as log viewers export newest first:
    their times (or the kernel's uptimes) run backwards, a traceback's header or its
    frames' headers stand after what they head, and, where few times tell it, a report's
    lines of its own (`blocks`: each family's start and the lines that continue only its
    blocks) stand above its start."""
    backward = forward = 0
    last = None
    for stamp in every_stamp(head, ORDER_STAMPS):
        if stamp is None:  # no time a clock shows: it tells no order
            continue
        key = stamp[1:6] + (stamp.millis or 0,)
        if last is not None and key != last:
            backward += key < last
            forward += key > last
        last = key
    last_up = None
    for m in itertools.islice(_UPTIME_IN.finditer(head), ORDER_STAMPS):
        up = float(m.group(1))
        if last_up is not None and up != last_up:
            backward += up < last_up
            forward += up > last_up
        last_up = up
    steps = forward + backward
    headed, framed, reports = _TRACEBACK.encode() in head, b'File "' in head, bool(blocks) and steps < FEW_STEPS
    lines = _head_lines(head) if headed or framed or reports else []  # decoded once, where something reads it
    if headed:
        for i, line in enumerate(lines[1:-1], 1):
            if _TRACEBACK in line and peel(line).text.strip() == _TRACEBACK:
                before, after = (peel(lines[j]).text.lstrip().startswith('File "') for j in (i - 1, i + 1))
                backward += TRACEBACK_VOTES * (before and not after)
                forward += TRACEBACK_VOTES * (after and not before)
    if framed:
        ahead, behind = _frame_runs(lines)
        forward += TRACEBACK_VOTES * ahead
        backward += TRACEBACK_VOTES * behind
    if reports:  # a paste with a few times at most: its reports' order tells
        ahead, behind = _block_runs(lines, blocks)
        forward += TRACEBACK_VOTES * ahead
        backward += TRACEBACK_VOTES * behind
    return backward >= TRACEBACK_VOTES and backward > 3 * forward


BLOCK_RUN = 2  # lines that continue a block on one side of its start, and none on the other, to tell its order
BLOCK_REACH = 64  # lines of a run looked at
BLOCK_LINES = 256  # lines of a head read for reports upside down: a paste's worth
START_LINE = 1024  # characters of a line that may start or continue a report (a metrics line is longer and none)


def _block_runs(lines: list[str], blocks: Sequence[Block]) -> tuple[int, int]:
    """(blocks read forward, blocks read backward): a line that starts a block, with at
    least BLOCK_RUN lines that continue it after it and none before it, or the other way
    round. A run between two starts of one block tells nothing (either may own it), nor does
    a start that may also continue a block.

    Each start is looked for once over the whole head as written; only the lines it finds,
    and those around them, are peeled and read (a head holds hundreds of lines)."""
    lines = [line if len(line) <= START_LINE else "" for line in lines[:BLOCK_LINES]]  # a report's lines are short; metrics lines run to kilobytes
    encoded = [line.encode("utf-8", "surrogateescape") for line in lines]
    joined = b"\n".join(encoded)
    begins = list(itertools.accumulate((len(line) + 1 for line in encoded[:-1]), initial=0))
    peeled: dict[int, str] = {}

    def text(k: int) -> str:
        if k not in peeled:
            peeled[k] = peel(lines[k]).text if lines[k].strip() else ""
        return peeled[k]

    ahead = behind = 0
    for block in blocks:
        found = {bisect.bisect_right(begins, m.start()) - 1 for m in block.anywhere.finditer(joined)}
        starts = {k for k in found if text(k) and block.start.search(text(k)) is not None and not block.continues.match(text(k))}

        def run(i: int, step: int, block: Block = block, starts: set[int] = starts) -> int:
            """Lines that continue the block from line i on, one way: blank lines between them
            (a Ray report's paragraphs) neither count nor end the run."""
            n, j = 0, i + step
            while 0 <= j < len(lines) and abs(j - i) <= BLOCK_REACH and (not text(j) or block.continues.match(text(j))):
                n += bool(text(j))
                j += step
            return 0 if j in starts else n  # between two starts: either may own it

        for i in starts:
            after, before = run(i, 1), run(i, -1)
            ahead += after >= BLOCK_RUN and not before
            behind += before >= BLOCK_RUN and not after
    return ahead, behind


_EXCEPTION_LINE = re.compile(r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)(?:\([\w.]*\))?:")


def _frame_runs(lines: list[str]) -> tuple[int, int]:
    """(tracebacks read forward, tracebacks read backward), told where the frames meet their
    exception: as written, the last frame's `File "..."` line, its code and then the
    exception; turned round, the exception, the code and then the `File` line. Only that
    meeting is read: a wrap or a cut breaks a run of frames anywhere else."""
    kinds = []
    for line in lines:
        text = peel(line).text if line.strip() else ""
        stripped = text.lstrip()
        if stripped.startswith('File "') and ", line " in stripped:
            kinds.append("F")
        elif text[:1].isspace() and stripped:
            kinds.append("C")
        elif _EXCEPTION_LINE.match(text):
            kinds.append("E")
        else:
            kinds.append("O")
    order = "".join(kinds)
    ahead = len(re.findall(r"(?=FC{1,6}E)", order))  # code, and Python 3.11+ carets beneath it
    behind = len(re.findall(r"(?=EC{1,6}F)", order))
    return ahead, behind


LAYOUT_HEAD = 64 << 10  # bytes of a stream's head its layout is learned from: a paste, or hundreds of lines
REVERSED_LIMIT = 64 << 20  # a paste in reverse order is read whole to turn it round: up to this size


class Layout(Wrapping):
    """A text stream laid out again as it was written: what the Scanner reads, and how its
    line numbers map back to the input's own."""

    removed = 0  # bytes of the input the layout left out (line breaks a wrap added), or added
    breaks = 0  # line breaks of the input it left out
    under: Layout | None = None  # the layout this one reads through (a wrapped paste wrapped again)

    turns = False  # this layout reads the input's lines in the opposite order (Reversed)

    def lines_of(self, first: int, start: int, last: int, stop: int) -> tuple[int, int]:
        """The input's own line numbers of the lines first..last read at offsets start..stop."""
        return first, last

    @property
    def newest_first(self) -> bool:
        """The input's line numbers run against the order its lines are read in."""
        return self.turns or (self.under is not None and self.under.newest_first)

    def totals(self) -> tuple[int, int]:
        """(bytes, line breaks) of the input left out by this layout and the ones beneath it."""
        below = self.under.totals() if self.under is not None else (0, 0)
        return self.removed + below[0], self.breaks + below[1]


class Unwrapped(Layout):
    """Lines a terminal or viewer hard-wrapped at `width` columns, joined again (continues),
    so a trigger, a number or a message cut by the wrap reads whole. When an envelope was put
    before every line after the wrap (`outer`), the widths are those of the lines beneath it,
    and a continued segment loses its copy of it as it joins the line it belongs to."""

    inner: BinaryIO

    def __init__(self, inner: BinaryIO, width: int, outer: tuple[Envelope, ...] = (), measure: int = AS_WRITTEN, triggers: Triggers | None = None) -> None:
        self.inner, self.width, self.outer, self.measure, self.triggers = inner, width, outer, measure, triggers
        self.pending: bytes | None = b""  # read, not decided: the last whole line and what follows it (None: all out)
        self.ready = bytearray()
        self.given = 0  # bytes handed out so far
        self.joins: list[int] = []  # offsets handed out where a removed line break stood
        self.removed = 0
        self.began: str | None = None  # the first piece of the record the first line waiting continues, if it continues one

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while len(self.ready) < len(buffer) and self.pending is not None:
            chunk = self.inner.read(1 << 20)
            self._lay(self.pending + chunk, final=not chunk)
        size = min(len(buffer), len(self.ready))
        buffer[:size] = self.ready[:size]
        del self.ready[:size]
        self.given += size
        return size

    def _lay(self, data: bytes, final: bool) -> None:
        """Hand out the lines of `data` joined where a wrap cut them; whether the last whole
        line continues needs the next one, so it waits with what follows it, until the end.
        Only a line at least as long in bytes as the wrap is in characters (or, measured at a
        terminal's columns, one with a tab) can be cut: the others go out as they are, many
        at a time."""
        lines = data.split(b"\n")
        keep = 0 if final else 2
        self.pending = None if final else b"\n".join(lines[-2:])
        count = len(lines) - keep
        done = 0  # lines handed out
        bodies = [without(self.outer, line) for line in lines] if self.outer else lines
        tabs = self.measure != AS_WRITTEN  # a tab took up to eight columns: a line with one may be fewer bytes than the wrap
        began = {0: self.began} if self.began is not None else {}  # line -> the first piece of the record it continues
        for i in [i for i, body in enumerate(bodies[:count]) if (len(body) >= self.width or (tabs and b"\t" in body)) and i + 1 < len(lines)]:
            text = bodies[i].decode("utf-8", "replace").rstrip("\r")
            if not continues(text, bodies[i + 1].decode("utf-8", "replace").rstrip("\r"), self.width, self.measure, self.triggers, began.get(i)):
                continue
            began[i + 1] = began.get(i, text)
            if i > done:
                self.ready += b"\n".join(lines[done:i]) + b"\n"
            line = lines[i]
            body = line.rstrip(b"\r")  # `\r\r\n` too (a terminal's copy): no carriage return may stay inside the joined line
            self.ready += body
            self.joins.append(self.given + len(self.ready))
            self.removed += len(line) + 1 - len(body) + len(lines[i + 1]) - len(bodies[i + 1])
            lines[i + 1] = bodies[i + 1]  # the continued segment without its copy of the envelope
            self.breaks += 1
            done = i + 1
        if count > done:
            self.ready += b"\n".join(lines[done:count]) + (b"" if final else b"\n")
        if not final:  # a continued segment that waits lost its envelope above: it waits so
            self.pending = b"\n".join(lines[-2:])
            self.began = began.get(len(lines) - 2)

    def lines_of(self, first: int, start: int, last: int, stop: int) -> tuple[int, int]:
        first += bisect.bisect_right(self.joins, start)
        last += bisect.bisect_right(self.joins, max(start, stop - 1))
        return self.under.lines_of(first, -1, last, -1) if self.under is not None else (first, last)


BLANKED_SHARE = 0.9  # of a head's lines that end in one same run of blanks, for it to have been added after they were written


def blanks_added(head: bytes) -> bytes | None:
    """Whether one same run of blanks was put after (nearly) every line once it was written
    (an editor, a copy that keeps trailing spaces, before `\r\r\n` ends): it hides the width
    a wrap cut the lines at. A terminal capture pads its lines to its width with runs of
    every length, and those tell its wrap (padded): they stay, as do the blanks a line ended
    in before the run. The run, or None."""
    lines = [line.rstrip(b"\r") for line in head[: head.rfind(b"\n") + 1].split(b"\n")]
    lines = [line for line in lines if line.strip()]
    runs = Counter(line[len(line.rstrip(b" \t")) :] for line in lines)
    run = runs.most_common(1)[0][0] if runs else b""
    # a line that ended in blanks already ends in them and the run put after them
    added = len(lines) >= 2 and run != b"" and sum(line.endswith(run) for line in lines) >= BLANKED_SHARE * len(lines)
    return run if added else None


class Trimmed(Layout):
    """Lines with the run of blanks put after every one of them taken off (blanks_added);
    the same lines, so their numbers stay."""

    inner: BinaryIO

    def __init__(self, inner: BinaryIO, run: bytes) -> None:
        self.inner, self.held = inner, b""
        self.trailing = re.compile(re.escape(run) + rb"(\r*\n|\r*$)")

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            chunk = self.inner.read(max(len(buffer), 1 << 16))
            data = self.held + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            if cut == 0 and chunk:
                self.held = data  # no line ends yet: wait for one (a line longer than a read)
                if len(data) < 1 << 24:
                    continue
                cut = len(data)
            self.held = data[cut:]
            out = self.trailing.sub(rb"\1", data[:cut])
            self.removed += cut - len(out)
            if len(out) > len(buffer):  # the caller asked for less: hand out what fits, keep the rest
                self.held = out[len(buffer) :] + self.held  # trimmed already: nothing is taken off it again
                out = out[: len(buffer)]
            buffer[: len(out)] = out
            return len(out)


QUARTER_S = 15 * 60  # every UTC offset in use is a whole quarter hour
ZONE_LIMIT_S = 14 * 3600  # and none is wider than this
STAMP_LAG_S = 120  # a collector stamps a line at most this long after its program printed it
CLOCK_PAIRS = 64  # lines stamped twice (the collector's time, the program's) read to tell the clocks apart


def _seconds(stamp: Stamp) -> float:
    """A time as seconds of a year (a stamp may print no year), UTC where it says its zone."""
    t = datetime(2000, stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second) + timedelta(milliseconds=stamp.millis or 0)
    return (t - datetime(2000, 1, 1)).total_seconds() - (stamp.zone or 0) * 60


def stamped_later(head: bytes) -> tuple[Envelope, ...]:
    """The stamps put before every line by something that read the log later (`ts` on a
    copy, a collector replaying a file), not when its program wrote it: the program's own
    times, on the same lines, lie no zone and no lag behind them. Such a stamp is no time of
    the line; read as one, a line the program stamped and one it did not are two clocks
    apart, and one failure reported by both reads as two. () when the stamps agree with the
    program's times, or nothing tells (no line the program stamped)."""
    outer = tuple(e for e in outer_envelopes(head) if "h" in e.pattern.groupindex)
    if not outer:
        return ()
    agree = disagree = 0
    for raw in head.split(b"\n")[: CLOCK_PAIRS * 8]:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        m = outer[0].pattern.match(line)
        if m is None or (added := stamp_of_groups(m.groupdict())) is None:
            continue
        own = peel(without(outer, raw).decode("utf-8", "replace")).stamp
        if own is None:
            continue
        gap = _seconds(own) - _seconds(added)  # a zone apart (the program's local time after a UTC stamp), and the lag
        off = min(gap % QUARTER_S, -gap % QUARTER_S)
        if abs(gap) <= ZONE_LIMIT_S + STAMP_LAG_S and off <= STAMP_LAG_S:
            agree += 1
        else:
            disagree += 1
        if agree + disagree >= CLOCK_PAIRS:
            break
    return outer if disagree > 2 * agree else ()


class Unstamped(Layout):
    """Lines without the stamps something put before them when it read the log later
    (stamped_later); the same lines, so their numbers stay."""

    inner: BinaryIO

    def __init__(self, inner: BinaryIO, stamps: tuple[Envelope, ...]) -> None:
        self.inner, self.stamps, self.held, self.out = inner, stamps, b"", b""

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self.out:
            chunk = self.inner.read(max(len(buffer), 1 << 16))
            data = self.held + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            if not data:
                return 0
            if cut == 0:  # no line ends yet: wait for one
                self.held = data
                continue
            self.held = data[cut:]
            lines = data[:cut].split(b"\n")
            self.out = b"\n".join(without(self.stamps, line) for line in lines)
            self.removed += cut - len(self.out)
        got = min(len(buffer), len(self.out))
        buffer[:got], self.out = self.out[:got], self.out[got:]
        return got


class Reversed(Layout):
    """A paste whose lines stand newest first (newest_first), read oldest first."""

    turns = True

    def __init__(self, inner: BinaryIO, item: Input) -> None:
        self.inner = inner
        data = inner.read(REVERSED_LIMIT + 1)
        if len(data) > REVERSED_LIMIT:
            item.problems.append(f"lines stand newest first, but only the first {REVERSED_LIMIT >> 20} MiB were turned round")
            data = data[:REVERSED_LIMIT]
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        else:
            self.removed = -1  # the last line gets the line break it lacked
        self.count = len(lines)
        self.data = io.BytesIO(b"".join(line + b"\n" for line in reversed(lines)))

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self.data.readinto(buffer)

    def lines_of(self, first: int, start: int, last: int, stop: int) -> tuple[int, int]:
        return self.count + 1 - last, self.count + 1 - first


def laid_out(stream: BinaryIO, item: Input, cues: Cues | None = None) -> tuple[BinaryIO, Layout | None]:
    """The stream as it was written, when its head shows it was turned round or hard-wrapped,
    and the layout that maps its lines back (None: the stream as it is). `cues`: what the
    families' grammars tell of a layout (a trigger cut by a wrap, a block upside down)."""
    layout: Layout | None = None
    stamps: tuple[Envelope, ...] = ()
    if not isinstance(stream, (io.BytesIO, io.BufferedReader)):  # raw: what a peek read would be lost with a failing read after it
        return stream, None
    stream = io.BufferedReader(stream, LAYOUT_HEAD)  # a head that large to peek at
    head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    if (run := blanks_added(head)) is not None:
        layout = Trimmed(stream, run)
        stream = io.BufferedReader(layout, LAYOUT_HEAD)
        head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    if newest_first(head, cues.blocks if cues else ()):  # told by the stamps too, whatever clock put them there
        layout, layout.under = Reversed(stream, item), layout
        stream = io.BufferedReader(layout, LAYOUT_HEAD)
        head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    if layout is None or not layout.newest_first:  # turned round, its stamps told its order: they stay (kubectl+cri+reversed)
        stamps = stamped_later(head)
    if stamps:
        layout, layout.under = Unstamped(stream, stamps), layout
        stream = io.BufferedReader(layout, LAYOUT_HEAD)
        head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    for again in (False, True):  # a text wrapped twice: a wrapped paste copied again from a narrower terminal
        wrap = wrap_layout(head, again, cues.triggers if cues and not again else None)  # a second wrap: of many lines, a first join made some wide
        if wrap is None:
            break
        layout, layout.under = Unwrapped(stream, *wrap, triggers=cues.triggers if cues else None), layout
        stream = io.BufferedReader(layout, LAYOUT_HEAD)
        head = stream.peek(LAYOUT_HEAD)[:LAYOUT_HEAD]
    return stream, layout
