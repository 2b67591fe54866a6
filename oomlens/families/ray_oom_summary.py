"""Transformer for grammars/ray_oom_summary.lark: raylet's periodic OOM kill count."""

from __future__ import annotations

import lark


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def summary(self, items):
        killed, crashed = items
        fields = {"killed": int(killed), "crashed_other": None, "node_id": None}
        if crashed is None:
            fields["truncated"] = True
        draft = {"kind": "ray_oom_summary", "memory": "host", "fields": fields}
        if crashed:
            fields.update(crashed["fields"])
            if crashed.get("node"):
                draft["node"] = crashed["node"]
        return draft

    def crashed(self, items):
        count, node = items
        out = {"fields": {"crashed_other": int(count)}}
        if node:
            out["fields"]["node_id"] = node["node_id"]
            out["node"] = node["node"]
        if not node or node["node"] is None:
            out["fields"]["truncated"] = True  # the paste ends inside the node's ID
        return out

    def node(self, items):
        return {"node_id": str(items[0]), "node": str(items[1]) if items[1] is not None else None}

    def tail(self, items):
        return None
