"""Framework knowledge as data: components, frameworks, remedies (TOML files beside this one)."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any


@functools.cache
def load(name: str) -> dict[str, Any]:
    """One data file, parsed once per process. Read beside this module: the package, with
    its native core, always lies on disk as files (importlib.resources, made to read
    archives too, cost every command the import of its nine modules)."""
    return tomllib.loads(Path(__file__).with_name(name).read_text(encoding="utf-8"))
