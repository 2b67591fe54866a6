"""`make bench`: oomlens against ripgrep and lnav on the same generated session tree.

Generates the tree once (bench/cache/, by seed and size), installs ripgrep and lnav through
the system package manager when they are missing, then times, each the best of a few runs
taken in turns:
  - ripgrep counting the trigger words in every file (`rg -c -z`, the floor of a keyword scan),
  - lnav loading every file (`lnav -n -c ';SELECT count(*) FROM all_logs'`),
  - oomlens parse --format json with --jobs 2, and with --jobs 1 (outputs must be identical),
  - the floor of any per-line Python reader of the same lines (`bench/floor.py`: find, decode,
    one match and the numbers of each line that holds a trigger, in two processes),
  - oomlens --jobs 2 on the unique-shapes tree of the same seed and size (every memory and
    step line a text of its own), in the same turns: a line must cost the same whether its
    shape was seen before or not (target: within 1.5x the dense tree's time).
Prints throughput (MB/s of uncompressed log), the ratios, oomlens' peak memory (PSS and RSS summed over
its processes) beside the number of events it kept, recall (every planted incident found),
and the worst single file: of the largest files and the driver console, the one oomlens
reads slowest, each timed alone against ripgrep, lnav and the floor on the same file (the
best of the rounds, in turns).

    python bench/run.py [--size-mb 1000] [--seed 7] [--runs 3] [--unique-shapes]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / "cache"
OOMLENS = [sys.executable, "-m", "oomlens"]
FLOOR = [sys.executable, str(HERE / "floor.py")]
KEYWORDS = [
    "killed due to",
    "out of memory",
    "Watchdog caught",
    "memory allocated",
    "oom-kill",
    "A worker died",
    "No available memory",
    "Killed process",
]
TARGETS = {"vs_lnav": 2.0, "vs_rg": 8.0, "peak_mb": 300, "unique_vs_dense": 1.5}
LIMIT_S = 600  # a command that runs longer hangs: the bench stops and says which


def ensure_tools() -> None:
    missing = [name for name, pkg in (("rg", "ripgrep"), ("lnav", "lnav")) if shutil.which(name) is None]
    if missing:
        packages = {"rg": "ripgrep", "lnav": "lnav"}
        print(f"installing {', '.join(packages[m] for m in missing)} with apt-get", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-qq", *(packages[m] for m in missing)], check=True, env=env, stdout=subprocess.DEVNULL)


def ensure_tree(size_mb: int, seed: int, unique: bool) -> tuple[Path, dict]:
    """The generated tree for this seed, size and generator (a changed generator makes a new one)."""
    version = hashlib.sha256((HERE / "generate.py").read_bytes()).hexdigest()[:8]
    kind = "-unique" if unique else ""
    tree = CACHE / f"tree-{seed}-{size_mb}{kind}-{version}"
    manifest = CACHE / f"{tree.name}.planted.json"
    if not manifest.exists():
        for stale in CACHE.glob(f"tree-{seed}-{size_mb}{kind}-*"):  # an older generator's tree and manifest
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        print(f"generating a {size_mb} MB session tree (seed {seed}) in {tree.relative_to(ROOT)}", flush=True)
        extra = ["--unique-shapes"] if unique else []
        subprocess.run([sys.executable, str(HERE / "generate.py"), str(tree), "--size-mb", str(size_mb), "--seed", str(seed), *extra], check=True)
    return tree, json.loads(manifest.read_text())


def file_bytes(path: Path) -> int:
    import gzip

    if path.suffix != ".gz":
        return path.stat().st_size
    with gzip.open(path, "rb") as fh:
        return sum(len(chunk) for chunk in iter(lambda: fh.read(1 << 20), b""))


def log_bytes(tree: Path) -> int:
    """Uncompressed bytes of every log in the tree (what every tool reads)."""
    import gzip

    total = 0
    for path in tree.rglob("*"):
        if path.is_file():
            if path.suffix == ".gz":
                with gzip.open(path, "rb") as fh:
                    while chunk := fh.read(1 << 20):
                        total += len(chunk)
            else:
                total += path.stat().st_size
    return total


class PeakRSS(threading.Thread):
    """Samples the memory of a process and all its children every 20 ms: the resident sets
    summed (RSS: a page the forked workers share with their parent counts once per process)
    and the proportional sets summed (PSS: each page counts once, split among its sharers,
    the memory the machine gives the run)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.peak_pss, self.running = pid, 0, 0, True

    def run(self) -> None:
        while self.running:
            rss, pss = _tree_memory(self.pid)
            self.peak, self.peak_pss = max(self.peak, rss), max(self.peak_pss, pss)
            time.sleep(0.02)


def _tree_memory(pid: int) -> tuple[int, int]:
    rss = pss = 0
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith(("Rss:", "Pss:")):
                        kb = int(line.split()[1]) * 1024
                        rss, pss = (rss + kb, pss) if line.startswith("Rss:") else (rss, pss + kb)
            with open(f"/proc/{current}/task/{current}/children") as fh:
                todo.extend(int(child) for child in fh.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return rss, pss


def timed(cmd: list[str], output: Path | None = None, check: bool = True, sample: bool = False) -> tuple[float, tuple[int, int]]:
    """Wall time of one run, and with `sample` its peak memory (RSS and PSS summed over its
    processes; else zeros); stdout goes to `output` (or nowhere). The sampler reads each
    process's smaps_rollup every 20 ms, which makes the kernel walk its page tables: on two
    cores that took CPU from a run of two processes, not from one of one, so a run whose time
    counts is not sampled (`peak_of` samples one of its own). `check`: a failed command ends
    the bench: an exit code of 1 is ripgrep's "no match" and oomlens's "a failure found", but
    a Python traceback's in the floor (a floor that crashed at once was timed as a fast one)."""
    with open(output, "wb") if output else open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL, cwd=ROOT)
        sampler = PeakRSS(proc.pid)
        if sample:
            sampler.start()
        try:
            proc.wait(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SystemExit(f"{cmd[0]} ran past {LIMIT_S} s: {' '.join(cmd)}") from None
        finally:
            sampler.running = False
        elapsed = time.perf_counter() - start
        if sample:
            sampler.join()
    if check and proc.returncode not in ((0,) if cmd[:2] == FLOOR else (0, 1)):
        raise SystemExit(f"{' '.join(cmd[:3])} failed with exit code {proc.returncode}")
    return elapsed, (sampler.peak, sampler.peak_pss)


def peak_of(cmd: list[str], check: bool = True) -> tuple[int, int]:
    """Peak memory of a run of its own, sampled (RSS and PSS summed over its processes)."""
    return timed(cmd, check=check, sample=True)[1]


def recall(result: dict, planted: list[dict]) -> list[str]:
    """The planted incidents the output misses."""
    missing = []
    for plant in planted:
        wanted = {k: v for k, v in plant.items() if k != "kind"}
        if not any(e["kind"] == plant["kind"] and all(_value(e, k) == v for k, v in wanted.items()) for e in result["events"]):
            missing.append(json.dumps(plant))
    return missing


def _value(event: dict, key: str):
    return event.get(key) if event.get(key) is not None else event["fields"].get(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--unique-shapes", action="store_true", help="a tree in which no two memory or step lines share a shape")
    args = parser.parse_args()
    ensure_tools()
    tree, manifest = ensure_tree(args.size_mb, args.seed, args.unique_shapes)
    # an installed oomlens has its bytecode compiled (pip does it); a checkout under
    # PYTHONDONTWRITEBYTECODE would compile every module again at every start
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "oomlens")], check=True)
    files = sorted(str(p) for p in tree.rglob("*") if p.is_file())
    size = log_bytes(tree)
    rg_cmd = ["rg", "-c", "-z", "-j", "2", *sum((["-e", k] for k in KEYWORDS), []), str(tree)]
    lnav_cmd = ["lnav", "-n", "-c", ";SELECT count(*) FROM all_logs", *files]
    out2, out1 = CACHE / "oomlens-jobs2.json", CACHE / "oomlens-jobs1.json"
    commands = {
        "ripgrep": (rg_cmd, None),
        "lnav": (lnav_cmd, None),
        "oomlens -j 2": ([*OOMLENS, "parse", str(tree), "--format", "json", "--jobs", "2"], out2),
        "floor": ([*FLOOR, str(tree)], None),
    }
    if not args.unique_shapes:  # the dense tree's twin whose every memory line has a text of its own
        unique_tree, _ = ensure_tree(args.size_mb, args.seed, True)
        commands["oomlens unique"] = ([*OOMLENS, "parse", str(unique_tree), "--format", "json", "--jobs", "2"], None)
    runs: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):  # the tools take turns, so a busy moment of the machine hits them alike
        for name, (cmd, output) in commands.items():
            runs[name].append(timed(cmd, output)[0])
    commands["oomlens -j 1"] = ([*OOMLENS, "parse", str(tree), "--format", "json", "--jobs", "1"], out1)
    runs["oomlens -j 1"] = [timed(*commands["oomlens -j 1"])[0]]
    timings = {name: (min(runs[name]), peak_of(cmd)) for name, (cmd, _) in commands.items()}  # each tool's memory from a run of its own
    result = json.loads(out2.read_text())
    identical = out1.read_bytes() == out2.read_bytes()
    missing = recall(result, manifest["planted"])
    # the worst single file: the largest ones and the driver console, each alone
    by_size = sorted((p for p in tree.rglob("*") if p.is_file()), key=file_bytes, reverse=True)
    singles = {p: file_bytes(p) for p in [*by_size[:3], tree / "driver-console.log"]}
    worst = None
    for path, nbytes in singles.items():
        alone = {
            "oomlens": [*OOMLENS, "parse", str(path), "--format", "json", "--jobs", "2"],  # a big file: byte ranges
            "ripgrep": ["rg", "-c", "-z", *sum((["-e", k] for k in KEYWORDS), []), str(path)],
            "lnav": ["lnav", "-n", "-c", ";SELECT count(*) FROM all_logs", str(path)],
            "floor": [*FLOOR, str(path)],
        }
        best: dict[str, float] = {}
        for _ in range(args.runs):  # the best of each, in turns as on the tree: ripgrep's hundredths of a second move with the machine
            for name, cmd in alone.items():
                best[name] = min(best.get(name, float("inf")), timed(cmd)[0])
        if worst is None or nbytes / best["oomlens"] < worst[1] / worst[2]:
            worst = (path, nbytes, best["oomlens"], best["ripgrep"], best["floor"], best["lnav"])

    mb = size / 1e6
    print(f"\ntree: {tree.relative_to(ROOT)}, {len(files)} files, {mb:,.0f} MB of log text (seed {args.seed})")
    print(f"{'tool':<14}{'seconds':>9}{'MB/s':>9}{'peak RSS':>10}{'peak PSS':>10}  (MB, summed over processes)")
    for name, (seconds, (rss, pss)) in timings.items():
        print(f"{name:<14}{seconds:>9.2f}{mb / seconds:>9.0f}{rss / 1e6:>10.0f}{pss / 1e6:>10.0f}")
    ours, (rss, peak) = timings["oomlens -j 2"]
    read = sum(i.get("readings", {}).get("read", 0) for i in result["inputs"])
    vs_lnav = timings["lnav"][0] / ours
    vs_rg = ours / timings["ripgrep"][0]
    print(f"\noomlens is {vs_lnav:.1f}x faster than lnav (target >= {TARGETS['vs_lnav']}x)")
    print(f"oomlens takes {vs_rg:.1f}x the time of ripgrep (target <= {TARGETS['vs_rg']}x)")
    floor = timings["floor"][0]
    print(f"the floor of a per-line Python reader: {timings['lnav'][0] / floor:.1f}x faster than lnav, {floor / timings['ripgrep'][0]:.1f}x ripgrep's time")
    print(
        f"peak memory {peak / 1e6:.0f} MB PSS over all processes ({rss / 1e6:.0f} MB RSS summed; target <= {TARGETS['peak_mb']} MB PSS), "
        f"{len(result['events']):,} events kept of which {sum(1 for e in result['events'] if e['kind'] == 'gpu_memory'):,} memory readings of {read:,} read"
    )
    path, nbytes, ours_s, rg_s, floor_s, lnav_s = worst
    print(
        f"worst single file: {path.relative_to(tree)} ({nbytes / 1e6:,.0f} MB) at {nbytes / 1e6 / ours_s:.0f} MB/s, "
        f"{ours_s / rg_s:.1f}x ripgrep's time on it and {lnav_s / ours_s:.1f}x lnav's speed ({ours_s:.2f} s vs {rg_s:.2f} s and {lnav_s:.2f} s, "
        f"each alone, oomlens --jobs 2 with its start-up); the floor on it {floor_s / rg_s:.1f}x ({floor_s:.2f} s)"
    )
    unique_ok = True
    if "oomlens unique" in timings:
        unique_s = timings["oomlens unique"][0]
        unique_ok = unique_s / ours <= TARGETS["unique_vs_dense"]
        print(f"every memory line a shape of its own: {unique_s:.2f} s, {unique_s / ours:.2f}x the dense tree's time (target <= {TARGETS['unique_vs_dense']}x)")
    worst_ok = lnav_s / ours_s >= TARGETS["vs_lnav"] and ours_s / rg_s <= TARGETS["vs_rg"]
    print(f"--jobs 1 and --jobs 2 outputs identical: {identical}")
    print(f"recall: {len(manifest['planted']) - len(missing)}/{len(manifest['planted'])} planted incidents found")
    for line in missing:
        print(f"  missed: {line}")
    ok = (
        vs_lnav >= TARGETS["vs_lnav"]
        and vs_rg <= TARGETS["vs_rg"]
        and peak / 1e6 <= TARGETS["peak_mb"]
        and identical
        and not missing
        and unique_ok
        and worst_ok
    )
    print("targets met" if ok else "targets NOT met")
    sys.exit(0 if ok else 1)  # as hostile.py and flood.py: `make bench` fails while a target is not met


if __name__ == "__main__":
    main()
