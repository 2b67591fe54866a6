"""A paste as something after its program left it (layout.py; issue 32, items 3 and 4): one
run of blanks after every line, `\\r\\r\\n` ends, and stamps put before every line by what
read the log later (`ts` on a copy) do not change its events, pids or components, nor hide
the width a terminal wrapped it at."""

from __future__ import annotations

import io
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import REAL, SESSIONS
from oomlens import analyze
from oomlens.layout import Trimmed, Unwrapped, blanks_added, laid_out, stamped_later
from oomlens.sources import Input

sys.path.insert(0, str(Path(__file__).parent / "robustness"))
from ops import pad, stamps, trailing  # noqa: E402

WRAPPED = [REAL / "106_vlmr1_257.log", REAL / "184_openr1_620.log", REAL / "235_openrlhf_265.log"]  # pastes a terminal wrapped
RAY_2_1 = sorted(SESSIONS.glob("ray2.1-*/driver-console.log")) + [SESSIONS / "ray2.5-c-actor-sigkill" / "driver-console.log"]


def facts(path: Path) -> tuple:
    diagnosis = analyze(str(path), jobs=1)
    verdict = diagnosis.verdict or {}
    return sorted((e.kind, e.pid or 0, str(sorted(e.fields.items()))) for e in diagnosis.events), (verdict.get("component"), verdict.get("root_kind"))


@pytest.mark.parametrize("paste", WRAPPED, ids=lambda p: p.name)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blanks=st.sampled_from([" ", "   ", "\t", " \t", ""]), ending=st.sampled_from(["\n", "\r\n", "\r\r\n"]))
def test_blanks_and_line_ends_after_every_line_keep_the_wrap(tmp_path, paste, blanks, ending):
    changed = tmp_path / paste.name
    changed.write_bytes(trailing(paste.read_bytes(), blanks=blanks, ending=ending))
    assert facts(changed) == facts(paste)
    stream, layout = laid_out(io.BufferedReader(io.BytesIO(changed.read_bytes())), Input(str(changed)))
    while layout is not None and not isinstance(layout, Unwrapped):
        layout = layout.under
    assert isinstance(layout, Unwrapped)  # the width was learned


def test_only_a_run_put_after_every_line_is_taken_off():
    """A terminal capture pads its lines with runs of every length: they are its own, and
    tell its wrap; a line that ended in blanks keeps them, and loses only the run."""
    text = b"a line  \nanother\nthird one\n"
    assert blanks_added(trailing(text, blanks="  ")) == b"  "
    assert blanks_added(pad(text, width=40)) is None
    assert blanks_added(text) is None
    trimmed = Trimmed(io.BytesIO(trailing(text, blanks="  ", ending="\r\n")), b"  ")
    assert io.BufferedReader(trimmed).read() == text.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("console", RAY_2_1, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("layout", ["%b %d %H:%M:%S.%f ", "%b %d %H:%M:%S ", "%Y-%m-%dT%H:%M:%S.%fZ ", "%Y-%m-%dT%H:%M:%S.%f000Z "])
def test_stamps_of_a_later_clock_double_no_event_and_lose_no_component(tmp_path, console, layout):
    """`ts` on a copy, 37 ms apart: its stamps are not when the lines were written."""
    stamped = tmp_path / console.name
    stamped.write_bytes(stamps(console.read_bytes(), layout, start="2026-03-12T11:00:00"))
    assert stamped_later(stamped.read_bytes()[: 64 << 10])
    assert facts(stamped) == facts(console)


@settings(max_examples=10, deadline=None)
@given(lag_ms=st.integers(0, 60_000), zone_quarters=st.integers(-48, 56))
def test_stamps_written_with_the_lines_are_kept_whatever_the_zone(lag_ms, zone_quarters):
    """A collector's UTC stamp before the program's local time, a zone and a lag apart, is
    the line's clock: kept (the clock learns the zone from the pairs)."""
    local = datetime(2026, 11, 24, 22, 24, 17)
    utc = local - timedelta(minutes=15 * zone_quarters) + timedelta(milliseconds=lag_ms)
    line = f"{utc:%Y-%m-%dT%H:%M:%S.%f}Z {local:%Y-%m-%d %H:%M:%S},783\tWARNING worker.py:1839 -- A worker died\n".encode()
    assert stamped_later(line * 3) == ()
