"""Outputs render the diagnosis: table with the verdict block, JSON contract, JSONL, Markdown."""

from __future__ import annotations

import copy
import io
import json

import orjson
import pytest
from click.testing import CliRunner

from conftest import REAL, SESSIONS, fixture_inputs
from oomlens import analyze
from oomlens.cli import main
from oomlens.outputs import json as json_output

SESSION = str(SESSIONS / "ray2.60-b-rl-actor-oom")


def run(*args: str):
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200"})  # a wide terminal: one line per row


def test_table_ends_with_the_verdict():
    result = run("parse", SESSION)
    assert result.exit_code == 0
    out = result.output
    assert "ray_oom_kill" in out
    assert "ROOT CAUSE  host memory OOM on node 192.0.2.2" in out
    assert "COMPONENT   reward_model (host memory" in out
    assert "top memory user: pid 14522 ray::RewardModelRayActor.compute_reward 2.39 GiB" in out


def test_json_contract():
    data = json.loads(run("parse", SESSION, "--format", "json").output)
    assert data["oomlens"] == 1
    assert set(data) == {"oomlens", "inputs", "events", "incidents", "verdict", "clocks"}
    kill = next(e for e in data["events"] if e["kind"] == "ray_oom_kill")
    assert kill["pid"] == 14522 and kill["memory"] == "host" and kill["fields"]["top"][0]["pid"] == 14522
    incident = data["incidents"][0]
    assert incident["root"] == kill["id"]
    assert set(incident["cascade"]) <= {e["id"] for e in data["events"]}
    assert incident["component"] == "reward_model" and len(incident["fingerprint"]) == 16
    assert data["verdict"]["component"] == "reward_model" and data["verdict"]["memory"] == "host"
    ids = [e["id"] for e in data["events"]]
    assert ids == [f"e{i}" for i in range(1, len(ids) + 1)]


def test_jsonl_is_one_event_per_line():
    lines = run("parse", str(REAL / "019_ofa_271.log"), "--format", "jsonl").output.splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["rank"] for e in events] == [1, 3, 2, 6, 7]
    assert {e["kind"] for e in events} == {"watchdog_timeout"}


def test_markdown_for_a_github_issue():
    out = run("parse", SESSION, "--format", "markdown").output
    assert out.startswith("## oomlens diagnosis")
    assert "**Component:** reward_model · **memory:** host" in out
    assert "| 14522 | 2.39 | `ray::RewardModelRayActor.compute_reward` |" in out
    assert "### Memory over time" in out


def test_no_incident_says_so():
    out = run("parse", str(REAL / "007_verl_2151.log")).output
    assert "VERDICT     no OOM or crash found in these logs" in out


@pytest.mark.slow
def test_every_real_excerpt_renders_in_every_format():
    """No input may crash an output: a raylet summary root has a count, not a list, of kills.
    Each excerpt is read once and told in each format, by the writers `parse` calls (its own
    path through the command is the tests' above)."""
    import io

    import orjson

    from oomlens import analyze
    from oomlens.outputs.markdown import render as markdown
    from oomlens.outputs.table import render as table

    for path in sorted(REAL.glob("*.log")):
        diagnosis = analyze(str(path), jobs=1)
        diagnosis.write_json(io.BytesIO())
        for event in diagnosis.events:
            orjson.dumps(event.to_dict())
        assert markdown(diagnosis).startswith("## oomlens diagnosis"), path.name
        assert table(diagnosis, 200).strip(), path.name


@pytest.fixture(scope="module")
def sliced():
    """The Ray 2.60 sessions and a real excerpt, each read once for every slice size."""
    return [(path, analyze(str(path), jobs=1)) for path in [p for p in fixture_inputs() if "ray2.60" in str(p)] + [REAL / "007_verl_2151.log"]]


@pytest.mark.parametrize("per_write", [1, 2, 256])
def test_json_written_in_slices_is_the_contract_dumped_whole(per_write, monkeypatch, sliced):
    """`parse --format json` writes the events a slice at a time; the bytes must be those of
    the whole document, indented, whatever the slice size and however many events."""
    monkeypatch.setattr(json_output, "EVENTS_PER_WRITE", per_write)
    for path, read in sliced:
        found = copy.copy(read)  # its events cut below: the one read stays whole for the next slice size
        for events in (found.events, found.events[:3], []):
            found.events = events
            out = io.BytesIO()
            found.write_json(out)
            assert out.getvalue() == orjson.dumps(found.to_dict(), option=orjson.OPT_INDENT_2) + b"\n", f"{path.name}: {len(events)} events"


def test_the_json_escape_of_terminal_controls_is_the_pattern_s_wherever_they_stand():
    """escaped() looks for the bytes a control may begin with before it runs its pattern:
    text built of those controls, their look-alikes (other characters of the same lead
    bytes: an ellipsis, a progress bar's block, a no-break space) and plain bytes is written
    as the pattern alone writes it."""
    import random

    from oomlens.outputs.json import UNSAFE, escaped

    pieces = [
        b"a",
        b"\x7f",
        b"\xc2\x85",
        b"\xc2\xa0",
        b"\xd8\x9c",
        b"\xd8\xa7",
        b"\xe2\x80\x8e",
        b"\xe2\x80\xa6",
        b"\xe2\x81\xa7",
        b"\xe2\x96\x88",
        b'"',
        b"\\u",
    ]
    rng = random.Random(3)
    for _ in range(5000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        assert escaped(data) == UNSAFE.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data), data
