"""The command line: thin click commands over the library (oomlens.analyze)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, NoReturn

import click

from . import collector

if TYPE_CHECKING:
    from .diagnosis import Diagnosis
    from .outputs.filters import Filters


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="oomlens")
def main() -> None:
    """Find out what ran out of memory in an RL training run on Ray, from its logs alone."""


_AT_ONCE = False  # run() sets it: the command itself, not click's test runner in a test process


def run() -> None:
    """The `oomlens` command (and `python -m oomlens`)."""
    global _AT_ONCE
    _AT_ONCE = True
    main()


def _leave(code: int) -> NoReturn:
    """End the command with `code`. Run as the command, it flushes its output and leaves
    with os._exit: freeing a long run's diagnosis object by object, then the interpreter,
    took a twentieth of a second more, for nothing (mypy leaves the same way)."""
    if _AT_ONCE:
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


jobs_option = click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="processes reading files [default: one per core]")
reduction_option = click.option(
    "--all-events",
    "--all-readings",
    "all_events",
    is_flag=True,
    help="keep every memory reading and every failure; by default a long run's readings are reduced to the first, last, lowest and "
    "highest of each stretch of each series, and a flood of failures to the first and last of each stretch of each process and kind, "
    "so memory stays flat (each input's `readings` and `failures` say how many were kept)",
)
session_option = click.option(
    "--session",
    metavar="latest|NAME",
    default=None,
    help="read one Ray session only: the newest (latest) or the session_* folder NAME; files named outside any session are still read. "
    "Without it each session is correlated on its own.",
)

cluster_option = click.option(
    "--cluster",
    metavar="ADDRESS",
    default=None,
    help="also read every node of this live Ray cluster where its logs lie (auto, HOST:PORT or ray://..., as ray.init takes it): "
    "one Ray task on each node reads that node's logs of the session the cluster runs (with --session: that session) and sends back only "
    "what it found. PATHS are then optional and read here. --jobs is then the processes per node (default 1). Needs Ray: pip install 'oomlens[ray]'.",
)
node_timeout_option = click.option(
    "--node-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="with --cluster: the seconds a node has to answer; one that has not is told as a problem, not waited for [default: 600]",
)


def _kinds(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> frozenset[str]:
    """--kind: checked against the kinds table before anything is read (imported here, not
    with the command line: `--help` needs only click)."""
    if values:
        from .kinds import shipped

        known = shipped().names
        unknown = [v for v in values if v not in known]
        if unknown:
            raise click.BadParameter(f"unknown kind {', '.join(unknown)}; the kinds are {', '.join(known)}")
    return frozenset(values)


def _time(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """--since/--until: an ISO time without a zone, as the events' times are written."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO time like 2026-11-22T03:37:00") from None
    if moment.tzinfo is not None:
        raise click.BadParameter("give the time without a zone, as the TIME column shows it (the events are on one clock)")
    return moment


def _diagnose(
    paths: tuple[str, ...],
    jobs: int | None,
    all_events: bool = False,
    session: str | None = None,
    cluster: str | None = None,
    node_timeout: float | None = None,
) -> Diagnosis:
    """Analyze with a progress line on a terminal; every input problem is told on stderr.
    A cluster that cannot be read at all ends the command: exit 2 without Ray (a usage
    error: what was asked cannot be done here), 1 when it cannot be reached (nothing read).

    The library is imported here, not with the command line: `--help` needs only click;
    the cluster's module where an error may be its own (no run without --cluster reads it)."""
    from . import analyze
    from .outputs.terminal import escape as one_line

    if not paths and cluster is None:
        raise click.UsageError("give PATHS to read, or --cluster ADDRESS")
    try:
        diagnosis = analyze(*paths, jobs=jobs, all_events=all_events, session=session, cluster=cluster, node_timeout=node_timeout, progress=True)
    except KeyboardInterrupt:
        click.echo("oomlens: interrupted", err=True)
        raise SystemExit(130) from None
    except Exception as err:
        from .cluster import ClusterError, NoRay

        if not isinstance(err, ClusterError):
            raise
        click.echo(f"oomlens: {one_line(str(err))}", err=True)
        raise SystemExit(2 if isinstance(err, NoRay) else 1) from None
    for problem in diagnosis.problems:  # one line each, whatever a file name or error holds
        click.echo(f"oomlens: {one_line(problem)}", err=True)
    return diagnosis


@main.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "jsonl", "markdown"]),
    default="table",
    show_default=True,
    help="table for people; json is the version-1 contract; jsonl is one event per line; markdown is a summary to paste into a GitHub issue.",
)
@jobs_option
@reduction_option
@session_option
@cluster_option
@node_timeout_option
@click.option("--fail-on", type=click.Choice(["incident"]), default=None, help="exit 3 when the logs show an incident (for scripts and CI).")
@click.option("--readings", is_flag=True, help="list memory readings too, not only failures (one row per reading, however many files print it).")
@click.option(
    "--kind", "kinds", multiple=True, metavar="KIND", callback=_kinds, help="list only events of this kind (repeatable; the names of data/kinds.toml)."
)
@click.option("--node", "nodes", multiple=True, metavar="NODE", help="list only events of this node (repeatable), as the NODE column shows it.")
@click.option("--since", metavar="TIME", callback=_time, help="list only events at or after this ISO time, as the TIME column shows it (2026-11-22T03:37:00).")
@click.option("--until", metavar="TIME", callback=_time, help="list only events at or before this ISO time.")
@click.option(
    "--color",
    "color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="auto: colour on a terminal or with FORCE_COLOR set, never with NO_COLOR set (as rich reads them); a pipe or a file is never wrapped.",
)
def parse(
    paths: tuple[str, ...],
    fmt: str,
    jobs: int | None,
    all_events: bool,
    session: str | None,
    cluster: str | None,
    node_timeout: float | None,
    fail_on: str | None,
    readings: bool,
    kinds: frozenset[str],
    nodes: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    color: str,
) -> None:
    """Parse Ray session folders, log files, archives or stdin (-) into events.

    Example: oomlens parse /tmp/ray/session_latest/logs driver.log --format json

    A live cluster's nodes, each read where its logs lie: oomlens parse --cluster auto driver.log

    Exit status: 0 when any input could be read, 1 when none could (each problem is
    told on stderr as `oomlens: <path>: <problem>`) or the cluster could not be reached,
    2 for a usage error (--cluster without Ray installed is one); with
    `--fail-on incident`, 3 when an incident was found.

    The table lists failures; --readings, --kind, --node, --since and --until choose
    what the table and markdown's event list show. They never change --format json or
    jsonl, which always hold every event (the whole contract).
    """
    from .outputs.filters import Filters

    filters = Filters(readings, kinds, frozenset(nodes), since, until)
    # the cycle collector would walk the whole diagnosis once more between reading and
    # writing it (a twentieth of a second for a long run), and find nothing
    with collector.paused():
        diagnosis = _diagnose(paths, jobs, all_events, session, cluster, node_timeout)
        try:
            _write(diagnosis, fmt, filters, color)
        except BrokenPipeError:  # `oomlens parse ... | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError as err:  # stdout on a full disk
            _unwritable(err)
        if not diagnosis.readable:
            if len(diagnosis.problems) != 1:  # one problem is the one line that says it; several are summed up
                click.echo("oomlens: nothing could be read from " + _named(paths, cluster), err=True)
            _leave(1)
        _leave(3 if fail_on == "incident" and diagnosis.incidents else 0)


@main.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--output",
    "-o",
    default="oom-report.html",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="the HTML file to write; - for stdout",
)
@click.option(
    "--plotly",
    type=click.Choice(["inline", "cdn"]),
    default="inline",
    show_default=True,
    help="inline: plotly.js inside the page, which opens offline (about 5 MB); cdn: loaded from plotly's CDN (a page of a few hundred KB that needs the network)",
)
@jobs_option
@reduction_option
@session_option
@cluster_option
@node_timeout_option
def report(
    paths: tuple[str, ...],
    output: str,
    plotly: str,
    jobs: int | None,
    all_events: bool,
    session: str | None,
    cluster: str | None,
    node_timeout: float | None,
) -> None:
    """Write one self-contained HTML report (it opens offline unless --plotly cdn): the
    verdict and its fixes, memory over time with the failures on it, Ray's top memory
    users at each kill, and every event with its raw log block.

    Example: oomlens report /tmp/ray/session_latest/logs -o oom-report.html
    (or a live cluster's nodes: oomlens report --cluster auto driver.log)

    Exit status as for parse: 0 when any input could be read, 1 when none could (the
    page then says so), the cluster could not be reached or the report could not be
    written, 2 for a usage error.
    """
    diagnosis = _diagnose(paths, jobs, all_events, session, cluster, node_timeout)
    from .outputs.html import render, write

    try:
        if output == "-":
            sys.stdout.buffer.write(render(diagnosis, plotly).encode("utf-8"))
            sys.stdout.flush()
        else:
            try:
                write(diagnosis, output, plotly)
            except OSError as err:
                click.echo(f"oomlens: cannot write {output}: {err.strerror or err}", err=True)
                raise SystemExit(1) from None
            # a regular file is named on stdout; a device or a pipe (-o /dev/stdout) holds the page itself
            click.echo(f"wrote {output}", err=not os.path.isfile(output))
    except BrokenPipeError:  # `oomlens report ... -o - | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as err:  # stdout on a full disk
        _unwritable(err)
    if not diagnosis.readable:
        if len(diagnosis.problems) != 1:
            click.echo("oomlens: nothing could be read from " + _named(paths, cluster), err=True)
        _leave(1)
    _leave(0)


def _named(paths: tuple[str, ...], cluster: str | None) -> str:
    """What was asked to be read, for the line that says none of it could be."""
    return ", ".join([*([f"the Ray cluster at {cluster}"] if cluster is not None else []), *paths])


def _unwritable(err: OSError) -> NoReturn:
    """Stdout that cannot be written (a full disk) ends the command with one line; what it
    still buffers is dropped, not tried again (and failed with a traceback) on the way out."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    click.echo(f"oomlens: cannot write the output: {err.strerror or err}", err=True)
    _leave(1)


def _write(diagnosis: Diagnosis, fmt: str, filters: Filters, color: str) -> None:
    if fmt == "json":
        diagnosis.write_json(sys.stdout.buffer)
    elif fmt == "jsonl":
        import orjson

        from .outputs.json import escaped

        for event in diagnosis.events:
            sys.stdout.buffer.write(escaped(orjson.dumps(event.to_dict())) + b"\n")
    elif fmt == "markdown":
        from .outputs.markdown import render

        click.echo(render(diagnosis, filters))
    else:
        from .outputs import terminal
        from .outputs.table import render as table

        colour = terminal.colour(color, sys.stdout)
        click.echo(table(diagnosis, terminal.width(sys.stdout), filters, colour), color=colour)
    sys.stdout.flush()


@main.command()
@click.argument("path", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "jsonl", "text"]),
    default="auto",
    show_default=True,
    help="jsonl: one JSON line per incident (for scripts); text: a few lines per incident for people; auto: text on a terminal, jsonl otherwise.",
)
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True, help="seconds between polls")
@click.option("--once", is_flag=True, help="process what is there now, then exit")
@click.option(
    "--cluster",
    metavar="ADDRESS",
    default=None,
    help="watch every node of this live Ray cluster (as parse --cluster reads it; PATH, if given, is read here too): each poll reads "
    "every node's logs again, whole, so a poll takes as long as parse --cluster and --interval is the pause between polls",
)
@jobs_option
@session_option
@node_timeout_option
def watch(
    path: str | None, fmt: str, interval: float, once: bool, cluster: str | None, jobs: int | None, session: str | None, node_timeout: float | None
) -> None:
    """Follow a live Ray session folder (or one log file) and tell each incident as soon
    as its root failure is seen, and again (an update) when its cascade grows. New files,
    appended lines, rotation and truncation are followed.

    Example: oomlens watch /tmp/ray/session_latest --format jsonl | while read -r line; do ...; done

    Each JSON line: {"oomlens": 1, "update": false, "incident": {...}, "events": [...]},
    the incident as in the JSON contract, its root and cascade events with it.

    --jobs and --session are for --cluster (a watched folder is followed, not read whole).
    Exit status as for parse: 1 when PATH does not exist, 2 for a usage error.
    """
    import time

    from .outputs.terminal import escape as one_line

    write = _watch_writer(fmt)
    if cluster is not None:
        _watch_cluster(cluster, path, interval, once, jobs, session, node_timeout, write)
        return
    if path is None:
        raise click.UsageError("give PATH to watch, or --cluster ADDRESS")
    if not os.path.exists(path):  # as parse tells it: one line, exit 1
        click.echo(f"oomlens: {one_line(path)}: no such file or folder: nothing read", err=True)
        raise SystemExit(1)
    from .watch import Watcher

    watcher = Watcher(path)
    try:
        while True:
            for line in watcher.poll(final=once):
                write(line)
            for problem in watcher.problems:
                click.echo(f"oomlens: {one_line(problem)}", err=True)
            watcher.problems.clear()
            if once:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader went away: nobody to tell
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _watch_writer(fmt: str) -> Callable[[dict], None]:
    """How watch prints a line: a JSON line, or (text, and auto on a terminal) a few lines
    for people (outputs/table.watch_text)."""
    import orjson

    from .outputs.json import escaped

    if fmt == "text" or (fmt == "auto" and sys.stdout.isatty()):
        from .outputs import terminal
        from .outputs.table import watch_text

        colour = terminal.colour("auto", sys.stdout)

        def text(line: dict) -> None:
            click.echo(watch_text(line, terminal.width(sys.stdout), colour), color=colour)
            sys.stdout.flush()

        return text

    def jsonl(line: dict) -> None:
        sys.stdout.buffer.write(escaped(orjson.dumps(line)) + b"\n")
        sys.stdout.flush()

    return jsonl


def _watch_cluster(
    address: str,
    path: str | None,
    interval: float,
    once: bool,
    jobs: int | None,
    session: str | None,
    node_timeout: float | None,
    write: Callable[[dict], None],
) -> None:
    """watch --cluster: one connection for every round (cluster.Rounds), the pause between
    rounds `interval`; the cluster's problems as for parse."""
    import time

    from .cluster import Cluster, ClusterError, NoRay, Rounds
    from .outputs.terminal import escape as one_line

    rounds = Rounds(address, (path,) if path else (), jobs, session, node_timeout)
    try:
        with Cluster(address):
            while True:
                lines, problems = rounds.poll()
                for line in lines:
                    write(line)
                for problem in problems:
                    click.echo(f"oomlens: {one_line(problem)}", err=True)
                if once:
                    return
                time.sleep(interval)
    except ClusterError as err:
        click.echo(f"oomlens: {one_line(str(err))}", err=True)
        raise SystemExit(2 if isinstance(err, NoRay) else 1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader went away: nobody to tell
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
