"""Transformer for grammars/containers.lark: Kubernetes' and docker's word on a container.

A status block says what ended a container in a few lines read together: the reason
OOMKilled (the kernel's memory-cgroup OOM killer, as the runtime saw it) or the kubelet's
eviction for node memory is a supervisor_oom; an exit code 137 with no such reason is only a
SIGKILL (a sigkill event, a hint for the reader, no memory of its own).
"""

from __future__ import annotations

import re
from datetime import datetime

import lark

from oomlens.events import sized
from oomlens.times import TIME_BY_NAME, stamp_of_groups

# Kubernetes resource quantities (apimachinery/pkg/api/resource): binary and decimal suffixes
QUANTITY = {"": 1, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
QUANTITY.update({f"{p}i": 1024 ** (n + 1) for n, p in enumerate("KMGTPE")})
FINISHED = re.compile(TIME_BY_NAME["rfc1123z"].pattern)  # kubectl describe's Finished: (data/times.toml)
SIGKILL_EXIT = 137  # 128 + SIGKILL: how a shell, docker and Kubernetes tell a process killed by signal 9


def quantity(text: str) -> int | None:
    """Bytes of a Kubernetes quantity ("991045Ki", "1Gi", "500M")."""
    number = text.rstrip("kmKMGTPEi")
    return sized(float(number) * QUANTITY[text[len(number) :]])


def _plain(value: str) -> str:
    return value.strip().rstrip(",").strip('"')


class Transformer(lark.Transformer):
    def start(self, lines):
        facts: dict = {}
        section = None
        for line in lines:
            if "section" in line:
                section = line["section"]
            elif "memory" in line:  # a memory: line of describe's Limits: or Requests:
                facts.setdefault({"Limits:": "limit_bytes", "Requests:": "request_bytes"}.get(section or "", "_memory"), line["memory"])
            for key, value in line.items():
                if key not in ("section", "memory"):
                    facts.setdefault(key, value)
        reason, exit_code = facts.get("reason"), facts.get("exit_code")
        supervisor = "docker" if facts.get("docker") is not None else "kubernetes"
        base = {"supervisor": supervisor, "exit_code": exit_code}
        if reason == "OOMKilled" or facts.get("docker") is True:
            found = {"action": "OOMKilled", **base, "target": facts.get("target"), "restarts": facts.get("restarts")}
            found.update({k: facts[k] for k in ("limit_bytes", "request_bytes") if k in facts})
        elif facts.get("eviction") and facts["eviction"]["resource"] == "memory":
            found = {"action": "evicted", **base, "target": None, **facts["eviction"]}
        elif facts.get("system_oom"):
            found = {"action": "system OOM", **base, "target": None, **facts["system_oom"]}
        elif exit_code == SIGKILL_EXIT:
            found = {**base, "reason": reason, **({"target": facts["target"]} if "target" in facts else {})}
            return [{"kind": "sigkill", "time": facts.get("time"), "fields": found}]
        else:
            return []  # an eviction for disk, a container that ended on its own
        draft: dict = {"kind": "supervisor_oom", "memory": "host", "fields": found}
        if facts.get("time"):
            draft["time"] = facts["time"]
        if found.get("pid") is not None:
            draft["pid"] = found["pid"]
        return [draft]

    def json_obj(self, items):
        """A status printed as one JSON line: the same facts as its yaml, by key."""
        facts: dict = {}
        for key, value in (i for i in items if isinstance(i, tuple)):
            if isinstance(value, dict):
                facts.update((k, v) for k, v in value.items() if k not in facts)
            elif key == "reason":
                facts["reason"] = value
            elif key == "exitCode" and isinstance(value, int):
                facts["exit_code"] = value
            elif key == "finishedAt" and isinstance(value, str):
                facts["time"] = _utc(value)
        return facts

    def jpair(self, items):
        key, value = items
        if isinstance(value, lark.Token):
            value = str(value).strip('"') if value.type == "JSTR" else int(value) if value.type == "SIGNED" else str(value)
        return str(key).strip('"'), value

    def reason(self, items):
        return {"reason": _plain(items[1])}

    def exit_code(self, items):
        return {"exit_code": int(items[1])}

    def when(self, items):
        return {"time": _utc(_plain(items[1]))}

    def section(self, items):
        return {"section": str(items[0])}

    def memory(self, items):
        return {"memory": quantity(items[0])}

    def finished(self, items):
        m = FINISHED.fullmatch(str(items[0]))  # the grammar's RFC1123Z is the layout's text
        stamp = stamp_of_groups(m.groupdict()) if m else None
        return {"time": None if stamp is None else stamp.iso()}

    def eviction(self, items):
        resource, threshold, *usage = items
        found = {"resource": str(resource), "threshold_bytes": None, "available_bytes": None}
        found.update(threshold or {})
        if usage:
            found.update(usage[0])
        return {"eviction": found}

    def threshold(self, items):
        return {"threshold_bytes": quantity(items[0]), "available_bytes": quantity(items[1])}

    def usage(self, items):
        name, used, request, *_ = items
        return {"target": str(name), "used_bytes": quantity(used), "request_bytes": quantity(request)}

    def system_oom(self, items):
        process, pid = items
        return {"system_oom": {"process": str(process).strip(), "pid": None if pid is None else int(pid)}}

    def pod_row(self, items):
        pod, restarts, _rest = items
        name = str(pod).rsplit(" ", 1)[0] if " " in str(pod) else None
        return {"reason": "OOMKilled", "target": name, "restarts": None if restarts is None else int(restarts)}

    def docker_ps(self, items):
        rest = str(items[0] or "").split()
        return {"docker": False, "exit_code": SIGKILL_EXIT, "target": rest[-1] if rest and not rest[-1].isdigit() else None}

    def docker_oom(self, items):
        return {"docker": str(items[0]) == "true"}

    def other(self, items):
        return {}


def _utc(stamp: str) -> str | None:
    """An RFC 3339 stamp as the ISO time the clock moves (its zone kept), or None where it
    spells no time (a year 0, a month 13): the event keeps the rest."""
    try:
        return datetime.fromisoformat(stamp[:-1] + "+00:00" if stamp.endswith("Z") else stamp).isoformat()
    except ValueError:
        return None
