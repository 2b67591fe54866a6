"""What ended a process that was no memory failure (kind process_error), and ends on purpose:
real-looking logs through the whole pipeline to the verdict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from conftest import INCIDENTS
from oomlens import analyze, parse_text
from oomlens.correlate import component_of
from oomlens.data import load
from oomlens.outputs.verdict import all_clear

ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _watchdog(rank: int, second: int) -> str:
    return (
        f"[2025-08-10 03:{54 + second // 60:02d}:{second % 60:02d},100 E 4242{rank} 4242{rank}] (WorkerDict pid=4242{rank}) [rank{rank}]:[E810 03:54:11.061727749 "
        f"ProcessGroupNCCL.cpp:683] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=385, OpType=ALLREDUCE, NumelIn=1, "
        f"NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
    )


def _crashing_rollout(timeouts: int) -> str:
    """A rollout worker's traceback ending in an illegal memory access, torch's hints under it,
    then the other ranks' NCCL watchdogs ten minutes later."""
    lines = [
        "2025-08-10 03:44:22,315\tERROR worker.py:421 -- (WorkerDict pid=31337) Traceback (most recent call last):\n",
        '(WorkerDict pid=31337)   File "/verl/workers/fsdp_workers.py", line 612, in generate_sequences\n',
        "(WorkerDict pid=31337)     output = self.rollout.generate_sequences(prompts=prompts)\n",
        '(WorkerDict pid=31337)   File "/usr/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 1703, in execute_model\n',
        "(WorkerDict pid=31337)     output = self.model.sample(logits=logits)\n",
        f"(WorkerDict pid=31337) {ILLEGAL}\n",
        "(WorkerDict pid=31337) CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n",
        "(WorkerDict pid=31337) For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
    ]
    return "".join(lines) + "".join(_watchdog(rank, 10 * rank) for rank in range(1, timeouts + 1))


@pytest.mark.parametrize("timeouts", [1, 3, 7])
def test_a_rollout_worker_s_illegal_memory_access_is_the_root_of_the_timeouts_after_it(tmp_path, timeouts):
    log = tmp_path / "driver.log"
    log.write_text(_crashing_rollout(timeouts))
    diagnosis = analyze(str(log), jobs=1)
    verdict = diagnosis.verdict
    assert verdict is not None and (verdict["root_kind"], verdict["component"], verdict["memory"]) == ("process_error", "rollout", None)
    incident = diagnosis.incidents[0]
    assert len(diagnosis.incidents) == 1 and [e.kind for e in incident.cascade] == ["watchdog_timeout"] * timeouts
    assert incident.root.fields["cause"] == "illegal_memory_access" and incident.root.pid == 31337
    many = f"{timeouts} watchdog timeout{'s' if timeouts > 1 else ''}"
    assert (
        verdict["summary"] == f"no memory failure: the rollout process pid 31337 died of CUDA illegal memory access at 2025-08-10 03:44:22.315; {many} followed"
    )
    assert [r["setting"] for r in diagnosis.remedies[incident.id or ""]] == ["CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA"]


def test_an_oom_stays_the_root_of_the_crashes_that_follow_it(tmp_path):
    """Two seconds after a CUDA OOM the rollout's kernel faults: the OOM is the root."""
    oom = (
        "2025-08-10 03:44:20,000\tERROR worker.py:421 -- (WorkerDict pid=31337) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n"
    )
    (tmp_path / "worker.log").write_text(oom)
    (tmp_path / "driver.log").write_text(_crashing_rollout(2))
    diagnosis = analyze(str(tmp_path / "worker.log"), str(tmp_path / "driver.log"), jobs=1)
    assert diagnosis.verdict is not None and diagnosis.verdict["root_kind"] == "cuda_oom"
    assert [e.kind for e in diagnosis.incidents[0].cascade] == ["process_error", "watchdog_timeout", "watchdog_timeout"]


def test_a_healthy_run_ended_by_ray_kill_has_no_incident():
    """Made for real with Ray 2.60 (fixtures/incidents/ray-kill-healthy-end/run.py)."""
    diagnosis = analyze(str(INCIDENTS / "ray-kill-healthy-end"), jobs=1)
    assert [e.fields.get("reason") for e in diagnosis.events] == ["ray_kill"]
    assert diagnosis.incidents == [] and diagnosis.verdict is None
    assert all_clear(diagnosis).startswith("no OOM or crash found in these logs; the run ended on purpose: pid 25456 (Rollout) killed by ray.kill")


def test_a_ray_kill_after_a_crash_opens_no_incident(tmp_path):
    killed = (
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n\tclass_name: WorkerDict\n\tpid: 31337\n"
        "The actor is dead because it was killed by `ray.kill`.\n"
    )
    log = tmp_path / "driver.log"
    log.write_text(_crashing_rollout(1) + killed)
    diagnosis = analyze(str(log), jobs=1)
    assert diagnosis.verdict is not None and diagnosis.verdict["root_kind"] == "process_error"
    assert len(diagnosis.incidents) == 1  # the kill that followed opens none of its own


@pytest.mark.parametrize(
    "end",
    [
        "KeyboardInterrupt\n",
        "*** SIGTERM received at time=1754797462 on cpu 3 ***\n",
        "\tpid: 31337\nThe actor is dead because its worker process has died. Worker exit type: INTENDED_USER_EXIT Worker exit detail: Worker exits by an user request. exit_actor() is called.\n",
    ],
)
def test_ctrl_c_sigterm_and_exit_actor_are_ends_on_purpose(tmp_path, end):
    head = (
        'Traceback (most recent call last):\n  File "/app/main_ppo.py", line 40, in main\n    ray.get(runner.run.remote(config))\n'
        if end.startswith("Key")
        else ""
    )
    lead = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: Rollout\n" if "INTENDED" in end else ""
    log = tmp_path / "driver.log"
    log.write_text(head + lead + end)
    diagnosis = analyze(str(log), jobs=1)
    assert len(diagnosis.events) == 1 and diagnosis.incidents == [] and diagnosis.verdict is None
    assert "the run ended on purpose: " in all_clear(diagnosis)


CLASSES = st.from_regex(r"[A-Z][a-z]{2,8}(?:Error|Exception|Fault)", fullmatch=True)
MESSAGE = st.text(st.sampled_from("abcdefgh xyz0123456789=,'"), min_size=1, max_size=60).map(str.strip).filter(bool)
PACKAGE = st.sampled_from(["", "torch.", "ray.exceptions.", "mypkg.sub."])
PREFIX = st.sampled_from(
    ["", "(WorkerDict pid=4242) ", "[2025-08-10 03:44:22,315 E 4242 4242] core_worker.cc:1: ", "2025-08-10 03:44:22,315\tERROR worker.py:1 -- "]
)


def _covered(name: str, message: str) -> bool:
    exceptions = load("exceptions.toml")
    listed = [*exceptions["memory"]["classes"], *exceptions["told"]["classes"]]
    return name in listed or any(m in message for m in [*exceptions["memory"]["messages"], *exceptions["told"]["messages"]])


@settings(max_examples=60, deadline=None)
@given(name=CLASSES, message=MESSAGE, package=PACKAGE, prefix=PREFIX, wrapped=st.booleans())
def test_any_exception_line_is_a_process_error_of_its_innermost_class(name, message, package, prefix, wrapped):
    # Ray's traceback names the class it made with its module, as Python prints any class not builtin
    line = f"{prefix}ray.exceptions.RayTaskError({name}): ray::Actor.step() (pid=77, ip=10.0.0.1)" if wrapped else f"{prefix}{package}{name}: {message}"
    events = [e for e in parse_text(line + "\n") if e.kind == "process_error"]
    if _covered(name, "" if wrapped else message):
        assert events == []
        return
    assert len(events) == 1 and events[0].fields["exception"] == name
    if wrapped:
        assert (events[0].pid, events[0].actor, events[0].method, events[0].fields["wrapper"]) == (77, "Actor", "step", "RayTaskError")
    else:
        assert events[0].fields["message"] == " ".join(message.split())  # blocks are read with runs of blanks as one


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["OutOfMemoryError", "MemoryError", "ActorDiedError", "RayActorError", "WorkerCrashedError"]), package=PACKAGE, prefix=PREFIX)
def test_memory_failures_and_deaths_are_no_process_error(name, package, prefix):
    """Other kinds read these (the memory kinds, ray_death): the class is checked against a
    list in data/exceptions.toml, so an OOM is never told as a crash."""
    assert [e for e in parse_text(f"{prefix}{package}{name}: something happened\n") if e.kind == "process_error"] == []


@pytest.mark.parametrize(
    "text",
    [
        "the ValueError: part of this sentence is prose\n",  # a class inside a sentence
        "WARNING: config key trainer.skip_oom_batches=False\n",
        "ValueErrors are counted below\n",
    ],
)
def test_a_class_named_inside_a_sentence_is_no_event(text):
    assert parse_text(text) == []


@pytest.mark.parametrize(
    ("method", "component"),
    [
        ("WorkerDict.actor_rollout_update_actor", "actor_train"),
        ("WorkerDict.actor_rollout_ref_compute_log_probs", "actor_train"),
        ("WorkerDict.actor_rollout_ref_compute_log_prob", "actor_train"),
        ("WorkerDict.actor_rollout_ref_compute_ref_log_prob", "ref_model"),
        ("WorkerDict.actor_rollout_ref_compute_ref_log_probs", "ref_model"),
        ("WorkerDict.actor_rollout_generate_sequences", "rollout"),
        ("compute_reward_async", "reward_model"),
        ("WorkerSet.sync_weights", "update_weight"),
    ],
)
def test_verl_s_role_group_prefix_yields_to_the_method(method, component):
    assert component_of(method) == component


def test_the_exception_a_memory_failure_raised_is_no_crash_of_its_own():
    """NCCL's `unhandled cuda error` over `Cuda failure 2 'out of memory'`: the cuda_oom its
    family reads; the DistBackendError line beside it is that failure's raise, not a crash."""
    text = (
        "[rank5]: Traceback (most recent call last):\n"
        '[rank5]:   File "/opt/verl/verl/workers/fsdp_workers.py", line 655, in update_actor\n'
        "[rank5]:     metrics = self.actor.update_policy(data=data)\n"
        "[rank5]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank5]: ncclUnhandledCudaError: Call to CUDA function failed.\n[rank5]: Last error:\n[rank5]: Cuda failure 2 'out of memory'\n"
    )
    assert [e.kind for e in parse_text(text)] == ["cuda_oom"]
    without_oom = text.replace("Cuda failure 2 'out of memory'", "Cuda failure 700 'an illegal memory access was encountered'")
    assert [(e.kind, e.fields.get("cause")) for e in parse_text(without_oom)] == [("process_error", "nccl_cuda_error")]


@pytest.mark.parametrize("stamp", ["", "Mar 12 11:00:0{n} ", "2026-01-05T10:00:0{n}.000000000Z stdout F "])
def test_a_signal_abseil_writes_twice_is_one_crash_whatever_stamps_its_lines(stamp):
    """abseil writes the signal raw, then through Ray's logger with its own time; a collector
    may stamp the raw line far from that time: one occurrence, one event."""
    lines = [
        "(WorkerDict pid=14361) *** SIGFPE received at time=1751967829 on cpu 14 ***",
        "(WorkerDict pid=14361) PC: @     0x7f67caeff921  (unknown)  (unknown)",
        "(WorkerDict pid=14361) [2025-07-08 17:43:49,595 E 14361 14361] logging.cc:497: *** SIGFPE received at time=1751967829 on cpu 14 ***",
    ]
    text = "".join(stamp.format(n=n) + line + "\n" for n, line in enumerate(lines))
    assert [(e.kind, e.pid, e.fields["signal"]) for e in parse_text(text)] == [("process_error", 14361, "SIGFPE")]


def test_a_traceback_a_wrap_broke_off_near_a_failure_is_that_failure_s_own():
    """A terminal's wrap splits a long frame path: the traceback's block ends there, cut before
    its exception. Beside an OOM it is the OOM's chained traceback; alone it is a crash whose
    exception the text does not show."""
    oom = "(VllmWorkerProcess pid=2421) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of 21.96 GiB of which 1.29 GiB is free.\n"
    chained = (
        "(VllmWorkerProcess pid=2421) The above exception was the direct cause of the following exception:\n"
        "(VllmWorkerProcess pid=2421) Traceback (most recent call last):\n"
        '(VllmWorkerProcess pid=2421)   File "/home/user/miniconda/lib/python3.11/site-pa\n'
        'ckages/vllm/executor/multiproc_worker_utils.py", line 226, in _run_worker_process\n'
    )
    assert [e.kind for e in parse_text(oom + chained)] == ["cuda_oom"]
    assert [(e.kind, e.fields.get("cut")) for e in parse_text(chained)] == [("process_error", True)]
