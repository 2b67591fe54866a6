"""NCCL watchdog, heartbeat monitor and gRPC keepalive lines: one event per (rank, seq), with its numbers."""

from __future__ import annotations

import pytest

from conftest import INCIDENTS, REAL
from oomlens import analyze, parse_text


def watchdogs(events):
    return [e for e in events if e.kind == "watchdog_timeout"]


def real(name: str):
    (path,) = REAL.glob(f"{name}_*.log")
    return watchdogs(analyze(str(path)).events)


def by_rank_seq(events):
    return {(e.rank, e.fields["seq"]): e for e in events}


def test_oldest_format_one_event_per_rank():
    events = real("019")
    assert len(events) == 5
    elapsed = {e.rank: e.fields["elapsed_ms"] for e in events}
    assert elapsed == {1: 1802212, 3: 1802211, 2: 1802212, 6: 1802210, 7: 1802220}
    for e in events:
        assert e.fields["watchdog"] == "nccl"
        assert (e.fields["seq"], e.fields["op"], e.fields["timeout_ms"]) == (469508, "ALLREDUCE", 1800000)
        assert "numel_in" not in e.fields


def test_line_glued_to_a_progress_bar_and_duplicates():
    events = real("020")
    found = {key: e.fields["elapsed_ms"] for key, e in by_rank_seq(events).items()}
    assert len(events) == 4
    assert found == {(0, 96120): 25624887, (0, 96117): 25625613, (0, 96125): 25625593, (7, 64088): 25625251}
    assert len(by_rank_seq(events)[(0, 96125)].sources) == 2  # the duplicated line


def test_torch_2_4_lines_fold_per_rank():
    events = by_rank_seq(real("015"))
    assert set(events) == {(0, 1580), (4, 1580), (3, 1580), (2, 1580)}
    rank0 = events[(0, 1580)]
    assert len(rank0.sources) == 2  # "Watchdog caught" + "Exception ... detected by watchdog"
    assert (rank0.fields["elapsed_ms"], rank0.fields["numel_in"]) == (600060, 466119168)
    assert (rank0.fields["last_enqueued"], rank0.fields["last_completed"], rank0.fields["pg"]) == (1582, 1579, "1")
    assert events[(3, 1580)].fields["op"] is None  # only the "Exception ..." line, which names no op
    cut = events[(2, 1580)]
    assert cut.fields["truncated"] is True and cut.fields["elapsed_ms"] is None
    assert cut.fields["timeout_ms"] == 600000


def test_torch_2_3_chain_in_a_ray_worker():
    (event,) = real("017")
    assert (event.rank, event.pid) == (1, 4009)
    f = event.fields
    assert (f["seq"], f["op"], f["numel_in"], f["numel_out"]) == (158046, "GATHER", 2867200, 0)
    assert (f["timeout_ms"], f["elapsed_ms"], f["last_completed"], f["pg"]) == (600000, 600027, 158045, "1")
    assert len(event.sources) == 3  # caught, Timeout at NCCL work, Process group watchdog terminated


def test_vllm_worker_death_line_is_not_a_ray_death():
    events = analyze(str(next(REAL.glob("018_*.log")))).events
    (event,) = watchdogs(events)
    assert (event.rank, event.fields["seq"], event.fields["pg"], event.fields["elapsed_ms"]) == (0, 2, "2", 600059)
    assert not [e for e in events if e.kind == "ray_worker_died"]


def test_glog_unhandled_exception_what():
    (event,) = real("076")
    assert (event.rank, event.pid, event.node, event.actor) == (5, 4954, "10.7.35.246", "ActorModelRayActorBOX")
    f = event.fields
    assert (f["op"], f["seq"], f["numel_in"], f["numel_out"]) == ("_ALLGATHER_BASE", 1495581, 68124672, 544997376)
    assert (f["timeout_ms"], f["elapsed_ms"], f["pg_desc"]) == (1800000, 1800036, "default_pg")


def test_repeated_across_cluster():
    (event,) = real("078")
    assert (event.rank, event.pid, event.actor) == (0, 5823, "ReferenceModelRayActor")
    f = event.fields
    assert (f["seq"], f["timeout_ms"], f["elapsed_ms"], f["repeated"]) == (17284, 7200000, 7200031, 14)
    assert (f["last_enqueued"], f["last_completed"]) == (17290, 17283)


def test_three_lines_of_one_timeout():
    (event,) = real("079")
    assert (event.rank, event.pid, event.fields["seq"], event.fields["elapsed_ms"]) == (1, 12903, 5919, 1800098)
    assert len(event.sources) == 3
    assert event.fields["last_enqueued"] == 5921


def test_raylet_keepalive_lines():
    (event,) = real("023")
    assert event.fields["watchdog"] == "keepalive"
    assert event.fields["status"] == "GrpcUnavailable"
    assert event.time == "2023-11-09T23:36:12.670"
    assert len(event.sources) == 3
    assert event.rank is None and event.fields["seq"] is None


def test_ray_client_debug_error_string():
    (event,) = real("025")
    assert event.fields["watchdog"] == "keepalive"
    assert len(event.sources) == 2  # the nested, escaped copy of the same status


@pytest.mark.parametrize("name", ["026", "053", "082", "084"])
def test_not_watchdog_timeouts(name):
    assert real(name) == []


def test_heartbeat_monitor_is_its_own_event_per_rank():
    text = "\n".join(
        [
            "[rank1]:[E1111 17:01:37.000000001 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=14863, OpType=ALLREDUCE, NumelIn=14845952, NumelOut=14845952, Timeout(ms)=1800000) ran for 1800048 milliseconds before timing out.",
            "[rank1]:[E1111 17:01:38.000000001 ProcessGroupNCCL.cpp:1890] [PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: 14863, last completed NCCL work: 14862.This is most likely caused by incorrect usages of collectives.",
            "[rank1]:[E1111 17:10:53.000000001 ProcessGroupNCCL.cpp:1450] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.",
        ]
    )
    events = watchdogs(parse_text(text))
    assert [(e.fields["watchdog"], e.rank) for e in events] == [("nccl", 1), ("heartbeat", 1)]
    heartbeat = events[1]
    assert (heartbeat.fields["timeout_ms"], heartbeat.fields["last_completed"]) == (480000, 14862)
    assert len(heartbeat.sources) == 2


def test_work_description_split_over_lines():
    text = (
        "[rank1]:[E1111 17:01:37] [Rank 1] Watchdog caught collective operation timeout: \n"
        "WorkNCCL(SeqNum=14863, OpType=ALLREDUCE, NumelIn=14845952, NumelOut=14845952, Timeout(ms)=1800000) \n"
        "ran for 1800048 milliseconds before timing out.\n"
    )
    (event,) = watchdogs(parse_text(text))
    assert (event.rank, event.fields["seq"], event.fields["elapsed_ms"]) == (1, 14863, 1800048)
    assert "truncated" not in event.fields


def test_follow_up_lines_add_no_event():
    text = "\n".join(
        [
            "[rank3]:[E ProcessGroupNCCL.cpp:577] [Rank 3] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
            "[rank3]:[E ProcessGroupNCCL.cpp:583] [Rank 3] To avoid data inconsistency, we are taking the entire process down.",
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent call first):",
            "frame #2: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x80 (0x7f in libtorch_cuda.so)",
        ]
    )
    assert watchdogs(parse_text(text)) == []


# A rank's own traceback around its timeout, under the remote-task header of the call the
# actor was given: where it waited is in the stack (wait_allreduce), not in the header.
OWN_STACK = """\
Traceback (most recent call last):
  File "/workspace/my_rl/main.py", line 31, in <module>
    ray.get(trainer.fit.remote())
  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 2771, in get
    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)
  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 919, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(DistBackendError): \x1b[36mray::WorkerDict.actor_rollout_generate_sequences()\x1b[39m (pid=52110, ip=10.0.0.7, actor_id=0a4f1c2b3d4e5f60718293a401000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f00>)
  File "/usr/local/lib/python3.10/dist-packages/verl/single_controller/ray/base.py", line 645, in func
    return getattr(self.worker_dict[key], name)(*args, **kwargs)
  File "/workspace/my_rl/trainer.py", line 210, in generate_sequences
    self.wait_allreduce(handles)
  File "/workspace/my_rl/trainer.py", line 98, in wait_allreduce
    handle.wait()
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 2501, in wait
    return work.wait()
torch.distributed.DistBackendError: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600104 milliseconds before timing out.
"""


@pytest.mark.parametrize("paste", ["whole", "from the header", "colour debris"])
def test_a_timeout_s_method_is_where_its_own_stack_waited(tmp_path, paste):
    """Whole, or pasted from Ray's header on (whose colour codes stand between `()` and
    `(pid=`, as escapes or as the debris a copy leaves)."""
    text = OWN_STACK if paste == "whole" else OWN_STACK[OWN_STACK.index("ray.exceptions.RayTaskError") :]
    if paste == "colour debris":
        text = text.replace("\x1b", "")
    log = tmp_path / "driver.log"
    log.write_text(text, encoding="utf-8")
    [event] = watchdogs(analyze(str(log), jobs=1).events)
    assert (event.actor, event.method, event.rank, event.fields["seq"]) == ("WorkerDict", "wait_allreduce", 3, 12)


def test_a_timeout_without_a_stack_of_its_own_names_no_method_of_another_call():
    """EasyR1's keepalive timeout under `Runner.run()`: the innermost frame of its own
    traceback that is not Ray's or the RPC layer's is `fit`, where it was waiting."""
    found = analyze(str(INCIDENTS / "easyr1-ref-offload-host-oom" / "session"), jobs=1)
    keepalive = [e for e in watchdogs(found.events) if e.actor == "Runner"]
    assert [(e.actor, e.method) for e in keepalive] == [("Runner", "fit")]
