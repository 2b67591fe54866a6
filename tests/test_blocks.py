"""A scan parses each block text once among its latest (blocks.Blocks._parse), and peels each
line once among the latest few (Blocks._peel): a run failing in a loop prints one traceback
hundreds of times, and failures one after another. What is read must not depend on either."""

from __future__ import annotations

import random

import pytest

from conftest import INCIDENTS, REAL
from oomlens import blocks
from oomlens.grammars import Family
from oomlens.pipeline import analyze

TRACEBACK = """Traceback (most recent call last):
  File "/opt/verl/verl/workers/fsdp_workers.py", line 512, in generate_sequences
    output = self.rollout.generate_sequences(prompts=prompts)
  File "/usr/local/lib/python3.10/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
    return func(*args, **kwargs)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.05 GiB is free. \
Process 4012 has 78.09 GiB memory in use. Of the allocated memory 75.40 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated."""


def test_a_block_printed_again_is_parsed_once_and_each_reading_is_its_own(tmp_path, monkeypatch):
    """The same traceback forty times, each after a stamped line of its own: parsed once, and
    read as a scan that parses each one reads it, each event with fields of its own."""
    parsed: list[str] = []
    parse = Family.parse

    def counted(self: Family, text: str) -> tuple[list[dict], bool]:
        parsed.append(text)
        return parse(self, text)

    log = tmp_path / "worker.err"
    log.write_text("".join(f"2026-01-01 0{n // 6}:{n % 6}0:00,000 INFO step {n}\n{TRACEBACK}\n" for n in range(40)), encoding="utf-8")
    monkeypatch.setattr(Family, "parse", counted)
    found = analyze(str(log), jobs=1, budget=None)
    assert len(parsed) == len(set(parsed))  # each text parsed once
    monkeypatch.setattr(blocks, "PARSED_MAX", 0)
    assert found.to_dict() == analyze(str(log), jobs=1, budget=None).to_dict() and len(parsed) > len(set(parsed))
    events = [e for e in found.events if e.kind == "cuda_oom"]
    assert len(events) > 1 and len({id(e.fields) for e in events}) == len(events)
    first = dict(events[1].fields)
    events[0].fields["requested_bytes"] = -1  # one reading changed by its reader ...
    assert events[1].fields == first  # ... changes no other


@pytest.mark.parametrize("seed", range(3))
def test_real_logs_repeated_read_as_without_the_kept_parses(tmp_path, monkeypatch, seed):
    """Real excerpts and consoles one after another, some again and again: what is read is what
    a scan that keeps no parse reads (PARSED_MAX 0), and with a memory of two parses only."""
    rng = random.Random(seed)
    parts = [p.read_bytes() for p in rng.sample(sorted(REAL.glob("*.log")), 12)]
    parts += [p.read_bytes() for p in rng.sample(sorted(INCIDENTS.rglob("driver-console.log")), 2)]
    log = tmp_path / "driver-console.log"
    log.write_bytes(b"".join(rng.choice(parts).rstrip(b"\n") + b"\n" for _ in range(40)))
    kept = analyze(str(log), jobs=1).to_dict()
    for most in (0, 2):
        monkeypatch.setattr(blocks, "PARSED_MAX", most)
        monkeypatch.setattr(blocks, "PEELED_MAX", most)
        assert analyze(str(log), jobs=1).to_dict() == kept


def test_failures_one_after_another_are_each_peeled_once(tmp_path, monkeypatch):
    """A CUDA OOM on every line, each stamped: a line is the next line of the block before
    it and the head of its own, for each family its trigger starts (cuda_oom, process_error):
    peeled once, and read as a scan that peels it each time reads it."""
    peeled: list[str] = []
    peel = blocks.peel

    def counted(text: str) -> object:
        peeled.append(text)
        return peel(text)

    log = tmp_path / "trainer.log"
    log.write_text("".join(f"2026-01-01 00:{n:02d}:00,000 - trainer - ERROR - {TRACEBACK.splitlines()[-1]}\n" for n in range(50)), encoding="utf-8")
    monkeypatch.setattr(blocks, "peel", counted)
    found = analyze(str(log), jobs=1, budget=None)
    assert len(set(peeled)) == 50 and len(peeled) <= 50 + 1  # and once for the lines' shape: whether it is plain (plain_start)
    monkeypatch.setattr(blocks, "PEELED_MAX", 0)
    assert analyze(str(log), jobs=1, budget=None).to_dict() == found.to_dict() and len(peeled) > 100
