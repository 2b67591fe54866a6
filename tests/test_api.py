"""The Python API for incident bots and notebooks: analyze, parse_text, the Diagnosis and
its renderings, lazy imports, fingerprints that survive new pids, IPs and times, and the
exit codes scripts rely on."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import oomlens
from conftest import INCIDENTS, REAL, ROOT, SESSIONS, fixture_inputs
from oomlens.cli import main
from oomlens.outputs.frame import FRAME_COLUMNS

SESSION = SESSIONS / "ray2.60-b-rl-actor-oom"


@pytest.fixture(scope="module")
def session() -> oomlens.Diagnosis:
    return oomlens.analyze(str(SESSION), jobs=1)


# -- analyze and parse_text ------------------------------------------------------------------


def test_analyze_gives_events_incidents_and_verdict(session):
    assert isinstance(session, oomlens.Diagnosis)
    assert [e.kind for e in session.events if e.kind != "gpu_memory"] == ["ray_oom_kill", "ray_worker_died"]
    (incident,) = session.incidents
    assert isinstance(incident, oomlens.Incident)
    assert incident.root.kind == "ray_oom_kill" and [e.kind for e in incident.cascade] == ["ray_worker_died"]
    assert session.verdict["component"] == "reward_model" and session.verdict["memory"] == "host"
    assert session.to_dict()["incidents"][0]["root"] == incident.root.id


def test_jobs_change_nothing_but_speed(session):
    assert oomlens.analyze(str(SESSION), jobs=2).to_dict() == session.to_dict()


def test_parse_text_reads_a_snippet_pasted_into_chat():
    lines = (SESSION / "driver-console.log").read_text().splitlines()
    snippet = "\n".join(lines[89:135])  # the OutOfMemoryError and Ray's Top-10 table, as pasted
    events = oomlens.parse_text(snippet)
    assert [e.id for e in events] == ["e1"]
    (kill,) = events
    assert isinstance(kill, oomlens.Event) and kill.kind == "ray_oom_kill"
    assert kill.fields["node_used_bytes"] == 3747358966 and kill.fields["top"][0]["pid"] == 14522
    assert oomlens.parse_text("all good, step 12 done\n") == []


# -- renderings ------------------------------------------------------------------------------


def test_frame_is_one_row_per_event_with_fixed_dtypes(session):
    frame = session.to_frame()
    assert len(frame) == len(session.events) == 322
    assert list(frame.columns) == list(FRAME_COLUMNS)
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == FRAME_COLUMNS
    assert frame["kind"].value_counts().to_dict() == {"gpu_memory": 320, "ray_oom_kill": 1, "ray_worker_died": 1} | {
        k: 0 for k in frame["kind"].cat.categories if k not in ("gpu_memory", "ray_oom_kill", "ray_worker_died")
    }
    kill = frame[frame["kind"] == "ray_oom_kill"].iloc[0]
    assert kill["time"] == pd.Timestamp("2026-11-22 03:37:43.200")
    assert kill["node_used_bytes"] == 3747358966 and kill["node_total_bytes"] == 25275882537
    assert (kill["incident"], kill["incident_role"], kill["component"]) == ("i1", "root", "reward_model")
    death = frame[frame["kind"] == "ray_worker_died"].iloc[0]
    assert (death["incident"], death["incident_role"]) == ("i1", "cascade")
    samples = frame[frame["kind"] == "gpu_memory"]
    assert samples["allocated_bytes"].notna().all() and samples["incident"].isna().all()
    assert samples["allocated_bytes"].max() == round(16.40 * 1024**3)  # the highest "memory allocated (GB)" printed


def test_frame_dtypes_are_the_same_on_every_fixture_even_empty():
    dtypes = {str(path): oomlens.analyze(str(path), jobs=1).to_frame().dtypes.to_dict() for path in fixture_inputs()[::6]}
    empty = oomlens.analyze(str(REAL / "007_verl_2151.log"), jobs=1).to_frame()
    assert len(empty) == len(oomlens.analyze(str(REAL / "007_verl_2151.log"), jobs=1).events)
    nothing = oomlens.analyze(str(ROOT / "pyproject.toml"), jobs=1).to_frame()
    assert len(nothing) == 0
    for found in [*dtypes.values(), empty.dtypes.to_dict(), nothing.dtypes.to_dict()]:
        assert found == nothing.dtypes.to_dict()


@pytest.mark.parametrize(
    "source",
    [SESSION, INCIDENTS / "cascade-vllm-wakeup-cuda-oom" / "driver-console.log", INCIDENTS / "easyr1-ref-offload-host-oom" / "session"],
    ids=lambda p: p.parent.name if p.name in ("session", "driver-console.log") else p.name,
)
def test_frame_plots_with_plotly_express_as_it_is(source):
    """px colours by a process, a node or a kind one trace per value (a pid is no scale),
    over a frame with missing pids and nodes, and the figure writes to HTML."""
    import plotly.express as px

    frame = oomlens.analyze(str(source), jobs=1).to_frame()
    y = "used_bytes" if frame["used_bytes"].notna().any() else "allocated_bytes"
    for plot in (px.scatter, px.line):
        for colour in ("pid", "node", "kind"):
            figure = plot(frame, x="time", y=y, color=colour)
            given = frame[frame[colour].notna()]
            assert sorted(t.name for t in figure.data) == sorted({str(v) for v in given[colour]}), (plot.__name__, colour)
            assert sum(len(t.y) for t in figure.data) == len(given)
            assert sorted(v for t in figure.data for v in t.y if v == v) == sorted(given[y].dropna())  # every size, in bytes
            page = figure.to_html(include_plotlyjs=False)
            assert all(f'"name":"{t.name}"' in page for t in figure.data)
    if source != SESSION:  # these hold events that name no process or no node
        assert frame["pid"].isna().any() or frame["node"].isna().any()


def test_markdown_names_root_cause_component_and_evidence(session):
    md = session.to_markdown()
    assert md.startswith("## oomlens diagnosis")
    assert "**Root cause:** host memory OOM on node 192.0.2.2 at 2026-11-22 03:37:43.200" in md
    assert "**Component:** reward_model · **memory:** host" in md
    assert "### Incident i1: Ray OOM kill (host)" in md
    assert "| 14522 | 2.39 | `ray::RewardModelRayActor.compute_reward` |" in md


def test_html_report_is_written_where_asked(session, tmp_path):
    written = session.to_html(tmp_path / "incident.html")
    assert written == tmp_path / "incident.html"
    page = written.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "reward_model" in page


# -- import weight ---------------------------------------------------------------------------


def test_import_is_light_and_pandas_and_plotly_wait_until_used():
    code = (
        "import sys, oomlens\n"
        "print(sorted(m for m in ('pandas', 'plotly', 'lark', 'numpy') if m in sys.modules))\n"
        f"d = oomlens.analyze({str(SESSION)!r}, jobs=1)\n"
        "print(sorted(m for m in ('pandas', 'plotly') if m in sys.modules))\n"
        "d.to_frame()\n"
        "print(sorted(m for m in ('pandas', 'plotly') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["[]", "[]", "['pandas']"]


def test_version_is_the_installed_package_s_as_the_command_says_it():
    from importlib.metadata import version

    assert oomlens.__version__ == version("oomlens") and re.fullmatch(r"\d+\.\d+\.\d+\S*", oomlens.__version__)
    said = subprocess.run([sys.executable, "-m", "oomlens", "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert said.split()[-1] == oomlens.__version__
    fresh = subprocess.run([sys.executable, "-c", "import oomlens; print(oomlens.__version__)"], capture_output=True, text=True, timeout=60, check=True)
    assert fresh.stdout.strip() == oomlens.__version__


def test_the_package_says_it_is_typed():
    assert (Path(oomlens.__file__).parent / "py.typed").is_file()


# -- fingerprints ----------------------------------------------------------------------------

DELTA = timedelta(days=3, hours=5, minutes=7, seconds=11)
IP = re.compile(r"(?<![\d.])(\d{1,3}\.\d{1,3}\.\d{1,3}\.)(\d{1,3})(?![\d.])")
FULL = re.compile(r"(?<!\d)(\d{4}-\d\d-\d\d)([ T_])(\d\d:\d\d:\d\d)")  # 2026-11-22 03:37:43
SHORT = re.compile(r"(?<![\d-])(\d\d-\d\d)( )(\d\d:\d\d:\d\d)")  # vLLM: 06-09 17:08:25
GLOG = re.compile(r"(?<![A-Za-z0-9])([IWEF])(\d{3,4}) (\d\d:\d\d:\d\d)")  # c10/glog: E411 10:42:41
SYSLOG = re.compile(r"\b((?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d)")
EPOCH = re.compile(r'("timestamp":\s*)(\d{10})')  # events/*.log


def _later(text: str, fmt: str) -> datetime:
    return datetime.strptime(text, fmt) + DELTA


def moved(text: str, pids: dict[int, int]) -> str:
    """The same logs from another run: other IPs, pids and times, consistently everywhere."""
    text = IP.sub(lambda m: f"{m.group(1)}{int(m.group(2)) % 250 + 3}", text)
    if pids:
        alternatives = "|".join(str(p) for p in sorted(pids, reverse=True))
        text = re.sub(rf"(?<!\d)({alternatives})(?!\d)", lambda m: str(pids[int(m.group(1))]), text)
    text = FULL.sub(lambda m: _later(f"{m[1]} {m[3]}", "%Y-%m-%d %H:%M:%S").strftime(f"%Y-%m-%d{m[2]}%H:%M:%S"), text)
    text = SHORT.sub(lambda m: _later(f"2025-{m[1]} {m[3]}", "%Y-%m-%d %H:%M:%S").strftime("%m-%d %H:%M:%S"), text)

    def glog(m: re.Match[str]) -> str:
        day = m[2]
        t = _later(f"2025-{day[:-2]}-{day[-2:]} {m[3]}", "%Y-%m-%d %H:%M:%S")
        return f"{m[1]}{t.month:0{len(day) - 2}d}{t.day:02d} {t:%H:%M:%S}"

    text = GLOG.sub(glog, text)
    text = SYSLOG.sub(lambda m: _later(f"2025 {m[1]}", "%Y %b %d %H:%M:%S").strftime("%b %e %H:%M:%S"), text)
    return EPOCH.sub(lambda m: m[1] + str(int(m[2]) + int(DELTA.total_seconds())), text)


def pids_in(out: dict) -> dict[int, int]:
    """Every pid the diagnosis saw, each mapped to a new one."""
    found = set()
    for event in out["events"]:
        f = event["fields"]
        found |= {event["pid"], f.get("pid"), f.get("task_pid")}
        for rows in (f.get("killed"), f.get("top"), f.get("considered")):
            found |= {row.get("pid") for row in rows} if isinstance(rows, list) else set()
    return {pid: pid + 1111 for pid in found if isinstance(pid, int) and pid >= 100}


def copy_moved(source: Path, target: Path, pids: dict[int, int]) -> None:
    files = [source] if source.is_file() else [p for p in source.rglob("*") if p.is_file()]
    for path in files:
        rel = path.relative_to(source.parent)
        out = target / Path(*(moved(part, pids) for part in rel.parts))  # pids in file names, IPs in folder names
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            out.write_text(moved(path.read_text(encoding="utf-8"), pids), encoding="utf-8")
        except UnicodeDecodeError:
            shutil.copy(path, out)


STABILITY = [
    SESSION,
    SESSIONS / "ray2.49-c-actor-sigkill",
    SESSIONS / "ray2.60-e-restartable-actor-oom",
    INCIDENTS / "openrlhf-reward-model-host-oom" / "session",
    INCIDENTS / "cascade-kernel-oom-multinode" / "session",
    INCIDENTS / "cascade-vllm-wakeup-cuda-oom" / "driver-console.log",
    INCIDENTS / "orz-ppo-cuda-oom-at-load" / "driver-console.log",
    REAL / "076_simplerl_25.log",
    REAL / "072_raydiscuss_10958.log",
    REAL / "006_wmpo_3.log",
]


@pytest.mark.parametrize("source", STABILITY, ids=lambda p: p.parent.name if p.name in ("session", "driver-console.log") else p.name)
def test_fingerprints_survive_other_pids_ips_and_times(source, tmp_path):
    before = oomlens.analyze(str(source), jobs=1).to_dict()
    copy_moved(source, tmp_path, pids_in(before))
    after = oomlens.analyze(str(tmp_path / source.name), jobs=1).to_dict()

    def where(out: dict) -> list:
        roots = {e["id"]: e for e in out["events"]}
        return [(roots[i["root"]]["time"], roots[i["root"]]["node"], roots[i["root"]]["pid"]) for i in out["incidents"]]

    assert before["incidents"]
    assert where(after) != where(before)  # the copy really is another run
    assert [i["fingerprint"] for i in after["incidents"]] == [i["fingerprint"] for i in before["incidents"]]


def test_fingerprints_tell_different_incidents_apart():
    prints = {
        source: [i["fingerprint"] for i in oomlens.analyze(str(source), jobs=1).to_dict()["incidents"]]
        for source in (SESSION, SESSIONS / "ray2.60-c-actor-sigkill", INCIDENTS / "orz-ppo-cuda-oom-at-load" / "driver-console.log")
    }
    firsts = [found[0] for found in prints.values()]
    assert len(set(firsts)) == len(firsts)


# -- exit codes for scripts ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, code",
    [
        (["parse", str(SESSION), "--fail-on", "incident"], 3),
        (["parse", str(REAL / "007_verl_2151.log"), "--fail-on", "incident"], 0),
        (["parse", str(SESSION)], 0),
        (["parse", str(SESSION), "--fail-on", "oom-ish"], 2),
        (["parse", "--fail-on", "incident"], 2),
        (["parse", "/nonexistent/ray_logs", "--fail-on", "incident"], 1),
    ],
)
def test_exit_codes(args, code):
    result = CliRunner().invoke(main, [*args, "-j", "1"])
    assert result.exit_code == code, result.output
