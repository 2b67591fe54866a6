"""A multi-node Ray session tree of a veRL run, deterministic by seed, with planted incidents.

The bulk is what fills real RL logs: vLLM progress bars rewritten with carriage returns,
vLLM and Ray INFO lines, step metrics, sharding-manager memory lines, warnings, wandb
chatter. Among them, a few incidents are planted at fixed places (an OOM kill report,
a CUDA OOM, an NCCL watchdog timeout, a kernel OOM kill, a worker death, a vLLM KV-cache
error); `planted.json` beside the tree lists them, and the benchmark checks that every
one is found. A quarter of the worker logs are gzipped, as archived sessions are.

Numbers vary as real ones do: of every width, negative, with exponents, `nan` and `inf`
among metric values; step lines carry 50-150 keys; Ray prefixes come with and without
`ip=`, `[repeated Nx across cluster]` with and without Ray's dedup sentence. The driver
console holds a tenth of the tree, mostly memory and step lines forwarded from workers.
`--unique-shapes` gives every memory and step line a text of its own (a metric named
once, a label with a hash, a counter), so no cache of line shapes can help.

Memory and metric lines are as dense as in real consoles: at least `--memory-per-gb` in every
file (MEMORY_PER_GB by default, measured in the fixtures' consoles), in the formats of
several frameworks (veRL's sharding manager and step metrics, DeepSpeed's see_memory_usage,
vLLM's sleep and profiling lines, torch's memory allocated), each with the Ray prefix of the
process that forwarded it where the file is a driver console. `--memory-per-gb 0` leaves
them at the share of the mixes below (about 79,000 a GB: the tree before issue 33).

    python bench/generate.py OUT_DIR --size-mb 1000 --seed 7 [--unique-shapes] [--memory-per-gb N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

NODES = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
WORKERS_PER_NODE = 8
DAY = "2026-11-21"
BAR = "█▏▎▍▌▋▊▉"  # tqdm's full cell, then its eighths


DEDUP = (
    " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
    "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication for more options.)"
)
METRIC_NAMES = [
    f"{group}/{name}"
    for group, names in {
        "actor": ["entropy", "pg_loss", "pg_clipfrac", "ppo_kl", "grad_norm", "lr", "kl_loss", "kl_coef", "pg_clipfrac_lower"],
        "critic": [
            "score/mean",
            "score/max",
            "score/min",
            "rewards/mean",
            "rewards/max",
            "advantages/mean",
            "advantages/min",
            "returns/mean",
            "vf_loss",
            "vf_clipfrac",
        ],
        "response_length": ["mean", "max", "min", "clip_ratio"],
        "prompt_length": ["mean", "max", "min", "clip_ratio"],
        "timing_s": ["gen", "reshard", "ref", "values", "adv", "update_critic", "update_actor", "step", "testing", "save_checkpoint"],
        "timing_per_token_ms": ["gen", "ref", "adv", "update_actor"],
        "perf": ["total_num_tokens", "time_per_step", "throughput"],
        "val-core/openai/gsm8k": ["reward/mean@1", "acc/mean@1"],
        "mfu": ["actor", "critic"],
        "global_seqlen": ["min", "max", "minmax_diff", "balanced_min", "balanced_max", "mean"],
    }.items()
    for name in names
] + [
    f"{group}/{source}/{stat}"
    for group in ("critic/score_by_source", "response_length_by_source")
    for source in ("gsm8k", "math", "aime24", "amc23", "olympiad", "minerva", "theoremqa", "mmlu_stem", "code_contests", "apps")
    for stat in ("mean", "max", "min", "std", "clip_ratio")
]
MEMORY_KEYS = ("perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb")
# Memory and metric lines a GB of log: the median over the RL runs' driver consoles among the
# fixtures (fixtures/incidents/*/driver-console.log: 35,000 to 1,105,000 a GB, median 421,000,
# counted as the lines that hit the gpu_memory and vllm_memory families' triggers); a veRL
# driver console forwarding every worker's readings holds about this many.
MEMORY_PER_GB = 421_000


def num(rng: random.Random, lo: float, hi: float, wild: bool = False) -> str:
    """A number as Python prints one: any number of decimals, now and then an exponent; with
    `wild`, also negative, `nan`, `inf` or numpy's repr, as metric values come."""
    value = rng.uniform(lo, hi)
    roll = rng.random()
    if wild and roll < 0.03:
        return rng.choice(["nan", "inf", "-inf"])
    if wild and roll < 0.10:
        value = -value
    if wild and roll > 0.93:
        text = f"{value * 10 ** -rng.randrange(3, 9):.{rng.randrange(1, 6)}e}"
    elif roll > 0.85:
        text = str(int(value))
    else:
        text = f"{value:.{rng.randrange(0, 9)}f}" if rng.random() < 0.5 else repr(value)
    return f"np.float64({text})" if wild and rng.random() < 0.1 else text


def prefix(rng: random.Random, name: str, pid: int, node: str) -> str:
    """Ray's driver-side prefix, with or without the node's IP, coloured or not."""
    inner = f"{name} pid={pid}" + (f", ip={node}" if rng.random() < 0.6 else "")
    return f"\x1b[36m({inner})\x1b[0m " if rng.random() < 0.8 else f"({inner}) "


def repeated(rng: random.Random) -> str:
    roll = rng.random()
    return "" if roll < 0.7 else f" [repeated {rng.randrange(2, 300)}x across cluster]" + (DEDUP if roll > 0.9 else "")


RUN_KEYS: dict[int, list[str]] = {}  # the metrics a run logs at every step, chosen once per seed


def step_line(rng: random.Random, step: int, unique: bool) -> str:
    """veRL's step metrics: the run's 50-150 keys in sorted order, the validation keys every
    tenth step, the memory keys among them."""
    seed = id(rng)
    if seed not in RUN_KEYS:
        RUN_KEYS[seed] = sorted(rng.sample([k for k in METRIC_NAMES if not k.startswith("val")], rng.randrange(50, 150)))
    keys = sorted(RUN_KEYS[seed] + ([k for k in METRIC_NAMES if k.startswith("val")] if step % 10 == 0 else []))
    if unique:  # a metric named once: this line's text is its own
        keys.append(f"custom/run_{rng.getrandbits(48):012x}")
    keys += MEMORY_KEYS
    values = {k: num(rng, 0, 5000, wild=True) for k in keys}
    values.update({MEMORY_KEYS[0]: num(rng, 30, 60), MEMORY_KEYS[1]: num(rng, 60, 75), MEMORY_KEYS[2]: num(rng, 100, 300)})
    return f"step:{step} - " + " - ".join(f"{k}:{values[k]}" for k in keys)


def sharding_line(rng: random.Random, unique: bool) -> str:
    head = rng.choice(
        [
            "Before state_dict() in sharding manager memory",
            "After state_dict() in sharding manager memory",
            "After sync model weights in sharding manager",
            "After del state_dict and empty_cache in sharding manager",
        ]
    )
    if unique:
        head = f"{head} (shard {rng.getrandbits(40):010x})"
    alloc = rng.uniform(10, 30)
    return (
        f"fsdp vllm sharding_manager {head}, memory allocated (GB): {num(rng, alloc, alloc)}, memory reserved (GB): {num(rng, alloc + 1, alloc + 20)}, "
        f"device memory used/total (GB): {num(rng, 40, 75)}/79.11"
    )


def _stamp(rng: random.Random, second: int) -> str:
    h, m, s = 10 + second // 3600 % 12, second // 60 % 60, second % 60
    return f"{DAY} {h:02d}:{m:02d}:{s:02d},{rng.randrange(1000):03d}"


def worker_line(rng: random.Random, rank: int, step: int, unique: bool = False) -> str:
    """One line of a colocated veRL WorkerDict's stdout."""
    kind = rng.random()
    if kind < 0.35:  # a vLLM progress bar, redrawn in place
        total = rng.choice([512, 1024, 1280, 2048])
        frames = []
        for done in sorted(rng.sample(range(1, total), 6)) + [total]:
            pct = done * 100 // total
            bar = BAR[-1] * (pct // 10) + " " * (10 - pct // 10)
            frames.append(
                f"Processed prompts: {pct:3d}%|{bar}| {done}/{total} [00:{rng.randrange(60):02d}<00:{rng.randrange(60):02d}, "
                f"{rng.uniform(50, 900):.2f}it/s, est. speed input: {rng.uniform(1e4, 1e5):.2f} toks/s, output: {rng.uniform(1e3, 2e4):.2f} toks/s]"
            )
        return "\r".join(frames)
    if kind < 0.60:
        return (
            f"INFO 11-21 {10 + step // 60 % 12:02d}:{step % 60:02d}:{rng.randrange(60):02d} [metrics.py:351] Avg prompt throughput: "
            f"{rng.uniform(0, 5000):.1f} tokens/s, Avg generation throughput: {rng.uniform(100, 9000):.1f} tokens/s, Running: "
            f"{rng.randrange(300)} reqs, Swapped: 0 reqs, Pending: {rng.randrange(50)} reqs, GPU KV cache usage: {rng.uniform(0, 99):.1f}%, CPU KV cache usage: 0.0%."
        )
    if kind < 0.70:
        return f"[rank{rank}]: Saving checkpoint shard {rng.randrange(64)} of step {step} took {rng.uniform(0.1, 9):.3f}s"
    if kind < 0.80:
        return (
            "/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py:690: FutureWarning: "
            "FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated. Please use APIs, get_state_dict() and set_state_dict()"
        )
    if kind < 0.90:
        return f"Token indices sequence length is longer than the specified maximum sequence length for this model ({rng.randrange(33000, 90000)} > 32768)."
    if kind < 0.99:
        return f"(rank {rank}) step {step} micro-batch {rng.randrange(64)} loss {rng.uniform(-1, 1):.5f} grad_norm {rng.uniform(0, 3):.4f} lr 1e-06"
    return sharding_line(rng, unique)


def label(rng: random.Random, unique: bool) -> str:
    """What makes a line's text its own in a tree of unique shapes: a hash, as a run id or a
    module's address names one, and a counter; nothing otherwise."""
    return f" [{rng.choice(['run', 'shard', 'module', 'engine'])}-{rng.getrandbits(40):010x} #{rng.randrange(10**6)}]" if unique else ""


def memory_line(rng: random.Random, step: int, unique: bool) -> str:
    """A memory or metric reading as one of several frameworks prints it (grammars/gpu_memory.lark's
    samples are the real lines), most of them short, a veRL step line of a hundred metrics now and then."""
    kind = rng.random()
    if kind < 0.40:
        return sharding_line(rng, unique)
    if kind < 0.55:
        return (
            f"[{_stamp(rng, step)}] [INFO] [utils.py:{rng.choice([827, 832, 840])}:see_memory_usage] MA {num(rng, 1, 70)} GB         "
            f"Max_MA {num(rng, 1, 75)} GB         CA {num(rng, 1, 78)} GB         Max_CA {rng.randrange(1, 79)} GB{label(rng, unique)}"
        )
    if kind < 0.65:
        return f"[{_stamp(rng, step)}] [INFO] [utils.py:840:see_memory_usage] CPU Virtual Memory:  used = {num(rng, 20, 900)} GB, percent = {rng.uniform(1, 99):.1f}%{label(rng, unique)}"
    if kind < 0.75:
        return f"INFO 11-21 {10 + step // 3600 % 12:02d}:{step // 60 % 60:02d}:{step % 60:02d} worker.py:133] Sleep mode freed {num(rng, 1, 70)} GiB memory, {num(rng, 1, 30)} GiB memory is still in use.{label(rng, unique)}"
    if kind < 0.85:
        alloc = rng.uniform(1, 60)
        return f"After {rng.choice(['FSDP module init', 'building vllm rollout', 'offload actor model', 'load ref model'])}{label(rng, unique)} memory allocated (GB): {num(rng, alloc, alloc)}, memory reserved (GB): {num(rng, alloc + 1, alloc + 9)}."
    if kind < 0.97:
        return f"Before vllm offload in sharding manager{label(rng, unique)}: {num(rng, 10, 79)} GB / 79.19 GB."
    return step_line(rng, step, unique)


def raylet_line(rng: random.Random, pid: int, second: int) -> str:
    kind = rng.random()
    stamp = _stamp(rng, second)
    if kind < 0.5:
        return f"[{stamp} I {pid} {pid}] (raylet) node_manager.cc:{rng.randrange(300, 4000)}: Sending {rng.randrange(100)} object(s) to the spill worker, object store usage {rng.uniform(0, 90):.1f}%"
    if kind < 0.8:
        return f"[{stamp} I {pid} {pid + 12}] (raylet) worker_pool.cc:{rng.randrange(100, 1800)}: Started worker process with pid {rng.randrange(10000, 99999)}, the token is {rng.randrange(100)}"
    return f"[state-dump] NodeManager: InitialConfigResources: {{CPU: 96, GPU: 8, memory: 1.{rng.randrange(10, 99)}e+12}} ClusterTaskManager: ========== Node: {rng.getrandbits(64):016x} =================="


def driver_line(rng: random.Random, step: int, unique: bool = False) -> str:
    """One line of the driver console: memory and step lines forwarded from the workers and
    the trainer (about 200k in 100 MB), chatter, and the trainer's progress bar.

    `step` is the training step (0-1000); the progress bar is tqdm's, ten cells wide as it
    prints when its output is not a terminal."""
    kind = rng.random()
    if kind < 0.25:
        return prefix(rng, "TaskRunner", 2233, NODES[0]) + step_line(rng, step, unique)
    if kind < 0.75:
        pid = rng.randrange(4000, 4032)
        return prefix(rng, "WorkerDict", pid, NODES[(pid - 4000) // WORKERS_PER_NODE]) + sharding_line(rng, unique) + repeated(rng)
    if kind < 0.9:
        return (
            prefix(rng, "WorkerDict", rng.randrange(4000, 4032), rng.choice(NODES)) + f"wandb: Syncing run qwen2.5-7b-grpo-{rng.randrange(9)}" + repeated(rng)
        )
    full, eighths = divmod(step * 80 // 1000, 8)
    bar = (BAR[0] * full + (BAR[eighths] if eighths else "")).ljust(10)
    return f"Training Progress: {step * 100 // 1000:3d}%|{bar}| {step}/1000 [{rng.randrange(24)}:{rng.randrange(60):02d}:{rng.randrange(60):02d}<12:00:00, 43.2s/it]"


# -- planted incidents -----------------------------------------------------------------------


def oom_kill(pid: int, node: str, stamp: str) -> list[str]:
    top = (
        [f"{pid}\t61.20\tray::WorkerDict.actor_rollout_generate_sequences"]
        + [f"{pid + i}\t{58 - i:.2f}\tray::WorkerDict.actor_rollout_generate_sequences" for i in range(1, 8)]
        + ["2233\t0.54\tray::TaskRunner.run", "1200\t0.21\t/usr/bin/python3 -m ray.util.client.server"]
    )
    return [
        f"[{stamp} I 3100 3100] (raylet) node_manager.cc:2767: Killing worker with task Type=ACTOR_TASK, Language=PYTHON, task_name=WorkerDict.actor_rollout_generate_sequences",
        "",
        f"Memory on the node (IP: {node}, ID: 5c2bd1e0f2a94cbb3b34bc1fbf0d5d2c3eea1dfbd0d6e2d59fdc9e41) where the task (actor ID: 3f7a2c9d2fa1e7b3c6e5f2c301000000, name=WorkerDict.actor_rollout_generate_sequences, pid={pid}, memory used=61.20GB) was running was 482.37GB / 503.52GB (0.957993), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 8f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip {node}`. To see the logs of the worker, use `ray logs worker-8f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8*out -ip {node}. Top 10 memory users:",
        "PID\tMEM(GB)\tCOMMAND",
        *top,
        "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.",
    ]


def cuda_oom(rank: int) -> list[str]:
    return [
        "Traceback (most recent call last):",
        '  File "/workspace/verl/verl/workers/fsdp_workers.py", line 588, in update_actor',
        "    metrics = self.actor.update_policy(data=data)",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU {rank} has a total capacity of 79.11 GiB of which 3.01 GiB is free. "
        "Including non-PyTorch memory, this process has 76.09 GiB memory in use. Of the allocated memory 71.20 GiB is allocated by PyTorch, and 3.40 GiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    ]


def nccl_timeout(rank: int) -> list[str]:
    return [
        f"[rank{rank}]:[E1121 13:31:08.407000137 ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=119067, OpType=_ALLGATHER_BASE, NumelIn=48660480, NumelOut=389283840, Timeout(ms)=1800000) ran for 1800083 milliseconds before timing out."
    ]


def kernel_oom(pid: int) -> list[str]:
    return [
        "[1823541.118302] ray::WorkerDict invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        f"[1823541.118896] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/user.slice,task=ray::WorkerDict,pid={pid},uid=1000",
        f"[1823541.118901] Out of memory: Killed process {pid} (ray::WorkerDict) total-vm:118844852kB, anon-rss:72496016kB, file-rss:102488kB, shmem-rss:20600kB, UID:1000 pgtables:151336kB oom_score_adj:0",
    ]


def worker_death(pid: int, node: str) -> list[str]:
    return [
        f"\x1b[33m(raylet, ip={node})\x1b[0m A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. "
        f"RayTask ID: ffffffffffffffffa47ed5e2be0e4c2fb9e1b0a401000000 Worker ID: 90bd845b4f505a5c913e64c6ab9e90d654f170b2e470582276dd28a9 Node ID: 9171a39a76b5bbaf6619ab2a211220e344c0a909219a73ad9991d697 "
        f"Worker IP address: {node} Worker port: 10045 Worker PID: {pid} Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
        "There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."
    ]


def kv_cache_error() -> list[str]:
    return ["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."]


# -- the tree --------------------------------------------------------------------------------


def generate(out: Path, size_mb: int, seed: int, unique: bool = False, memory_per_gb: int = MEMORY_PER_GB) -> dict:
    """Write the tree under `out`; return the list of planted incidents. Each file gets a memory
    reading wherever it has fallen behind `memory_per_gb` (none added with 0)."""
    rng = random.Random(seed)
    budget = size_mb * 1_000_000
    files: list[tuple[Path, str, int, int]] = []  # path, kind, pid, rank
    for n, node in enumerate(NODES):
        logs = out / f"node-{node}" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        files.append((logs / "raylet.out", "raylet", 3100 + n, 0))
        for w in range(WORKERS_PER_NODE):
            pid, rank = 4000 + n * WORKERS_PER_NODE + w, n * WORKERS_PER_NODE + w
            suffix = ".out.gz" if (rank % 4 == 3) else ".out"
            files.append((logs / f"worker-{rng.getrandbits(224):056x}-01000000-{pid}{suffix}", "worker", pid, rank))
            files.append((logs / f"worker-{rng.getrandbits(224):056x}-01000000-{pid}.err", "err", pid, rank))
    files.append((out / "driver-console.log", "driver", 2233, 0))
    files.append((out / f"node-{NODES[3]}" / "dmesg.log", "dmesg", 0, 0))
    share = {"worker": 0.85 / (len(NODES) * WORKERS_PER_NODE), "raylet": 0.05 / len(NODES), "driver": 0.10, "err": 0.0, "dmesg": 0.0}
    victim = {
        "oom": 4000 + WORKERS_PER_NODE + 2,
        "cuda": (4000 + 2 * WORKERS_PER_NODE + 5, 2 * WORKERS_PER_NODE + 5),
        "nccl": (4003, 3),
        "kernel": 4000 + 3 * WORKERS_PER_NODE + 6,
        "death": 4000 + 3 * WORKERS_PER_NODE + 6,
        "kv": 4000 + 1,
    }
    planted = [
        {"kind": "ray_oom_kill", "pid": victim["oom"], "node": NODES[1]},
        {"kind": "cuda_oom", "pid": victim["cuda"][0], "gpu": victim["cuda"][1]},
        {"kind": "watchdog_timeout", "rank": victim["nccl"][1]},
        {"kind": "kernel_oom", "pid": victim["kernel"]},
        {"kind": "ray_worker_died", "pid": victim["death"]},
        {"kind": "vllm_memory_error", "pid": victim["kv"]},
    ]
    for path, kind, pid, rank in files:
        target = int(budget * share[kind])
        lines: list[str] = []
        size = 0
        step = 0
        second = 0
        readings = 0
        if kind == "worker":
            lines += [":job_id:01000000", ":actor_name:WorkerDict"]
        while size < target:
            step += 1
            second += 1
            behind = readings < memory_per_gb * size / 1e9 and kind in ("worker", "driver")
            readings += behind
            forwarded = rng.randrange(4000, 4032)
            line = (
                (prefix(rng, "WorkerDict", forwarded, NODES[(forwarded - 4000) // WORKERS_PER_NODE]) if kind == "driver" else "")
                + memory_line(rng, second, unique)
                if behind
                else worker_line(rng, rank, step, unique)
                if kind == "worker"
                else raylet_line(rng, pid, second)
                if kind == "raylet"
                else driver_line(rng, size * 1000 // target, unique)  # training runs its 1000 steps over the file
            )
            lines.append(line)
            size += len(line.encode()) + 1
        at = (len(lines) * (37 + rank % 50)) // 100
        if kind == "raylet" and path.parts[-3] == f"node-{NODES[1]}":
            lines[at:at] = oom_kill(victim["oom"], NODES[1], _stamp(rng, at))
        if kind == "driver":
            lines[at:at] = worker_death(victim["death"], NODES[3])
        if kind == "worker" and pid == victim["nccl"][0]:
            lines[at:at] = nccl_timeout(rank)
        if kind == "err":
            lines = [f"/usr/lib/python3.10/site-packages/ray/_private/worker.py:2247: UserWarning: warning {i}" for i in range(rng.randrange(5, 40))]
            if pid == victim["cuda"][0]:
                lines += cuda_oom(rank)
            if pid == victim["kv"]:
                lines += kv_cache_error()
        if kind == "dmesg":
            lines = [f'[{1823000 + i}.{rng.randrange(10**6):06d}] audit: type=1400 audit({i}): apparmor="DENIED" operation="open"' for i in range(300)]
            lines[150:150] = kernel_oom(victim["kernel"])
        data = ("\n".join(lines) + "\n").encode()
        if path.name.endswith(".gz"):
            with gzip.open(path, "wb", compresslevel=1) as fh:
                fh.write(data)
        else:
            path.write_bytes(data)
    return {"seed": seed, "size_mb": size_mb, "unique_shapes": unique, "memory_per_gb": memory_per_gb, "planted": planted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unique-shapes", action="store_true", help="no two memory or step lines share a text shape")
    parser.add_argument("--memory-per-gb", type=int, default=MEMORY_PER_GB, help="memory and metric lines a GB in every file (0: only the mixes' own)")
    args = parser.parse_args()
    manifest = generate(args.out, args.size_mb, args.seed, args.unique_shapes, args.memory_per_gb)
    (args.out.parent / f"{args.out.name}.planted.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
