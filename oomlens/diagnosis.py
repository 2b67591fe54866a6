"""Diagnosis: everything oomlens concluded from one set of inputs; outputs only render it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .events import Clue, Event
from .sources import Input

CONTRACT_VERSION = 1


@dataclass
class Diagnosis:
    """The inputs read, the events found, the incidents they form, and the verdict."""

    inputs: list[Input]
    events: list[Event]
    incidents: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    clues: list[Clue] = field(default_factory=list)  # context for the correlator, not in the contract

    @property
    def problems(self) -> list[str]:
        return [f"{i.path}: {p}" for i in self.inputs for p in i.problems]

    @property
    def readable(self) -> bool:
        """True when at least one input could be read at all."""
        return any(i.opener is not None and (i.bytes or not i.problems) for i in self.inputs)

    def to_dict(self) -> dict[str, Any]:
        """The public JSON contract (DESIGN.md, version 1)."""
        return {
            "oomlens": CONTRACT_VERSION,
            "inputs": [i.to_dict() for i in self.inputs],
            "events": [e.to_dict() for e in self.events],
            "incidents": self.incidents,
            "verdict": self.verdict,
        }
