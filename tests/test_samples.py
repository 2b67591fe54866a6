"""Every grammar's sample lines parse, through the whole pipeline, into the values they declare."""

from __future__ import annotations

import pytest

from conftest import expected_value, lookup
from oomlens import parse_text
from oomlens.grammars import families

SAMPLES = [(fam.name, s) for fam in families() for s in fam.samples]


def test_every_family_has_samples():
    for fam in families():
        assert len(fam.samples) >= 2, f"{fam.name}.lark carries fewer than two samples"


@pytest.mark.parametrize("family,sample", SAMPLES, ids=[f"{f}:{s.line}" for f, s in SAMPLES])
def test_sample_parses(family, sample):
    events = [e.to_dict() for e in parse_text(sample.text)]
    matching = [e for e in events if e["kind"] == sample.kind]
    assert matching, f"{family} line {sample.line}: no {sample.kind} event in {[e['kind'] for e in events]}"
    event = matching[0]
    for key, want in sample.expect.items():
        assert lookup(event, key) == expected_value(want), f"{family} line {sample.line}: {key}"
