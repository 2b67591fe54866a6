"""Odd and hostile values inside real log lines: a time no clock shows, numbers past what any
reader holds, sizes no memory has. Each is read as "not known" where it stands; the
command never fails, the contract stays valid, and the events around it are all kept."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from click.testing import CliRunner

import oomlens
from conftest import REAL
from oomlens import scan
from oomlens.cli import main

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size} GiB. GPU {gpu} has a total capacity of 79.15 GiB of which 1.05 GiB is free."
BEFORE = "2026-01-01 00:00:00,000 - trainer - ERROR - " + OOM.format(size="2.00", gpu=0)
AFTER = "2026-01-01 00:20:00,000 - trainer - ERROR - " + OOM.format(size="4.00", gpu=0)
SUMMARY = (
    "[{stamp} E 1 2] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed "
    "due to other reasons at node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.0.0.1) over the last time period."
)
HUGE = "9" * 5000  # past Python's 4,300-digit int() limit, and past any float

ODD = {
    "13th month": SUMMARY.format(stamp="2026-13-05 10:00:00,000"),
    "February 30th": "2026-02-30 10:00:00,000 - trainer - ERROR - " + OOM.format(size="3.00", gpu=0),
    "leap second": "2026-12-31 23:59:60,000 - trainer - ERROR - " + OOM.format(size="3.00", gpu=0),
    "year 9999": SUMMARY.format(stamp="9999-12-31 23:59:59,000"),
    "size 1e999": OOM.format(size="1e999", gpu=0),
    "size of 5000 digits": OOM.format(size=f"{HUGE}.00", gpu=0),
    "GPU past 2**63": OOM.format(size="3.00", gpu=10**30),
    "pid past 2**63": f"(WorkerDict pid={10**30}, ip=10.0.0.1) " + OOM.format(size="3.00", gpu=0),
    "reading past 2**63": "(WorkerDict pid=7) Before state_dict() in sharding manager memory, memory allocated (GB): 13.18, memory reserved (GB): 46.43, "
    f"device memory used/total (GB): {10**22}/80",
    "reading of 5000 digits": f"(WorkerDict pid=7) Before state_dict() in sharding manager memory, memory allocated (GB): {HUGE}, memory reserved (GB): 46.43",
    "a bare CUDA OOM line": "RuntimeError: CUDA out of memory.",
    "size in TiB past any GPU": OOM.format(size="999999", gpu=0).replace("GiB", "TiB", 1),
    "JSON record at epoch 1e999": '{"message": "' + OOM.format(size="3.00", gpu=0) + '", "timestamp": 1e999}',
    "JSON record at epoch NaN": '{"message": "' + OOM.format(size="3.00", gpu=0) + '", "timestamp": NaN}',
    "JSON record of a pid of 5000 digits": '{"message": "' + OOM.format(size="3.00", gpu=0) + f'", "pid": {HUGE}}}',
}


@pytest.mark.parametrize("odd", list(ODD))
def test_an_odd_value_is_not_known_and_its_neighbours_are_kept(tmp_path, odd):
    log = tmp_path / "trainer.log"
    log.write_text(f"{BEFORE}\n{ODD[odd]}\n{AFTER}\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "oomlens", "parse", str(log), "--format", "json"], capture_output=True, text=True, timeout=120)
    assert (run.returncode, "Traceback" in run.stderr) == (0, False), run.stderr[-500:]
    for fmt in ("table", "markdown", "jsonl"):  # the other formats, by the command in this process (as a notebook's CliRunner)
        told = CliRunner().invoke(main, ["parse", str(log), "--format", fmt])
        assert (told.exit_code, told.exception, "Traceback" in told.stderr) == (0, None, False), (fmt, told.stderr[-500:])
    found = json.loads(run.stdout)
    jsonschema.Draft202012Validator(oomlens.schema()).validate(found)
    sizes = [e["fields"].get("requested_bytes") for e in found["events"] if e["kind"] == "cuda_oom"]
    assert {2 * 1024**3, 4 * 1024**3} <= set(sizes), sizes  # the neighbours, whole
    assert len(found["events"]) == 3, [e["kind"] for e in found["events"]]  # the odd one too, with what is known
    assert all(len(line) < 400 for line in run.stderr.splitlines())
    frame = oomlens.analyze(str(log), jobs=1).to_frame()
    assert len(frame) == 3


@pytest.mark.parametrize("line", ['{"a":' * 50_000, "[" * 50_000, '{"message": ' * 2_000 + '"x"'], ids=["objects", "arrays", "messages"])
def test_json_nested_past_any_record_is_no_record_and_costs_its_neighbours_nothing(tmp_path, line):
    """The lines after a block's start are peeled to see whether they go on with it: a JSON
    record nested thousands deep made the decoder raise inside the block before it."""
    log = tmp_path / "trainer.log"
    log.write_text(f"{BEFORE}\n{line}\n{AFTER}\n", encoding="utf-8")
    found = oomlens.analyze(str(log), jobs=1)
    assert [(e.kind, e.source.line, e.fields["requested_bytes"]) for e in found.events] == [("cuda_oom", 1, 2 << 30), ("cuda_oom", 3, 4 << 30)]
    assert found.problems == []


def test_a_time_no_clock_shows_is_no_time_and_the_line_lies_between_its_neighbours(tmp_path):
    log = tmp_path / "trainer.log"
    log.write_text(f"{BEFORE}\n{ODD['February 30th']}\n{AFTER}\n", encoding="utf-8")
    [_, odd, _] = oomlens.analyze(str(log), jobs=1).events
    assert (odd.time, odd.time_inferred, odd.time_latest) == ("2026-01-01T00:00:00.000", True, "2026-01-01T00:20:00.000")
    log.write_text(f"{BEFORE}\n{ODD['leap second']}\n", encoding="utf-8")
    assert oomlens.analyze(str(log), jobs=1).events[-1].time == "2026-12-31T23:59:59.000"


def test_a_block_oomlens_fails_on_costs_that_block_alone(tmp_path, monkeypatch):
    """Whatever the cause (a bug of oomlens, text no grammar foresaw), the blocks before and
    after a bad one in the same chunk are read, and one line says which was left out."""
    lines = [line for line in (REAL / "005_verl_224.log").read_text(encoding="utf-8").splitlines()]
    log = tmp_path / "trainer.log"
    log.write_text("\n".join([BEFORE, *lines, AFTER]) + "\n", encoding="utf-8")
    whole = oomlens.analyze(str(log), jobs=1)
    original = scan.Blocks.read

    def failing(self, data, start, *args):  # the kill report's block fails
        if b"MEM(GB)" in bytes(data[start : data.find(b"\n", start)]):
            raise RuntimeError("a bug\nover two lines")
        return original(self, data, start, *args)

    monkeypatch.setattr(scan.Blocks, "read", failing)
    found = oomlens.analyze(str(log), jobs=1)
    assert [e.kind for e in found.events] == [e.kind for e in whole.events if e.kind != "ray_oom_kill"]
    [problem] = found.problems
    assert "1 block(s) oomlens could not read, left out; the rest was read" in problem
    assert "first at line 2: RuntimeError: a bug" in problem and "\n" not in problem


def _runs_first(items, anchored: bool = False) -> bool:
    """Can a search of this pattern try, at every place of a line, a run of a character
    class first (a cost that grows with the square of a long line of such characters)?"""
    from re import _constants as c  # sre's opcodes

    for op, av in items:
        if op is c.AT:
            anchored = anchored or av is c.AT_BEGINNING or av is c.AT_BEGINNING_STRING
            continue
        if op is c.ASSERT_NOT or (op is c.ASSERT and av[0] < 0):
            continue  # looks back one fixed stretch: no run
        if anchored:
            return False  # tried at one place only
        if op is c.ASSERT:
            if _runs_first(av[1]):
                return True
            continue
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            low, high, item = av
            first = item[0][0] if len(item) else None
            if high > 64 and first in (c.IN, c.ANY, c.NOT_LITERAL, c.CATEGORY):
                return True
            if _runs_first(item):
                return True
            if low == 0:
                continue  # optional: what follows may come first
            return False
        if op is c.SUBPATTERN:
            return _runs_first(av[3])
        if op is c.BRANCH:
            return any(_runs_first(branch) for branch in av[1])
        if op in (c.IN, c.ANY, c.NOT_LITERAL, c.CATEGORY):
            continue  # one character of a class: a run may follow it
        return False  # a literal: the search moves on at once where it is not
    return False


def test_every_start_and_trigger_begins_with_text():
    """A family's start and trigger patterns are searched at every place of a line (`re`);
    none may begin with a run of a character class, or an optional prefix of one: an
    exception's class before a message is a `lead`, looked for only before a start found."""
    import re as regex

    from oomlens.grammars import families

    found = []
    for family in families():
        for pattern in [family.start.pattern, *family.triggers]:
            if _runs_first(regex._parser.parse(pattern).data):
                found.append((family.name, pattern[:80]))
    assert not found, found
    assert _runs_first(regex._parser.parse(r"(?:[A-Za-z_][\w.]*Error: )?CUDA out of memory").data)  # what it finds
    assert not _runs_first(regex._parser.parse(r"^(?=.*memory allocated)").data)


def test_a_long_line_of_word_characters_before_a_message_is_read_whole(tmp_path):
    log = tmp_path / "trainer.log"
    log.write_text("a." * 150_000 + " torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", encoding="utf-8")
    [event] = oomlens.analyze(str(log), jobs=1).events
    assert (event.kind, event.fields["requested_bytes"], event.fields.get("exception")) == ("cuda_oom", 2 * 1024**3, "torch.OutOfMemoryError")


def test_a_snippet_with_a_lone_surrogate_is_read():
    assert oomlens.parse_text("\udfff") == []
    [event] = oomlens.parse_text("x\udfff torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert (event.kind, event.fields["requested_bytes"]) == ("cuda_oom", 2 * 1024**3)


@pytest.mark.parametrize(
    "line",
    [
        "Watchdog caught collective operation timeout " * 12000,
        "ray::A.b() (pid=1, " * 25000,
        "The actor died unexpectedly before finishing this task. " * 9000,
    ],
    ids=["watchdog", "ray header", "actor death"],
)
def test_a_long_line_of_triggers_that_never_parse_is_parsed_a_bounded_number_of_times(tmp_path, monkeypatch, line):
    """Each of its thousands of hits read the whole line again, and each read tried every
    record glued on it: the square of the line, twice (a 0.5 MB line ran for minutes)."""
    from oomlens.grammars import Family

    parses = []
    original = Family.parse
    monkeypatch.setattr(Family, "parse", lambda self, text: parses.append(len(text)) or original(self, text))
    log = tmp_path / "odd.log"
    log.write_text(line + "\n", encoding="utf-8")
    found = oomlens.analyze(str(log), jobs=1)
    assert found.readable and not found.problems
    from oomlens.blocks import GLUED_TRIES

    assert len(parses) <= 2 * (GLUED_TRIES + 2)  # a first parse and a bounded few glued records, per family hit


def test_a_bad_byte_on_every_line_is_decoded_once_not_once_per_line(tmp_path, monkeypatch):
    """Each decoding error holds a copy of all it was given: decoding the rest of a chunk
    from each bad line on made a chunk with one on every line cost its square (7 s for 4 MB)."""
    import codecs

    given = []
    original = codecs.utf_8_decode
    monkeypatch.setattr(codecs, "utf_8_decode", lambda data, *args: given.append(len(data)) or original(data, *args))
    log = tmp_path / "worker-01-ffff-4242.err"
    text = ("\udcff" + OOM.format(size="2.00", gpu=0) + "\n").encode("utf-8", "surrogateescape") * 12_000
    log.write_bytes(text)
    found = oomlens.analyze(str(log), jobs=1)
    assert found.inputs[0].problems == ["12000 line(s) with invalid UTF-8, shown as U+FFFD"]
    assert sum(given) <= 2 * len(text), (sum(given), len(text))  # each byte about once, whatever the chunk
