"""Transformer for grammars/torchrun.lark: a launcher's word that a rank died of SIGKILL."""

from __future__ import annotations

import lark


def _draft(supervisor: str, exit_code: int, pid: int | None = None, **more: object) -> dict:
    draft: dict = {"kind": "sigkill", "fields": {"supervisor": supervisor, "exit_code": exit_code, **more}}
    if pid is not None:
        draft["pid"] = pid
    return draft


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def table(self, items):
        facts: dict = {}
        for item in items:
            facts.update(item or {})
        draft = _draft("torchrun", facts.pop("exit_code"), facts.pop("pid"), **facts)
        if "rank" in facts:
            draft["rank"] = facts["rank"]
        if facts.get("when"):
            draft["time"] = facts.pop("when")
            draft["fields"].pop("when")
        return draft

    def time(self, items):
        return {"when": str(items[0]).replace("_", "T")}

    def host(self, items):
        return {"host": str(items[0])}

    def rank(self, items):
        return {"rank": int(items[0]), "local_rank": int(items[1])}

    def exitcode(self, items):
        code, pid, _rest = items
        return {"exit_code": int(code), "pid": int(pid)}

    def error_file(self, items):
        return {}

    def signal_line(self, items):
        return {}

    def api(self, items):
        code, local_rank, pid, _rest = items
        return _draft("torchrun", int(code), int(pid), local_rank=int(local_rank))

    def signal(self, items):
        number, _name, pid = items
        return _draft("torchrun", -int(number), int(pid))

    def deepspeed(self, items):
        return _draft("deepspeed", int(items[0]))
