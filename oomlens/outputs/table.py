"""A readable terminal table of events: time, node, pid/actor, kind, key numbers, source."""

from __future__ import annotations

import os

from ..diagnosis import Diagnosis
from ..events import Event

GIB = 1024**3


def size(n: int | None) -> str:
    """Bytes as the unit a person reads at a glance."""
    if n is None:
        return "?"
    if abs(n) >= GIB:
        return f"{n / GIB:.2f} GiB"
    return f"{n / 1024**2:.1f} MiB"


def summary(event: Event) -> str:
    """The key numbers of an event in one short phrase."""
    f = event.fields
    k = event.kind
    if k == "ray_oom_kill" and f.get("node_used_bytes") is None and f.get("top"):
        top = f["top"][0]
        return f"Top-10 table only; first: pid {top['pid']} {top['command']} {size(top['bytes'])}"
    if k == "ray_oom_kill":
        killed = ", ".join(f"pid {v.get('pid')} {v.get('name') or ''} {size(v.get('bytes'))}".strip() for v in f.get("killed", []))
        return f"node {size(f.get('node_used_bytes'))}/{size(f.get('node_total_bytes'))}; killed {killed or '?'}"
    if k == "ray_oom_summary":
        return f"{f.get('killed')} killed by OOM, {f.get('crashed_other')} crashed otherwise"
    if k == "cuda_oom":
        return f"GPU {f.get('gpu', '?')}: tried {size(f.get('requested_bytes'))}, free {size(f.get('free_bytes'))} of {size(f.get('total_bytes'))}"
    if k == "gpu_memory":
        parts = [f"{n.split('_')[0]} {size(f[n])}" for n in ("allocated_bytes", "reserved_bytes", "used_bytes") if f.get(n) is not None]
        total = f" / {size(f['total_bytes'])}" if f.get("total_bytes") else ""
        return f"{f.get('label', '')}: {', '.join(parts)}{total}"
    if k == "watchdog_timeout":
        ms = f.get("elapsed_ms") or f.get("timeout_ms")
        return f"{f.get('watchdog')} {f.get('op') or ''} seq {f.get('seq', '?')}" + (f" after {ms} ms" if ms else "")
    if k == "kernel_oom":
        return f"killed pid {f.get('pid')} ({f.get('process')}) anon-rss {size(f.get('anon_rss_bytes'))}"
    if k == "ray_worker_died":
        return f"{f.get('exit_type') or ''} {f.get('reason') or ''}".strip()
    if k == "vllm_memory_error":
        return str(f.get("error", ""))
    return str(f.get("reason", ""))


def render(diagnosis: Diagnosis, width: int | None = None) -> str:
    """The events as aligned columns, then a line per input problem."""
    width = width or _width()
    rows = []
    for e in diagnosis.events:
        who = " ".join(x for x in (f"pid={e.pid}" if e.pid is not None else "", e.actor or "") if x)
        if e.rank is not None:
            who += f" rank{e.rank}"
        where = f"{os.path.basename(e.source.path)}:{e.source.line}"
        if len(e.sources) > 1:
            where += f" (+{len(e.sources) - 1})"
        time = (e.time or e.fields.get("local_time") or (f"<{e.time_latest}" if e.time_latest else "-")).replace("T", " ")[:24]
        if e.time_inferred or (e.time is None and e.time_latest):
            time += "~"  # the line printed no time: it lies between its neighbours' stamps
        rows.append((time, e.node or "-", who or "-", e.kind, summary(e), where))
    header = ("TIME", "NODE", "PROCESS", "KIND", "DETAILS", "SOURCE")
    if not rows:
        lines = ["no OOM, crash or memory event found"]
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
        fixed = sum(widths) - widths[4] + 10
        widths[4] = max(20, min(widths[4], width - fixed))
        lines = ["  ".join(c.ljust(widths[i])[: widths[i]] if i == 4 else c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in [header, *rows]]
    from .verdict import render as verdict_block

    lines.append("")
    lines.append(verdict_block(diagnosis, width))
    lines.append("")
    lines.extend(f"clock: {note.sentence()}" for note in diagnosis.clocks)
    if diagnosis.readings_note:
        lines.append(diagnosis.readings_note)
    read = sum(1 for i in diagnosis.inputs if i.opener is not None)
    lines.append(f"{len(diagnosis.events)} event(s) in {read} input(s), {sum(i.bytes for i in diagnosis.inputs)} bytes read")
    if diagnosis.problems:
        lines.append(f"{len(diagnosis.problems)} problem(s) reading the inputs: listed on stderr")
    return "\n".join(lines)


def _width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 160
