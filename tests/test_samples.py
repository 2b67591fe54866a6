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
