"""`pip install .` (not editable) into a fresh venv, then `oomlens parse` from another
folder: proves the grammars ship inside the wheel and nothing reads the source tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv

import pytest

from conftest import REAL, ROOT

pytestmark = pytest.mark.slow  # builds a wheel and a venv


def test_installed_wheel_parses_a_fixture_from_another_folder(tmp_path):
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)  # pip below installs into it (`pip --python`): seconds, not minutes
    python = target / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-compile", "--quiet", "."],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import oomlens, oomlens.grammars as g; print(oomlens.__file__); print(g.grammar_dir())"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    site = str(target / "lib")
    assert [line.startswith(site) for line in where.stdout.splitlines()] == [True, True], where.stdout + where.stderr

    run = subprocess.run(
        [str(target / "bin" / "oomlens"), "parse", str(REAL / "006_wmpo_3.log"), "--format", "json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["inputs"][0]["problems"] == []
    assert "ray_oom_summary" in {e["kind"] for e in out["events"]}
