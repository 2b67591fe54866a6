"""The native core's prefilters (oomlens._core): the same triggers, stamps and UTF-8 verdicts as Python's `re` and the codec alone."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES
from oomlens.grammars import families
from oomlens.prefilter import Prefilter, Regex, newlines, utf8_valid
from oomlens.scan import Trigger


def _all_fixture_bytes() -> bytes:
    """Every plain-text fixture file, one after the other (a few MB of real and Ray-written logs)."""
    files = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".out", ".err", ".txt", ".json", ""))
    return b"".join(p.read_bytes() for p in files)


def _whole(trigger: Trigger, data: bytes, pos: int = 0, end: int | None = None) -> list:
    """The hits of one `re` alternation of every trigger over the whole span: what the core's lines must give."""
    regex = re.compile(trigger.pattern)
    return [(m.start(), trigger.by_group[m.lastindex]) for m in regex.finditer(data, pos, len(data) if end is None else end)]


def test_the_core_finds_the_hits_re_finds_in_every_fixture():
    trigger = Trigger(families())
    data = _all_fixture_bytes()
    lines = list(trigger.finditer(data, 0, len(data)))
    assert lines == _whole(trigger, data)
    assert len(lines) > 1000 and any(fam is None for _, fam in lines)
    assert {fam.name for _, fam in lines if fam} == {fam.name for fam in families()}


def test_triggers_match_within_one_line():
    """The core's prefilter hands `re` only the lines it hit: a trigger must not reach into
    the line before (no `\\s` with a repeat, no dot-all)."""
    for fam in families():
        for trigger in fam.triggers:
            assert not re.search(r"\\s[*+?{]|\(\?s", trigger), (fam.name, trigger)


def test_hits_inside_a_window_of_the_data():
    """Scanning from an offset in mid-line and stopping before the end, as the scanner does
    with the chunk it carries over, finds what `re` finds in the same span."""
    trigger = Trigger(families())
    data = b"x CUDA out of memory. Tried\n:actor_name:Foo\nKilled process 12 (python)\nWatchdog caught collective operation timeout"
    for pos, end in ((0, len(data)), (3, len(data)), (2, 60), (30, len(data) - 5)):
        found = list(trigger.finditer(data, pos, end))
        assert found == _whole(trigger, data, pos, end), (pos, end)


def test_last_stamp_is_the_last_time_re_finds_in_the_window():
    """The time a hit borrows from the lines before it: the core's last time in a window is
    the last match of `re` alone over the window (the layouts that say `anywhere`, one
    alternation, leftmost-first) that is a time a clock shows, read by the first layout
    that reads its whole text."""
    import random

    from oomlens import times

    anywhere = [t for t in times.TIMES if t.anywhere]
    every = re.compile("|".join(re.sub(r"\(\?P<\w+>", "(?:", t.pattern) for t in anywhere).encode())
    readers = [(re.compile(t.pattern.encode()), t.utc) for t in anywhere]

    def read(text: bytes):
        regex, utc = next((r, u) for r, u in readers if r.fullmatch(text))
        groups = {k: v.decode() for k, v in regex.fullmatch(text).groupdict().items() if v is not None}
        return times.stamp_of_groups(groups, utc)

    def slow(data: bytes, lo: int, hi: int):
        found = [read(m.group(0)) for m in every.finditer(data[:hi], lo)]
        return next((s for s in reversed(found) if s is not None), None)

    data = _all_fixture_bytes()
    starts = [m.end() for m in re.finditer(b"\n", data)]
    starts = sorted(random.Random(5).sample(starts, min(len(starts), 3000)))  # line ends of every fixture, drawn
    windows = [(max(0, hi - width), hi) for hi in starts for width in (40, 512, 4096)]
    fast = [times.last_stamp(data, lo, hi) for lo, hi in windows]
    assert fast == [slow(data, lo, hi) for lo, hi in windows]
    assert sum(s is not None for s in fast) > len(windows) // 4
    assert {s.year is None for s in fast if s} == {True, False}  # vLLM-style and full dates both seen


def test_utf8_valid_says_exactly_what_the_codec_says():
    """Random strings built from the bytes that matter (leads, continuations, the bytes UTF-8
    never uses, the bounds of overlong, surrogate and out-of-range forms)."""
    import random

    pieces = [
        b"a",
        b"\n",
        "é".encode(),
        "✓".encode(),
        "😀".encode(),
        b"\x80",
        b"\xbf",
        b"\xc3",
        b"\xe2",
        b"\xf0",
        b"\xf4",
        b"\xed",
        b"\xe0",
        b"\xc0",
        b"\xff",
        b"\x9f",
        b"\x90",
        b"\xa0",
    ]
    rng = random.Random(5)
    verdicts = {True: 0, False: 0}
    for _ in range(30000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        try:
            data.decode("utf-8")
            valid = True
        except UnicodeDecodeError:
            valid = False
        assert utf8_valid(bytearray(data + b"tail"), len(data)) is valid, data
        verdicts[valid] += 1
    assert min(verdicts.values()) > 3000


def test_newlines_counts_what_bytes_count_counts():
    """Line numbers come from the core's `newlines`."""
    import random

    data = bytearray(_all_fixture_bytes())
    rng = random.Random(3)
    spans = [sorted(rng.sample(range(len(data)), 2)) for _ in range(500)] + [[0, len(data)], [5, 5]]
    assert [newlines(data, a, b) for a, b in spans] == [data.count(b"\n", a, b) for a, b in spans]


def test_spans_tell_each_run_of_lines_and_where_each_pattern_ends():
    data = b"x\nINFO 11-21 15:31:51 [metrics.py:351] ok\nCUDA out of memory. Tried\n"
    found = Prefilter(["CUDA out of memory", r"\d\d:\d\d:\d\d"]).spans(bytearray(data), 0, len(data))
    # one run of two lines: the last match's end, and each pattern's ends
    assert found == [(2, len(data), len(data) - 8, {1: [21], 0: [len(data) - 8]})]


def test_a_pattern_the_core_cannot_read_is_a_value_error_not_a_crash():
    """Errors cross the boundary as values: a caller's `except Exception` handles them."""
    for bad in ("(unclosed", "a{2,1}", r"(?<=look)behind"):
        with pytest.raises(ValueError, match="oomlens core"):
            Prefilter([bad])
        with pytest.raises(ValueError, match="oomlens core"):
            Regex(bad)


PATTERNS = [r"Killed process \d+ \(", r"[Oo]ut of [Mm]emory(?: \(x\))?: Kill", r"\S invoked", r"\d GB / \d+(?:\.\d+)? GB\.", r"a[^b\n]{1,5}b"]
ALPHABET = b"0123456789 .()/:\nabkxyGBKdeilmnoprstuvOMy\xc3\xff"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"Killed process 12 (", b"Out of memory: Kill", b" invoked", b"2 GB / 80 GB.", b"a12b"])
        | st.binary(max_size=6).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)),
        max_size=8,
    ).map(b"".join),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_every_end_of_every_match_is_reported_as_re_finds_them(text, cut_front, cut_back):
    """Property: the core reports (end, pattern) for every span of data[pos:end] that a
    pattern matches whole, in the order of the ends: a brute force of `re.fullmatch` over
    every start and end says the same."""
    data = b"zz" + text + b"zz"
    pos, end = cut_front, len(data) - cut_back
    hay = data[pos:end]
    regexes = [re.compile(p.encode()) for p in PATTERNS]
    expected = sorted({(pos + e, i) for i, r in enumerate(regexes) for s in range(len(hay) + 1) for e in range(s, len(hay) + 1) if r.fullmatch(hay[s:e])})
    found = Prefilter(PATTERNS).matches(data, pos, end)
    assert sorted(found) == expected
    assert [e for e, _ in found] == sorted(e for e, _ in found)


@pytest.mark.parametrize("into", [1, 5, 10, 18])
def test_the_time_a_hit_borrows_is_the_last_one_before_it_wherever_the_window_ends(into):
    """A time cut in two by the edge of the first search window (512 bytes behind the hit)
    was missed, and an older time taken."""
    import io

    from oomlens.scan import STAMP_WINDOW, FileContext, Scanner

    hit = b"Before state_dict() in sharding manager memory, memory allocated (GB): 2.00, memory reserved (GB): 3.00\n"
    stamp = b"INFO 11-21 10:05:00 [metrics.py:351] Avg prompt throughput: 1.0 tokens/s\n"
    filler = STAMP_WINDOW + into - len(stamp)  # the window's edge falls `into` bytes into the time
    data = b"2026-11-21 09:00:00,000 start\n" + stamp + b"x" * (filler - 1) + b"\n" + hit
    [event] = Scanner(FileContext("w.out", "worker")).events(io.BytesIO(data))
    assert event.time == "2026-11-21T10:05:00" and event.time_inferred


def test_overlapping_hits_of_several_families_come_out_as_re_finds_them():
    """Lines made of trigger phrases glued together, overlapping across and within families:
    the per-family reading behind the core's lines keeps `re`'s leftmost-first, non-overlapping hits."""
    import random

    trigger = Trigger(families())
    pieces = [
        b"Out of memory: Kill",
        b"Killed process 12 (python)",
        b"CUDA out of memory. Tried to allocate 2 GiB",
        b"Out of memory. Tried to allocate",
        b"memory allocated (GB): 3",
        b"2 GB / 80 GB.",
        b"max_model_len=4",
        b"--adam_offload",
        b"Watchdog caught collective operation timeout",
        b"ray::Actor.run() (pid=3",
        b'File "x.py", line 3, in f',
        b"No available memory for the cache blocks",
        b":actor_name:A",
    ]
    rng = random.Random(11)
    lines = [b"".join(rng.choice(pieces) + rng.choice([b"", b" ", b"x", b"\t"]) for _ in range(rng.randint(1, 5))) for _ in range(3000)]
    data = b"\n".join(lines) + b"\n"
    whole = _whole(trigger, data)
    assert list(trigger.finditer(data, 0, len(data))) == whole
    assert len(whole) > 6000


def test_a_reused_buffer_shows_nothing_of_the_stream_before():
    """A process reads its next stream into the buffer of the last one: only the new bytes count."""
    import io

    from oomlens.scan import CHUNK, FileContext, Scanner

    oom = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB\n"
    long = b"x" * (CHUNK + 1000) + b"\n" + oom * 3
    first = Scanner(FileContext("a.log"))
    assert [e.kind for e in first.events(io.BytesIO(long))] == ["cuda_oom"] * 3
    second = Scanner(FileContext("b.log"))
    assert list(second.events(io.BytesIO(b"abc"))) == [] and second.lines_read == 1 and second.bytes_read == 3
    third = Scanner(FileContext("c.log"))
    assert [e.source.line for e in third.events(io.BytesIO(b"ok\n" + oom))] == [2] and third.lines_read == 2


@pytest.mark.parametrize("chunk", [4096, None])
def test_hits_in_long_stamp_less_stretches_borrow_the_last_time_before_them(chunk, monkeypatch):
    """A driver console prints no times for thousands of lines. Times that turn up later, in
    this chunk or the next, are still the ones the hits after them borrow, and the first
    after each hit ends its interval; the stream's times are searched once, whatever the
    number of hits that ask (the core's Track)."""
    import io

    from oomlens import scan
    from oomlens.scan import FileContext, Scanner

    if chunk:
        monkeypatch.setattr(scan, "CHUNK", chunk)
    hit = b"(TaskRunner pid=7) step:%d - perf/max_memory_allocated_gb:1.5 - perf/cpu_memory_used_gb:9.0\n"
    stamp = b"INFO 11-21 10:%02d:00 [metrics.py:351] Avg prompt throughput: 1.0 tokens/s\n"
    data, expected = [], []
    minute = None
    for i in range(3000):
        if i in (500, 510, 2900):  # two times close together, then one after a long stretch
            minute = i // 100
            data.append(stamp % minute)
        elif i % 3 == 0:
            data.append(hit % i)
            expected.append(None if minute is None else f"2026-11-21T10:{minute:02d}:00")
        else:
            data.append(b"Training Progress:  10%%|#         | %d/1000 [1:02:03<12:00:00, 43.2s/it]\n" % i)
    scanner = Scanner(FileContext("driver.log", year=2026))
    found = list(scanner.events(io.BytesIO(b"".join(data))))
    assert [e.time for e in found] == expected
    stamps_at = [i for i in (500, 510, 2900)]
    latest = [next((f"2026-11-21T10:{s // 100:02d}:00" for s in stamps_at if s > i), None) for i in range(3000) if i % 3 == 0 and i not in stamps_at]
    assert [e.time_latest for e in found] == latest
    assert scanner.reader.searched <= len(b"".join(data)) + (len(b"".join(data)) // (chunk or scan.CHUNK) + 1) * 200  # each byte once (a carried line again)


def test_each_hit_takes_the_actor_announced_last_before_it():
    """A worker runs one task after another, each announced by a `:task_name:` line; a hit
    takes the task announced before it, also after another hit in the same chunk."""
    import io

    from oomlens.scan import FileContext, Scanner

    oom = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB\n"
    data = b":task_name:generate_sequences\n" + oom + b"x\n" * 3 + b":task_name:compute_log_prob\n" + oom
    events = list(Scanner(FileContext("worker-01-4001.out", "worker", 4001)).events(io.BytesIO(data)))
    assert [(e.kind, e.actor) for e in events] == [("cuda_oom", "generate_sequences"), ("cuda_oom", "compute_log_prob")]


def test_a_line_that_does_not_parse_costs_one_parse_per_trigger_it_holds(monkeypatch):
    """Records glued on one line are looked for behind each trigger, never at every place a
    family's start may stand (a settings family starts at any word): a long line with one
    trigger that does not parse is parsed a bounded number of times."""
    import io

    from oomlens.grammars import Family
    from oomlens.scan import FileContext, Scanner

    calls = []
    original = Family.parse
    monkeypatch.setattr(Family, "parse", lambda self, text: calls.append(self.name) or original(self, text))
    line = " ".join(f"word{i}" for i in range(400)) + " vllm_max_model_len: 5\n"  # a setting behind 400 words
    found = list(Scanner(FileContext("x.log")).events(io.BytesIO(line.encode())))
    assert len(calls) <= 4, len(calls)  # a parse at every word before it: 2,696
    assert [c.fields["settings"] for c in found if c.kind == "setting"] == [{"max_model_len": 5}]


@pytest.mark.parametrize("seed", range(2))
def test_hits_on_lines_with_bytes_that_are_not_utf8_are_the_same_for_every_engine(seed):
    """A mutated or cut log puts bytes that are not UTF-8 inside trigger lines: the core and
    `re` read bytes alike (the core as Latin-1), so a hit is found whichever looks."""
    import random

    trigger = Trigger(families())
    rng = random.Random(seed)
    whole = _all_fixture_bytes()
    half = whole.index(b"\n", len(whole) // 2) + 1
    data = bytearray(whole[:half] if seed == 0 else whole[half:])  # each seed mutates half of every fixture's bytes
    for at in rng.sample(range(len(data)), len(data) // 200):  # one byte in 200 replaced by a byte no UTF-8 text holds
        if data[at] != 0x0A:
            data[at] = rng.choice([0x80, 0xBF, 0xC0, 0xED, 0xF5, 0xFF])
    data = bytes(data)
    by_re = _whole(trigger, data)
    assert list(trigger.finditer(data, 0, len(data))) == by_re
    assert len(by_re) > 1000


@pytest.mark.parametrize("seed", range(3))
def test_hits_skipped_by_the_caller_are_the_ones_it_would_have_passed_over(seed):
    """The scanner takes no hit of a family before the end of the block it read last
    (skip_until); the hit reader, told that end, goes on from there. What the caller takes
    is the same as when it is handed every hit and passes over those before the end, for
    ends at the next line, lines further on, and inside a line (where nothing is skipped)."""
    import random

    trigger = Trigger(families())
    data = _all_fixture_bytes()
    data += b"".join(b"(TaskRunner pid=1) step:%d - " % i + b" - ".join(b"perf/max_memory_allocated_gb:%d.5" % k for k in range(3)) + b"\n" for i in range(200))

    def block_end(pos: int) -> int:  # where the block read at `pos` ends: chosen from `pos` alone
        pick = random.Random(seed * 7919 + pos).random()
        line_end = data.find(b"\n", pos) + 1 or len(data)
        if pick < 0.6:
            return line_end
        if pick < 0.9:
            for _ in range(int(pick * 10)):
                line_end = data.find(b"\n", line_end) + 1 or len(data)
            return line_end
        return pos + 3  # inside the line

    def take(hits, skip):
        taken = []
        for pos, fam in hits:
            name = fam.name if fam else ""
            if pos < skip.get(name, -1):
                continue
            taken.append((pos, name))
            skip[name] = block_end(pos)
        return taken

    every = list(trigger.finditer(data, 0, len(data)))
    told: dict[str, int] = {}
    assert take(trigger.finditer(data, 0, len(data), told), told) == take(every, {})


@pytest.mark.parametrize("trigger", ["CUDA out of memory$", "^Killed process", "(?m)^Traceback", r"OOM(?:\b|$)"])
def test_a_trigger_anchored_at_a_line_s_end_or_start_is_refused_when_its_family_is_read(tmp_path, trigger):
    """The core searches many lines at once: there `^` and `$` are the buffer's ends, so a
    trigger with one would miss every line but the first or last. A family that writes one
    is refused when read, the one word-end form `(?:\\s|$)` aside (a line break is \\s)."""
    from oomlens.grammars import read_family

    grammar = tmp_path / "anchored.lark"
    grammar.write_text(f"//! trigger: {trigger}\nstart: WORD\n%import common.WORD\n")
    with pytest.raises(ValueError, match="ends of the buffer"):
        read_family(grammar)
    grammar.write_text("//! trigger: [a-z]Error:(?:\\s|$)|[$^]x|\\$HOME\nstart: WORD\n%import common.WORD\n")
    assert read_family(grammar).triggers


def _lines_of(regex, data: bytes) -> set[int]:
    """The lines (by their start) on which a match starts."""
    return {data.rfind(b"\n", 0, m.start()) + 1 for m in regex.finditer(data)}


def test_every_block_start_runs_in_the_core_and_finds_every_line_re_finds():
    """Each family's block start (layout.py reads where blocks start in a paste's head) is a
    DFA of the core, look-arounds and all: over the real excerpts and every grammar's samples,
    it finds each line `re` finds."""
    from oomlens.grammars import _either, cues

    texts = [p.read_bytes() for p in sorted((FIXTURES / "real").glob("*.log"))]
    data = b"\n".join([*texts, *(s.text.encode() for fam in families() for s in fam.samples)])
    for block in cues(families()).blocks:
        pattern = _either(block.family.written["start"] or block.family.triggers)
        assert isinstance(block.anywhere, Regex), block.family.name
        exact = _lines_of(re.compile(pattern.encode(), re.M), data)
        assert exact and exact <= _lines_of(block.anywhere, data), block.family.name


PIECES = [
    "a",
    "b",
    "ab",
    r"\d",
    r"\w+",
    "[ab]",
    "[^a\n]",
    ".",
    "x?",
    " ",
    "(?=a)",
    "(?!b)",
    "(?<=a)",
    r"(?<!\w)",
    "(?=.*b)",
    "(?=[^\n]*?1)",
    "^",
    "$",
    r"\b",
    "(?:a|1)*?",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join), min_size=1, max_size=3).map("|".join),
    st.lists(st.sampled_from([b"a", b"b", b"1", b" ", b"x", b"\n", b"ab", b"ba1"]), max_size=24).map(b"".join),
)
def test_a_line_superset_finds_every_line_re_finds_and_no_more_without_look_arounds(pattern, text):
    """Property: over any text, the lines the DFA finds hold every line `re` (MULTILINE)
    finds; a pattern with no look-around finds exactly those."""
    from oomlens.prefilter import line_superset

    superset = line_superset(pattern, re.M)
    assert superset is not None, pattern
    exact, found = _lines_of(re.compile(pattern.encode(), re.M), text), _lines_of(superset, text)
    assert exact <= found, (pattern, superset.pattern)
    if "(?" not in pattern.replace("(?:", ""):
        assert exact == found, (pattern, superset.pattern)
