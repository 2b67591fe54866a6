"""Transformer for grammars/process_error.lark: what ended a process or a task, when
data/exceptions.toml says no other kind reads it."""

from __future__ import annotations

import functools
import re
from typing import Any

import lark

from oomlens.data import load
from oomlens.times import stamp_of_groups

MESSAGE_KEPT = 300  # characters of a message: enough to tell it, not a whole dump


class Transformer(lark.Transformer):
    def start(self, items):
        lines = [item for item in items if isinstance(item, dict)]
        signal = next((line for line in lines if "signal" in line), None)
        if signal is not None:  # the event, and the clock its line tells (UTC by abseil's epoch)
            return [{"kind": "process_error", "fields": {"signal": signal["signal"], "exception": None}}, {"kind": "clock", "fields": {"utc": signal["utc"]}}]
        raised = [line for line in lines if "exception" in line]
        if not raised:  # a traceback cut before its exception line, or Ray's unhandled error
            task = next((line["task"] for line in lines if line.get("task")), None)
            wrapper = "Unhandled error" if any(line.get("unhandled") for line in lines) else None
            return [_draft(None, wrapper, None, task, cut=True)]
        last = raised[-1]
        if told_elsewhere(last["exception"], last["message"]):
            return []
        return [_draft(last["exception"], last["wrapper"], last["message"], last["task"])]

    def head(self, items):
        return {"head": True}

    def exception(self, items):
        name, wrapped, rest = items
        outer = str(name).rsplit(".", 1)[-1]
        inner = str(wrapped)[1:-1].rsplit(".", 1)[-1] if wrapped else None
        task = rest if isinstance(rest, dict) else None
        message = str(rest).strip()[:MESSAGE_KEPT] if isinstance(rest, lark.Token) else None
        return {"exception": inner or outer, "wrapper": outer if inner else None, "message": message or None, "task": task}

    def unhandled(self, items):
        return {"unhandled": True, "task": items[1]}  # None where a wrap cut the header

    def task(self, items):
        name, pid, _rest = items
        actor, _, method = str(name)[5:-2].rpartition(".")
        return {"actor": actor or None, "method": method, "pid": int(pid)}

    def signal(self, items):
        signal, epoch, _rest = items
        utc = stamp_of_groups({"epoch": str(epoch)})
        assert utc is not None  # an epoch always spells a time
        return {"signal": str(signal), "utc": utc._replace(zone=None).iso()}


def _draft(exception: str | None, wrapper: str | None, message: str | None, task: dict | None, cut: bool = False) -> dict[str, Any]:
    fields: dict[str, Any] = {"exception": exception, "message": message}
    if wrapper:
        fields["wrapper"] = wrapper
    if cut:
        fields["cut"] = True
    if exception in _relayed():
        fields["relayed"] = True
    if (cause := cause_of(f"{exception or ''}: {message or ''}")) is not None:
        fields["cause"] = cause
    draft: dict[str, Any] = {"kind": "process_error", "fields": fields}
    if task:
        draft.update(pid=task["pid"], method=task["method"])
        if task["actor"]:
            draft["actor"] = task["actor"]
    return draft


@functools.cache
def _lists() -> tuple[frozenset[str], re.Pattern[str]]:
    table = load("exceptions.toml")
    classes = frozenset(table["memory"]["classes"]) | frozenset(table["told"]["classes"])
    messages = [*table["memory"]["messages"], *table["told"]["messages"]]
    return classes, re.compile("|".join(re.escape(m) for m in messages))


def told_elsewhere(exception: str, message: str | None) -> bool:
    """Is this a memory failure, or a failure another kind reads? (data/exceptions.toml)"""
    classes, messages = _lists()
    return exception in classes or (message is not None and messages.search(message) is not None)


@functools.cache
def _relayed() -> frozenset[str]:
    return frozenset(load("exceptions.toml")["relayed"]["classes"])


@functools.cache
def _causes() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((c["name"], re.compile(c["pattern"])) for c in load("exceptions.toml")["cause"])


def cause_of(text: str) -> str | None:
    """The well-known cause an exception's class and message name, if any."""
    return next((name for name, pattern in _causes() if pattern.search(text)), None)
