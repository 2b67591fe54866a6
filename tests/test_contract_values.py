"""Every value a log prints reaches the JSON contract as the schema says (issue 32, items 8
and 12): sizes in every unit a grammar accepts become integers, a size or pid no memory or
process has is null where the schema allows it, or kept out of a typed field with the event
saying why; a block a Transformer cannot read whole keeps its event with what it could read."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

import oomlens
from oomlens.events import UNITS, to_bytes
from oomlens.grammars import families

SCHEMA = oomlens.schema()
EVENT = jsonschema.Draft202012Validator({"$ref": "#/$defs/event", "$defs": SCHEMA["$defs"]})
SAMPLES = [s.text for fam in families() for s in fam.samples]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# the units common.lark's SIZE_UNIT accepts, as logs write them
SIZE_UNITS = ["bytes", *(p + tail for p in "KMGTPEZY" for tail in ("", "B", "iB"))]


def read(text: str) -> tuple[list[dict], list[str]]:
    """The events and problems of a log holding `text`, as the contract gives them (the
    clock has moved a zoned stamp onto the run's)."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "pasted.log"
        log.write_bytes(text.encode() + b"\n")
        contract = oomlens.analyze(str(log), jobs=1).to_dict()
    return contract["events"], [p for i in contract["inputs"] for p in i["problems"]]


def schema_errors(events: list[dict]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for event in events for e in EVENT.iter_errors(event)]


@pytest.mark.parametrize("unit", SIZE_UNITS)
def test_every_unit_a_grammar_accepts_converts(unit):
    assert unit.lower() in UNITS
    value = to_bytes(f"2.85{unit}", "GB")
    exponent = "KMGTPEZY".index(unit[0]) + 1 if unit != "bytes" else 0
    assert value == (round(2.85 * 1024**exponent) if 2.85 * 1024**exponent < 2**63 else None)


def test_a_kill_report_sized_in_zettabytes_keeps_its_event():
    """Ray's policy list with a size past any machine: the kill is read, the size is null."""
    line = (
        "(raylet) Task _map_task failed due to oom. There are infinite oom retries remaining, so the task will be retried. "
        "Error: 1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.50.112, ID: 4cb25bc0) "
        "was 28.62GB / 30.00GB (0.954017), which exceeds the memory usage threshold of 0.950000; Ray killed 1 worker(s) based on "
        "the killing policy: [(Task: job ID=05000000, lease ID=2f00ffff, task name=map_task, required resources={memory: 8, CPU: 1}, "
        "pid=3471, actual memory used={size}, worker ID=8150a4b5)]"
    )
    events, problems = read(line.replace("{size}", "2.85ZB"))
    assert problems == []
    assert schema_errors(events) == []
    (kill,) = events
    assert kill["kind"] == "ray_oom_kill" and kill["fields"]["killed"][0]["pid"] == 3471
    assert kill["fields"]["killed"][0]["bytes"] is None  # 2.85 ZiB: past 2**63 bytes
    assert kill["fields"]["node_used_bytes"] == round(28.62 * 2**30)

    events, problems = read(line.replace("{size}", "lots"))  # no size at all: the block still fails in part
    (kill,) = events
    assert kill["fields"]["node_total_bytes"] == 30 * 2**30 and kill["fields"]["unread"]
    assert [p for p in problems if "read only in part" in p and "not a size: 'lots'" in p]
    assert not [p for p in problems if "please report" in p]


def test_verl_minus_one_means_not_known():
    events, _ = read(
        "(WorkerDict pid=169054) DEBUG:2025-06-28 18:06:41,828:Before building vllm rollout, memory allocated (GB): 1.84, "
        "memory reserved (GB): 3.68, device memory used/total (GB): -1/23.59"
    )
    (reading,) = events
    assert reading["fields"]["used_bytes"] is None and reading["fields"]["total_bytes"] == round(23.59 * 2**30)
    assert schema_errors(events) == []


def test_vllm_total_with_a_bare_unit_letter_is_an_integer_of_bytes():
    events, _ = read("Memory profiling results: total_gpu_memory=23.58G initial_memory_usage=15.34GiB kv_cache_size=2.89 gpu_memory_utilization=0.90")
    (reading,) = events
    assert reading["fields"]["total_bytes"] == round(23.58 * 2**30)
    assert reading["fields"]["kv_cache_bytes"] is None  # printed without a unit: which is not known
    assert reading["fields"]["gpu_memory_utilization"] == 0.9
    assert schema_errors(events) == []


def test_vllm_kv_cache_below_zero_stays_signed():
    """A size that is a remainder (the KV cache left) may be below zero: it did not fit."""
    (reading,), _ = read("(EngineCore_0 pid=880) INFO 04-11 08:00:00 [gpu_worker.py:227] Available KV cache memory: -0.3 GiB")
    assert reading["fields"]["kv_cache_bytes"] == round(-0.3 * 2**30)


def test_a_top_10_row_whose_pid_no_process_has_is_kept_out_of_top_and_said():
    report = (
        "Memory on the node (IP: 10.0.0.5, ID: 5c2b) where the task (actor ID: 3f7a2c01000000, name=WorkerDict.generate, "
        "pid=41234, memory used=61.20GB) was running was 482.37GB / 503.52GB (0.957993), which exceeds the memory usage "
        "threshold of 0.95. Ray killed this worker (ID: 8f1e) because it was the most recently scheduled task; to see more "
        "information about memory usage on this node, use `ray logs raylet.out -ip 10.0.0.5`. Top 10 memory users:\n"
        "PID\tMEM(GB)\tCOMMAND\n41234\t61.20\tray::WorkerDict.generate\n9223372036854775808\t2.50\tpython x.py\n77\t99999999999999999999\tpython y.py"
    )
    events, problems = read(report)
    (kill,) = events
    assert schema_errors(events) == []
    assert [r["pid"] for r in kill["fields"]["top"]] == [41234]
    assert kill["fields"]["top_unread"] == ["9223372036854775808 2.50 python x.py", "77 99999999999999999999 python y.py"]
    assert not [p for p in problems if "please report" in p]


NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: f"{f:.2f}"),
    st.sampled_from(["-1", "0", "1e400", "9" * 30, "-0.5", "18446744073709551616"]),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_a_grammar_sample_with_any_number_in_any_unit_gives_a_valid_contract(sample, data):
    """Mutate one number of a sample (huge, negative, odd), perhaps with a unit glued on:
    every event still validates against the shipped schema, and no block is lost to an
    error of oomlens."""
    places = list(NUMBER.finditer(sample))
    if not places:
        return
    where = data.draw(st.sampled_from(places))
    number = data.draw(NUMBERS) + data.draw(st.sampled_from(["", "", *SIZE_UNITS]))
    text = sample[: where.start()] + number + sample[where.end() :]
    events, problems = read(text)
    assert schema_errors(events) == [], text
    assert not [p for p in problems if "please report" in p], text


def test_a_rule_that_fails_costs_its_part_only(tmp_path):
    """Any family: a Transformer method that raises on what the log printed leaves its rule
    None; the rest of the block still makes the draft, which lists what it lost."""
    import lark

    from oomlens.grammars import family

    grammar = tmp_path / "demo_sizes.lark"
    grammar.write_text('//! trigger: demo sizes\nstart: "demo sizes" used "/" total\nused: WORD\ntotal: WORD\nWORD: /[^\\s\\/]+/\n%ignore " "\n')

    class Demo(lark.Transformer):
        def start(self, items):
            return [{"kind": "gpu_memory", "fields": {"used_bytes": items[0], "total_bytes": items[1]}}]

        def used(self, items):
            return to_bytes(str(items[0]))

        total = used

    fam = family(grammar, Demo)
    assert fam.parse("demo sizes 1.5GiB / 2GiB")[0] == [{"kind": "gpu_memory", "fields": {"used_bytes": 3 << 29, "total_bytes": 2 << 30}}]
    [draft], _ = fam.parse("demo sizes lots / 2GiB")
    assert draft["fields"]["used_bytes"] is None and draft["fields"]["total_bytes"] == 2 << 30
    assert draft["fields"]["unread"] == ["used: ValueError: not a size: 'lots'"]


DOCUMENT = jsonschema.Draft202012Validator(SCHEMA)


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=4), st.data())
def test_a_log_of_mutated_samples_gives_a_whole_document_that_validates(tmp_path_factory, samples, data):
    """Several mutated samples in one log, through the whole pipeline: the document (events,
    incidents, the verdict, the remedies worked out from the sizes) validates."""
    lines = []
    for sample in samples:
        places = list(NUMBER.finditer(sample))
        if places:
            where = data.draw(st.sampled_from(places))
            sample = sample[: where.start()] + data.draw(NUMBERS) + data.draw(st.sampled_from(["", *SIZE_UNITS])) + sample[where.end() :]
        lines.append(sample)
    log = tmp_path_factory.mktemp("mutated") / "driver.log"
    log.write_text("\n".join(lines) + "\n")
    document = oomlens.analyze(str(log), jobs=1).to_dict()
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in DOCUMENT.iter_errors(document)]
    assert errors == [], lines
