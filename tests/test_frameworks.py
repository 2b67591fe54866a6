"""Which framework wrote the logs (data/frameworks.toml): named only when the logs say it,
hedged between a base and its forks when they show only what all of them print, and the
remedies then given under each one's own setting names."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import REAL
from oomlens import analyze
from oomlens.cli import main
from oomlens.remedies import detect_frameworks

KNOWN = {"verl", "easyr1", "openrlhf", "orz", "trl"}
# simpleRL-reason ran on OpenRLHF first and on veRL later: either is the framework's own
ALSO = {"simplerl": {"openrlhf", "verl"}}


def _expectations() -> list[tuple[str, str]]:
    found = []
    for path in sorted(REAL.glob("*.expected.json")):
        framework = json.loads(path.read_text(encoding="utf-8")).get("framework")
        found.append((path.name.removesuffix(".expected.json"), framework))
    return found


@pytest.mark.parametrize(("name", "expected"), _expectations())
def test_a_framework_named_is_one_the_thread_shows(name, expected):
    """Never a wrong name: what is named is the framework (or a set holding it); a log of a
    framework oomlens has no remedies for names none."""
    named = analyze(str(REAL / f"{name}.log"), jobs=1).frameworks
    allowed = ALSO.get(expected, {expected})
    if not allowed & KNOWN:
        assert named == (), f"{name}: {expected} log named {named}"
    elif named:
        assert allowed & set(named), f"{name}: {expected} log named {named}"


def test_what_verl_and_its_forks_all_print_names_both():
    assert detect_frameworks("(WorkerDict pid=4002) ...") == ("verl", "easyr1")
    assert detect_frameworks('File "/x/verl/single_controller/ray/base.py", line 3') == ("verl", "easyr1")
    assert detect_frameworks('File "/x/verl/trainer/ppo/ray_trainer.py", line 3') == ("verl",)
    assert detect_frameworks('File "/x/verl/trainer/ray_trainer.py", line 3\n(WorkerDict pid=1)') == ("easyr1",)
    assert detect_frameworks('File "/workspace/verl/RLDecisionAgent/AReaL/areal/engine/sglang_remote.py"') == ()


def test_an_easyr1_excerpt_gets_easyr1_s_setting_names():
    """EasyR1#59: a kill report naming only `main_task`, which veRL and EasyR1 both run. The
    thread's fix (EasyR1's actor offload settings) is among the remedies, under EasyR1's name."""
    result = CliRunner().invoke(main, ["parse", str(REAL / "001_easyr1_59.log"), "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert (found["verdict"]["framework"], found["verdict"]["frameworks"]) == (None, ["verl", "easyr1"])
    remedies = {(r["framework"], r["setting"]) for r in found["incidents"][0]["remedies"]}
    assert {("easyr1", "worker.actor.offload.offload_params"), ("easyr1", "worker.actor.offload.offload_optimizer")} <= remedies
    assert ("verl", "actor_rollout_ref.actor.fsdp_config.param_offload") in remedies


def test_a_log_that_says_its_framework_gets_only_that_one_s_settings():
    found = analyze(str(REAL / "043_easyr1fork_9.log"), jobs=1)
    assert found.frameworks == ("easyr1",)
    assert all(r["framework"] in ("easyr1", "any") for remedies in found.remedies.values() for r in remedies)


def test_the_terminal_and_markdown_say_both_and_label_each_setting():
    text = CliRunner().invoke(main, ["parse", str(REAL / "001_easyr1_59.log"), "--color", "never"], env={"COLUMNS": "400"}).output
    fix = text.split("\nFIX", 1)[1].split("\nSEEN", 1)[0].splitlines()  # one fix a line, under its framework's name
    lines = [line.strip() for line in fix]
    assert lines[lines.index("verl:") + 1] == "actor_rollout_ref.actor.fsdp_config.param_offload=False"
    assert lines[lines.index("easyr1:") + 1] == "worker.actor.offload.offload_params=false"
    assert "framework verl or easyr1" in text
    md = CliRunner().invoke(main, ["parse", str(REAL / "001_easyr1_59.log"), "--format", "markdown"]).output
    assert "**framework:** verl or easyr1" in md
