"""Transformer for grammars/slurm.lark: Slurm's count of the kernel's OOM kills in a step,
its own kill of a step over its memory limit, and srun's word on tasks that ran out."""

from __future__ import annotations

import lark


def _draft(action: str, target: str | None, **more: object) -> dict:
    fields = {"supervisor": "slurm", "action": action, "target": target, "count": None, "used_bytes": None, "limit_bytes": None, **more}
    return {"kind": "supervisor_oom", "memory": "host", "fields": fields}


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def detected(self, items):
        count, _events, step, _cgroup, _rest = items
        return _draft("oom_kill", str(step), count=int(count))

    def exceeded(self, items):
        step, used, limit = (str(i) for i in items)
        # %ps ("StepId=...") came with 20.11, when the sizes had been bytes since 19.05; the
        # older "Job N"/"Step N.M" wording printed KB up to 18.08 and bytes after: no unit known
        in_bytes = step.startswith(("StepId=", "JobId="))
        return _draft("memory limit exceeded", step, used_bytes=int(used) if in_bytes else None, limit_bytes=int(limit) if in_bytes else None)

    def at_some_point(self, items):
        return _draft("memory limit exceeded", str(items[0]))

    def job_state(self, items):
        return _draft("job state OUT_OF_MEMORY", None)

    def sacct(self, items):
        step, _state, _rest = items
        return _draft("job state OUT_OF_MEMORY", None if step is None else str(step).split()[0])

    def srun_oom(self, items):
        host, tasks = items
        return _draft("out of memory", str(tasks), host=None if host is None else str(host))
