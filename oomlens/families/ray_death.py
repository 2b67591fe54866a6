"""Transformer for grammars/ray_death.lark: worker, actor and node deaths, and actors that
became unavailable.

Every report of a death becomes one `ray_worker_died` draft whose top-level `pid`, `actor`
and `node` name the DEAD worker (never the process that printed the report), and whose
`worker_id` (when the text shows it) lets `fold()` merge the raylet message, the gcs line
and the caller's ActorDiedError of one death. `reason` says why, in the words of Ray's
ActorDiedErrorContext: worker_died, owner_died, node_died, ray_kill, out_of_scope, plus
creation_task_error and worker_crashed. `exit_type` is kept as printed (NODE_OUT_OF_MEMORY
is the only exit type that means Ray's memory monitor killed the worker).
"""

from __future__ import annotations

from typing import Any

import lark


def _died(reason: str | None, **known: Any) -> dict[str, Any]:
    """A ray_worker_died draft: nobody known to have died yet, and the facts given."""
    fields: dict[str, Any] = {"exit_type": None, "reason": reason, "worker_id": None, "exit_detail": None, "error": None}
    draft: dict[str, Any] = {"kind": "ray_worker_died", "fields": fields, "pid": None, "actor": None}
    _merge(draft, known)
    return draft


def _merge(draft: dict[str, Any], known: dict[str, Any]) -> None:
    """Top-level facts (pid, actor, method, node) go on the draft, the rest into its fields."""
    for name, value in known.items():
        if name in ("pid", "actor", "method", "node"):
            if value is not None:
                draft[name] = value
        else:
            draft["fields"][name] = value


def _class(qualified: str) -> str:
    """'create_colocated_worker_cls.<locals>.WorkerDict' -> 'WorkerDict'."""
    return qualified.rsplit(".", 1)[-1]


def _function(name: str) -> tuple[str | None, str]:
    """'RemoteRewardModel.get_rewards' -> ('RemoteRewardModel', 'get_rewards'); a task -> (None, name)."""
    owner, _, method = name.rpartition(".")
    return (_class(owner) if owner else None), method


class Transformer(lark.Transformer):
    def start(self, items):
        return list(items)

    # -- ActorDiedError / RayActorError -----------------------------------------------------
    def actor_died(self, items):
        info: dict[str, Any] = dict(item for item in items if isinstance(item, tuple))
        draft = items[-1] if isinstance(items[-1], dict) else _died(None)
        class_name = info.pop("class_name", None)
        _merge(draft, {"class_name": class_name, "actor": class_name and _class(class_name), **info})
        return draft

    def class_name(self, items):
        return "class_name", str(items[0]).strip()

    def actor_id(self, items):
        return "actor_id", str(items[0])

    def pid(self, items):
        return "pid", int(items[0])

    def name(self, items):
        return "name", str(items[0]).strip()

    def namespace(self, items):
        return "namespace", str(items[0]).strip()

    def ip(self, items):
        return "node", items[0] if isinstance(items[0], str) and not _redacted(items[0]) else None

    def creation_failed(self, items):
        _error, task, _rest = items
        actor, method = task.pop("actor"), task.pop("method")
        return _died("creation_task_error", pid=task.pop("task_pid"), node=task.pop("task_ip"), actor=actor, method=method, **task)

    # -- the GCS death cause --------------------------------------------------------------
    def death_cause(self, items):
        draft, *notes = items
        for note in notes:
            draft["fields"][note] = True
        return draft

    def never_ran(self, items):
        return "never_ran"

    def spot_preempted(self, items):
        return "spot_preempted"

    def worker_died(self, items):
        return _died("worker_died", **(items[0] or {}))

    def exit_info(self, items):
        exit_type, detail = items
        return {"exit_type": str(exit_type), **(detail or {})}

    def owner_died(self, items):
        owner_id, owner_ip, owner_exit_type, detail = items
        return _died(
            "owner_died",
            owner_id=str(owner_id),
            owner_ip=owner_ip,
            owner_exit_type=owner_exit_type and str(owner_exit_type),
            **(detail or {}),
        )

    def node_died_cause(self, items):
        _cause, node_id, death = items
        return _died("node_died", node_id=str(node_id), **(death or {}))

    def node_death(self, items):
        how, detail = items
        return {"node_death": str(how), "exit_detail": detail and str(detail).strip()}

    def ray_kill(self, items):
        return _died("ray_kill")

    def out_of_scope(self, items):
        return _died("out_of_scope")

    # -- raylet and GCS reports ------------------------------------------------------------
    def raylet_death(self, items):
        known: dict[str, Any] = {}
        for item in items:
            known.update(item)
        return _died("worker_died", **known)

    def raylet_death_v1(self, items):
        return _died("worker_died", task_id=str(items[0]))

    def raylet_death_cut(self, items):
        return _died("worker_died", truncated=True)

    def task_id(self, items):
        return {"task_id": str(items[0])}

    def lease_id(self, items):
        return {"lease_id": str(items[0])}

    def worker_id(self, items):
        return {"worker_id": str(items[0])}

    def node_id(self, items):
        return {"node_id": str(items[0])}

    def worker_ip(self, items):
        return {"node": None if items[0] is None or _redacted(items[0]) else items[0]}

    def worker_port(self, items):
        return {"worker_port": int(items[0]) if items[0] is not None and str(items[0]).isdigit() else None}

    def worker_pid(self, items):
        return {"pid": int(items[0])}

    def exit_type(self, items):
        return {"exit_type": str(items[0])}

    def exit_detail(self, items):
        return items[0]

    def gcs_exit(self, items):
        worker_id, node_id, address, exit_type, _flag, detail, _unintentional = items
        return _died(
            "worker_died",
            worker_id=str(worker_id),
            node_id=node_id and str(node_id),
            node=address,
            exit_type=exit_type and str(exit_type),
            **(detail or {}),
        )

    def connection_detail(self, items):
        label, code, rest = items
        if code is None:
            return {"exit_detail": str(label), "truncated": True}
        return {"exit_detail": f"{label} {code}{rest or ''}".strip(), "error": f"connection error code {code}"}

    def plain_detail(self, items):
        return {"exit_detail": str(items[0]).strip()}

    # -- WorkerCrashedError ------------------------------------------------------------------
    def crashed_task(self, items):
        _error, task, _sentence = items
        actor, method = task.pop("actor"), task.pop("method")
        return _died("worker_crashed", actor=actor, method=method, **task)

    def wrapped_death(self, items):
        name, _rest = items
        whole = str(name).endswith(("ActorDiedError)", "RayActorError)"))
        return _died("wrapped", **({} if whole else {"truncated": True}))

    def crashed(self, items):
        return _died("worker_crashed")

    def crash_sentence(self, items):
        return None

    def task_ref(self, items):
        name, location = items
        actor, method = _function(str(name).rsplit(":", 1)[-1])
        task: dict[str, Any] = {"actor": actor, "method": method, "task_pid": None, "task_ip": None}
        task.update(location or {})
        return task

    def task_loc(self, items):
        pid, ip, actor_id, rest = items
        location = {"task_pid": int(pid), "task_ip": ip, "actor_id": actor_id and str(actor_id)}
        if rest is None:
            location["truncated"] = True  # the paste ends inside "(pid=..., ip=..., actor_id=..."
        return location

    # -- ActorUnavailableError -----------------------------------------------------------------
    def unavailable(self, items):
        _error, actor_ref, status, _tail = items
        actor_id = str(actor_ref)
        known = all(c in "0123456789abcdef" for c in actor_id)  # not "None", nor an author's "..."
        fields = {"actor_id": actor_id if known else None, "rpc_code": None, "reason": None, "error": None, **(status or {})}
        return {"kind": "ray_actor_unavailable", "fields": fields, "pid": None, "actor": None}

    def other_status(self, items):
        status, text = items
        restarted = text.type == "RESTARTED"
        return {"reason": "restarted" if restarted else str(status), "error": str(text).strip()}

    def rpc_error(self, items):
        message, details, code = items
        fields = {"reason": "rpc_error", "error": str(message).strip(), "rpc_code": code}
        if details is not None and str(details).strip():
            fields["details"] = str(details).strip()
        return fields

    def rpc_code(self, items):
        return int(items[1])

    # -- node death ----------------------------------------------------------------------------
    def node_marked_dead(self, items):
        node_id, where, _rest = items
        address, node_name = where or (None, None)
        return _died("node_died", node_id=_told(node_id), node=_told(address), node_name=_told(node_name))

    def node_where(self, items):
        return tuple(items)

    def node_died(self, items):
        _error, address, node_id = items[:3]
        return _died("node_died", node_id=node_id and str(node_id), node=address)

    # -- shared ----------------------------------------------------------------------------------
    def address(self, items):
        return str(items[0])


def _redacted(value: object) -> bool:
    """A REDACTED token: a value left empty by Ray or hidden by the person who pasted it."""
    return getattr(value, "type", None) in ("REDACTED", "PLACEHOLDER")


def _told(value: object) -> str | None:
    """The value as text, None where it is missing or stands in for what was hidden."""
    return None if value is None or _redacted(value) else str(value)
