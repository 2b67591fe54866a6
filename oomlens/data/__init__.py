"""Framework knowledge as data: components, frameworks, remedies (TOML files beside this one)."""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any


@functools.cache
def load(name: str) -> dict[str, Any]:
    """One data file, parsed once per process."""
    return tomllib.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))
