"""Transformer for grammars/ray_oom.lark: a Ray memory-monitor kill report, any generation.

Each clause becomes a small fact; `start` assembles the facts into one `ray_oom_kill`
draft whose fields follow the contract (node used/total bytes, usage fraction, threshold,
the killed workers, the Top-10 table, which generation of the report it was).
"""

from __future__ import annotations

import math
import re
from typing import Any

import lark

from ..events import count, sized, to_bytes

IP = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:]+)$")
RAY_TITLE = re.compile(r"^ray::(?P<what>[\w.<>-]+)")


def _gb(token: str) -> int | None:
    """A size as the report prints it: GB unless another unit is glued to the number."""
    return to_bytes(token, "GB")


def _fraction(token: str) -> float | None:
    """A share of the node's memory; one below zero (or no number, `nan`) is not known."""
    value = float(token)
    return value if 0 <= value < math.inf else None


def split_name(name: str) -> tuple[str | None, str | None]:
    """'reward_model_0:RewardModelRayActor.__init__' -> ('RewardModelRayActor', '__init__');
    'WorkerDict.generate_sequences' -> ('WorkerDict', 'generate_sequences'); a task -> (None, name)."""
    last = name.rsplit(":", 1)[-1].strip()
    if "." in last:
        actor, method = last.split(".", 1)
        return actor or None, method or None
    return None, last or None


# Bytes per unit of a Top-10 row, by the unit glued to its size (grammars/ray_oom.lark, TOP_MEM).
ROW_UNITS = {"GiB": 1 << 30, "GB": 10**9, "": 1 << 30}

# The page the report's suggestions link to, and the first release that links to it (formats.md
# §1.5, §1.5a: 2.56 keeps the old page though it already carries 2.57's "Since 2.56" tail).
DOCS_PAGES = {
    "ray-core/scheduling/ray-oom-prevention.html": (2, 2),
    "ray-observability/user-guides/debug-apps/debug-memory.html": (2, 57),
}


class Transformer(lark.Transformer):
    # -- clauses -> facts ----------------------------------------------------------------
    def retry(self, items):
        name, retries = items
        left: Any = int(retries) if retries.isdigit() else str(retries)
        return {"task_name": str(name), "oom_retries_left": left}

    def kill_details(self, items):
        return {"workers_killed": int(items[0])}

    def killing_task(self, items):
        spec = str(items[0])
        m = re.search(r"\btask_name=([^,]+)", spec)
        return {"task_spec_name": m.group(1)} if m else {}

    def kill_2_0(self, items):
        fact: dict[str, Any] = {"variant": "2.0", "killed_name": None}
        for item in items:
            if isinstance(item, dict):
                fact.update(item)
        return fact

    def dev_pid(self, items):
        return {"killed_pid": int(items[0])}

    def dev_task(self, items):
        return {"killed_task": str(items[0])}

    def dev_note(self, items):
        return None

    def header_task(self, items):
        return {"header": "task"}

    def header_workers(self, items):
        return {"workers_killed": int(items[0])}

    def memory_on_node(self, items):
        host, node_id, victim, usage = items
        fact: dict[str, Any] = {"host": str(host), "node_id": str(node_id), "line": host.line}
        if victim:
            fact["victim"] = victim
        if usage:
            fact.update(usage)
        return fact

    def victim(self, items):
        subject, facts = items
        return {"subject": str(subject), **(facts or {})}

    def victim_facts(self, items):
        *ids, name, pid, used = items
        id_kind, hex_id = next(((k, v) for k, v in reversed(ids) if v != "NIL_ID"), ids[-1])
        return {"id_kind": id_kind, "id": hex_id, "name": str(name).strip(), "pid": int(pid), "bytes": _gb(used)}

    def id_part(self, items):
        return str(items[0]), str(items[1])

    def usage(self, items):
        used, used_word, total, limit_word, fraction = items
        return {
            "node_used_bytes": _gb(used),
            "node_total_bytes": _gb(total),
            "usage_fraction": _fraction(fraction),
            "used_limit_words": used_word is not None or limit_word is not None,
        }

    def threshold_clause(self, items):
        return {"threshold": _fraction(items[0])}

    def killed_this(self, items):
        return {"worker_id": str(items[0])}

    def kill_reason(self, items):
        reason = items[0]
        if isinstance(reason, dict):
            return {**reason, "kill_reason_line": reason.pop("line")}
        return {"kill_reason": str(reason).strip(), "kill_reason_line": reason.line}

    def usage_reason(self, items):
        used, threshold, percent, limit, _word = items
        return {
            "kill_reason": "memory usage exceeded threshold",
            "used_bytes": int(used[:-1]),
            "threshold_bytes": int(threshold[:-1]),
            "node_limit_bytes": int(limit[:-1]),
            "line": used.line,
        }

    def object_store(self, items):
        return {}

    def policy(self, items):
        return {"policy_killed": int(items[0]), "policy_list_inline": items[1] is not None}

    def considered(self, items):
        return {"considered_list": True}

    def selected(self, items):
        return {"worker": {**items[0]["worker"], "selected": True}}

    def worker(self, items):
        kind, *entries = items
        values = dict(entries)
        actor = re.match(r"Actor\(([0-9a-f]*)\)", kind)
        entry = {
            "pid": int(values["pid"]) if values.get("pid", "").isdigit() else None,
            "name": values.get("task name"),
            "bytes": _gb(values["actual memory used"]) if "actual memory used" in values else None,
            "worker_id": values.get("worker ID"),
            "actor_id": actor.group(1) if actor else None,
            "selected": False,
        }
        return {"worker": entry}

    def entry(self, items):
        return str(items[0]).strip(), str(items[1]).strip()

    def idle_count(self, items):
        return {"idle_workers": int(items[0])}

    def idle_uss(self, items):
        return {"idle_workers_bytes": _gb(items[0])}

    def see_more(self, items):
        m = re.search(r"-ip ([^`\s]+)", str(items[0]))
        return {"ip_hint": m.group(1)} if m else {}

    def see_logs(self, items):
        return {}

    def top_header(self, items):
        return {"top_header": True}  # the table read from its top (its rows else say top_cut)

    top_title = top_header  # "Top 10 memory users:" stands right above the header

    def top_row(self, items):
        pid, mem, command = items
        number, unit = next(((mem[: -len(u)], u) for u in ROW_UNITS if u and mem.endswith(u)), (str(mem), ""))
        row = {"pid": count(pid), "bytes": sized(float(number) * ROW_UNITS[unit]), "command": str(command).strip() if command else ""}
        if row["pid"] is None or row["bytes"] is None:  # a pid or size no process has: the row as printed, said unread
            return {"unread_row": f"{pid} {mem} {row['command']}".rstrip(), "unit": ROW_UNITS[unit]}
        return {"row": row, "unit": ROW_UNITS[unit]}

    def suggestions(self, items):
        text = str(items[0] or "")
        fact: dict[str, Any] = {"suggestions": True, "retriable": not ("Set max_retries" in text or "Set max_restarts" in text)}
        for page, first in DOCS_PAGES.items():  # the page the suggestions link to moved in 2.57
            if page in text:
                fact["docs_from"] = first
        return fact

    def system_low(self, items):
        host, used, total, fraction, threshold, name, _actor, _rest = items
        fact = {
            "variant": "2.0",
            "host": str(host),
            "node_used_bytes": _gb(used),
            "node_total_bytes": _gb(total),
            "usage_fraction": _fraction(fraction),
            "threshold": _fraction(threshold),
        }
        if name:
            fact["killed_name"] = str(name)
        return fact

    def more_than(self, items):
        percent, host, used, total, _top_count = items
        return {
            "variant": "1.x",
            "node_name": str(host),
            "threshold": float(percent[:-1]) / 100,
            "usage_fraction": float(percent[:-1]) / 100,
            "header_sizes": (float(used), float(total)),
        }

    def shared_memory(self, items):
        number, unit = items
        return {"object_store_bytes": sized(float(number) * ROW_UNITS[str(unit)]), "unit": ROW_UNITS[str(unit)]}

    def other(self, items):
        return {}

    # -- facts -> one draft --------------------------------------------------------------
    def start(self, facts):
        facts = [f for f in facts if isinstance(f, dict)]
        merged: dict[str, Any] = {}
        workers, rows, unread, units = [], [], [], set()
        for fact in facts:
            units.add(fact.pop("unit", None))
            if "worker" in fact:
                workers.append(fact["worker"])
            elif "row" in fact:
                rows.append(fact["row"])
            elif "unread_row" in fact:
                unread.append(fact["unread_row"])
            else:
                merged.update(fact)
        if "header_sizes" in merged:  # "(X / Y GB)": 10^9 where the rows and shared size say GB, else GiB
            unit = ROW_UNITS["GB"] if ROW_UNITS["GB"] in units else ROW_UNITS["GiB"]
            used, total = merged.pop("header_sizes")
            merged["node_used_bytes"], merged["node_total_bytes"] = sized(used * unit), sized(total * unit)
        if not (workers or rows or unread or set(merged) - {"suggestions", "retriable", "docs_from"}):
            return []  # the suggestions alone tell no kill: the raylet's periodic summary ends with them too
        victim = merged.get("victim")
        killed = self._killed(merged, victim, workers)
        fields: dict[str, Any] = {
            "node_used_bytes": merged.get("node_used_bytes"),
            "node_total_bytes": merged.get("node_total_bytes"),
            "usage_fraction": merged.get("usage_fraction"),
            "threshold": merged.get("threshold"),
            "killed": killed,
            "top": rows,
            "ray_variant": self._variant(merged, victim, rows),
            "node_id": merged.get("node_id"),
        }
        if "threshold_bytes" in merged:
            fields["threshold_bytes"] = merged["threshold_bytes"]
            fields["node_limit_bytes"] = merged["node_limit_bytes"]
            if fields["threshold"] is None and merged["node_limit_bytes"]:
                fields["threshold"] = round(merged["threshold_bytes"] / merged["node_limit_bytes"], 6)
        if unread:  # Top-10 rows whose pid or size no process has: kept as printed, out of `top`
            fields["top_unread"] = unread
        if rows and not merged.get("top_header"):  # rows without the table's title or header: a paste cut above them, its top users gone
            fields["top_cut"] = True
        for name in ("kill_reason", "idle_workers", "idle_workers_bytes", "task_name", "oom_retries_left", "retriable", "worker_id", "object_store_bytes"):
            if name in merged:
                fields[name] = merged[name]
        if workers and merged.get("considered_list"):
            fields["considered"] = workers
        if not merged.get("suggestions") and fields["ray_variant"] not in ("1.x", "2.0"):
            fields["truncated"] = True
        draft: dict[str, Any] = {"kind": "ray_oom_kill", "memory": "host", "fields": fields}
        node = self._node(merged)
        if node:
            draft["node"] = node
        if killed:
            self._who(draft, killed[0], rows)
        return [draft]

    @staticmethod
    def _killed(merged: dict, victim: dict | None, workers: list[dict]) -> list[dict]:
        if victim and "pid" in victim:
            return [{"pid": victim["pid"], "name": victim["name"], "bytes": victim["bytes"], "worker_id": merged.get("worker_id")}]
        if victim:  # Ray 2.1 names no victim but the worker's id (events.name_workers may find its pid)
            return [{"pid": None, "name": None, "bytes": None, "worker_id": merged.get("worker_id")}] if merged.get("worker_id") else []
        if "killed_name" in merged:
            killed = {"pid": merged.get("killed_pid"), "name": merged["killed_name"], "bytes": None}
            if "killed_task" in merged:
                killed["task_id"] = merged["killed_task"]
            return [killed]
        chosen = [w for w in workers if w["selected"]] if merged.get("considered_list") else workers
        return [{k: w[k] for k in ("pid", "name", "bytes", "worker_id", "actor_id")} for w in chosen]

    @staticmethod
    def _variant(merged: dict, victim: dict | None, rows: list) -> str | None:
        if "variant" in merged:
            return merged["variant"]
        if victim and "pid" not in victim:
            return "2.1"
        if victim:
            return "A" if victim["subject"] == "task" else "B"
        if "node_used_bytes" in merged or "workers_killed" in merged:
            if merged.get("used_limit_words"):
                return "F"
            if "threshold" in merged or merged.get("policy_list_inline"):
                return "C"
            if "kill_reason_line" in merged and merged.get("docs_from"):
                return "E" if merged["docs_from"] >= (2, 57) else "D"
            if "kill_reason_line" in merged and "line" in merged:  # no suggestions: one line is 2.56's layout
                return "E" if merged["kill_reason_line"] != merged["line"] else "D"
            return None
        if merged.get("header") == "task":
            return "A"
        return "table" if rows else None

    @staticmethod
    def _node(merged: dict) -> str | None:
        for candidate in (merged.get("host"), merged.get("ip_hint")):
            if candidate and IP.match(candidate):
                return candidate
        return None

    @staticmethod
    def _who(draft: dict, victim: dict, rows: list[dict]) -> None:
        """The victim's process: its class and, from its Top-10 title, the method it ran."""
        draft["pid"] = victim["pid"]
        actor, method = split_name(victim["name"] or "")
        for row in rows:
            m = RAY_TITLE.match(row["command"])
            if row["pid"] == victim["pid"] and m:
                actor, method = split_name(m.group("what"))
                break
        if actor:
            draft["actor"] = actor
        if method:
            draft["method"] = method
