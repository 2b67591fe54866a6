"""What a user reads first is right, whole and ready to paste (issue 31, items 3-8, and
issue 32 item 10): no `?` in a sentence, a message with no numbers quoted, a cascade
grouped and counted, fixes one a line in the form they are pasted, a line with no time
told as the interval its neighbours bound, a pipe never wrapped, and no control character
of a log reaching a terminal."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oomlens
from conftest import REAL, SESSIONS
from oomlens.events import Event, Source
from oomlens.kinds import device_values, shipped
from oomlens.outputs.table import render as table
from oomlens.outputs.verdict import fix_lines, grouped, spans
from oomlens.remedies import new_value, worked_out
from oomlens.text import SPECS, compile_template, render, when

INCIDENTS = REAL.parent / "incidents"
SGR = re.compile(r"\x1b\[[0-9;]*m")  # the only escape the tool writes: its own colours
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def analyzed(*paths) -> oomlens.Diagnosis:
    return oomlens.analyze(*map(str, paths), jobs=1)


# 1. No `?` in what a person reads: every field a log may leave out sits in a group

SAMPLE = {  # a value of each template spec, as an event would hold it
    None: "v",
    "gib": 3 * 1024**3,
    "size": 3 * 1024**3,
    "gib_up": 3 * 1024**3 + 1,
    "victims": [{"pid": 7, "name": "ray::A", "bytes": 1024**3}],
    "first_top": [{"pid": 7, "command": "ray::A", "bytes": 1024**3}],
    "memory_sizes": {"allocated_bytes": 1024**3},
}
# what every event gives a template (Event.values): its device's words too, "unknown" when it names none
ALWAYS = {"at": "", "on_node": "", "fields": {}, "said": "CUDA Error: out of memory", **device_values(None, None)}


def names(template: str) -> dict[str, str | None]:
    """The fields a template names, with the spec each is written in."""
    found: dict[str, str | None] = {}
    for piece in compile_template(template):
        for part in [piece] if not isinstance(piece, tuple) or isinstance(piece[0], str) else [p for alt in piece for p in alt]:
            if isinstance(part, tuple):
                found.setdefault(part[0], part[1])
    return found


TEMPLATES = [(kind.name, which, text) for kind in shipped().values() for which, text in (("summary", kind.summary), ("details", kind.details)) if text]


@pytest.mark.parametrize(("kind", "which", "template"), TEMPLATES, ids=[f"{k}.{w}" for k, w, _ in TEMPLATES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_sentence_of_any_kind_says_a_question_mark_whatever_the_log_left_out(kind, which, template, data):
    fields = {name: spec for name, spec in names(template).items() if name not in ALWAYS}
    shown = data.draw(st.sets(st.sampled_from(sorted(fields))) if fields else st.just(set()))
    values = {**ALWAYS, **{name: SAMPLE[fields[name]] if name in shown else None for name in fields}}
    assert "?" not in render(template, values), (kind, which, shown)


def test_a_group_needs_every_field_it_names():
    assert render("[{u:gib}/{t:gib} GiB|not shown]", {"u": 1024**3}) == "not shown"
    assert render("[{u:gib}/{t:gib} GiB|not shown]", {"u": 1024**3, "t": 2 * 1024**3}) == "1.00/2.00 GiB"
    assert set(SAMPLE) - {None} == set(SPECS)  # the property above tries every spec


@pytest.mark.parametrize(
    ("log", "message"),
    [
        ("127_opensoraplan_386.log", "enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'"),
        ("194_lmmr1_43.log", "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"),
    ],
)
def test_a_message_that_gives_no_numbers_is_quoted_not_questioned(log, message):
    """Real NCCL and vLLM cumem OOMs print no sizes: the headline and the row quote them."""
    diagnosis = analyzed(REAL / log)
    assert diagnosis.verdict is not None
    assert diagnosis.verdict["summary"] == f'GPU memory OOM ("{message}")'
    out = table(diagnosis)
    assert "?" not in out and f'ROOT CAUSE  GPU memory OOM ("{message}")' in out
    assert "tried" not in out  # no number it did not print


def test_sizes_a_message_prints_are_told_as_before():
    diagnosis = analyzed(INCIDENTS / "orz-ppo-cuda-oom-at-load" / "driver-console.log")
    assert diagnosis.verdict is not None
    assert "(CUDA out of memory: tried to allocate 2.37 GiB, 0.27 GiB free of 79.11 GiB)" in diagnosis.verdict["summary"]


# 2. A cascade grouped, counted, never cut


def watchdog(rank: int, second: int) -> Event:
    return Event(
        "watchdog_timeout",
        Source(f"worker-{rank}.err", 3, 3),
        "[Rank 0] Watchdog caught collective operation timeout",
        time=f"2026-11-22T09:12:{second:02d}.100",
        rank=rank,
        pid=100 + rank,
        fields={"watchdog": "nccl", "seq": 7},
    )


def test_a_cascade_of_like_failures_is_one_counted_line():
    members = [watchdog(rank, 58 + min(rank, 1)) for rank in range(8)]
    members[7].time = "2026-11-22T09:13:01.000"
    kinds = shipped()
    assert grouped(members, kinds) == ["8× watchdog timeout, ranks 0–7, 09:12:58–09:13:01"]
    members.append(dataclasses.replace(watchdog(0, 59), kind="ray_worker_died", rank=None, actor="WorkerDict", pid=42, fields={}))
    assert grouped(members, kinds)[1] == "worker death, WorkerDict (pid 42), 09:12:59"
    assert spans([0, 1, 2, 3, 5, 7, 8]) == "0–3, 5, 7–8"


def test_every_member_of_a_long_real_cascade_is_counted_in_the_verdict():
    diagnosis = analyzed(INCIDENTS / "cascade-kernel-oom-multinode" / "session")
    [incident] = [i for i in diagnosis.incidents if diagnosis.verdict and i.id == diagnosis.verdict["incident"]]
    assert len(incident.cascade) > 8  # more than the eight the verdict once kept
    out = table(diagnosis)
    told = out.split("CASCADE", 1)[1].split("FIX", 1)[0]
    counted = sum(int(m.group(1)) if m.group(1) else 1 for m in re.finditer(r"^\s*(?:(\d+)× )?[a-zA-Z]", told, re.M))
    assert counted == len(incident.cascade)
    assert len(diagnosis.to_dict()["incidents"][0]["cascade"]) == len(incident.cascade)  # the JSON keeps each


# 3. Fixes a user can paste


def test_fixes_are_one_a_line_in_the_form_each_setting_takes():
    diagnosis = analyzed(INCIDENTS / "openrlhf-reward-model-host-oom" / "session")
    out = table(diagnosis, width=48)
    lines = out.split("FIX", 1)[1].split("SEEN", 1)[0].splitlines()
    assert any(line.strip() == "--adam_offload   # add it" for line in lines)
    assert any(line.strip() == "export RAY_memory_usage_threshold=0.97" for line in lines)  # whole on its line at 48 columns
    assert "export RAY_memory_usage_threshold=0.97   # higher: now 0.95, halfway to 1; only with care" in table(diagnosis)
    for remedy in diagnosis.remedies["i1"]:
        paste = remedy.get("paste")
        assert paste is None or not re.search(r"[= ](lower|higher|raise|remove)\b", paste), paste
    verl = analyzed(INCIDENTS / "cascade-kernel-oom-multinode" / "session")
    fixes = fix_lines(verl.remedies["i1"])
    assert "data.max_response_length=2048   # lower: now 4096, half of now" in fixes
    assert "actor_rollout_ref.rollout.free_cache_engine=False" in fixes
    assert all(";" not in fix for fix in fixes)


def test_a_direction_with_no_value_now_is_said_beside_the_setting():
    rule = {"setting": "reward_model.micro_batch_size_per_gpu", "value": "lower"}
    assert worked_out(rule, None, None) == {"paste": None, "value": "lower", "direction": "lower", "note": "lower: its value now is not in these logs"}
    assert fix_lines([{"framework": "verl", **rule, **worked_out(rule, None, None)}]) == [
        "reward_model.micro_batch_size_per_gpu   # lower: its value now is not in these logs"
    ]
    cli = {"setting": "--vllm_gpu_memory_utilization", "value": "lower (e.g. 0.5)"}
    assert worked_out(cli, 0.9, 0.1)["paste"] == "--vllm_gpu_memory_utilization 0.75"


@given(current=st.floats(0.05, 0.99), over=st.none() | st.floats(0, 1))
def test_a_lower_fraction_is_lower_by_at_least_how_far_it_went_over(current, over):
    found = new_value("lower", current, over)
    if found is not None:
        value = float(found[0])
        assert 0.05 <= value < current and round(value * 20, 6) == int(round(value * 20, 6))
        assert over is None or value <= current - over + 1e-9


@given(current=st.integers(1, 1 << 20))
def test_a_lower_count_is_half_and_never_zero(current):
    found = new_value("lower", current, None)
    assert (found is None) == (current == 1)
    assert found is None or 1 <= int(found[0]) < current


# 4. A line that printed no time is the interval its neighbours bound


def test_an_inferred_time_is_an_interval_in_words_everywhere_the_terminal_says_it():
    assert when("2026-03-04T03:33:59", "2026-03-04T03:44:22.152", True) == "between 2026-03-04 03:33:59 and 03:44:22.152"
    assert when("2026-03-04T03:33:59", None, True) == "after 2026-03-04 03:33:59"
    assert when(None, "2026-03-05T00:00:01", True) == "before 2026-03-05 00:00:01"
    assert when("2026-03-04T23:59:59", "2026-03-05T00:00:01", True) == "between 2026-03-04 23:59:59 and 2026-03-05 00:00:01"
    diagnosis = analyzed(REAL / "126_ray_44292.log")
    [event] = [e for e in diagnosis.events if e.kind == "ray_worker_died"]  # and the SIGSEGV that ended it
    assert event.time_inferred
    out = table(diagnosis)
    assert "between 2024-03-27 00:47:05.906 and 00:47:10.438" in out and "~" not in out
    assert any("between 2024-03-27 00:47:05.906 and 00:47:10.438" in line for i in diagnosis.incidents for line in i.evidence)


# 5. A pipe is never wrapped; a terminal is


def test_a_pipe_gets_whole_lines_and_a_terminal_width_wraps():
    session = SESSIONS / "ray2.60-b-rl-actor-oom"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR")}
    run = subprocess.run([sys.executable, "-m", "oomlens", "parse", str(session), "-j", "1"], capture_output=True, text=True, timeout=120, env=env)
    lines = run.stdout.splitlines()
    assert run.returncode == 0 and "\x1b" not in run.stdout
    assert max(map(len, lines)) > 80
    diagnosis = analyzed(session)
    summary = diagnosis.verdict["summary"] if diagnosis.verdict else ""
    assert any(line == f"ROOT CAUSE  {summary}" for line in lines)  # one line, however long
    for event in diagnosis.events:
        if event.kind != "gpu_memory":
            assert any(f"{event.source.path.rsplit('/', 1)[-1]}:{event.source.line}" in line for line in lines) or "*" in run.stdout


# 6. No control character of a log reaches a terminal (issue 32, item 10)

HOSTILE = [
    "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # OSC 52: writes the clipboard
    "\x1b]0;pwned\x07",  # OSC 0: the window title
    "\x1bc",  # ESC c: resets the terminal
    "\x1bP1$qm\x1b\\",  # DCS
    "\x9b31m",  # C1 CSI
    "abc\x08\x08\x08xyz",  # backspaces
    "\u202egnp.exe",  # a right-to-left override
    "\u2066isolate\u2069",
    "line\rforged",
]
hostile_text = st.tuples(st.sampled_from(HOSTILE), st.text(alphabet=st.characters(max_codepoint=0x2070), max_size=6)).map("".join)


def poisoned(diagnosis: oomlens.Diagnosis, draw) -> oomlens.Diagnosis:
    """`diagnosis` with hostile text in every text a log gave it: names, messages, fields,
    paths, the verdict's sentence, the remedies' current values."""
    hostile = copy.deepcopy(diagnosis)

    def spoil(value):
        if isinstance(value, str):
            return value + draw(hostile_text)
        if isinstance(value, list):
            return [spoil(v) for v in value]
        if isinstance(value, dict):
            return {k: spoil(v) for k, v in value.items()}
        return value

    for event in hostile.events:
        event.actor, event.method, event.node = (spoil(x or "x") for x in (event.actor, event.method, event.node))
        event.fields = spoil(event.fields)  # every text a grammar read: labels, errors, reasons, names, commands
        event.text = spoil(event.text)
        event.source = dataclasses.replace(event.source, path=spoil(event.source.path))
        event.sources = [event.source]
    for incident in hostile.incidents:
        incident.phase = spoil(incident.phase or "x")
        incident.evidence = spoil(incident.evidence)
        if incident.culprit:
            incident.culprit = spoil(incident.culprit)
    if hostile.verdict:
        hostile.verdict = {
            **hostile.verdict,
            "summary": spoil(hostile.verdict["summary"]) + HOSTILE[0],
            "component": spoil(hostile.verdict["component"] or "x"),
        }
    hostile.remedies = {k: [spoil(r) for r in v] for k, v in hostile.remedies.items()}
    for item in hostile.inputs:
        item.path = spoil(item.path)
        item.problems = spoil(list(item.problems) or ["x"])
    return hostile


SEEN: dict[str, oomlens.Diagnosis] = {}


@pytest.mark.parametrize("target", [INCIDENTS / "openrlhf-reward-model-host-oom" / "session", REAL / "127_opensoraplan_386.log"], ids=["cascade", "numberless"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), width=st.sampled_from([None, 200, 80, 40, 12]), colour=st.booleans(), readings=st.booleans())
def test_hostile_text_in_any_field_reaches_the_table_escaped(target, data, width, colour, readings):
    from rich.cells import cell_len

    from oomlens.outputs.filters import Filters

    diagnosis = SEEN.setdefault(str(target), analyzed(target))
    out = table(poisoned(diagnosis, data.draw), width, Filters(readings=readings), colour)
    bare = SGR.sub("", out)
    assert not UNSAFE.search(bare), repr(UNSAFE.search(bare))
    assert width is None or max(cell_len(line) for line in bare.splitlines()) <= width  # wrapped to the terminal, whatever it holds
    assert "\x1b" not in bare and (colour or "\x1b" not in out)
    assert "\\x1b]" in "".join(bare.split())  # the hostile text is shown, as an escape (every draw holds a control character, if only the summary's)


def test_an_osc_52_in_a_real_log_is_shown_escaped_in_the_table(tmp_path):
    log = (REAL / "194_lmmr1_43.log").read_text().replace("LLMRayActor", "LLM\x1b]52;c;cHduZWQ=\x07Actor\u202e")
    (tmp_path / "hostile.log").write_text(log)
    for colour in ("never", "always"):
        run = subprocess.run([sys.executable, "-m", "oomlens", "parse", str(tmp_path / "hostile.log"), "--color", colour], capture_output=True, text=True)
        assert not UNSAFE.search(SGR.sub("", run.stdout)) and "\x1b]" not in run.stdout and "\u202e" not in run.stdout
    assert "\\x1b]52;c;cHduZWQ=\\x07" in run.stdout or "LLM" not in run.stdout


# 7. The library's public functions are what the command line calls (issue 31, item 19)


def test_analyze_tells_a_progress_callable_each_input_found_and_read(tmp_path):
    for name in ("a.log", "b.log"):
        (tmp_path / name).write_text("hello world\n" * 100)
    told: list[tuple[str, int | None]] = []
    oomlens.analyze(str(tmp_path), jobs=1, progress=lambda item, read=None: told.append((item.path.rsplit("/", 1)[-1], read)))
    assert [t for t in told if t[1] == 0] == [("a.log", 0), ("b.log", 0)]  # found: the total is known before they are read
    assert [t for t in told if t[1] is None] == [("a.log", None), ("b.log", None)]
    assert sum(read for _, read in told if read) == 2 * 1200


def test_the_command_line_calls_only_the_library_s_public_functions():
    import ast
    from pathlib import Path

    source = Path(oomlens.__file__).with_name("cli.py").read_text(encoding="utf-8")
    imported = {
        alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and node.module in (None, "pipeline") for alias in node.names
    }
    assert "pipeline" not in imported and "analyze" in imported


# 8. `make demo` installs what `pip install oomlens` installs (issue 31, item 2)


def test_make_demo_installs_the_package_without_its_extras():
    from conftest import ROOT

    planned = subprocess.run(["make", "-n", "-B", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    installs = [line for line in planned.splitlines() if " install " in line and "--upgrade pip" not in line]
    assert installs and all("[" not in line and line.rstrip().endswith(" .") for line in installs), installs
    assert ".venv-demo/bin/oomlens parse" in planned and ".venv/" not in planned


# 9. Nothing recognised, a line it could not read, a year not printed, missing paths, watch (items 10-13)


def oomlens_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "oomlens", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_a_folder_of_no_known_log_is_no_all_clear(tmp_path, fmt):
    (tmp_path / "notes.txt").write_text("hello world\n")
    (tmp_path / "todo.md").write_text("- buy milk\n")
    run = oomlens_cli("parse", str(tmp_path), "--format", fmt)
    said = " ".join(run.stdout.replace("`", "").split())  # the words, whatever markdown shows as code (todo.md: a host a renderer would link)
    assert run.returncode == 0 and "no OOM" not in said and "all clear" not in said.lower()
    assert f"one of the 2 inputs read ({tmp_path}/notes.txt, {tmp_path}/todo.md; 23 bytes) looked like a Ray or framework log" in said
    assert "this says nothing about the run" in said
    if fmt == "table":
        assert run.stdout.startswith("no event to list\n\nUNRECOGNISED")
    real = oomlens_cli("parse", str(REAL / "007_verl_2151.log"))  # a healthy run's log: recognised, an all clear
    assert "VERDICT     no OOM or crash found in these logs" in real.stdout


def test_a_json_record_it_could_not_decode_is_a_problem_not_an_incident(tmp_path):
    record = (SESSIONS / "ray2.40-b-rl-actor-oom" / "logs" / "events" / "event_RAYLET.log").read_text().splitlines()[0]
    events = tmp_path / "logs" / "events"
    events.mkdir(parents=True)
    for cut in (300, 600, 1200, len(record) - 3):  # each past the message's first words
        (events / "event_RAYLET.log").write_text(record[:cut] + "\n")
        found = analyzed(tmp_path / "logs")
        assert not found.events and not found.incidents, cut
        [problem] = found.problems
        assert problem.endswith("1 JSON record(s) that could not be decoded (cut or corrupted), left out: the report in it is not read (first at line 1)")
    (events / "event_RAYLET.log").write_text(record + "\n")
    assert [e.kind for e in analyzed(tmp_path / "logs").events] == ["ray_oom_kill"]  # whole, it is read


GLOG = "E1124 06:38:28.654321  4242 ProcessGroupNCCL.cpp:1484] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.\n"


@pytest.mark.parametrize(("written", "year"), [("2025-12-01 10:00", 2025), ("2026-01-02 10:00", 2025), ("2026-11-24 06:38", 2026)])
def test_a_glog_line_alone_takes_its_year_from_the_file_s_last_change(tmp_path, written, year):
    from datetime import datetime

    log = tmp_path / "worker.err"
    log.write_text(GLOG)
    stamp = datetime.fromisoformat(written).timestamp()
    os.utime(log, (stamp, stamp))
    found = analyzed(log)
    [event] = found.events
    assert event.time == f"{year}-11-24T06:38:28.654" and event.fields["year_from"] == "mtime"
    assert "year: 1 event(s) printed a time without a year; given the year of their file's last change (as lnav takes it)" in table(found)


def test_a_glog_line_beside_stamped_lines_takes_the_run_s_year(tmp_path):
    (tmp_path / "worker.err").write_text(GLOG)
    (tmp_path / "driver.log").write_text(
        "2024-03-27 00:47:05,906\tERROR worker.py:1 -- A worker died or was killed while executing a task by an unexpected system error. "
        "Worker PID: 23010 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.\n"
    )
    found = analyzed(tmp_path)
    watchdog = next(e for e in found.events if e.kind == "watchdog_timeout")
    assert watchdog.time is not None and watchdog.time.startswith("2024-11-24") and watchdog.fields["year_from"] == "run"


@pytest.mark.parametrize("command", ["parse", "watch", "report"])
def test_a_missing_path_is_one_line_on_stderr_and_exit_1_for_every_command(tmp_path, command):
    run = oomlens_cli(command, str(tmp_path / "missing"), *(["--once"] if command == "watch" else []), cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [f"oomlens: {tmp_path}/missing: no such file or folder: nothing read"]


def test_watch_says_what_it_cannot_follow_and_speaks_to_people_in_text(tmp_path):
    (tmp_path / "empty").mkdir()
    empty = oomlens_cli("watch", str(tmp_path / "empty"), "--once")
    assert empty.returncode == 0 and empty.stderr.splitlines() == [f"oomlens: {tmp_path}/empty: no log file in it yet: watching for new ones"]
    (tmp_path / "core").write_bytes(bytes(range(1, 9)) * 500)
    binary = oomlens_cli("watch", str(tmp_path / "core"), "--once")
    assert binary.stderr.splitlines() == [f"oomlens: {tmp_path}/core: binary file (not text): not read, not followed"]
    session = INCIDENTS / "openrlhf-reward-model-host-oom" / "session"
    text = oomlens_cli("watch", str(session), "--once", "--format", "text").stdout
    assert text.startswith("INCIDENT   i1: host memory OOM on node 10.0.0.21 at 2025-04-11 10:12:41.839")
    assert "export RAY_memory_usage_threshold=0.97" in text and "{" not in text
    piped = oomlens_cli("watch", str(session), "--once").stdout  # auto: JSON lines on a pipe, for scripts
    assert piped.startswith('{"oomlens":1,')


# 10. The library in a notebook (items 17, 18)


def test_one_plot_of_the_readings_frame_works_for_every_framework():
    import plotly.express as px

    from oomlens.outputs.frame import READING_COLUMNS

    easyr1 = analyzed(INCIDENTS / "easyr1-gpu-growth")
    events = easyr1.to_frame()
    assert events[events.kind == "gpu_memory"].allocated_bytes.notna().sum() == 0  # the README's old plot: empty on EasyR1
    for run in (easyr1, analyzed(SESSIONS / "ray2.60-b-rl-actor-oom"), analyzed(INCIDENTS / "healthy-noisy-run" / "driver-console.log")):
        readings = run.to_frame("readings")
        assert {name: str(dtype) for name, dtype in readings.dtypes.items()} == {
            name: str(readings[name].dtype) if dtype == "category" else dtype for name, dtype in READING_COLUMNS.items()
        }
        assert len(readings) == len(run.timeline) and readings.bytes.notna().all()
        gpu = readings[readings.memory == "gpu"]
        assert len(gpu) and px.line(gpu, x="time", y="bytes", color="process", line_dash="metric").data
    assert set(easyr1.to_frame("readings").metric.dropna()) >= {"used"}
    steps = analyzed(INCIDENTS / "healthy-noisy-run" / "driver-console.log").to_frame("readings").step
    assert steps.notna().all() and sorted(steps.unique()) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert list(analyzed(REAL / "127_opensoraplan_386.log").to_frame("readings").columns) == list(READING_COLUMNS)  # none: the same columns
    with pytest.raises(ValueError):
        easyr1.to_frame("rows")


def test_a_diagnosis_shows_itself_in_a_line_and_its_verdict_in_html():
    big = analyzed(SESSIONS / "ray2.60-b-rl-actor-oom")
    assert len(repr(big)) < 300 and repr(big).startswith("<Diagnosis: host memory OOM on node 192.0.2.2")
    page = big._repr_html_()
    assert page.startswith("<table>") and "ROOT CAUSE" in page and "reward_model" in page and "<code>" in page
    hostile = copy.deepcopy(big)
    assert hostile.verdict is not None
    hostile.verdict["summary"] = "<img src=x onerror=alert(1)>\x1b]52;c;eA==\x07"
    assert "<img" not in hostile._repr_html_() and "\x1b" not in hostile._repr_html_() and "<img" in repr(hostile)


# 11. One failure told once: the watchdog's two wordings of one timeout (item 4)


def test_the_watchdog_s_caught_and_terminated_lines_of_one_timeout_are_one_event(tmp_path):
    caught = "[rank0]:[E411 10:42:41.548000137 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=891, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800085 milliseconds before timing out."
    terminated = (
        "[2025-04-11 10:42:41,567 E 42011 43398] logging.cc:108: Unhandled exception: N3c1016DistBackendErrorE. what(): [PG ID 3 PG GUID openrlhf Rank 0] "
        "Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=891, OpType=BROADCAST, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800085 milliseconds before timing out."
    )
    prefix = "(ActorModelRayActor pid=42011) "
    (tmp_path / "driver.log").write_text("".join(prefix + line + "\n" for line in (caught, terminated, caught, terminated)))
    (tmp_path / "job-driver-raysubmit_abc.log").write_text(prefix + caught + "\n" + prefix + terminated + "\n")
    (tmp_path / "worker-2ece1e971b001c49f99fd3f1d3485bcecab5d0a5d329f7116bc7c355-02000000-42011.err").write_text(caught + "\n" + terminated + "\n")
    found = analyzed(tmp_path)
    [event] = [e for e in found.events if e.kind == "watchdog_timeout"]
    assert event.pid == 42011 and event.fields["seq"] == 891 and len(event.sources) == 8
    # another process's timeout of the same sequence number stays its own
    with (tmp_path / "driver.log").open("a") as log:
        log.write("(ActorModelRayActor pid=42012) " + terminated.replace("42011", "42012").replace("Rank 0", "Rank 1") + "\n")
    assert sorted(e.pid for e in analyzed(tmp_path).events if e.kind == "watchdog_timeout") == [42011, 42012]


# 12. One NCCL OOM, one incident: the driver's copy of the worker's exception (item 4)

NCCL_OOM_TRACE = """Traceback (most recent call last):
  File "/verl/trainer/main_ppo.py", line 25, in main
    run_ppo(config)
ray.exceptions.RayTaskError(DistBackendError): ray::WorkerDict.actor_rollout_update_actor() (pid={pid}, ip={ip}, actor_id=8f2c, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)
  File "/verl/workers/fsdp_workers.py", line 400, in update_actor
    metrics = self.actor.update_policy(data=data)
  File "/torch/distributed/distributed_c10d.py", line 2288, in all_reduce
    work = group.allreduce([tensor], opts)
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Cuda failure 2 'out of memory'"""
NCCL_WARN = "{host}:{pid}:{tid} [{rank}] enqueue.cc:1085 NCCL WARN Cuda failure 2 'out of memory'"
RANK_TIMEOUT = (
    "[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, "
    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 6000{rank}0 milliseconds before timing out."
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ranks=st.integers(2, 8), data=st.data(), worker_copy=st.booleans(), stamped=st.booleans(), warn_in_driver=st.booleans())
def test_one_nccl_oom_told_by_the_worker_and_the_driver_is_one_incident_with_every_rank_s_timeout(
    tmp_path_factory, ranks, data, worker_copy, stamped, warn_in_driver
):
    """A rank's NCCL allocation fails: NCCL warns, torch raises DistBackendError, the driver's
    RayTaskError carries it with the worker's pid in its header only, and the other ranks'
    watchdogs fire. With or without the worker's own file and the stamps, that is one
    memory incident, and every timeout is in its cascade."""
    failed = data.draw(st.integers(0, ranks - 1), label="failed rank")
    base = 5000 + data.draw(st.integers(0, 90000), label="first pid")
    folder = tmp_path_factory.mktemp("nccl-oom")
    ip, pid = "10.0.0.1", base + failed
    minute = [0]

    def stamp(line: str) -> str:
        minute[0] += 1
        return f"[2025-06-28 18:{minute[0]:02d}:00,100 E {pid} 6881] {line}" if stamped else line

    warn = NCCL_WARN.format(host="node1", pid=pid, tid=6001, rank=failed)
    trace = NCCL_OOM_TRACE.format(pid=pid, ip=ip)
    console = [f"(WorkerDict pid={pid}, ip={ip}) {stamp(warn)}"] if warn_in_driver else []
    console += ["(main_task pid=4000) Error executing job with overrides: []", *trace.splitlines()]
    console += [f"(WorkerDict pid={base + r}, ip={ip}) {stamp(RANK_TIMEOUT.format(rank=r))}" for r in range(ranks) if r != failed]
    (folder / "driver.log").write_text("\n".join(console) + "\n")
    if worker_copy:
        logs = folder / "logs"
        logs.mkdir()
        body = [stamp(warn), *trace.splitlines()[3:]]
        (logs / f"worker-2ece1e971b001c49f99fd3f1d3485bcecab5d0a5d329f7116bc7c355-01000000-{pid}.err").write_text("\n".join(body) + "\n")
    found = analyzed(folder)
    assert len(found.incidents) == 1, [(i.root.kind, i.root.source.path) for i in found.incidents]
    [incident] = found.incidents
    assert incident.root.kind == "cuda_oom" and incident.root.pid == pid and incident.memory == "gpu"
    assert sorted(e.rank for e in incident.cascade if e.kind == "watchdog_timeout") == [r for r in range(ranks) if r != failed]
    assert not [line for line in incident.evidence if "?" in line.split(" (")[0]]  # every time in words, never `at ?`


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workers=st.integers(2, 8), data=st.data(), gap=st.integers(0, 30))
def test_a_worker_s_own_oom_keeps_its_pid_beside_a_sibling_s_task_header(tmp_path_factory, workers, data, gap):
    """vLLM's cumem allocator fails in several WorkerDicts at a wake-up; the driver's
    RayTaskError names the one whose call it saw. Each worker's own line keeps its own pid:
    the header tells the raiser of the exception below it, not of its siblings' lines."""
    raiser = 5000 + data.draw(st.integers(0, workers - 1), label="raiser")
    folder = tmp_path_factory.mktemp("siblings")
    lines = [f"(WorkerDict pid={5000 + w}, ip=10.0.0.61) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62" for w in range(workers)]
    lines += [f"(TaskRunner pid=4000) step:{n} - actor/entropy:0.342" for n in range(gap)]
    lines += [
        "(TaskRunner pid=4000) Traceback (most recent call last):",
        '(TaskRunner pid=4000)   File "/verl/trainer/ppo/ray_trainer.py", line 1002, in fit',
        "(TaskRunner pid=4000)     gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)",
        f"(TaskRunner pid=4000) ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_generate_sequences() (pid={raiser}, ip=10.0.0.61, actor_id=79f87c03850c4ebd12bc9d6a01000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)",
        '(TaskRunner pid=4000)   File "/vllm/device_allocator/cumem.py", line 75, in create_and_map',
        "(TaskRunner pid=4000) RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
    ]
    (folder / "driver.log").write_text("\n".join(lines) + "\n")
    found = analyzed(folder)
    ooms = [e for e in found.events if e.kind == "cuda_oom"]
    assert sorted(e.pid for e in ooms) == [5000 + w for w in range(workers)]  # one each, the driver's copy folded into the raiser's
    assert all(e.pid == 5000 + s.line - 1 for e in ooms for s in e.sources if s.line <= workers)
