"""Files read by several processes give exactly what one process gives; progress only on a terminal."""

from __future__ import annotations

import io

import orjson
import pytest

from conftest import FIXTURES, REAL, SESSIONS
from oomlens.pipeline import analyze
from oomlens.progress import Progress
from oomlens.sources import Input


@pytest.mark.slow
def test_jobs_do_not_change_the_diagnosis():
    """Every fixture (sessions, incidents, real excerpts) read by a pool gives what one process
    gives: the sweeps over them elsewhere read each in one process (jobs=1)."""
    paths = [str(SESSIONS), str(FIXTURES / "incidents"), *map(str, sorted(REAL.glob("*.log")))]
    one = analyze(*paths, jobs=1).to_dict()
    two = analyze(*paths, jobs=2).to_dict()
    assert orjson.dumps(one) == orjson.dumps(two)
    assert len(one["events"]) > 500 and len(one["incidents"]) > 10


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_rich_s_bar_on_a_terminal(monkeypatch):
    import re

    import oomlens.progress as progress_module

    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    screen = Terminal()
    progress = Progress(screen)
    progress(Input("a.log", bytes=5_000_000))
    progress.done()
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "4.8/4.8 MiB 1/1 files" in drawn and screen.getvalue().endswith("\x1b[2K")  # cleared at the end


def test_progress_is_silent_when_not_a_terminal():
    pipe = io.StringIO()
    progress = Progress(pipe)
    progress(Input("a.log", bytes=5_000_000))
    progress.done()
    assert pipe.getvalue() == ""


def test_the_pool_gets_the_biggest_files_first_and_results_stay_in_input_order(tmp_path, monkeypatch):
    """Sizes are the text a file holds: a gzip file's own trailer says it."""
    import gzip

    import zstandard

    from oomlens import pipeline
    from oomlens.sources.decoding import text_size

    (tmp_path / "a.log").write_bytes(b"x\n" * 100)
    (tmp_path / "b.log.gz").write_bytes(gzip.compress(b"y\n" * 50_000))  # small on disk, big inside
    (tmp_path / "c.log").write_bytes(b"z\n" * 1_000)
    (tmp_path / "d.log.zst").write_bytes(zstandard.ZstdCompressor().compress(b"w\n" * 200))
    assert text_size(str(tmp_path / "b.log.gz")) == 100_000
    assert text_size(str(tmp_path / "d.log.zst")) == 8 * (tmp_path / "d.log.zst").stat().st_size
    assert text_size(str(tmp_path / "missing.log")) == 0

    submitted = []
    real_submit = pipeline.ProcessPoolExecutor.submit

    def spy(self, fn, file, *args):
        submitted.append(file.rsplit("/", 1)[-1])
        return real_submit(self, fn, file, *args)

    monkeypatch.setattr(pipeline.ProcessPoolExecutor, "submit", spy)
    diagnosis = analyze(str(tmp_path), jobs=2)
    assert text_size(str(tmp_path / "d.log.zst")) < 200
    assert submitted == ["b.log.gz", "c.log", "a.log", "d.log.zst"]
    assert [i.path.rsplit("/", 1)[-1] for i in diagnosis.inputs] == ["a.log", "b.log.gz", "c.log", "d.log.zst"]
    assert [i.bytes for i in diagnosis.inputs] == [200, 100_000, 2_000, 400]


def test_events_and_clues_cross_processes_whole():
    """Events and clues reach the parent as rows of plain values: every field comes back,
    several sources or one."""
    import dataclasses
    import pickle

    from oomlens.events import Clue, Event, Source, from_rows, to_rows

    values = {f.name: f"{f.name}-value" for f in dataclasses.fields(Event) if f.name not in ("kind", "source", "sources", "fields")}
    several = Event(
        kind="cuda_oom",
        source=Source("w.out", 3, 4),
        fields={"free_bytes": 7},
        sources=[Source("a", 1, 1), Source("b", 2, 2, (1, 1))],
        **values,
    )
    one = Event(kind="gpu_memory", source=Source("w.out", 9, 9), text="memory allocated (GB): 1", pid=4, fields={"label": "x"})
    clue = Clue("context", Source("w.out", 5, 8), {"frames": [{"path": "a.py"}]}, "2026-01-01T00:00:00", 4, "Actor", "10.0.0.1")
    again = from_rows(pickle.loads(pickle.dumps(to_rows([several, one, clue]))))
    assert again == [several, one, clue]
    assert [dataclasses.asdict(s) for s in again[0].sources] == [
        {"path": "a", "line": 1, "end_line": 1, "read": None},
        {"path": "b", "line": 2, "end_line": 2, "read": (1, 1)},
    ]
    assert again[1].sources == [again[1].source] and type(again[2]) is Clue


def test_worker_processes_collect_cycles():
    """Workers are forked while the parent's collector is paused: they turn theirs back on."""
    import gc
    from concurrent.futures import ProcessPoolExecutor

    from oomlens import collector
    from oomlens.pipeline import WORKER_GC_THRESHOLD, _worker_started

    with collector.paused(), ProcessPoolExecutor(max_workers=1, initializer=_worker_started) as pool:
        enabled, threshold = pool.submit(_collector_state).result()
    assert enabled and threshold == WORKER_GC_THRESHOLD and gc.isenabled()


def _collector_state() -> tuple[bool, int]:
    import gc

    return gc.isenabled(), gc.get_threshold()[0]
