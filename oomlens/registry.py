"""Registry: the message families oomlens reads and the kinds they make, as one value.

The shipped registry is every grammar in `grammars/` and every entry of data/kinds.toml.
`add` makes a new registry with one more family (a grammar file with its samples and its
Transformer) and the kinds it makes, without touching a module or a global: pass it to
`oomlens.analyze(..., registry=...)` or `oomlens.parse_text(..., registry=...)`.
CONTRIBUTING.md shows a family added this way and then moved into the package."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .grammars import Family, families, family
from .kinds import Kinds, read_kinds, shipped

if TYPE_CHECKING:
    from lark import Transformer


@dataclass(frozen=True)
class Registry:
    """Families read from the logs, and what the kinds of their events mean."""

    families: tuple[Family, ...]
    kinds: Kinds

    @classmethod
    def shipped(cls) -> Registry:
        return _shipped()

    @property
    def added(self) -> tuple[Family, ...]:
        """The families beyond the shipped ones (each worker process reads them again)."""
        shipped = families()
        return tuple(f for f in self.families if not any(f is one for one in shipped))  # by identity: a family's == compares its every field

    def add(self, grammar: str | Path, transformer: type[Transformer], kinds: str = "") -> Registry:
        """This registry and one more family: `grammar` (a .lark file with its directives and
        samples), the `transformer` that makes its drafts, and `kinds`, the TOML entries of
        any kinds it makes that the registry does not know yet (data/kinds.toml's form)."""
        added = family(Path(grammar).resolve(), transformer)
        if any(f.name == added.name for f in self.families):
            raise ValueError(f"a family named {added.name!r} is already registered")
        return Registry((*self.families, added), self.kinds.extend(*read_kinds(kinds)))


@functools.cache
def _shipped() -> Registry:
    return Registry(families(), shipped())
