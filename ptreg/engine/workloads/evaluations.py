"""What an evaluation tool's results become in ptreg, whichever tool wrote them.

An evaluation (Inspect AI, lm-evaluation-harness) scores samples of tasks under scorers or
metrics, once per epoch or repeat. Each such score is a ``SampleScore``; an arm's scores of one
repeat become one ``MetricSample`` whose items are its samples, so that arms are compared item
by item as any arms workload's are (``arms.py``):

- the item id is ``<task>/<sample id>``: the same sample of the same task in every arm;
- a task's metric is ``<task>__<metric>``, each part lowercased with every run of other
  characters than letters and digits made one ``_`` (metric names allow only ``[a-z0-9_]``, so
  the two underscores, which no part can hold, separate task from metric);
- ``breadth__<metric>``, given when a repeat scored two tasks or more on a metric, is the macro
  mean over tasks: each task's mean score, averaged with every task counting once whatever its
  size. It has no items (a sample belongs to one task), so it is compared over rounds and seeds;
- a repeat's value of a task's metric is the mean over the task's samples.

A score that is not a finite number, the same (task, sample, metric, seed) twice, or a sample one
arm scored and the other did not is refused in one line naming it: nothing is filled in.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...errors import UnusableInput
from ...records.metrics import METRIC_PATTERN
from ...records.run_results import MetricSample
from ...text import shorten

SEPARATOR = "__"
BREADTH = "breadth"
MAX_ITEM_ID = 200  # as a command's items file allows (command_output.py)
_OTHER = re.compile(r"[^a-z0-9]+")


class EvaluationError(UnusableInput):
    """An evaluation's scores that cannot be believed or paired: one line naming the score."""


@dataclass(frozen=True)
class SampleScore:
    """One score of one sample of one task under one scorer or metric, in one epoch or repeat
    (``seed``: the round's seed it was taken under)."""

    task: str
    sample_id: str
    metric: str
    value: float
    seed: int


def _part(name: str) -> str:
    return _OTHER.sub("_", name.lower()).strip("_")


def _joined(task: str, metric: str, first: str) -> str:
    name = f"{first}{SEPARATOR}{_part(metric)}"
    if not first or not _part(metric) or not re.fullmatch(METRIC_PATTERN, name):
        raise EvaluationError(
            f"task {shorten(task, 60)}, metric {shorten(metric, 60)}: {shorten(name, 80)} is not a metric name "
            "(a letter first, then at most 63 lowercase letters, digits or _)"
        )
    return name


def metric_name(task: str, metric: str) -> str:
    """The ptreg metric of one task's metric; EvaluationError when the names leave none."""
    if _part(task) == BREADTH:
        raise EvaluationError(f"task {shorten(task, 60)}: a task named breadth would read as breadth across tasks")
    return _joined(task, metric, _part(task))


def breadth_name(metric: str) -> str:
    """The ptreg metric of a metric's macro mean over tasks."""
    return _joined("(all)", metric, BREADTH)


def item_id(task: str, sample_id: str) -> str:
    item = f"{task}/{sample_id}"
    if not 0 < len(item) <= MAX_ITEM_ID:
        raise EvaluationError(f"sample {shorten(item, 80)}: an item id is 1 to {MAX_ITEM_ID} characters")
    return item


def _checked(scores: Sequence[SampleScore]) -> dict[tuple[str, str, str, int], float]:
    found: dict[tuple[str, str, str, int], float] = {}
    for score in scores:
        key = (score.task, score.sample_id, score.metric, score.seed)
        where = f"task {shorten(score.task, 60)}, sample {shorten(score.sample_id, 60)}, {shorten(score.metric, 40)}"
        if isinstance(score.value, bool) or not isinstance(score.value, int | float) or not math.isfinite(score.value):
            raise EvaluationError(
                f"{where}, seed {score.seed}: score {shorten(repr(score.value), 40)} is not a finite number"
            )
        if key in found:
            raise EvaluationError(f"{where}, seed {score.seed}: scored twice")
        found[key] = float(score.value)
    return found


def repeat_sample(
    repeat: int,
    seed: int,
    scores: Sequence[SampleScore],
    usage: Mapping[str, float] | None = None,
    usage_items: Mapping[str, Mapping[str, float]] | None = None,
) -> MetricSample:
    """One repeat of one arm: every score of ``seed`` as items of its task's metric, each task
    metric's mean, breadth across tasks, and usage (tokens, time) beside them: ``usage`` as the
    repeat's values, ``usage_items`` per item (by usage metric, then item id), valued at their
    mean over the items that have one."""
    mine = [s for s in scores if s.seed == seed]
    if not mine:
        raise EvaluationError(f"seed {seed}: no sample was scored")
    checked = _checked(mine)
    items: dict[str, dict[str, float]] = {}
    tasks_of: dict[str, dict[str, float]] = {}  # metric -> task -> the task's mean
    for (task, sample, metric, _), value in checked.items():
        items.setdefault(metric_name(task, metric), {})[item_id(task, sample)] = value
    for (task, _, metric, _), _value in checked.items():
        name = metric_name(task, metric)
        tasks_of.setdefault(metric, {})[task] = statistics.fmean(items[name].values())
    values = {name: statistics.fmean(by_item.values()) for name, by_item in items.items()}
    for metric, by_task in tasks_of.items():
        if len(by_task) >= 2:
            values[breadth_name(metric)] = statistics.fmean(by_task.values())
    for name, value in (usage or {}).items():
        if name in values:
            raise EvaluationError(f"usage {name!r} has the name of a score")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise EvaluationError(f"usage {name}: {shorten(repr(value), 40)} is not a finite number")
        values[name] = float(value)
    for name, by_item in (usage_items or {}).items():
        if name in values:
            raise EvaluationError(f"usage {name!r} is given twice, or has the name of a score")
        for item, value in by_item.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise EvaluationError(
                    f"usage {name} of {shorten(item, 80)}: {shorten(repr(value), 40)} is not a finite number"
                )
        if by_item:
            items[name] = {item: float(value) for item, value in by_item.items()}
            values[name] = statistics.fmean(items[name].values())
    return MetricSample(repeat=repeat, seed=seed, values=values, items=items)


def arm_samples(
    scores: Sequence[SampleScore], seeds: Sequence[int], usage: Mapping[int, Mapping[str, float]] | None = None
) -> list[MetricSample]:
    """An arm's repeats, one per seed in ``seeds`` (repeat r under seeds[r]), with each seed's usage."""
    return [repeat_sample(r, seed, scores, (usage or {}).get(seed)) for r, seed in enumerate(seeds)]


def unpaired(samples: Mapping[str, Sequence[MetricSample]]) -> str | None:
    """Why arms' items cannot be paired (one line naming the arm, the metric and the item one
    scored and another did not, seed by seed), or None when every seed's items match."""
    seen: dict[tuple[int, str], tuple[str, set[str]]] = {}
    for arm, taken in samples.items():
        for sample in taken:
            for metric, by_item in (sample.items or {}).items():
                key = (sample.seed, metric)
                if key not in seen:
                    seen[key] = (arm, set(by_item))
                    continue
                first, items = seen[key]
                extra = sorted(set(by_item) - items)
                lacking = sorted(items - set(by_item))
                if extra or lacking:
                    has, hasnt, item = (arm, first, extra[0]) if extra else (first, arm, lacking[0])
                    return (
                        f"seed {sample.seed}, {metric}: arm {has!r} scored {shorten(item, 80)} and arm {hasnt!r} "
                        "did not"
                    )
    return None
