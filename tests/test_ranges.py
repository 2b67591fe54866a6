"""A big file read as byte ranges by several processes gives what one process reading it
whole gives: the same events (line numbers, times, intervals), bytes, lines and problems."""

from __future__ import annotations

import random

import pytest

from conftest import INCIDENTS, REAL, SESSIONS
from oomlens import ranges
from oomlens.pipeline import analyze
from oomlens.sources import discover


@pytest.fixture(scope="module")
def big_log():
    """Two MB of real logs one after the other, in a random order: Ray reports, tracebacks,
    memory lines, stamped and unstamped stretches, some invalid UTF-8."""
    rng = random.Random(7)
    parts = [p.read_bytes() for p in sorted(REAL.glob("*.log"))]
    parts += [p.read_bytes() for p in sorted(INCIDENTS.rglob("driver-console.log"))]
    parts += [(SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log").read_bytes()]
    out = bytearray()
    while len(out) < 2 << 20:  # three ranges of RANGE_MIN (half a MB, below) and more
        out += rng.choice(parts).rstrip(b"\n") + b"\n"
        if rng.random() < 0.05:
            out += b"a line with bytes that are not UTF-8: \xff\xfe\n"
        if rng.random() < 0.05:  # a worker's file announces each task it runs
            out += b":actor_name:" + rng.choice([b"WorkerDict", b"TaskRunner", b"RewardModelRayActor"]) + b"\n"
    return bytes(out)


NAMES = ["driver-console.log", "worker-0b3f4c1a5e8d7f2a9c6b1e4d3a2f5c8b7e6d9a1c4f3b2e5d8c7a6b9f-01000000-4242.out"]


@pytest.fixture(scope="module")
def big_files(big_log, tmp_path_factory):
    """big_log under each name the test reads it as, in one folder: a diagnosis names its files."""
    folder = tmp_path_factory.mktemp("ranges")
    for name in NAMES:
        (folder / name).write_bytes(big_log)
    return folder


WHOLE: dict = {}  # (name, budget, held) -> the diagnosis of big_log read whole


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("jobs,budget,held", [(2, None, 4096), (3, None, 4096), (2, 64, 4096), (3, 1000, 4096), (3, 64, 16)])
@pytest.mark.slow
def test_ranges_read_what_the_whole_file_reads(big_files, name, jobs, budget, held, monkeypatch):
    """At a budget of 64 the real logs' failures are reduced and their tracebacks kept only
    near kept events; `held` 16 looks the held tracebacks over every few, while each range
    is still read (the workers are forked with it), sparing those near a range's ends."""
    from oomlens import reduce

    monkeypatch.setattr(reduce, "CONTEXT_HELD", held)
    path = big_files / name
    if (name, budget, held) not in WHOLE:  # the whole file read by one process: the same for 2 and 3 jobs
        WHOLE[name, budget, held] = analyze(str(path), jobs=1, budget=budget)
    whole = WHOLE[name, budget, held]
    monkeypatch.setattr(ranges, "RANGE_MIN", 1 << 19)  # ranges of half a MB and more: each holds many reports, and its ends cut some
    [item] = discover([str(path)])
    spans = ranges.ranges_of(item, jobs)
    assert spans is not None and len(spans[0]) == jobs  # read as `jobs` ranges
    ranged = analyze(str(path), jobs=jobs, budget=budget)
    assert [e.to_dict() for e in ranged.events] == [e.to_dict() for e in whole.events]
    assert [(i.bytes, i.lines, i.problems) for i in ranged.inputs] == [(i.bytes, i.lines, i.problems) for i in whole.inputs]
    assert ranged.to_dict() == whole.to_dict()


@pytest.mark.parametrize("budget", [None, 4096, 300])
@pytest.mark.slow
def test_a_range_far_from_any_time_or_name_takes_them_from_before_it(tmp_path, monkeypatch, budget):
    """Megabytes of memory lines printing no time, after one stamped line and one announced
    actor: every range after the first lies far from both, and must still lend its events
    that time (and the first time after them) and that actor. Reduced to a budget, the
    ranges keep the readings the whole file keeps (placed by line: no time of their own)."""
    rng = random.Random(3)
    lines = [b":actor_name:WorkerDict", b"[2026-11-22 03:37:10,001 I 1 1] start"]
    for _ in range(20000):  # 3 MB: two ranges of RANGE_MIN (a MB, below)
        alloc = b"%.*f" % (rng.randrange(0, 9), rng.uniform(1, 80))
        lines.append(
            b"Before state_dict() in sharding manager memory, memory allocated (GB): %s, memory reserved (GB): %s" % (alloc, repr(rng.uniform(1, 80)).encode())
        )
    lines.append(b"[2026-11-22 04:10:00,500 I 1 1] end")
    path = tmp_path / "worker-0b3f4c1a5e8d7f2a9c6b1e4d3a2f5c8b7e6d9a1c4f3b2e5d8c7a6b9f-01000000-4242.out"
    path.write_bytes(b"\n".join(lines) + b"\n")
    whole = analyze(str(path), jobs=1, budget=budget)
    monkeypatch.setattr(ranges, "RANGE_MIN", 1 << 20)
    [item] = discover([str(path)])
    assert ranges.ranges_of(item, 2) is not None
    ranged = analyze(str(path), jobs=2, budget=budget)
    [read] = ranged.inputs
    assert (read.readings, read.readings_kept) == (20000, len(ranged.events))
    if budget is None:
        assert len(ranged.events) == 20000
    else:  # the first and last of each bucket, and each size's lowest and highest: at most 6 a bucket
        assert budget <= len(ranged.events) <= 6 * budget
    last = ranged.events[-1]
    assert (last.time, last.time_latest, last.actor) == ("2026-11-22T03:37:10.001", "2026-11-22T04:10:00.500", "WorkerDict")
    assert ranged.to_dict() == whole.to_dict()


@pytest.mark.parametrize("long", [3 << 20, 9 << 20])
def test_context_before_crosses_a_line_longer_than_its_window(tmp_path, long):
    """The time a range starts under is found behind a line longer than the widest window
    read back: the search moves back window by window, reads the long line from its head
    and ends (it once stood still at a window ending on the range's own line break)."""
    from oomlens.scan import CONTEXT_STEP, FileContext, context_before

    head = b"[2025-04-02 15:02:00,117 E 1 1] (raylet) node_manager.cc:3069: a stamped line\n"
    stamped_long = b"[2025-04-02 15:03:00,000 I 1 1] " + b"x" * long + b"\n"
    path = tmp_path / "raylet.out"
    path.write_bytes(head + b"y" * long + b"\n" + stamped_long)
    assert CONTEXT_STEP < 2 * long
    with open(path, "rb") as fh:
        lo = len(head) + long + 1  # behind the unstamped long line: the time is the first line's
        assert context_before(fh, lo, FileContext(str(path)))[0].iso().startswith("2025-04-02T15:02:00")
        lo = path.stat().st_size  # behind the stamped long line: its own time, from its head
        assert context_before(fh, lo, FileContext(str(path)))[0].iso().startswith("2025-04-02T15:03:00")
