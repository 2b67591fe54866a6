"""`pip install .` (not editable) into a fresh venv, then `oomlens parse` from another
folder: proves the grammars ship inside the wheel and nothing reads the source tree.

The venv takes oomlens's dependencies from the one running the tests (a path in a .pth
file: that folder's own .pth files, the editable install's among them, are not read), so
the test builds and installs the wheel alone, not pandas, numpy and plotly again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from conftest import REAL, ROOT

pytestmark = pytest.mark.slow  # builds a wheel and a venv


def _pip(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """pip of the interpreter running the tests, in the source tree."""
    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_installed_wheel_parses_a_fixture_from_another_folder(tmp_path):
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)  # pip below installs into it (`pip --python`): seconds, not minutes
    python = target / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # the wheel is built by the interpreter the editable install was (it is abi3): the core's
    # build is cargo's cached one, not made again for another interpreter's path
    wheels = tmp_path / "wheels"
    build = _pip("wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), ".", env=env, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    install = _pip("--python", str(python), "install", "--no-compile", "--no-deps", "--quiet", *map(str, wheels.glob("oomlens-*.whl")), env=env, timeout=300)
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
