"""Transformer for grammars/cuda_oom.lark: an accelerator's allocation that failed, in bytes.

One kind for every device: torch's CUDA allocator, its hipified ROCm build, torch_npu's
and the XPU's copies of it, and MPS; the draft's `device` says which.

Every clause rule returns the fields it read, merged with those of the clause nested in
it (the grammar nests the clauses so that a message cut anywhere still parses). `message`
turns the merged fields into one `cuda_oom` draft with every contract field present.
"""

from __future__ import annotations

from typing import Any

import lark

from oomlens.events import sized, to_bytes
from oomlens.families import host_alloc

CONTRACT = ("gpu", "requested_bytes", "total_bytes", "free_bytes", "allocated_bytes", "reserved_bytes", "process_bytes")
ALWAYS = (*CONTRACT, "torch_variant", "allocator")  # present in every draft, null when unknown
ONE_EXABYTE = 1 << 60  # the caching allocator refuses any request of this size or more
# the word before "out of memory" / "error: out of memory" -> the device (data/devices.toml)
DEVICES = {"CUDA": "cuda", "HIP": "rocm", "NPU": "npu", "XPU": "xpu", "MPS": "mps"}


def _merge(*parts: dict[str, Any] | None) -> dict[str, Any]:
    """Fields of several clauses as one dict; list-valued fields (processes) are joined."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in (part or {}).items():
            if isinstance(value, list):
                out.setdefault(key, []).extend(value)
            else:
                out[key] = value
    return out


def pinned(fields: dict[str, Any]) -> dict[str, Any]:
    """A host_alloc_failure draft for a CUDA error raised by torch's host (pinned-memory)
    allocator: THCCachingHostAllocator's cudaHostAlloc asks the host for page-locked memory."""
    found = dict.fromkeys(host_alloc.ALWAYS) | {"allocator": "pinned", "what": host_alloc.WHAT["pinned"]}
    found |= {k: fields.get(k) for k in ("exception", "where", "torch_variant")}
    return {"kind": "host_alloc_failure", "memory": "host", "fields": found}


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def message(self, items):
        exception, fields = items
        fields = dict.fromkeys(ALWAYS) | fields
        fields["exception"] = str(exception)[:-1] if exception else None
        allocated, reserved, unallocated = (
            fields["allocated_bytes"],
            fields["reserved_bytes"],
            fields.get("reserved_unallocated_bytes"),
        )
        # P1 prints the reservation in total, P3 only its unallocated part (1.0-era: "cached")
        if reserved is None and allocated is not None and unallocated is not None:
            fields["reserved_bytes"] = allocated + unallocated
        if unallocated is None and allocated is not None and reserved is not None:
            fields["reserved_unallocated_bytes"] = reserved - allocated
        if "HostAllocator" in (fields.get("where") or ""):  # cudaHostAlloc failed: pinned host memory ran out
            return pinned(fields)
        device = fields.pop("device", "cuda")  # what prints no device word is CUDA's (NCCL, cuBLAS, cumem, ...)
        return {"kind": "cuda_oom", "memory": "gpu", "device": device, "gpu": fields["gpu"], "fields": fields}

    # -- the caching allocator ------------------------------------------------------------

    def caching(self, items):
        _ellipsis, word, *detail = items  # the detail is absent when the message was cut after its first sentence
        device = DEVICES.get(str(word).split(" ", 1)[0])  # "Out of memory." names none
        return _merge({"allocator": "caching", "torch_variant": None, "device": device}, detail[0] if detail else None)

    def exabyte(self, items):
        return {"torch_variant": "1EB", "requested_min_bytes": ONE_EXABYTE}

    def rejected(self, items):
        return {"torch_variant": "fraction_rejected", "requested_bytes": items[0]}

    def sized(self, items):
        size, detail = items
        return _merge({"requested_bytes": size}, detail)

    def p1(self, items):
        gpu, rest = items
        return _merge({"torch_variant": "P1", "gpu": int(gpu)}, rest)

    def p1_capacity(self, items):
        return _merge({"total_bytes": items[0]}, items[1])

    def p1_allocated(self, items):
        return _merge({"allocated_bytes": items[0]}, items[1])

    def p1_free(self, items):
        return _merge({"free_bytes": items[0]}, items[1])

    def p1_reserved(self, items):
        allowed, size = items
        return _merge(allowed, {"reserved_bytes": size})

    def p1_cached(self, items):
        return {"reserved_unallocated_bytes": items[0]}

    def p1_active(self, items):
        return _merge({"active_bytes": items[0]}, items[1])

    def allowed(self, items):
        return {"allowed_bytes": items[0]}

    def p3(self, items):
        gpu, rest = items
        return _merge({"gpu": int(gpu), "processes": []}, rest)

    def capacity(self, items):
        return _merge({"torch_variant": "P3", "total_bytes": items[0]}, items[1])

    def capacity_typo(self, items):
        return _merge({"torch_variant": "P2", "total_bytes": items[0]}, items[1])

    def p3_free(self, items):
        return _merge({"free_bytes": items[0]}, *items[1:])

    def process(self, items):
        pid, size = items
        return {"processes": [{"pid": int(pid), "bytes": size}]}

    def own(self, items):
        return {"process_bytes": items[0]}

    def p3_allocated(self, items):
        allowed, size, rest = items
        return _merge(allowed, {"allocated_bytes": size}, rest)

    def p3_reserved(self, items):
        private, size = items
        return _merge(private, {"reserved_unallocated_bytes": size})

    def private_pool(self, items):
        return {"private_pool_bytes": items[0]}

    # -- torch_npu's workspace allocator, its failed first op, and MPS -------------------

    def workspace(self, items):
        requested, gpu, total, free = items  # a message cut short loses its sizes from the end
        return {
            "torch_variant": "npu_workspace",
            "allocator": "workspace",
            "requested_bytes": requested,
            "gpu": int(gpu),
            "total_bytes": total,
            "free_bytes": free,
        }

    def device_id(self, items):
        return {"torch_variant": "npu_device_id", "gpu": int(items[0])}

    def mps(self, items):
        """MPS refuses what would pass its high watermark ("max allowed"): that limit is the
        total it can use, and what it and others hold leaves the rest free under it."""
        allocated, other, allowed, request = items
        free = sized(max(allowed - allocated - other, 0)) if None not in (allocated, other, allowed) else None
        head = {"torch_variant": "mps", "allocator": "mps", "device": "mps", "allocated_bytes": allocated, "other_bytes": other}
        return _merge(head, {"allowed_bytes": allowed, "total_bytes": allowed, "free_bytes": free}, request)

    def mps_request(self, items):
        return {"requested_bytes": items[0], "pool": str(items[1])}

    # -- the cudaMallocAsync backend ------------------------------------------------------

    def async_limit(self, items):
        gpu, rest = items
        head = {"torch_variant": "cudaMallocAsync", "allocator": "cudaMallocAsync"}
        return _merge(head, {"gpu": int(gpu) if gpu is not None else None}, rest)

    def async_allocated(self, items):
        return _merge({"allocated_bytes": items[0]}, items[1])

    def async_requested(self, items):
        return _merge({"requested_bytes": items[0]}, items[1])

    def async_total(self, items):
        return _merge({"total_bytes": items[0]}, items[1])

    def async_free(self, items):
        return _merge({"free_bytes": items[0]}, items[1])

    def async_allowed(self, items):
        return {"allowed_bytes": items[0]}

    # -- outside the caching allocator ----------------------------------------------------

    def cuda_error(self, items):
        return {"torch_variant": "cuda_error", "device": DEVICES[str(items[0]).split(" ", 1)[0]]}

    def cuda_runtime_error(self, items):
        _code, where = items  # cudaErrorMemoryAllocation, (2) in every release that prints it
        return {"torch_variant": "cuda_error", "where": str(where) if where else None}

    def cumem(self, items):
        return {"torch_variant": "cuda_error", "allocator": "cumem", "where": str(items[0]) if items[0] else None}

    def cublas(self, items):
        call = items[0]
        return {"torch_variant": "cublas", "call": str(call).strip("`") if call else None}

    def nccl(self, items):
        where, version, failure = items
        return _merge({"where": str(where), "nccl_version": str(version) if version else None}, failure)

    def nccl_failure(self, items):
        code = items[0]
        return {"torch_variant": "nccl", "cuda_error_code": int(code) if code is not None else None}

    def memory_saver(self, items):
        code, file, func, line = items  # a message cut short loses its fields from the end
        where = f"{file[5:]}:{line[5:]}" if file and line else None
        fields = {"torch_variant": "memory_saver", "allocator": "torch_memory_saver", "cuda_error_code": int(code)}
        return fields | {"where": where, "call": str(func)[5:] if func else None}

    def size(self, items):
        number, unit = items
        return to_bytes(number, unit)
