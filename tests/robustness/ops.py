"""The generic operations of tests/robustness/transforms.toml, each once, over bytes: a
transform may add bytes that are not UTF-8."""

from __future__ import annotations

import csv
import io
import json
import re
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

RAY_PREFIX = re.compile(rb"^(\((?:raylet|gcs_server|[^\s()]*(?: rank=\d+)? ?pid=[^)]*)(?:, ip=[^)]*)?\))")
ESC = b"\x1b["


def _lines(data: bytes) -> tuple[list[bytes], bool]:
    ends = data.endswith(b"\n")
    lines = data.split(b"\n")
    return (lines[:-1] if ends else lines), ends


def _join(lines: list[bytes], ends: bool) -> bytes:
    return b"\n".join(lines) + (b"\n" if ends else b"")


def prefix(data: bytes, template: str) -> bytes:
    lines, ends = _lines(data)
    out = []
    for n, line in enumerate(lines, 1):
        hh, rest = divmod(11 * 3600 + n, 3600)
        mm, ss = divmod(rest, 60)
        values = {"n": n, "hh": f"{hh % 24:02d}", "mm": f"{mm:02d}", "ss": f"{ss:02d}", "ns": f"{n:09d}"}
        out.append(template.format(**values).encode("utf-8") + line)
    return _join(out, ends)


def colour(data: bytes, form: str) -> bytes:
    lines, ends = _lines(data)
    out = []
    for line in lines:
        if ESC not in line:
            m = RAY_PREFIX.match(line)
            if m:
                code = b"33m" if m.group(1).startswith(b"(raylet") else b"36m"
                line = ESC + code + m.group(1) + ESC + b"0m" + line[m.end() :]
        out.append(line.replace(ESC, form.encode("utf-8")))
    return _join(out, ends)


def wrap(data: bytes, width: int) -> bytes:
    lines, ends = _lines(data)
    out = []
    for line in lines:
        text = line.decode("utf-8", "surrogateescape")
        out += [text[i : i + width].encode("utf-8", "surrogateescape") for i in range(0, max(len(text), 1), width)]
    return _join(out, ends)


def crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def pad(data: bytes, width: int) -> bytes:
    lines, ends = _lines(data)
    return _join([line + b" " * (width - len(line.decode("utf-8", "replace"))) if len(line) < width and line else line for line in lines], ends)


def reverse(data: bytes) -> bytes:
    lines, ends = _lines(data)
    return _join(lines[::-1], ends)


def noise(data: bytes, lines: list[str]) -> bytes:
    junk = [bytes.fromhex(line) for line in lines]
    body, ends = _lines(data)
    return _join(junk + body + junk, ends)


FIRST_TIME = re.compile(rb"(20\d\d)-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")


def _times(lines: list[bytes], step_ms: int) -> list[datetime]:
    """When a collector stamped each line, as it does when the line is written: `step_ms`
    after the line before, and never before the time the line prints itself (read as UTC);
    from 2026-03-12 11:00 when the log prints none."""
    times: list[datetime] = []
    t = None
    for line in lines:
        m = FIRST_TIME.search(line)
        own = datetime(*map(int, m.groups()), tzinfo=UTC) if m else None
        t = (own or datetime(2026, 3, 12, 11, 0, tzinfo=UTC)) if t is None else t + timedelta(milliseconds=step_ms)
        if own is not None and own > t:
            t = own
        times.append(t)
    return times


def _rfc3339(t: datetime, digits: int = 9) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}000"[:digits] + "Z"


def _text(line: bytes) -> str:
    return line.decode("utf-8", "replace")


def _line_max(line: bytes, piece: int) -> list[bytes]:
    """A line as journald stores it: cut every `piece` characters (its LineMax) when it is
    longer and valid UTF-8, each piece but the last marked _LINE_BREAK=line-max."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return [line]
    if not piece or len(text) <= piece:
        return [line]
    return [text[i : i + piece].encode() for i in range(0, len(text), piece)]


def record(data: bytes, collector: str, step_ms: int = 37, piece: int = 0, host: str = "gpu-node-3", pod: str = "raycluster-head-x7k2p") -> bytes:
    """Each line as `collector` writes it (the forms of oomlens/data/envelopes.toml's
    [[record]]): its time `step_ms` after the line before, the pod and host where the form
    carries them. `piece`: docker cuts a line longer than this many characters in pieces, and
    journald (its LineMax) too, marking each piece but the last _LINE_BREAK=line-max."""
    lines, _ends = _lines(data)
    times = _times(lines, step_ms)
    out: list[str] = []
    if collector == "loki_csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["labels", "Time", "Line", "tsNs", "id"])
        for n, (line, t) in enumerate(zip(lines, times, strict=True)):
            labels = json.dumps({"pod": pod, "container": "ray-head", "node_name": host})
            writer.writerow([labels, _rfc3339(t), _text(line), int(t.timestamp() * 1e9), n])
        return buffer.getvalue().encode("utf-8")
    if collector == "journald_export":
        chunks = []
        for n, (whole, t) in enumerate(zip(lines, times, strict=True)):
            micros = int(t.timestamp()) * 1_000_000 + t.microsecond
            for i, line in enumerate(pieces := _line_max(whole, piece)):
                head = f"__CURSOR=s=0;i={n:x}\n__REALTIME_TIMESTAMP={micros}\n_HOSTNAME={host}\nSYSLOG_IDENTIFIER=ray\n".encode()
                if i < len(pieces) - 1:
                    head += b"_LINE_BREAK=line-max\n"
                if b"\n" in line or not line.isascii() or any(b < 32 and b != 9 for b in line):  # binary-safe: length, bytes
                    body = b"MESSAGE\n" + struct.pack("<Q", len(line)) + line + b"\n"
                else:
                    body = b"MESSAGE=" + line + b"\n"
                chunks.append(head + body + b"\n")
        return b"".join(chunks)
    for line, t in zip(lines, times, strict=True):
        text = _text(line)
        if collector == "docker_json":
            cuts = [text[i : i + piece] for i in range(0, len(text), piece)] if piece and text else [text]
            for i, cut in enumerate(cuts):
                ending = "\n" if i == len(cuts) - 1 else ""
                out.append(json.dumps({"log": cut + ending, "stream": "stderr", "time": _rfc3339(t)}))
        elif collector == "fluent_bit":
            out.append(
                json.dumps(
                    {
                        "date": round(t.timestamp(), 6),
                        "log": text,
                        "stream": "stderr",
                        "kubernetes": {"pod_name": pod, "container_name": "ray-head", "host": host},
                    }
                )
            )
        elif collector == "journald_json":
            micros = int(t.timestamp()) * 1_000_000 + t.microsecond
            pieces = _line_max(line, piece)
            for i, part in enumerate(pieces):
                said = _text(part)
                message: Any = said if part.isascii() or "\ufffd" not in said else list(part)
                entry = {"__REALTIME_TIMESTAMP": str(micros), "_HOSTNAME": host, "SYSLOG_IDENTIFIER": "ray", "MESSAGE": message}
                out.append(json.dumps(entry | ({"_LINE_BREAK": "line-max"} if i < len(pieces) - 1 else {})))
        elif collector == "gcp_logging":
            resource = {"type": "k8s_container", "labels": {"pod_name": pod, "container_name": "ray-head", "namespace_name": "default"}}
            out.append(json.dumps({"textPayload": text, "timestamp": _rfc3339(t), "severity": "DEFAULT", "resource": resource}))
        elif collector == "ecs":
            out.append(json.dumps({"@timestamp": _rfc3339(t, 3), "message": text, "log": {"level": "info"}, "host": {"name": host}}))
        elif collector == "cloudwatch":
            millis = int(t.timestamp() * 1000)
            out.append(json.dumps({"logStreamName": host, "timestamp": millis, "message": text, "ingestionTime": millis + 500}))
        elif collector == "logcli":
            # Loki's pkg/logcli/output/default.go: RFC 3339 to the second, the labels, the line trimmed
            out.append(f'{t.strftime("%Y-%m-%dT%H:%M:%SZ")} {{container="ray-head", pod="{pod}"}} {text.strip()}')
        elif collector == "rfc5424":
            out.append(f"<14>1 {_rfc3339(t, 6)} {host} ray-job 2211 - - {text}")
        elif collector == "pdsh":
            out.append(f"{host}: {text}")
        else:
            raise ValueError(collector)
    return "\n".join(out).encode("utf-8") + b"\n"


def bom(data: bytes, every: int = 0) -> bytes:
    """A byte-order mark at the start, and before every `every`-th line (`cat` of files that each begin with one)."""
    lines, ends = _lines(data)
    return b"\xef\xbb\xbf" + _join([b"\xef\xbb\xbf" + line if every and n and n % every == 0 else line for n, line in enumerate(lines)], ends)


def stamps(data: bytes, layout: str, step_ms: int = 37, start: str | None = None) -> bytes:
    """A stamp before every line, `step_ms` apart, as `ts`, `kubectl logs --timestamps` and
    `docker logs -t` write them: as the lines were written (from the log's first time, read
    as UTC), or from `start` on, when the log was read again later (`ts` on a copy)."""
    lines, ends = _lines(data)
    if start is None:
        times = _times(lines, step_ms)
    else:
        times = [datetime.fromisoformat(start) + timedelta(milliseconds=step_ms * n) for n in range(len(lines))]
    return _join([t.strftime(layout).encode() + line for line, t in zip(lines, times, strict=True)], ends)


def trailing(data: bytes, blanks: str = " ", ending: str = "\n") -> bytes:
    """Blanks after every line, and another line ending (`\r\r\n`: a terminal's copy)."""
    lines, ends = _lines(data)
    return ending.encode().join(line.rstrip(b"\r") + blanks.encode() for line in lines) + (ending.encode() if ends else b"")


def mixed_ends(data: bytes, endings: list[str]) -> bytes:
    """Each line ended by the next of `endings` in turn (a log written on two systems, a copy through a terminal)."""
    lines, ends = _lines(data)
    marks = [e.encode() for e in endings]
    out = b"".join(line.rstrip(b"\r") + marks[n % len(marks)] for n, line in enumerate(lines))
    return out if ends else out[: -len(marks[(len(lines) - 1) % len(marks)])] if lines else out


OPS: dict[str, Callable[..., bytes]] = {f.__name__: f for f in (prefix, colour, wrap, crlf, pad, reverse, noise, record, bom, stamps, trailing, mixed_ends)}


def apply(transform: dict[str, Any], data: bytes) -> bytes:
    params = {k: v for k, v in transform.items() if k not in ("name", "op", "sample")}
    return OPS[transform["op"]](data, **params)
