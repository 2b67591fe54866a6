"""bench/flood.py's log of a run failing in a loop is read as the failures it plants: the
bench measures the memory of that many, not of text oomlens passes over."""

from __future__ import annotations

import importlib.util
import random
import sys
from collections import Counter
from pathlib import Path

from oomlens import analyze

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _flood_module():
    spec = importlib.util.spec_from_file_location("flood", BENCH / "flood.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))  # flood.py imports run.py beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def test_the_flood_bench_plants_what_oomlens_reads(tmp_path):
    flood = _flood_module()
    log = tmp_path / "worker.err"
    planted = flood.flood(random.Random(5), 600, log)
    found = Counter(e.kind for e in analyze(str(log), jobs=1, all_events=True).events)
    assert set(planted) == {"cuda_oom", "watchdog_timeout", "ray_worker_died", "ray_oom_summary"} and sum(planted.values()) == 600
    assert found == planted  # each OOM one event: its sizes drawn again, no two fold into one occurrence
