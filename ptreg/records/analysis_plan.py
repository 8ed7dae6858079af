"""The analysis plan: which numbers make an attempt worked, regressed, failed or inconclusive,
registered with the proposal before any of its numbers exist.

A plan holds two rules in the condition language (``condition.py``): ``worked_if`` and,
optionally, ``regressed_if``; per metric the smallest effect that matters (its margin); and
which runs decide: the first complete run, or the first N complete runs pooled. The status
follows from the two rules in one order (``status_of``):

1. regressed: regressed-if holds;
2. worked: worked-if holds, and regressed-if (when the plan has one) does not;
3. failed: worked-if does not hold (and regressed-if does not);
4. inconclusive: anything else, i.e. a rule that the deciding runs cannot decide.

The plan is part of the admission: its digest (``plan_digest``) is stored there, so that an
edit after admission is caught by ``validate`` and the gate as an edited evaluator is. Nothing
here reads a file; checking a plan against a frozen evaluator needs only the spec.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from .condition import (
    MAX_DEPTH,
    MAX_TEXT,
    Amdahl,
    Condition,
    ConditionNode,
    Diff,
    FloorRatio,
    Gflops,
    ItemCount,
    MetricName,
    MetricRatio,
    MetricValue,
    MsPerStep,
    Share,
    Speedup,
    Verdict,
    depth,
    operand_text,
    quantities,
    verdicts,
)
from .evaluator import ACCELERATOR_METRICS, AnySpec, ArmsSpec, MetricDeclaration
from .refs import RUN_ID_PATTERN

# How a plan's rules are held to their error rate (decision.py, docs/conditions.md#multiplicity):
# an or's alternatives split the error (Bonferroni, Holm's first step), an and's parts do not
# (intersection-union). Stored with the plan, so that a reader knows which rule decided it.
MULTIPLICITY: Final = "split-alternatives"
# Pooling more runs than this is not a plan but a fishing trip; the bound keeps a hand edit sane.
MAX_POOLED_RUNS: Final = 20
RULES: Final = ("worked-if", "regressed-if")
TEXT_MAX: Final = 100_000  # a decided rule's readout, as any free text of a record
PlanStatus = Literal["worked", "regressed", "failed", "inconclusive"]
# A status a person may write where the plan decided another, without a deviation: a caveat
# narrows a result that worked, it does not contradict it.
CONSISTENT: Final[dict[str, tuple[str, ...]]] = {
    "worked": ("worked", "worked-with-caveat"),
    "regressed": ("regressed",),
    "failed": ("failed",),
    "inconclusive": ("inconclusive",),
}
# The workload whose runs record a function of backends (the rest read arms).
RECORDED_BY: Final[dict[type, tuple[str, ...]]] = {
    Share: ("tinygpt-train",),
    Amdahl: ("tinygpt-train",),
    FloorRatio: ("tinygpt-train",),
    MsPerStep: ("tinygpt-train",),
    Gflops: ("kernels",),
}


Truth = Literal[True, False] | None


def value_text(value: float) -> str:
    """A value read from a run: four significant digits, enough to see which side it is on."""
    return f"{value:.4g}"


def kind_problem(
    node: MetricValue | Diff | MetricRatio | ItemCount | Verdict, declaration: MetricDeclaration | None
) -> str | None:
    """Why the node cannot read a metric so declared: a difference read as a ratio, or items
    counted on a ratio; None when it can (or nothing is declared)."""
    if declaration is None or isinstance(node, MetricValue | Verdict):
        return None
    wanted = "ratio" if isinstance(node, MetricRatio) else "difference"
    if declaration.compare == wanted:
        return None
    if isinstance(node, ItemCount):
        return f"{node.op} counts items of a metric compared as a difference; {node.metric} is compared as a ratio"
    other = "ratio" if wanted == "difference" else "diff"
    return f"{node.metric} is compared as a {declaration.compare}: read it with {other}(...)"


def gain(low: float, high: float, declaration: MetricDeclaration, margin: float | None) -> tuple[float, float, float]:
    """An arm's comparison put on one scale where up is better: its interval (a difference, or a
    ratio's logarithm, turned by which way is better) and the margin on that scale (0 without)."""
    ratio = declaration.compare == "ratio"
    lo, hi = (math.log(low), math.log(high)) if ratio else (low, high)
    if declaration.better != "higher":
        lo, hi = -hi, -lo
    bound = 1.0 if ratio else 0.0
    m = margin if margin is not None else bound
    return lo, hi, (math.log(m) if ratio else m)


def standing(lo: float, hi: float, m: float) -> Literal["better", "worse", "equivalent", "unresolved"]:
    """Where a gain's interval stands against the margin ``m``: wholly above it, wholly below its
    negative, wholly within it (no practical difference), or across one of its ends."""
    if lo > m:
        return "better"
    if hi < -m:
        return "worse"
    if m > 0 and -m < lo and hi < m:
        return "equivalent"
    return "unresolved"


def margin_text(margin: float, declaration: MetricDeclaration) -> str:
    if declaration.compare == "ratio":
        return f"{value_text(margin)}x"
    return f"{value_text(margin)} {declaration.unit}"


class PlanRule(BaseModel):
    """One rule of a plan: a condition, as its canonical text and its parsed tree."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)] = Field(
        description="The rule's canonical text, which parses to `tree` (docs/conditions.md)."
    )
    tree: Condition = Field(description=f"The parsed rule; at most {MAX_DEPTH} levels deep.")

    @model_validator(mode="after")
    def _shallow(self) -> PlanRule:
        if depth(self.tree) > MAX_DEPTH:
            raise ValueError(f"the rule nests deeper than {MAX_DEPTH} levels")
        return self


Margin = Annotated[float, Field(gt=0, allow_inf_nan=False, le=1e12)]


class Plan(BaseModel):
    """What decides the attempt's status, registered at admission (docs/gate.md#the-analysis-plan)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    worked_if: PlanRule = Field(description="When the attempt worked.")
    regressed_if: PlanRule | None = Field(default=None, description="When it made things worse.")
    margins: dict[MetricName, Margin] | None = Field(
        default=None,
        description="Per metric, the smallest effect that matters: in the metric's unit for a metric compared as a "
        "difference, as a ratio (above 1) for one compared as a ratio.",
        max_length=64,
    )
    runs: int = Field(
        default=1,
        ge=1,
        le=MAX_POOLED_RUNS,
        description="Which runs decide: 1, the first complete run; N, the first N complete runs pooled.",
    )
    multiplicity: Literal["split-alternatives"] = Field(
        default=MULTIPLICITY,
        description="How several intervals in a rule keep its error rate: an or's alternatives share it "
        "(Bonferroni), an and's parts each keep it (intersection-union).",
    )

    def rules(self) -> list[tuple[str, PlanRule]]:
        """Its rules, each with its flag name."""
        found = [("worked-if", self.worked_if)]
        if self.regressed_if is not None:
            found.append(("regressed-if", self.regressed_if))
        return found

    def deciding(self) -> str:
        """Which runs decide, in words."""
        return "the first complete run" if self.runs == 1 else f"the first {self.runs} complete runs, pooled"


class PlanDecision(BaseModel):
    """What the plan decided when the attempt was concluded, on which runs, and why."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    status: PlanStatus = Field(description="The status the plan's rules give.")
    because: Annotated[str, StringConstraints(min_length=1, max_length=400)] = Field(
        description="Which rule decided it, e.g. 'worked-if holds and regressed-if does not'."
    )
    runs: list[Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]] = Field(
        max_length=MAX_POOLED_RUNS, description="The runs it was decided on; empty when there were none to decide on."
    )
    readout: list[Annotated[str, StringConstraints(min_length=1, max_length=TEXT_MAX)]] = Field(
        max_length=2, description="Each rule decided, with the values it read."
    )


def plan_digest(plan: Plan) -> str:
    """The sha256 of the plan's canonical JSON: what the admission keeps of it."""
    canonical = json.dumps(plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def status_of(worked: Truth, regressed: Truth | None, has_regressed_rule: bool) -> tuple[PlanStatus, str]:
    """The status the two rules give, in the plan's order, and which rule decided it."""
    if has_regressed_rule and regressed is True:
        return "regressed", "regressed-if holds"
    if worked is True:
        if not has_regressed_rule or regressed is False:
            return "worked", "worked-if holds" + (" and regressed-if does not" if has_regressed_rule else "")
        return "inconclusive", "worked-if holds, but regressed-if cannot be decided"
    if worked is False:
        return "failed", "worked-if does not hold" + (" and regressed-if does not" if has_regressed_rule else "")
    return "inconclusive", "worked-if cannot be decided"


# --------------------------------------------------------------------------- against the evaluator


def _metrics(spec: ArmsSpec, workload_metrics: Mapping[str, MetricDeclaration]) -> dict[str, MetricDeclaration]:
    return {**workload_metrics, **spec.declared()}


def _arms_problem(
    node: MetricValue | Diff | MetricRatio | ItemCount | Verdict,
    spec: AnySpec,
    metrics: Mapping[str, MetricDeclaration],
) -> str | None:
    if not isinstance(spec, ArmsSpec):
        return f"{operand_text(node)} reads arms, and evaluator {spec.name} compares backends ({spec.workload})"
    arms = [node.arm] if isinstance(node, MetricValue) else [node.arm, node.over]
    for arm in arms:
        if arm not in spec.arms:
            return f"{operand_text(node)}: evaluator {spec.name} has no arm {arm} (its arms: {', '.join(spec.arms)})"
    # an accelerator's metrics may be planned on: a run where none was measured leaves them unknown
    declaration = metrics.get(node.metric) or ACCELERATOR_METRICS.get(node.metric)
    if declaration is None:
        return (
            f"{operand_text(node)}: evaluator {spec.name} declares no metric {node.metric} "
            f"(its metrics: {', '.join(sorted(metrics))})"
        )
    kind = kind_problem(node, declaration)
    return None if kind is None else f"{operand_text(node)}: {kind}"


def _backends_problem(node: Share | Amdahl | FloorRatio | MsPerStep | Gflops | Speedup, spec: AnySpec) -> str | None:
    if isinstance(spec, ArmsSpec):
        return f"{operand_text(node)} reads backends, and evaluator {spec.name} compares arms ({spec.workload})"
    workloads = RECORDED_BY.get(type(node))
    if workloads is not None and spec.workload not in workloads:
        return f"{operand_text(node)} is recorded by a {' or '.join(workloads)} run; evaluator {spec.name} runs {spec.workload}"
    names = [node.backend, *([node.over] if isinstance(node, Speedup) else [])]
    for backend in names:
        if backend not in spec.backends:
            return (
                f"{operand_text(node)}: evaluator {spec.name} measures no backend {backend} "
                f"(its backends: {', '.join(spec.backends)})"
            )
    config = node.config
    if config not in spec.config_names:
        return (
            f"{operand_text(node)}: evaluator {spec.name} measures no config {config} "
            f"(its configs: {', '.join(spec.config_names)})"
        )
    return None


def rule_problems(
    tree: ConditionNode,
    spec: AnySpec,
    margins: Mapping[str, float],
    workload_metrics: Mapping[str, MetricDeclaration] | None = None,
) -> list[str]:
    """Each thing a rule names that the frozen evaluator does not have (a metric, an arm, a
    backend, a config), or a verdict that needs a margin the plan does not give."""
    metrics = _metrics(spec, workload_metrics or {}) if isinstance(spec, ArmsSpec) else {}
    found: list[str] = []
    for quantity in quantities(tree):
        if isinstance(quantity, MetricValue | Diff | MetricRatio | ItemCount):
            why = _arms_problem(quantity, spec, metrics)
        else:
            why = _backends_problem(quantity, spec)
        if why is not None:
            found.append(why)
    for verdict in verdicts(tree):
        why = _arms_problem(verdict, spec, metrics)
        if why is None and verdict.op == "equivalent" and verdict.metric not in margins:
            why = (
                f"{operand_text(verdict)} needs the smallest difference that matters for {verdict.metric}: "
                f"give --margin {verdict.metric}=VALUE"
            )
        if why is not None:
            found.append(why)
    return list(dict.fromkeys(found))


def margin_problems(
    margins: Mapping[str, float], spec: AnySpec, workload_metrics: Mapping[str, MetricDeclaration] | None = None
) -> list[str]:
    """Each margin that names no metric of the evaluator, or cannot be one of its metric's kind
    (a ratio's margin is a factor above 1)."""
    if not margins:
        return []
    if not isinstance(spec, ArmsSpec):
        return [f"margins are given per metric, and evaluator {spec.name} compares backends, which have none"]
    metrics = _metrics(spec, workload_metrics or {})
    found = []
    for metric, margin in margins.items():
        declaration = metrics.get(metric) or ACCELERATOR_METRICS.get(metric)
        if declaration is None:
            found.append(
                f"margin {metric}: evaluator {spec.name} declares no such metric (its metrics: {', '.join(sorted(metrics))})"
            )
        elif not math.isfinite(margin) or margin <= 0:
            found.append(f"margin {metric}={margin}: a margin is a positive number")
        elif declaration.compare == "ratio" and margin <= 1:
            found.append(
                f"margin {metric}={margin}: {metric} is compared as a ratio, so its margin is a factor above 1 "
                f"(1.05 for 5%)"
            )
    return found


def margins_text(plan: Plan, spec: AnySpec | None) -> str:
    """The plan's margins in words, each in its metric's terms where the spec says them."""
    if not plan.margins:
        return "none"
    declared = spec.declared() if isinstance(spec, ArmsSpec) else {}
    shown = []
    for metric, margin in plan.margins.items():
        declaration = declared.get(metric)
        shown.append(f"{metric} {margin_text(margin, declaration) if declaration else margin}")
    return ", ".join(shown)
