"""The command line: thin click commands over the library (oomlens.analyze)."""

from __future__ import annotations

import sys

import click

from . import pipeline


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="oomlens")
def main() -> None:
    """Find out what ran out of memory in an RL training run on Ray, from its logs alone."""


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table", show_default=True,
    help="table for people; json is the version-1 contract; jsonl is one event per line.",
)
def parse(paths: tuple[str, ...], fmt: str) -> None:
    """Parse Ray session folders, log files, archives or stdin (-) into events.

    Example: oomlens parse /tmp/ray/session_latest/logs driver.log --format json
    """
    diagnosis = pipeline.analyze(*paths)
    for problem in diagnosis.problems:
        click.echo(f"oomlens: {problem}", err=True)
    if fmt == "json":
        import orjson

        sys.stdout.buffer.write(orjson.dumps(diagnosis.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    elif fmt == "jsonl":
        import orjson

        for event in diagnosis.events:
            sys.stdout.buffer.write(orjson.dumps(event.to_dict()) + b"\n")
    else:
        from .outputs.table import render

        click.echo(render(diagnosis))
    if not diagnosis.readable:
        raise SystemExit(1)
