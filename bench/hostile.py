"""Hostile input, 1 MB of each kind (issue 17: "a 1 MB input of any kind parses in under 2 s").

Each kind is what made an earlier oomlens hang or go quadratic, or what real logs hold at
their worst: lines of triggers that never parse, word characters before a message, the same
OOM every ten minutes, a traceback of thousands of frames, records glued on one line,
nested JSON, numbers past any reader, a hole before the text, random and invalid bytes,
colour-code soup, a memory line whose every number differs, a Top-10 table of thousands of
rows, mutated real logs. Made anew each run from a seed (printed), so no run tunes to one
input. Timed as a user runs it (`oomlens parse FILE --format json --jobs 1`, the process's
start included), beside ripgrep's search of the same file for the triggers; then again at
4x the size, since work that grows with the square of the input (a copy of the rest of a
chunk per line) hides at 1 MB behind the process's start; at 4x its peak memory is sampled
too (issue 14: under 300 MB whatever the input).

    python bench/hostile.py [--seed N] [--size BYTES] [--scale N]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import run

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 2.0  # seconds, the target per 1 MB input
GROWTH = 1.5  # the most the CPU time may grow per unit of size (linear work, with room for noise): the square of 4x is 16x
PEAK_MB = 300  # issue 14's memory target, whatever the input
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size} GiB. GPU {gpu} has a total capacity of 79.15 GiB of which {free} GiB is free."
SUMMARY = (
    "[{stamp} E 1 2] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed "
    "due to other reasons at node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.0.{a}.{b}) over the last time period."
)
TRIGGERS = r"out of memory|memory pressure|Watchdog caught|died unexpectedly|sharding manager memory|OutOfMemoryError"


def _fill(size: int, piece: Callable[[int], str]) -> bytes:
    """Pieces `piece(n)` joined until `size` bytes."""
    out: list[bytes] = []
    total = n = 0
    while total < size:
        chunk = piece(n).encode("utf-8", "surrogateescape")
        out.append(chunk)
        total += len(chunk)
        n += 1
    return b"".join(out)[:size]


def _stamp(rng: random.Random, n: int, step: int = 600) -> str:
    t = n * step + rng.randrange(60)
    return f"2026-11-{1 + t // 86400 % 28:02d} {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d},{rng.randrange(1000):03d}"


def kinds(rng: random.Random, size: int) -> dict[str, bytes]:
    """Every kind of hostile input, `size` bytes each."""
    fixtures = sorted((ROOT / "fixtures" / "real").glob("*.log"))
    real = b"".join(p.read_bytes() for p in rng.sample(fixtures, min(40, len(fixtures))))

    def mutated(data: bytes) -> bytes:
        data = bytearray((data * (size // max(1, len(data)) + 1))[:size])
        for _ in range(size // 200):  # flips, inserted bytes, cut lines
            at = rng.randrange(len(data))
            choice = rng.randrange(4)
            if choice == 0:
                data[at] = rng.randrange(256)
            elif choice == 1:
                data[at:at] = rng.choice([b"\n", b"\x1b[31m", b"\0", b"(", b"9" * 400, b"\xff\xfe"])
            elif choice == 2:
                del data[at : at + rng.randrange(1, 80)]
            else:
                data[at:at] = data[rng.randrange(len(data)) :][: rng.randrange(1, 2000)]
        return bytes(data[:size])

    frames = "".join(f'  File "/opt/verl/workers/fsdp_workers.py", line {rng.randrange(9999)}, in f{n}\n    x = y{n}()\n' for n in range(size // 90))
    return {
        "mutated real logs": mutated(real),
        "one line of CUDA OOM triggers": ("CUDA out of memory. " * (size // 20)).encode()[:size],
        "one line of watchdog triggers": ("Watchdog caught collective operation timeout " * (size // 45)).encode()[:size],
        "one line of Ray task headers": ("ray::A.b() (pid=1, " * (size // 19)).encode()[:size],
        "word characters before a message": ("a." * (size // 2 - 60) + " " + OOM.format(size="2.00", gpu=0, free="1.05") + "\n").encode(),
        "the same OOM every ten minutes": _fill(size, lambda n: f"{_stamp(rng, n)} - trainer - ERROR - {OOM.format(size='2.00', gpu=0, free='1.05')}\n"),
        "kill summaries, each a new node": _fill(size, lambda n: SUMMARY.format(stamp=_stamp(rng, n, 7), a=n % 250, b=rng.randrange(250)) + "\n"),
        "a traceback of thousands of frames": ("Traceback (most recent call last):\n" + frames)[: size - 200].encode()
        + b"\n"
        + OOM.format(size="2.00", gpu=0, free="1.05").encode()
        + b"\n",
        "records glued on one line": _fill(size, lambda n: SUMMARY.format(stamp=_stamp(rng, n, 1), a=n % 250, b=1) + " ").replace(b"\n", b"") + b"\n",
        "nested JSON": (b'{"a":' * (size // 5))[:size] + b"\n",
        "numbers past any reader": _fill(size, lambda n: OOM.format(size="9" * rng.randrange(300, 6000), gpu=10 ** rng.randrange(19, 40), free="1e999") + "\n"),
        "memory lines, every number new": _fill(
            size,
            lambda n: (
                f"(WorkerDict pid={rng.randrange(1, 1 << 22)}, ip=10.0.{rng.randrange(250)}.{rng.randrange(250)}) "
                f"After state_dict() in sharding manager memory, memory allocated (GB): {rng.uniform(0, 80):.{rng.randrange(1, 6)}f}, "
                f"memory reserved (GB): {rng.uniform(0, 80):.{rng.randrange(1, 6)}f}, device memory used/total (GB): {rng.uniform(0, 80):.2f}/{rng.choice([24, 40, 80, 141])}\n"
            ),
        ),
        "a Top-10 table of thousands of rows": (
            "Top 10 memory users:\nPID\tMEM(GB)\tCOMMAND\n"
            + "".join(f"{rng.randrange(1, 1 << 22)}\t{rng.uniform(0, 9):.2f}\tray::WorkerDict.generate_sequences\n" for _ in range(size // 48))
        ).encode()[:size],
        "a hole before the text": bytes(size // 2)
        + _fill(size // 2, lambda n: f"{_stamp(rng, n)} - trainer - ERROR - {OOM.format(size='2.00', gpu=n % 8, free='1.05')}\n"),
        "random bytes": rng.randbytes(size),
        "random printable text": bytes(rng.choice(b" \nabcdefghijklmnopqrstuvwxyz0123456789.:()[]=,-") for _ in range(size)),
        "invalid UTF-8 between triggers": _fill(size, lambda n: "\udcff\udcfe" * rng.randrange(50) + OOM.format(size="2.00", gpu=0, free="1.05") + "\n"),
        "colour-code soup": _fill(
            size,
            lambda n: (
                rng.choice(["\x1b[36m(WorkerDict pid=7)\x1b[0m ", "\x1b[33m(raylet)\x1b[0m ", "^[[32m", "#033[0m", "\x1b[2K\r"]) + ("OOM " if n % 7 else "\n")
            ),
        ),
        "nothing but line breaks": b"\n" * size,
        "nothing but carriage returns": b"\r" * size,
    }


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, the CPU seconds of the command (user and system: what its wall time
    is on an idle core, whatever else the machine runs meanwhile), and its peak memory (PSS
    summed over its processes, bench/run.py's sampling)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, (_, pss) = run.timed(cmd, check=False, sample=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), pss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--scale", type=int, default=4, help="each kind again at this many times the size: its growth tells work that is not linear")
    args = parser.parse_args()
    rg = shutil.which("rg")
    oomlens = [sys.executable, "-m", "oomlens", "parse", "--format", "json", "--jobs", "1"]
    big = args.size * args.scale
    print(f"\nhostile input, {args.size:,} bytes of each kind and {big:,} (seed {args.seed})")
    print(
        f"targets: each under {LIMIT:.0f} s of CPU at {args.size:,} bytes; at {args.scale}x the size, at most {GROWTH * args.scale:.0f}x the CPU "
        f"(linear work) and under {PEAK_MB} MB (PSS)"
    )
    print(f"{'kind':<38}{'oomlens wall s':>15}{'CPU s':>7}{'rg wall s':>10}{f'CPU s, {args.scale}x':>12}{'growth':>8}{f'MB, {args.scale}x':>9}")
    worst, steepest, biggest = ("", 0.0), ("", 0.0), ("", 0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input.log"
        larger = kinds(random.Random(args.seed), big)
        for name, data in kinds(random.Random(args.seed), args.size).items():
            path.write_bytes(data)
            wall, cpu, _ = timed([*oomlens, str(path)])
            base = timed([rg, "-c", "-a", TRIGGERS, str(path)])[0] if rg else float("nan")
            path.write_bytes(larger[name])
            _, cpu_big, pss = timed([*oomlens, str(path)])
            growth = cpu_big / cpu
            print(f"{name:<38}{wall:>15.2f}{cpu:>7.2f}{base:>10.2f}{cpu_big:>12.2f}{growth:>8.1f}{pss / 2**20:>9.0f}")
            worst = max(worst, (name, cpu), key=lambda x: x[1])
            steepest = max(steepest, (name, growth), key=lambda x: x[1])
            biggest = max(biggest, (name, pss), key=lambda x: x[1])
    met = worst[1] < LIMIT and steepest[1] <= GROWTH * args.scale and biggest[1] <= PEAK_MB * 2**20
    print(
        f"worst: {worst[0]}, {worst[1]:.2f} s of CPU; steepest: {steepest[0]}, {steepest[1]:.1f}x at {args.scale}x the size; "
        f"most memory: {biggest[0]}, {biggest[1] / 2**20:.0f} MB: targets {'met' if met else 'NOT met'}"
    )
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
