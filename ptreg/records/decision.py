"""Deciding a condition on one run's results: true, false, or undecidable and why.

A quantity is read as the run recorded it: with its 95% interval where the run recorded one
(ms per step, speedups and a kernel's GFLOP/s at a layer, from results_version 3 on), as a point
where it recorded none (shares and Amdahl bounds always; every value of an older run). A
comparison is true only if it holds for every value of the intervals it compares, false only
if it holds for none, and undecidable otherwise (an interval straddles the threshold).
``low(x)`` and ``high(x)`` read the bounds of x's interval as points; on a value without an
interval they are undecidable, never guessed. ``and``, ``or`` and ``not`` follow Kleene's
three-valued logic: false and anything is false, true or anything is true.

Multiplicity. A condition may read several intervals, and each is a chance to be wrong. Each
comparison is a one-sided claim, made at most 2.5% of the time when it is not so (the side of a
95% interval), and the condition keeps that rate as a whole: to call an ``or`` true one of its k
alternatives must hold at 2.5%/k (Bonferroni; it is the first step of Holm's procedure, and
decides the ``or`` as Holm's would), while an ``and`` is true only if all of its parts are, so
each part keeps the full 2.5% (intersection-union: every part must be wrong at once).
Calling a condition false is the mirror image: an ``and`` splits, an ``or`` does not, and
``not`` swaps the two. Every interval is taken at the level its place in the tree gives it
(``intervals.py``); a point (a share, a count) is not a sample and is compared as it is.
docs/conditions.md#multiplicity states the rule and the simulation that checks it.

Verdicts. ``better``, ``worse`` and ``equivalent`` read two arms' comparison on a metric
against the metric's margin (the smallest effect that matters, from the analysis plan):
better or worse when the whole interval lies beyond the margin that way, equivalent (no
practical difference) when it lies within the margin either way.

Nothing here reads a file or runs code from the condition: the tree is walked, and the results
it is given are its only input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .analysis_plan import Truth, kind_problem, margin_text, value_text
from .condition import (
    Amdahl,
    And,
    Compare,
    ConditionNode,
    Diff,
    FloorRatio,
    Gflops,
    High,
    ItemCount,
    Low,
    MetricRatio,
    MetricValue,
    MsPerStep,
    Neg,
    Not,
    Number,
    OperandNode,
    Or,
    QuantityNode,
    Share,
    Speedup,
    Verdict,
    number_text,
    operand_text,
    quantities,
    verdicts,
)
from .evaluator import ACCELERATOR_METRICS, ArmsSpec
from .intervals import LEVEL, ONE_SEED, VARIANCE_FROM_VERSION, Scale, at_level

if TYPE_CHECKING:  # the run models are only read here: deciding needs none built, nor does parsing
    from .run_results import Cell, Ratio, RunResults, Summary

# What a function reads, by the samples a cell keeps it in: a run none of whose cells keeps
# them measured something else, whichever workload that was (speedups are taken in every run).
STEPS = ("step_samples", "ms_per_step", "attribution")
# The parts every attribution has, whatever its version; the ops are in its ``ops``.
WHOLE_STEP_PARTS = ("forward", "backward_da", "backward_db", "other")
KERNELS_ALONE = ("kernel_samples", "kernels", "step_gflops")
RECORDED_IN: dict[str, tuple[tuple[str, ...], str]] = {
    "share": (STEPS, "a training step's parts"),
    "amdahl": (STEPS, "a training step's parts"),
    "floor_ratio": (STEPS, "a training step's parts"),
    "ms_per_step": (STEPS, "training steps"),
    "gflops": (KERNELS_ALONE, "kernels timed alone"),
}


# The one-sided error a claim of the whole condition may make: the side of a 95% interval.
SIDE = (1 - LEVEL) / 2


def level_text(level: float) -> str:
    """A level as a message writes it: 95%, 97.5%, 98.33%."""
    return f"{100 * level:.4g}%"


@dataclass(frozen=True)
class Reading:
    """One quantity as the run recorded it: a point, a point with its 95% interval, or unknown."""

    quantity: str  # its canonical text
    value: float | None
    low: float | None = None
    high: float | None = None
    unknown: str | None = None  # why no value could be read
    n: int | None = None  # the values its interval is over, so that it can be taken to another level
    scale: Scale = "linear"  # the scale its interval is symmetric on
    df: float | None = None  # its t quantile's degrees of freedom, where they are not n - 1

    def interval(self, level: float) -> tuple[float, float] | None:
        """Its interval at ``level``; None for a point or an unknown value."""
        if self.value is None or self.low is None or self.high is None:
            return None
        if self.n is None:
            return (self.low, self.high) if level == LEVEL else None
        return at_level(self.low, self.high, self.n, self.scale, level, self.df)

    @property
    def shown(self) -> str:
        if self.value is None:
            return f"unknown ({self.unknown})"
        if self.low is None or self.high is None:
            return value_text(self.value)
        return f"{value_text(self.value)} (95% CI {value_text(self.low)} to {value_text(self.high)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "unknown": self.unknown,
        }


@dataclass(frozen=True)
class Span:
    """An operand ready to compare: the range of values it may take, or why it is unknown."""

    text: str  # as a message shows it, e.g. "share(...) = 0.31"
    low: float | None
    high: float | None
    unknown: str | None = None


@dataclass(frozen=True)
class Comparison:
    """One comparison, decided, in words."""

    text: str
    truth: Truth


@dataclass
class Decision:
    truth: Truth
    run_id: str | None
    comparisons: list[Comparison] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return {True: "holds", False: "does not hold", None: "cannot be decided"}[self.truth]

    def summary(self) -> str:
        """e.g. 'holds: share(backward_db, backend=numba, config=xl) = 0.31 >= 0.3 on run 20261201T092700Z'."""
        found = "; ".join(c.text for c in self.comparisons)
        return f"{self.verdict}: {found} on run {self.run_id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "truth": self.truth,
            "run": self.run_id,
            "summary": self.summary(),
            "comparisons": [{"text": c.text, "truth": c.truth} for c in self.comparisons],
            "readings": [r.to_json() for r in self.readings],
        }


# --------------------------------------------------------------------------- reading a run


def _cell(results: RunResults, backend: str, config: str) -> Cell | None:
    return next((c for c in results.cells if c.backend == backend and c.config == config), None)


def _cells_listed(results: RunResults) -> str:
    backends = ", ".join(dict.fromkeys(c.backend for c in results.cells)) or "none"
    configs = ", ".join(dict.fromkeys(c.config for c in results.cells)) or "none"
    return f"its backends: {backends}; its configs: {configs}"


def _arm(results: RunResults, arm: str) -> Cell | None:
    return next((c for c in results.cells if c.backend == arm), None)


def _missing_metric(
    node: MetricValue | Diff | MetricRatio | ItemCount | Verdict, results: RunResults, run: str
) -> str | None:
    spec = results.spec
    if not isinstance(spec, ArmsSpec):
        return f"{node.op} reads a run of arms; {run} measured backends ({spec.workload})"
    arms = ", ".join(spec.arm_names)
    for arm in (node.arm, *([node.over] if not isinstance(node, MetricValue) else [])):
        if _arm(results, arm) is None:
            return f"{run} has no arm {arm} (its arms: {arms})"
    declared = {**spec.declared(), **ACCELERATOR_METRICS}  # those unknown where none was measured
    cell = _arm(results, node.arm)
    assert cell is not None
    recorded = set(declared) | set(cell.metrics or {})
    if node.metric not in recorded:
        return f"{run} records no metric {node.metric} (its metrics: {', '.join(sorted(recorded))})"
    declaration = declared.get(node.metric)
    if isinstance(node, Verdict) and declaration is None:
        return f"{node.metric} is not declared by the evaluator, so which way is better is unknown"
    return kind_problem(node, declaration)


def missing(node: QuantityNode | Verdict, results: RunResults) -> str | None:
    """Why the run cannot record this quantity or verdict at all (a cell, a layer or a ratio it
    does not have, or another workload's function); None when it can. What ``conclude`` refuses."""
    run = f"run {results.run_id}" if results.run_id else "the run"
    if isinstance(node, MetricValue | Diff | MetricRatio | ItemCount | Verdict):
        return _missing_metric(node, results, run)
    if isinstance(results.spec, ArmsSpec):
        return f"{node.op} reads a run of backends; {run} measured arms ({results.spec.workload})"
    recorded = RECORDED_IN.get(node.op)
    if recorded is not None and all(getattr(c, f) is None for c in results.cells for f in recorded[0]):
        return f"{node.op} reads {recorded[1]}, which {run} does not record (it measured {results.spec.workload})"
    if _cell(results, node.backend, node.config) is None:
        return f"{run} has no cell {node.backend}/{node.config} ({_cells_listed(results)})"
    if isinstance(node, Speedup):
        if _cell(results, node.over, node.config) is None:
            return f"{run} has no cell {node.over}/{node.config} ({_cells_listed(results)})"
        over = _ratio_roles(results)
        if node.over not in over:
            return f"{run} records speedups over {' and '.join(over)} only, not over {node.over}"
    if isinstance(node, Gflops) and node.layer is not None:
        cell = _cell(results, node.backend, node.config)
        assert cell is not None
        layers = sorted({t.layer for t in cell.kernels or ()})
        if layers and node.layer not in layers:
            return (
                f"{run} times no layer {node.layer} in {node.backend}/{node.config} (its layers: {', '.join(layers)})"
            )
    return None


def _ratio_roles(results: RunResults) -> dict[str, str]:
    """The backends a run's cell ratios are taken over: the reference (vs_naive) and the baseline (vs_baseline)."""
    found: dict[str, str] = {}
    reference = results.ratio_roles.reference
    if reference is not None:
        found[reference] = "vs_naive"
    found.setdefault(results.spec.baseline, "vs_baseline")
    return found


def read(node: QuantityNode, results: RunResults) -> Reading:
    """The quantity's value in this run, or why it is unknown."""
    text = operand_text(node)
    why = missing(node, results)
    if why is not None:
        return Reading(text, None, unknown=why)
    if isinstance(node, ItemCount):
        return _count(text, node, results)
    if isinstance(node, MetricValue | Diff | MetricRatio):
        return _metric(text, node, results)
    cell = _cell(results, node.backend, node.config)
    assert cell is not None
    if isinstance(node, Share | Amdahl):
        if cell.attribution is None:
            return Reading(text, None, unknown=f"{node.backend}/{node.config} has no attribution (cell {cell.status})")
        if node.kernel not in WHOLE_STEP_PARTS:  # an op: timed apart from version 6 on
            if cell.attribution.ops is None:
                why = f"run {results.run_id or 'ad hoc'} timed no op apart (results version {results.results_version})"
                return Reading(text, None, unknown=why)
            found = next((share for op, share in cell.attribution.ops.items() if op == node.kernel), None)
            if found is None:
                return Reading(text, None, unknown=f"{node.backend}/{node.config} recorded no time for {node.kernel}")
            part = found
        else:
            part = getattr(cell.attribution, node.kernel)
        value = part.share if isinstance(node, Share) else part.amdahl_bound
        return Reading(text, value, unknown=None if value is not None else "no bound is recorded at a share of 1")
    if isinstance(node, FloorRatio):
        return _floor_ratio(text, node, results, cell)
    if isinstance(node, MsPerStep):
        return _summary(text, cell.ms_per_step, f"{node.backend}/{node.config} has no ms per step (cell {cell.status})")
    if isinstance(node, Speedup):
        attribute = _ratio_roles(results)[node.over]
        ratio: Ratio | None = getattr(cell, f"{attribute}_ratio")
        if ratio is not None:
            interval = ratio.ci
            low, high = (interval.low, interval.high) if interval is not None else (None, None)
            return Reading(text, ratio.median, low, high, n=ratio.n, scale="log")
        point: float | None = getattr(cell, attribute)
        unknown = None if point is not None else f"no speedup is recorded for {node.backend}/{node.config}"
        return Reading(text, point, unknown=unknown)
    return _gflops(text, node, cell)


def _metric(text: str, node: MetricValue | Diff | MetricRatio, results: RunResults) -> Reading:
    """A metric of an arm, or its comparison with another arm, as the run recorded it."""
    cell = _arm(results, node.arm)
    assert cell is not None
    # From version 8 an interval says what it is over; one over a single seed's items leaves the
    # seeds' variance unknown, and unknown stays unknown (older runs are read as they were).
    said = results.results_version >= VARIANCE_FROM_VERSION
    if isinstance(node, MetricValue):
        summary = (cell.metrics or {}).get(node.metric)
        if summary is None:
            return Reading(text, None, unknown=f"{node.arm} has no value of {node.metric} (cell {cell.status})")
        if said and summary.variance == "items only":
            return Reading(text, None, unknown=f"{node.arm}'s {node.metric} is over {ONE_SEED}")
        if summary.ci is None:
            return Reading(text, summary.mean)
        scale: Scale = "log" if said and summary.scale == "log" else "linear"
        return Reading(
            text, summary.mean, summary.ci.low, summary.ci.high, n=summary.n, scale=scale, df=_df(said, summary.df)
        )
    found = (cell.versus or {}).get(node.over, {}).get(node.metric)
    if found is None:
        return Reading(text, None, unknown=f"no comparison of {node.arm} with {node.over} on {node.metric} is recorded")
    if said and found.variance == "items only":
        return Reading(text, None, unknown=f"{node.arm} against {node.over} on {node.metric} is over {ONE_SEED}")
    if found.ci is None:
        return Reading(text, found.estimate)
    scale = "log" if found.kind == "ratio" else "linear"
    return Reading(text, found.estimate, found.ci.low, found.ci.high, n=found.n, scale=scale, df=_df(said, found.df))


def _df(said: bool, df: float | None) -> float | None:
    """An interval's own degrees of freedom, read from runs that record them (version 8)."""
    return df if said else None


def _count(text: str, node: ItemCount, results: RunResults) -> Reading:
    """Items won, lost or tied: a count, read as a point."""
    found = next((c for c in results.cells if c.backend == node.arm), None)
    comparison = ((found.versus or {}) if found else {}).get(node.over, {}).get(node.metric)
    if comparison is None:
        return Reading(text, None, unknown=f"no comparison of {node.arm} with {node.over} on {node.metric} is recorded")
    value = getattr(comparison, node.op)
    if value is None:
        return Reading(text, None, unknown=f"the run counts no {node.op} {comparison.paired_by}s for {node.metric}")
    return Reading(text, float(value))


def _summary(text: str, summary: Summary | None, why: str) -> Reading:
    if summary is None:
        return Reading(text, None, unknown=why)
    if summary.ci is None:
        return Reading(text, summary.median)
    return Reading(text, summary.median, summary.ci.low, summary.ci.high, n=summary.n, scale="log")


def _floor_ratio(text: str, node: FloorRatio, results: RunResults, cell: Cell) -> Reading:
    """A part's ms per step over its recorded floor; unknown (undecided, never false) without one."""
    floors = (results.floors or {}).get(node.config)
    ms = cell.attribution.part_ms(node.kernel) if cell.attribution else None
    floor = floors.floor_ms(node.kernel) if floors else None
    if ms and floor is not None:  # 0 ms: a fused op the step never called is not at its floor
        return Reading(text, ms / floor)
    why = f"{node.backend}/{node.config} recorded no time for {node.kernel} (cell {cell.status})"
    why = f"{node.kernel} has no floor: the fused ops take all its work" if ms and floor is None else why
    return Reading(text, None, unknown=why if floors else f"run {results.run_id} recorded no floors at {node.config}")


def _gflops(text: str, node: Gflops, cell: Cell) -> Reading:
    where = f"{node.backend}/{node.config}"
    if node.kernel == "step":
        value = cell.step_gflops
        return Reading(text, value, unknown=None if value is not None else f"{where} has no step GFLOP/s")
    timings = [t for t in cell.kernels or () if t.kernel == node.kernel]
    if node.layer is not None:
        timing = next((t for t in timings if t.layer == node.layer), None)
        return _summary(
            text, timing.gflops if timing else None, f"{where} has no timing of {node.kernel} at {node.layer}"
        )
    if not timings:
        return Reading(text, None, unknown=f"{where} has no timing of {node.kernel}")
    # Over a step's layers, as the run computes its step GFLOP/s: work over time, from the
    # recorded medians; a point, since the run records no interval for this sum.
    work = sum(t.per_step * 2 * t.shape[0] * t.shape[1] * t.shape[2] for t in timings)
    seconds = sum(t.per_step * t.seconds.median for t in timings)
    return Reading(text, work / seconds / 1e9)


# --------------------------------------------------------------------------- deciding


@dataclass(frozen=True)
class Sides:
    """The one-sided error a node may make in calling its part true, and in calling it false."""

    true: float = SIDE
    false: float = SIDE

    def level(self, side: float) -> float:
        """The two-sided level of an interval one side of which errs at ``side``."""
        return 1 - 2 * side


@dataclass
class _Context:
    results: RunResults
    margins: Mapping[str, float]
    readings: list[Reading] = field(default_factory=list)
    found: list[Comparison] = field(default_factory=list)

    def read(self, node: QuantityNode) -> Reading:
        reading = read(node, self.results)
        if all(r.quantity != reading.quantity for r in self.readings):  # each once, in the order first read
            self.readings.append(reading)
        return reading


def _shown(reading: Reading, interval: tuple[float, float] | None, level: float) -> str:
    if interval is None:
        return reading.shown
    assert reading.value is not None
    return (
        f"{value_text(reading.value)} ({level_text(level)} CI {value_text(interval[0])} to {value_text(interval[1])})"
    )


def _span(node: OperandNode, context: _Context, level: float) -> Span:
    """The operand's range of values at ``level``."""
    if isinstance(node, Number):
        return Span(number_text(node.value), node.value, node.value)
    target = node.of if isinstance(node, Low | High | Neg) else node
    reading = context.read(target)
    if reading.value is None:
        return Span(f"{operand_text(node)} = unknown", None, None, reading.unknown)
    interval = reading.interval(level)
    if isinstance(node, Low | High):
        if interval is None:
            return Span(
                f"{operand_text(node)} = unknown",
                None,
                None,
                f"the run records {reading.quantity} = {reading.shown} without an interval",
            )
        bound = interval[0] if isinstance(node, Low) else interval[1]
        return Span(f"{operand_text(node)} = {value_text(bound)}", bound, bound)
    low, high = interval if interval is not None else (reading.value, reading.value)
    if isinstance(node, Neg):
        negated = Reading(reading.quantity, -reading.value, -high, -low) if interval else None
        shown = _shown(negated, (-high, -low), level) if negated else value_text(-reading.value)
        return Span(f"{operand_text(node)} = {shown}", -high, -low)
    return Span(f"{reading.quantity} = {_shown(reading, interval, level)}", low, high)


def _holds(cmp: str, left: Span, right: Span) -> bool:
    """Whether every value of ``left`` is on the true side of every value of ``right``."""
    assert left.low is not None and left.high is not None and right.low is not None and right.high is not None
    if cmp == ">=":
        return left.low >= right.high
    if cmp == ">":
        return left.low > right.high
    if cmp == "<=":
        return left.high <= right.low
    return left.high < right.low


def _fails(cmp: str, left: Span, right: Span) -> bool:
    """Whether no value of ``left`` is on the true side of any value of ``right``."""
    assert left.low is not None and left.high is not None and right.low is not None and right.high is not None
    if cmp == ">=":
        return left.high < right.low
    if cmp == ">":
        return left.high <= right.low
    if cmp == "<=":
        return left.low > right.high
    return left.low >= right.high


def _compare(node: Compare, context: _Context, sides: Sides) -> Truth:
    # an interval for calling it true, and one (perhaps at another level) for calling it false
    true_level, false_level = sides.level(sides.true), sides.level(sides.false)
    left, right = _span(node.left, context, true_level), _span(node.right, context, true_level)
    phrase = f"{left.text} {node.cmp} {right.text}"
    unknown = left.unknown or right.unknown
    if unknown is not None:
        context.found.append(Comparison(f"{phrase} is undecided: {unknown}", None))
        return None
    if _holds(node.cmp, left, right):
        context.found.append(Comparison(phrase, True))
        return True
    if false_level != true_level:
        left, right = _span(node.left, context, false_level), _span(node.right, context, false_level)
    if _fails(node.cmp, left, right):
        context.found.append(Comparison(f"{left.text}, not {node.cmp} {right.text}", False))
        return False
    context.found.append(Comparison(f"{phrase} is undecided: the interval straddles the threshold", None))
    return None


def _verdict(node: Verdict, context: _Context, sides: Sides) -> Truth:
    """better, worse or equivalent, on the improvement scale: arm's gain over ``over`` in the
    metric's good direction (a difference, or the log of a ratio), against the margin."""
    results = context.results
    quantity: QuantityNode
    spec = results.spec
    declaration = spec.declared().get(node.metric) if isinstance(spec, ArmsSpec) else None
    head = operand_text(node)
    why = missing(node, results)
    if why is not None or declaration is None:
        context.found.append(Comparison(f"{head} is undecided: {why or 'its metric is not declared'}", None))
        return None
    ratio = declaration.compare == "ratio"
    quantity = (
        MetricRatio(op="ratio", metric=node.metric, arm=node.arm, over=node.over)
        if ratio
        else Diff(op="diff", metric=node.metric, arm=node.arm, over=node.over)
    )
    reading = context.read(quantity)
    margin = context.margins.get(node.metric)
    if node.op == "equivalent" and margin is None:
        context.found.append(
            Comparison(
                f"{head} is undecided: the plan gives {node.metric} no margin, so no difference is small enough", None
            )
        )
        return None
    if reading.value is None:
        context.found.append(Comparison(f"{head} is undecided: {reading.unknown}", None))
        return None
    neutral = 1.0 if ratio else 0.0
    bound = margin if margin is not None else neutral
    said = f"margin {margin_text(bound, declaration)}" if margin is not None else "no margin"

    def gains(level: float) -> tuple[float, float] | None:
        interval = reading.interval(level)
        if interval is None:
            return None
        low, high = (math.log(interval[0]), math.log(interval[1])) if ratio else interval
        return (low, high) if declaration.better == "higher" else (-high, -low)

    m = math.log(bound) if ratio else bound
    true_level, false_level = sides.level(sides.true), sides.level(sides.false)
    for_true, for_false = gains(true_level), gains(false_level)
    if for_true is None or for_false is None:
        context.found.append(
            Comparison(f"{head} is undecided: {reading.quantity} = {reading.shown}, no interval", None)
        )
        return None
    if node.op == "better":
        truth: Truth = True if for_true[0] > m else False if for_false[1] <= m else None
    elif node.op == "worse":
        truth = True if for_true[1] < -m else False if for_false[0] >= -m else None
    else:
        truth = (
            True if -m < for_true[0] and for_true[1] < m else False if for_false[0] >= m or for_false[1] <= -m else None
        )
    level = false_level if truth is False else true_level
    shown = f"{head}: {reading.quantity} = {_shown(reading, reading.interval(level), level)}, {said}"
    word = {True: "holds", False: "does not hold", None: "is undecided"}[truth]
    context.found.append(Comparison(f"{shown}: {word}", truth))
    return truth


def _truth(node: ConditionNode, context: _Context, sides: Sides) -> Truth:
    if isinstance(node, Compare):
        return _compare(node, context, sides)
    if isinstance(node, Verdict):
        return _verdict(node, context, sides)
    if isinstance(node, Not):
        start = len(context.found)
        inner = _truth(node.arg, context, Sides(true=sides.false, false=sides.true))
        if isinstance(node.arg, Compare | Verdict) and len(context.found) == start + 1:  # say the not, too
            said = context.found[start]
            context.found[start] = Comparison(f"not ({said.text})", None if said.truth is None else not said.truth)
        return None if inner is None else not inner
    k = len(node.args)
    # calling an or true, or an and false, needs one part: each is held to its share
    split = (
        Sides(true=sides.true / k, false=sides.false) if isinstance(node, Or) else Sides(sides.true, sides.false / k)
    )
    # every operand is decided, so that the message shows every value the condition reads
    values = [_truth(a, context, split) for a in node.args]
    if isinstance(node, And):
        return False if False in values else True if all(v is True for v in values) else None
    return True if True in values else False if all(v is False for v in values) else None


def decide(node: ConditionNode, results: RunResults, margins: Mapping[str, float] | None = None) -> Decision:
    """The condition's truth on ``results``, with every comparison and value it read; the
    verdicts read ``margins`` (metric: smallest effect that matters)."""
    context = _Context(results, margins or {})
    truth = _truth(node, context, Sides())
    return Decision(truth, results.run_id, context.found, context.readings)


def problems(node: ConditionNode, results: RunResults) -> list[tuple[QuantityNode | Verdict, str]]:
    """Each quantity and verdict of the condition the run cannot record, with why."""
    asked: list[QuantityNode | Verdict] = [*quantities(node), *verdicts(node)]
    return [(q, why) for q in asked if (why := missing(q, results)) is not None]
