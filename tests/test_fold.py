"""Folding reports of one occurrence (events.fold): a failure that repeats is many
occurrences, whatever their identity shares, and finding the report another one joins
costs no more for the ten-thousandth repeat than for the second."""

from __future__ import annotations

import bisect
import datetime

import pytest
from hypothesis import given, strategies as st

from oomlens import analyze, events as events_module

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
    "1.05 GiB is free. Process 12345 has 78.09 GiB memory in use. Of the allocated memory 75.00 GiB is allocated by PyTorch, "
    "and 1.20 GiB is reserved by PyTorch but unallocated."
)


def _repeats(count: int, minutes: int) -> str:
    start = datetime.datetime(2026, 1, 1)
    stamp = [(start + datetime.timedelta(minutes=minutes * n)).strftime("%Y-%m-%d %H:%M:%S,000") for n in range(count)]
    return "".join(f"{t} - trainer - ERROR - {OOM}\n" for t in stamp)


@pytest.mark.parametrize("count", [50, 400, 3000])
def test_the_same_failure_every_ten_minutes_is_that_many_events_found_in_linear_work(tmp_path, monkeypatch, count):
    compared = []
    original = events_module._nearness
    monkeypatch.setattr(events_module, "_nearness", lambda *args: compared.append(1) or original(*args))
    log = tmp_path / "trainer.log"
    log.write_text(_repeats(count, 10), encoding="utf-8")
    found = analyze(str(log), jobs=1, all_events=True)  # the folding of every one: by default, 3,000 are a flood the reduction takes
    assert len([e for e in found.events if e.kind == "cuda_oom"]) == count
    assert len(compared) <= 3 * count  # each report meets its neighbours in time, not every earlier one


def test_a_file_without_times_that_fails_again_and_again_keeps_each_failure(tmp_path):
    """A worker's stderr prints no time: the same OOM in five tracebacks far apart is five."""
    filler = "".join(f"step {n}: loss 0.{n:04d}\n" for n in range(FILLER))
    log = tmp_path / "worker-0123456789abcdef0123456789abcdef0123456789abcdef01234567-ffffffff-4242.err"
    log.write_text(
        "".join(f'{filler}Traceback (most recent call last):\n  File "train.py", line 9, in step\n    loss.backward()\n{OOM}\n' for _ in range(5)),
        encoding="utf-8",
    )
    assert len([e for e in analyze(str(log), jobs=1).events if e.kind == "cuda_oom"]) == 5


FILLER = events_module.FOLD_LINES + 10


def test_one_failure_on_every_line_of_a_stamp_less_log_is_one_event_of_every_line(tmp_path, monkeypatch):
    """Each report lies one line from the last: together one occurrence, its sources every
    line. The home that takes in each is compared by its places (bisected), not by every
    source it took in before: the square of 5,000 sources was half a minute."""
    measured = []
    original = events_module._Places.apart
    monkeypatch.setattr(events_module._Places, "apart", lambda self, event: measured.append(sum(map(len, self.lines.values()))) or original(self, event))
    log = tmp_path / "worker-0123456789abcdef0123456789abcdef0123456789abcdef01234567-ffffffff-4242.err"
    log.write_text(f"{OOM}\n" * 3000, encoding="utf-8")
    [oom] = [e for e in analyze(str(log), jobs=1, all_events=True).events if e.kind == "cuda_oom"]
    assert [s.line for s in oom.sources] == list(range(1, 3001))
    assert len(measured) == 2999 and measured[-1] == 2999  # each later report met the one home, which held every earlier line


@pytest.mark.parametrize("seed", range(20))
def test_the_places_of_a_home_tell_the_fewest_lines_apart_as_comparing_every_pair_does(seed):
    import random

    from oomlens.events import Event, Source

    rng = random.Random(seed)
    paths = ["a.log", "b.log", "c.log"]

    def sources(count: int) -> list[Source]:
        lines = [rng.randrange(1, 5000) for _ in range(count)]
        return [Source(rng.choice(paths), line, line + rng.randrange(3)) for line in lines]

    home = Event("cuda_oom", Source("a.log", 1, 1), "")
    home.sources = sources(rng.randrange(1, 60))
    places = events_module._Places(home)
    for _ in range(50):
        event = Event("cuda_oom", Source("a.log", 1, 1), "")
        event.sources = sources(rng.randrange(1, 4))
        pairs = [abs(x.line - y.line) for x in event.sources for y in home.sources if x.path == y.path]
        assert places.apart(event) == (min(pairs) if pairs else None)
        for source in event.sources:  # a home takes in reports as it goes
            if places.add(source):
                home.sources.append(source)


def test_one_failure_told_twice_close_together_in_one_file_is_one_event(tmp_path):
    """vLLM's allocator warns on stderr and raises with the same source line: one occurrence."""
    text = (
        "[2026-01-01 00:00:00] WARNING cumem_allocator.cpp:145 CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:145\n"
        "Traceback (most recent call last):\n"
        '  File "/x/vllm/device_allocator/cumem.py", line 80, in wake_up\n'
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:145\n"
    )
    log = tmp_path / "vllm.log"
    log.write_text(text, encoding="utf-8")
    ooms = [e for e in analyze(str(log), jobs=1).events if e.kind == "cuda_oom"]
    assert len(ooms) == 1 and len(ooms[0].sources) == 2


def test_finding_each_failure_s_incident_looks_only_near_it(tmp_path, monkeypatch):
    """3,000 repeats of one OOM form one incident whose cascade grows all day: each looks at
    the failures within its window, not at every failure of the incident before it."""
    from oomlens import correlate

    looked = [0]
    original = correlate._Anchors.nearest

    def counting(self, t, lo, hi):
        for anchor in original(self, t, lo, hi):
            looked[0] += 1
            yield anchor

    monkeypatch.setattr(correlate._Anchors, "nearest", counting)
    log = tmp_path / "trainer.log"
    log.write_text(_repeats(3000, 10), encoding="utf-8")
    found = analyze(str(log), jobs=1, all_events=True)
    assert len(found.events) == 3000
    assert looked[0] <= 3 * 3000


@pytest.mark.parametrize("seed", range(6))
def test_anchors_come_nearest_first_and_are_all_those_of_the_window(seed):
    """_home keeps the nearest anchor that qualifies and stops at the first one farther
    than it: that is the nearest of the window only if every anchor of the window comes,
    in order of distance (times repeat, and fall on both sides of the event's)."""
    import random

    from oomlens import correlate

    rng = random.Random(seed)
    anchors = correlate._Anchors()
    times = [float(rng.choice([rng.randrange(100), rng.uniform(0, 100)])) for _ in range(400)]
    for n, t in enumerate(times):
        at = bisect.bisect_right(anchors.times, t)
        anchors.times.insert(at, t)
        anchors.items.insert(at, (n, 0, None))
    for _ in range(300):
        t = rng.choice([rng.uniform(-10, 110), rng.choice(times)])
        lo, hi = t - rng.uniform(0, 40), t + rng.uniform(0, 5)
        got = list(anchors.nearest(t, lo, hi))
        distances = [abs(t - a[0]) for a in got]
        assert distances == sorted(distances)
        assert sorted(a[1] for a in got) == sorted(n for n, x in enumerate(times) if lo <= x <= hi)


def test_the_errors_a_loop_of_memory_failures_raised_are_left_out_in_linear_work(tmp_path, monkeypatch):
    """A run failing in a loop: each CUDA OOM with the error it raised on the next line (the
    OOM told once more: left out) and another error far from any OOM (kept). Each error is
    asked about once, not against every OOM of its file: the square of thousands of each was
    most of a hostile megabyte's time."""
    count = 600
    compared = []
    original = events_module._apart
    monkeypatch.setattr(events_module, "_apart", lambda *args: compared.append(1) or original(*args))
    filler = "".join(f"step: loss 0.{n:04d}\n" for n in range(8))
    log = tmp_path / "worker-0123456789abcdef0123456789abcdef0123456789abcdef01234567-ffffffff-4242.err"
    log.write_text("".join(f"{OOM}\nValueError: raised by OOM {n}\n{filler}ValueError: apart {n}\n{filler}" for n in range(count)), encoding="utf-8")
    found = analyze(str(log), jobs=1, all_events=True)
    errors = sorted(e.fields["message"] for e in found.events if e.kind == "process_error")
    assert errors == sorted(f"apart {n}" for n in range(count))
    assert len(compared) <= 4 * count


@given(
    spans=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1])), max_size=30),
    report=st.tuples(st.integers(0, 240), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1])),
    reach=st.integers(0, 12),
)
def test_a_report_is_within_reach_of_a_memory_failure_exactly_where_one_lies_that_near(spans, report, reach):
    """_Reports.within against its definition: some span _apart from the report by `reach` lines or fewer."""

    def source(span: tuple[int, int]) -> events_module.Source:
        return events_module.Source("f", span[0] + 1, span[1] + 1)

    brute = any(events_module._apart(source(s), source(report)) <= reach for s in spans)
    assert events_module._Reports(list(spans)).within(report, reach) == brute


FREE = "ValueError: Free memory on device cuda:0 ({free:.2f}/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."


@given(
    st.integers(min_value=-12 * 4, max_value=14 * 4),  # the host's zone, in quarter hours
    st.lists(st.tuples(st.integers(min_value=0, max_value=12 * 24 * 20), st.booleans(), st.booleans()), min_size=1, max_size=6, unique_by=lambda f: f[0]),
)  # failures five minutes apart at the least: two of one identity nearer are one occurrence
def test_a_repeat_without_a_time_joins_the_failure_above_it_in_the_zone_its_file_tells(quarters, failures):
    """A log of vLLM failures, each line stamped by a collector in UTC before the engine's
    local time (which tells the host's zone), each failure now and then
    printed again below it with no time of its own (the exception raised once more): the
    repeat borrows the collector's UTC stamp of the line above, and is read in the host's
    local time, beside which that failure stands: it is that failure, not a second one, nor
    one the paste shows elsewhere (its borrowed interval is open to the paste's end)."""
    import io

    from oomlens.pipeline import read_input
    from oomlens.sources import Input

    zone = datetime.timedelta(minutes=15 * quarters)
    start = datetime.datetime(2026, 1, 20)
    lines, wanted = [], []
    for n, (fifth, coloured, repeated) in enumerate(sorted(failures)):  # in the order of time: a paste whose times run backwards may be newest first
        local = start + datetime.timedelta(minutes=5 * fifth)
        utc = local - zone
        pid = 700 + n
        prefix = f"\x1b[36m(EngineCore_DP0 pid={pid})\x1b[0m" if coloured else f"(EngineCore_DP0 pid={pid})"
        message = FREE.format(free=1 + n / 100)
        lines.append(f"> [{utc:%Y-%m-%dT%H:%M:%S}Z] {prefix} ERROR {local:%m-%d %H:%M:%S} [core.py:935] {message}")
        sources = [len(lines)]
        if repeated:
            lines += ["", f"> {message}"]
            sources.append(len(lines))
        lines.append("")
        wanted.append(sources)
    text = "\n".join(lines) + "\n"
    found = read_input(Input("paste.log", opener=lambda: io.BytesIO(text.encode())))
    from oomlens.clock import local_offsets

    clues = [c for c in found if isinstance(c, events_module.Clue)]
    failures = [e for e in found if isinstance(e, events_module.Event) and e.kind == "vllm_memory_error"]
    folded = events_module.fold(failures, zones=local_offsets(failures, clues, []))
    assert sorted(sorted(s.line for s in e.sources) for e in folded) == sorted(wanted)


def test_folding_reads_a_zoned_time_where_the_clock_shows_it():
    """A file whose lines told its host's zone more than once, one of them wrong (a line
    printed across a zone change, or mangled): the clock moves its UTC times by the offset
    most of its lines tell, and folding compares them at that same local time, so a report
    the clock shows beside another is folded with it."""
    from oomlens.clock import local_offsets
    from oomlens.events import Clue, Event, Source

    def clock(path: str, local: str, utc: str) -> Clue:
        return Clue("clock", Source(path, 1, 1), {"utc": utc}, local)

    clues = [clock("a.log", "2026-01-01T00:00:00", "2026-01-01T08:00:00")] * 2 + [clock("a.log", "2026-01-01T01:00:00", "2026-01-01T08:00:00")]
    said = {"error": "startup_free_memory"}
    local = Event(kind="vllm_memory_error", source=Source("a.log", 5, 5), text="", time="2026-01-02T03:00:00", fields=dict(said))
    lent = Event(kind="vllm_memory_error", source=Source("a.log", 7, 7), text="", time="2026-01-02T11:00:10+00:00", time_inferred=True, fields=dict(said))
    assert local_offsets([local, lent], clues, []) == {"a.log": -8 * 3600}
    (one,) = events_module.fold([local, lent], zones=local_offsets([local, lent], clues, []))
    assert [s.line for s in one.sources] == [5, 7]
