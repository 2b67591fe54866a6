"""Transformer for grammars/kernel_oom.lark: one kernel OOM kill report as one event.

Each line of a report contributes what it knows (the header the invoking task, the
summary and the kill line the victim, the memcg lines the cgroup's limit); the kill
line comes last, so its facts win where two lines say the same thing.
"""

from __future__ import annotations

from typing import Any

import lark

from oomlens.events import to_bytes

CONTRACT = ("pid", "process", "anon_rss_bytes", "total_vm_bytes")
EXTRA = ("file_rss_bytes", "shmem_rss_bytes", "constraint", "memcg", "uid")
# a report is an event when it names the victim, the task chosen to die, or the task that
# ran out of memory; memcg counters alone are not
EVIDENCE = ("pid", "selected_pid", "invoker")


def _int(text: str) -> int | None:
    """A number the kernel printed; None for a value that is none (a cut line joined to the
    next one, a byte changed in a paste), not a block lost."""
    try:
        return int(text)
    except ValueError:
        return None


# name printed by the kernel -> (field, type)
INVOCATION = {"gfp_mask": ("gfp_mask", str), "order": ("order", _int), "oom_score_adj": ("invoker_oom_score_adj", _int)}
SUMMARY = {
    "constraint": ("constraint", str),
    "oom_memcg": ("memcg", str),
    "task_memcg": ("task_memcg", str),
    "task": ("process", str),
    "pid": ("pid", _int),
    "uid": ("uid", _int),
}


def _pick(settings: list[tuple[str, str] | None], table: dict) -> dict:
    """The settings the table names, converted; the others are dropped."""
    return {table[n][0]: table[n][1](v) for n, v in filter(None, settings) if n in table}


def _victim(pid, process: str, uid: int | None, sizes: dict | None) -> dict:
    return {"pid": int(pid), "process": process, "uid": uid, **(sizes or {})}


TOP_TASKS = 10  # rows of the task dump kept: the biggest by rss (a node lists hundreds)


def _tasks(columns: list[str], rows: list[list[str]]) -> dict:
    """The task dump read by its header's columns: the biggest tasks by rss (in pages, as the
    kernel prints them), how many were listed and their rss together. The victim of a Ray
    node is often not the biggest: Ray sets oom_score_adj 1000 on its workers."""
    tasks: list[dict[str, Any]] = []
    for row in rows:
        values = dict(zip(columns, row[1 : len(columns)], strict=False))
        name = " ".join(row[len(columns) :])
        try:
            pid, rss, adj = int(row[0].strip("[]")), int(values["rss"]), int(values.get("oom_score_adj", 0))
        except (KeyError, ValueError):
            continue  # a row cut or joined to the next one: not read
        tasks.append({"pid": pid, "rss_pages": rss, "oom_score_adj": adj, "name": name})
    top = sorted(tasks, key=lambda t: -t["rss_pages"])[:TOP_TASKS]
    return {"tasks": top, "tasks_listed": len(tasks), "tasks_rss_pages": sum(t["rss_pages"] for t in tasks)} if tasks else {}


class Transformer(lark.Transformer):
    def start(self, lines):
        fields: dict = {}
        columns: list[str] = []
        rows: list[list[str]] = []
        for line in lines:
            if "_columns" in line:
                columns = line["_columns"]
            elif "_row" in line:
                rows.append(line["_row"])
            else:
                fields.update((k, v) for k, v in line.items() if v is not None)
        if columns and rows:
            fields.update(_tasks(columns, rows))
        if all(fields.get(name) is None for name in EVIDENCE):
            return []
        return [
            {
                "kind": "kernel_oom",
                "memory": "host",
                "pid": fields.get("pid"),
                "fields": {**dict.fromkeys(CONTRACT + EXTRA), **fields},
            }
        ]

    def invocation(self, items):
        invoker, *settings = items
        return {"invoker": str(invoker), **_pick(settings, INVOCATION)}

    def setting(self, items):
        name, value = items
        return str(name), str(value)

    def flag(self, items):
        return None  # global_oom, or a piece of a comma-separated mems_allowed list

    def cpu(self, items):
        _cpu, _uid, pid, _rest = items
        return {"invoker_pid": int(pid)}

    def task_in(self, items):
        task_memcg, memcg = items
        return {"task_memcg": str(task_memcg), "memcg": str(memcg)}

    def memcg(self, items):
        usage, limit, failcnt = items
        return {
            "memcg_usage_bytes": usage,
            "memcg_limit_bytes": limit,
            "memcg_failcnt": None if failcnt is None else int(failcnt),
        }

    def summary(self, items):
        return _pick(items, SUMMARY)

    def select(self, items):
        reason, pid, process, score, kill = items
        chosen = {"reason": str(reason), "selected_pid": int(pid), "selected_process": process, "score": int(score)}
        return {**chosen, **(kill or {})}

    def kill(self, items):
        reason, pid, process, uid, sizes = items
        return {"reason": str(reason), **_victim(pid, process, uid, sizes)}

    def bare_kill(self, items):
        return _victim(*items)

    def old_uid(self, items):
        return int(items[0])

    def sizes(self, items):
        total_vm, anon, file, shmem, owner = items
        amounts = {"total_vm_bytes": total_vm, "anon_rss_bytes": anon, "file_rss_bytes": file, "shmem_rss_bytes": shmem}
        return {**amounts, **(owner or {})}

    def owner(self, items):
        uid, pgtables, score_adj = items
        return {"uid": int(uid), "pgtables_bytes": pgtables, "oom_score_adj": None if score_adj is None else int(score_adj)}

    def comm(self, items):
        return str(items[0])

    def kb(self, items):
        return to_bytes(items[0], "kB")

    def tasks_head(self, items):
        # "[  pid  ]   uid  tgid ... name": the columns after the pid, the comm's last
        return {"_columns": str(items[0]).split("]", 1)[1].split()}

    def task_row(self, items):
        pid, rest = str(items[0]).split("]", 1)
        return {"_row": [pid.strip("[ "), *rest.split()]}

    def other(self, items):
        return {}
