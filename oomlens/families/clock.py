"""Transformer for grammars/clock.lark: what a line tells of its clock (clues, not events)."""

from __future__ import annotations

import lark

from oomlens.times import stamp_of_groups


class Transformer(lark.Transformer):
    def start(self, items):
        return [{"kind": "clock", "fields": items[0]}]

    def abort(self, items):
        signal, epoch, _rest = items
        utc = stamp_of_groups({"epoch": str(epoch)})
        assert utc is not None  # an epoch always spells a time
        return {"utc": utc._replace(zone=None).iso(), "signal": str(signal)}  # UTC by the field's name

    def disconnect(self, items):
        return {"seen": f"worker_exit:{items[0]}"}
