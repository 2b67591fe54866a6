"""One clock (oomlens/clock.py): the same incidents, their files' clocks shifted, their hosts
in other zones, or their stamps stripped, give the same root, cascade and order.

The transforms rewrite every time the logs print (each layout of data/times.toml, Ray's
JSON events' epochs), so these are property tests over random shifts and zones, not a
handful of cases."""

from __future__ import annotations

import random
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import FIXTURES
from oomlens import analyze
from oomlens.clock import SKEW_MIN_S

INCIDENTS = FIXTURES / "incidents"
MULTINODE = INCIDENTS / "cascade-kernel-oom-multinode"
NODE_B = "10.0.0.4"  # its clock runs 40.7 s ahead of the head's (expected.json)
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
YEAR = 2025  # of the fixtures' year-less stamps (c10, syslog, vLLM)

# every layout a fixture prints its times in, as (regex, how to read it, how to write it back)
ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)([ T])(\d\d):(\d\d):(\d\d)(?:([,.])(\d+))?")
C10 = re.compile(r"\[([A-Z])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)")
VLLM = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
SYSLOG = re.compile(r"(?m)^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d+) (\d\d):(\d\d):(\d\d)")
EPOCH = re.compile(r"(received at time=|\"timestamp\": ?)(\d{10})")
RFC1123Z = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d\d) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d\d):(\d\d):(\d\d) ([+-]\d{4})")


def _frac(digits: str | None, t: datetime) -> str:
    """The fraction of `t` written with as many digits as the original had."""
    return "" if digits is None else f"{t.microsecond:06d}".ljust(len(digits), "0")[: len(digits)]


def _micro(digits: str | None) -> int:
    return 0 if not digits else int(digits[:6].ljust(6, "0"))


def shift(text: str, delta: float, epoch_delta: float | None = None) -> str:
    """Every printed time moved by `delta` seconds; UTC epochs by `epoch_delta` (the same by
    default: a host in another zone moves its local stamps but not its epochs)."""
    d = timedelta(seconds=delta)

    def iso(m: re.Match) -> str:
        t = datetime(*map(int, m.group(1, 2, 3, 5, 6, 7)), _micro(m.group(9))) + d
        frac = f"{m.group(8)}{_frac(m.group(9), t)}" if m.group(8) else ""
        return t.strftime(f"%Y-%m-%d{m.group(4)}%H:%M:%S") + frac

    def c10(m: re.Match) -> str:
        t = datetime(YEAR, int(m.group(2)), int(m.group(3)), *map(int, m.group(4, 5, 6)), _micro(m.group(7))) + d
        return f"[{m.group(1)}{t.month}{t.day:02d} {t:%H:%M:%S}.{_frac(m.group(7), t)}"

    def vllm(m: re.Match) -> str:
        t = datetime(YEAR, *map(int, m.group(2, 3, 4, 5, 6))) + d
        return f"{m.group(1)} {t:%m-%d %H:%M:%S}"

    def syslog(m: re.Match) -> str:
        t = datetime(YEAR, MONTHS.index(m.group(1)) + 1, *map(int, m.group(2, 3, 4, 5))) + d
        return f"{MONTHS[t.month - 1]} {t.day:>2} {t:%H:%M:%S}"

    def rfc1123z(m: re.Match) -> str:  # kubectl describe's Finished: its zone stays, the weekday follows the day
        t = datetime(int(m.group(4)), MONTHS.index(m.group(3)) + 1, int(m.group(2)), *map(int, m.group(5, 6, 7))) + d
        return f"{t:%a, %d} {MONTHS[t.month - 1]} {t:%Y %H:%M:%S} {m.group(8)}"

    def epoch(m: re.Match) -> str:
        return f"{m.group(1)}{int(m.group(2)) + round(delta if epoch_delta is None else epoch_delta)}"

    for pattern, write in ((ISO, iso), (C10, c10), (VLLM, vllm), (SYSLOG, syslog), (EPOCH, epoch), (RFC1123Z, rfc1123z)):
        text = pattern.sub(write, text)
    return text


def copy_shifted(source: Path, target: Path, delta_of) -> None:  # noqa: ANN001 - delta_of(path, line) -> (delta, epoch_delta)
    """A copy of an incident's folder with each line's times moved as `delta_of` says."""
    shutil.copytree(source, target)
    for path in target.rglob("*"):
        if path.is_file() and path.name != "expected.json":
            lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)
            path.write_text("".join(shift(line, *delta_of(path, line)) for line in lines), encoding="utf-8", errors="surrogateescape")


def story(diagnosis) -> tuple:
    """What must not change: the verdict, and each incident's root and cascade kinds."""
    v = diagnosis.verdict or {}
    return (
        v.get("component"),
        v.get("memory"),
        v.get("root_kind"),
        [(i.root.kind, i.root.pid, sorted(e.kind for e in i.cascade)) for i in diagnosis.incidents],
    )


def inputs_of(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.iterdir()) if p.name != "expected.json"]


def seconds(time: str) -> float:
    return datetime.fromisoformat(time).replace(tzinfo=UTC).timestamp()


def lead(diagnosis) -> float:
    """How far the earliest effect comes before its root, in seconds (0 when none does): a
    gRPC watchdog may see a worker vanish a second before the raylet logs the kill."""
    worst = 0.0
    for incident in diagnosis.incidents:
        if incident.root.time is None:
            continue
        root = seconds(incident.root.time)
        for event in incident.cascade:
            latest = event.time_latest if event.time_inferred and event.time_latest else event.time
            if latest is not None:
                worst = max(worst, root - seconds(latest))
    return worst


def in_order(diagnosis, before) -> None:  # noqa: ANN001 - two Diagnosis
    """Root before cascade, no worse than in the untouched input."""
    assert lead(diagnosis) <= lead(before) + SKEW_MIN_S


def moved_by(after, before, delta: float, name: str) -> None:  # noqa: ANN001 - two Diagnosis
    """Every time and interval end of `after` is the same event's in `before`, moved by `delta`."""
    assert len(after.events) == len(before.events), name
    for a, b in zip(before.events, after.events, strict=True):
        assert a.kind == b.kind, name
        for x, y in ((a.time, b.time), (a.time_latest, b.time_latest)):
            assert (x is None) == (y is None), (name, a.kind, x, y)
            if x is not None:  # to the stamp's resolution: syslog and vLLM print whole seconds
                whole = "." not in (a.time_printed or x)
                assert abs(seconds(y) - seconds(x) - delta) < (1.0 if whole else 0.002), (name, a.kind, x, y, delta)


SCENARIOS = sorted(p.name for p in INCIDENTS.iterdir() if (p / "expected.json").exists())
BASELINE = {}
# known: where a console stripped of its stamps does not tell the same story yet, and why
STRIPPED_KNOWN = {
    "kuberay-openrlhf-vllm-oomkilled": "the container's kill is timed only by kubectl describe's `Finished:` (UTC): with the console's "
    "stamps gone its events have no time, and nothing else (no pid, no pod name of the console's processes) ties the kill to the rollout",
}
STRIPPED = [pytest.param(n, marks=pytest.mark.xfail(reason=STRIPPED_KNOWN[n], strict=True)) if n in STRIPPED_KNOWN else n for n in SCENARIOS]


def baseline(name: str):
    if name not in BASELINE:
        BASELINE[name] = analyze(*inputs_of(INCIDENTS / name), jobs=1)
    return BASELINE[name]


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_whole_run_shifted_tells_the_same_story_shifted(name, tmp_path):
    """Every clock of the run moved alike (another start time, a host in another zone
    whose epochs moved with it): the same story, every time moved by exactly that much."""
    rng = random.Random(name)
    before = baseline(name)
    for round_ in range(2):
        delta = rng.choice([1, -1]) * rng.randrange(60, 36 * 3600)  # whole seconds: some layouts print no fraction
        folder = tmp_path / f"r{round_}"
        copy_shifted(INCIDENTS / name, folder, lambda path, line, delta=delta: (delta, None))
        after = analyze(*inputs_of(folder), jobs=1)
        assert story(after) == story(before), (name, delta)
        moved_by(after, before, delta, name)
        where = (str(folder), str(INCIDENTS / name))  # a file's own clock is named by its path: the copy's, the fixture's
        assert [(n.scope.replace(where[0], ""), round(n.offset_s, 2)) for n in after.clocks] == [
            (n.scope.replace(where[1], ""), round(n.offset_s, 2)) for n in before.clocks
        ]


@pytest.mark.parametrize("seed", range(6))
def test_a_node_whose_clock_runs_off_is_corrected(seed, tmp_path):
    """Node B's clock (its files, and its workers' lines in the driver console) set off by a
    random skew, either way, up to ten minutes: the skew is named and corrected, the kernel
    OOM on B stays the root, and every effect follows it on the corrected clock."""
    rng = random.Random(seed)
    skew = rng.choice([1, -1]) * rng.uniform(2, 600)

    def delta_of(path: Path, line: str) -> tuple[float, None]:
        on_b = f"node-{NODE_B}" in path.parts or f"ip={NODE_B}" in line
        return (skew if on_b else 0.0), None

    copy_shifted(MULTINODE, tmp_path / "s", delta_of)
    after = analyze(*inputs_of(tmp_path / "s"), jobs=1)
    assert story(after) == story(baseline(MULTINODE.name))
    note = next(n for n in after.clocks if n.scope == f"node {NODE_B}")
    assert note.offset_s == pytest.approx(40.654 + skew, abs=0.002)
    moved_by(after, baseline(MULTINODE.name), 0.0, f"skew {skew}")  # corrected back onto the head's clock


@pytest.mark.parametrize("zone_h", [8, -5, 5.5, 13])
def test_a_host_in_another_zone_reads_its_epochs_as_local(zone_h, tmp_path):
    """A run whose hosts keep local time UTC+N: abseil's crash-dump epochs stay UTC. The
    worker's next stamp after a line may be that epoch: read as local it lands hours off,
    so the host's zone is learned from the line that prints both clocks, and every time
    stays inside the run's own span."""
    copy_shifted(MULTINODE, tmp_path / "z", lambda path, line: (zone_h * 3600, 0.0))
    after = analyze(*inputs_of(tmp_path / "z"), jobs=1)
    assert story(after) == story(baseline(MULTINODE.name))
    moved_by(after, baseline(MULTINODE.name), zone_h * 3600, f"UTC{zone_h:+}")


@pytest.mark.parametrize("name", STRIPPED)
def test_a_console_stripped_of_its_stamps_tells_the_same_story(name, tmp_path):
    """The driver console saved without any time (a terminal scrollback with the prefixes
    but not the stamps): its events lie between their neighbours' stamps, or nowhere, and
    the story stays."""
    folder = tmp_path / "s"
    shutil.copytree(INCIDENTS / name, folder)
    consoles = list(folder.rglob("driver-console.log"))
    if not consoles:
        pytest.skip("no driver console in this incident")
    for console in consoles:
        text = console.read_text(encoding="utf-8", errors="surrogateescape")
        for pattern in (ISO, C10, VLLM):
            text = pattern.sub("", text)
        console.write_text(text, encoding="utf-8", errors="surrogateescape")
    after = analyze(*inputs_of(folder), jobs=1)
    before = baseline(name)
    assert story(after)[:3] == story(before)[:3], name
    in_order(after, before)


# A UTC+N host whose torch (<= 2.3) prints its watchdog without a time: the only stamp after
# the watchdog in its .err is abseil's UTC epoch; Ray's core-worker log prints the same
# crash behind its own local stamp, which tells the zone.
RAYLET = "[{kill} E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.0.0.3) over the last time period.\n"
ERR = (
    "[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=118, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
    "*** SIGABRT received at time={epoch} on cpu 3 ***\n"
    "PC: @     0x7f61d76969fc  (unknown)  pthread_kill\n"
)
CORE = "[{abort} E 895499 896718] logging.cc:484: *** SIGABRT received at time={epoch} on cpu 3 ***\n"


@pytest.mark.parametrize("seed", range(8))
def test_an_epoch_is_read_on_its_host_s_local_clock(seed, tmp_path):
    rng = random.Random(seed)
    zone = rng.choice(range(-12 * 60, 14 * 60 + 1, 30)) * 60  # seconds east of UTC
    kill = datetime(2025, 1, 1) + timedelta(seconds=rng.randrange(0, 365 * 86400), milliseconds=117)
    abort = kill + timedelta(seconds=rng.randrange(1, 60))
    epoch = int((abort - timedelta(seconds=zone)).replace(tzinfo=UTC).timestamp())
    logs = tmp_path / "logs"
    logs.mkdir()
    ms = lambda t: t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"  # noqa: E731
    (logs / "raylet.out").write_text(RAYLET.format(kill=ms(kill)))
    (logs / "worker-11761f9a71a291fae4e4c0c7a5e6c469bd1700e910c0536ff2918ac7-01000000-895499.err").write_text(ERR.format(epoch=epoch))
    (logs / "python-core-worker-11761f9a71a291fae4e4c0c7a5e6c469bd1700e910c0536ff2918ac7_895499.log").write_text(CORE.format(abort=ms(abort), epoch=epoch))
    diagnosis = analyze(str(tmp_path), jobs=1)
    watchdog = next(e for e in diagnosis.events if e.kind == "watchdog_timeout")
    assert watchdog.time is None and watchdog.time_latest == abort.replace(microsecond=0).isoformat()
    assert [(i.root.kind, [e.kind for e in i.cascade]) for i in diagnosis.incidents] == [
        ("ray_oom_summary", ["process_error", "watchdog_timeout"])
    ]  # the abort a cascade of the kill


# -- every fixture: a time or an interval, inside the run's span; multi-node reports in order --

from conftest import fixture_inputs, sample  # noqa: E402
from oomlens.envelopes import without_debris  # noqa: E402
from oomlens.outputs import html as report  # noqa: E402
from oomlens.sources import discover  # noqa: E402
from oomlens.times import every_stamp, first_stamp  # noqa: E402

ALL = fixture_inputs()


def _stamps_in(path: str) -> bool:
    data = Path(path).read_bytes()
    return first_stamp(data, 0, len(data))[0] is not None


def _first_and_last(path: str, year: int | None) -> list[float]:
    """The first and last time a file prints (with the run's year where it prints none; a
    time printed with its zone as its UTC instant, as the clock reads it when it learns no
    other zone); colour codes written out as text (`^[[90m01-26 09:25:37`) taken off first,
    as they hide a time from the pattern."""
    data = without_debris(Path(path).read_bytes().decode("utf-8", "replace")).encode()
    found = []
    for stamp in every_stamp(data):
        if stamp is None:
            continue
        if stamp.zone is None and (stamp.year or year):
            found.append(seconds(stamp.iso(year)))
        elif (utc := stamp.iso_utc()) is not None:  # kubectl describe's `Finished: Sun, 11 Aug 2024 19:00:03 +0200`
            found.append(seconds(utc))
    return [min(found), max(found)] if found else []


SPANNED = sample(ALL, ids=[p.name if p.is_file() else p.parent.name + "/" + p.name for p in ALL])


@pytest.mark.parametrize("where", SPANNED)
def test_every_event_has_its_time_or_an_interval_inside_the_run(where):
    """An event's time is its own line's, or an interval between the stamps around it,
    whenever its file prints any time at all; and every time lies within the run's own span
    (the first and last time its files print, widened by the clocks the correlator moved)."""
    diagnosis = analyze(str(where), jobs=1)
    stamped = {item.path for item in discover([str(where)]) if item.file and _stamps_in(item.path)}
    years = [int(t[:4]) for e in diagnosis.events for t in (e.time, e.time_latest) if t]
    own = [t for path in stamped for t in _first_and_last(path, max(set(years), key=years.count) if years else None)]
    slack = max([abs(n.offset_s) for n in diagnosis.clocks], default=0.0) + 1.0
    for event in diagnosis.events:
        if any(source.path in stamped for source in event.sources):  # a log that prints no year keeps "MM-DDTHH:MM:SS"
            f = event.fields
            assert event.time or event.time_latest or f.get("local_time") or f.get("local_time_latest"), (event.kind, event.source)
        if own:
            for time in (event.time, event.time_latest):
                if time:
                    assert min(own) - slack <= seconds(time) <= max(own) + slack, (event.kind, event.source, time)


MULTI_NODE = [name for name in SCENARIOS if len({i.node for i in discover([inputs_of(INCIDENTS / name)[0]]) if i.node}) > 1]


@pytest.mark.parametrize("name", MULTI_NODE)
def test_a_multi_node_report_shows_root_before_cascade_on_a_time_axis_with_skew_named(name):
    diagnosis = baseline(name)
    figure, note = report.timeline_figure(diagnosis)
    assert figure["layout"]["xaxis"]["type"] == "date"
    marks = {i: x for t in figure["data"] if t.get("legendgroup") == "events" for i, x in zip(t["customdata"], t["x"], strict=True)}
    for incident in diagnosis.incidents:
        root = marks[incident.root.id]
        for event in incident.cascade:
            if event.id in marks and not event.time_inferred:
                assert marks[event.id] >= root or seconds(root.replace(" ", "T")) - seconds(marks[event.id].replace(" ", "T")) <= lead(diagnosis)
    for clock in diagnosis.clocks:
        assert clock.sentence() in note


SESSION = FIXTURES / "sessions" / "ray2.60-b-rl-actor-oom"


@pytest.mark.parametrize("seed", range(4))
def test_a_console_a_collector_stamped_in_utc_is_placed_on_the_run_s_clock(seed, tmp_path):
    """The driver console saved with `docker logs -t`: every line behind a UTC stamp, in a
    run whose hosts keep local time UTC+N. No line prints both clocks; the OOM kill seen in
    the console and in raylet.out ties the console's clock to the node's, and the story is
    the untouched session's."""
    rng = random.Random(seed)
    zone = rng.choice([z for z in range(-12 * 60, 14 * 60 + 1, 30) if abs(z) >= 60]) * 60
    folder = tmp_path / "s"
    shutil.copytree(SESSION, folder)
    console = folder / "driver-console.log"
    local = datetime(2026, 11, 22, 3, 37)
    lines = []
    for i, line in enumerate(console.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)):
        if m := ISO.search(line):
            local = datetime(*map(int, m.group(1, 2, 3, 5, 6, 7)), _micro(m.group(9)))
        utc = local - timedelta(seconds=zone) + timedelta(milliseconds=i)
        lines.append(utc.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z " + line)
    console.write_text("".join(lines), encoding="utf-8", errors="surrogateescape")
    before, after = analyze(str(SESSION), jobs=1), analyze(str(folder), jobs=1)
    assert story(after) == story(before)
    note = next(n for n in after.clocks if n.scope.startswith(str(console)))
    assert note.offset_s == pytest.approx(-zone, abs=30)


REAL_281 = FIXTURES / "real" / "281_primihub_122.log"


@pytest.mark.parametrize("seed", range(6))
def test_a_collector_s_utc_stamp_before_a_program_s_local_one_tells_the_zone(seed, tmp_path):
    """`docker logs -t` of a program that stamps its own lines in local time (loguru, glog
    >= 0.7 with its year): each such line prints both clocks, so the host's zone is known,
    and a line that prints only the collector's UTC stamp is moved to that local time. The
    real excerpt (UTC+8), rewritten for a random zone and day: every event on one clock."""
    rng = random.Random(seed)
    zone = rng.choice([z for z in range(-12 * 60, 14 * 60 + 1, 30) if z]) * 60
    shift = timedelta(days=rng.randrange(-400, 400), seconds=rng.randrange(86400))

    def moved(written: str, layout: str) -> str:  # a stamp the program wrote at UTC+8, at the same instant in `zone`
        return (datetime.strptime(written, layout) - timedelta(hours=8) + shift + timedelta(seconds=zone)).strftime(layout)

    out = []
    for line in REAL_281.read_text(encoding="utf-8").splitlines(keepends=True):
        utc = datetime.strptime(line[:26], "%Y-%m-%dT%H:%M:%S.%f") + shift  # nanoseconds past the micro dropped
        rest = re.sub(r"^ (2023-05-22 11:06:\d\d\.\d{3})", lambda m: " " + moved(m.group(1) + "000", "%Y-%m-%d %H:%M:%S.%f")[:-3], line[30:])
        rest = re.sub(r"^ (E20230522 11:06:\d\d\.\d+)", lambda m: " " + moved(m.group(1), "E%Y%m%d %H:%M:%S.%f"), rest)
        out.append(utc.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z" + rest)
    log = tmp_path / "docker.log"
    log.write_text("".join(out), encoding="utf-8")
    diagnosis = analyze(str(log), jobs=1)
    times = {e.kind: datetime.fromisoformat(e.time) for e in diagnosis.events}
    death = datetime(2023, 5, 22, 3, 6, 53, 935238) + shift + timedelta(seconds=zone)  # on the host's local clock
    assert abs(times["ray_worker_died"] - death) < timedelta(milliseconds=10)  # glog's own stamp
    assert abs(times["ray_oom_kill"] - death) < timedelta(milliseconds=10)  # its line prints only the collector's
    (note,) = diagnosis.clocks
    assert note.offset_s == -zone and "print two clocks" in note.how


@pytest.mark.parametrize(
    "bar",
    [
        "Training Progress:  10%|█         | 116/1155 [7:54:43<67:30:48, 233.93s/it]",
        "Processed prompts:  37%|███▋      | 380/1024 [00:41<01:10,  9.1it/s]",
        "step 12/40 ",
    ],
)
def test_a_stamped_line_glued_behind_a_progress_bar_keeps_its_own_time(bar, tmp_path):
    """A progress bar that lost its carriage return in a copy: the Ray line glued behind it
    still prints its time, and that time is the event's own, not one borrowed."""
    log = tmp_path / "console.log"
    log.write_text(
        "2026-01-20 08:10:00,000 INFO worker.py:1 -- started\n"
        f"{bar}(raylet) [2026-01-20 08:13:25,391 E 2105 2105] (raylet) node_manager.cc:3099: 1 Workers (tasks / actors) killed due to "
        "memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 87d772fad6a1e8e28022131ee0c15591d7d109361ad677a9e64c71e2, "
        "IP: 10.22.68.9) over the last time period.\n"
        "2026-01-20 08:20:00,000 INFO worker.py:1 -- done\n",
        encoding="utf-8",
    )
    (event,) = analyze(str(log), jobs=1).events
    assert (event.kind, event.time, event.time_inferred) == ("ray_oom_summary", "2026-01-20T08:13:25.391", False)


@pytest.mark.parametrize("hours, zone", [(8, 8 * 3600), (-12, -12 * 3600), (14, 14 * 3600), (-13, None), (77, None)])
def test_two_clocks_further_apart_than_any_zone_tell_none(hours, zone):
    """A line's two clocks tell its host's zone only where they lie as far apart as a zone
    can (UTC-12 to UTC+14): a copy of a log that rewrote one of them (its times moved, a date
    mangled) tells none, and the times printed with a zone stay where no zone moves them."""
    from oomlens.clock import local_offsets
    from oomlens.events import Clue, Event, Source

    utc = datetime(2026, 3, 12, 10, 0, 0)
    clue = Clue("clock", Source("raylet.out", 1, 1), {"utc": utc.isoformat()}, (utc + timedelta(hours=hours)).isoformat())
    event = Event(kind="ray_oom_kill", source=Source("raylet.out", 2, 2), text="", time="2026-03-12T10:00:05+00:00")
    assert local_offsets([event], [clue], []) == ({} if zone is None else {"raylet.out": zone})
