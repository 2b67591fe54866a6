"""A run that fails in a loop, at two sizes: issue 14's "peak memory <= 300 MB whatever the input".

A trainer that catches its CUDA OOM and goes on, a vLLM engine that retries, a hung
collective: such a run prints the same failures by the ten thousand, each with its
traceback. The log is made anew each run from a seed (printed), from the real excerpts of
fixtures/real/ that hold a CUDA OOM and its traceback: each OOM by one of a job's 64
workers (its actor, pid, node, GPU and rank), every size in its message drawn again, its
traceback as printed (a loop prints the same one each time); between them NCCL watchdog
timeouts of those workers, raylet's OOM summary, and Ray's "A worker died" (each a new
worker: a new pid and ids); half the tracebacks behind Ray's prefix of their actor. Timed as a
user runs it (`oomlens parse FILE --format json`, every process's memory sampled), at N
failures and at 2N: the peak must stay under the target and must not grow with N.

    python bench/flood.py [--seed N] [--failures N] [--scale N]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from run import ROOT, timed

PEAK_MB = 300  # the issue's target, PSS summed over oomlens' processes
GROWTH = 1.25  # the most the peak may grow from N to 2N failures: memory that does not grow with the run
SIZE = re.compile(r"(\d+)(?:\.(\d+))?( ?[KMGT]i?B)")
GPU = re.compile(r"\b(GPU |Process )\d+")
ACTORS = ["WorkerDict", "ActorRolloutRefWorker", "LLMRayActor", "RewardModelRayActor", "CriticModelRayActor"]


def excerpts() -> list[str]:
    """The real excerpts that hold a CUDA OOM after its traceback."""
    found = []
    for path in sorted((ROOT / "fixtures" / "real").glob("*.log")):
        text = path.read_text(errors="replace")
        if 'File "' in text and "CUDA out of memory" in text:
            found.append(text if text.endswith("\n") else text + "\n")
    return found


def _redrawn(rng: random.Random, text: str, pid: int, gpu: int) -> str:
    """The excerpt as `pid` on `gpu` prints it: in its OOM message, every size drawn again
    (with its width, decimals and unit), the GPU and process its own."""

    def draw(m: re.Match[str]) -> str:
        whole, frac, unit = m.group(1), m.group(2) or "", m.group(3)
        value = str(rng.randrange(10 ** (len(whole) - 1), 10 ** len(whole))) if len(whole) > 1 else str(rng.randrange(10))
        return (f"{value}.{rng.randrange(10 ** len(frac)):0{len(frac)}d}" if frac else value) + unit

    lines = text.splitlines(keepends=True)
    return "".join(
        GPU.sub(lambda m: m.group(1) + str(pid if m.group(1) == "Process " else gpu), SIZE.sub(draw, line)) if "memory" in line else line for line in lines
    )


def flood(rng: random.Random, failures: int, path: Path) -> Counter[str]:
    """`failures` failures as a run failing in a loop prints them, a few seconds apart; how
    many of each kind it wrote (a CUDA OOM's excerpt may hold more failures of its own)."""
    planted: Counter[str] = Counter()
    real = excerpts()
    workers = [(rng.choice(ACTORS), rng.randrange(1000, 99999), f"10.0.0.{2 + rank // 8}", rank) for rank in range(64)]
    t = datetime(2025, 4, 2, rng.randrange(24), rng.randrange(60))
    with path.open("w") as out:
        for n in range(failures):
            t += timedelta(seconds=rng.uniform(0.5, 15))
            stamp = f"{t:%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}"
            actor, pid, node, rank = rng.choice(workers)
            pick = rng.random()
            kind = "cuda_oom" if pick < 0.55 else "watchdog_timeout" if pick < 0.75 else "ray_worker_died" if pick < 0.92 else "ray_oom_summary"
            planted[kind] += 1
            if kind == "cuda_oom":
                block = _redrawn(rng, rng.choice(real), pid, rank % 8)
                if rng.random() < 0.5:
                    prefix = f"({actor} pid={pid}, ip={node}) "
                    block = "".join(prefix + line for line in block.splitlines(keepends=True))
                out.write(f"{stamp}\tINFO trainer.py:88 -- step {n}: retrying after an error\n{block}")
            elif kind == "watchdog_timeout":
                out.write(
                    f"[{stamp} E {pid} {pid}] ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
                    f"timeout: WorkNCCL(SeqNum={n}, OpType={rng.choice(['ALLREDUCE', 'ALLGATHER', '_ALLGATHER_BASE', 'BROADCAST'])}, "
                    f"NumelIn={rng.randrange(1, 10**9)}, NumelOut={rng.randrange(1, 10**9)}, Timeout(ms)=600000) ran for "
                    f"{600000 + rng.randrange(99999)} milliseconds before timing out.\n"
                )
            elif kind == "ray_worker_died":
                out.write(
                    f"{stamp}\tWARNING worker.py:2058 -- A worker died or was killed while executing a task by an unexpected system error. "
                    f"To troubleshoot the problem, check the logs for the dead worker. RayTask ID: {rng.getrandbits(192):048x} "
                    f"Worker ID: {rng.getrandbits(224):056x} Node ID: {rng.getrandbits(224):056x} Worker IP address: {node} "
                    f"Worker port: {rng.randrange(10000, 60000)} Worker PID: {rng.randrange(1000, 99999)} Worker exit type: SYSTEM_ERROR Worker exit detail: "
                    "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes.\n"
                )
            else:
                out.write(
                    f"[{stamp} E {pid} {pid}] (raylet) node_manager.cc:3069: {rng.randrange(1, 9)} Workers (tasks / actors) killed due "
                    f"to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: {rng.getrandbits(224):056x}, "
                    f"IP: {node}) over the last time period.\n"
                )
    return planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--failures", type=int, default=80_000, help="at 80,000 (81 MB) a file is read as byte ranges already: both sizes are")
    parser.add_argument("--scale", type=int, default=2)
    args = parser.parse_args()
    oomlens = [sys.executable, "-m", "oomlens", "parse", "--format", "json"]
    print(f"\na run failing in a loop, {args.failures:,} and {args.failures * args.scale:,} failures (seed {args.seed})")
    print(f"targets: peak memory under {PEAK_MB} MB (PSS, all processes), at most {GROWTH}x from the smaller to the larger")
    print(f"{'failures':>10}{'log MB':>8}{'wall s':>8}{'PSS MB':>8}{'RSS MB':>8}{'events kept':>13}{'failures read':>15}")
    peaks = []
    with tempfile.TemporaryDirectory() as folder:
        path, output = Path(folder) / "worker.err", Path(folder) / "out.json"
        for failures in (args.failures, args.failures * args.scale):
            flood(random.Random(args.seed), failures, path)
            wall, (rss, pss) = timed([*oomlens, str(path)], output, sample=True)
            result = json.loads(output.read_bytes())
            read = sum(i.get("failures", {}).get("read", 0) for i in result["inputs"]) or len(result["events"])
            peaks.append(pss)
            print(f"{failures:>10,}{path.stat().st_size / 1e6:>8.0f}{wall:>8.1f}{pss / 2**20:>8.0f}{rss / 2**20:>8.0f}{len(result['events']):>13,}{read:>15,}")
    growth = peaks[1] / peaks[0]
    met = max(peaks) <= PEAK_MB * 2**20 and growth <= GROWTH
    print(
        f"peak {max(peaks) / 2**20:.0f} MB, {growth:.2f}x from {args.failures:,} to {args.failures * args.scale:,} failures: targets {'met' if met else 'NOT met'}"
    )
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
