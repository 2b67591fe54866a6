"""The progress line moves while one big file is read, not only when it is done: by the
bytes the scanner reads in this process (a few MB at a time), and by the byte ranges the
worker processes finish. It is drawn on a terminal only, and changes no output."""

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
from oomlens import pipeline
from oomlens.progress import Progress

SIZE = 40 << 20  # tens of MB: one file, read in ten or so chunks
FRAME = re.compile(r"\roomlens: (\d+) file\(s\), ([\d,]+) MB read")
# the command as a user runs it, with the progress line drawn at once and at every read
# instead of after a second and ten times a second
COMMAND = "import oomlens.progress as p\np.DELAY_S = p.REDRAW_S = 0\nimport sys\nfrom oomlens.cli import run\nsys.argv[0] = 'oomlens'\nrun()\n"


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


def frames(screen: str) -> list[tuple[int, int]]:
    """(files read, MB read) of each time the line was drawn."""
    return [(int(files), int(mb.replace(",", ""))) for files, mb in FRAME.findall(screen)]


def test_one_file_read_in_this_process_moves_by_bytes(log, monkeypatch):
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    screen = Terminal()
    progress = Progress(screen)
    diagnosis = pipeline.analyze(str(log), jobs=1, progress=progress)
    progress.done()
    drawn = frames(screen.getvalue())
    [read] = diagnosis.inputs
    while_reading = [mb for files, mb in drawn if files == 0]
    assert len(while_reading) >= 5 and while_reading == sorted(while_reading) and 0 < while_reading[0] < while_reading[-1] == round(read.bytes / 1e6)
    assert drawn[-1] == (1, round(read.bytes / 1e6))
    assert screen.getvalue().endswith("\r\033[K")


def test_byte_ranges_read_by_workers_count_as_each_finishes(log, monkeypatch):
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    monkeypatch.setattr(pipeline, "RANGE_MIN", 8 << 20)  # ranges of a smaller file (the parent cuts them)
    item = next(iter(pipeline.discover([str(log)])))
    spans, _ = pipeline._ranges(item, 2)
    assert len(spans) == 2
    screen = Terminal()
    progress = Progress(screen)
    pipeline.analyze(str(log), jobs=2, progress=progress)
    drawn = frames(screen.getvalue())
    own = sorted(round((hi - lo) / 1e6) for _, lo, hi, _ in spans)
    assert drawn[0][0] == 0 and drawn[0][1] in own  # the first range done: its bytes, the file not yet
    assert drawn[-1] == (1, round(log.stat().st_size / 1e6))


def test_silent_when_not_a_terminal(log, monkeypatch):
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
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
            while_reading = [mb for files, mb in frames(text) if files == 0]
            assert len(while_reading) >= 5 and while_reading[0] < while_reading[-1], text
        assert text.endswith("\r\033[K")
    assert outputs["1"] == outputs["2"] and b'"kind": "gpu_memory"' in outputs["1"]
