"""The envelope table (oomlens/data/envelopes.toml): every sample peels to its message and
facts, and envelopes chained in any order peel as well as one alone."""

from __future__ import annotations

import itertools
import random

import pytest

from oomlens.data import load
from oomlens.envelopes import BY_NAME, ENVELOPES, peel, without

TABLE = load("envelopes.toml")
SAMPLES = [(e["name"], s) for e in TABLE["envelope"] for s in e.get("sample", ())]
DEBRIS = [(d["name"], s) for d in TABLE["debris"] for s in d.get("sample", ())]
FACTS = ("pid", "ip", "rank", "uptime")


def shown(stamp) -> str | None:
    """A Stamp as the samples write it."""
    if stamp is None:
        return None
    text = f"{stamp.month:02d}-{stamp.day:02d} {stamp.hour:02d}:{stamp.minute:02d}:{stamp.second:02d}"
    if stamp.year is not None:
        text = f"{stamp.year:04d}-{text}"
    return text if stamp.millis is None else f"{text}.{stamp.millis:03d}"


LAYERS = [(e["name"], s) for e in TABLE["envelope"] for s in e.get("layer_sample", ())]


def test_every_layer_has_a_sample():
    assert all(e.get("layer_sample") for e in TABLE["envelope"] if "layer" in e)


@pytest.mark.parametrize("name,sample", LAYERS, ids=[f"{n}:{s['line'][:40]}" for n, s in LAYERS])
def test_layer_sample(name, sample):
    """One copy of an envelope taken off, as layout takes off one added after a wrap."""
    assert without((BY_NAME[name],), sample["line"].encode()).decode() == sample["without"]


def test_every_envelope_and_debris_form_has_a_sample():
    for entry in [*TABLE["envelope"], *TABLE["debris"]]:
        assert entry.get("sample"), f"{entry['name']} carries no sample"
    assert len(ENVELOPES) == len(TABLE["envelope"])


@pytest.mark.parametrize("name,sample", SAMPLES, ids=[f"{n}:{s['line'][:40]}" for n, s in SAMPLES])
def test_envelope_sample(name, sample):
    line = peel(sample["line"])
    assert line.text == sample["text"], name
    for fact in FACTS:
        if fact in sample:
            assert getattr(line, fact) == sample[fact], f"{name}: {fact}"
    if "name" in sample:
        assert line.actor == sample["name"], name
    if "stamp" in sample:
        assert shown(line.stamp) == sample["stamp"], name
        assert line.stamp.zone == sample.get("zone"), f"{name}: zone"


@pytest.mark.parametrize("name,sample", DEBRIS, ids=[f"{n}:{s['line'][:30]}" for n, s in DEBRIS])
def test_debris_sample(name, sample):
    assert peel(sample["line"]).text == peel(sample["text"]).text, name


# What a collector, a viewer or a CI puts before a line, in forms users paste.
OUTER = [
    "[2026-03-12 11:17:34] ",
    "[1763] ",
    "1763:",
    "logs/worker-01-ffff-77.err:1763:",
    "  1763\t",
    "2026-03-12T11:17:34.123456789Z ",
    "2024-05-01T12:00:00.1234567Z ",
    "Mar 12 11:17:34 head-0 ray-job[2211]: ",
    "Mar 12 11:17:34 ",
    "> ",
    "ray-head-1  | ",
    "[pod/raycluster-head-x7/ray-head] ",
    "2026-03-12T11:17:34+08:00 stdout F ",
]
COLOURS = ["", "\x1b[36m", "#033[36m", "^[[36m", "\\x1b[36m", "\ufffd[36m", "[36m"]
MESSAGES = [
    ("(WorkerDict pid=14523, ip=10.0.0.4) ", "torch.OutOfMemoryError: CUDA out of memory.", {"pid": 14523, "ip": "10.0.0.4", "actor": "WorkerDict"}),
    ("(raylet) ", "A worker died or was killed while executing a task", {"actor": "raylet"}),
    ("[2024-08-26 21:30:10,113 I 393 393] (raylet) node_manager.cc:3069: ", "1 Workers (tasks / actors) killed", {"pid": 393, "actor": "raylet"}),
    ("[rank3]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] ", "[Rank 0] Watchdog caught collective operation timeout", {"rank": 3}),
]


def _coloured(prefix: str, colour: str) -> str:
    reset = colour.replace("36", "0") if colour else ""
    return f"{colour}{prefix.rstrip()}{reset} " if prefix.endswith(" ") else f"{colour}{prefix}{reset}"


@pytest.mark.parametrize("outer", OUTER)
@pytest.mark.parametrize("message", MESSAGES, ids=[m[1][:20] for m in MESSAGES])
def test_any_outer_envelope_peels_to_the_same_message_and_facts(outer, message):
    prefix, text, facts = message
    for colour in COLOURS:
        line = peel(outer + _coloured(prefix, colour) + text)
        assert line.text == text, (outer, colour)
        for key, value in facts.items():
            assert getattr(line, key) == value, (outer, colour, key)


def test_chains_of_outer_envelopes_in_any_order():
    """Two or three outer envelopes in every order (a sample of the permutations, seeded)."""
    rng = random.Random(12)
    chains = [c for n in (2, 3) for c in itertools.permutations(OUTER, n)]
    for chain in rng.sample(chains, 400):
        prefix, text, facts = rng.choice(MESSAGES)
        line = peel("".join(chain) + _coloured(prefix, rng.choice(COLOURS)) + text)
        assert line.text == text, chain
        for key, value in facts.items():
            assert getattr(line, key) == value, (chain, key)


def test_the_programs_own_time_wins_over_a_collectors():
    line = peel("2026-03-12T03:17:34.000Z [2026-03-12 11:17:30,001 E 5 5] (raylet) node_manager.cc:1: x")
    assert shown(line.stamp) == "2026-03-12 11:17:30.001"
    line = peel("[2026-03-12 11:17:34] ERROR 03-12 11:17:33 [core.py:708] x")
    assert shown(line.stamp) == "2026-03-12 11:17:33"  # the year borrowed from the same day
    line = peel("[2026-03-13 00:00:01] ERROR 03-12 23:59:59 [core.py:708] x")
    assert shown(line.stamp) == "2026-03-12 23:59:59"  # across midnight: the year of the moment nearest
    line = peel("[2026-03-12T20:00:01Z] ERROR 03-13 04:00:01 [core.py:708] x")
    assert shown(line.stamp) == "2026-03-13 04:00:01"  # UTC+8's next day
    line = peel("[2026-12-31 20:00:01] ERROR 01-01 04:00:01 [core.py:708] x")
    assert shown(line.stamp) == "2027-01-01 04:00:01"  # and its next year
    line = peel("[2026-03-15 00:00:01] ERROR 03-12 23:59:59 [core.py:708] x")
    assert shown(line.stamp) == "2026-03-15 00:00:01"  # days apart: another moment, the outer time stands


def test_no_envelope_eats_message_text():
    """Lines that start with numbers, times, dates and file names but carry no envelope."""
    for text in [
        "14522\t2.39\tray::RewardModelRayActor.compute_reward",
        "12:30:45 is when it died",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "10.0.0.1:6379: connection refused",
        "1.5: half",
        '  File "/x/y.py", line 12, in f',
        "3 Workers (tasks / actors) killed due to memory pressure (OOM)",
    ]:
        assert peel(text).text == text


@pytest.mark.parametrize("seed", range(4))
def test_colour_codes_are_removed_as_the_debris_pattern_removes_them(seed):
    """without_debris looks for codes only from DEBRIS_LEAD characters before each `[`: over
    random strings of the characters the codes are made of, it removes what ANSI.sub removes."""
    from oomlens.envelopes import ANSI, DEBRIS_LEAD, without_debris

    assert DEBRIS_LEAD == 6  # `\\u001b[` is the longest way to write the ESC before a code's `[`
    rng = random.Random(seed)
    alphabet = ["\x1b", "[", "[", "3", "6", "m", "0", ";", "?", "K", "\ufffd", "^", "#033", "\\", "x1b", "u001B", "e", "`", "a", " ", "\n"]
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert without_debris(text) == ANSI.sub("", text), repr(text)


@pytest.mark.parametrize(
    "prefix",
    ["Mar 12 11:00:01 ", "Nov  3 09:14:27 ", "2026-03-12T11:00:01.123456+08:00 ", "[2026-03-12 11:00:01] ", "ray-head-1  | Mar 12 11:00:01 "],
)
@pytest.mark.parametrize(
    "message",
    [
        "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        "RuntimeError: CUDA error: out of memory",
        "NCCL WARN Cuda failure 'out of memory'",
    ],
)
def test_no_envelope_runs_into_the_message(prefix, message):
    """A bare time before a line (`ts`, a collector) makes 'CUDA Error: ...' look like a
    syslog line's host and tag: the line is peeled only as far as its message starts, and
    the time before it is still the line's own."""
    from oomlens import parse_text

    (event,) = [e for e in parse_text(prefix + message) if e.kind == "cuda_oom"]
    assert event.text.endswith(message)
    assert (event.time or event.fields.get("local_time")) is not None and not event.time_inferred  # a syslog time prints no year
