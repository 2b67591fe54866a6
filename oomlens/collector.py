"""Python's cycle collector, paused around work that makes many objects and no cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Pause the cycle collector (as it was before, after) while a long run's events come
    in, are diagnosed or written: hundreds of thousands of tuples and dicts, none in a
    reference cycle. The collector would find nothing, and walk each of them, and the
    events they point to, on the way. What is still there at the end it walks once at its
    next round."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
