"""Transformer for grammars/clock.lark: what a line tells of its clock (clues, not events)."""

from __future__ import annotations

import lark


class Transformer(lark.Transformer):
    def start(self, items):
        return [{"kind": "clock", "fields": items[0]}]

    def disconnect(self, items):
        return {"seen": f"worker_exit:{items[0]}"}
