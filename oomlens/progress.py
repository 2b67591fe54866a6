"""A progress line on stderr while a long read runs, and only on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .sources import Input

DELAY_S = 1.0  # a read shorter than this shows nothing


class Progress:
    """Counts inputs and bytes as they are read; redraws one line at most ten times a second."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.active = stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.inputs = 0
        self.bytes = 0
        self.drawn = False

    def __call__(self, item: Input) -> None:
        self.inputs += 1
        self.bytes += item.bytes
        now = time.monotonic()
        if not self.active or now - self.start < DELAY_S or now - self.last < 0.1:
            return
        self.last = now
        rate = self.bytes / (now - self.start) / 1e6
        self.stream.write(f"\roomlens: {self.inputs} file(s), {self.bytes / 1e6:,.0f} MB read, {rate:,.0f} MB/s ")
        self.stream.flush()
        self.drawn = True

    def done(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
