"""Mutated real logs for oomlens: the strategy, the check every input must pass, and the
long run of `make fuzz` (`python tests/fuzzing.py`), which keeps each failure it finds under
tests/fuzz_regressions/ (the input and what went wrong) for `test_fuzz.py` to replay.

What every input must give: no exception out of `oomlens.analyze` or the renderers, none
inside it either (a block whose Transformer raised is left out and told as one oomlens could
not read: odd text is "not known", never a lost block), a JSON contract that validates, and
every event of the untouched lines before the first mutated byte (those a mutation could not
reach) still found."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import sys
import time
import traceback
from pathlib import Path

import jsonschema
from hypothesis import HealthCheck, given, settings, strategies as st
from markdown_it import MarkdownIt

import oomlens
from oomlens.diagnosis import Diagnosis
from oomlens.outputs import markdown, table

RENDERER = MarkdownIt("gfm-like")  # CommonMark, GFM tables, raw HTML, links found in text: as GitHub renders

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
REGRESSIONS = HERE / "fuzz_regressions"
SEEDS = sorted(FIXTURES.glob("real/*.log")) + sorted(FIXTURES.glob("sessions/ray2.60-*/driver-console.log"))[:2]
SEED_BYTES = [p.read_bytes() for p in SEEDS]

settings.register_profile("fuzz", max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))

HOSTILE = [
    b"9" * 25,  # past 2**63
    b"9" * 5000,  # past Python's int() digits and any float
    b"1e999",
    b"2026-02-30 23:59:60,000 ",
    b"9999-12-31 23:59:59,000 ",
    b"2026-13-05 10:00:00,000 ",
    b"\x1b[31m",
    b"\xff\xfe\xed",
    b"RuntimeError: CUDA out of memory.\n",
    b"Tried to allocate 999999 TiB",
    b"(pid=99999999999999999999, ip=10.0.0.1) ",
    b"[" * 500,
]


RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # what markdown shows escaped
RAW_IN_TABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # a tab is layout there
# what markdown.render writes as markup, rendered by a CommonMark/GFM renderer: any other tag is live HTML from a log
OWN_TAGS = {"h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "hr", "code", "strong", "sub", "pre"}
TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)")


@st.composite
def mutated(draw: st.DrawFn, long: int = 20_000) -> tuple[bytes, int]:
    """A seed with one to three mutations, and the offset of its first mutated byte (every
    byte before it is the seed's)."""
    data = bytearray(draw(st.sampled_from(SEED_BYTES)))
    first = len(data)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["flip", "insert", "delete", "line", "truncate", "splice", "hostile", "nul", "long"]))
        if how == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif how == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif how == "line":  # a line written twice: the copy goes after its end
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end + 1
            data[end:end] = data[start:end]
            at = end
        elif how == "truncate":
            del data[at:]
        elif how == "splice":
            other = draw(st.sampled_from(SEED_BYTES))
            data[at:] = other[draw(st.integers(0, len(other))) :]
        elif how == "hostile":
            data[at:at] = draw(st.sampled_from(HOSTILE))
        elif how == "nul":
            data[at:at] = b"\0" * draw(st.integers(1, 70_000))
        else:  # a very long line
            data[at:at] = draw(st.sampled_from([b"a.", b"ray::A.b() (pid=1, ", b"memory allocated (GB): 1.0, ", b"\t"])) * draw(st.integers(1, long))
        first = min(first, at)
    return bytes(data), first


def found(diagnosis: Diagnosis) -> set[tuple[str, int]]:
    """Each event's kind with each line it was read at (a folded event keeps its copies')."""
    return {(e.kind, s.line) for e in diagnosis.events for s in e.sources}


def check(data: bytes, first: int | None, folder: Path, html: bool = False) -> None:
    """What every input must give (see the module); raises where it does not."""
    log = folder / "trainer.log"
    log.write_bytes(data)
    diagnosis = oomlens.analyze(str(log), jobs=1)
    own = [p for i in diagnosis.inputs for p in i.problems if "oomlens could not read" in p]
    assert not own, f"a block oomlens could not read at {own[0].split('first at ', 1)[-1]}"
    stream = io.BytesIO()
    diagnosis.write_json(stream)
    jsonschema.Draft202012Validator(oomlens.schema()).validate(json.loads(stream.getvalue()))
    text = markdown.render(diagnosis)
    assert not RAW_CONTROL.search(text), f"a control character from the log in the markdown: {RAW_CONTROL.search(text)!r}"
    live = {m.group(2).lower() for m in TAG.finditer(RENDERER.render(text))} - OWN_TAGS
    assert not live, f"live HTML from the log in the markdown: {sorted(live)}"
    shown = table.render(diagnosis, 120)
    assert not RAW_IN_TABLE.search(shown), f"a control character from the log in the table: {RAW_IN_TABLE.search(shown)!r}"
    if html:
        from oomlens.outputs.html import render

        render(diagnosis, "cdn")
    if first is None:
        return
    cut = data.rfind(b"\n", 0, first) + 1  # the whole lines before the first mutated byte
    lines = data.count(b"\n", 0, cut)
    log.write_bytes(data[:cut])
    before = oomlens.analyze(str(log), jobs=1)
    # an event ending on the last untouched line may go on into the mutated ones
    kept = {(e.kind, s.line) for e in before.events for s in e.sources if s.end_line < lines}
    lost = kept - found(diagnosis)
    assert not lost, f"events of the untouched lines 1-{lines} lost: {sorted(lost)}"


class Hang(Exception):
    """An input that took longer than the fuzz run's limit per input."""


def _hang(signum: int, frame: object) -> None:
    raise Hang("no result within the limit per input")


def fuzz(minutes: float, per_input: int = 60) -> int:
    """Run batches of random mutated inputs until `minutes` are spent; each failure (the
    smallest input hypothesis shrinks it to) is written under tests/fuzz_regressions/.
    Returns how many were written."""
    import tempfile

    settings.load_profile("fuzz")
    end = time.monotonic() + minutes * 60
    written = runs = 0
    last: list[tuple[bytes, int, str]] = []
    signal.signal(signal.SIGALRM, _hang)

    @given(mutated(long=200_000))
    def one(case: tuple[bytes, int]) -> None:
        data, first = case
        with tempfile.TemporaryDirectory() as folder:
            signal.alarm(per_input)
            try:
                check(data, first, Path(folder), html=True)
            except BaseException as err:
                last[:] = [(data, first, "".join(traceback.format_exception(err)))]
                raise
            finally:
                signal.alarm(0)

    while time.monotonic() < end:
        runs += 1
        try:
            one()
        except Exception:  # noqa: BLE001 - a failure found: kept, then the search goes on
            if last:
                written += _keep(*last[0])
        print(f"fuzz: batch {runs} done, {written} failure(s) kept, {max(0, end - time.monotonic()) / 60:.1f} min left", flush=True)
    return written


def _signature(error: str) -> str:
    """What went wrong, numbers left out: one kept input per kind of failure."""
    return re.sub(r"\d+", "N", error.strip().splitlines()[-1])[:80]


def _keep(data: bytes, first: int, error: str) -> int:
    """Write one failing input and what went wrong (the repository's paths relative); 0 when
    a failure of the same kind is already kept."""
    REGRESSIONS.mkdir(exist_ok=True)
    seen = {_signature(json.loads(p.read_text(encoding="utf-8"))["error"]) for p in REGRESSIONS.glob("*.json")}
    if _signature(error) in seen:
        return 0
    name = hashlib.sha256(data).hexdigest()[:16]
    error = error.replace(str(HERE.parent) + os.sep, "").replace(sys.prefix + os.sep, "")
    (REGRESSIONS / f"{name}.log").write_bytes(data)
    (REGRESSIONS / f"{name}.json").write_text(json.dumps({"first_mutated_byte": first, "error": error}, indent=1) + "\n", encoding="utf-8")
    print(f"fuzz: kept {name}: {error.strip().splitlines()[-1][:200]}", flush=True)
    return 1


def regressions() -> list[Path]:
    """The failures `make fuzz` kept, each input beside its .json."""
    return sorted(REGRESSIONS.glob("*.log")) if REGRESSIONS.is_dir() else []


if __name__ == "__main__":
    sys.exit(1 if fuzz(float(os.environ.get("FUZZ_MINUTES", "10"))) else 0)
