"""The verdict an expert gives from each real excerpt alone: component, memory, root kind.

Where the expert says the log does not support an answer (null), oomlens must not give a
confident one either: a wrong confident verdict is worse than none. A root kind the expert
tolerates (neither required nor forbidden, e.g. a CUDA OOM cut after 'CUDA Error: o') may
stand where the expert gives none."""

from __future__ import annotations

import pytest

from conftest import REAL, known_miss
from oomlens import analyze

FILES = sorted(p.name for p in REAL.glob("*.log"))


@pytest.mark.parametrize("name", [pytest.param(name, marks=known_miss(name, "verdict")) for name in FILES])
def test_verdict(name, real_expectations):
    expected = real_expectations[name]["expected"]
    verdict = analyze(str(REAL / name), jobs=1).verdict or {"component": None, "memory": None, "root_kind": None}
    ours = {k: verdict.get(k) for k in ("component", "memory", "root_kind")}
    tolerated = expected["root_kind"] is None and ours["root_kind"] not in (None, *expected["not_kinds"], *expected["kinds"])
    if tolerated:
        return
    for key in ("root_kind", "memory", "component"):
        assert ours[key] == expected[key], f"{name}: {key} is {ours[key]!r}, the expert says {expected[key]!r} ({expected['why']})"
