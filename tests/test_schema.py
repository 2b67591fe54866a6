"""The JSON contract is versioned by a JSON Schema shipped inside the package; the output on
every fixture validates against it, and so do the JSONL lines and what the schema rejects."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

import oomlens
from conftest import REAL, SESSIONS, fixture_inputs
from oomlens.cli import main
from oomlens.kinds import Kinds, field_doc, field_schema, shipped

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


# -- a kind's contract lives in its kinds.toml entry; the schema and DESIGN.md are written from it

SHIPPED = Path(oomlens.__file__).parent / "schema" / "oomlens-v1.schema.json"
DESIGN = Path(__file__).parent.parent / "docs" / "DESIGN.md"


def contract_schema(base: dict, kinds: Kinds) -> dict:
    """The contract's schema with each kind's `fields` typed as its entry says (`fields_<kind>`
    beside `event`, and one `if kind ... then fields` of the event per kind)."""
    defs: dict = {}
    for name, value in base["$defs"].items():
        if name.startswith("fields_"):
            continue
        defs[name] = value
        if name == "event":
            for kind in kinds.values():
                props = {field: field_schema(spec) for field, spec in kind.contract}
                defs[f"fields_{kind.name}"] = {"description": kind.what, "type": "object", "properties": props}
    event = dict(defs["event"])
    event["allOf"] = [{"if": {"properties": {"kind": {"const": k}}}, "then": {"properties": {"fields": {"$ref": f"#/$defs/fields_{k}"}}}} for k in kinds]
    defs["event"] = event
    return {**base, "$defs": defs}


def design_tables(kinds: Kinds) -> dict[str, str]:
    """DESIGN.md's table of kinds and table of their fields, written from the entries."""
    what = ["| kind | what |", "|---|---|", *(f"| `{k.name}` | {k.what} |" for k in kinds.values())]
    typed = ["| kind | fields |", "|---|---|"]
    typed += [f"| `{k.name}` | {', '.join(field_doc(f, spec) for f, spec in k.contract)} |" for k in kinds.values() if k.contract]
    return {"kinds": "\n".join(what), "fields": "\n".join(typed)}


def _marked(text: str, name: str, table: str) -> str:
    begin, end = f"<!-- {name}: written from oomlens/data/kinds.toml by python tests/test_schema.py -->", f"<!-- end {name} -->"
    found = re.search(re.escape(begin) + r"\n.*?\n" + re.escape(end), text, re.S)
    assert found is not None, f"DESIGN.md has no {begin}"
    return text[: found.start()] + f"{begin}\n{table}\n{end}" + text[found.end() :]


def written_design(text: str, kinds: Kinds) -> str:
    for name, table in design_tables(kinds).items():
        text = _marked(text, name, table)
    return text


def test_every_kind_says_what_it_is_and_types_its_fields():
    for kind in shipped().values():
        assert kind.what and kind.contract, kind.name


def test_the_shipped_schema_types_each_kind_s_fields_as_its_entry_says():
    shipped_file = json.loads(SHIPPED.read_text(encoding="utf-8"))
    assert shipped_file == contract_schema(shipped_file, shipped()), "run: python tests/test_schema.py"


def test_design_s_tables_of_kinds_are_written_from_the_entries():
    text = DESIGN.read_text(encoding="utf-8")
    assert text == written_design(text, shipped()), "run: python tests/test_schema.py"


def test_a_field_of_a_type_the_contract_does_not_know_fails_at_load():
    from oomlens.kinds import read_kinds

    with pytest.raises(ValueError, match="type 'bytez'"):
        read_kinds('[x]\nlabel = "x"\nrole = "failure"\n[x.fields]\nsize = "bytez"\n')


@pytest.mark.parametrize(
    "kind, fields",
    [
        ("supervisor_oom", {"supervisor": "k8s"}),
        ("sigkill", {"exit_code": "-9"}),
        ("kernel_oom", {"tasks": [{"pid": "12"}]}),
        ("process_error", {"relayed": "yes"}),
        ("gpu_memory", {"cpu_used_bytes": -1}),
    ],
)
def test_a_kind_s_field_out_of_its_type_is_refused(kind, fields):
    event = {
        "id": "e1", "kind": kind, "time": None, "source": {"path": "x", "line": 1, "end_line": 1}, "node": None, "pid": None,
        "actor": None, "method": None, "rank": None, "gpu": None, "component": None, "memory": None, "fields": fields, "text": "",
    }  # fmt: skip
    assert list(part("event").iter_errors(event))


if __name__ == "__main__":
    base = json.loads(SHIPPED.read_text(encoding="utf-8"))
    SHIPPED.write_text(json.dumps(contract_schema(base, shipped()), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    DESIGN.write_text(written_design(DESIGN.read_text(encoding="utf-8"), shipped()), encoding="utf-8")
    sys.exit(0)
