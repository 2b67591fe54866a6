"""A progress line on stderr while a long read runs, and only on a terminal."""

from __future__ import annotations

import sys
import threading
import time
from typing import BinaryIO, Protocol, TextIO, cast

from .sources import Input

DELAY_S = 1.0  # a read shorter than this shows nothing
REDRAW_S = 0.1  # the line is redrawn at most this often


class Tick(Protocol):
    """What the pipeline tells as it reads: `read` more bytes of `item`, or (read None) the
    whole of `item` is read."""

    def __call__(self, item: Input, read: int | None = None) -> None: ...


class Progress:
    """Counts inputs read and bytes read, also of the inputs still being read (one big file
    moves the line as its bytes or byte ranges come in); redraws one line at most ten
    times a second. The pool's results come in on its own thread: one lock."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.active = stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.inputs = 0
        self.bytes = 0
        self.reading: dict[int, int] = {}  # bytes read so far of the inputs not read whole yet, by id()
        self.drawn = False
        self.lock = threading.Lock()

    def __call__(self, item: Input, read: int | None = None) -> None:
        with self.lock:
            if read is None:  # a file a worker process read whole may not have its bytes told yet: its size then
                self.inputs += 1
                counted = self.reading.pop(id(item), 0)
                self.bytes += item.bytes or counted or item.size
            else:
                self.reading[id(item)] = self.reading.get(id(item), 0) + read
            now = time.monotonic()
            if not self.active or now - self.start < DELAY_S or now - self.last < REDRAW_S:
                return
            self.last = now
            done = self.bytes + sum(self.reading.values())
            rate = done / (now - self.start) / 1e6
            self.stream.write(f"\roomlens: {self.inputs} file(s), {done / 1e6:,.0f} MB read, {rate:,.0f} MB/s ")
            self.stream.flush()
            self.drawn = True

    def done(self) -> None:
        with self.lock:
            if self.drawn:
                self.stream.write("\r\033[K")
                self.stream.flush()


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
