"""Transformer for grammars/systemd.lark: systemd-oomd's kills and the service manager's
word that the kernel's OOM killer killed a process of a unit."""

from __future__ import annotations

import lark


def _draft(supervisor: str, action: str, target: str, **more: object) -> dict:
    fields = {"supervisor": supervisor, "action": action, "target": target, "count": None, **more}
    return {"kind": "supervisor_oom", "memory": "host", "fields": fields}


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def oomd(self, items):
        _unit, cgroup, why = items
        # the unit is the cgroup's last part: what the service manager's own line names
        return _draft("systemd-oomd", why.pop("action"), str(cgroup).rstrip("/").rsplit("/", 1)[-1], cgroup=str(cgroup), **why)

    def pressure(self, items):
        _parent, now, limit, _rest = items
        return {"action": "oomd kill: memory pressure", "pressure_pct": float(now[:-1]), "pressure_limit_pct": float(limit[:-1])}

    def swap(self, items):
        used, total, swap_used, swap_total, _rest = (None if i is None else int(i) if str(i).isdigit() else None for i in items)
        return {
            "action": "oomd kill: memory and swap used",
            "used_bytes": used,
            "total_bytes": total,
            "swap_used_bytes": swap_used,
            "swap_total_bytes": swap_total,
        }

    def oomd_unit(self, items):
        unit, *count = items
        return _draft("systemd-oomd", "oomd kill", str(unit), count=int(count[0]) if count else None)

    def unit(self, items):
        return _draft("systemd", "unit OOM kill", str(items[0]))
