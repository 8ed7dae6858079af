"""A run that continues another, and the one rule by which a continued run is counted once.

A run that was interrupted, stopped by its budget, or lost with its ptreg (killed, the machine
gone) can be continued by ``ptreg run ID --resume``: a new run, which carries the rounds the
earlier one measured whole and measures the rest. It records the run it continues
(``continues``), so every reader that pools or counts runs leaves the continued one out where
its continuation is there (``counted_once``): its samples are in the continuation, and counting
both would count them twice. No pydantic here: ``show`` applies the rule to records it reads
without the models.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar


class Continuing(Protocol):
    """A run as the counting rule reads it: a run link or a run's results alike."""

    @property
    def run_id(self) -> str | None: ...

    @property
    def continues(self) -> str | None: ...


C = TypeVar("C", bound=Continuing)


def continued(runs: Iterable[Continuing]) -> set[str]:
    """The ids of the runs of one attempt that another run among ``runs`` continues."""
    runs = list(runs)
    present = {r.run_id for r in runs}
    return {r.continues for r in runs if r.continues is not None and r.continues in present}


def counted_once(runs: Sequence[C]) -> list[C]:
    """The runs of one attempt to count or pool: each continued run is left out where its
    continuation is present, since the continuation carries its samples."""
    gone = continued(runs)
    return [r for r in runs if r.run_id not in gone]


def continued_twice(runs: Iterable[Continuing]) -> dict[str, list[str]]:
    """Each run of one attempt that two or more runs continue (two clones resumed it, then
    were merged), with the ids of those runs: its samples would be counted in both."""
    by: dict[str, list[str]] = {}
    for r in runs:
        if r.continues is not None and r.run_id is not None:
            by.setdefault(r.continues, []).append(r.run_id)
    return {k: sorted(v) for k, v in by.items() if len(v) > 1}
