"""Logs as collectors ship them (issue 32, item 1): a file of records of docker's json-file,
fluent-bit, journald (-o json and -o export), Cloud Logging, ECS, CloudWatch, a Loki CSV,
logcli, RFC 5424 syslog or pdsh reads as the log it holds, its lines a collector cut joined
again; a record alone in a paste is peeled where it stands. The forms are data
(`[[record]]` of oomlens/data/envelopes.toml, each with samples checked here)."""

from __future__ import annotations

import io
import json
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, SESSIONS
from oomlens import analyze
from oomlens.data import load
from oomlens.envelopes import RECORD_BY_NAME, collector_of, peel, unwrapped
from oomlens.sources import decoding

sys.path.insert(0, str(Path(__file__).parent / "robustness"))
from ops import record  # noqa: E402

RECORDS = [(r["name"], s) for r in load("envelopes.toml")["record"] for s in r.get("sample", ())]
CONSOLES = sorted(SESSIONS.glob("ray2.60-*/driver-console.log"))
COLLECTORS = ["docker_json", "fluent_bit", "journald_json", "journald_export", "gcp_logging", "ecs", "cloudwatch", "loki_csv", "logcli", "rfc5424", "pdsh"]


def shown(stamp) -> str | None:
    text = f"{stamp.year:04d}-{stamp.month:02d}-{stamp.day:02d} {stamp.hour:02d}:{stamp.minute:02d}:{stamp.second:02d}"
    return text if stamp.millis is None else f"{text}.{stamp.millis:03d}"


@pytest.mark.parametrize("name,sample", RECORDS, ids=[f"{n}:{i}" for i, (n, _) in enumerate(RECORDS)])
def test_record_sample(name, sample):
    collector = RECORD_BY_NAME[name]
    if collector.peel:  # read where it stands, a line at a time
        line = peel(sample["record"])
        assert line.text == sample["text"]
        assert line.pid == sample.get("pid")
        if "stamp" in sample:
            assert shown(line.stamp) == sample["stamp"] and line.stamp.zone == sample.get("zone")
        return
    raw = [ln.encode() + b"\n" for ln in sample["record"].split("\n")]
    assert [ln.decode().rstrip("\n") for ln in unwrapped(collector, iter(raw))] == sample["lines"]
    assert collector_of(b"".join(raw)) is collector or collector.form == "export"


def test_every_record_form_but_the_stream_only_ones_has_a_sample():
    for entry in load("envelopes.toml")["record"]:
        assert entry.get("sample") or entry["form"] == "export", entry["name"]


def facts(diagnosis) -> tuple:
    """The verdict, and each event's kind, pid and component: what a way of shipping must keep."""
    verdict = diagnosis.verdict or {}
    components = {i.root.pid: i.component for i in diagnosis.incidents}
    return (
        (verdict.get("component"), verdict.get("memory"), verdict.get("root_kind")),
        sorted((e.kind, e.pid or 0) for e in diagnosis.events),
        sorted((pid or 0, c or "") for pid, c in components.items()),
    )


PLAIN: dict[Path, tuple] = {}  # each console's facts, read once, when a test asks (not while the suite is collected)


def plain(console: Path) -> tuple:
    if console not in PLAIN:
        PLAIN[console] = facts(analyze(str(console), jobs=1))
    return PLAIN[console]


CASES = [pytest.param(c, col, id=f"{c.parent.name}-{col}") for c in CONSOLES for col in COLLECTORS]


@pytest.mark.parametrize(("console", "collector"), CASES)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step_ms=st.integers(1, 60), host=st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True), piece=st.sampled_from([0, 7, 16384]))
def test_a_ray_2_60_console_shipped_by_a_collector_reads_as_the_plain_one(tmp_path, console, collector, step_ms, host, piece):
    """The same verdict, pids and components as the plain console, whatever the stamps'
    spacing, the host's name or where docker cut a long line."""
    shipped = tmp_path / f"{collector}-{step_ms}.log"
    shipped.write_bytes(record(console.read_bytes(), collector, step_ms=step_ms, piece=piece, host=host, pod=f"{host}-pod"))
    diagnosis = analyze(str(shipped), jobs=1)
    assert facts(diagnosis) == plain(console)
    assert not diagnosis.problems


def test_the_hosts_and_pods_records_name_reach_the_lines():
    text = record(b"(raylet) x\n", "fluent_bit", host="gpu-node-7", pod="head-0")
    [line] = list(unwrapped(RECORD_BY_NAME["docker_json"], iter([text])))
    peeled = peel(line.decode())
    assert (peeled.text, peeled.host, peeled.actor, peeled.stamp.zone) == ("x", "gpu-node-7", "raylet", 0)
    assert line.startswith(b"[host/gpu-node-7] [pod/head-0/ray-head] 2026-03-12T11:00:00.000000Z ")


ACTOR_DIED = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: RewardModelRayActor\n\tactor_id: 3d9e4d90dd8007c038c824cd01000000\n\tpid: 4242\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker unexpectedly exits with a connection error code 2. End of file.\n"
)


def deaths(path: Path) -> list[tuple]:
    diagnosis = analyze(str(path), jobs=1)
    return [(e.kind, e.pid, e.actor) for e in diagnosis.events]


def test_an_actor_died_error_in_docker_records_is_one_death_with_its_pid(tmp_path):
    (tmp_path / "plain.log").write_text(ACTOR_DIED)
    (tmp_path / "docker.log").write_bytes(record(ACTOR_DIED.encode(), "docker_json"))
    (tmp_path / "one.log").write_bytes(record(ACTOR_DIED.encode(), "docker_json", piece=1 << 20).split(b"\n")[0] + b"\n")
    plain = deaths(tmp_path / "plain.log")
    assert plain == [("ray_worker_died", 4242, "RewardModelRayActor")]
    assert deaths(tmp_path / "docker.log") == plain
    # one record alone in a file: its first line, still a death (its fields are in the next records)
    assert [k for k, *_ in deaths(tmp_path / "one.log")] == ["ray_worker_died"]


def test_a_record_alone_in_a_plain_paste_is_peeled_where_it_stands(tmp_path):
    kill = (SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log").read_text().splitlines(keepends=True)
    lines = list(kill)
    at = next(i for i, ln in enumerate(lines) if "A worker died" in ln or "Workers (tasks / actors) killed" in ln or "killed due to" in ln)
    lines[at] = json.dumps({"log": lines[at], "stream": "stderr", "time": "2026-11-22T03:37:29.100Z"}) + "\n"
    (tmp_path / "mixed.log").write_text("".join(lines))
    (tmp_path / "plain.log").write_text("".join(kill))
    assert facts(analyze(str(tmp_path / "mixed.log"), jobs=1)) == facts(analyze(str(tmp_path / "plain.log"), jobs=1))


def test_an_export_entry_of_several_lines_is_each_of_them_once(tmp_path):
    """journald keeps a message of several lines (a traceback logged whole) as one binary
    field: each line is read, with the entry's time, and one kill stays one."""
    console = SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log"
    text = console.read_bytes()
    head = b"__CURSOR=s=0;i=1\n__REALTIME_TIMESTAMP=1795318649000000\n_HOSTNAME=gpu-node-3\n"
    entry = head + b"MESSAGE\n" + struct.pack("<Q", len(text)) + text + b"\n\n"
    (tmp_path / "journal.export").write_bytes(entry + head.replace(b"i=1", b"i=2") + b"MESSAGE=done\n\n")
    assert facts(analyze(str(tmp_path / "journal.export"), jobs=1)) == plain(console)


def test_a_csv_cell_of_several_lines_and_quotes_is_read_whole(tmp_path):
    body = ACTOR_DIED.replace("\n", "\r\n").replace("End of file.", 'End of "file".')
    rows = 'labels,Time,Line\n"{""pod"":""head-0""}",2026-03-12T11:00:00Z,"' + body.replace('"', '""') + '"\n'
    (tmp_path / "explore.csv").write_text(rows)
    assert deaths(tmp_path / "explore.csv") == [("ray_worker_died", 4242, "RewardModelRayActor")]


def test_no_log_of_the_fixtures_is_taken_for_a_collector_s_records():
    """Every line of a head must be a record of one collector: no real log, no file of a real
    Ray session (its events/ files are Ray's own records, read where they stand) ever is."""
    paths = [p for p in sorted(FIXTURES.rglob("*")) if p.is_file() and "robustness" not in p.parts]
    taken = [(str(p.relative_to(FIXTURES)), c.name) for p in paths if (c := collector_of(p.read_bytes()[: decoding.RECORDS_HEAD])) is not None]
    assert len(paths) > 1000 and taken == []


def test_a_stream_of_records_is_read_as_its_lines_through_the_sources():
    text = record(b"(raylet) a\n  b\n", "journald_json")
    stream = decoding.as_text(io.BufferedReader(io.BytesIO(text)))
    assert stream.read() == b"[host/gpu-node-3] 2026-03-12T11:00:00.000000Z (raylet) a\n[host/gpu-node-3] 2026-03-12T11:00:00.037000Z   b\n"


def test_a_head_within_one_line_docker_cut_is_read_as_its_pieces():
    """A stream whose first 64 KiB are pieces of one long line (docker cuts at 16 KiB of
    text): no record in the head ends its line, yet each is as long as docker's piece, so the
    stream is read as pieces; records of one length that are not docker's (five watchdog
    lines of one width, as fluent-bit writes them unended) stay lines of their own."""
    long = "x" * (5 * 16384 + 100)
    pieces = [long[i : i + 16384] for i in range(0, len(long), 16384)]
    records = [json.dumps({"log": p, "stream": "stdout", "time": "2026-03-12T11:17:34Z"}) for p in pieces[:-1]]
    records += [json.dumps({"log": pieces[-1] + "\n", "stream": "stdout", "time": "2026-03-12T11:17:34Z"})]
    records += [json.dumps({"log": "after\n", "stream": "stdout", "time": "2026-03-12T11:17:35Z"})]
    data = ("\n".join(records) + "\n").encode()
    collector = collector_of(data[: 1 << 16])
    assert collector is not None and collector.unended
    lines = [ln.decode() for ln in unwrapped(collector, iter(ln + b"\n" for ln in data.split(b"\n")[:-1]))]
    assert [ln.rstrip("\n").rsplit(" ", 1)[-1] for ln in lines] == [long, "after"]
    same = [json.dumps({"log": "w" * 40, "stream": "stderr", "time": "2026-03-12T11:17:34Z"}) for _ in range(5)]
    assert not collector_of(("\n".join(same) + "\n").encode()).unended  # type: ignore[union-attr]


@pytest.mark.parametrize("collector, document", [("gcp_logging", "array"), ("cloudwatch", "events"), ("cloudwatch", "logEvents"), ("ecs", "array")])
@pytest.mark.parametrize("console", CONSOLES[:: max(1, len(CONSOLES) // 4)], ids=lambda p: p.parent.name)
def test_a_console_exported_as_one_json_document_reads_as_the_plain_one(tmp_path, console, collector, document):
    """`gcloud logging read --format json` writes one pretty-printed JSON array of entries;
    `aws logs filter-log-events` an object whose "events" holds them (a CloudWatch export's
    "logEvents"): the records are read one at a time, as their one-a-line forms are."""
    records = [json.loads(line) for line in record(console.read_bytes(), collector).decode().splitlines()]
    whole = records if document == "array" else {document: records, "searchedLogStreams": []}
    shipped = tmp_path / "export.json"
    shipped.write_text(json.dumps(whole, indent=2, ensure_ascii=False), encoding="utf-8")
    diagnosis = analyze(str(shipped), jobs=2)
    assert facts(diagnosis) == plain(console)
    assert not diagnosis.problems


def test_a_json_document_cut_short_keeps_what_it_holds_and_one_of_no_records_stays_text(tmp_path):
    said = "(raylet) A worker died or was killed while executing a task by an unexpected system error."
    records = [{"textPayload": said, "timestamp": "2026-03-12T11:17:34Z", "severity": "DEFAULT", "resource": {"type": "k8s_container"}}] * 3
    text = json.dumps(records, indent=2)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.rindex("{") + 20])  # the third record cut in its middle
    assert [e.kind for e in analyze(str(cut), jobs=1).events] == ["ray_worker_died"] * 2
    config = tmp_path / "config.json"  # a document of objects no collector writes: its text, as it stands
    config.write_text(json.dumps([{"note": "rank 0 failed: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)"}], indent=2))
    assert [e.kind for e in analyze(str(config), jobs=1).events] == ["cuda_oom"]


def test_a_json_document_is_read_by_one_process(tmp_path, monkeypatch):
    """A document's records are not cut at line breaks: its byte ranges would start inside
    one record, so a big document is never read in ranges."""
    from oomlens import ranges
    from oomlens.sources import discover

    entry = {"textPayload": "step 1 done " + "x" * 200, "timestamp": "2026-03-12T11:17:34Z", "severity": "DEFAULT", "resource": {"type": "k8s_container"}}
    shipped = tmp_path / "export.json"
    shipped.write_text(json.dumps([entry] * 20000, indent=2))
    monkeypatch.setattr(ranges, "RANGE_MIN", 1 << 19)
    [item] = discover([str(shipped)])
    assert item.size > 4 * ranges.RANGE_MIN and ranges.ranges_of(item, 3) is None


@pytest.mark.parametrize("collector", ["docker_json", "journald_json", "journald_export"])
def test_a_line_cut_in_pieces_ends_with_its_last_piece_and_the_next_keeps_its_own_time(collector):
    """docker's 16 KiB pieces and journald's LineMax pieces (_LINE_BREAK=line-max) make one
    line, with its first piece's time; the line after it is a line of its own, at its own time."""
    data = record(b"x" * 40 + b"\n(raylet) next line\n", collector, step_ms=1000, piece=16)
    c = collector_of(data[: 1 << 16])
    assert c is not None
    lines = [ln.decode() for ln in unwrapped(c, iter(ln + b"\n" for ln in data.split(b"\n")[:-1]))]
    assert [peel(ln).text for ln in lines] == ["x" * 40, "next line"]
    assert [shown(peel(ln).stamp)[-6:-4] for ln in lines] == ["00", "01"]  # 11:00:00 and 11:00:01


def test_the_host_a_record_names_is_the_node_of_its_lines_and_one_node_keeps_one_name(tmp_path):
    """One fluent-bit stream of two hosts: each line's events are on the host its record
    names, unless Ray's prefix names a node's IP; where a raylet's own line names its node's
    IP on a host's record, that host is that IP (one node, one name)."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n}.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.00 GiB is free."
    summary = (
        "(raylet) [2026-03-12 11:17:36,391 E 2105 2105] (raylet) node_manager.cc:3099: 1 Workers (tasks / actors) killed due to memory pressure (OOM), "
        "0 Workers crashed due to other reasons at node (ID: 5c2b0e1f, IP: 10.0.0.8) over the last time period."
    )
    lines = [
        {"date": 1773314254.5, "log": oom.format(n=1) + "\n", "kubernetes": {"pod_name": "w-a", "host": "gpu-node-a"}},
        {"date": 1773314255.5, "log": oom.format(n=2) + "\n", "kubernetes": {"pod_name": "w-b", "host": "gpu-node-b"}},
        {"date": 1773314256.5, "log": "(WorkerDict pid=43, ip=10.0.0.7) " + oom.format(n=3) + "\n", "kubernetes": {"pod_name": "w-b", "host": "gpu-node-b"}},
        {"date": 1773314257.5, "log": summary + "\n", "kubernetes": {"pod_name": "head", "host": "gpu-node-a"}},
    ]
    shipped = tmp_path / "fluent.log"
    shipped.write_text("".join(json.dumps(r) + "\n" for r in lines))
    events = analyze(str(shipped), jobs=1).events
    told = sorted((e.fields["requested_bytes"] >> 30, e.node) for e in events if e.kind == "cuda_oom")
    assert told == [(1, "10.0.0.8"), (2, "gpu-node-b"), (3, "10.0.0.7")]
