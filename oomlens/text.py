"""How oomlens writes numbers and sentences for people: sizes, and the templates the kinds
table (data/kinds.toml) writes its sentences in. One convention everywhere: binary units,
two decimals in GiB, "?" for a value the logs do not show."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

GIB = 1024**3
MIB = 1024**2


def gib(n: float | None, unit: bool = True) -> str:
    """Bytes in GiB with two decimals ("?" when unknown): how sizes are compared in a sentence."""
    if n is None:
        return "?"
    return f"{n / GIB:.2f} GiB" if unit else f"{n / GIB:.2f}"


def size(n: float | None) -> str:
    """Bytes in the unit a person reads at a glance: GiB from one GiB up, MiB below."""
    if n is None:
        return "?"
    return gib(n) if abs(n) >= GIB else f"{n / MIB:.1f} MiB"


def _victims(killed: Any) -> str:
    rows = killed if isinstance(killed, list) else []
    return ", ".join(_who(v.get("pid"), v.get("name"), v.get("bytes")) or "a worker" for v in rows) or "?"


def _first_top(top: Any) -> str:
    row = top[0] if isinstance(top, list) and top else {}
    return _who(row.get("pid"), row.get("command"), row.get("bytes")) or "?"


def _who(pid: Any, name: Any, size_: Any) -> str:
    """A process as far as a report names it: pid, name, size, each only when shown."""
    return " ".join(x for x in (f"pid {pid}" if pid is not None else "", str(name or ""), size(size_) if size_ is not None else "") if x)


def _memory_sizes(fields: Any) -> str:
    names = ("allocated_bytes", "reserved_bytes", "used_bytes")
    return ", ".join(f"{n.split('_')[0]} {size(fields[n])}" for n in names if fields.get(n) is not None)


# a template's `{field:spec}`: how the value is written
SPECS: dict[str, Callable[[Any], str]] = {
    "gib": lambda n: gib(n, unit=False),
    "gib_up": lambda n: str(-(-n // GIB)),  # whole GiB, rounded up: a setting counted in GiB (VLLM_CPU_KVCACHE_SPACE)
    "size": size,
    "victims": _victims,
    "first_top": _first_top,
    "memory_sizes": _memory_sizes,
}

_PART = re.compile(r"\{(\w+)(?::(\w+))?\}|\[([^\[\]]*)\]")


@functools.cache
def compile_template(template: str) -> tuple[Any, ...]:
    """A template as pieces: text, (name, spec), or a group (a tuple of alternatives, each
    pieces). Raises ValueError on an unknown spec or an unbalanced bracket."""

    def pieces(text: str, in_group: bool) -> list[Any]:
        out: list[Any] = []
        at = 0
        for m in _PART.finditer(text):
            out.append(text[at : m.start()])
            if m.group(3) is not None:
                if in_group:
                    raise ValueError(f"template {template!r}: a group inside a group")
                out.append(tuple(tuple(pieces(alt, True)) for alt in m.group(3).split("|")))
            else:
                if m.group(2) is not None and m.group(2) not in SPECS:
                    raise ValueError(f"template {template!r}: unknown spec {m.group(2)!r} (known: {', '.join(SPECS)})")
                out.append((m.group(1), m.group(2)))
            at = m.end()
        rest = text[at:]
        if any(c in rest for c in "[]") or any(c in t for t in out if isinstance(t, str) for c in "[]"):
            raise ValueError(f"template {template!r}: unbalanced brackets")
        out.append(rest)
        return [p for p in out if p != ""]

    return tuple(pieces(template, False))


def _present(value: Any) -> bool:
    """A value the logs showed: not None, not an empty text, list or table."""
    return value is not None and value != "" and value != [] and value != {}


def render(template: str, values: Mapping[str, Any]) -> str:
    """Write a template with `values`; a missing value is "?". A group `[a|b]` writes its
    first alternative whose fields all have a value (one without a field always does),
    or nothing: a template that puts each field a log may leave out in a group says only
    what is known (the kinds' summaries and details do: tests/test_kinds.py)."""
    out: list[str] = []
    for piece in compile_template(template):
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece[0], str):
            out.append(_field(piece, values))
        else:
            for alternative in piece:
                if all(_present(values.get(p[0])) for p in alternative if not isinstance(p, str)):
                    out.extend(p if isinstance(p, str) else _field(p, values) for p in alternative)
                    break
    return "".join(out)


def _field(piece: tuple[str, str | None], values: Mapping[str, Any]) -> str:
    name, spec = piece
    value = values.get(name)
    if spec is not None:
        return SPECS[spec](value) if value is not None else "?"
    return "?" if value is None else str(value)


def when(time: str | None, latest: str | None = None, inferred: bool = False) -> str:
    """When an event happened, as far as its log says, in words: its stamp; for a line that
    printed none, the interval its neighbours' stamps bound ("between 03:33:59 and 03:44:22",
    the later's date left out when it is the same day), or the side that is known ("after",
    "before"); "" when nothing is known."""
    early = time.replace("T", " ") if time else None
    late = latest.replace("T", " ") if latest else None
    if early and (not inferred or early == late):  # stamps on both sides at one instant bound it exactly
        return early
    if early and late:
        return f"between {early} and {late[11:] if late[:10] == early[:10] and len(late) > 11 else late}"
    if early:
        return f"after {early}"
    return f"before {late}" if late else ""


def at(time: str | None, latest: str | None = None, inferred: bool = False) -> str:
    """`when` as a template's {at}: " at 03:44:22", " between 03:33:59 and 03:44:22", or ""."""
    told = when(time, latest, inferred)
    return f" at {told}" if told and time and (not inferred or time == latest) else f" {told}" if told else ""
