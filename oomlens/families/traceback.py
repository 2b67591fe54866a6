"""Transformer for grammars/traceback.lark: where in the code a failure surfaced."""

from __future__ import annotations

import lark


class Transformer(lark.Transformer):
    def start(self, items):
        frames, tasks = [], []
        for item in items:
            if item is None:
                continue
            if "func" in item:
                frames.append(item)
            elif "code" in item and frames and frames[-1]["code"] is None:
                frames[-1]["code"] = item["code"]
            elif "method" in item:
                tasks.append(item)
        if not (frames or tasks):
            return []
        fields: dict = {"frames": frames}
        if tasks:
            fields["task"] = tasks[-1]
        return [{"kind": "context", "fields": fields}]

    def frame(self, items):
        path, _line, func, _tail = items
        return {"path": str(path)[1:-1], "func": str(func), "code": None}

    def code(self, items):
        return {"code": str(items[0]).strip()}

    def caret(self, items):
        return None

    def task(self, items):
        error, qualname, pid, host, actor_id, _repr = items
        actor, _, method = str(qualname).rpartition(".")
        return {
            "error": _error_class(str(error)) if error else None,
            "actor": actor or None,
            "method": method,
            "pid": int(pid),
            "ip": str(host) if host else None,
            "actor_id": str(actor_id) if actor_id else None,
        }

    def rlinf_task(self, items):
        actor, method, _rest = items
        return {"error": None, "actor": str(actor), "method": str(method), "pid": None, "ip": None, "actor_id": None}

    def vllm_call(self, items):
        method, _rest = items
        return {"error": None, "actor": None, "method": str(method), "pid": None, "ip": None, "actor_id": None}


def _error_class(text: str) -> str:
    """'ray.exceptions.RayTaskError(OutOfMemoryError):' -> 'OutOfMemoryError'."""
    text = text.rstrip(":")
    if text.startswith("Unhandled error"):
        return "Unhandled error"
    if "(" in text:
        return text[text.index("(") + 1 : -1].rsplit(".", 1)[-1]
    return text.rsplit(".", 1)[-1]
