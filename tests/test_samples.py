"""Every grammar's sample lines parse, through the whole pipeline, into the values they declare."""

from __future__ import annotations

import pytest

import io

from conftest import expected_value, lookup
from oomlens.events import Clue, fold
from oomlens.grammars import families
from oomlens.pipeline import read_input
from oomlens.sources import Input


def found_in(text: str) -> list[dict]:
    """Events (folded, as oomlens reports them) and clues found in a sample's text."""
    found = read_input(Input("<sample>", opener=lambda: io.BytesIO(text.encode())))
    events = fold([f for f in found if not isinstance(f, Clue)])
    clues = [{"kind": c.kind, "fields": c.fields, "pid": c.pid, "actor": c.actor} for c in found if isinstance(c, Clue)]
    return [e.to_dict() for e in events] + clues

SAMPLES = [(fam.name, s) for fam in families() for s in fam.samples]


def test_every_family_has_samples():
    for fam in families():
        assert len(fam.samples) >= 2, f"{fam.name}.lark carries fewer than two samples"


@pytest.mark.parametrize("family,sample", SAMPLES, ids=[f"{f}:{s.line}" for f, s in SAMPLES])
def test_sample_parses(family, sample):
    events = found_in(sample.text)
    matching = [e for e in events if e["kind"] == sample.kind]
    assert matching, f"{family} line {sample.line}: no {sample.kind} event in {[e['kind'] for e in events]}"
    event = matching[0]
    for key, want in sample.expect.items():
        assert lookup(event, key) == expected_value(want), f"{family} line {sample.line}: {key}"


@pytest.mark.parametrize("family,sample", SAMPLES, ids=[f"{f}:{s.line}" for f, s in SAMPLES])
def test_shape_cache_gives_what_a_fresh_parse_gives(family, sample):
    """A family that parses once per line shape must yield, for a line whose shape it has
    seen with other numbers, exactly the drafts a fresh parse yields."""
    fam = next(f for f in families() if f.name == family)
    if fam.shapes is None or "\n" in sample.text:
        pytest.skip("no shape cache for this family or sample")
    from oomlens.grammars import parse_prefix
    from oomlens.lines import peel
    from oomlens.scan import _normalise

    text = _normalise(peel(sample.text).text)
    m = fam.start.search(text)
    text = text[m.start():] if m else text
    other = "".join(str((int(c) + 7) % 10) if c.isdigit() else c for c in text)
    fam.parse(other)  # primes the cache with the same shape, other numbers
    cached, _ = fam.parse(text)
    fresh_tree, _ = parse_prefix(fam.parser, text)
    assert cached == fam.transformer.transform(fresh_tree)
