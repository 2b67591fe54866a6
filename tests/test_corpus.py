"""The real excerpts users pasted into issues yield exactly the kinds an expert sees in them."""

from __future__ import annotations

import pytest

from conftest import REAL, known_miss
from oomlens import analyze

FILES = sorted(p.name for p in REAL.glob("*.log"))


@pytest.mark.parametrize("name", [pytest.param(name, marks=known_miss(name, "kinds")) for name in FILES])
def test_kinds(name, real_expectations):
    expected = real_expectations[name]["expected"]
    kinds = {e.kind for e in analyze(str(REAL / name), jobs=1).events}
    missing = set(expected["kinds"]) - kinds
    forbidden = set(expected["not_kinds"]) & kinds
    assert not missing, f"{name}: missing {sorted(missing)}"
    assert not forbidden, f"{name}: must not produce {sorted(forbidden)}"
