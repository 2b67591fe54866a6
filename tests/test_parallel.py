"""Files read by several processes give exactly what one process gives; progress only on a terminal."""

from __future__ import annotations

import io

import orjson

from conftest import FIXTURES, SESSIONS
from oomlens.pipeline import analyze
from oomlens.progress import Progress
from oomlens.sources import Input


def test_jobs_do_not_change_the_diagnosis():
    paths = [str(SESSIONS), str(FIXTURES / "incidents")]
    one = analyze(*paths, jobs=1).to_dict()
    two = analyze(*paths, jobs=2).to_dict()
    assert orjson.dumps(one) == orjson.dumps(two)
    assert len(one["events"]) > 500 and len(one["incidents"]) > 10


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_after_a_while(monkeypatch):
    import oomlens.progress as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    screen = Terminal()
    progress = Progress(screen)
    progress(Input("a.log", bytes=5_000_000))
    progress.done()
    assert "1 file(s), 5 MB read" in screen.getvalue() and screen.getvalue().endswith("\r\033[K")


def test_progress_is_silent_when_not_a_terminal(monkeypatch):
    import oomlens.progress as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    pipe = io.StringIO()
    progress = Progress(pipe)
    progress(Input("a.log", bytes=5_000_000))
    progress.done()
    assert pipe.getvalue() == ""
