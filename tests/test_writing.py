"""Where the output goes is left as it was: `report -o` writes into a device or a FIFO and
through a symlink, never replacing them with a file; output that cannot be written (a full
disk) and errors of oomlens itself each end in one `oomlens:` line, never a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

import oomlens
from conftest import REAL

LOG = str(REAL / "005_verl_224.log")


def report(output: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "oomlens", "report", LOG, "--plotly", "cdn", "--jobs", "1", "-o", output], capture_output=True, timeout=120, **kwargs
    )


def test_a_report_to_dev_null_leaves_it_a_device():
    run = report(os.devnull)
    assert run.returncode == 0, run.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_report_through_a_symlink_goes_to_the_file_it_points_at(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "page.html"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    link = tmp_path / "report.html"
    link.symlink_to(target)
    run = report(str(link))
    assert run.returncode == 0, run.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file replaced keeps its mode
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["elsewhere", "page.html", "report.html"]  # no temporary file left


def test_the_api_writes_through_a_symlink_too(tmp_path):
    target = tmp_path / "page.html"
    link = tmp_path / "link.html"
    link.symlink_to(target)  # dangling: the file it names is made
    oomlens.analyze(LOG, jobs=1).to_html(link)
    assert link.is_symlink() and target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_report_into_a_fifo_is_read_from_it(tmp_path):
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    run = report(str(fifo))
    reader.join(timeout=60)
    assert run.returncode == 0, run.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and got[0].startswith(b"<!DOCTYPE html>") and got[0].rstrip().endswith(b"</html>")


FULL = "/dev/full"


@pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")
@pytest.mark.parametrize("command", [["parse", "--format", f] for f in ("table", "json", "jsonl", "markdown")] + [["report", "-o", "-"]], ids=" ".join)
def test_a_full_disk_under_stdout_is_one_line_and_a_failure(command):
    with open(FULL, "wb") as full:
        run = subprocess.run([sys.executable, "-m", "oomlens", *command, LOG, "--jobs", "1"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert (run.returncode, run.stderr) == (1, "oomlens: cannot write the output: No space left on device\n")


# An error of oomlens whose message spans lines, as lark's VisitError does around a
# Transformer's error: raised inside one block, and for a whole input.
BOOM = """
import sys, lark
from oomlens import cli, scan
def boom(*args, **kwargs):
    raise lark.exceptions.VisitError("start", lark.Tree("start", []), ValueError("bad value\\nsecond line\\nthird line"))
setattr(scan.{where}, boom)
sys.argv = ["oomlens", "parse", "--jobs", "1", {log!r}]
cli.run()
"""


@pytest.mark.parametrize("where", ["Blocks, 'read'", "Scanner, 'events'"], ids=["a block", "the whole input"])
def test_an_error_over_many_lines_is_one_problem_line(where):
    run = subprocess.run([sys.executable, "-c", BOOM.format(where=where, log=LOG)], capture_output=True, text=True, timeout=120)
    lines = run.stderr.splitlines()
    assert lines and all(line.startswith("oomlens: ") for line in lines), run.stderr
    assert any("ValueError: bad value" in line for line in lines), run.stderr


def test_a_report_to_dev_stdout_is_the_page_alone():
    """The page goes where stdout goes; the word of where it was written goes to stderr."""
    run = report("/dev/stdout")
    page = run.stdout.decode()
    assert run.returncode == 0 and page.rstrip().endswith("</html>") and "wrote" not in page[-200:]
    assert run.stderr.decode() == "wrote /dev/stdout\n"
