"""Transformer for grammars/cann_oom.lark: Ascend CANN's EL0004, an NPU allocation that failed.

It is the same occurrence as torch's allocator failures (kind cuda_oom) on another device:
the draft carries every field a cuda_oom draft carries, and `device` npu."""

from __future__ import annotations

from typing import Any

import lark

from oomlens.families.cuda_oom import ALWAYS


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def cann(self, items):
        fields: dict[str, Any] = dict.fromkeys(ALWAYS) | {"torch_variant": "cann", "allocator": "cann", "exception": None}
        for part in items:
            fields.update(part or {})
        return {"kind": "cuda_oom", "memory": "gpu", "device": "npu", "gpu": fields["gpu"], "fields": fields}

    def rt_failed(self, items):
        return {"driver_reason": str(items[0]).strip()}

    def rt_malloc(self, items):
        purpose, _type, size, device = items
        return {"purpose": str(purpose).strip(), "requested_bytes": int(size), "gpu": int(device)}
