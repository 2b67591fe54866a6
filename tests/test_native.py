"""The core reads memory lines whole (core/src/reader.rs, plans.rs): a line whose shape it
learned from what Python made of lines of it joins the reduction's pool without Python
reading it. What it reads must be what Python would have made, line for line: these tests
read the same input with the core reading lines whole, with Python reading every line, and
in the shadow mode where Python reads every line and the core checks its plans against it.

The inputs: every fixture, a generated session tree as dense as a veRL console, and lines
generated from the grammars' own samples with their values, widths, forms and envelopes
drawn at random (what real logs vary)."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

import oomlens
from conftest import ROOT, fixture_inputs, sample
from oomlens import scan
from oomlens.grammars import families

sys.path.insert(0, str(ROOT / "bench"))
import generate  # noqa: E402

MISMATCH = "read otherwise than their grammar"


def _analyze(paths: list[str], native: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """The JSON of a diagnosis with the core's reading of whole lines set to `native`, and
    every input's problems."""
    monkeypatch.setattr(scan, "NATIVE", native)
    monkeypatch.setattr(scan, "_LINES", {})  # plans learned afresh: the shadow mode is the Lines' own
    diagnosis = oomlens.analyze(*paths, jobs=1)
    return json.dumps(diagnosis.to_dict(), sort_keys=True, default=str), [p for i in diagnosis.inputs for p in i.problems]


FIXTURES = sample(fixture_inputs(), ids=[p.name if p.is_file() else p.parent.name + "/" + p.name for p in fixture_inputs()])


@pytest.mark.parametrize("path", FIXTURES)
def test_every_fixture_reads_the_same_with_the_core_reading_lines(path, monkeypatch):
    """Read with plans learned afresh, and again with the plans the first read taught (as a
    worker reads its next file: the core then takes the lines from the first)."""
    whole, problems = _analyze([str(path)], "1", monkeypatch)
    assert not [p for p in problems if MISMATCH in p]
    taught = json.dumps(oomlens.analyze(str(path), jobs=1).to_dict(), sort_keys=True, default=str)
    by_python, _ = _analyze([str(path)], "0", monkeypatch)
    assert whole == by_python
    assert taught == by_python


WORKER_ERROR = (
    "(VllmWorkerProcess pid=2144909) ERROR 01-12 08:36:38 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while "
    "processing method initialize_cache: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
    "in KV cache (86432). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine., Traceback "
    "(most recent call last):\n"
    '(VllmWorkerProcess pid=2144909) ERROR 01-12 08:36:38 multiproc_worker_utils.py:233]   File "/usr/lib/python3.9/site-packages/vllm/'
    'executor/multiproc_worker_utils.py", line 226, in _run_worker_process\n'
    "(VllmWorkerProcess pid=2144909) ERROR 01-12 08:36:38 multiproc_worker_utils.py:233]     output = executor(*args, **kwargs)\n"
)


@pytest.mark.parametrize("native", ["0", "1"])
@pytest.mark.parametrize("before", [0, 1, 3])
def test_a_one_line_hit_where_a_traceback_begins_is_read_once(native, before, tmp_path, monkeypatch):
    """vLLM's worker error is one line of its family and the first of a traceback's block:
    the chunk stops at the longer block and the next begins at its line, so what was read of
    that line before is read with the next chunk, once (real excerpt 241). Whatever lines come
    before: none, plain ones, or memory lines the core may take whole."""
    memory = "(VllmWorkerProcess pid=2144911) INFO 01-12 08:36:24 model_runner.py:1025] Loading model weights took 3.7710 GB\n"
    log = tmp_path / "vllm.log"
    log.write_text(("INFO 01-12 08:36:20 llm_engine.py:1] starting\n" + memory) * before + WORKER_ERROR)
    monkeypatch.setattr(scan, "NATIVE", native)
    for _ in range(2):  # the second read with the plans the first taught
        diagnosis = oomlens.analyze(str(log), jobs=1)
        [item] = diagnosis.inputs
        assert item.failures == 2, item.failures  # the KV-cache error and the worker's process error, each read once


@pytest.fixture(scope="module")
def dense_tree(tmp_path_factory) -> Path:
    """A small session tree as dense in memory lines as a veRL console, in several
    frameworks' formats, with every envelope the generator varies (bench/generate.py)."""
    tree = tmp_path_factory.mktemp("dense") / "tree"
    generate.generate(tree, size_mb=6, seed=5)
    return tree


@pytest.mark.slow
def test_a_dense_tree_reads_the_same_and_the_core_reads_most_lines(dense_tree, monkeypatch):
    whole, problems = _analyze([str(dense_tree)], "1", monkeypatch)
    assert not [p for p in problems if MISMATCH in p]
    _, _, taken = next(iter(scan._LINES.values())).plans()
    read = sum(i["readings"]["read"] for i in json.loads(whole)["inputs"] if i.get("readings"))
    assert taken >= 0.8 * read, (taken, read)  # the bench's memory lines are read by plans, but those of the shapes the core is learning
    by_python, _ = _analyze([str(dense_tree)], "0", monkeypatch)
    assert whole == by_python
    events = json.loads(whole)["events"]
    assert sum(e["kind"] == "gpu_memory" for e in events) > 500


@pytest.mark.slow
def test_the_shadow_mode_finds_no_line_the_core_reads_otherwise(dense_tree, monkeypatch):
    """Python reads every line, and every line a trusted plan would have read is compared."""
    paths = [str(dense_tree), *(str(p) for p in fixture_inputs())]
    _, problems = _analyze(paths, "shadow", monkeypatch)
    assert not [p for p in problems if MISMATCH in p]


# -- lines drawn from the grammars' samples ---------------------------------------------------

NUMBER = re.compile(r"(?<![A-Za-z_\d.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
PREFIXES = ["", "(WorkerDict pid={pid}) ", "(WorkerDict pid={pid}, ip=10.0.{a}.{b}) ", "\x1b[36m(TaskRunner pid={pid})\x1b[0m ", "(pid={pid}) "]
STAMPS = ["", "[2026-11-21 10:{mm:02d}:{ss:02d},{ms:03d}] ", "INFO 11-21 10:{mm:02d}:{ss:02d} worker.py:133] "]
SUFFIXES = ["", " [repeated {n}x across cluster]"]


def _memory_samples() -> list[str]:
    """Every one-line sample of the families whose lines are memory readings."""
    lines = []
    for fam in families():
        for s in fam.samples:
            if s.kind == "gpu_memory" and "\n" not in s.text.strip():
                lines.append(s.text.strip())
    return lines


def _value(rng: random.Random, like: str) -> str:
    """A number of the same form (sign, fraction, exponent) as `like`, its width drawn."""
    negative = like.startswith("-")
    body = like.lstrip("-")
    mantissa, _, exponent = body.replace("E", "e").partition("e")
    whole, dot, fraction = mantissa.partition(".")
    digits = str(rng.randrange(10 ** rng.randint(1, 4)))
    out = digits + (dot + str(rng.randrange(10 ** rng.randint(1, 6))).zfill(rng.randint(1, 6)) if dot else "")
    if exponent:
        out += "e" + ("-" if exponent.startswith("-") else "") + str(rng.randint(1, 12)).zfill(len(exponent.lstrip("+-")))
    return ("-" if negative else "") + out


def _line(rng: random.Random, text: str, envelope: tuple[int, int, int], minute: int) -> str:
    """`text` with its numbers drawn again, behind one of the envelopes a console prints."""
    prefix, stamp, suffix = envelope
    body = NUMBER.sub(lambda m: _value(rng, m.group(0)), re.sub(r"^\([^)]*\) ", "", text))
    pid = rng.randrange(1000, 99999)
    head = PREFIXES[prefix].format(pid=pid, a=rng.randrange(256), b=rng.randrange(256))
    head += STAMPS[stamp].format(mm=minute % 60, ss=rng.randrange(60), ms=rng.randrange(1000))
    return head + body + SUFFIXES[suffix].format(n=rng.randrange(2, 400))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_lines_drawn_from_every_memory_sample_read_the_same(seed, tmp_path, monkeypatch):
    """Each sample, behind each of a few envelopes, a dozen times with its values drawn at
    random (so plans are learned, trusted and then read most of them), among lines of
    other shapes, the times going on: what is kept is what Python alone keeps."""
    rng = random.Random(seed)
    samples = _memory_samples()
    assert len(samples) > 20
    lines = []
    for minute in range(12):
        for text in samples:
            envelope = (rng.randrange(len(PREFIXES)), rng.randrange(len(STAMPS)), rng.randrange(len(SUFFIXES)))
            for _ in range(rng.randint(1, 3)):
                lines.append(_line(rng, text, envelope, minute))
        lines.append(f"INFO 11-21 10:{minute:02d}:00 [metrics.py:351] Avg prompt throughput: {rng.random():.1f} tokens/s")
    rng.shuffle(lines)
    path = tmp_path / "console.log"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(scan, "CHUNK", 1 << 14)  # many chunks: plans learned in one are read in the next
    whole, problems = _analyze([str(path)], "1", monkeypatch)
    assert not [p for p in problems if MISMATCH in p]
    _, trusted, taken = next(iter(scan._LINES.values())).plans()
    by_python, _ = _analyze([str(path)], "0", monkeypatch)
    assert whole == by_python
    assert trusted > 10 and taken > len(lines) // 3
