"""The registry of kinds (data/kinds.toml, oomlens/kinds.py): every stage reads a kind's
meaning from it, and a family added from outside the package (its own grammar, Transformer
and kinds entry) is read, diagnosed and rendered by every output without touching a module."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import lark
import pytest

import oomlens
from oomlens import schema
from oomlens.correlate import EXPLAINERS
from oomlens.grammars import families
from oomlens.kinds import Kind, kind_of, read_kinds, shipped
from oomlens.outputs.table import render as table, summary as details
from oomlens.registry import Registry
from oomlens.text import render, size
from oomlens.timeline import READERS

ROOT = Path(__file__).resolve().parent.parent

# SGLang's start-up error when its KV cache does not fit (sglang/srt/model_executor/model_runner.py)
GRAMMAR = r"""
//! trigger: Not enough memory\. Please try to increase --mem-fraction-static
//! sample: sglang_memory_error setting=--mem-fraction-static
//| RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.
start: "RuntimeError:"? "Not enough memory." "Please try to increase" SETTING "."
SETTING: /--[a-z-]+/
%ignore " "
"""

KINDS = """
[sglang_memory_error]
label = "SGLang memory error"
role = "memory"
memory = "gpu"
cascade_s = 600
component = "rollout"
explain = "gpu"
marker = ["diamond-open", "#17becf"]
summary = "GPU memory: SGLang could not fit its KV cache{on_node}{at} (raise {setting})"
details = "{setting} too small"
"""

LOG = """\
[2026-11-26 06:00:01 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=3.12 GB
[2026-11-26 06:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/model_runner.py", line 187, in __init__
    self.init_memory_pool(
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.
"""


class SGLangTransformer(lark.Transformer):
    def start(self, items):
        return [{"kind": "sglang_memory_error", "memory": "gpu", "fields": {"setting": str(items[0])}}]


@pytest.fixture
def sglang(tmp_path: Path) -> Registry:
    grammar = tmp_path / "sglang_memory.lark"
    grammar.write_text(GRAMMAR, encoding="utf-8")
    return Registry.shipped().add(grammar, SGLangTransformer, KINDS)


def test_a_family_added_from_outside_is_read_diagnosed_and_rendered(sglang, tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text(LOG, encoding="utf-8")
    for jobs in (1, 2):
        found = oomlens.analyze(str(log), jobs=jobs, registry=sglang)
        reading, event = found.events  # SGLang's "Load weight end." is a memory reading (readings.lark)
        assert (reading.kind, reading.fields["label"], reading.fields["free_bytes"]) == ("gpu_memory", "sglang load weight", round(3.12 * 2**30))
        assert (event.kind, event.fields["setting"], event.time) == ("sglang_memory_error", "--mem-fraction-static", "2026-11-26T06:00:02")
        [incident] = found.incidents
        assert (incident.memory, incident.component, incident.confidence) == ("gpu", "rollout", 0.85)
        assert found.verdict["summary"] == "GPU memory: SGLang could not fit its KV cache after 2026-11-26 06:00:02 (raise --mem-fraction-static)"
        assert "--mem-fraction-static too small" in table(found, width=200)
        assert "### Incident i1: SGLang memory error (gpu)" in found.to_markdown()
        assert found.to_dict()["events"][1]["kind"] == "sglang_memory_error"
        assert list(found.to_frame()["kind"]) == ["gpu_memory", "sglang_memory_error"]
    page = found.to_html(tmp_path / "r.html").read_text(encoding="utf-8")
    assert "SGLang memory error" in page and "#17becf" in page


def test_the_added_family_is_the_registry_s_alone(sglang):
    text = LOG.splitlines()[-1]
    assert [e.kind for e in oomlens.parse_text(text, registry=sglang)] == ["sglang_memory_error"]
    assert oomlens.parse_text(text) == []  # the shipped registry is as it was
    assert "sglang_memory_error" not in shipped()


def test_the_read_options_carry_the_added_family_alone(sglang):
    """What a worker process or a cluster's node is sent: the family added, by its grammar
    file and Transformer; the shipped families are read there again, and no kind is sent."""
    import pickle

    from oomlens.options import Options

    sent = pickle.dumps(Options(budget=None, added=sglang.added))
    again = pickle.loads(sent)
    assert [f.name for f in again.added] == ["sglang_memory"] and again.budget is None
    assert again.families == sglang.families
    assert not [f.name for f in families() if f.path.name.encode() in sent]
    assert b"sglang_memory_error" not in sent  # its kind's entry stays with the process that concludes


def test_an_event_of_a_kind_without_an_entry_is_refused(tmp_path):
    grammar = tmp_path / "sglang_memory.lark"
    grammar.write_text(GRAMMAR, encoding="utf-8")
    log = tmp_path / "sglang.log"
    log.write_text(LOG, encoding="utf-8")
    without = Registry.shipped().add(grammar, SGLangTransformer)
    with pytest.raises(ValueError, match="sglang_memory_error have no entry in the kinds table"):
        oomlens.analyze(str(log), jobs=1, registry=without)


@pytest.mark.parametrize(
    ("wrong", "error"),
    [
        ("//! sample: sglang_memory_error setting", "dictionary update sequence"),  # a value without its key=
        ('//! sample: sglang_memory_error setting="--mem', "No closing quotation"),
        ("//! continue: Traceback (most", "missing \\), unterminated subpattern"),
        ("//! lead: x{2,1}", "min repeat greater than max repeat"),
    ],
)
def test_a_family_added_with_a_directive_written_wrong_is_refused_where_it_is_added(tmp_path, wrong, error):
    """A run compiles a family's patterns and reads its samples only where it needs them:
    one added from outside is still read whole when added, and refused there, not in the
    middle of a run."""
    grammar = tmp_path / "sglang_memory.lark"
    written = GRAMMAR.replace("//! sample: sglang_memory_error setting=--mem-fraction-static", wrong) if "sample" in wrong else f"{wrong}\n{GRAMMAR}"
    grammar.write_text(written, encoding="utf-8")
    with pytest.raises((ValueError, re.error), match=error):
        Registry.shipped().add(grammar, SGLangTransformer, KINDS)


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"label": "x", "role": "memory", "colour": "red"}, "unknown key"),
        ({"label": "x", "role": "oom"}, "role 'oom'"),
        ({"label": "x", "role": "memory", "memory": "disk"}, "memory is"),
        ({"label": "x", "role": "failure", "task_header": "mine"}, "task_header 'mine'"),
        ({"label": "x", "role": "failure", "summary": "{size:huge}"}, "unknown spec 'huge'"),
        ({"label": "x", "role": "failure", "details": "[a [b]]"}, "group inside a group|unbalanced"),
        ({"role": "failure"}, "needs a label"),
        ({"label": "x", "role": "memory", "counts": "x"}, "counts itself"),
    ],
)
def test_a_wrong_entry_fails_where_it_is_read(entry, error):
    with pytest.raises(ValueError, match=error):
        kind_of("x", entry)


def test_the_shipped_kinds_are_listed_in_an_open_vocabulary():
    """Contract v1's kinds are open: a consumer validating with this release's schema accepts a
    kind a later release adds; the kinds this release makes are listed beside it."""
    kinds = shipped()
    contract = schema()
    assert contract["$defs"]["kind"]["examples"] == list(kinds)
    kind = jsonschema.Draft202012Validator({"$defs": contract["$defs"], "$ref": "#/$defs/kind"})
    assert kind.is_valid("a_kind_of_a_later_release") and not kind.is_valid("Not A Kind") and not kind.is_valid(None)
    made = {sample.kind for fam in families() for sample in fam.samples} - {"context", "setting", "clock"}
    assert made <= set(kinds), "a grammar's sample makes a kind without an entry"
    for kind in kinds.values():
        assert kind.explain in EXPLAINERS, kind.name
        assert kind.readings is None or kind.readings in READERS, kind.name
    assert read_kinds((ROOT / "oomlens" / "data" / "kinds.toml").read_text(encoding="utf-8")) == list(kinds.values())


def test_every_kind_tells_every_sample_of_it_in_words():
    """Each kind's details and summary over the events its grammars' samples make: written
    out whole (no brace, no None, no "?"), whatever fields the sample has or lacks."""
    kinds = shipped()
    seen = set()
    for fam in families():
        for sample in fam.samples:
            for event in oomlens.parse_text(sample.text):
                seen.add(event.kind)
                phrase = details(event, kinds).replace(event.said, "")  # a message quoted may hold anything
                assert "{" not in phrase and "None" not in phrase and "?" not in phrase, (fam.name, sample.line, phrase)
                from oomlens.correlate import Incident
                from oomlens.diagnosis import summary

                if kinds[event.kind].failure:
                    sentence = summary(Incident(root=event), kinds)
                    told = sentence.replace(event.said, "")
                    assert "{" not in told and "None" not in told and "?" not in told and sentence, (fam.name, sample.line, sentence)
    assert seen == set(kinds)


@pytest.mark.parametrize(
    ("template", "values", "expected"),
    [
        ("{a} of {b:gib}", {"a": 1, "b": 2 * 1024**3}, "1 of 2.00"),
        ("{a} of {b:size}", {"a": None, "b": 512 * 1024**2}, "? of 512.0 MiB"),
        ("x[, t {t}]", {"t": 0.95}, "x, t 0.95"),
        ("x[, t {t}]", {"t": None}, "x"),
        ("[{a}|{b}|none]", {"a": "", "b": "B"}, "B"),
        ("[{a}|{b}|none]", {}, "none"),
        ("[{u:gib}/{t:gib} GiB|not shown]", {"u": 1024**3}, "not shown"),
        ("killed {k:victims}", {"k": [{"pid": 7, "name": "ray::A", "bytes": 3 * 1024**3}]}, "killed pid 7 ray::A 3.00 GiB"),
        ("killed {k:victims}", {"k": []}, "killed ?"),
    ],
)
def test_templates(template, values, expected):
    assert render(template, values) == expected


def test_one_size_convention():
    assert [size(None), size(0), size(1536 * 1024**2), size(-2 * 1024**3)] == ["?", "0.0 MiB", "1.50 GiB", "-2.00 GiB"]


def test_no_import_circle_among_the_modules():
    """Data flows one way: at import time no module of oomlens needs one that needs it."""
    package = ROOT / "oomlens"
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        needs = graph.setdefault(name, set())
        for node in tree.body:  # module level only: an import inside a function is made when called
            if isinstance(node, ast.ImportFrom):
                base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    base = base.rsplit(".", 1)[0]
                target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
                if target.startswith("oomlens"):
                    needs.update(f"{target}.{a.name}" if f"{target}.{a.name}".replace(".", "/") + ".py" in _files(package) else target for a in node.names)
    cycles = [(a, b) for a in graph for b in graph[a] if b != a and a in _reach(graph, b)]
    assert not cycles, cycles


def _files(package: Path) -> set[str]:
    return {str(p.relative_to(package.parent).with_suffix("")) + ".py" for p in package.rglob("*.py")}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_kind_entries_are_plain_values():
    entry = read_kinds(KINDS)[0]
    assert isinstance(entry, Kind) and entry.marker == ("diamond-open", "#17becf") and entry.folded is False
    assert json.dumps(entry.summary)


def test_folding_and_diagnosing_leave_the_events_they_are_given_as_they_were():
    """One direction: `watch` diagnoses the same events again each round, a bot may too."""
    import copy

    from conftest import fixture_inputs
    from oomlens.diagnosis import diagnose
    from oomlens.events import Clue, Event, fold, to_rows
    from oomlens.pipeline import read_input
    from oomlens.sources import discover

    for path in [p for p in fixture_inputs() if "ray2.60" in str(p)][:3]:
        items = list(discover([str(path)]))
        found = [x for item in items for x in read_input(item)]
        events = [x for x in found if isinstance(x, Event)]
        clues = [x for x in found if isinstance(x, Clue)]
        before = copy.deepcopy(to_rows(events))
        first = diagnose(items, fold(events), clues)
        assert to_rows(events) == before, path
        again = diagnose(items, fold(events), clues)
        assert again.to_dict() == first.to_dict(), path
