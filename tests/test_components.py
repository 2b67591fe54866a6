"""Which component a failure belongs to, from names and places the fixtures do not use:
the rules of oomlens/data/components.toml over the process names and frames of every RL
framework, and the innermost phase of a traceback over the trainer loop that called it."""

from __future__ import annotations

import pytest

from oomlens import analyze, parse_text
from oomlens.correlate import component_of

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
