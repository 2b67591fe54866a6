"""Transformer for grammars/readings.lark: slime's, Megatron-LM's, SGLang's and vLLM V1's
memory readings, as gpu_memory samples (every size there is GiB or MiB as torch counts)."""

from __future__ import annotations

import lark

from oomlens.events import to_bytes

# slime's dict keys -> the reading's fields (GiB); the host_ ones are the node's, psutil's
SLIME = {
    "total_GB": "total_bytes",
    "free_GB": "free_bytes",
    "used_GB": "used_bytes",
    "allocated_GB": "allocated_bytes",
    "reserved_GB": "reserved_bytes",
    "host_total_GB": "host_total_bytes",
    "host_available_GB": "host_available_bytes",
    "host_used_GB": "cpu_used_bytes",
}
# Megatron's report_memory: "cached" was torch's word for reserved before 1.4
MEGATRON = {
    "allocated": "allocated_bytes",
    "max allocated": "peak_allocated_bytes",
    "reserved": "reserved_bytes",
    "max reserved": "peak_reserved_bytes",
    "cached": "reserved_bytes",
    "max cached": "peak_reserved_bytes",
}


def _reading(label: str, rank: object = None, **fields: object) -> dict:
    draft: dict = {"kind": "gpu_memory", "memory": "gpu", "fields": {"label": label, **fields}}
    if rank is not None:
        draft["rank"] = int(str(rank).strip("[]").split()[1])
    return draft


def _gpu(text: str) -> int | None:
    """The device index of slime's 'gpu' entry ("0", "cuda:0", "npu:3")."""
    tail = text.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def slime_usage(self, items):
        rank, label, *entries = items
        fields = {}
        gpu = None
        for key, value in entries:
            if key == "gpu":
                gpu = _gpu(value)
            elif key in SLIME and value is not None:
                fields[SLIME[key]] = to_bytes(value)
        draft = _reading(f"slime {str(label).strip()}", rank, **fields)
        if gpu is not None:
            draft["gpu"] = gpu
        return draft

    def entry(self, items):
        key, value = items
        text = str(value)
        return key.strip("'"), text.strip("'") if value.type == "QUOTED" else text

    def slime_peak(self, items):
        rank, label, allocated, reserved = items
        return _reading(f"slime peak {str(label).strip()}", rank, peak_allocated_bytes=to_bytes(allocated), peak_reserved_bytes=to_bytes(reserved))

    def megatron(self, items):
        rank, label, *pairs = items
        fields = {MEGATRON[key]: to_bytes(value, "MiB") for key, value in pairs}
        return _reading("megatron" + (f" {label}" if label else ""), rank, **fields)

    def m_item(self, items):
        return str(items[0]), items[1]

    def sg_load(self, items):
        fields: dict = {}
        for item in items:
            fields.update(item or {})
        return _reading("sglang load weight", **fields)

    def sg_avail(self, items):
        return {"free_bytes": to_bytes(items[0])}

    def sg_usage(self, items):
        return {"weights_bytes": to_bytes(items[-1])}

    def sg_elapsed(self, items):
        return {"load_seconds": float(items[0])}

    def sg_other(self, items):
        return None

    def sg_kv(self, items):
        tokens = next((i for i in items if isinstance(i, int)), None)
        sizes = [i for i in items if isinstance(i, float)]
        total = to_bytes(sum(sizes)) if sizes else None
        return _reading("sglang kv cache", kv_cache_tokens=tokens, kv_cache_bytes=total)

    def kv_tokens(self, items):
        return int(items[0])

    def kv_size(self, items):
        return float(items[-1])

    def sg_pool(self, items):
        return _reading("sglang memory pool", free_bytes=to_bytes(items[0]))

    def sg_graph(self, items):
        _graph, _seconds, usage, avail = items
        return _reading("sglang cuda graph", graph_bytes=None if usage is None else to_bytes(usage), free_bytes=None if avail is None else to_bytes(avail))

    def vllm_tokens(self, items):
        return _reading("vllm kv cache tokens", kv_cache_tokens=int(str(items[0]).replace(",", "")))
