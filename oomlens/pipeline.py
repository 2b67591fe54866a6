"""The one direction of data flow: sources → scan (lines, grammars) → events → diagnosis."""

from __future__ import annotations

import io

from .diagnosis import Diagnosis
from .events import Clue, Event, fold
from .scan import FileContext, Scanner
from .sources import Input, discover


def read_input(item: Input) -> list[Event | Clue]:
    """Scan one input; what goes wrong while reading becomes a problem of that input."""
    if item.opener is None:
        return []
    scanner = Scanner(FileContext(item.path, item.role, item.pid, item.node))
    events: list[Event | Clue] = []
    try:
        stream = item.opener()
    except OSError as err:
        item.problems.append(f"cannot open: {err.strerror or err}")
        return events
    try:
        events.extend(scanner.events(stream))
    except OSError as err:
        item.problems.append(f"read failed after {scanner.bytes_read} bytes: {err.strerror or err}")
    finally:
        if item.path != "-":
            stream.close()
    item.bytes, item.lines = scanner.bytes_read, scanner.lines_read
    item.problems.extend(scanner.problems)
    return events


def number(events: list[Event]) -> list[Event]:
    for i, event in enumerate(events, 1):
        event.id = f"e{i}"
    return events


def analyze(*paths: str) -> Diagnosis:
    """Read every input under `paths` and diagnose what they show."""
    inputs: list[Input] = []
    events: list[Event] = []
    clues: list[Clue] = []
    for item in discover(list(paths)):
        inputs.append(item)
        for found in read_input(item):
            (clues if isinstance(found, Clue) else events).append(found)
    return Diagnosis(inputs, number(fold(events)), clues=clues)


def parse_text(text: str, name: str = "<text>") -> list[Event]:
    """Events in a snippet pasted into an issue or a chat."""
    item = Input(name, "other", opener=lambda: io.BytesIO(text.encode("utf-8", "surrogateescape")))
    return number(fold([e for e in read_input(item) if isinstance(e, Event)]))
