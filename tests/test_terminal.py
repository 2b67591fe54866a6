"""The terminal output as a user meets it: `oomlens parse` on a terminal of any width
(a real pty, sized or not), on a pipe, with and without colour; what the table lists by
default and how to see the rest; nothing read is never an all clear; every worker a kill
report names is named."""

from __future__ import annotations

import fcntl
import glob
import gzip
import json
import os
import re
import struct
import subprocess
import sys
import termios

import pytest
from click.testing import CliRunner

from conftest import REAL, SESSIONS
from oomlens.cli import main
from oomlens.text import gib

SESSION = SESSIONS / "ray2.60-b-rl-actor-oom"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TERMINAL_VARIABLES = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")


def environment(**changes: str) -> dict[str, str]:
    """This process's environment without what says how to write for a terminal, then `changes`."""
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_VARIABLES}
    env.update(changes)
    return env


def in_pty(*args: str, columns: int, **env: str) -> tuple[int, str]:
    """`oomlens ARGS` with its stdout on a new pty of `columns` columns (0: a pty nobody
    sized, as under `script`, CI runners, containers): its exit status and what the terminal got."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "oomlens", *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=environment(**env))
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the command closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err, err
    return proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n")


def piped(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`oomlens ARGS` with its stdout a pipe."""
    run = subprocess.run([sys.executable, "-m", "oomlens", *args], capture_output=True, text=True, timeout=60, env=environment(**env))
    assert "Traceback" not in run.stderr, run.stderr
    return run


def cli(*args: str, columns: int = 250, **env: str):
    """`oomlens ARGS` through click's runner, as if on a terminal `columns` wide."""
    return CliRunner().invoke(main, list(args), env={"COLUMNS": str(columns), "NO_COLOR": None, **env})


def squeezed(text: str) -> str:
    """Text without whitespace: what wrapping may not change."""
    return "".join(ANSI.sub("", text).split())


def contract(*args: str) -> dict:
    return json.loads(cli("parse", *args, "--format", "json").output)


def table_rows(out: str, kind: str) -> list[str]:
    return [line for line in out.splitlines() if f"  {kind}  " in line]


# 1. Nothing read is never good news


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_a_missing_or_empty_folder_is_never_told_as_an_all_clear(tmp_path, fmt):
    (tmp_path / "empty-folder").mkdir()
    for name in ("missing-folder", "empty-folder"):
        result = piped("parse", str(tmp_path / name), "--format", fmt)
        assert result.returncode == 1
        assert "no oom or crash found" not in result.stdout.lower()
        assert ("NOTHING READ" if fmt == "table" else "**Nothing read:**") in result.stdout
        assert "the input could not be read" in result.stdout
        assert f"oomlens: {tmp_path / name}: " in result.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_a_process_that_died_of_a_signal_is_no_all_clear(fmt, tmp_path):
    """A SIGFPE in vLLM's logits (a real excerpt) is no memory failure, but it ended the
    rollout worker: the verdict names it (once for its two copies), never "no crash found"."""
    log = str(REAL / "236_toolrl_26.log")
    said = " ".join(cli("parse", log, "--format", fmt).output.split())
    assert "no memory failure: the rollout process pid 14361 died of signal SIGFPE at 2025-07-08 17:43:49" in said
    assert "crash found" not in said and "followed" not in said
    partly = " ".join(cli("parse", log, str(tmp_path / "missing"), "--format", fmt).output.split())
    assert "died of signal SIGFPE" in partly and "crash found" not in partly


def test_many_ends_on_purpose_are_named_up_to_three_and_counted(tmp_path):
    from oomlens import analyze
    from oomlens.outputs.verdict import all_clear, ends

    log = tmp_path / "ends.log"
    log.write_text("".join(f"(Worker pid={pid}) *** SIGTERM received at time=1741050778 on cpu 3 ***\n" for pid in (11, 12, 11, 13, 14, 15)))
    diagnosis = analyze(str(log), jobs=1)
    assert diagnosis.incidents == [] and diagnosis.verdict is None
    # each line's time is bounded by the epochs its neighbours print: the last has none after it
    assert ends(diagnosis) == [f"SIGTERM in pid {pid} (Worker) at 2025-03-04 01:12:58" for pid in (11, 12, 13, 14)] + [
        "SIGTERM in pid 15 (Worker) after 2025-03-04 01:12:58"
    ]
    told = ", ".join(f"SIGTERM in pid {pid} (Worker) at 2025-03-04 01:12:58" for pid in (11, 12, 13)) + " and 2 more"
    assert all_clear(diagnosis) == f"no OOM or crash found in these logs; the run ended on purpose: {told}"


def test_empty_input_read_whole_is_no_all_clear_either(tmp_path):
    (tmp_path / "empty.log").write_text("")
    for args, stdin in ((["-"], ""), ([str(tmp_path / "empty.log")], None)):
        run = subprocess.run([sys.executable, "-m", "oomlens", "parse", *args], input=stdin, capture_output=True, text=True, timeout=60, env=environment())
        assert run.returncode == 0  # it was read: exit 1 is for inputs that could not be
        assert "no OOM or crash found" not in run.stdout and "the input read holds no text at all" in " ".join(run.stdout.split())


def test_an_all_clear_from_some_inputs_says_how_much_could_not_be_read(tmp_path):
    log = str(REAL / "007_verl_2151.log")  # a real excerpt with no incident
    whole = cli("parse", log)
    assert whole.exit_code == 0 and "VERDICT     no OOM or crash found in these logs" in whole.output
    size = os.path.getsize(log)
    for fmt in ("table", "markdown"):
        result = cli("parse", log, str(tmp_path / "missing"), "--format", fmt)
        assert result.exit_code == 0
        said = " ".join(result.output.split())
        assert "found in these logs" not in said
        assert f"o OOM or crash found in what could be read (1 of 2 input(s), {size:,} bytes); 1 could not be read: see the problems" in said
    packed = gzip.compress((REAL / "007_verl_2151.log").read_bytes())
    (tmp_path / "cut.log.gz").write_bytes(packed[: len(packed) // 2])
    said = " ".join(cli("parse", str(tmp_path / "cut.log.gz")).output.split())
    assert "no OOM or crash found in what could be read (1 of 1 input(s)" in said and "1 could be read only in part" in said


# 2. Any terminal width, a pty nobody sized included


@pytest.mark.parametrize("columns, width", [(None, 80), ("37", 37), ("20", 20), ("5", 5)])
def test_a_pty_of_zero_columns_gets_columns_or_80(columns, width):
    env = {"COLUMNS": columns} if columns else {}
    status, out = in_pty("parse", str(SESSION), "-j", "1", columns=0, **env)
    assert status == 0
    lines = ANSI.sub("", out).splitlines()
    assert max(len(line) for line in lines) <= width
    summary = contract(str(SESSION))["verdict"]["summary"]
    assert squeezed(summary) in squeezed(out) and "ray_oom_kill" in squeezed(out)  # wrapped, never cut


def test_a_sized_pty_is_written_to_its_width_in_colour_that_changes_no_layout():
    status, coloured = in_pty("parse", str(SESSION), "-j", "1", columns=133)
    assert status == 0 and "\x1b[" in coloured
    _, plain = in_pty("parse", str(SESSION), "-j", "1", "--color", "never", columns=133)
    assert "\x1b[" not in plain and ANSI.sub("", coloured) == plain
    widths = [len(line) for line in plain.splitlines()]
    assert max(widths) <= 133 and max(widths) > 80  # the pty's width, not the fallback


@pytest.mark.parametrize(
    "env, flag, wanted",
    [({"NO_COLOR": "1"}, "auto", False), ({"NO_COLOR": ""}, "auto", True), ({"NO_COLOR": "1"}, "always", True)],
)
def test_no_color_is_honoured_on_a_terminal(env, flag, wanted):
    status, out = in_pty("parse", str(SESSION), "-j", "1", "--color", flag, columns=100, **env)
    assert status == 0 and ("\x1b[" in out) == wanted


def test_a_pipe_gets_whole_lines_and_no_colour_unless_asked():
    """A pipe or a file is never wrapped (as ripgrep writes one); colour only when asked,
    by --color always or FORCE_COLOR (as rich reads it), and never over NO_COLOR."""
    auto = piped("parse", str(SESSION), "-j", "1")
    assert auto.returncode == 0 and "\x1b[" not in auto.stdout
    assert max(len(line) for line in auto.stdout.splitlines()) > 80
    forced = piped("parse", str(SESSION), "-j", "1", "--color", "always")
    assert "\x1b[" in forced.stdout and ANSI.sub("", forced.stdout) == auto.stdout
    assert piped("parse", str(SESSION), "-j", "1", FORCE_COLOR="1").stdout == forced.stdout
    assert piped("parse", str(SESSION), "-j", "1", FORCE_COLOR="1", NO_COLOR="1").stdout == auto.stdout


@pytest.mark.parametrize("width", [1, 5, 20, 37, 80, 133, 250])
def test_every_width_wraps_the_table_and_verdict_and_cuts_nothing(width, tmp_path):
    both = two_killed(tmp_path)
    for target in (str(SESSION), both):
        out = cli("parse", target, "--color", "always", columns=width).output
        lines = ANSI.sub("", out).splitlines()
        assert max(len(line) for line in lines) <= width, target
        found = contract(target)
        assert squeezed(found["verdict"]["summary"]) in squeezed(out)
        for event in found["events"]:
            if event["kind"] != "gpu_memory":
                assert event["kind"] in squeezed(out)


# 5. Failures by default, readings and filters on request, one row per event


def test_the_table_lists_failures_and_says_how_to_list_the_readings():
    events = contract(str(SESSION))["events"]
    failures = [e for e in events if e["kind"] != "gpu_memory"]
    readings = [e for e in events if e["kind"] == "gpu_memory"]
    console = [e for e in readings if e["source"]["path"].endswith("driver-console.log")]
    assert len(console) * 2 == len(readings)  # each worker line is in its own file and the console
    out = cli("parse", str(SESSION)).output
    assert not table_rows(out, "gpu_memory")
    assert [len(table_rows(out, e["kind"])) for e in failures] == [1] * len(failures)
    assert out.rstrip().endswith(f"{len(failures)} event(s) listed; {len(console)} memory sample(s) not listed: --readings lists them")
    listed = cli("parse", str(SESSION), "--readings").output
    assert len(table_rows(listed, "gpu_memory")) == len(console)  # one row a reading, not one a copy
    assert f"{len(console)} reading(s) printed in a second file too" in listed


def test_details_get_the_room_and_worker_file_names_a_glob_that_finds_them():
    logs = SESSION / "logs"  # no driver console: the readings are the workers' own lines
    out = cli("parse", str(logs), "--readings").output
    rows = table_rows(out, "gpu_memory")
    assert rows
    labels = {e["fields"]["label"] for e in contract(str(logs))["events"] if e["kind"] == "gpu_memory"}
    assert min(map(len, labels)) > 20 and all(any(label in row for row in rows) for label in labels)  # DETAILS not cut
    shown = {m.group(1) for row in rows for m in re.finditer(r"(\S+\*\S*):\d+", row)}
    assert shown and all(len(name) < 40 for name in shown)
    for name in shown:
        assert len(glob.glob(str(logs / name))) == 1, name
    assert "a glob that finds the file: ls <logs>/worker-" in " ".join(out.split())


def test_kind_node_and_time_filters_narrow_the_table():
    session = str(SESSION)
    kinds = cli("parse", session, "--kind", "ray_worker_died").output
    assert table_rows(kinds, "ray_worker_died") and not table_rows(kinds, "ray_oom_kill")
    assert "event(s) left out by --kind, --node, --since or --until" in kinds
    nodes = cli("parse", session, "--node", "192.0.2.2").output
    assert table_rows(nodes, "ray_oom_kill") and "left out by" not in nodes
    elsewhere = cli("parse", session, "--node", "198.51.100.7").output
    assert "no event to list" in elsewhere and "ROOT CAUSE" in elsewhere  # the verdict is the logs', not the filter's
    kill = next(e for e in contract(session)["events"] if e["kind"] == "ray_oom_kill")["time"]
    before = cli("parse", session, "--readings", "--until", kill[:19]).output
    assert table_rows(before, "gpu_memory") and not table_rows(before, "ray_oom_kill")
    after = cli("parse", session, "--readings", "--since", kill[:19]).output
    assert table_rows(after, "ray_oom_kill") and not table_rows(after, "gpu_memory")
    assert table_rows(cli("parse", session, "--since", kill.replace("T", " ")).output, "ray_oom_kill")


def test_a_filter_is_checked_before_anything_is_read():
    unknown = cli("parse", str(SESSION), "--kind", "ray_oom")
    assert unknown.exit_code == 2 and "unknown kind ray_oom" in unknown.output and "ray_oom_kill" in unknown.output
    assert "gpu_memory" in unknown.output
    late = cli("parse", str(SESSION), "--since", "yesterday")
    assert late.exit_code == 2 and "is not an ISO time" in late.output


def test_filters_shape_markdown_events_and_leave_json_whole():
    session = str(SESSION)
    md = cli("parse", session, "--format", "markdown", "--kind", "ray_worker_died").output
    events = [line for line in md.split("### Events", 1)[1].splitlines() if line.startswith("| e")]
    assert events and all("| ray_worker_died |" in line for line in events)
    for fmt in ("json", "jsonl"):
        whole = cli("parse", session, "--format", fmt).output
        narrowed = cli("parse", session, "--format", fmt, "--readings", "--kind", "ray_oom_kill", "--node", "x", "--since", "2030-01-01").output
        assert narrowed == whole
    assert "never change --format json" in " ".join(cli("parse", "--help").output.split())


# 6. Every worker a kill report says Ray killed


def two_killed(tmp_path) -> str:
    """A real Ray 2.58 kill report (the bundled session's driver console) as it reads when
    Ray's policy selects both workers it considered: "2 worker(s)", two "Selected to kill"."""
    lines = (SESSIONS / "ray2.58-b-rl-actor-oom" / "driver-console.log").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "worker(s) were killed due to the node running low on memory" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("Refer to the documentation"))
    report = "\n".join(lines[start : end + 1]).replace("1 worker(s)", "2 worker(s)")
    report = re.sub(r"^\(Actor\(", "Selected to kill: (Actor(", report, flags=re.M)
    path = tmp_path / "driver.log"
    path.write_text(report + "\n")
    return str(path)


def test_the_verdict_and_markdown_name_every_worker_ray_killed(tmp_path):
    log = two_killed(tmp_path)
    [kill] = [e for e in contract(log)["events"] if e["kind"] == "ray_oom_kill"]
    killed = kill["fields"]["killed"]
    assert len(killed) == 2 and len({k["pid"] for k in killed}) == 2
    verdict = squeezed(cli("parse", log, columns=80).output.split("ROOT CAUSE", 1)[1])
    named = "; ".join(f"pid {k['pid']} {k['name']} ({gib(k['bytes'])})" for k in killed)
    assert squeezed(f"killed 2 workers: {named}") in verdict
    md = cli("parse", log, "--format", "markdown").output
    for k in killed:
        assert f"| {k['pid']} | {gib(k['bytes'], unit=False)} | `{k['name']}` |" in md
    evidence = contract(log)["incidents"][0]["evidence"]
    assert f"Ray killed {named}: the 2 workers it picked, not necessarily the one that used the memory" in evidence


UNSAFE_CHARS = ["\x7f", "\x85", "\x9b", "\u061c", "\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069"]


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_carries_no_character_a_terminal_acts_on_and_means_the_same(tmp_path, fmt):
    """A log line with C1 controls and bidi overrides in it (a Trojan Source name, a C1 CSI):
    `--format json` and `jsonl` write each as its \\u escape, never raw, and the document
    still reads to the very same strings."""
    name = "Reward" + "".join(UNSAFE_CHARS) + "Model"
    log = tmp_path / "driver.log"
    log.write_text(
        f"(WorkerDict pid=7) memory allocated (GB): 1.50, memory reserved (GB): 2.50\n"
        f"ray.exceptions.RayTaskError(ValueError): ray::{name}.score() (pid=7, ip=10.0.0.1)\n",
        encoding="utf-8",
    )
    out = CliRunner().invoke(main, ["parse", str(log), "--format", fmt], catch_exceptions=False).stdout_bytes
    assert not any(c.encode() in out for c in UNSAFE_CHARS)
    docs = [json.loads(out)] if fmt == "json" else [json.loads(line) for line in out.splitlines()]
    texts = [e["text"] for d in docs for e in (d["events"] if fmt == "json" else [d])]
    assert any(name in t for t in texts)


def test_the_unwrapped_columns_are_laid_out_as_rich_lays_out_the_table():
    """A pipe's table is written without rich (its measuring of every cell takes seconds for
    thousands of rows): the same lines as rich's table, for cells of any width in terminal
    cells (CJK and emoji take two, a combining mark none), empty or blank, over many rows."""
    import random

    from oomlens.outputs.table import _columns, _plain_columns
    from oomlens.outputs.terminal import console, rendered

    pieces = ["a", "Z", "0", " ", "-", "é", "e\u0301", "漢", "字", "😀", "\\x1b", "GiB", "pid=4242", "→"]
    rng = random.Random(11)
    for _ in range(300):
        rows = [tuple("".join(rng.choice(pieces) for _ in range(rng.randrange(0, 9))) or "-" for _ in range(6)) for _ in range(rng.randrange(1, 6))]
        roles = [rng.choice(["memory", "failure", "reading"]) for _ in rows]
        assert _plain_columns(rows) == rendered(console(None, False), _columns(rows, roles)), rows
