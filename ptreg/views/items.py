"""Items won, lost and tied, one by one: which items of a run of arms an arm did better or worse
on than another, for `ptreg items`, the run's page of the site and the MCP tool.

`show` counts them; this lists them. Both read the same pairing (``engine/workloads/arms.py``'s
``item_pairs``: from results version 8, the items every seed of both arms scored, each item's
difference taken seed by seed and averaged over the seeds) and the same rule
(``engine/stats.py``'s ``pair_verdict``), so the lists and the counts cannot disagree. An arm
is compared with the run's baseline unless another is named, as the run's tables compare it.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.stats import PairVerdict, item_differences, pair_verdict
from ..engine.workloads import workload_named
from ..engine.workloads.arms import DIGITS, declared, item_pairs, value_text
from ..errors import UnusableInput
from ..records.arguments import named
from ..records.evaluator import ArmsSpec
from ..records.metrics import MetricDeclaration
from ..records.refs import check_id, check_run_id
from ..records.run_results import Cell, RunResults
from ..text import counted
from .comparison import find_run

VERDICTS: tuple[PairVerdict, ...] = ("won", "lost", "tied")
NO_ITEMS = "its arms wrote no per-item results (the command's PTREG_ITEMS lines, docs/workloads.md)"


@dataclass(frozen=True)
class ItemRow:
    """One item: each arm's value (its mean over the seeds), their difference and the verdict."""

    item: str
    over_value: float
    arm_value: float
    difference: float  # arm - over, seed by seed, averaged over the seeds
    verdict: PairVerdict

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def cells(self) -> list[str]:
        """The row as the terminal and the site show it: item, the over arm's value, the arm's,
        the difference, the verdict."""
        difference = "0" if self.difference == 0 else f"{self.difference:+.{DIGITS}g}"
        return [self.item, value_text(self.over_value), value_text(self.arm_value), difference, self.verdict]


@dataclass(frozen=True)
class MetricItems:
    """One arm over another on one metric, item by item, the worst losses first."""

    metric: str
    unit: str
    better: str
    arm: str
    over: str
    seeds: int
    left_out: int | None  # items some seed of either arm lacks (from results version 8)
    rows: list[ItemRow]
    recorded: tuple[int, int, int] | None  # won, lost, tied as the run's results record them

    @property
    def counts(self) -> tuple[int, int, int]:
        verdicts = [r.verdict for r in self.rows]
        return verdicts.count("won"), verdicts.count("lost"), verdicts.count("tied")

    @property
    def agrees(self) -> bool:
        """Whether the counts the run's results record are those its items give (a results file
        edited by hand may say otherwise; the items are what is listed)."""
        return self.recorded is None or self.recorded == self.counts

    def summary(self) -> str:
        """'85 won, 6 lost, 209 tied of 300 items (score, candidate over baseline, 3 seeds)'."""
        won, lost, tied = self.counts
        seeds = f", {counted(self.seeds, 'seed')}" if self.seeds else ""
        left = f"; {counted(self.left_out, 'item')} left out, missing from a seed" if self.left_out else ""
        return (
            f"{won} won, {lost} lost, {tied} tied of {counted(len(self.rows), 'item')} "
            f"({self.metric}, {self.arm} over {self.over}{seeds}){left}"
        )

    def disagreement(self) -> str | None:
        """What to say when the recorded counts are not those of the items; None when they are."""
        if self.agrees:
            return None
        assert self.recorded is not None
        said = "/".join(map(str, self.recorded))
        found = "/".join(map(str, self.counts))
        return (
            f"{self.metric}: the run's results record {said} won/lost/tied, but its items give {found}: "
            "the results file does not agree with its own samples"
        )

    @property
    def headers(self) -> list[str]:
        return ["item", self.over, self.arm, "difference", "verdict"]

    def shown(self, verdicts: Collection[str] = (), limit: int | None = None) -> list[ItemRow]:
        """The rows of these verdicts (all when none are given), at most ``limit`` of them."""
        rows = [r for r in self.rows if not verdicts or r.verdict in verdicts]
        return rows if limit is None else rows[:limit]

    def to_json(self, verdicts: Collection[str] = (), limit: int | None = None) -> dict[str, Any]:
        won, lost, tied = self.counts
        chosen = [r for r in self.rows if not verdicts or r.verdict in verdicts]
        shown = chosen if limit is None else chosen[:limit]
        return {
            "metric": self.metric,
            "unit": self.unit,
            "better": self.better,
            "arm": self.arm,
            "over": self.over,
            "seeds": self.seeds,
            "items_left_out": self.left_out,
            "won": won,
            "lost": lost,
            "tied": tied,
            "recorded": None if self.recorded is None else dict(zip(VERDICTS, self.recorded, strict=True)),
            "summary": self.summary(),
            "items": [r.to_json() for r in shown],
            "not_shown": len(chosen) - len(shown),
        }


@dataclass(frozen=True)
class RunItems:
    """A run's items, one ``MetricItems`` for each (arm, metric) asked for."""

    attempt: str
    run_id: str
    status: str
    metrics: list[MetricItems]

    @property
    def label(self) -> str:
        return f"{self.attempt}/{self.run_id}"

    def to_json(self, verdicts: Collection[str] = (), limit: int | None = None) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "run_id": self.run_id,
            "status": self.status,
            "verdicts": list(verdicts) or list(VERDICTS),
            "metrics": [m.to_json(verdicts, limit) for m in self.metrics],
        }


def run_items(
    root: Path, reference: str, *, metric: str | None = None, arm: str | None = None, over: str | None = None
) -> RunItems:
    """The items of a run, named as `compare` names runs (``ATTEMPT/RUN_ID``, or ``ATTEMPT`` for
    its latest complete run): ``arm`` over ``over`` on ``metric``; by default every arm but
    the baseline over the baseline, on every metric with per-item results. Unusable input
    (naming what) for an unknown run, arm or metric, and for a run without per-item results."""
    found = find_run(root, reference)
    listed = items_of(found.results, metric=metric, arm=arm, over=over)
    return RunItems(found.folder.parent.name, found.folder.name, found.results.status, listed)


def listed_items(results: RunResults) -> list[MetricItems]:
    """Every arm over the baseline on every metric with per-item results; none for a run of
    backends or a run whose arms wrote no items (the site lists what there is)."""
    if not isinstance(results.spec, ArmsSpec):
        return []
    try:
        return items_of(results)
    except UnusableInput:  # no per-item results: nothing to list
        return []


def run_reference(attempt_id: str, run_id: str | None) -> str:
    """The run an attempt's id and a run id name, as ``run_items`` takes it (``ATTEMPT`` for the
    latest complete run); each refused in one line unless it is of ptreg's own forms."""
    check_id(attempt_id)
    return attempt_id if run_id is None else f"{attempt_id}/{check_run_id(run_id)}"


def items_of(
    results: RunResults, *, metric: str | None = None, arm: str | None = None, over: str | None = None
) -> list[MetricItems]:
    """``run_items`` for results already read (the site reads its runs itself)."""
    run = f"run {results.attempt}/{results.run_id}" if results.run_id else "the run"
    spec = results.spec
    if not isinstance(spec, ArmsSpec):
        raise UnusableInput(f"{run} measured backends ({spec.workload}), not arms: it has no items")
    cells = {c.backend: c for c in results.cells}
    for given in (arm, over):
        if given is not None and given not in cells:
            raise UnusableInput(f"{run} has no arm {given!r} (its arms: {', '.join(cells)})")
    over = over or spec.baseline
    if arm is not None and arm == over:
        raise UnusableInput(f"{named('arm')} and {named('over')} both name {arm}: an arm is compared with another")
    arms = [arm] if arm is not None else [a for a in cells if a != over]
    metrics = declared(spec, workload_named(spec.workload), results.cells)
    if metric is not None:
        if metric not in metrics:
            raise UnusableInput(f"{run} records no metric {metric!r} (its metrics: {', '.join(sorted(metrics))})")
        if metrics[metric].compare == "ratio":
            raise UnusableInput(f"{metric} is compared as a ratio, round by round: it has no items won or lost")
        metrics = {metric: metrics[metric]}
    found = [
        listed
        for name, declaration in metrics.items()
        if declaration.compare == "difference"
        for a in arms
        if (listed := _listed(cells[a], cells[over], name, declaration, results.results_version)) is not None
    ]
    if not found:
        whose = f"{', '.join(arms)} over {over}"
        on = f" for {metric}" if metric is not None else ""
        raise UnusableInput(f"{run} has no per-item results{on} ({whose}): {NO_ITEMS}, or no item in every seed")
    return found


def _listed(
    mine: Cell, theirs: Cell, metric: str, declaration: MetricDeclaration, results_version: int
) -> MetricItems | None:
    pairs = item_pairs(mine.metric_samples or [], theirs.metric_samples or [], metric, results_version)
    if pairs is None or not pairs.mine:
        return None
    higher = declaration.better == "higher"
    rows = [
        ItemRow(
            item,
            statistics.fmean(pairs.theirs[item]),
            statistics.fmean(pairs.mine[item]),
            difference,
            pair_verdict(difference, higher),
        )
        for item, difference in item_differences(pairs.mine, pairs.theirs).items()
    ]
    # the worst losses first: by how much the arm gained on the item, in the metric's direction
    rows.sort(key=lambda r: (r.difference if higher else -r.difference, r.item))
    stored = (mine.versus or {}).get(theirs.backend, {}).get(metric)
    recorded = None
    if stored is not None and stored.paired_by == "item":
        won, lost, tied = stored.won, stored.lost, stored.tied
        recorded = (won, lost, tied) if won is not None and lost is not None and tied is not None else None
    return MetricItems(
        metric,
        declaration.unit,
        declaration.better,
        mine.backend,
        theirs.backend,
        pairs.seeds,
        pairs.left_out,
        rows,
        recorded,
    )
