"""The JSON contract is versioned by a JSON Schema shipped inside the package; the output on
every fixture validates against it, and so do the JSONL lines and what the schema rejects."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from click.testing import CliRunner

import oomlens
from conftest import REAL, SESSIONS, fixture_inputs
from oomlens.cli import main

SCHEMA = oomlens.schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def part(name: str) -> jsonschema.Draft202012Validator:
    """A validator for one `$defs` entry (one JSONL event, one watch line)."""
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": SCHEMA["$defs"]})


@pytest.fixture(scope="module")
def outputs() -> dict[str, dict]:
    return {str(path): oomlens.analyze(str(path), jobs=1).to_dict() for path in fixture_inputs()}


def test_the_schema_is_a_valid_draft_2020_12_schema_of_this_contract_version():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["oomlens"] == {"const": oomlens.CONTRACT_VERSION}


def test_every_fixture_validates(outputs):
    assert len(outputs) >= 70
    failures = {path: [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(out)][:3] for path, out in outputs.items()}
    assert {path: errors for path, errors in failures.items() if errors} == {}


def test_every_id_a_document_names_is_in_it(outputs):
    """What JSON Schema cannot say: incidents and the verdict point at events and incidents that exist."""
    for path, out in outputs.items():
        events = {e["id"] for e in out["events"]}
        incidents = {i["id"] for i in out["incidents"]}
        for incident in out["incidents"]:
            assert {incident["root"], *incident["cascade"]} <= events, path
            assert incident["root"] not in incident["cascade"], path
        if out["verdict"] and out["verdict"].get("incident"):
            assert out["verdict"]["incident"] in incidents, path


def test_the_fixtures_exercise_every_kind_and_an_incident(outputs):
    kinds = {e["kind"] for out in outputs.values() for e in out["events"]}
    assert kinds == set(SCHEMA["$defs"]["kind"]["examples"])
    assert sum(len(out["incidents"]) for out in outputs.values()) > 30


def test_the_cli_json_and_each_jsonl_line_validate():
    session = str(SESSIONS / "ray2.60-b-rl-actor-oom")
    VALIDATOR.validate(json.loads(CliRunner().invoke(main, ["parse", session, "--format", "json", "-j", "1"]).output))
    lines = CliRunner().invoke(main, ["parse", session, "--format", "jsonl", "-j", "1"]).output.splitlines()
    assert len(lines) == 322
    for line in lines:
        part("event").validate(json.loads(line))


@pytest.mark.parametrize(
    "break_it, where",
    [
        (lambda d: d.update(oomlens=2), "oomlens"),
        (lambda d: d["events"][0].update(kind="CUDA OOM"), "events/0/kind"),
        (lambda d: d["events"][0].pop("fields"), "events/0"),
        (lambda d: d["events"][0].update(time="22/11/2026 03:37"), "events/0/time"),
        (lambda d: d["incidents"][0].update(fingerprint="not-a-hash"), "incidents/0/fingerprint"),
        (lambda d: d["incidents"][0].update(memory="swap"), "incidents/0/memory"),
        (lambda d: d["verdict"].update(component="trainer"), "verdict"),
        (lambda d: next(e for e in d["events"] if e["kind"] == "ray_oom_kill")["fields"].update(node_used_bytes="3.49GB"), "events/"),
    ],
)
def test_the_schema_rejects_a_broken_contract(outputs, break_it, where):
    whole = outputs[str(SESSIONS / "ray2.60-b-rl-actor-oom")]
    broken = copy.deepcopy({**whole, "events": whole["events"][:2] + [e for e in whole["events"] if e["kind"] != "gpu_memory"]})
    VALIDATOR.validate(broken)
    break_it(broken)
    errors = list(VALIDATOR.iter_errors(broken))
    assert errors
    assert any("/".join(map(str, e.absolute_path)).startswith(where) for e in errors), [e.message for e in errors]


def test_an_empty_diagnosis_validates():
    out = oomlens.analyze(str(REAL / "007_verl_2151.log"), jobs=1).to_dict()
    assert out["incidents"] == [] and out["verdict"] is None
    VALIDATOR.validate(out)
