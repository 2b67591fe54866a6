"""oomlens: log and crash forensics for RL training of LLMs on Ray."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .diagnosis import Diagnosis
    from .events import Event

__all__ = ["analyze", "parse_text"]


def analyze(*paths: str) -> Diagnosis:
    """Read logs (folders, files, archives, '-' for stdin) and diagnose them."""
    from .pipeline import analyze as run

    return run(*paths)


def parse_text(text: str) -> list[Event]:
    """Events found in a snippet of log text."""
    from .pipeline import parse_text as run

    return run(text)
