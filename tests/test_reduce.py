"""The reduction of memory readings and of failures: what it keeps is a function of the events
alone (not of their order or of how the input was split), it keeps every series' first and
last (and a reading series' extremes), it stays within its budget, one pool never costs the
other, and a run within the budget loses nothing."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import REAL
from oomlens.events import Clue, Event, Source
from oomlens.reduce import FAILURE_SHARE, FILEWIDE, LABELLESS, SIZES, WIDEST, Reduction, reduce_found, restore

GIB = 1 << 30


def readings(rng: random.Random, n: int) -> list[Event]:
    """Readings the way a run's logs hold them: a few files and processes, labels, devices;
    times printed with or without a zone, borrowed from an earlier line, or none; many in
    one second; sizes that climb, fall back and repeat; some lines with one size only."""
    files = [f"logs/worker-{i:02x}.out" for i in range(rng.randint(1, 4))] + ["driver-console.log"]
    start = datetime(2025, 4, 2, rng.randrange(24), tzinfo=UTC)
    out, line, t = [], {f: 0 for f in files}, start
    for _ in range(n):
        path = rng.choice(files)
        line[path] += rng.randint(1, 30)
        t += timedelta(seconds=rng.choice([0, 0, 0.2, 1, 3, 45, 900, 7200]) * rng.random())
        form = rng.random()
        time = None if form < 0.15 else t.isoformat(timespec="milliseconds")
        if time is not None and form < 0.3:
            time = time[:-6]  # printed without its zone
        fields: dict = {"label": rng.choice(["Before state_dict()", "After offload", "step"])}
        for name in rng.sample(SIZES, rng.randint(1, len(SIZES))):
            fields[name] = rng.choice([rng.randrange(80) * GIB // 4, rng.randrange(1 << 40)])
        out.append(
            Event(
                "gpu_memory",
                Source(path, line[path], line[path]),
                f"memory line {line[path]} of {path}",
                time,
                time_inferred=time is not None and form < 0.4,
                pid=rng.choice([None, 4242, 5151]),
                gpu=rng.choice([None, 0, 1]),
                memory="gpu",
                fields=fields,
            )
        )
    return out


def reduce_all(events: list, budget: int, parts: int, rng: random.Random) -> set[int]:
    """Reduce `events` (and clues) split into `parts` runs of consecutive ones (as byte
    ranges of one file are, or separate inputs), each with its own reduction, merged in a
    random order the way the pipeline merges them; the ids of those kept."""
    cuts = sorted(rng.sample(range(1, len(events)), parts - 1)) if parts > 1 else []
    pieces = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
    kept = []
    for piece in pieces:
        local = Reduction(budget)
        found = list(piece)
        reduce_found(found, 0, local)
        restore([found], local)
        kept.append((found, local.tally()))
    rng.shuffle(kept)
    whole = Reduction(budget)
    lists = []
    for index, (found, tally) in enumerate(kept):
        whole.coarsen(tally)
        reduce_found(found, index, whole)
        lists.append(found)
    whole.prune()
    restore(lists, whole)
    return {id(e) for found in lists for e in found if e.kind != "evidence"}  # the wording of those left out is made anew by each


@pytest.mark.parametrize("seed", range(12))
def test_what_is_kept_depends_on_the_readings_alone(seed):
    rng = random.Random(seed)
    events = readings(rng, rng.choice([300, 2000, 6000]))
    budget = rng.choice([8, 50, len(events) // 10])
    once = reduce_all(events, budget, 1, rng)
    assert len(once) < len(events)
    for parts in (2, 3, 7):
        assert reduce_all(events, budget, parts, rng) == once, parts
    shuffled = events[:]
    rng.shuffle(shuffled)
    assert reduce_all(shuffled, budget, 1, rng) == once


def _series(e: Event, level: int) -> tuple:
    """What a reading's series is at `level`: every label's one at LABELLESS, the file's at
    FILEWIDE."""
    if level == FILEWIDE:
        return (e.source.path, e.kind, e.memory)
    label = None if level == LABELLESS else e.fields.get("label")
    return (e.source.path, e.kind, e.node, e.pid, e.actor, e.rank, e.gpu, e.memory, label)


def _level(events: list[Event], budget: int, kind: str = "gpu_memory") -> int:
    whole = Reduction(budget)
    reduce_found(list(events), 0, whole)
    return whole.tally()[kind][1]


@pytest.mark.parametrize("seed", range(8))
def test_every_series_keeps_its_first_last_lowest_and_highest(seed):
    rng = random.Random(100 + seed)
    events = readings(rng, 3000)
    budget = rng.choice([10, 60, 500])
    kept = reduce_all(events, budget, rng.randint(1, 4), rng)
    series = _each_series_kept(events, kept, _level(events, budget))
    assert len(kept) <= (2 + 2 * len(SIZES)) * max(budget, 2 * len(series))  # a series: one bucket of timed lines, one of others


def _each_series_kept(events: list[Event], kept: set[int], level: int, sizes: tuple[str, ...] = SIZES) -> dict[tuple, list[Event]]:
    """Check that each series at `level` kept its first, last, and lowest and highest of
    `sizes`; the series."""
    series: dict[tuple, list[Event]] = {}
    for e in events:
        series.setdefault(_series(e, level), []).append(e)
    for members in series.values():
        by_line = sorted(members, key=lambda e: (e.source.line, e.text))
        assert id(by_line[0]) in kept and id(by_line[-1]) in kept
        for name in sizes:
            sized = [e for e in by_line if e.fields.get(name) is not None]
            if sized:
                assert max(e.fields[name] for e in sized if id(e) in kept) == max(e.fields[name] for e in sized)
                assert min(e.fields[name] for e in sized if id(e) in kept) == min(e.fields[name] for e in sized)
    return series


@pytest.mark.parametrize("seed", range(4))
def test_labels_of_a_counter_or_an_id_make_no_series_each(seed):
    """A label with a shard's hash or a counter in it is new on every line: each series
    then holds one reading, and by labels alone the readings would all be kept (53,117 of
    70,182 on the bench's --unique-shapes tree, 307 MB). Past WIDEST the labels of one
    file, process and device are one series: what is kept is bounded by those, the same
    however the input is split, and holds each one's first, last and extremes."""
    rng = random.Random(seed)
    events = readings(rng, 6000)
    for e in events:
        e.fields["label"] = f"{e.fields['label']} (shard {rng.getrandbits(40):010x})"
    budget = 200
    once = reduce_all(events, budget, 1, rng)
    assert _level(events, budget) == LABELLESS
    for parts in (2, 5):
        assert reduce_all(events, budget, parts, rng) == once
    series = _each_series_kept(events, once, LABELLESS)
    assert len(once) <= (2 + 2 * len(SIZES)) * len(series) < len(events) // 10


def test_a_log_whose_every_line_names_another_process_keeps_a_few_readings_a_file():
    """Every line another pid and node (a hostile log, or years of restarts): past LABELLESS
    each file is one series, so what is kept stays a few readings a file, the same however
    the input is split (300,000 such lines kept them all: 946 MB)."""
    rng = random.Random(3)
    events = readings(rng, 6000)
    for n, e in enumerate(events):
        e.pid, e.node = 10_000 + n, f"10.0.{n // 256 % 256}.{n % 256}"
    once = reduce_all(events, 100, 1, rng)
    assert _level(events, 100) == FILEWIDE
    assert reduce_all(events, 100, 4, rng) == once
    files = _each_series_kept(events, once, FILEWIDE)
    assert len(once) <= (2 + 2 * len(SIZES)) * len(files)


def test_labels_merge_only_when_the_series_alone_outnumber_the_budget():
    """A run of fewer series than half the budget never reaches LABELLESS, however long: its
    time buckets widen."""
    rng = random.Random(9)
    events = readings(rng, 20000)
    assert len({_series(e, 0) for e in events}) < 200
    assert 0 < _level(events, 400) < WIDEST  # at WIDEST a series is two buckets: of timed lines, of others


def test_a_run_within_the_budget_keeps_every_reading():
    """Level 0 is one bucket per reading: readings that share a second, or a borrowed time,
    are all kept while they fit."""
    rng = random.Random(5)
    events = readings(rng, 2000)
    assert reduce_all(events, 2000, 3, rng) == {id(e) for e in events}


def test_a_steady_climb_stays_a_steady_climb():
    """A leak: one process's allocation rising line after line for a day. Reduced to a few
    buckets, what is kept still rises at every step (the growth the timeline looks for)."""
    t0 = datetime(2025, 4, 2, tzinfo=UTC)
    events = [
        Event(
            "gpu_memory",
            Source("w.out", i + 1, i + 1),
            f"line {i}",
            (t0 + timedelta(seconds=7 * i)).isoformat(),
            pid=1,
            memory="gpu",
            fields={"label": "step", "allocated_bytes": GIB + i * 1000},
        )
        for i in range(12_000)
    ]
    kept = reduce_all(events, 64, 2, random.Random(1))
    values = [e.fields["allocated_bytes"] for e in events if id(e) in kept]
    assert 64 <= len(values) <= 2 * 128 and values == sorted(values) and len(set(values)) == len(values)
    assert (values[0], values[-1]) == (GIB, GIB + 11_999 * 1000)


def long_run(path, seconds: int) -> None:
    """A worker's veRL memory line once a second for `seconds`, allocation climbing then
    falling back each minute, with one spike the reduction must keep."""
    with path.open("w") as out:
        for i in range(seconds):
            allocated = 10 + (i % 60) / 10 + (30.0 if i == seconds // 3 else 0)
            out.write(
                f"(WorkerDict pid=169054) DEBUG:2025-06-28 {10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d},828:Before building vllm rollout, "
                f"memory allocated (GB): {allocated:.2f}, memory reserved (GB): 48.00, device memory used/total (GB): 50.11/79.11\n"
            )


@pytest.mark.slow
def test_the_command_says_how_many_readings_it_kept_and_keeps_all_on_request(tmp_path):
    import orjson
    from click.testing import CliRunner

    from oomlens.cli import main

    long_run(tmp_path / "driver.log", 12_000)  # about 3,200 kept
    runner = CliRunner()
    reduced = orjson.loads(runner.invoke(main, ["parse", str(tmp_path), "--format", "json", "-j", "1"]).stdout_bytes)
    [item] = reduced["inputs"]
    readings = [e for e in reduced["events"] if e["kind"] == "gpu_memory"]
    assert item["readings"] == {"read": 12_000, "kept": len(readings)} and len(readings) < 12_000
    assert max(e["fields"]["allocated_bytes"] for e in readings) == 44 * GIB  # the spike: 10 + 4.0 + 30 GiB
    everything = orjson.loads(runner.invoke(main, ["parse", str(tmp_path), "--format", "json", "--all-readings"]).stdout_bytes)
    assert everything["inputs"][0]["readings"] == {"read": 12_000, "kept": 12_000} and len(everything["events"]) == 12_000
    table = runner.invoke(main, ["parse", str(tmp_path)]).output
    assert f"memory readings: 12,000 read, {len(readings):,} kept" in table
    assert "memory readings" not in runner.invoke(main, ["parse", str(tmp_path), "--all-readings"]).output


def test_epoch_seconds_reads_every_iso_form_as_datetime_does():
    """The minute cache gives what a full parse gives: with or without milliseconds or
    microseconds, a zone as Z, +HH:MM or none, across days, years (before 1970 too) and
    zones; and None where
    the text is no valid time (a 60th second, the 30th of February)."""
    from oomlens.reduce import _whole, epoch_seconds

    rng = random.Random(9)
    for _ in range(5000):
        t = datetime(rng.randrange(1950, 2100), 1, 1) + timedelta(seconds=rng.randrange(366 * 86400), microseconds=rng.randrange(10**6))
        text = t.isoformat(timespec=rng.choice(["seconds", "milliseconds", "microseconds"]))
        zone = rng.choice(["", "Z", "+00:00", "+08:00", "-05:00", "+05:45", "-12:00", "+14:00"])
        text += zone
        expected = datetime.fromisoformat(text)
        expected = expected if expected.tzinfo else expected.replace(tzinfo=UTC)
        assert epoch_seconds(text) == math.floor(expected.timestamp()) == _whole(text), text  # the second it lies in
    for bad in ["2025-06-28T23:59:60", "2025-02-30T10:00:00", "2025-06-28T10:00", "not a time", "2025-13-01T00:00:00.5"]:
        assert epoch_seconds(bad) == _whole(bad)


def _fixture_folders():
    from conftest import INCIDENTS, SESSIONS

    return sorted(p for p in INCIDENTS.iterdir() if p.is_dir()) + sorted(p for p in SESSIONS.iterdir() if p.is_dir())


_UNREDUCED: dict = {}  # each fixture folder read with every reading and failure kept, once for both tests below


def _unreduced(folder):
    from oomlens.pipeline import analyze

    if folder not in _UNREDUCED:
        _UNREDUCED[folder] = analyze(str(folder), jobs=1, budget=None)
    return _UNREDUCED[folder]


@pytest.mark.parametrize(
    "folder",
    _fixture_folders(),
    ids=lambda p: p.name,
)
def test_a_reduced_run_is_diagnosed_as_the_full_one(folder):
    """Every incident and session fixture, its readings cut to 32 buckets (a third of them
    lose readings, down to a few stretches a series), gets the incidents and verdict its
    full readings give: root, component, memory kind, trend, phase. (Below about 16 buckets
    a series left with one or two stretches reads its climb as a jump: the note says so.)"""
    from oomlens.pipeline import analyze

    def told(d):
        return [(i.root.kind, i.root.source.line, i.component, i.memory, i.trend, i.phase) for i in d.incidents], d.verdict

    full, reduced = _unreduced(folder), analyze(str(folder), jobs=1, budget=32)
    assert told(reduced) == told(full)


FAILURE_KINDS = ("cuda_oom", "watchdog_timeout", "ray_worker_died", "ray_oom_kill")


def failures(rng: random.Random, n: int) -> list[Event]:
    """Failures the way a run that fails in a loop prints them: a few kinds from a few
    processes, in a few files, times as the readings have them; a CUDA OOM with its sizes."""
    files = [f"logs/worker-{i:02x}.err" for i in range(rng.randint(1, 3))] + ["driver-console.log"]
    start = datetime(2025, 4, 2, rng.randrange(24), tzinfo=UTC)
    out, line, t = [], dict.fromkeys(files, 0), start
    for _ in range(n):
        path = rng.choice(files)
        line[path] += rng.randint(1, 40)
        t += timedelta(seconds=rng.choice([0, 1, 7, 60, 900]) * rng.random())
        time = None if rng.random() < 0.2 else t.isoformat(timespec="milliseconds")
        kind = rng.choice(FAILURE_KINDS)
        fields = {"allocated_bytes": rng.randrange(80) * GIB, "reserved_bytes": rng.randrange(80) * GIB} if kind == "cuda_oom" else {}
        memory = {"cuda_oom": "gpu", "ray_oom_kill": "host"}.get(kind)
        out.append(
            Event(
                kind,
                Source(path, line[path], line[path]),
                f"{kind} at line {line[path]}",
                time,
                pid=rng.choice([None, 4242, 5151, 6161]),
                memory=memory,
                fields=fields,
            )
        )
    return out


@pytest.mark.parametrize("seed", range(8))
def test_failures_are_kept_by_the_same_rules_in_a_pool_of_their_own(seed):
    """Readings and failures mixed: what is kept depends on them alone, however split; each
    failure series (file, kind, process) keeps its first and last at its kind's level; each
    kind stays within its share of the budget; and what is kept of a kind is what that kind
    alone keeps (a flood of one kind never coarsens another)."""
    rng = random.Random(200 + seed)
    mixed = readings(rng, 3000) + failures(rng, rng.choice([500, 4000]))
    rng.shuffle(mixed)
    budget = rng.choice([20, 100, 400])
    once = reduce_all(mixed, budget, 1, rng)
    for parts in (2, 5):
        assert reduce_all(mixed, budget, parts, rng) == once
    for kind in ("gpu_memory", *FAILURE_KINDS):
        alone = [e for e in mixed if e.kind == kind]
        assert {i for i in once if i in {id(e) for e in alone}} == reduce_all(alone, budget, 1, rng), kind
        if kind != "gpu_memory":
            series = _each_series_kept(alone, once, _level(alone, budget, kind), ())
            kept = [e for e in alone if id(e) in once]
            assert 0 < len(kept) <= 2 * max(budget // FAILURE_SHARE, 2 * len(series))  # a bucket keeps its first and last


def test_failures_within_their_share_are_all_kept_however_many_readings():
    """A crash's failures are never reduced because readings flood: the pools are apart."""
    rng = random.Random(11)
    events = readings(rng, 6000) + failures(rng, 190)  # of four kinds, each with 100 buckets
    kept = reduce_all(events, 200, 3, rng)
    assert {id(e) for e in events if e.kind != "gpu_memory"} <= kept
    assert len(kept) < len(events) // 2


def test_a_flood_of_one_failure_from_every_process_keeps_a_few_a_file_and_kind():
    """Every failure from another pid (a hostile log, or a restart loop): past LABELLESS a
    file's failures of one kind are one series: the first and last of each."""
    rng = random.Random(4)
    events = failures(rng, 8000)
    for n, e in enumerate(events):
        e.pid, e.node = 20_000 + n, f"10.1.{n // 256 % 256}.{n % 256}"
    once = reduce_all(events, 50, 1, rng)
    assert all(_level(events, 50, kind) == FILEWIDE for kind in FAILURE_KINDS)
    assert reduce_all(events, 50, 3, rng) == once
    groups = _each_series_kept(events, once, FILEWIDE, ())
    assert len(once) <= 2 * 2 * len(groups)  # two buckets a series: of timed lines, of others


@pytest.mark.slow
def test_the_command_says_how_many_failures_it_kept_and_keeps_all_on_request(tmp_path):
    """A CUDA OOM every 7 seconds for fifteen hours, from 64 processes, beside a watchdog line:
    the JSON counts what was read and kept, the table says it, the diagnosis still roots at
    the first OOM, and --all-events keeps every one."""
    import jsonschema
    import orjson
    from click.testing import CliRunner

    import oomlens
    from oomlens.cli import main

    rng = random.Random(2)
    t0 = datetime(2025, 4, 2, 15)
    with (tmp_path / "worker.err").open("w") as out:
        for i in range(8_000):
            pid = 1000 + rng.randrange(64)
            if i % 2:
                t = t0 + timedelta(seconds=7 * i)
                out.write(
                    f"[{t:%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d} E {pid} {pid}] ProcessGroupNCCL.cpp:616] [Rank {pid % 8}] Watchdog caught "
                    f"collective operation timeout: WorkNCCL(SeqNum={i}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                    f"{600000 + rng.randrange(9999)} milliseconds before timing out.\n"
                )
            else:
                out.write(
                    f"(WorkerDict pid={pid}, ip=10.0.0.{pid % 8}) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {rng.uniform(0.1, 9):.2f} GiB. "
                    f"GPU {pid % 8} has a total capacity of 79.15 GiB of which {rng.uniform(0, 2):.2f} GiB is free.\n"
                )
    runner = CliRunner()
    reduced = orjson.loads(runner.invoke(main, ["parse", str(tmp_path), "--format", "json", "-j", "1"]).stdout_bytes)
    [item] = reduced["inputs"]
    assert item["failures"] == {"read": 8_000, "kept": len(reduced["events"])} and len(reduced["events"]) <= 2 * 2 * 2048 // FAILURE_SHARE
    assert {e["kind"] for e in reduced["events"]} == {"cuda_oom", "watchdog_timeout"}
    jsonschema.Draft202012Validator(oomlens.schema()).validate(reduced)
    assert "failures: 8,000 read" in runner.invoke(main, ["parse", str(tmp_path)]).output
    everything = orjson.loads(runner.invoke(main, ["parse", str(tmp_path), "--format", "json", "--all-events"]).stdout_bytes)
    assert "failures" not in everything["inputs"][0] and len(everything["events"]) == 8_000

    def root(d):
        return next(e for e in d["events"] if e["id"] == d["incidents"][0]["root"])["source"]

    assert root(reduced) == root(everything) and reduced["verdict"] == everything["verdict"]


@pytest.mark.parametrize("folder", _fixture_folders(), ids=lambda p: p.name)
def test_a_run_whose_failures_are_reduced_is_diagnosed_as_the_full_one(folder):
    """Every incident and session fixture at 16 buckets, 8 for each kind of failure: nine
    fixtures lose failures, none an incident, a root, a component, a memory kind or a
    phase. (At 4 or 6 buckets a kind, the caller's own report of a dead actor may go:
    another report of it leads.)"""
    from oomlens.pipeline import analyze

    def told(d):
        return [(i.root.kind, i.root.source.line, i.component, i.memory, i.phase) for i in d.incidents]

    full, reduced = _unreduced(folder), analyze(str(folder), jobs=1, budget=16)
    assert told(reduced) == told(full)


def failing_loop(rng: random.Random, n: int) -> list[Event | Clue]:
    """A run failing in a loop, as a scan gives it: in a few files, CUDA OOMs and watchdog
    timeouts, each after a traceback or before a task header (a few texts, printed again
    and again), and settings (the OOM's `expandable_segments` hint, a config's batch size
    that changes now and then)."""
    files = [f"logs/worker-{i:02x}.err" for i in range(rng.randint(1, 3))]
    texts = [
        {"frames": [{"path": f"/verl/workers/{name}.py", "func": name, "code": f"self.{name}(data)"}]}
        for name in ("generate_sequences", "update_actor", "compute_log_prob")
    ]
    texts.append({"task": {"actor": "WorkerDict", "method": "actor_rollout_generate_sequences", "error": "OutOfMemoryError"}})
    t0 = datetime(2025, 4, 2, tzinfo=UTC)
    out: list[Event | Clue] = []
    line = dict.fromkeys(files, 0)
    batch = 8
    for i in range(n):
        path = rng.choice(files)
        line[path] += rng.randint(1, 30)
        what = rng.random()
        if what < 0.35:
            end = line[path] + rng.randint(0, 12)
            out.append(Clue("context", Source(path, line[path], end), rng.choice(texts)))
            line[path] = end
        elif what < 0.5:
            batch = batch if rng.random() < 0.9 else rng.choice([2, 4, 8, 16])
            settings = rng.choice([{"expandable_segments": True}, {"ppo_micro_batch_size_per_gpu": batch}, {"--ds.zero_stage": 3}])
            out.append(Clue("setting", Source(path, line[path], line[path]), {"settings": settings}))
        else:
            kind = rng.choice(["cuda_oom", "watchdog_timeout"])
            time = (t0 + timedelta(seconds=i * rng.choice([1, 7, 30]))).isoformat() if rng.random() < 0.7 else None
            out.append(Event(kind, Source(path, line[path], line[path]), f"{kind} {i}", time, pid=rng.choice([1, 2, 3]), memory="gpu"))
    return out


def _kept_in_order(found: list[Event | Clue], kept: set[int]) -> list[Event | Clue]:
    return [x for x in found if id(x) in kept]


@pytest.mark.parametrize("seed", range(10))
def test_the_clues_a_failing_loop_prints_are_kept_where_they_are_read(seed, monkeypatch):
    """Once failures are left out, each kept event still finds, nearest first, the same
    texts around it that it found among all the clues (Context.around, what names its
    phase); the remedies still read the same first and last value of every setting; and
    the clues kept depend on the input alone, however it is split; copies of one text share
    it. The held clues are
    looked over from 30 on, not 4,096, so that the parts of a split are looked over too,
    while their ends are still open."""
    from oomlens import reduce
    from oomlens.correlate import Context
    from oomlens.remedies import current_settings, flag_style

    monkeypatch.setattr(reduce, "CONTEXT_HELD", 30)
    rng = random.Random(300 + seed)
    found = failing_loop(rng, rng.choice([3000, 12_000]))
    budget = rng.choice([8, 40])
    once = reduce_all(found, budget, 1, rng)
    for parts in (2, 5):
        assert reduce_all(found, budget, parts, rng) == once
    kept = _kept_in_order(found, once)
    clues = [x for x in found if isinstance(x, Clue)]
    kept_clues = [x for x in kept if isinstance(x, Clue)]
    assert len(kept_clues) < len(clues) // 3
    assert current_settings(kept_clues) == current_settings(clues) and flag_style(kept_clues) == flag_style(clues)
    context = [c for c in kept_clues if c.kind == "context"]
    assert len({id(c.fields) for c in context}) == len({repr(c.fields) for c in context})  # a text held once, however many copies
    whole, reduced = Context(clues), Context(kept_clues)

    def texts(clues: list[Clue]) -> list[str]:
        return list(dict.fromkeys(repr(c.fields) for c in clues))

    for event in kept:
        if isinstance(event, Event):
            assert texts(reduced.around(event)) == texts(whole.around(event)), event


def test_the_clues_stay_while_no_failure_is_left_out():
    """A run within the failures' budget keeps every traceback, even one near no event (it
    may name an OOM whose kind the logs do not show); of settings, the first and last copy
    of each text in each file."""
    rng = random.Random(8)
    found = failing_loop(rng, 2000)
    kept = _kept_in_order(found, reduce_all(found, 4096, 3, rng))
    assert [x for x in kept if not (isinstance(x, Clue) and x.kind == "setting")] == [x for x in found if not (isinstance(x, Clue) and x.kind == "setting")]
    copies: dict[tuple, list[int]] = {}
    for x in found:
        if isinstance(x, Clue) and x.kind == "setting":
            copies.setdefault((x.source.path, repr(x.fields)), []).append(x.source.line)
    assert sorted((x.source.path, x.source.line) for x in kept if isinstance(x, Clue) and x.kind == "setting") == sorted(
        {(path, line) for (path, _), lines in copies.items() for line in (min(lines), max(lines))}
    )


def test_a_raylet_that_says_every_worker_s_exit_keeps_a_few_of_them_each_stretch():
    """A raylet running tasks for a week says every worker's disconnect (a clock's clue: the
    same exit the GCS stamps on its own clock). 200,000 of them took 224 MB. They are a pool
    of their own: the first and last of each stretch of each raylet, within the budget, the
    same however the input is split; a crash's few all stay."""
    rng = random.Random(12)
    t0 = datetime(2025, 5, 21, tzinfo=UTC)
    clues = [
        Clue(
            "clock",
            Source(f"logs/raylet.{n % 3}.out", n // 3 + 1, n // 3 + 1),
            {"seen": f"worker_exit:{rng.getrandbits(224):056x}"},
            (t0 + timedelta(seconds=n * rng.choice([0.1, 2, 30]))).isoformat(timespec="milliseconds")[:-6],
            pid=4000 + n % 3,
            node=f"10.0.0.{n % 3}",
        )
        for n in range(20_000)
    ]
    once = reduce_all(clues, 100, 1, rng)
    assert reduce_all(clues, 100, 4, rng) == once
    assert 3 * 2 <= len(once) <= 2 * 100 // FAILURE_SHARE
    for path in {c.source.path for c in clues}:
        mine = [c for c in clues if c.source.path == path]
        assert id(mine[0]) in once and id(mine[-1]) in once
    few = clues[:40]
    assert reduce_all(few, 100, 2, rng) == {id(c) for c in few}


def test_a_flood_of_clocks_leaves_the_tracebacks_alone():
    """A raylet's every worker exit coarsens the clocks' pool, not the failures': every
    traceback stays, even one near no event (it may name an OOM the logs show no kind of)."""
    rng = random.Random(13)
    found = failing_loop(rng, 600)
    t0 = datetime(2025, 5, 21, tzinfo=UTC)
    found += [
        Clue("clock", Source("raylet.out", n + 1, n + 1), {"seen": f"worker_exit:{n:056x}"}, (t0 + timedelta(seconds=n)).isoformat()) for n in range(5000)
    ]
    kept = reduce_all(found, 1000, 2, rng)
    tracebacks = [x for x in found if isinstance(x, Clue) and x.kind == "context"]
    assert {id(c) for c in tracebacks} <= kept
    assert sum(1 for x in found if isinstance(x, Clue) and x.kind == "clock" and id(x) in kept) < 1000


def test_the_wording_of_failures_left_out_is_still_read(tmp_path):
    """A failure in a loop, reduced to a few buckets: the wordings that tell a version (torch's
    `[rank0]:[E...]` c10d prefix) stay readable where the first of each was left out."""
    from oomlens.pipeline import analyze

    watchdog = (
        "[rank{r}]:[E{m:02d}27 16:{m:02d}:{s:02d}.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600{r:03d} milliseconds before timing out.\n"
    )
    plain = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600{r:03d} milliseconds before timing out.\n"
    # the wording that tells torch's version neither first nor last: a bucket keeps those
    lines = [plain.format(n=n, r=n % 8) if not 300 <= n < 500 else watchdog.format(n=n, r=n % 8, m=n // 60 % 60, s=n % 60) for n in range(800)]
    (tmp_path / "trainer.log").write_text("".join(lines))
    full, reduced = analyze(str(tmp_path), jobs=1, budget=None), analyze(str(tmp_path), jobs=1, budget=2)
    assert len(reduced.events) < len(full.events)
    assert reduced.versions.get("torch") == full.versions.get("torch") == ">=2.4"


@pytest.mark.parametrize("where", ["prune", "add"])
def test_a_failure_inside_the_reduction_costs_the_rest_of_its_input_only(tmp_path, monkeypatch, where):
    """The reduction takes an event and records its place before it looks over what it holds
    (prune) or pools it (add): an error of oomlens there ends that input's reading, told as
    its problem, with what was read before it kept; the other inputs are read whole."""
    from oomlens import analyze, reduce

    looped = tmp_path / "looped.log"
    looped.write_text((REAL / "029_vllm_14574.log").read_text(encoding="utf-8") * 40, encoding="utf-8")
    (tmp_path / "other.log").write_bytes((REAL / "007_verl_2151.log").read_bytes())
    alone = analyze(str(tmp_path / "other.log"), jobs=1)
    monkeypatch.setattr(reduce, "CONTEXT_HELD", 2)  # the held tracebacks are looked over early
    calls = {"n": 0}
    real = getattr(reduce.Reduction, where)

    def failing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("a bug in the reduction")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(reduce.Reduction, where, failing)
    diagnosis = analyze(str(tmp_path), jobs=1)
    by_name = {Path(i.path).name: i for i in diagnosis.inputs}
    assert by_name["looped.log"].problems == ["oomlens failed on this input, rest not read (please report): RuntimeError: a bug in the reduction"]
    assert by_name["other.log"].problems == [] and by_name["other.log"].bytes == (REAL / "007_verl_2151.log").stat().st_size

    def facts(events) -> list[dict]:
        return [{k: v for k, v in e.to_dict().items() if k != "id"} for e in events]

    assert facts(e for e in diagnosis.events if e.source.path.endswith("other.log")) == facts(alone.events)
