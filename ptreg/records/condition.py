"""The language of continue-if conditions: the tree a record stores, and its canonical text.

A disposition may carry a condition over an attempt's run results, e.g.
``share(backward_db, backend=numba, config=xl) >= 0.3``. It is parsed once, when it is set
(``condition_grammar.py``, with lark), and stored as this tree, which the JSON Schema
describes; reading and deciding it (``decision.py``) needs neither lark nor the text.

Every node is a JSON object named by its ``op``: the boolean nodes ``and``, ``or``, ``not``
and ``compare``, and the verdicts ``better``, ``worse`` and ``equivalent`` of two arms on a
metric; the operands ``number``, the quantities ``share``, ``amdahl``, ``floor_ratio``, ``ms_per_step``,
``gflops``, ``speedup``, ``metric``, ``diff``, ``ratio`` and the item counts ``won``, ``lost``
and ``tied``, the interval bounds ``low`` and ``high`` of a quantity, and ``neg``, a quantity
negated. docs/conditions.md documents each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ..errors import UnusableInput
from .configs import ConfigName, LayerName

# A condition is read by people and decided by the gate: these bound what no person writes,
# and keep a hostile one from costing more than a glance (and the parser from deep recursion).
MAX_TEXT: Final = 2000
MAX_DEPTH: Final = 32

# A backend is named as an evaluator names it, by a slug (records/attempt.py ID_PATTERN; a test
# holds the two equal: attempt.py imports this module, so it cannot be imported here), and one
# taken at a git revision by the slug, '@' and the revision's label (``numba@before``).
BACKEND_PATTERN: Final = r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)*(@[a-z0-9][a-z0-9-]*)?$"
BackendName = Annotated[str, StringConstraints(pattern=BACKEND_PATTERN, max_length=128)]

# The parts of a training step a share names: the three kernels and the step's other ops
# (records/run_results.py KERNELS and STEP_OPS; a test holds them equal) and what none took.
StepPart = Literal[
    "forward",
    "backward_da",
    "backward_db",
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
    "other",
]
# The run records an Amdahl bound for each kernel and op, not for the rest of the step.
BoundedKernel = Literal[
    "forward",
    "backward_da",
    "backward_db",
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
]
# gflops reads a kernel, or ``step``: a training step's linear layers, all three kernels.
GflopsPart = Literal["forward", "backward_da", "backward_db", "step"]
Comparator = Literal[">=", ">", "<=", "<"]


class _Node(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class Share(_Node):
    """A part's share of the training step (tinygpt-train), a fraction from 0 to 1."""

    op: Literal["share"]
    kernel: StepPart
    backend: BackendName
    config: ConfigName


class Amdahl(_Node):
    """A kernel's Amdahl bound (tinygpt-train): the step's speedup if the kernel took no time."""

    op: Literal["amdahl"]
    kernel: BoundedKernel
    backend: BackendName
    config: ConfigName


# A part with a floor: every kernel and op (not what none took), or the whole step.
FloorPart = Literal[
    "forward",
    "backward_da",
    "backward_db",
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
    "step",
]


class FloorRatio(_Node):
    """How many times its floor (its roofline on the machine's cached ceilings) a part of the
    training step took (tinygpt-train): its ms per step over its floor's."""

    op: Literal["floor_ratio"]
    kernel: FloorPart
    backend: BackendName
    config: ConfigName


class MsPerStep(_Node):
    """Milliseconds per training step (tinygpt-train): the median over repeats."""

    op: Literal["ms_per_step"]
    backend: BackendName
    config: ConfigName


class Gflops(_Node):
    """GFLOP/s (kernels): of one kernel at one layer, of one kernel over a step's layers, or of
    a step's linear layers (``step``)."""

    op: Literal["gflops"]
    kernel: GflopsPart
    backend: BackendName
    config: ConfigName
    layer: LayerName | None = None


class Speedup(_Node):
    """How many times faster ``backend`` is than ``over`` in the same run and config."""

    op: Literal["speedup"]
    backend: BackendName
    over: BackendName
    config: ConfigName


# A metric is named as an evaluator declares it (records/evaluator.py METRIC_PATTERN).
MetricName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


T = TypeVar("T")


def _two_arms(node: T) -> T:
    """``node`` when it reads two arms, refused when it reads one arm against itself: no run
    records an arm against itself, so such a node is never decidable."""
    arm, over = getattr(node, "arm", None), getattr(node, "over", None)
    if arm == over:
        raise ValueError(f"{getattr(node, 'op', '')} compares arm {arm} with itself; give two arms")
    return node


class MetricValue(_Node):
    """A metric's mean over an arm's repeats, with its 95% interval (a run of arms)."""

    op: Literal["metric"]
    metric: MetricName
    arm: BackendName


class Diff(_Node):
    """An arm's metric minus another arm's, paired by item or by round, with its 95% interval
    (a metric compared as a difference)."""

    op: Literal["diff"]
    metric: MetricName
    arm: BackendName
    over: BackendName

    @model_validator(mode="after")
    def _two_arms(self) -> Diff:
        return _two_arms(self)


class MetricRatio(_Node):
    """An arm's metric over another arm's, paired by round, with its 95% interval (a metric
    compared as a ratio)."""

    op: Literal["ratio"]
    metric: MetricName
    arm: BackendName
    over: BackendName

    @model_validator(mode="after")
    def _two_arms(self) -> MetricRatio:
        return _two_arms(self)


class ItemCount(_Node):
    """How many items (or rounds, where the arms wrote no items) an arm won, lost or tied
    against another on a metric compared as a difference: a count, never an interval."""

    op: Literal["won", "lost", "tied"]
    metric: MetricName
    arm: BackendName
    over: BackendName

    @model_validator(mode="after")
    def _two_arms(self) -> ItemCount:
        return _two_arms(self)


Quantity = Annotated[
    Share | Amdahl | FloorRatio | MsPerStep | Gflops | Speedup | MetricValue | Diff | MetricRatio | ItemCount,
    Field(discriminator="op"),
]


class Low(_Node):
    """The lower bound of a quantity's 95% interval, as a point."""

    op: Literal["low"]
    of: Quantity


class High(_Node):
    """The upper bound of a quantity's 95% interval, as a point."""

    op: Literal["high"]
    of: Quantity


class Neg(_Node):
    """A quantity negated: its value's sign flipped and its interval's ends swapped."""

    op: Literal["neg"]
    of: Quantity


class Number(_Node):
    """A literal; negative for a difference that may fall below zero (a non-inferiority margin)."""

    op: Literal["number"]
    value: float = Field(allow_inf_nan=False)


Operand = Annotated[
    Number
    | Share
    | Amdahl
    | FloorRatio
    | MsPerStep
    | Gflops
    | Speedup
    | MetricValue
    | Diff
    | MetricRatio
    | ItemCount
    | Low
    | High
    | Neg,
    Field(discriminator="op"),
]


class Compare(_Node):
    op: Literal["compare"]
    cmp: Comparator
    left: Operand
    right: Operand

    @model_validator(mode="after")
    def _measures(self) -> Compare:
        # two numbers compare the same on every run: such a condition decides nothing
        if isinstance(self.left, Number) and isinstance(self.right, Number):
            raise ValueError(
                "a comparison of two numbers names no measurement; compare a function of the run, "
                "such as share(...) >= 0.3"
            )
        return self


class Verdict(_Node):
    """How arm stands against over on a metric, its margin taken from the analysis plan:
    ``better`` or ``worse`` by more than the margin, or ``equivalent`` (within it either way)."""

    op: Literal["better", "worse", "equivalent"]
    metric: MetricName
    arm: BackendName
    over: BackendName

    @model_validator(mode="after")
    def _two_arms(self) -> Verdict:
        return _two_arms(self)


class And(_Node):
    op: Literal["and"]
    args: list[Condition] = Field(min_length=2)


class Or(_Node):
    op: Literal["or"]
    args: list[Condition] = Field(min_length=2)


class Not(_Node):
    op: Literal["not"]
    arg: Condition


Condition = Annotated[Compare | Verdict | And | Or | Not, Field(discriminator="op")]
QuantityNode = Share | Amdahl | FloorRatio | MsPerStep | Gflops | Speedup | MetricValue | Diff | MetricRatio | ItemCount
OperandNode = Number | QuantityNode | Low | High | Neg
ConditionNode = Compare | Verdict | And | Or | Not
# What reads two arms on one metric, so that the gate can check it against the evaluator.
ArmsNode = MetricValue | Diff | MetricRatio | ItemCount | Verdict


class ConditionError(UnusableInput):
    """A condition that cannot be used, as one line naming the column of the problem."""

    def __init__(self, column: int, problem: str, what: str = "continue-if"):
        super().__init__(f"{what} condition, column {column}: {problem}")
        self.column = column
        self.problem = problem
        self.what = what


# --------------------------------------------------------------------------- the functions


@dataclass(frozen=True)
class Signature:
    """A function's parameters in positional order; the first ``positional`` of them are
    written without their name in the canonical text."""

    params: tuple[str, ...]
    optional: tuple[str, ...] = ()
    positional: int = 0


FUNCTIONS: Final[dict[str, Signature]] = {
    "share": Signature(("kernel", "backend", "config"), positional=1),
    "amdahl": Signature(("kernel", "backend", "config"), positional=1),
    "floor_ratio": Signature(("kernel", "backend", "config"), positional=1),
    "ms_per_step": Signature(("backend", "config")),
    "gflops": Signature(("kernel", "backend", "config", "layer"), optional=("layer",), positional=1),
    "speedup": Signature(("backend", "over", "config"), positional=1),
    "metric": Signature(("metric", "arm"), positional=1),
    "diff": Signature(("metric", "arm", "over"), positional=1),
    "ratio": Signature(("metric", "arm", "over"), positional=1),
    "won": Signature(("metric", "arm", "over"), positional=1),
    "lost": Signature(("metric", "arm", "over"), positional=1),
    "tied": Signature(("metric", "arm", "over"), positional=1),
    "low": Signature(("of",), positional=1),
    "high": Signature(("of",), positional=1),
    "better": Signature(("metric", "arm", "over"), positional=1),
    "worse": Signature(("metric", "arm", "over"), positional=1),
    "equivalent": Signature(("metric", "arm", "over"), positional=1),
}
# The functions that are a verdict (a condition of their own), not a quantity to compare.
VERDICTS: Final = ("better", "worse", "equivalent")
QUANTITY_MODELS: Final[dict[str, type[QuantityNode]]] = {
    "share": Share,
    "amdahl": Amdahl,
    "floor_ratio": FloorRatio,
    "ms_per_step": MsPerStep,
    "gflops": Gflops,
    "speedup": Speedup,
    "metric": MetricValue,
    "diff": Diff,
    "ratio": MetricRatio,
    "won": ItemCount,
    "lost": ItemCount,
    "tied": ItemCount,
}
BOUND_MODELS: Final[dict[str, type[Low | High]]] = {"low": Low, "high": High}


# --------------------------------------------------------------------------- canonical text


def number_text(value: float) -> str:
    """A literal as the canonical text writes it: the shortest text that reads back the same
    (a whole number without its '.0')."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def operand_text(node: OperandNode | Verdict) -> str:
    if isinstance(node, Number):
        return number_text(node.value)
    if isinstance(node, Low | High):
        return f"{node.op}({operand_text(node.of)})"
    if isinstance(node, Neg):
        return f"-{operand_text(node.of)}"
    signature = FUNCTIONS[node.op]
    values = [(p, getattr(node, p)) for p in signature.params if getattr(node, p) is not None]
    args = [v if i < signature.positional else f"{p}={v}" for i, (p, v) in enumerate(values)]
    return f"{node.op}({', '.join(args)})"


def render(node: ConditionNode) -> str:
    """The canonical text of a condition; parsing it gives the same tree back. A boolean inside
    ``and``, ``or`` or ``not`` is parenthesised, so that no reader needs the precedence rules."""
    if isinstance(node, Compare):
        return f"{operand_text(node.left)} {node.cmp} {operand_text(node.right)}"
    if isinstance(node, Verdict):
        return operand_text(node)
    if isinstance(node, Not):
        inner = render(node.arg)
        return f"not {inner}" if isinstance(node.arg, Compare | Verdict | Not) else f"not ({inner})"
    parts = [render(a) if isinstance(a, Compare | Verdict | Not) else f"({render(a)})" for a in node.args]
    return f" {node.op} ".join(parts)


def depth(node: ConditionNode | OperandNode) -> int:
    """Levels of the stored tree, the root at 1, found without recursion (a hand-edited record
    may nest deeper than the parser ever allows)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(current, And | Or):
            stack.extend((a, level + 1) for a in current.args)
        elif isinstance(current, Not):
            stack.append((current.arg, level + 1))
        elif isinstance(current, Compare):
            stack.extend(((current.left, level + 1), (current.right, level + 1)))
        elif isinstance(current, Low | High | Neg):
            stack.append((current.of, level + 1))
    return deepest


def quantities(node: ConditionNode) -> list[QuantityNode]:
    """Every quantity the condition reads, left to right."""
    found: list[QuantityNode] = []
    stack: list[ConditionNode | OperandNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, And | Or):
            stack.extend(reversed(current.args))
        elif isinstance(current, Not):
            stack.append(current.arg)
        elif isinstance(current, Compare):
            stack.extend((current.right, current.left))
        elif isinstance(current, Low | High | Neg):
            stack.append(current.of)
        elif not isinstance(current, Number | Verdict):
            found.append(current)
    return found


def verdicts(node: ConditionNode) -> list[Verdict]:
    """Every verdict (better, worse, equivalent) the condition asks, left to right."""
    found: list[Verdict] = []
    stack: list[ConditionNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, And | Or):
            stack.extend(reversed(current.args))
        elif isinstance(current, Not):
            stack.append(current.arg)
        elif isinstance(current, Verdict):
            found.append(current)
    return found


def answer_needed(next_action: str | None, truth: bool | None) -> bool:
    """Whether a proposal that varies an attempt must answer its disposition in words: a
    retained disposition must be answered, unless its condition holds on the numbers (``truth``,
    None when there is no condition or it cannot be decided), which then answer it. The gate's
    check, its questions and `ptreg next` all ask this."""
    return next_action is not None and truth is not True
