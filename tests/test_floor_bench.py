"""bench/floor.py reads each line that holds a trigger once, however a file is cut into
pieces: the floor it times is the work of reading those lines, no more and no less."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from oomlens.grammars import families

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _floor_module():
    spec = importlib.util.spec_from_file_location("floor", BENCH / "floor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _memory_lines() -> list[str]:
    """The one-line samples of the GPU-memory grammar: real lines of veRL, EasyR1 and vLLM."""
    (fam,) = [f for f in families() if f.name == "gpu_memory"]
    return [s.text for s in fam.samples if "\n" not in s.text]


def test_the_floor_reads_each_line_with_a_trigger_once_whatever_the_pieces(tmp_path, monkeypatch):
    floor = _floor_module()
    rng = random.Random(11)
    samples = _memory_lines()
    lines, planted = [], 0
    for _ in range(3000):
        if rng.random() < 0.3:
            lines.append(rng.choice(samples))
            planted += 1
        else:
            lines.append("INFO worker.py:1 step done " + "x" * rng.randrange(0, 300))
    log = tmp_path / "driver.log"
    log.write_text("\n".join(lines) + ("\n" if rng.random() < 0.5 else ""))
    whole = floor._read((str(log), 0, -1))
    assert whole[0] == planted
    for piece in (997, 4096, 65536):
        monkeypatch.setattr(floor, "PIECE", piece)
        pieces = floor._pieces(log)
        assert len(pieces) > 1
        found = [floor._read(p) for p in pieces]
        assert (sum(n for n, _ in found), sum(k for _, k in found)) == whole
