"""Deciding a continue-if condition on one run's results: true, false, or undecidable and why.

A quantity is read as the run recorded it: with its 95% interval where the run recorded one
(ms per step, speedups and a kernel's GFLOP/s at a layer, from results_version 3 on), as a point
where it recorded none (shares and Amdahl bounds always; every value of an older run). A
comparison is true only if it holds for every value of the intervals it compares, false only
if it holds for none, and undecidable otherwise (an interval straddles the threshold).
``low(x)`` and ``high(x)`` read the bounds of x's interval as points; on a value without an
interval they are undecidable, never guessed. ``and``, ``or`` and ``not`` follow Kleene's
three-valued logic: false and anything is false, true or anything is true.

Nothing here reads a file or runs code from the condition: the tree is walked, and the results
it is given are its only input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .condition import (
    Amdahl,
    And,
    Compare,
    ConditionNode,
    Diff,
    Gflops,
    High,
    Low,
    MetricRatio,
    MetricValue,
    MsPerStep,
    Not,
    Number,
    OperandNode,
    QuantityNode,
    Share,
    Speedup,
    number_text,
    operand_text,
    quantities,
)
from .evaluator import ArmsSpec

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
    "ms_per_step": (STEPS, "training steps"),
    "gflops": (KERNELS_ALONE, "kernels timed alone"),
}


def value_text(value: float) -> str:
    """A value read from a run: four significant digits, enough to see which side it is on."""
    return f"{value:.4g}"


@dataclass(frozen=True)
class Reading:
    """One quantity as the run recorded it: a point, a point with its 95% interval, or unknown."""

    quantity: str  # its canonical text
    value: float | None
    low: float | None = None
    high: float | None = None
    unknown: str | None = None  # why no value could be read

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


Truth = Literal[True, False] | None


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


def _missing_metric(node: MetricValue | Diff | MetricRatio, results: RunResults, run: str) -> str | None:
    spec = results.spec
    if not isinstance(spec, ArmsSpec):
        return f"{node.op} reads a run of arms; {run} measured backends ({spec.workload})"
    arms = ", ".join(spec.arm_names)
    for arm in (node.arm, *([node.over] if not isinstance(node, MetricValue) else [])):
        if _arm(results, arm) is None:
            return f"{run} has no arm {arm} (its arms: {arms})"
    declared = {**spec.declared()}
    cell = _arm(results, node.arm)
    assert cell is not None
    recorded = set(declared) | set(cell.metrics or {})
    if node.metric not in recorded:
        return f"{run} records no metric {node.metric} (its metrics: {', '.join(sorted(recorded))})"
    declaration = declared.get(node.metric)
    if declaration is not None and not isinstance(node, MetricValue):
        wanted = "difference" if isinstance(node, Diff) else "ratio"
        if declaration.compare != wanted:
            other = "ratio" if wanted == "difference" else "diff"
            return f"{node.metric} is compared as a {declaration.compare}: read it with {other}(...)"
    return None


def missing(node: QuantityNode, results: RunResults) -> str | None:
    """Why the run cannot record this quantity at all (a cell, a layer or a ratio it does not
    have, or another workload's function); None when it can. What ``conclude`` refuses."""
    run = f"run {results.run_id}" if results.run_id else "the run"
    if isinstance(node, MetricValue | Diff | MetricRatio):
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
    """The backends a run's cell ratios are taken over: the reference (vs_naive) and the
    evaluator's baseline (vs_baseline)."""
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
    if isinstance(node, MsPerStep):
        return _summary(text, cell.ms_per_step, f"{node.backend}/{node.config} has no ms per step (cell {cell.status})")
    if isinstance(node, Speedup):
        attribute = _ratio_roles(results)[node.over]
        ratio: Ratio | None = getattr(cell, f"{attribute}_ratio")
        if ratio is not None:
            interval = ratio.ci
            low, high = (interval.low, interval.high) if interval is not None else (None, None)
            return Reading(text, ratio.median, low, high)
        point: float | None = getattr(cell, attribute)
        unknown = None if point is not None else f"no speedup is recorded for {node.backend}/{node.config}"
        return Reading(text, point, unknown=unknown)
    return _gflops(text, node, cell)


def _metric(text: str, node: MetricValue | Diff | MetricRatio, results: RunResults) -> Reading:
    """A metric of an arm, or its comparison with another arm, as the run recorded it."""
    cell = _arm(results, node.arm)
    assert cell is not None
    if isinstance(node, MetricValue):
        summary = (cell.metrics or {}).get(node.metric)
        if summary is None:
            return Reading(text, None, unknown=f"{node.arm} has no value of {node.metric} (cell {cell.status})")
        if summary.ci is None:
            return Reading(text, summary.mean)
        return Reading(text, summary.mean, summary.ci.low, summary.ci.high)
    found = (cell.versus or {}).get(node.over, {}).get(node.metric)
    if found is None:
        return Reading(text, None, unknown=f"no comparison of {node.arm} with {node.over} on {node.metric} is recorded")
    if found.ci is None:
        return Reading(text, found.estimate)
    return Reading(text, found.estimate, found.ci.low, found.ci.high)


def _summary(text: str, summary: Summary | None, why: str) -> Reading:
    if summary is None:
        return Reading(text, None, unknown=why)
    if summary.ci is None:
        return Reading(text, summary.median)
    return Reading(text, summary.median, summary.ci.low, summary.ci.high)


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


def _span(node: OperandNode, results: RunResults, readings: list[Reading]) -> Span:
    if isinstance(node, Number):
        return Span(number_text(node.value), node.value, node.value)
    target = node.of if isinstance(node, Low | High) else node
    reading = read(target, results)
    if all(r.quantity != reading.quantity for r in readings):  # each quantity once, in the order first read
        readings.append(reading)
    if reading.value is None:
        return Span(f"{operand_text(node)} = unknown", None, None, reading.unknown)
    if isinstance(node, Low | High):
        bound = reading.low if isinstance(node, Low) else reading.high
        if bound is None:
            return Span(
                f"{operand_text(node)} = unknown",
                None,
                None,
                f"the run records {reading.quantity} = {reading.shown} without an interval",
            )
        return Span(f"{operand_text(node)} = {value_text(bound)}", bound, bound)
    low = reading.low if reading.low is not None else reading.value
    high = reading.high if reading.high is not None else reading.value
    return Span(f"{reading.quantity} = {reading.shown}", low, high)


def _compare(node: Compare, results: RunResults, readings: list[Reading], found: list[Comparison]) -> Truth:
    left, right = _span(node.left, results, readings), _span(node.right, results, readings)
    phrase = f"{left.text} {node.cmp} {right.text}"
    unknown = left.unknown or right.unknown
    if unknown is not None:
        found.append(Comparison(f"{phrase} is undecided: {unknown}", None))
        return None
    assert left.low is not None and left.high is not None and right.low is not None and right.high is not None
    # true when every value of the left interval is on the true side of every value of the
    # right; false when none is
    truth: Truth
    if node.cmp == ">=":
        truth = True if left.low >= right.high else False if left.high < right.low else None
    elif node.cmp == ">":
        truth = True if left.low > right.high else False if left.high <= right.low else None
    elif node.cmp == "<=":
        truth = True if left.high <= right.low else False if left.low > right.high else None
    else:
        truth = True if left.high < right.low else False if left.low >= right.high else None
    if truth is True:
        found.append(Comparison(phrase, True))
    elif truth is False:
        found.append(Comparison(f"{left.text}, not {node.cmp} {right.text}", False))
    else:
        found.append(Comparison(f"{phrase} is undecided: the interval straddles the threshold", None))
    return truth


def _truth(node: ConditionNode, results: RunResults, readings: list[Reading], found: list[Comparison]) -> Truth:
    if isinstance(node, Compare):
        return _compare(node, results, readings, found)
    if isinstance(node, Not):
        inner = _truth(node.arg, results, readings, found)
        return None if inner is None else not inner
    # every operand is decided, so that the message shows every value the condition reads
    values = [_truth(a, results, readings, found) for a in node.args]
    if isinstance(node, And):
        return False if False in values else True if all(v is True for v in values) else None
    return True if True in values else False if all(v is False for v in values) else None


def decide(node: ConditionNode, results: RunResults) -> Decision:
    """The condition's truth on ``results``, with every comparison and value it read."""
    readings: list[Reading] = []
    found: list[Comparison] = []
    truth = _truth(node, results, readings, found)
    return Decision(truth, results.run_id, found, readings)


def problems(node: ConditionNode, results: RunResults) -> list[tuple[QuantityNode, str]]:
    """Each quantity of the condition the run cannot record, with why."""
    return [(q, why) for q in quantities(node) if (why := missing(q, results)) is not None]
