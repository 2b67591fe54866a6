"""oomlens: log and crash forensics for RL training of LLMs on Ray.

The library behind the command line, for incident bots and notebooks:

    import oomlens
    diagnosis = oomlens.analyze("/tmp/ray/session_latest/logs", "driver.log")
    diagnosis.verdict, diagnosis.to_dict(), diagnosis.to_frame(), diagnosis.to_markdown()

Importing oomlens loads nothing heavy: the parser is loaded by the first analysis,
pandas by `to_frame()`, plotly by `to_html()`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str

    from .correlate import Incident
    from .diagnosis import Diagnosis
    from .events import Event
    from .progress import Tick
    from .registry import Registry

__all__ = ["CONTRACT_VERSION", "Diagnosis", "Event", "Incident", "Registry", "analyze", "parse_text", "schema"]

# public names imported on first use, so that `import oomlens` stays light
_LAZY = {
    "CONTRACT_VERSION": "diagnosis",  # the "oomlens" key of every JSON object oomlens prints
    "Diagnosis": "diagnosis",
    "Event": "events",
    "Incident": "correlate",
    "Registry": "registry",  # families and kinds: Registry.shipped().add(grammar, Transformer, kinds)
}


def analyze(
    *paths: str,
    jobs: int | None = None,
    all_events: bool = False,
    all_readings: bool = False,
    registry: Registry | None = None,
    session: str | None = None,
    cluster: str | None = None,
    node_timeout: float | None = None,
    progress: bool | Tick = False,
) -> Diagnosis:
    """Read logs (Ray session folders, files, archives, '-' for stdin) and diagnose them.

    `jobs` is the number of processes reading files (default: one per core); the
    diagnosis is the same whatever it is. A long run's memory readings are reduced to a
    fixed budget (the first, last, lowest and highest of each stretch of each series), and
    so is a flood of failures (the first and last of each stretch of each process and
    kind); `all_events` keeps every one, and memory then grows with the run
    (`all_readings`, its name from before failures were reduced, does the same). `registry` reads
    families added to the shipped ones (CONTRIBUTING.md). Each Ray session (a /tmp/ray
    holds many) is correlated on its own; `session` reads one alone: "latest" (the
    newest) or a session folder's name.

    `cluster` also reads every node of a live Ray cluster ("auto", "host:port", as
    ray.init takes it) where its logs lie, one Ray task per node (`jobs` processes each,
    default one; `node_timeout` seconds to answer, default 600); `paths` are read here.
    It needs Ray (`pip install 'oomlens[ray]'`): without it, oomlens.cluster.NoRay (an
    ImportError); a cluster that cannot be reached raises oomlens.cluster.ClusterError.

    `progress`: True draws rich's progress bar on stderr while the logs are read, when
    stderr is a terminal (bytes of the total, files, rate, time left), and clears it after;
    a callable is told each input found (`tick(input, 0)`), the bytes of each read
    (`tick(input, n)`) and each input read whole (`tick(input)`)."""
    from .pipeline import analyze as run
    from .progress import Progress
    from .reduce import BUCKETS

    bar = Progress() if progress is True else None
    try:
        return run(
            *paths,
            jobs=jobs,
            progress=bar or (progress if callable(progress) else None),
            budget=None if all_events or all_readings else BUCKETS,
            registry=registry,
            session=session,
            cluster=cluster,
            node_timeout=node_timeout,
        )
    finally:
        if bar is not None:
            bar.done()


def parse_text(text: str, registry: Registry | None = None) -> list[Event]:
    """Events in a snippet of log text pasted into chat or an issue, numbered e1, e2, ..."""
    from .pipeline import parse_text as run

    return run(text, registry=registry)


def schema() -> dict[str, Any]:
    """The JSON Schema of the contract (`Diagnosis.to_dict()`, `parse --format json`, and
    the `$defs` of one event and one `watch` line), shipped inside the package."""
    import json
    from importlib.resources import files

    from .kinds import devices, shipped

    contract = json.loads(files(__name__).joinpath("schema", "oomlens-v1.schema.json").read_text(encoding="utf-8"))
    contract["$defs"]["kind"]["examples"] = list(shipped())  # the open vocabulary's kinds of this release
    contract["$defs"]["device"]["examples"] = [name for name in devices() if name != "unknown"]
    return contract


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed package's, as `oomlens --version` says it; read on first use
        from importlib.metadata import version

        return version(__name__)
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'oomlens' has no attribute {name!r}")
