"""Transformer for grammars/nccl_watchdog.lark: NCCL watchdog, heartbeat monitor and gRPC
keepalive watchdog lines.

Each line becomes one `watchdog_timeout` draft with what that line knows; the lines that
tell the same timeout on the same rank share (watchdog, rank, seq) and fold into one
event. The rank a message names (`[Rank r]`, `[PG ... Rank r]`) is the rank within its process
group (`group_rank`); the global rank is that of the line's `[rankN]:` envelope, and the group
rank stands for it only in the default group (PG 0) or where the line names no group.
"""

from __future__ import annotations

from typing import Any

import lark


def _fields(watchdog: str, **known: Any) -> dict[str, Any]:
    """The contract fields, null when the line does not tell them, plus what it does tell."""
    fields: dict[str, Any] = {"watchdog": watchdog, "op": None, "seq": None, "timeout_ms": None, "elapsed_ms": None}
    fields.update(known)
    return fields


def _status(status: tuple[int | None, int | None] | None) -> dict[str, int | None]:
    enqueued, completed = status or (None, None)
    return {"last_enqueued": enqueued, "last_completed": completed}


class Transformer(lark.Transformer):
    def start(self, items):
        return [items[0]]

    def message(self, items):
        prefix, event, _tail = items
        draft = {"kind": "watchdog_timeout", "fields": event["fields"]}
        where = prefix or event.get("prefix") or {}
        if where.get("rank") is not None:
            draft["fields"]["group_rank"] = where["rank"]
            if where.get("pg") in (None, "0"):
                draft["rank"] = where["rank"]
        for name in ("pg", "pg_guid", "pg_desc"):
            if where.get(name) is not None:
                draft["fields"][name] = where[name]
        return draft

    # -- the process-group prefix ----------------------------------------------------------
    def prefix(self, items):
        pg, rank = items
        return {"rank": int(rank), **(pg or {})}

    def pg_guid(self, items):
        pg_id, guid, desc = items
        return {"pg": str(pg_id), "pg_guid": str(guid), "pg_desc": desc and str(desc)[1:-1]}

    def pg_name(self, items):
        name, desc = items
        return {"pg": str(name), "pg_desc": desc and str(desc)[1:-1]}

    # -- collective timeouts ---------------------------------------------------------------
    def caught(self, items):
        work, elapsed = items
        fields = _fields("nccl", **(work or {}), elapsed_ms=elapsed)
        if elapsed is None:
            fields["truncated"] = True  # the paste ends inside the line
        return {"fields": fields}

    def inner_caught(self, items):
        prefix, caught = items
        return {**caught, "prefix": prefix}

    def work(self, items):
        return dict(items)

    def seq(self, items):
        return "seq", int(items[0])

    def op(self, items):
        return "op", str(items[0])

    def tensor_shape(self, items):
        return "tensor_shape", items[0]

    def shape(self, items):
        return [int(n) for n in items if n is not None]

    def numel_in(self, items):
        return "numel_in", int(items[0])

    def numel_out(self, items):
        return "numel_out", int(items[0])

    def timeout(self, items):
        return "timeout_ms", int(items[0])

    def elapsed(self, items):
        return int(items[0])

    def status(self, items):
        enqueued, completed = items
        return int(enqueued), None if completed is None else int(completed)

    pg_status = status

    def timeout_at(self, items):
        seq, status = items
        return {"fields": _fields("nccl", seq=int(seq), **_status(status))}

    exception_at = timeout_at

    def failure_at(self, items):
        seq, status = items
        return {"fields": _fields("nccl", seq=int(seq), **_status(status))}

    def terminated(self, items):
        _label, inner = items
        if isinstance(inner, str):  # a token (text, as the shape cache gives it): the watchdog died of an NCCL error, not a timeout
            return {"fields": _fields("nccl", error=str(inner))}
        return inner

    # -- the heartbeat monitor --------------------------------------------------------------
    def stuck(self, items):
        return {"fields": _fields("heartbeat", timeout_ms=int(items[0]) * 1000)}

    def heartbeat_timeout(self, items):
        return {"fields": _fields("heartbeat")}

    no_heartbeat = heartbeat_timeout

    def dump_signal(self, items):
        origin, status = items
        return {"fields": _fields("heartbeat", dump_from_rank=origin, **_status(status))}

    def dump_origin(self, items):
        return int(items[0]) if items else None  # "this local rank": the rank itself

    # -- gRPC keepalive -----------------------------------------------------------------------
    def keepalive(self, items):
        status, _label = items
        return {"fields": _fields("keepalive", status=status and str(status), error="keepalive watchdog timeout")}
