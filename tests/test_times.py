"""The time layouts (oomlens/data/times.toml): every sample reads to its time and zone, by
the layout's own pattern and by the scan's search for a time anywhere in a line; and any
instant written in each layout, in any zone, reads back as written."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from oomlens.data import load
from oomlens.envelopes import peel
from oomlens.times import TIMES, Stamp, last_stamp, stamp_of_groups

TABLE = load("times.toml")
SAMPLES = [(t["name"], s) for t in TABLE["layout"] for s in t["sample"]]


def read(stamp) -> str:
    """A Stamp as the samples write its time: ISO as printed, "MM-DDT..." without a year."""
    text = f"{stamp.month:02d}-{stamp.day:02d}T{stamp.hour:02d}:{stamp.minute:02d}:{stamp.second:02d}"
    if stamp.year is not None:
        text = f"{stamp.year:04d}-{text}"
    return text if stamp.millis is None else f"{text}.{stamp.millis:03d}"


def test_every_layout_has_samples():
    assert len(TIMES) == len(TABLE["layout"])
    for layout in TABLE["layout"]:
        assert layout.get("sample"), f"{layout['name']} carries no sample"


@pytest.mark.parametrize("name,sample", SAMPLES, ids=[f"{n}:{s['text'][:30]}" for n, s in SAMPLES])
def test_sample_reads_by_its_layout(name, sample):
    layout = next(t for t in TIMES if t.name == name)
    m = re.fullmatch(layout.pattern, sample["text"])
    assert m, name
    stamp = stamp_of_groups({k: v for k, v in m.groupdict().items() if v is not None}, layout.utc)
    assert read(stamp) == sample["time"]
    assert stamp.zone == sample.get("zone")


@pytest.mark.parametrize("name,sample", [(n, s) for n, s in SAMPLES if next(t for t in TIMES if t.name == n).anywhere])
def test_sample_found_anywhere_in_a_line(name, sample):
    """The scan's search finds the time inside a line, between other text, as the layout reads it."""
    data = f"some earlier line\n{sample['text']} and the message\nan unstamped line after\n".encode()
    stamp = last_stamp(data, 0, len(data))
    assert stamp is not None and read(stamp) == sample["time"]
    assert stamp.zone == sample.get("zone")


# Each layout's way of writing an instant in the zone `zone` (minutes east of UTC)
def _iso_zoned(t: datetime, zone: int) -> str:
    sign = "+" if zone >= 0 else "-"
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}{sign}{abs(zone) // 60:02d}:{abs(zone) % 60:02d} x"


WRITERS = {
    "Ray spdlog": (lambda t, z: t.strftime("[%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d} E 42 42] x", False),
    "Python logging": (lambda t, z: t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d} - verl.workers - INFO - x", False),
    "loguru": (lambda t, z: t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} | INFO     | m:f:1 - x", False),
    "RFC 3339 with zone": (_iso_zoned, True),
    "docker -t": (lambda t, z: t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}123Z x", True),
    "glog": (lambda t, z: t.strftime("E%m%d %H:%M:%S.") + f"{t.microsecond:06d}  4242 file.cc:12] x", False),
    "glog >= 0.7": (lambda t, z: t.strftime("E%Y%m%d %H:%M:%S.") + f"{t.microsecond:06d}  4504 py_executor.cc:240] x", False),
    "c10": (lambda t, z: t.strftime("[rank0]:[E%-m%d %H:%M:%S.") + f"{t.microsecond:06d}000 ProcessGroupNCCL.cpp:1] x", False),
    "vLLM": (lambda t, z: t.strftime("INFO %m-%d %H:%M:%S [core.py:1] x"), False),
    "absl epoch": (lambda t, z: f"*** SIGABRT received at time={int(t.timestamp())} on cpu 3 ***", True),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_any_instant_in_any_zone_reads_back(writer):
    """Random instants in random zones (whole and half hours, both signs), written as the
    program writes them: the envelope peeled off the line, and the scan's search, read the
    clock as printed; layouts that print a zone (or are UTC) read the same instant."""
    write, zoned = WRITERS[writer]
    rng = random.Random(writer)
    for _ in range(200):
        zone = rng.choice(range(-12 * 60, 14 * 60 + 1, 30))
        instant = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.uniform(0, 6 * 365 * 86400))
        local = instant.astimezone(timezone(timedelta(minutes=zone)))
        line = write(local, zone)
        found = [last_stamp(line.encode(), 0, len(line))]
        if writer != "absl epoch":  # a crash dump's time is in its message, never an envelope
            found.append(peel(line).stamp)
        for stamp in found:
            assert stamp is not None, line
            if zoned:
                back = datetime(stamp.year, stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second, tzinfo=timezone(timedelta(minutes=stamp.zone)))
                assert back == instant.replace(microsecond=0), line
            else:
                printed = local.replace(microsecond=0, tzinfo=None)
                assert (stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second) == printed.timetuple()[1:6], line
                assert stamp.year in (None, printed.year) and stamp.zone is None, line


@pytest.mark.parametrize("seed", range(20))
def test_a_zoned_time_gives_its_instant_in_utc(seed):
    """Stamp.iso_utc: the instant a zoned time names, across midnight and the year's end, for
    zones of whole, half and quarter hours; a naive time names none."""
    rng = random.Random(seed)
    zone = rng.choice(range(-12 * 60, 14 * 60 + 1, 15))
    instant = datetime(2019, 12, 31, 22, tzinfo=UTC) + timedelta(seconds=rng.uniform(0, 4 * 3600), days=rng.choice([0, 1, 400]))
    local = instant.astimezone(timezone(timedelta(minutes=zone)))
    stamp = Stamp(local.year, local.month, local.day, local.hour, local.minute, local.second, local.microsecond // 1000, zone)
    assert stamp.iso_utc() == instant.replace(tzinfo=None, microsecond=(instant.microsecond // 1000) * 1000).isoformat(timespec="milliseconds")
    assert stamp._replace(zone=None).iso_utc() is None
