"""A progress bar on stderr while a read runs (rich's), and only on a terminal."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, BinaryIO, Protocol, TextIO, cast

from .sources import Input

REDRAW_S = 0.25  # a tick redraws the bar at most this often; rich redraws it four times a second besides


class Tick(Protocol):
    """What the pipeline tells as it reads: `read` more bytes of `item` (0: it was found,
    to be read), or (read None) the whole of `item` is read."""

    def __call__(self, item: Input, read: int | None = None) -> None: ...


class Progress:
    """rich's progress bar on `stream` (stderr), on a terminal only: the bytes read of the
    inputs found, the files read of them, the rate and the time left. It counts the bytes
    of inputs still being read too (one big file moves the bar as its bytes or byte ranges
    come in). The pool's results come in on its own thread: one lock."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.active = _is_terminal(stream)
        self.inputs = 0
        self.bytes = 0
        self.found: dict[int, int] = {}  # the size of every input found, by id()
        self.reading: dict[int, int] = {}  # bytes read so far of the inputs not read whole yet, by id()
        self.last = 0.0
        self.lock = threading.Lock()
        self.bar: Any = None
        if self.active:
            self._start()

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress as Bar, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        console = Console(file=self.stream, force_terminal=True, highlight=False, _environ={k: v for k, v in os.environ.items() if k != "FORCE_COLOR"})
        self.bar = Bar(
            TextColumn("oomlens: reading"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TextColumn("{task.fields[files]}"),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            refresh_per_second=4,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = self.bar.add_task("read", total=None, files="0 files")
        self.bar.start()

    def __call__(self, item: Input, read: int | None = None) -> None:
        with self.lock:
            key = id(item)
            if key not in self.found:
                self.found[key] = item.size
            if read is None:  # a file a worker process read whole may not have its bytes told yet: its size then
                self.inputs += 1
                counted = self.reading.pop(key, 0)
                self.bytes += item.bytes or counted or item.size
            elif read:
                self.reading[key] = self.reading.get(key, 0) + read
            if self.bar is None:
                return
            now = time.monotonic()
            total = max(sum(self.found.values()), self.so_far)
            self.bar.update(self.task, completed=self.so_far, total=total or None, files=f"{self.inputs:,}/{len(self.found):,} files")
            if now - self.last >= REDRAW_S:
                self.last = now
                self.bar.refresh()

    @property
    def so_far(self) -> int:
        """Bytes read: of the inputs read whole, and so far of the others."""
        return self.bytes + sum(self.reading.values())

    def done(self) -> None:
        """Stop the bar and clear it from the terminal."""
        with self.lock:
            if self.bar is not None:
                self.bar.stop()
                self.bar = None


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


class Counted:
    """A stream that tells `tick` how many bytes each read took: the scanner reads a few MB
    at a time, so a file read in this process moves the progress line as it is read."""

    def __init__(self, stream: BinaryIO, item: Input, tick: Tick) -> None:
        self.stream, self.item, self.tick = stream, item, tick

    def readinto(self, buffer: memoryview) -> int:
        got = self.stream.readinto(buffer) or 0  # type: ignore[attr-defined]
        if got:
            self.tick(self.item, got)
        return got


def counted(stream: BinaryIO, item: Input, tick: Tick) -> BinaryIO:
    """`stream`, telling `tick` the bytes of each read (the scanner reads with readinto alone)."""
    return cast(BinaryIO, Counted(stream, item, tick))
