"""Blocks: the lines of one message gathered from raw bytes, ready for its grammar.

A hit starts a block on its line; the block goes on over the lines its family says
continue it (a Top-10 table, a traceback, an Object store report), skipping other
workers' lines that a driver console interleaves, up to its family's end or most lines.
A line a terminal hard-wrapped is joined again when the block as written parses only in
part; the grammar reads the block peeled and with its spaces normalised. A one-line
block of a high-volume family with nothing to peel is read as it is, decided once per
raw line shape.
"""

from __future__ import annotations

import marshal
import re
from copy import copy
from dataclasses import dataclass

from .envelopes import Line, added_heads, peel, peel_shorter, starts_record
from .grammars import Begin, Family, cut_number
from .layout import WRAP_MIN, padded
from .shapes import MAX_SHAPES, TO_ZERO
from .times import Stamp, last_stamp

GLUED_TRIES = 64  # records glued on one line tried after the first fails to parse (Ray #32195, glued and reversed, needs 13)
MAX_LINE = 1 << 20  # a longer line is scanned in pieces; a block reads at most this much of a line
MAX_SKIPPED = 60  # other workers' lines skipped inside a block
NOT_PLAIN = (b"(", b"\x1b")  # first bytes of a line that begins with an envelope
PARSED_MAX = 256  # blocks whose parse a scan keeps, the latest (a run failing in a loop prints the same few again and again)
PARSED_TEXT = 1 << 14  # characters of the longest block whose parse is kept
PEELED_MAX = 4  # lines whose peel a scan keeps, the latest: a line is the next one of a block, then a block's head, for each family it triggers


@dataclass(slots=True)
class Block:
    """A gathered block: its peeled first line, line range, raw text, and where it began."""

    head: Line
    line: int
    end_line: int
    raw: str
    offset: int
    stop: int  # where the block ends


def fullness(drafts: list[dict]) -> tuple[int, int]:
    """Rank two readings of a block: complete beats cut, then more facts beat fewer."""
    cut = sum(1 for d in drafts if d.get("fields", {}).get("truncated"))
    facts = sum(1 for d in drafts for v in d.get("fields", {}).values() if v not in (None, [], {}))
    return (-cut, facts)


class Blocks:
    """Gathers the blocks of one scan out of its buffer, and what the scan learns of its
    lines on the way: which raw line shapes of a family are plain (plain_start)."""

    def __init__(self) -> None:
        self.end = 0  # where the stream's bytes end in the buffer
        self.cut_end = False  # the stream ends there without a line break: its last number may have gone on
        self._plain: dict[str, dict[bytes, int]] = {}  # per shape-cached family: a raw line's shape -> plain_start
        self._parsed: dict[tuple[str, str], tuple[bytes, bool]] = {}  # (family, block text) -> its drafts (marshalled) and completeness
        self._peeled: dict[str, Line] = {}  # the latest lines peeled, and how

    def bound(self, end: int, cut: bool) -> None:
        """The stream's bytes end at `end` of the buffer the next blocks are read from;
        `cut`: the stream ends there without a line break."""
        self.end, self.cut_end = end, cut

    def read(self, data: bytes | bytearray, start: int, pos: int, fam: Family, lineno: int, reached: bool = False) -> tuple[int, Block, list[dict]] | None:
        """Gather and parse the block that starts on the line at `start`: where it ends, the
        block, and its drafts.

        A paste from a terminal may be hard-wrapped at a fixed width: when the block as
        written parses only in part, it is read again with wrapped lines rejoined, and
        the fuller reading wins. `reached`: the block begins at lines its start line reached
        back to (`//! back:`)."""
        found = self._gather(data, start, pos, fam, lineno, unwrap=False, reached=reached)
        if found is None or not any(d.get("fields", {}).get("truncated") for d in found[2]):
            return found
        rejoined = self._gather(data, start, pos, fam, lineno, unwrap=True, reached=reached)
        if rejoined and fullness(rejoined[2]) > fullness(found[2]):
            found = rejoined
        return found

    def _gather(
        self, data: bytes | bytearray, start: int, pos: int, fam: Family, lineno: int, unwrap: bool, reached: bool = False
    ) -> tuple[int, Block, list[dict]] | None:
        """One reading of the block at `start`: its lines as written, or with the lines a
        terminal wrapped joined again (`unwrap`)."""
        first_raw, nxt, n_phys = _logical_line(data, start, self.end, unwrap)
        plain = fam.shapes is not None and n_phys == 1 and not (self.cut_end and nxt >= self.end)
        at = self._plain_at(fam, bytes(data[start:nxt]), first_raw) if plain else -1
        if at >= 0:  # a plain line of a high-volume family: a block of its own, read as it is
            text = first_raw.rstrip("\r\n")
            drafts, _complete = fam.parse(text[at:])
            return (nxt, Block(Line(text, _lead_stamp(text[:at])), lineno, lineno, first_raw.strip("\r\n"), start, nxt), drafts) if drafts else None
        # a progress bar rewrites its line with \r: the hit's segment is the message
        seg_start = first_raw.rfind("\r", 0, _char_index(data, start, pos)) + 1 if "\r" in first_raw.rstrip("\r\n") else 0
        segment = first_raw[seg_start:].split("\r", 1)[0]
        head = self._peel(segment)
        m = fam.back.match(head.text) if reached and fam.back is not None else fam.start.search(head.text)
        if m is None and not reached:
            head, m = _peeled_short_of_start(segment, fam)
        if m is None:
            return None
        if head.stamp is None:
            head.stamp = _lead_stamp(head.text[: m.start()])
        texts = [head.text[m.start() :]]
        raw_texts = [first_raw.strip("\r\n")]
        end_line = lineno + n_phys - 1
        end = nxt
        skipped = 0
        blanks = 0
        cursor, cur_line = nxt, lineno + n_phys
        while len(texts) < fam.max_lines and cursor < self.end and fam.continues is not None:
            if fam.ends is not None and fam.ends.match(texts[-1]):
                break
            raw, after, n_phys = _logical_line(data, cursor, self.end, unwrap)
            line = self._peel(raw)
            if line.text.strip() and not fam.continues.match(line.text):  # an envelope that took the line's first words?
                line = next((alt for alt in peel_shorter(raw) if fam.continues.match(alt.text)), line)
            if line.stream and head.stream and line.stream != head.stream:
                skipped += 1
                if skipped > MAX_SKIPPED:
                    break
            elif not line.text.strip():
                blanks += 1
                if blanks > 2:
                    break
            elif fam.continues.match(line.text) or (fam.after is not None and fam.after.match(texts[-1]) and not fam.start.search(line.text)):
                texts.extend("" for _ in range(blanks))
                blanks = 0
                texts.append(line.text)
                raw_texts.append(raw.rstrip("\r\n"))
                end, end_line = after, cur_line + n_phys - 1
            else:
                break
            cursor, cur_line = after, cur_line + n_phys
        if self.cut_end and end >= self.end:  # a number where the input was cut may have gone on
            texts[-1] = texts[-1][: cut_number(texts[-1])]
        drafts, _complete = self._parse(fam, normalise("\n".join(texts)))
        tries = 0
        while not drafts and not reached and tries < GLUED_TRIES:
            # records glued on one line (a viewer that lost the line breaks): the next record
            # starts where the family's start stands last before its next trigger (only a
            # trigger makes a record: at most one more parse per trigger the line holds, and
            # a few: each parses the rest of the line, and a long line of triggers that never
            # parse would cost the square of its length)
            tries += 1
            m = _next_record(fam, head.text, m.start())
            if m is None:
                return None
            texts[0] = head.text[m.start() :]
            if len(texts) == 1 and self.cut_end and end >= self.end:
                texts[0] = texts[0][: cut_number(texts[0])]
            drafts, _complete = self._parse(fam, normalise("\n".join(texts)))
        if not drafts:
            return None
        return end, Block(head, lineno, end_line, "\n".join(raw_texts), start, end), drafts

    def _peel(self, text: str) -> Line:
        """peel, once for the few latest lines: a line is looked at as the next line of a
        block, then read as the head of its own, by each family whose trigger it holds
        (failures one after another). Each caller gets a Line of its own."""
        kept = self._peeled.get(text)
        if kept is not None:
            return copy(kept)
        line = self._peeled[text] = peel(text)
        if len(self._peeled) > PEELED_MAX:
            del self._peeled[next(iter(self._peeled))]
        return copy(line)

    def _parse(self, fam: Family, text: str) -> tuple[list[dict], bool]:
        """fam.parse, once per text among the latest PARSED_MAX blocks of this scan: a run
        failing in a loop prints one traceback hundreds of times, each peeled to the same
        text. The parse is a function of the text alone; each caller gets drafts of its own
        (the scan fills them in), unmarshalled from the kept bytes (drafts are plain values).
        A line a family reads by its shape comes here too: a reading the grammar stops short
        of (a trailing label) is read again with wrapped lines rejoined (read), the same text
        when nothing joins, and its shape is new when each line's text is (the unique-shapes
        tree: 8,007 parses of 6,918 texts in 8 MB of its console read by Python alone, 3.1 s -> 2.2 s
        with them kept)."""
        key = (fam.name, text)
        kept = self._parsed.get(key)
        if kept is not None:
            return marshal.loads(kept[0]), kept[1]
        drafts, complete = fam.parse(text)
        if len(text) <= PARSED_TEXT:
            try:
                self._parsed[key] = (marshal.dumps(drafts), complete)
            except ValueError:  # a draft holding what marshal cannot write: parsed each time
                return drafts, complete
            if len(self._parsed) > PARSED_MAX:
                del self._parsed[next(iter(self._parsed))]
        return drafts, complete

    def _plain_at(self, fam: Family, raw: bytes, line: str) -> int:
        """plain_start of a line of `fam`, decided once per raw line shape (every digit a 0):
        memory lines come by the ten thousand, most of them with no envelope to peel."""
        if raw[:1] in NOT_PLAIN:  # Ray's prefix or a colour code: an envelope to peel, never plain
            return -1
        plain = self._plain.setdefault(fam.name, {})
        shape = raw.translate(TO_ZERO)
        at = plain.get(shape)
        if at is None:
            if len(plain) >= MAX_SHAPES:
                plain.clear()
            at = plain[shape] = plain_start(line, fam)
        return at


def _peeled_short_of_start(segment: str, fam: Family) -> tuple[Line, re.Match[str] | Begin | None]:
    """The line peeled only as far as its message starts, when peeling it whole took the
    message's first words for an envelope (`ts` before "CUDA Error: out of memory" reads as
    a syslog time, host and tag): no envelope runs into the message."""
    text = segment.rstrip("\r\n")
    m = fam.start.search(text)
    if m is None:
        return Line(text), None
    head = peel(text[: m.start()])
    if head.text.strip():  # what stood before the message is no envelope: read as it was
        return Line(text), None
    head.text = text[m.start() :]
    return head, fam.start.search(head.text)


def _lead_stamp(lead: str) -> Stamp | None:
    """The time in text no envelope peels before a message (a progress bar that lost its
    carriage return, then Ray's prefix and stamp): still the line's own."""
    if not any(c.isdigit() for c in lead):
        return None
    data = lead.encode()
    return last_stamp(data, 0, len(data))


def plain_start(raw: str, fam: Family) -> int:
    """Where the grammar input starts in a raw line of a shape-cached family that is a block
    of its own, with no envelope to peel and nothing to normalise; -1 for any other line.
    What decides it reads no digit, so it holds for every line of the same shape
    (tests/test_samples.py checks it over every fixture line); a JSON record is never plain
    (a number there decides whether it parses)."""
    if "\r" in raw.rstrip("\r\n") or raw.startswith('{"'):
        return -1
    head = peel(raw)
    if head != Line(raw.rstrip("\r\n")):
        return -1
    m = fam.start.search(head.text)
    if m is None:
        return -1
    text = head.text[m.start() :]
    alone = fam.continues is None or fam.max_lines <= 1 or (fam.ends is not None and fam.ends.match(text))
    return m.start() if alone and normalise(text) == text else -1


def _next_record(fam: Family, text: str, after: int) -> re.Match[str] | Begin | None:
    """The start of the next record of `fam` glued behind the one at `after` in `text`: the
    last start at or before the first trigger that lies past the next start."""
    first = fam.start.search(text, after + 1)
    if first is None:
        return None
    trigger = fam.trigger_text.search(text, first.start())
    if trigger is None:
        return None
    last = first
    for m in fam.start.finditer(text, first.start() + 1, trigger.start() + 1):
        last = m
    return last


def reach_back(data: bytes | bytearray, start: int, fam: Family, floor: int) -> int:
    """Where a block begins whose start line follows lines it reaches back to (`//! back:`):
    the first of the lines just above `start`, none before `floor`, that match the family's
    back pattern, with at most two blank lines between them; `start` when there are none."""
    back = fam.back
    assert back is not None  # asked only for a family with a back pattern
    begin, cur, blanks = start, start, 0
    for _ in range(fam.max_lines - 1):
        if cur <= floor:
            break
        prev = data.rfind(b"\n", floor, cur - 1) + 1
        if prev == 0 and floor > 0:
            break  # the line above began before the floor
        text = peel(data[prev:cur].decode("utf-8", "replace").rstrip("\r\n")).text
        if not text.strip():
            blanks += 1
            if blanks > 2:
                break
        elif back.match(text):
            begin, blanks = prev, 0
        else:
            break
        cur = prev
    return begin


def _char_index(data: bytes | bytearray, start: int, pos: int) -> int:
    """Index in the decoded line that starts at byte `start` of the byte offset `pos`."""
    return len(data[start:pos].decode("utf-8", "replace"))


def _logical_line(data: bytes | bytearray, pos: int, stop: int, unwrap: bool) -> tuple[str, int, int]:
    """The line at `pos` of data[:stop], rejoined if a terminal hard-wrapped it at a fixed width.

    A wrapped paste has every segment exactly as wide as the terminal; the last segment
    of each logical line is padded with spaces (or shorter; layout.padded). Returns (text,
    offset after the line, physical lines used)."""
    end = data.find(b"\n", pos, stop)
    end = stop if end < 0 else end + 1
    if end - pos > MAX_LINE:
        end = pos + MAX_LINE
    raw = data[pos:end].decode("utf-8", "replace")
    joined = raw.rstrip("\r\n")
    heads = added_heads(joined) if unwrap else []  # a quote or a line number put before every segment after the wrap
    width = len(joined) - (heads[-1] if heads else 0)
    n = 1
    segment = joined
    while unwrap and width >= WRAP_MIN and end < stop and n < 50:
        nend = data.find(b"\n", end, stop)
        nend = stop if nend < 0 else nend + 1
        nxt = data[end:nend].decode("utf-8", "replace").rstrip("\r\n")
        cuts = added_heads(nxt) if heads else []
        if cuts:  # the segment carries the envelopes added after the wrap, not those written before it
            depth = min(len(cuts), len(heads))
            if n == 1:
                width = len(joined) - heads[depth - 1]
            nxt = nxt[cuts[depth - 1] :]
        elif n == 1:  # the envelopes were there before the wrap: the whole line was cut
            width = len(joined)
        if len(nxt) > width or not nxt.strip() or starts_record(nxt) or padded(segment, nxt, width):
            break
        joined += nxt
        segment = nxt
        end = nend
        n += 1
        if len(nxt) < width:
            break
    return joined, end, n


_SPACES = re.compile(r"[ \t]+")


def normalise(text: str) -> str:
    """One space between words, no trailing blanks: grammars match words, not layout."""
    if "\n" not in text:  # most blocks are one line
        return _normalise_line(text)
    return "\n".join(_normalise_line(ln) for ln in text.split("\n"))


def _normalise_line(line: str) -> str:
    return (_SPACES.sub(" ", line) if "  " in line or "\t" in line else line).strip()
