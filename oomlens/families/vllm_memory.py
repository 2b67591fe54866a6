"""Transformer for grammars/vllm_memory.lark: why a vLLM engine could not start, in bytes.

Each message rule names its error with a short stable code and returns the fields it
read, merged with those of the clause nested in it (a message cut anywhere still parses).
"""

from __future__ import annotations

from typing import Any

import lark

from oomlens.events import to_bytes

# every draft carries these (they are the fold identity and what consumers read), null when unknown
ALWAYS = (
    "error",
    "max_model_len",
    "kv_cache_tokens",
    "needed_bytes",
    "available_bytes",
    "estimated_max_model_len",
    "free_bytes",
    "total_bytes",
    "gpu_memory_utilization",
    "requested_bytes",
)


def _merge(*parts: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        out.update(part or {})
    return out


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def message(self, items):
        fields = dict.fromkeys(ALWAYS) | items[0]
        device = fields.get("device")
        gpu = int(device.rsplit(":", 1)[1]) if device else None
        return {"kind": "vllm_memory_error", "memory": "gpu", "gpu": gpu, "fields": fields}

    def no_kv(self, items):
        return {"error": "no_kv_cache_memory"}

    def v0_seq_len(self, items):
        length, rest = items
        return _merge({"error": "max_seq_len_exceeds_kv_cache", "max_model_len": int(length)}, rest)

    def v0_kv(self, items):
        return {"kv_cache_tokens": int(items[0])}

    def v1_seq_len(self, items):
        length, rest = items
        return _merge({"error": "max_seq_len_exceeds_kv_cache", "max_model_len": int(length)}, rest)

    def v1_needed(self, items):
        return _merge({"needed_bytes": items[0]}, items[1])

    def v1_available(self, items):
        return _merge({"available_bytes": items[0]}, items[1])

    def estimate(self, items):
        return items[0]

    def estimated(self, items):
        return {"estimated_max_model_len": int(items[0])}

    def startup(self, items):
        device, free, total, unit, check = items
        head = {
            "error": "startup_free_memory",
            "device": str(device) if device else None,
            "free_bytes": to_bytes(free, unit),
            "total_bytes": to_bytes(total, unit),
        }
        return _merge(head, check)

    def desired(self, items):
        fraction, requested = items
        return {"compared_with": "gpu_memory_utilization", "gpu_memory_utilization": float(fraction), "requested_bytes": requested}

    def budget(self, items):
        return {"compared_with": "budget_excluding_external_weights"}

    def external(self, items):
        device = items[0]
        return {"error": "external_weights_exceed_utilization", "device": str(device) if device else None}

    def size(self, items):
        number, unit = items
        return to_bytes(number, unit, signed=True)  # the KV cache left can be below zero: it did not fit
