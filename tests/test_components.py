"""Which component a failure belongs to, from names and places the fixtures do not use:
the rules of oomlens/data/components.toml over the process names and frames of every RL
framework, and the innermost phase of a traceback over the trainer loop that called it."""

from __future__ import annotations

import pytest

from conftest import REAL
from oomlens import analyze, parse_text
from oomlens.correlate import HELD_SHARE, component_of

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.02 GiB is free."


def verdict_of(text: str, tmp_path) -> str | None:
    path = tmp_path / "paste.log"
    path.write_text(text)
    return (analyze(str(path), jobs=1).verdict or {}).get("component")


def test_the_phase_below_the_trainer_loop_wins_over_its_header(tmp_path):
    """veRL's TaskRunner.run is the driver; the frames under it say the OOM was in the rollout."""
    text = (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunner.run() (pid=1651, ip=10.0.0.4, actor_id=9f3c, repr=<main_ppo.TaskRunner object at 0x7f2c>)\n"
        '  File "/workspace/verl/verl/trainer/main_ppo.py", line 341, in run\n'
        "    trainer.fit()\n"
        '  File "/workspace/verl/verl/trainer/ppo/ray_trainer.py", line 1049, in fit\n'
        "    gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch)\n"
        '  File "/workspace/verl/verl/experimental/agent_loop/agent_loop.py", line 530, in generate_sequences\n'
        "    self.wake_up()\n"
        f"{OOM}\n"
    )
    assert verdict_of(text, tmp_path) == "rollout"


def test_the_trainer_loop_alone_is_the_driver(tmp_path):
    text = (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunner.run() (pid=1651, ip=10.0.0.4)\n"
        '  File "/workspace/verl/verl/trainer/main_ppo.py", line 341, in run\n'
        "    trainer.fit()\n"
        f"{OOM}\n"
    )
    assert verdict_of(text, tmp_path) == "driver"


def test_global_rank_of_the_envelope_and_rank_within_the_group():
    text = (
        "[rank3]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=385, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
        "[rank1]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=385, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
    )
    events = parse_text(text)
    assert [(e.rank, e.fields["group_rank"]) for e in events] == [(3, 1), (1, 1)]  # two ranks, not one folded


@pytest.mark.parametrize(
    "name,component",
    [
        ("MegatronPolicyWorker", "actor_train"),  # NeMo-RL
        ("DTensorPolicyWorkerV2.get_logprobs", "actor_train"),
        ("FSDPPolicyWorkerBase.init_model", "actor_train"),  # SkyRL
        ("MegatronTrainRayActor.train", "actor_train"),  # slime
        ("ActorWorker(actor_train-0)", "actor_train"),  # ROLL names the cluster in the actor
        ("ActorWorker(reference-0)", "ref_model"),
        ("ActorWorker(actor_infer-3)", "rollout"),
        ("CriticWorker(critic-1)", "critic"),
        ("MultiStepRolloutWorker.sync_model_from_actor", "update_weight"),  # RLinf's weight sync first
        ("MegatronActor.sync_model_to_rollout", "update_weight"),
        ("MultiStepRolloutWorker", "rollout"),
        ("SGLangEngine", "rollout"),
        ("SGLangHttpServer", "rollout"),  # veRL's SGLang server, and its sleep and wake
        ("AsyncSGLangServer.wake_up", "rollout"),
        ("SGLangRollout.generate_sequences", "rollout"),
        ("WorkerDict: Async request to resume_memory_occupation timed out", "rollout"),
        ("SGLangConfig", None),  # a name with SGLang in it is no engine by that alone
        ("RayWorkerVllm", "rollout"),
        ("AsyncLLM", "rollout"),
        ("vLLM", "rollout"),  # the writer of a bare vLLM log line
        ("/usr/lib/python3.12/site-packages/sglang/srt/mem_cache/memory_pool.py:_create_buffers torch.zeros(", "rollout"),
        ("WorkerDict", None),  # veRL's colocated worker without its method: any role
    ],
)
def test_names_of_every_framework(name, component):
    assert component_of(name) == component


def test_an_optimizer_frame_names_training_only_when_nothing_else_does(tmp_path):
    """torch.optim runs under every training step: it says 'training' when no frame names
    the role, and gives way to a critic's own frame above it."""
    frames = (
        '  File "/envs/torch/lib/python3.10/site-packages/torch/optim/optimizer.py", line 487, in wrapper\n'
        "    out = func(*args, **kwargs)\n"
        '  File "/envs/torch/lib/python3.10/site-packages/torch/optim/adamw.py", line 220, in step\n'
        "    adamw(\n"
    )
    assert verdict_of(f"Traceback (most recent call last):\n{frames}{OOM}\n", tmp_path) == "actor_train"
    critic = '  File "/verl/verl/workers/fsdp_workers.py", line 1321, in update_critic\n    metrics = self.critic.update_critic(data=data)\n'
    assert verdict_of(f"Traceback (most recent call last):\n{critic}{frames}{OOM}\n", tmp_path) == "critic"


# -- which Top-10 row names the component of a Ray OOM kill (correlate._culprit) ---------------

KILL = (REAL / "201_verl_2950.log").read_text()  # veRL's four rollout workers hold 224.79 of the node's 246.41 GB
ROLLOUT_GB = 56.57 + 56.36 + 56.13 + 55.73


def _kill(text: str, tmp_path):
    path = tmp_path / "kill.log"
    path.write_text(text)
    return analyze(str(path), jobs=1)


@pytest.mark.parametrize("used", [230.0, 400.0, 700.0, 749.0, 750.0, 1000.0, 2400.0])
def test_the_top_users_name_the_component_only_when_they_hold_what_the_node_used(used, tmp_path):
    """The same table on a node that used more and more memory: the rollout workers stay the
    top users, but once they hold under HELD_SHARE of what the node used, the memory is
    elsewhere (the object store, the page cache, processes the table does not list)."""
    text = KILL.replace("was running was 246.41GB / 251.54GB (0.979583)", f"was running was {used:.2f}GB / {used * 1.02:.2f}GB (0.980392)")
    verdict = _kill(text, tmp_path).verdict or {}
    assert verdict["root_kind"] == "ray_oom_kill" and verdict["memory"] == "host"
    assert verdict["component"] == ("rollout" if ROLLOUT_GB >= HELD_SHARE * used else None)


@pytest.mark.parametrize("usage_told", [True, False])
@pytest.mark.parametrize("gb,component", [(120.0, None), (57.0, None), (56.0, "rollout"), (1.0, "rollout")])
def test_a_process_that_is_no_ray_worker_on_top_of_the_table_names_no_component(gb, component, usage_told, tmp_path):
    """Ray's dashboard agent leaking above the rollout workers: the biggest user is Ray's own
    process, and no RL component ran the node out, whether or not the report says what the
    node used (a paste without its "Memory on the node" line)."""
    agent = f"4075001\t{gb:.2f}\t/usr/bin/python3 -u /usr/lib/python3.10/site-packages/ray/dashboard/agent.py --node-ip-address=10.20.49.141"
    rows = [line for line in KILL.split("\n") if usage_told or not line.startswith("Memory on the node")]
    at = next(i for i, line in enumerate(rows) if line.startswith("PID"))
    text = "\n".join([*rows[: at + 1], agent, *rows[at + 1 :]])
    (incident,) = _kill(text, tmp_path).incidents
    assert incident.component == component
    assert (incident.culprit or {}).get("pid") == (4100606 if component else None)  # the agent is never the culprit: it is no Ray worker


@pytest.mark.parametrize("keep_header", [True, False])
def test_a_table_cut_above_its_rows_names_no_component(keep_header, tmp_path):
    """A paste that begins inside the table (a job's status keeps the last 20,000 characters)
    lost its top rows: the biggest users it shows are not the biggest there were."""
    rows = KILL.split("\n")
    at = next(i for i, line in enumerate(rows) if line.startswith("PID"))
    tail = rows[at + 2 :]  # the biggest row gone too
    text = (
        "\n".join([rows[at], *tail] if keep_header else tail)
        + "\nRefer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html.\n"
    )
    verdict = _kill(text, tmp_path).verdict or {}
    assert verdict["root_kind"] == "ray_oom_kill"
    assert verdict["component"] == ("rollout" if keep_header else None)
