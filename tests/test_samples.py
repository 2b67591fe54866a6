"""Every grammar's sample lines parse, through the whole pipeline, into the values they declare."""

from __future__ import annotations

import io

import pytest

from conftest import expected_value, lookup
from oomlens.events import Clue, Event, fold
from oomlens.grammars import families
from oomlens.pipeline import read_input
from oomlens.sources import Input


def found_in(text: str) -> list[dict]:
    """Events (folded, as oomlens reports them) and clues found in a sample's text: whole
    lines, as a log file holds them (a file's last line without its break was cut)."""
    found = read_input(Input("<sample>", opener=lambda: io.BytesIO(text.encode() + b"\n")))
    events = fold([f for f in found if not isinstance(f, Clue)])
    clues = [{"kind": c.kind, "fields": c.fields, "pid": c.pid, "actor": c.actor} for c in found if isinstance(c, Clue)]
    return [e.to_dict() for e in events] + clues


SAMPLES = [(fam.name, s) for fam in families() for s in fam.samples]


def test_every_family_has_samples():
    for fam in families():
        assert len(fam.samples) >= 2, f"{fam.name}.lark carries fewer than two samples"


def test_every_sample_directive_is_a_sample_checked_here():
    """A family's samples are read from its file when asked for, not when it loads: every
    `//! sample:` line of every grammar is still one sample, its kind the directive's first
    word and its text begun by the `//|` line under it."""
    for fam in families():
        lines = fam.path.read_text(encoding="utf-8").splitlines()
        declared = [(n, raw.split(":", 1)[1].split()[0]) for n, raw in enumerate(lines, 1) if raw.startswith("//! sample:")]
        assert [(s.line, s.kind) for s in fam.samples] == declared, fam.name
        for s in fam.samples:
            assert s.text and s.text.split("\n")[0] == lines[s.line].removeprefix("//| "), f"{fam.name}:{s.line}"
        assert fam.sample_kinds == {s.kind for s in fam.samples}, fam.name  # what a run reads of them (scan._readings_only)


def test_every_family_reads_whole():
    """A run compiles a family's patterns (and reads its samples) where it first needs them,
    not when the family loads: a pattern of a shipped grammar written wrong fails here, not
    in the middle of someone's run."""
    for fam in families():
        fam.check()


@pytest.mark.parametrize("family,sample", SAMPLES, ids=[f"{f}:{s.line}" for f, s in SAMPLES])
def test_sample_parses(family, sample):
    events = found_in(sample.text)
    matching = [e for e in events if e["kind"] == sample.kind]
    assert matching, f"{family} line {sample.line}: no {sample.kind} event in {[e['kind'] for e in events]}"
    event = matching[0]
    for key, want in sample.expect.items():
        assert lookup(event, key) == expected_value(want), f"{family} line {sample.line}: {key}"


# the one-line samples of families that parse once per line shape
CACHED = [(f, s) for f, s in SAMPLES if next(x for x in families() if x.name == f).shapes is not None and "\n" not in s.text]


def _grammar_input(family: str, sample) -> tuple:  # noqa: ANN001 - a grammars.Sample
    """The family and the sample line as the scanner hands it to the grammar."""
    from oomlens.blocks import normalise
    from oomlens.envelopes import peel

    fam = next(f for f in families() if f.name == family)
    text = normalise(peel(sample.text).text)
    m = fam.start.search(text)
    return fam, text[m.start() :] if m else text


@pytest.mark.parametrize("family,sample", CACHED, ids=[f"{f}:{s.line}" for f, s in CACHED])
def test_shape_cache_gives_what_a_fresh_parse_gives(family, sample):
    """A family that parses once per line shape must yield, for a line whose shape it has
    seen with other numbers, exactly the drafts a fresh parse yields."""
    fam, text = _grammar_input(family, sample)
    other = "".join(str((int(c) + 7) % 10) if c.isdigit() else c for c in text)
    fam.parse(other)  # primes the cache with the same shape, other numbers
    fam.parse(other)  # twice: a shape's plan is made the second time it is seen
    cached = fam.parse(text)
    shapes, fam.shapes = fam.shapes, None
    try:
        assert cached == fam.parse(text)  # what the family gives without its cache: a cut line's prefix and mark included
    finally:
        fam.shapes = shapes


def _other_numbers(text: str) -> str:
    """The same line shape with every ASCII digit changed."""
    return "".join(str((int(c) + 7) % 10) if "0" <= c <= "9" else c for c in text)


@pytest.mark.parametrize("family,sample", SAMPLES, ids=[f"{f}:{s.line}" for f, s in SAMPLES])
def test_a_plain_line_seen_with_other_numbers_scans_as_a_fresh_one(family, sample):
    """The scanner reads a one-line block of a shape-cached family by its raw line's shape
    (no envelope, no continuation), learned once per scan: a line of a shape seen before,
    with other numbers, gives exactly the events a scan that never saw it gives."""
    from oomlens.scan import FileContext, Scanner

    fam = next(f for f in families() if f.name == family)
    if fam.shapes is None or "\n" in sample.text:
        pytest.skip("no shape cache for this family or sample")

    def scanned(text: str, primed: Scanner | None = None) -> tuple[list[dict], Scanner]:
        scanner = Scanner(FileContext("<sample>"))
        if primed is not None:
            scanner.blocks = primed.blocks  # the shapes the other scan learned
        found = list(scanner.events(io.BytesIO(text.encode() + b"\n")))
        return [f.to_dict() if isinstance(f, Event) else (f.kind, f.fields, f.pid, f.actor) for f in found], scanner

    fresh, _ = scanned(sample.text)
    _, primed = scanned(_other_numbers(sample.text))
    assert scanned(sample.text, primed)[0] == fresh


def test_whether_a_line_is_plain_does_not_depend_on_its_digits():
    """What makes a raw line plain (no envelope peeled, where its grammar input starts, a
    block of its own, nothing to normalise) must be the same for every line of its shape,
    as the scanner decides it once per shape: checked over every fixture line a trigger hits."""
    from conftest import FIXTURES
    from oomlens.blocks import plain_start

    shaped = [f for f in families() if f.shapes is not None]
    lines = {
        line
        for path in sorted(FIXTURES.rglob("*"))
        if path.is_file() and path.suffix in (".log", ".out", ".err", ".txt")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        if any(c.isdigit() for c in line) and len(line) < 4000
    }
    assert len(lines) > 10000
    plain = 0
    for line in sorted(lines):
        for fam in shaped:
            if not fam.trigger_text.search(line):
                continue  # the scanner asks about a line its raw bytes hit a trigger on
            at = plain_start(line, fam)
            assert at == plain_start(_other_numbers(line), fam), (fam.name, line)
            plain += at >= 0
    assert plain > 100


def _reformed(text: str, rng) -> str:  # noqa: ANN001 - a random.Random
    """The same line with every number of another width, and now and then another sign,
    fraction or exponent, as real memory and metric lines vary from one step to the next."""
    import re

    def other(m: re.Match) -> str:
        whole = str(rng.randrange(10 ** rng.randrange(1, 7)))
        roll = rng.random()
        if roll < 0.2:
            return f"-{whole}.{rng.randrange(10**4)}"
        if roll < 0.35:
            return f"{whole}.{rng.randrange(100)}e-{rng.randrange(1, 9):02d}"
        if roll < 0.5:
            return whole
        return f"{whole}.{rng.randrange(10 ** rng.randrange(1, 9))}"

    return re.sub(r"(?<![A-Za-z_\d.])\d+(?:\.\d+)?", other, text)


@pytest.mark.parametrize("family,sample", CACHED, ids=[f"{f}:{s.line}" for f, s in CACHED])
def test_numbers_of_any_width_and_form_read_as_a_fresh_parse_reads_them(family, sample):
    """A shape-cached family's line whose numbers change width, sign, fraction or exponent
    from one line to the next yields exactly the drafts lark yields for it afresh."""
    import random

    from oomlens.grammars import parse_prefix

    fam, text = _grammar_input(family, sample)
    rng = random.Random(sample.line)
    for _ in range(25):
        line = _reformed(text, rng)
        cached, complete = fam.parse(line)
        tree, fresh_complete = parse_prefix(fam.parser, line)
        fresh = [] if tree is None else fam.transformer.transform(tree)
        if fresh_complete:
            assert cached == fresh, line


def test_a_shape_seen_once_is_parsed_as_it_stands_and_a_plan_made_when_it_comes_again(monkeypatch):
    """Making a shape's plan costs more than a parse: a line whose shape no other line has
    (a shard's hash in it) is parsed as it stands; the plan is made on the shape's second line."""
    from oomlens.grammars import Family, families

    fam = next(f for f in families() if f.name == "gpu_memory")
    made = []
    original = Family._compile
    monkeypatch.setattr(Family, "_compile", lambda self, tree, shape: made.append(shape) or original(self, tree, shape))
    line = "After sync model weights in sharding manager (shard {}), memory allocated (GB): {}, memory reserved (GB): 31.5, device memory used/total (GB): 49.0/79.11"
    once = [fam.parse(line.format(shard, 20.5))[0] for shard in ("c00cd09d02", "7a8d3fd5db", "e1f2a3b4c5")]
    assert made == [] and all(drafts and drafts[0]["fields"]["allocated_bytes"] for drafts in once)
    again = [fam.parse(line.format("c00cd09d02", size))[0] for size in (21.25, 22.125, 23.0)]
    assert len(made) == 1  # its second line: the plan, used from then on
    assert [d[0]["fields"]["allocated_bytes"] for d in again] == [round(g * 1024**3) for g in (21.25, 22.125, 23.0)]


def test_a_line_too_long_to_come_again_parses_as_it_stands():
    """A shape is found by a pass over the whole line: on a megabyte line of watchdog
    triggers each block paid it again (1.2 s where 0.2 s reads it). A line past
    MAX_SHAPE_LINE is parsed as it stands, and gives what a fresh parse gives."""
    from oomlens.shapes import MAX_SHAPE_LINE

    fam, text = next(_grammar_input(f, s) for f, s in CACHED if f == "nccl_watchdog")
    long = text + " " + "x" * MAX_SHAPE_LINE
    fam.shapes.clear()
    drafts = fam.parse(long)
    assert not fam.shapes
    shapes, fam.shapes = fam.shapes, None
    try:
        assert drafts == fam.parse(long)
    finally:
        fam.shapes = shapes


NEIGHBOURS = ("saving checkpoint to /data/ckpt/global_step_4", "epoch 1/3: reward mean 0.42")


@pytest.mark.parametrize("family,sample", SAMPLES, ids=[f"{f}:{s.line}" for f, s in SAMPLES])
def test_a_sample_between_other_lines_ended_by_crlf_reads_alike(family, sample):
    """A trigger matches within one line wherever the line stands: the native core reads many
    lines at once, so a line's end inside the buffer (and a Windows line end) must read as
    the end the sample's last line has."""
    alone = [(e["kind"], e.get("fields")) for e in found_in(sample.text) if "source" in e]
    text = "\r\n".join([NEIGHBOURS[0], *sample.text.split("\n"), NEIGHBOURS[1]])
    between = [(e["kind"], e.get("fields")) for e in found_in(text) if "source" in e]
    assert between == alone


MULTI = [(f, s) for f, s in SAMPLES if "\n" in s.text]


@pytest.mark.parametrize("family,sample", MULTI, ids=[f"{f}:{s.line}" for f, s in MULTI])
def test_a_block_behind_ts_stamps_reads_alike(family, sample):
    """moreutils `ts` (or journalctl -o short-precise) stamps every line of a block: a line
    whose first words then read as a journal's host and unit ("Considered workers: [")
    still goes on with its block."""
    times = ("local_time", "time", "uptime_s")
    alone = [(e["kind"], {k: v for k, v in e["fields"].items() if k not in times}) for e in found_in(sample.text) if "source" in e]
    stamped = "\n".join(f"Nov 27 16:22:{n % 60:02d}.{n * 37 % 1000:03d}000 {line}" for n, line in enumerate(sample.text.split("\n")))
    behind = [(e["kind"], {k: v for k, v in e["fields"].items() if k not in times}) for e in found_in(stamped) if "source" in e]
    assert behind == alone


def test_a_shape_plan_calls_each_method_as_lark_does():
    """gpu_memory's Transformer names its children (lark.v_args(inline=True)): a shape's plan
    calls it with them as arguments, and a method lark calls with its meta gets no plan, its
    lines parsed one by one, to the same drafts."""
    import dataclasses

    import lark

    from oomlens.families.gpu_memory import Transformer as Inline
    from oomlens.grammars import parse_prefix
    from oomlens.shapes import numbers_and_shape

    class WithMeta(Inline):
        @lark.v_args(meta=True)
        def size(self, meta, children):
            return Inline.size(self, *children)

    inline = next(f for f in families() if f.name == "gpu_memory")
    meta = dataclasses.replace(inline, shapes={}, transformer_class=WithMeta)
    text = "Available KV cache memory: 54.67 GiB"
    numbers, shape = numbers_and_shape(text)
    tree = parse_prefix(inline.parser, shape)[0]
    assert inline._compile(tree, shape)(numbers) == inline.transformer.transform(parse_prefix(inline.parser, text)[0])
    assert meta._compile(tree, shape) is None
    assert [meta.parse(text) for _ in range(3)] == [inline.parse(text)] * 3


def _remark(rng) -> str:  # noqa: ANN001 - a random.Random
    """Words a program or a person puts after a reading: a run's label with a hash and a
    counter, a key and value, a note in words (the unique-shapes bench's labels among them)."""
    word = rng.choice(["run", "shard", "module", "engine", "job", "trial"])
    return rng.choice(
        [
            f" [{word}-{rng.getrandbits(40):010x} #{rng.randrange(10**6)}]",
            f" ({word} {rng.getrandbits(32):08x} done)",
            f" | {word}_id={rng.randrange(10**4)} attempt={rng.randrange(9)}",
            f" -- {word} {rng.randrange(100)} of {rng.randrange(100, 200)} finished",
        ]
    )


def _grammar_reads(fam, text: str) -> bool:  # noqa: ANN001 - a grammars.Family
    from lark.exceptions import UnexpectedInput

    try:
        fam.parser.parse(text)
    except UnexpectedInput:
        return False
    return True


ONE_LINE = [(f, s) for f, s in SAMPLES if "\n" not in s.text.strip()]


@pytest.mark.parametrize("family,sample", ONE_LINE, ids=[f"{f}:{s.line}" for f, s in ONE_LINE])
def test_words_after_a_whole_reading_are_no_cut(family, sample):
    """A one-line reading followed by words its grammar does not read (a run's label) reads
    as the line alone does, whole: a cut stops a line inside its last word, so two words after
    the reading were written, not cut. A cut inside those words, or inside the reading, is told
    as before (the line alone, or `truncated`)."""
    import random

    fam, text = _grammar_input(family, sample)
    alone, complete = fam.parse(text)
    if not alone or not complete or any("truncated" in d.get("fields", {}) for d in alone):
        pytest.skip("the sample is read only in part as it stands")
    rng = random.Random(sample.line)
    for _ in range(6):
        remark = _remark(rng)
        drafts, whole = fam.parse(text + remark)
        if drafts == alone:  # else a grammar that reads such words made another reading of them
            assert whole, remark
        if fam.shapes is None or fam.reduce is not None:
            continue  # a cut inside a label is asked of readings (a free tail or `keep` reads words as they come)
        first_word = remark[: remark.index(" ", 1)]
        cut = first_word[: rng.randrange(2, len(first_word) + 1)]
        drafts, whole = fam.parse(text + cut)
        if drafts == alone and not _grammar_reads(fam, text + cut):
            assert not whole, cut  # the line may have gone on: a wrap, a paste's end


@pytest.mark.parametrize(
    "regex,spans",
    [
        (r"\d+(\.\d+)?", False),
        (r"[A-Za-z_]+", False),
        (r"(?:GB|GiB|MiB)", False),
        (r"\w+", False),
        (r"\S[^\n]*", True),  # a free text to the line's end
        (r"which is", True),
        (r"[^)]+", True),
        (r"\D", True),
        (r".+", True),
        (r"(?i:memory in use)", True),
        (r"a\s+b", True),
        (r"(?>x|y z)", True),
    ],
)
def test_a_terminal_spans_words_where_its_match_may_hold_a_blank(regex, spans):
    """Where the grammar met a word it does not know, a terminal it expected there whose
    match may hold a blank could have been cut in the words after it: parse_prefix then
    calls the reading cut."""
    from oomlens.grammars import _spans_words

    assert _spans_words(regex) is spans
