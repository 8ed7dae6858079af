"""Workloads that compare arms on declared metrics: the base of ``command`` and of any plugin
that measures something other than kernels.

An arm is one alternative (a command's parameters, a plugin's setting); each round runs every
arm once, in an order drawn afresh, all with the round's seed, so a round is a pair (or a
tuple) of runs that differ only by arm. A metric says which way is better and whether two arms
are compared as a ratio (times, throughput, memory) or as a difference in its own unit (scores,
losses, rates). When both arms wrote per-item results for a metric, the difference is paired
by item and by seed, with the items won, lost and tied: an evaluation's items are its sample,
as Miller (2024) argues, and so are its seeds, each of which trains a model of its own, so the
interval carries the variance of both (``stats.crossed_mean``); otherwise it is paired by
round. One seed's interval is over its items only and gives no verdict. Runs before results
version 8 (a pool of them, decided again) keep the way they were recorded: items averaged over
the seeds, Student's t over the items.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ...records.analysis_plan import gain, margin_text, standing
from ...records.evaluator import ACCELERATOR_METRICS, ALL_CONFIG, AnySpec, ArmsSpec, MetricDeclaration
from ...records.intervals import ONE_SEED, VARIANCE_FROM_VERSION, variance_text
from ...records.run_results import (
    RESULTS_VERSION,
    STAGES_FROM_VERSION,
    Cell,
    MetricComparison,
    MetricSample,
    MetricSummary,
    Roles,
    RunResults,
    SignedInterval,
)
from ...store.runs import RUN_FILE_MAX_BYTES
from ...text import Table
from ..stats import (
    Paired,
    crossed_difference,
    crossed_mean,
    paired_difference,
    paired_ratio,
    summarize_metric,
    summarize_positive,
)
from .base import AnySample, Workload, note

PROBLEM_MAX = 300

# A run's results.json holds a summary of each (arm, metric) and a comparison of each arm with
# every other on each metric, arms x (arms - 1) x metrics of them, and no run file may pass the
# bound a bundle holds it to (store/runs.py). Each takes at most these bytes as results.json
# writes it (its indentation, the longest names, numbers of 24 characters; held to by
# tests/engine/test_attacks_43.py), and the rest of the file (the spec, the rounds, the
# provenance) fits in the reserve. A spec that could not be written is refused before it runs.
COMPARISON_BYTES = 1000
SUMMARY_BYTES = 700
RESERVED_BYTES = 2 * 1024 * 1024

# How a difference or a ratio is shown: enough digits for a score of a few hundred items.
DIGITS = 4


def arms_spec(spec: AnySpec) -> ArmsSpec:
    """The spec of an arms workload; the registry lets no other reach one."""
    assert isinstance(spec, ArmsSpec), spec.workload
    return spec


def declared(
    spec: AnySpec, workload: Workload, cells: Iterable[Cell] = (), samples: Iterable[MetricSample] = ()
) -> dict[str, MetricDeclaration]:
    """Every metric of a run: the workload's own, the evaluator's, then what ptreg measures,
    with an accelerator's metrics when one of ``samples`` (or of the samples or summaries of
    ``cells``) has them: a machine without an accelerator measures none, and its runs show none."""
    found = {**workload.metrics, **arms_spec(spec).declared()}
    cells = list(cells)
    summarised = {m for c in cells for m in c.metrics or {}}
    every = [*samples, *(s for c in cells for s in c.metric_samples or [])]
    for metric, declaration in ACCELERATOR_METRICS.items():
        if metric in summarised or any(getattr(s, metric) is not None for s in every):
            found[metric] = declaration
    return found


def too_wide(spec: AnySpec, workload: Workload) -> str | None:
    """Why a run of the spec could not be written, its comparisons being too many for a run
    file; None when they fit."""
    arms, metrics = len(arms_spec(spec).arms), len(declared(spec, workload))
    comparisons = arms * (arms - 1) * metrics
    needed = comparisons * COMPARISON_BYTES + arms * metrics * SUMMARY_BYTES + RESERVED_BYTES
    if needed <= RUN_FILE_MAX_BYTES:
        return None
    return (
        f"{arms} arms, each compared with every other on {metrics} metrics, make {comparisons:,} comparisons: "
        f"more than the results of one run can hold within the {RUN_FILE_MAX_BYTES // (1024 * 1024)} MiB a run "
        "file may have; give fewer arms or metrics, or split the experiment"
    )


def _good(samples: list[MetricSample]) -> list[MetricSample]:
    return [s for s in samples if s.problem is None]


def metric_values(samples: list[MetricSample], metric: str) -> dict[int, float]:
    """A metric's value by round, from the repeats that gave one."""
    found: dict[int, float] = {}
    for s in _good(samples):
        if metric in s.values:
            found[s.repeat] = s.values[metric]
        elif metric == "wall_seconds" and s.wall_seconds is not None:
            found[s.repeat] = s.wall_seconds
        elif metric == "peak_memory_mb" and s.peak_memory_mb is not None:
            found[s.repeat] = s.peak_memory_mb
        elif metric in ACCELERATOR_METRICS and getattr(s, metric) is not None:
            found[s.repeat] = getattr(s, metric)
    return found


def _items(samples: list[MetricSample], metric: str) -> tuple[dict[str, float], int]:
    """Before version 8: each item's value of a metric averaged over the repeats that scored
    it, and how many repeats wrote items for it."""
    sums: dict[str, list[float]] = {}
    seeds = 0
    for s in _good(samples):
        items = (s.items or {}).get(metric)
        if not items:
            continue
        seeds += 1
        for item, value in items.items():
            sums.setdefault(item, []).append(value)
    return {item: sum(v) / len(v) for item, v in sums.items()}, seeds


def items_by_seed(samples: list[MetricSample], metric: str) -> dict[int, dict[str, float]]:
    """Each seed's per-item values of a metric, from the repeats that wrote items for it. A seed
    taken twice (runs pooled, each starting at the spec's seed) gives each item the mean of its
    values: the same seed trains the same model."""
    found: dict[int, list[dict[str, float]]] = {}
    for s in _good(samples):
        items = (s.items or {}).get(metric)
        if items:
            found.setdefault(s.seed, []).append(items)
    return {seed: _averaged(taken) for seed, taken in found.items()}


def _averaged(taken: list[dict[str, float]]) -> dict[str, float]:
    """Each item's mean over the repeats of one seed that scored it."""
    if len(taken) == 1:
        return dict(taken[0])
    values: dict[str, list[float]] = {}
    for items in taken:
        for item, value in items.items():
            values.setdefault(item, []).append(value)
    return {item: sum(v) / len(v) for item, v in values.items()}


def complete_items(by_seed: list[dict[str, float]]) -> tuple[list[str], int]:
    """The items present in every one of these seeds, in order, and how many others some seed
    had: those are left out (a grid of items crossed with seeds has no holes), never filled in."""
    seen = set().union(*by_seed) if by_seed else set()
    kept = sorted(set.intersection(*(set(s) for s in by_seed))) if by_seed else []
    return kept, len(seen) - len(kept)


@dataclass(frozen=True)
class ItemPairs:
    """Two arms' per-item values of a metric as their comparison pairs them: each item's values
    in the same seeds, in the same order, on both sides (before version 8, one value each: the
    item's mean over the repeats that scored it)."""

    mine: dict[str, list[float]]
    theirs: dict[str, list[float]]
    seeds: int
    left_out: int | None  # items some seed lacks, left out (from version 8; before, not counted)


def item_pairs(
    mine: list[MetricSample], theirs: list[MetricSample], metric: str, results_version: int = RESULTS_VERSION
) -> ItemPairs | None:
    """The items both arms wrote for a metric, paired as ``compare_arms`` pairs them: from
    version 8 over the seeds both arms scored items in and the items every one of those seeds
    has on both sides (empty, with the items left out, when no item is complete); before, the
    items both have, each averaged over the repeats. None when neither arm wrote items."""
    if results_version < VARIANCE_FROM_VERSION:
        my_items, my_seeds = _items(mine, metric)
        their_items, their_seeds = _items(theirs, metric)
        shared = sorted(set(my_items) & set(their_items))
        if not my_items and not their_items:
            return None
        return ItemPairs(
            {i: [my_items[i]] for i in shared}, {i: [their_items[i]] for i in shared}, min(my_seeds, their_seeds), None
        )
    by_seed, their_by_seed = items_by_seed(mine, metric), items_by_seed(theirs, metric)
    if not by_seed and not their_by_seed:
        return None
    seeds = sorted(set(by_seed) & set(their_by_seed))
    kept, _ = complete_items([by_seed[s] for s in seeds] + [their_by_seed[s] for s in seeds])
    seen: set[str] = set().union(*by_seed.values(), *their_by_seed.values())
    return ItemPairs(
        {i: [by_seed[s][i] for s in seeds] for i in kept},
        {i: [their_by_seed[s][i] for s in seeds] for i in kept},
        len(seeds),
        len(seen) - len(kept),
    )


def compare_arms(
    mine: list[MetricSample],
    theirs: list[MetricSample],
    metric: str,
    declaration: MetricDeclaration,
    results_version: int = RESULTS_VERSION,
) -> MetricComparison | None:
    """This arm over the other on one metric, as the metric is declared to be compared; as runs
    of ``results_version`` compare them (a pool of older runs is decided as they were)."""
    higher = declaration.better == "higher"
    said = results_version >= VARIANCE_FROM_VERSION
    if declaration.compare == "ratio":
        found = paired_ratio(metric_values(mine, metric), metric_values(theirs, metric))
        if found is None:
            return None
        ci = SignedInterval(**found.ci.model_dump()) if found.ci is not None else None
        return MetricComparison(
            kind="ratio",
            estimate=found.median,
            ci=ci,
            n=found.n,
            paired_by="round",
            seeds=found.n,
            variance="rounds" if said else None,
        )
    pairs = item_pairs(mine, theirs, metric, results_version)
    paired: Paired | None = None
    paired_by, seeds, left_out = "item", pairs.seeds if pairs else 0, pairs.left_out if pairs else None
    if pairs is not None and pairs.mine:
        if said:
            paired = crossed_difference(pairs.mine, pairs.theirs, higher)
        else:
            paired = paired_difference(
                {i: v[0] for i, v in pairs.mine.items()}, {i: v[0] for i, v in pairs.theirs.items()}, higher
            )
    if paired is None:
        by_round = {str(r): v for r, v in by_seed_or_round(mine, metric, results_version).items()}
        their_rounds = by_seed_or_round(theirs, metric, results_version)
        paired = paired_difference(by_round, {str(r): v for r, v in their_rounds.items()}, higher)
        paired_by, seeds = "round", paired.n if paired else 1
        if paired is not None and said:
            paired = replace(paired, variance="seeds")
    if paired is None:
        return None
    return MetricComparison(
        kind="difference",
        estimate=paired.mean,
        ci=paired.ci,
        n=paired.n,
        paired_by=paired_by,
        seeds=max(seeds, 1),
        won=paired.won,
        lost=paired.lost,
        tied=paired.tied,
        variance=paired.variance,
        df=paired.df,
        items_left_out=left_out,
    )


def summarize_arm_metric(
    samples: list[MetricSample], metric: str, declaration: MetricDeclaration | None, results_version: int
) -> MetricSummary | None:
    """One arm's metric over its repeats; unknown when no repeat gave a value. From version 8,
    a metric with per-item results is summarised over its items and seeds (the items every seed
    scored; the rest counted as left out), and a positive one (compared as a ratio) on the log
    scale; before, over the repeats' values."""
    values = list(metric_values(samples, metric).values())
    if results_version < VARIANCE_FROM_VERSION:
        return summarize_metric(values) if values else None
    if declaration is not None and declaration.compare == "ratio":  # compared over rounds, as a ratio
        return summarize_positive(values) if values else None
    by_seed = items_by_seed(samples, metric)
    if by_seed:
        seeds = sorted(by_seed)
        kept, left_out = complete_items([by_seed[s] for s in seeds])
        if kept:
            found = crossed_mean([[by_seed[s][i] for s in seeds] for i in kept])
            per_seed = [statistics.fmean(by_seed[s][i] for i in kept) for s in seeds]
            return summarize_metric(per_seed, found.variance).model_copy(
                update={
                    "ci": found.ci,
                    "df": found.df,
                    "items": len(kept),
                    "items_left_out": left_out,
                }
            )
    per_seed = list(by_seed_or_round(samples, metric, results_version).values())
    return summarize_metric(per_seed, "seeds") if per_seed else None


def by_seed_or_round(samples: list[MetricSample], metric: str, results_version: int) -> dict[int, float]:
    """A metric's values by round; from version 9, where rounds share a seed (a spec's seeds
    beside its repeats), by seed instead, each seed's rounds averaged: they measure one model,
    and its seeds, not its repeats, are the sample the interval is over."""
    found = metric_values(samples, metric)
    seed_of = {s.repeat: s.seed for s in _good(samples)}
    if results_version < STAGES_FROM_VERSION or len(set(seed_of.values())) == len(seed_of):
        return found
    taken: dict[int, list[float]] = {}
    for round_number, value in found.items():
        taken.setdefault(seed_of[round_number], []).append(value)
    return {seed: statistics.fmean(values) for seed, values in taken.items()}


def better_word(comparison: MetricComparison, declaration: MetricDeclaration, margin: float | None = None) -> str:
    """Which way the interval says this arm stands: better, worse, or no difference resolved;
    with the smallest effect that matters (an analysis plan's margin, else the metric's
    declared one), better or worse only by more than it, and no practical difference when the
    interval lies within it."""
    if comparison.ci is None:
        return "unresolved (one pair)"
    if comparison.variance == "items only":  # one seed: how far another seed's model lands is unknown
        return f"no verdict: {ONE_SEED}"
    if margin is None:
        margin = declaration.smallest_effect()
    stands = standing(*gain(comparison.ci.low, comparison.ci.high, declaration, margin))
    if stands == "equivalent":
        return "no practical difference"
    if stands == "unresolved":
        return "no difference resolved" if margin is None else "unresolved at the margin"
    return stands


def estimate_text(comparison: MetricComparison | None, declaration: MetricDeclaration) -> str:
    """The estimate with its interval, in the metric's terms."""
    if comparison is None:
        return "unknown"
    if comparison.kind == "ratio":
        shown = f"{comparison.estimate:.3f}x"
        span = f"{comparison.ci.low:.3f}-{comparison.ci.high:.3f}x" if comparison.ci else "no interval"
    else:
        shown = f"{comparison.estimate:+.{DIGITS}g} {declaration.unit}"
        span = (
            f"{comparison.ci.low:+.{DIGITS}g} to {comparison.ci.high:+.{DIGITS}g}" if comparison.ci else "no interval"
        )
    return f"{shown} ({span})"


def comparison_text(comparison: MetricComparison | None, declaration: MetricDeclaration) -> str:
    if comparison is None:
        return "unknown"
    return f"{estimate_text(comparison, declaration)}: {better_word(comparison, declaration)}"


def intervals_over(summary: MetricSummary | None, against: MetricComparison | None) -> str:
    """What an arm's intervals are over, as its row says it: its own interval's and its
    comparison's, once when they agree (empty for a run before version 8, which did not say)."""
    said = []
    if summary is not None and summary.variance is not None:
        said.append(variance_text(summary.variance) + ("; log scale" if summary.scale == "log" else ""))
    if against is not None and against.variance is not None:
        theirs = variance_text(against.variance)
        if not said or theirs != said[0]:
            said.append(f"vs: {theirs}" if said else theirs)
    if summary is not None and summary.items_left_out:
        said.append(f"{summary.items_left_out} item(s) left out")
    if (
        against is not None
        and against.items_left_out
        and against.items_left_out != (summary and summary.items_left_out)
    ):
        said.append(f"{against.items_left_out} item(s) left out of the comparison")
    return "; ".join(said)


def value_text(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.{DIGITS}g}"


class ArmsWorkload(Workload):
    """Summaries, comparisons and tables of any workload whose cells are arms with metrics;
    a subclass gives ``prepare`` (the cell, recording one MetricSample per repeat)."""

    kind = "arms"
    unit = "as each metric declares"

    def summarize(
        self, spec: AnySpec, cell: Cell, samples: list[AnySample], results_version: int = RESULTS_VERSION
    ) -> None:
        """``results_version``: summarise as runs of that version do (a pool of older runs is
        decided as they were recorded)."""
        measured = [s for s in samples if isinstance(s, MetricSample)]
        cell.metric_samples = measured
        summaries = {}
        for metric, declaration in declared(spec, self, samples=measured).items():
            found = summarize_arm_metric(measured, metric, declaration, results_version)
            if found is not None:
                summaries[metric] = found
        cell.metrics = summaries or None
        problems = [s for s in measured if s.problem is not None]
        if problems and cell.status == "measured":
            cell.status = "failed"
            first = problems[0]
            more = f" (and {len(problems) - 1} more repeat(s))" if len(problems) > 1 else ""
            # a plugin's sample may say anything: the reason (quoted by the run's evidence) is bounded
            problem = " ".join(str(first.problem).split())
            problem = problem if len(problem) <= PROBLEM_MAX else problem[: PROBLEM_MAX - 3] + "..."
            cell.reason = f"repeat {first.repeat} (seed {first.seed}): {problem}{more}"

    def compare(self, spec: AnySpec, cells: list[Cell], roles: Roles, results_version: int = RESULTS_VERSION) -> None:
        """Every arm against every other, on every metric, as runs of ``results_version`` do."""
        metrics = declared(spec, self, cells)
        for cell in cells:
            versus: dict[str, dict[str, MetricComparison]] = {}
            for other in cells:
                if other is cell:
                    continue
                found = {}
                for metric, declaration in metrics.items():
                    comparison = compare_arms(
                        cell.metric_samples or [], other.metric_samples or [], metric, declaration, results_version
                    )
                    if comparison is not None:
                        found[metric] = comparison
                if found:
                    versus[other.backend] = found
            cell.versus = versus or None

    def headline(self, cell: Cell) -> float | None:
        return None  # an arm has several metrics; the evidence line names each

    def tables(self, results: RunResults, margins: Mapping[str, float] | None = None) -> list[Table]:
        """One table per metric: each arm's mean and interval, and how it stands against the
        baseline arm, in the metric's own terms; with an analysis plan's ``margins``, against the
        smallest effect that matters."""
        spec = arms_spec(results.spec)
        margins = margins or {}
        found = []
        for metric, declaration in declared(spec, self, results.cells).items():
            rows = []
            for cell in results.cells:
                summary = (cell.metrics or {}).get(metric)
                against = (
                    None if cell.backend == spec.baseline else (cell.versus or {}).get(spec.baseline, {}).get(metric)
                )
                counted = (
                    f"{against.won}/{against.lost}/{against.tied} of {against.n} {against.paired_by}s"
                    if against is not None and against.won is not None
                    else ""
                )
                rows.append(
                    [
                        cell.backend,
                        str(summary.n) if summary else "0",
                        value_text(summary.mean if summary else None),
                        f"{value_text(summary.ci.low)} to {value_text(summary.ci.high)}"
                        if summary and summary.ci
                        else "unknown",
                        "baseline" if cell.backend == spec.baseline else estimate_text(against, declaration),
                        "" if against is None else better_word(against, declaration, margins.get(metric)),
                        counted,
                        intervals_over(summary, against),
                        note(cell),
                    ]
                )
            if not any(row[1] != "0" for row in rows):
                continue
            margin = margins.get(metric, declaration.smallest_effect())
            matters = f"; margin {margin_text(margin, declaration)}" if margin is not None else ""
            title = f"{metric} ({declaration.unit}, {declaration.better} is better; {declaration.compare} to {spec.baseline}{matters})"
            headers = [
                "arm",
                "n",
                "mean",
                "95% CI",
                f"vs {spec.baseline} (95% CI)",
                "verdict",
                "won/lost/tied",
                "intervals over",
                "note",
            ]
            if not any(row[-2] for row in rows):  # a run before version 8 did not say: no empty column
                headers.pop(-2)
                rows = [[*row[:-2], row[-1]] for row in rows]
            found.append(Table(title, rows, headers, notes=("intervals over", "note")))
        return found

    def evidence(self, results: RunResults) -> list[str]:
        """One sentence per arm other than the baseline: each evaluator metric against it."""
        spec = arms_spec(results.spec)
        parts = []
        for cell in results.cells:
            if cell.backend == spec.baseline or cell.status != "measured":
                continue
            said = []
            for metric, declaration in {**self.metrics, **spec.metrics}.items():
                against = (cell.versus or {}).get(spec.baseline, {}).get(metric)
                if against is not None:
                    said.append(f"{metric} {comparison_text(against, declaration)}")
            if said:
                parts.append(f"{cell.backend} against {spec.baseline}: " + "; ".join(said))
        return parts

    def cell_config(self) -> str:
        return ALL_CONFIG
