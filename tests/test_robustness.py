"""Every real excerpt and every incident's driver console, through each transform of
tests/robustness/transforms.toml (what terminals, collectors, viewers and people do to a
log), gives the same events (kind, pid, GPU, every number) and the same verdict as the
untouched text. Transforms are data; tests/robustness/README.md says how to add one."""

from __future__ import annotations

import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from conftest import INCIDENTS, REAL
from oomlens import analyze

HERE = Path(__file__).parent / "robustness"
sys.path.insert(0, str(HERE))
from ops import apply  # noqa: E402

pytestmark = pytest.mark.slow  # thousands of cases: `make test` runs them, `make test-quick` does not

TABLE = tomllib.loads((HERE / "transforms.toml").read_text(encoding="utf-8"))
TRANSFORMS = {t["name"]: t for t in TABLE["transform"]}
CHAINS = {c["name"]: [TRANSFORMS[s] for s in c["steps"]] for c in TABLE.get("chain", [])}
CASES = {name: [t] for name, t in TRANSFORMS.items()} | CHAINS
INPUTS = sorted(REAL.glob("*.log")) + sorted(p / "driver-console.log" for p in INCIDENTS.iterdir() if (p / "driver-console.log").exists())
NUMBERS = ("threshold", "usage_fraction", "timeout_ms", "seq", "op", "exit_type")


def facts(diagnosis) -> tuple[Counter, tuple]:
    """What must not change: each event's kind, pid, GPU and numbers; the verdict."""
    events = Counter(
        (e.kind, e.pid, e.gpu, tuple(sorted((k, v) for k, v in e.fields.items() if k.endswith("_bytes") or k in NUMBERS))) for e in diagnosis.events
    )
    verdict = diagnosis.verdict or {}
    return events, (verdict.get("component"), verdict.get("memory"), verdict.get("root_kind"))


@pytest.mark.parametrize("transform", list(TRANSFORMS.values()), ids=list(TRANSFORMS))
def test_transform_samples(transform):
    """Each transform does to its sample what it says: the suite cannot drift from its data."""
    for sample in transform["sample"]:
        params = {**transform, **{k: v for k, v in sample.items() if k not in ("input", "output", "output_hex")}}
        got = apply(params, sample["input"].encode("utf-8"))
        want = bytes.fromhex(sample["output_hex"]) if "output_hex" in sample else sample["output"].encode("utf-8")
        assert got == want, transform["name"]


UNTOUCHED: dict[Path, tuple] = {}  # each input's facts, read once
KNOWN = {(k["transform"], i): k["why"] for k in TABLE.get("known", []) for i in k["inputs"]}


def _id(path: Path) -> str:
    return str(path.relative_to(REAL.parent))


def test_known_failures_name_real_inputs_and_transforms():
    ids = {_id(p) for p in INPUTS}
    for transform, path in KNOWN:
        assert transform in CASES and path in ids, (transform, path)


@pytest.fixture(scope="module")
def moved_to(tmp_path_factory):
    """Where each case writes its transformed copy, a folder of its own under one folder."""
    return tmp_path_factory.mktemp("moved")


def differs(path: Path, name: str, moved_to: Path) -> str | None:
    """How `path` through transform (or chain) `name` reads otherwise than the untouched text; None if it does not."""
    if path not in UNTOUCHED:
        UNTOUCHED[path] = facts(analyze(str(path), jobs=1))
    events, verdict = UNTOUCHED[path]
    data = untouched = path.read_bytes()
    for step in CASES[name]:
        data = apply(step, data)
    if data == untouched:  # nothing the transform does is in this input (no colour code, no line to wrap): read already
        return None
    folder = moved_to / f"{_id(path).replace('/', '-')}-{name}"
    folder.mkdir()
    moved = folder / path.name
    moved.write_bytes(data)
    diagnosis = analyze(str(moved), jobs=1)
    own = [p for i in diagnosis.inputs for p in i.problems if "oomlens could not read" in p]
    if own:  # a Transformer that raised on transformed text: a bug, not a skipped block
        return f"not read: {own}"
    got_events, got_verdict = facts(diagnosis)
    lost, gained = sorted(map(str, events - got_events)), sorted(map(str, got_events - events))
    if lost or gained:
        return f"events lost {lost}, gained {gained}"
    return None if got_verdict == verdict else f"verdict {got_verdict}, untouched {verdict}"


@pytest.mark.parametrize("name", list(CASES))
def test_same_events_and_verdict(name, moved_to):
    """Every input through this transform gives the untouched text's events and verdict, but
    the known pairs ([[known]]), which must still differ, strictly: one read right now must
    leave the list. Each input is one case; every case runs and every one that fails is told
    (a pytest item a case cost more than most cases' reading: 14,392 of them)."""
    told = {}
    for path in INPUTS:
        try:
            why = differs(path, name, moved_to)
        except Exception as err:  # noqa: BLE001 - this case fails; the other inputs are still read
            why = f"raised {err!r}"
        if why is not None:
            told[_id(path)] = why
    known = {i for t, i in KNOWN if t == name}
    wrong = [f"{i}|{name}: {why}" for i, why in told.items() if i not in known]
    right = [f"{i}|{name}: read right now, take it off [[known]] in transforms.toml ({KNOWN[name, i]})" for i in sorted(known - set(told))]
    assert not wrong and not right, "\n".join(wrong + right)
