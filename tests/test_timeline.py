"""Memory readings, trends and the one clock, on events made by hand: the paths real logs
seldom take (a trend cut at an incident's time, a line in two files, untimed lines)."""

from __future__ import annotations

from oomlens.clock import settle
from oomlens.correlate import one_clock
from oomlens.events import GIB, Event, Source
from oomlens.kinds import shipped
from oomlens.shapes import zeroed as _shape
from oomlens.timeline import Trends, samples


def memory_line(path: str, line: int, time: str | None, allocated_gib: float, *, pid: int = 7, label: str = "step") -> Event:
    fields = {"label": label, "allocated_bytes": round(allocated_gib * GIB), "total_bytes": 1000 * GIB}
    return Event("gpu_memory", Source(path, line, line), f"allocated {allocated_gib}", time=time, pid=pid, fields=fields, id=f"{path}:{line}")


def test_a_trend_sees_only_the_readings_up_to_the_incident():
    events = [
        memory_line("w.out", 1, "2026-01-01T00:00:01", 10),
        memory_line("w.out", 2, "2026-01-01T00:00:02", 20),
        memory_line("w.out", 3, "2026-01-01T00:00:03", 30),
        memory_line("w.out", 4, "2026-01-01T00:00:04", 5),
    ]
    trends = Trends(events, shipped())
    assert trends.before("gpu", "2026-01-01T00:00:03") == (
        "growth",
        "step rose at every reading: 10.00 GiB -> 20.00 GiB -> 30.00 GiB",
    )
    assert trends.before("gpu", None) == (None, None)  # the fall at 00:00:04 ends the rise
    assert trends.before("host", None) == (None, None)


def test_a_jump_is_a_step_of_a_quarter_of_the_device():
    events = [
        memory_line("w.out", 1, "2026-01-01T00:00:01", 100, label="Before generate"),
        memory_line("w.out", 2, "2026-01-01T00:00:02", 400, label="After generate"),
    ]
    assert Trends(events, shipped()).before("gpu", None) == ("jump", "generate: 100.00 GiB -> 400.00 GiB of 1000.00 GiB in one step")


def test_a_line_in_two_files_is_read_from_the_file_with_more_copies():
    events = [
        memory_line("driver.log", 1, None, 10),
        memory_line("driver.log", 2, None, 10),
        memory_line("w.out", 1, None, 10),
        memory_line("w.out", 2, None, 11),  # only in w.out: kept
    ]
    assert [(s.event, s.bytes) for s in samples(events, shipped())] == [
        ("driver.log:1", 10 * GIB),
        ("driver.log:2", 10 * GIB),
        ("w.out:2", 11 * GIB),
    ]


def test_an_untimed_line_stays_after_the_last_timed_line_of_its_file():
    events = [
        memory_line("a.log", 1, "2026-01-01T00:00:05", 1),
        memory_line("a.log", 2, None, 2),
        memory_line("b.log", 1, "2026-01-01T00:00:03", 3),
        memory_line("b.log", 2, "2026-01-01T00:00:09", 4),
    ]
    events[1].fields["local_time"] = None
    assert [e.id for e in one_clock(events)] == ["b.log:1", "a.log:1", "a.log:2", "b.log:2"]


def test_a_year_less_time_borrows_the_run_s_year():
    events = [memory_line("a.log", 1, "2025-03-01T00:00:05", 1), memory_line("a.log", 2, None, 2)]
    events[1].fields["local_time"] = "03-01T00:00:07"
    settle(events, [], [])
    assert (events[1].time, events[1].fields["year_inferred"]) == ("2025-03-01T00:00:07", True)


def test_a_line_shape_has_every_digit_zeroed_in_any_script():
    assert _shape("step:8853 - perf/cpu_memory_used_gb:235.21") == "step:0000 - perf/cpu_memory_used_gb:000.00"
    assert _shape("step \u0663\u0664 \uff17 é") == "step 00 0 é"  # Arabic-Indic and fullwidth digits too
