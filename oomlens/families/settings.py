"""Transformer for grammars/settings.lark: the memory-relevant settings a run printed."""

from __future__ import annotations

import lark

WORDS = {"true": True, "false": False, "none": None, "null": None}


def value_of(text: str | None) -> object:
    """A printed setting value as a Python value: flags without a value are True."""
    if text is None:
        return True
    text = text.rstrip(".")  # the end of a sentence, not of the number
    lowered = text.lower()
    if lowered in WORDS:
        return WORDS[lowered]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Transformer(lark.Transformer):
    def start(self, items):
        settings = dict(item for item in items if item is not None)
        return [{"kind": "setting", "fields": {"settings": settings}}] if settings else []

    def setting(self, items):
        key, value = items
        return str(key), value_of(str(value) if value is not None else None)
