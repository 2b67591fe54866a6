"""The progress bar (rich's) moves while one big file is read, not only when it is done: by
the bytes the scanner reads in this process (a few MB at a time), and by the byte ranges the
worker processes finish; it tells the bytes of the total found, the files read of those
found, the rate and the time left. It is drawn on a terminal only, and changes no output."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

import oomlens.progress as progress_module
from oomlens import pipeline, ranges
from oomlens.progress import Progress

SIZE = 40 << 20  # tens of MB: one file, read in ten or so chunks
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # rich's colours and cursor moves
FRAME = re.compile(r"oomlens: reading \S* ?([\d.]+)/([\d.]+) (bytes|KiB|MiB|GiB) (\d+)/(\d+) files")
UNIT = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
# the command as a user runs it, with the bar drawn at every read instead of four times a second
COMMAND = "import oomlens.progress as p\np.REDRAW_S = 0\nimport sys\nfrom oomlens.cli import run\nsys.argv[0] = 'oomlens'\nrun()\n"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def big_log(path: Path, size: int = SIZE) -> Path:
    """One worker's log: INFO lines, a veRL memory line every thousand lines."""
    lines = []
    for i in range(8000):
        stamp = f"2026-03-12 11:{i // 3600 % 60:02d}:{i // 60 % 60:02d},{i % 1000:03d}"
        if i % 1000 == 0:
            lines.append(
                f"(WorkerDict pid=4242) DEBUG:{stamp}:Before building vllm rollout, memory allocated (GB): {10 + i / 1000:.2f}, memory reserved (GB): 20.00"
            )
        else:
            lines.append(f"{stamp} INFO worker.py:{i % 900} -- step {i} finished, loss {i * 0.001:.3f}, throughput {i % 97} tokens/s")
    block = ("\n".join(lines) + "\n").encode()
    with path.open("wb") as out:
        for _ in range(size // len(block) + 1):
            out.write(block)
    return path


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    return big_log(tmp_path_factory.mktemp("big") / "worker.log")


def frames(screen: str) -> list[tuple[int, float, float, int]]:
    """(files read, MiB read, MiB in all, files found) of each time the bar was drawn."""
    plain = CONTROL.sub("", screen).replace("\r", "\n")
    return [
        (int(files), float(got) * UNIT[unit] / (1 << 20), float(total) * UNIT[unit] / (1 << 20), int(found))
        for got, total, unit, files, found in FRAME.findall(plain)
    ]


def mib(n: int) -> float:
    return round(n / (1 << 20), 1)


def test_one_file_read_in_this_process_moves_by_bytes_of_its_total(log, monkeypatch):
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    screen = Terminal()
    progress = Progress(screen)
    diagnosis = pipeline.analyze(str(log), jobs=1, progress=progress)
    progress.done()
    drawn = frames(screen.getvalue())
    [read] = diagnosis.inputs
    while_reading = [got for files, got, total, found in drawn if files == 0 and found == 1]
    assert len(while_reading) >= 5 and while_reading == sorted(while_reading) and while_reading[0] < while_reading[-1]
    assert all(total == mib(read.bytes) for _, _, total, found in drawn if found)  # the total, known from the start
    assert drawn[-1][:2] == (1, mib(read.bytes))
    assert screen.getvalue().endswith("\x1b[2K")  # the bar is cleared at the end


def test_byte_ranges_read_by_workers_count_as_each_finishes(log, monkeypatch):
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    monkeypatch.setattr(ranges, "RANGE_MIN", 8 << 20)  # ranges of a smaller file (the parent cuts them)
    item = next(iter(pipeline.discover([str(log)])))
    spans, _ = ranges.ranges_of(item, 2)
    assert len(spans) == 2
    screen = Terminal()
    progress = Progress(screen)
    pipeline.analyze(str(log), jobs=2, progress=progress)
    progress.done()
    drawn = [frame for frame in frames(screen.getvalue()) if frame[1]]
    own = sorted(mib(hi - lo) for _, lo, hi, _ in spans)
    assert drawn[0][0] == 0 and drawn[0][1] in own  # the first range done: its bytes, the file not yet
    assert drawn[-1][:2] == (1, mib(log.stat().st_size))


def test_silent_when_not_a_terminal(log):
    pipe = io.StringIO()
    progress = Progress(pipe)
    pipeline.analyze(str(log), jobs=1, progress=progress)
    progress.done()
    assert pipe.getvalue() == ""


@pytest.mark.slow
def test_the_command_on_a_terminal(log, tmp_path):
    """`oomlens parse` with stderr on a pty: the line moves while the one file is read, is
    cleared at the end, and stdout is the same with one process or two."""
    outputs = {}
    for jobs in ("1", "2"):
        leader, follower = pty.openpty()
        out = tmp_path / f"jobs-{jobs}.json"
        with out.open("wb") as stdout:  # a file, not a pipe: nobody reads a pipe while the pty is read
            run = subprocess.Popen(
                [sys.executable, "-c", COMMAND, "parse", str(log), "--format", "json", "--jobs", jobs], stdout=stdout, stderr=follower, cwd=tmp_path
            )
        os.close(follower)
        screen = b""
        while True:
            try:
                data = os.read(leader, 1 << 16)
            except OSError:  # the pty closes with the command
                break
            if not data:
                break
            screen += data
        os.close(leader)
        assert run.wait() == 0
        outputs[jobs] = out.read_bytes()
        text = screen.decode()
        if jobs == "1":
            while_reading = [got for files, got, _, _ in frames(text) if files == 0]
            assert len(while_reading) >= 5 and while_reading[0] < while_reading[-1], text
        assert text.endswith("\x1b[2K")
    assert outputs["1"] == outputs["2"] and b'"kind": "gpu_memory"' in outputs["1"]
