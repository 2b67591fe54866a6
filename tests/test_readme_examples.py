"""Every example in the README runs: the `pycon` session as a doctest, each `python` bot as a
script with the arguments its docstring shows, the network replaced by a check of the
message it would post. Run in a folder holding a bundled session as `ray_logs/` and its
driver console as `driver.log`, the names the README uses."""

from __future__ import annotations

import doctest
import json
import re
import shlex
import shutil
import sys
import urllib.request

import pytest

from conftest import REAL, ROOT, SESSIONS

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(python|pycon)\n(.*?)^```", re.M | re.S)
BLOCKS = [(m.group(1), m.group(2), README.count("\n", 0, m.start()) + 2) for m in BLOCK.finditer(README)]
BOTS = [(code, line) for lang, code, line in BLOCKS if lang == "python"]
PYCON = [(code, line) for lang, code, line in BLOCKS if lang == "pycon"]
SLACK = "https://hooks.slack.com/services/T0000/B0000/XXXXXXXX"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    session = SESSIONS / "ray2.60-b-rl-actor-oom"
    shutil.copytree(session / "logs", tmp_path / "ray_logs")
    shutil.copy(session / "driver-console.log", tmp_path / "driver.log")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def posted(monkeypatch):
    """The requests the examples would send; nothing leaves the machine."""
    sent: list[urllib.request.Request] = []

    def urlopen(request, timeout=None):
        sent.append(request)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setenv("SLACK_WEBHOOK_URL", SLACK)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_test")
    return sent


def run_script(code: str, line: int, monkeypatch, args: list[str] | None = None) -> None:
    """Run a README block as `python x.py ARGS`, with the ARGS its docstring's usage shows."""
    usage = re.search(r"python (\S+\.py) ([^\"\n]+)", code)
    assert usage, f"README.md:{line}: the docstring shows no `python x.py ARGS` usage"
    monkeypatch.setattr(sys, "argv", [usage.group(1), *(args or shlex.split(usage.group(2)))])
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__main__"})


def test_the_readme_has_the_examples_the_issue_asks_for():
    assert len(PYCON) == 1 and len(BOTS) == 2
    assert max(len(code.splitlines()) for code, _ in BOTS) <= 20


@pytest.mark.parametrize("code, line", PYCON, ids=lambda v: f"README.md:{v}" if isinstance(v, int) else "")
def test_the_python_session_prints_what_the_readme_shows(code, line, workdir):
    test = doctest.DocTestParser().get_doctest(code, {}, "README", "README.md", line)
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.append)
    assert result.attempted > 10
    assert result.failed == 0, "".join(out)
    assert (workdir / "oom-report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def check_slack(request: urllib.request.Request) -> None:
    assert request.full_url == SLACK and request.headers == {"Content-type": "application/json"}
    text = json.loads(request.data)["text"]
    first, summary, *fixes = text.splitlines()
    assert first == ":boom: *reward_model* ran out of *host* memory"
    assert summary.startswith("host memory OOM on node 192.0.2.2 at 2026-11-22 03:37:43.200")
    assert len(fixes) == 3 and fixes[0].startswith("• `actor_rollout_ref.actor.fsdp_config.param_offload` → False: ")


def check_github(request: urllib.request.Request) -> None:
    assert request.full_url == "https://api.github.com/repos/octo/rl-train/issues/42/comments"
    assert request.get_method() == "POST" and request.headers["Authorization"] == "Bearer ghp_test"
    body = json.loads(request.data)["body"]
    assert body.startswith("## oomlens diagnosis")
    assert "**Component:** reward_model · **memory:** host" in body


CHECKS = {"hooks.slack.com": check_slack, "api.github.com": check_github}


@pytest.mark.parametrize("code, line", BOTS, ids=lambda v: f"README.md:{v}" if isinstance(v, int) else "")
def test_each_bot_posts_one_message_about_the_crash(code, line, workdir, posted, monkeypatch):
    run_script(code, line, monkeypatch)
    (request,) = posted
    CHECKS[request.host](request)


@pytest.mark.parametrize("code, line", BOTS, ids=lambda v: f"README.md:{v}" if isinstance(v, int) else "")
def test_each_bot_stays_quiet_on_a_healthy_run(code, line, workdir, posted, monkeypatch):
    healthy = str(REAL / "007_verl_2151.log")
    args = shlex.split(re.search(r"python \S+\.py ([^\"\n]+)", code).group(1))
    run_script(code, line, monkeypatch, [healthy if a in ("ray_logs/", "driver.log") else a for a in args])
    assert posted == []
