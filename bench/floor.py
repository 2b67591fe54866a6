"""The least a per-line Python reader can do with the lines oomlens must read: a floor.

oomlens finds its lines with its native core (Rust) and then reads each line that holds a trigger in
Python. Whatever else it does, such a reader pays at least this for each: find where the
line starts and ends, decode it, match Ray's prefix once and pull the numbers out of its
first 512 characters (a correct reader also peels every envelope, parses the message,
reads the time and builds an event). This script does only that, over every file given
(the gzipped ones inflated by isal, as oomlens does), in two processes over pieces of about
8 MB, so a big file uses both cores, and prints what it found. `bench/run.py` times it as
a command beside ripgrep, lnav and oomlens: the ratios it reaches are the best any reader
of this design can reach on the tree.

    python bench/floor.py FILE_OR_TREE...
"""

from __future__ import annotations

import functools
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from oomlens.prefilter import Prefilter

PIECE = 8 << 20  # bytes a process reads at a time of a big file
PREFIX = re.compile(r"(?:\x1b\[[0-9;]*m)?\((\w+) pid=(\d+)(?:, ip=([\d.]+))?\)")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
HEAD = 512  # characters of a line whose numbers are read


def _piece_text(name: str, start: int, stop: int) -> bytes:
    """The lines that begin in bytes [start, stop) of a file (stop -1: the whole file,
    inflated if gzipped)."""
    path = Path(name)
    if stop < 0:
        if path.suffix != ".gz":
            return path.read_bytes()
        from isal import igzip

        return igzip.decompress(path.read_bytes())
    with path.open("rb") as fh:
        if start:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":  # a line that began in the piece before is its own
                fh.readline()
        data = fh.read(max(0, stop - fh.tell()))
        return data if data.endswith(b"\n") else data + fh.readline()


def _pieces(path: Path) -> list[tuple[str, int, int]]:
    size = path.stat().st_size
    if path.suffix == ".gz" or size <= PIECE:
        return [(str(path), 0, -1)]
    return [(str(path), start, min(size, start + PIECE)) for start in range(0, size, PIECE)]


def _read(piece: tuple[str, int, int]) -> tuple[int, int]:
    """(lines read, numbers found) in one piece: each line that holds a trigger, once."""
    data = _piece_text(*piece)
    lines = numbers = 0
    last = -1
    for end, _pattern in _prefilter().matches(data, 0, len(data)):  # in the order of their ends
        if end <= last:
            continue
        first = data.rfind(b"\n", 0, end) + 1
        last = data.find(b"\n", end)
        if last < 0:
            last = len(data)
        line = data[first:last].decode("utf-8", "replace")
        m = PREFIX.match(line)
        numbers += len(NUMBER.findall(line, m.end() if m else 0, HEAD))
        lines += 1
    return lines, numbers


@functools.cache
def _prefilter() -> Prefilter:
    """oomlens's own prefilter of its triggers, made once per process."""
    from oomlens.grammars import families
    from oomlens.scan import Trigger

    return Trigger(families()).lines


def main(paths: list[str]) -> None:
    files = [f for p in map(Path, paths) for f in (sorted(p.rglob("*")) if p.is_dir() else [p]) if f.is_file()]
    pieces = [piece for f in files for piece in _pieces(f)]
    with ProcessPoolExecutor(2) as pool:
        found = list(pool.map(_read, pieces))
    print(f"{sum(n for n, _ in found)} lines with a trigger, {sum(k for _, k in found)} numbers read, {len(files)} files")


if __name__ == "__main__":
    main(sys.argv[1:])
