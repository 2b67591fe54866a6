"""Host memory that ran out inside a process, nothing killed (kind host_alloc_failure).

Property tests put each allocator's wording, with random sizes, under the envelopes real
logs put around it (tests/test_envelopes.py); the look-alikes give no event; a run that
died of one gets a verdict with its component, never an all-clear."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

import oomlens
from oomlens.events import to_bytes
from test_envelopes import OUTER

PREFIXES = ["", "(RewardModelWorker pid=20577, ip=10.0.0.5) ", "[rank2]: ", "\x1b[36m(WorkerDict pid=911)\x1b[0m "]


def _one(text: str) -> oomlens.Event:
    (event,) = [e for e in oomlens.parse_text(text) if e.kind == "host_alloc_failure"]
    assert event.memory == "host" and event.device is None
    return event


@settings(max_examples=60, deadline=None)
@given(nbytes=st.integers(1, 2**45), line=st.sampled_from([117, 118, 64]), errno=st.booleans(), outer=st.sampled_from(OUTER), prefix=st.sampled_from(PREFIXES))
def test_torch_s_cpu_allocator_reads_the_bytes_it_asked_for(nbytes, line, errno, outer, prefix):
    head = "err == 0. DefaultCPUAllocator: can't allocate memory" if errno else "data. DefaultCPUAllocator: not enough memory"
    tail = " Error code 12 (Cannot allocate memory)" if errno else ""
    event = _one(f"{outer}{prefix}RuntimeError: [enforce fail at alloc_cpu.cpp:{line}] {head}: you tried to allocate {nbytes} bytes.{tail}")
    assert (event.fields["allocator"], event.fields["requested_bytes"], event.fields["where"]) == ("torch_cpu", nbytes, f"alloc_cpu.cpp:{line}")
    assert event.fields["errno"] == (12 if errno else None)


@settings(max_examples=60, deadline=None)
@given(
    number=st.floats(1, 999, allow_nan=False).map(lambda x: f"{x:.3g}"),
    unit=st.sampled_from(["bytes", "KiB", "MiB", "GiB", "TiB"]),
    shape=st.lists(st.integers(1, 10**6), min_size=1, max_size=4),
    dtype=st.sampled_from(["float64", "float32", "int64", "<U12"]),
    outer=st.sampled_from(OUTER),
)
def test_numpy_reads_its_size_shape_and_type(number, unit, shape, dtype, outer):
    printed = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
    event = _one(f"{outer}numpy.core._exceptions._ArrayMemoryError: Unable to allocate {number} {unit} for an array with shape {printed} and data type {dtype}")
    assert event.fields["requested_bytes"] == to_bytes(number, unit)
    assert (event.fields["shape"], event.fields["dtype"], event.fields["allocator"]) == (printed, dtype, "numpy")


@settings(max_examples=40, deadline=None)
@given(pid=st.integers(2, 4_000_000), outer=st.sampled_from(OUTER), actor=st.sampled_from(["RewardModel", "WorkerDict", "RolloutWorker"]))
def test_a_worker_s_memory_error_and_the_driver_s_wrapper_of_it_are_one_failure(pid, outer, actor):
    text = "\n".join(
        [
            f"({actor} pid={pid}) Traceback (most recent call last):",
            f'({actor} pid={pid})   File "/app/reward.py", line 12, in compute_score',
            f"({actor} pid={pid})     scores = np.zeros((n, n))",
            f"({actor} pid={pid}) MemoryError",
            f"{outer}ray.exceptions.RayTaskError(MemoryError): ray::{actor}.compute_score() (pid={pid}, ip=10.0.0.5, actor_id=e1c6b8ffd2a14c3b9a1b2c3d01000000)",
        ]
    )
    events = [e for e in oomlens.parse_text(text) if e.kind == "host_alloc_failure"]
    assert len(events) == 1 and events[0].pid == pid and events[0].actor == actor


LOOK_ALIKES = [
    "    except MemoryError:",
    "    raise MemoryError",
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::A.f() (pid=1, ip=10.0.0.1)",
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    "BlockingIOError: [Errno 11] Resource temporarily unavailable",
    "if 'DefaultCPUAllocator' in str(e): retry()",
    "WARNING caught MemoryError: retrying with a smaller batch",
]


@given(outer=st.sampled_from(OUTER), text=st.sampled_from(LOOK_ALIKES))
def test_look_alikes_make_no_host_allocation_failure(outer, text):
    assert not [e for e in oomlens.parse_text(outer + text) if e.kind == "host_alloc_failure"]


RUN = Path(__file__).resolve().parent.parent / "fixtures" / "incidents" / "verl-reward-host-alloc-failure" / "driver-console.log"


def test_a_run_that_died_of_one_gets_a_verdict_not_an_all_clear():
    diagnosis = oomlens.analyze(str(RUN))
    verdict = diagnosis.verdict
    assert (verdict["root_kind"], verdict["memory"], verdict["component"]) == ("host_alloc_failure", "host", "reward_model")
    assert verdict["device"] is None
    assert "3.94 GiB" in verdict["summary"] and "no process was killed" in verdict["summary"]
