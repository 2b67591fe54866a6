"""Options: how a run reads its inputs, as one value from `analyze` down to every process
that reads them (the worker processes of pipeline.read_all, a cluster's nodes)."""

from __future__ import annotations

from dataclasses import dataclass

from .grammars import Family, families
from .reduce import BUCKETS, Reduction


@dataclass(frozen=True)
class Options:
    """The read options that travel together. A worker process and a cluster's node get
    this value pickled as it is: plain values, and each family added as its grammar file and
    Transformer (grammars.Family). What a run holds only in the process that runs it stays
    beside it, not in here: the progress callback (`tick`, progress.py), which is told in
    that process alone and need not pickle (a bar drawing on a terminal, a closure); the
    kinds, which only the process that concludes reads; the cluster's address.

    jobs          processes reading files; None: one per core (on a cluster's node: one)
    budget        the buckets memory readings, and failures, are each kept within
                  (reduce.py); BUCKETS by default, None keeps every one
    session       the one Ray session read: "latest" or a session folder's name
                  (sources.discover); None (the default) reads every session
    added         the families read beyond the shipped ones (Registry.added; none by
                  default): a worker reads the shipped ones itself, so only these travel,
                  never the whole registry
    node_timeout  the seconds a cluster's node has to answer; None (the default):
                  cluster.NODE_TIMEOUT_S"""

    jobs: int | None = None
    budget: int | None = BUCKETS
    session: str | None = None
    added: tuple[Family, ...] = ()
    node_timeout: float | None = None

    @property
    def families(self) -> tuple[Family, ...] | None:
        """The families read, as the scan takes them: None for the shipped ones alone."""
        return (*families(), *self.added) if self.added else None

    def reduction(self) -> Reduction | None:
        """A new reduction to the budget (of one input's events, or of the whole run's);
        None when every event is kept."""
        return Reduction(self.budget) if self.budget is not None else None
