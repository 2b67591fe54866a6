"""Transformer for grammars/host_alloc.lark: host memory that ran out inside a process.

Every rule returns the fields it read; `message` makes one `host_alloc_failure` draft with
every field its identity and its sentence read present (null when the message lacks it)."""

from __future__ import annotations

from typing import Any

import lark

from oomlens.events import WRAPPED, to_bytes

ALWAYS = ("allocator", "exception", "message", "requested_bytes", "errno", "error", "where")
# what failed, as the kind's sentence tells it ({what} in data/kinds.toml)
WHAT = {
    "torch_cpu": "torch's CPU allocator",
    "numpy": "numpy",
    "python": "Python (MemoryError)",
    "cxx": "C++ new (std::bad_alloc)",
    "fork": "fork (ENOMEM)",
    "pinned": "pinned host memory",
}


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def message(self, items):
        exception, found = items
        fields: dict[str, Any] = dict.fromkeys(ALWAYS) | found
        if exception is not None:
            fields["exception"] = str(exception)[:-1]
        fields["what"] = WHAT[fields["allocator"]]
        draft: dict[str, Any] = {"kind": "host_alloc_failure", "memory": "host", "fields": fields}
        for key in ("pid", "actor", "method"):  # Ray's wrapper names the process that raised it
            if key in fields:
                draft[key] = fields.pop(key)
        return draft

    def torch_cpu(self, items):
        enforce, size, errno = items
        where = str(enforce).split("]", 1)[0].removeprefix("[enforce fail at ") if enforce else None
        return {"allocator": "torch_cpu", "requested_bytes": int(size), "where": where} | (errno or {})

    def errno(self, items):
        code, text = items
        return {"errno": int(code), "error": str(text).strip()}

    def numpy(self, items):
        *size, shape, dtype = items
        return {"allocator": "numpy", "requested_bytes": size[0] if size else None, "shape": str(shape), "dtype": str(dtype).strip()}

    def python(self, items):
        head, *rest = items if items else (None,)
        detail = rest[0] if rest else None
        if isinstance(detail, dict):
            return detail | {"exception": "MemoryError"}
        message = str(detail).strip() if detail is not None else None
        allocator = "cxx" if message and "bad_alloc" in message else "python"
        return {"allocator": allocator, "exception": "MemoryError", "message": message}

    def ray_task(self, items):
        _wrapper, task, pid = items
        actor, _, method = str(task).rpartition(".")
        # the caller's view: the failure's own report in the same file (its MemoryError or numpy
        # line below the header) takes it as one more source (events._fold_wrapped)
        found = {"allocator": "python", "exception": "MemoryError", "method": method, "actor": actor or None, "reason": WRAPPED}
        return found | ({"pid": int(pid)} if pid is not None else {})

    def bad_alloc(self, items):
        return {"allocator": "cxx", "exception": "std::bad_alloc", "message": "std::bad_alloc"}

    def fork(self, items):
        return {"allocator": "fork", "errno": 12, "error": "Cannot allocate memory"}

    def pinned(self, items):
        size, allocated, reserved = items
        return {
            "allocator": "pinned",
            "requested_bytes": int(size),
            "allocated_bytes": int(allocated) if allocated is not None else None,
            "reserved_bytes": int(reserved) if reserved is not None else None,
        }

    def size(self, items):
        number, unit = items
        return to_bytes(number, unit)
