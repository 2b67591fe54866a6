"""Transformer for grammars/gpu_memory.lark: framework GPU-memory samples as byte counts.

Every draft carries the contract fields (`label`, `allocated_bytes`, `reserved_bytes`,
`used_bytes`, `total_bytes`, null when the wording lacks them) plus what its wording adds.
"""

from __future__ import annotations

from typing import Any

import lark

from oomlens.events import GIB, sized, to_bytes
from oomlens.kinds import sizes_in_contract

CONTRACT = ("allocated_bytes", "reserved_bytes", "used_bytes", "total_bytes")

# vLLM V1 MemoryProfilingResult items ("name: XGiB;") and V0 results ("name=X[GiB]")
PROFILE_ITEMS = {
    "Total non KV cache memory": "non_kv_cache_bytes",
    "torch peak memory increase": "activation_peak_bytes",
    "non-torch forward increase memory": "non_torch_bytes",
    "weights memory": "weights_bytes",
}
RESULT_ITEMS = {
    "duration": "profile_seconds",
    "total_gpu_memory": "total_bytes",
    "initial_memory_usage": "initial_used_bytes",
    "peak_torch_memory": "peak_torch_bytes",
    "memory_usage_post_profile": "post_profile_bytes",
    "non_torch_memory": "non_torch_bytes",
    "kv_cache_size": "kv_cache_bytes",
    "gpu_memory_utilization": "gpu_memory_utilization",
}
# veRL step metrics (GiB, peaks since the last reset)
STEP_METRICS = {
    "perf/max_memory_allocated_gb": "allocated_bytes",
    "perf/max_memory_reserved_gb": "reserved_bytes",
    "perf/cpu_memory_used_gb": "cpu_used_bytes",
}


def _draft(label: str | None, fields: dict, memory: str = "gpu") -> dict:
    """A gpu_memory draft whose contract fields are present even when unknown. Sizes are read
    signed (vLLM's KV cache left can be below zero: it did not fit); one below zero that the
    contract does not type signed is no reading (veRL prints `-1` for a device it could not
    query): not known."""
    merged = {"label": label, **dict.fromkeys(CONTRACT), **fields}
    return {"kind": "gpu_memory", "memory": memory, "fields": sizes_in_contract("gpu_memory", merged)}


def _gib(number) -> int | None:
    """Bytes of a DECIMAL or NUMBER token in GiB (to_bytes without its comma and unit
    handling: these tokens have neither, and a memory line has up to four of them); None
    for a size no memory has, as to_bytes."""
    return None if number is None else sized(float(number) * GIB)


@lark.v_args(inline=True)  # each method names its children (grammars.Family's shape plans call it so)
class Transformer(lark.Transformer):
    def start(self, *items):
        return list(items)

    # -- veRL / EasyR1 ----------------------------------------------------------------------

    def framework(self, head, amounts):
        head = head or {"label": None, "phase": None, "role": None}
        return _draft(head.pop("label"), {**head, **amounts})

    def phased_head(self, role, phase, label):
        return {"label": f"{phase} {label}", "phase": phase.lower(), "role": None if role is None else str(role)}

    def plain_head(self, label):
        return {"label": str(label), "phase": None, "role": None}

    def gb_wording(self, allocated, reserved, more):
        return {"allocated_bytes": _gib(allocated), "reserved_bytes": reserved, **(more or {})}

    def reserved_gib(self, gib):
        return _gib(gib)

    def reserved_mib(self, mib):
        return to_bytes(mib, "MiB")

    def roll_tail(self, peak, rss, used):
        return {"peak_reserved_bytes": _gib(peak), "rss_bytes": _gib(rss), "used_bytes": _gib(used)}

    def used_total(self, used, total):
        return {"used_bytes": _gib(used), "total_bytes": _gib(total)}

    def unit_wording(self, allocated, reserved):
        return {"allocated_bytes": _gib(allocated), "reserved_bytes": _gib(reserved)}

    def decimal_wording(self, allocated, reserved):
        return {"allocated_bytes": sized(float(allocated) * 10**9), "reserved_bytes": sized(float(reserved) * 10**9)}

    def device_wording(self, used, total):
        return {"used_bytes": _gib(used), "total_bytes": _gib(total)}

    # -- vLLM -------------------------------------------------------------------------------

    def size(self, number, unit):
        return to_bytes(number, unit, signed=True)

    def sleep(self, freed, used):
        return _draft("vllm sleep", {"freed_bytes": freed, "used_bytes": used})

    def cumem(self, freed, backed_up, discarded, _rest):
        return _draft("vllm cumem sleep", {"freed_bytes": freed, "backed_up_bytes": backed_up, "discarded_bytes": discarded})

    def profiling(self, seconds, *parts):
        fields = {"profile_seconds": float(seconds)}
        for part in parts:
            fields.update(part or {})
        return _draft("vllm memory profiling", fields)

    def instance(self, total, utilization, usable):
        return {"total_bytes": total, "gpu_memory_utilization": float(utilization), "instance_bytes": usable}

    def breakdown(self, *items):
        names = ("weights_bytes", "non_torch_bytes", "activation_peak_bytes", "kv_cache_bytes")
        return dict(zip(names, items, strict=False))  # a line may stop after any of them

    def profile_item(self, name, value):
        return {PROFILE_ITEMS[name]: value} if name in PROFILE_ITEMS else {}

    def profile_results(self, *items):
        fields: dict[str, Any] = {}
        for item in items:
            fields.update(item or {})
        return _draft("vllm memory profiling", fields)

    def result_item(self, name, number, unit):
        field = RESULT_ITEMS.get(name)
        if field is None:
            return {}
        if field.endswith("_bytes"):  # a size printed without its unit: which unit is not known
            return {field: to_bytes(number, unit, signed=True) if unit else None}
        return {field: float(number)}

    def kv_cache(self, size, _tail):
        return _draft("vllm available kv cache", {"kv_cache_bytes": size})

    def startup_free(self, device, free, total, unit, utilization, requested, _rest):
        free_bytes, total_bytes = to_bytes(free, unit), to_bytes(total, unit)
        used = None if free_bytes is None or total_bytes is None else sized(total_bytes - free_bytes)
        fields = {
            "free_bytes": free_bytes,
            "total_bytes": total_bytes,
            "used_bytes": used,
            "gpu_memory_utilization": float(utilization),
            "requested_bytes": requested,
        }
        return _draft("vllm startup free memory", {**fields, "device": str(device) if device else None})

    def loading(self, _phrase, weights, seconds):
        return _draft("vllm model loading", {"weights_bytes": weights, "load_seconds": None if seconds is None else float(seconds)})

    # -- veRL step metrics ------------------------------------------------------------------

    def step(self, number, *metrics):
        fields = {"step": int(number), **dict.fromkeys(STEP_METRICS.values())}
        for name, value in metrics:
            if name in STEP_METRICS:
                fields[STEP_METRICS[name]] = _gib(value)
        on_gpu = fields["allocated_bytes"] is not None or fields["reserved_bytes"] is not None
        return _draft("step metrics", fields, "gpu" if on_gpu else "host")

    # -- DeepSpeed's see_memory_usage ------------------------------------------------------

    def deepspeed(self, allocated, peak_allocated, reserved, peak_reserved, peak_ma):
        fields = {"allocated_bytes": allocated, "peak_allocated_bytes": peak_allocated, "reserved_bytes": reserved, "peak_reserved_bytes": peak_reserved}
        if peak_ma is not None:
            fields["peak_ma_bytes"] = peak_ma
        if peak_reserved is None:  # DeepSpeed prints all four: the line was cut (a wrap may hold the rest)
            fields["truncated"] = True
        return _draft("deepspeed see_memory_usage", fields)

    def ds_size(self, number, unit):  # 1024-based, as torch counts, whatever the unit says
        return sized(float(number) * (GIB if unit == "GB" else GIB >> 10))

    def deepspeed_cpu(self, used, percent):
        return _draft("deepspeed cpu virtual memory", {"cpu_used_bytes": _gib(used), "cpu_percent": None if percent is None else float(percent)}, "host")

    def metric(self, name, value):
        return str(name), value if value.type == "NUMBER" else None
