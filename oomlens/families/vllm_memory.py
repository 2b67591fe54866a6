"""Transformer for grammars/vllm_memory.lark: why a vLLM engine could not start, in bytes.

Each message rule names its error with a short stable code and returns the fields it
read, merged with those of the clause nested in it (a message cut anywhere still parses).
"""

from __future__ import annotations

from typing import Any

import lark

from oomlens.events import to_bytes
from oomlens.kinds import sizes_in_contract

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
    "raise_setting",
    "lower_setting",
)
# a setting whose KV cache is host memory: vLLM's CPU backend
HOST_SETTINGS = ("VLLM_CPU_KVCACHE_SPACE",)


def _merge(*parts: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        out.update(part or {})
    return out


def _name(token: Any) -> str | None:
    """A setting as the message names it, as its name in vLLM's config: `--kv-cache-memory-bytes`
    is kv_cache_memory_bytes; an environment variable keeps its name."""
    if token is None:
        return None
    name = str(token).strip("`")
    return name.removeprefix("--").replace("-", "_") if name.startswith("--") else name


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def cpu_kv_space(self, items):
        auto, gib = items[0] if len(items) == 4 else None, items[-3]
        return {"kind": "setting", "fields": {"settings": {"VLLM_CPU_KVCACHE_SPACE": None if auto else float(gib)}}}

    def message(self, items):
        fields = sizes_in_contract("vllm_memory_error", dict.fromkeys(ALWAYS) | items[0])
        device = fields.get("device")
        gpu = int(device.rsplit(":", 1)[1]) if device else None
        if fields.get("backend") == "cpu" or fields["raise_setting"] in HOST_SETTINGS:  # the CPU backend: its KV cache is the host's memory
            return {"kind": "vllm_memory_error", "memory": "host", "fields": fields | {"backend": "cpu"}}
        draft = {"kind": "vllm_memory_error", "memory": "gpu", "gpu": gpu, "fields": fields}
        if device:  # "cuda:0", "npu:0", "xpu:0": torch's device type (a ROCm build says cuda too)
            draft["device"] = device.split(":", 1)[0]
        return draft

    def no_kv(self, items):
        return _merge({"error": "no_kv_cache_memory"}, items[0])

    def v0_seq_len(self, items):
        length, rest = items
        return _merge({"error": "max_seq_len_exceeds_kv_cache", "max_model_len": int(length)}, rest)

    def v0_kv(self, items):
        tokens, hint = items
        return _merge({"kv_cache_tokens": int(tokens)}, hint)

    def v1_seq_len(self, items):
        length, rest = items
        return _merge({"error": "max_seq_len_exceeds_kv_cache", "max_model_len": int(length)}, rest)

    def v1_needed(self, items):
        return _merge({"needed_bytes": items[0]}, items[1])

    def v1_available(self, items):
        available, estimate, hint = items
        return _merge({"available_bytes": available}, estimate, hint)

    def estimate(self, items):
        return items[0]

    def hint(self, items):
        raised, _note, lowered = items if items else (None, None, None)
        return {"raise_setting": _name(raised), "lower_setting": _name(lowered)}

    def cpu_node(self, items):
        node, available, total, unit, check = items
        head = {"backend": "cpu", "numa_node": int(node), "free_bytes": to_bytes(available, unit), "total_bytes": to_bytes(total, unit)}
        return _merge(head, check)

    def cpu_startup(self, items):
        fraction, requested, hint = items
        return _merge({"error": "cpu_startup_memory", "gpu_memory_utilization": float(fraction), "requested_bytes": requested}, hint)

    def cpu_kv(self, items):
        kv, worker, unit, hint = items
        found = {"error": "cpu_kv_cache_memory", "needed_bytes": to_bytes(kv, unit), "requested_bytes": to_bytes(worker, unit) if worker else None}
        return _merge(found, hint)

    def cpu_hint(self, items):
        flags = [_name(flag) for flag in items if flag is not None]
        return {"lower_setting": ", ".join(f for f in flags if f) or None}

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
