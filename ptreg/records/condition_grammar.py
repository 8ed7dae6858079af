"""Parsing a continue-if condition: its grammar (lark, LALR), and the checks that turn a parse
tree into the stored one (``condition.py``), each problem named by its column.

The text is never evaluated as Python: lark reads it into a tree of the grammar below, and
every function, parameter and name in that tree is looked up in fixed tables. Backend names
hold hyphens (``blocked-numpy``), which Python's own parser would read as subtraction; this
grammar reads them as names. docs/conditions.md documents the language.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from ..text import printable, shorten
from .condition import (
    BACKEND_PATTERN,
    BOUND_MODELS,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_TEXT,
    QUANTITY_MODELS,
    VERDICTS,
    And,
    BoundedKernel,
    Compare,
    ConditionError,
    ConditionNode,
    FloorPart,
    GflopsPart,
    High,
    Low,
    Neg,
    Not,
    Number,
    OperandNode,
    Or,
    QuantityNode,
    StepPart,
    Verdict,
    render,
)
from .configs import ConfigName, LayerName
from .decision import missing

if TYPE_CHECKING:
    from lark import Lark, Token, Tree

    from .run_results import RunResults

GRAMMAR = r"""
?start: disjunction

?disjunction: conjunction ("or" conjunction)*
?conjunction: negation ("and" negation)*
?negation: "not" negation                -> negated
         | comparison
         | call                          -> verdict
         | "(" disjunction ")"           -> group

comparison: operand COMPARATOR operand
?operand: NUMBER                         -> number
        | MINUS operand                  -> negative
        | call

call: NAME "(" [argument ("," argument)*] ")"
?argument: NAME "=" value                -> keyword
         | value
?value: NAME
      | call

COMPARATOR: ">=" | "<=" | ">" | "<"
MINUS: "-"
NUMBER.2: /([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?/
NAME: /[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9-]+)*(@[a-z0-9][a-z0-9-]*)?/

%ignore /[ \t]+/
"""
# Digits are ASCII only: a regular expression's \d also matches every other script's digits
# (Bengali ৪ looks like 8 and is 4), and Python's float() reads them all.

# The names a parameter may take, per function where they differ.
KERNEL_CHOICES: dict[str, tuple[str, ...]] = {
    "share": get_args(StepPart),
    "amdahl": get_args(BoundedKernel),
    "floor_ratio": get_args(FloorPart),
    "gflops": get_args(GflopsPart),
}
CONFIG_CHOICES: tuple[str, ...] = get_args(ConfigName)
LAYER_CHOICES: tuple[str, ...] = get_args(LayerName)
BACKEND_RE = re.compile(BACKEND_PATTERN)
METRIC_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# The parse-tree nodes that are a level of nesting: every boolean, group, comparison and call.
LEVELS = frozenset({"disjunction", "conjunction", "negated", "group", "comparison", "call", "negative"})
# The functions whose parameters name arms and a metric (a run of arms).
ARMS_FUNCTIONS = frozenset({"metric", "diff", "ratio", "won", "lost", "tied", *VERDICTS})
# How an expected terminal reads in a message.
TERMINALS = {
    "COMPARATOR": "a comparison (>=, >, <=, <)",
    "MINUS": "'-'",
    "NUMBER": "a number",
    "NAME": "a name",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "EQUAL": "'='",
    "AND": "'and'",
    "OR": "'or'",
    "NOT": "'not'",
    "$END": "the end",
}


@cache
def _parser() -> Lark:
    # lark costs about 80 ms to import: only where a condition is parsed (never by show or list)
    from lark import Lark

    return Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def parse(text: str, against: RunResults | None = None, what: str = "continue-if") -> ConditionNode:
    """The tree of ``text``; with ``against``, every cell, layer and ratio it names must be one
    that run records. Raises ``ConditionError`` naming ``what`` condition it is and the column
    of the first problem."""
    try:
        return _parse(text, against)
    except ConditionError as exc:
        if what == exc.what:
            raise
        raise ConditionError(exc.column, exc.problem, what) from None


def _parse(text: str, against: RunResults | None) -> ConditionNode:
    if not isinstance(text, str):
        raise ConditionError(1, "the condition is not text")
    if len(text) > MAX_TEXT:
        raise ConditionError(MAX_TEXT + 1, f"the condition is {len(text):,} characters long; at most {MAX_TEXT:,}")
    if not text.strip():
        raise ConditionError(1, "the condition is empty; write one such as share(forward, backend=B, config=C) >= 0.3")
    tree = _lark_tree(text)
    _check_depth(tree)
    condition = _Builder(against).condition(tree)
    canonical = len(render(condition))  # what a record stores (names added to positional arguments)
    if canonical > MAX_TEXT:
        raise ConditionError(
            1, f"the condition's canonical text is {canonical:,} characters long; at most {MAX_TEXT:,}"
        )
    return condition


def disagreement(text: str, tree: ConditionNode) -> tuple[str, str] | None:
    """Why a stored condition cannot be believed: its text no longer parses (``("text", why)``),
    or parses to another tree than the one stored beside it (``("tree", why)``); None when the
    two agree. The tree is what gets decided and the text what people read, so a record whose
    two say different things is not a record (``records/registry.py``). A text that is the
    tree's canonical text, as ``conclude`` stores it, agrees without being parsed, so that reading
    a record needs no parser (``show``, ``list`` and the gate never load lark)."""
    if text == render(tree):
        return None
    try:
        parsed = parse(text)
    except ConditionError as exc:
        return "text", f"the condition's text does not parse, at column {exc.column}: {exc.problem}"
    if parsed.model_dump(mode="json") != tree.model_dump(mode="json"):
        return "tree", (
            f"the stored tree reads {shorten(render(tree), 120)}, not the condition's text {shorten(text, 120)}; "
            "set the condition again with `ptreg conclude --continue-if`"
        )
    return None


def _lark_tree(text: str) -> Tree[Token]:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    try:
        return _parser().parse(text)
    except UnexpectedCharacters as exc:
        at = exc.pos_in_stream if isinstance(exc.pos_in_stream, int) else len(text)
        shown = printable(repr(text[at])) if at < len(text) else "the end"
        raise ConditionError(at + 1, f"unexpected character {shown}{_outside_hint(text[at:])}") from None
    except UnexpectedToken as exc:
        end = exc.token.type == "$END"
        column = len(text) + 1 if end or not isinstance(exc.column, int) else exc.column
        got = "end of the condition" if end else shorten(str(exc.token.value), 40)
        hint = (
            " (the language has no arithmetic: '-' only negates a number or a quantity)"
            if exc.token.type == "MINUS"
            else ""
        )
        raise ConditionError(column, f"unexpected {got}{_expected(exc.expected)}{hint}") from None
    except UnexpectedEOF as exc:
        raise ConditionError(len(text) + 1, f"unexpected end of the condition{_expected(exc.expected)}") from None


def _outside_hint(rest: str) -> str:
    """Why a character that Python would accept is refused: the language has none of it."""
    if rest[:1] in ("'", '"'):
        return " (the language has no strings: names are written bare, numbers as digits)"
    if rest[:1] == ".":
        return " (the language has no attribute access)"
    if rest[:1].isnumeric() and not rest[:1].isascii():
        return " (not an ASCII digit: numbers are written with 0-9 only)"
    if rest[:1] in "[]{}:;+*/%@|&^~!-":
        return " (outside the language: only functions, comparisons, and, or, not and numbers)"
    return ""


def _expected(names: Any) -> str:
    shown = sorted({TERMINALS.get(n, "") for n in names or ()} - {""})
    return f"; expected {' or '.join(shown)}" if shown else ""


def _check_depth(tree: Tree[Token]) -> None:
    """Refuse nesting over MAX_DEPTH levels, without recursion: a 2,000-character condition
    can nest a thousand levels, past what the recursive steps after this one may take."""
    from lark import Tree

    stack: list[tuple[Tree[Token], int]] = [(tree, 1 if tree.data in LEVELS else 0)]
    while stack:
        node, level = stack.pop()
        if level > MAX_DEPTH:
            raise ConditionError(_column(node), f"the condition nests more than {MAX_DEPTH} levels deep")
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, level + (1 if child.data in LEVELS else 0)))


def _column(node: Any) -> int:
    column = getattr(node, "column", None)
    if column is None:
        column = getattr(getattr(node, "meta", None), "column", None)
    return column if isinstance(column, int) else 1


def _choice(what: str, value: str, choices: tuple[str, ...], column: int, context: str) -> str:
    if value in choices:
        return value
    close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ConditionError(
        column, f"unknown {what} {shorten(value, 40)} for {context} (one of: {', '.join(choices)}){hint}"
    )


class _Builder:
    """From lark's parse tree to the stored tree; the depth is already bounded, so recursion is."""

    def __init__(self, against: RunResults | None):
        self.against = against

    def condition(self, node: Tree[Token]) -> ConditionNode:
        kind = node.data
        if kind == "group":
            return self.condition(node.children[0])  # type: ignore[arg-type]
        if kind == "negated":
            return Not(op="not", arg=self.condition(node.children[0]))  # type: ignore[arg-type]
        if kind in ("disjunction", "conjunction"):
            args = [self.condition(c) for c in node.children]  # type: ignore[arg-type]
            return Or(op="or", args=args) if kind == "disjunction" else And(op="and", args=args)
        if kind == "verdict":
            return self.verdict(node.children[0])  # type: ignore[arg-type]
        if kind == "comparison":
            left, comparator, right = node.children
            operands = self.operand(left), self.operand(right)  # type: ignore[arg-type]
            try:
                return Compare(op="compare", cmp=str(comparator), left=operands[0], right=operands[1])  # type: ignore[arg-type]
            except ValidationError as exc:  # the stored tree's own rule (condition.py), at its column
                raise ConditionError(_column(node), exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
        raise ConditionError(_column(node), "expected a comparison such as share(...) >= 0.3")

    def verdict(self, node: Tree[Token]) -> Verdict:
        """A call standing alone: it must be a verdict (better, worse, equivalent)."""
        name, given, column = self._arguments(node)
        if name not in VERDICTS:
            raise ConditionError(
                column,
                f"{name}(...) is a quantity, not a verdict: compare it with a number, e.g. {name}(...) >= 0.3; "
                f"only {', '.join(VERDICTS)} stand alone",
            )
        values = self._names(name, given)
        verdict = Verdict.model_validate({"op": name, **values})
        if self.against is not None:
            why = missing(verdict, self.against)
            if why is not None:
                raise ConditionError(column, why)
        return verdict

    def operand(self, node: Tree[Token]) -> OperandNode:
        from lark import Tree

        if node.data == "negative":
            inner = node.children[1]
            assert isinstance(inner, Tree)
            if inner.data == "negative":
                raise ConditionError(_column(inner), "a minus sign twice; write the number or quantity once")
            operand = self.operand(inner)
            if isinstance(operand, Number):
                return Number(op="number", value=-operand.value if operand.value else 0.0)
            if isinstance(operand, Low | High):
                raise ConditionError(_column(node), f"'-' takes a number or a quantity, not {operand.op}(...)")
            return Neg(op="neg", of=operand)  # type: ignore[arg-type]
        if node.data == "number":
            token = node.children[0]
            literal = str(token)
            value = float(literal)
            mantissa = literal.lower().partition("e")[0]
            # too large for a double, or so small it reads as 0 although a digit is not 0
            if value == float("inf") or (value == 0 and mantissa.strip("0.")):
                raise ConditionError(_column(token), f"the number {shorten(literal, 40)} is out of range")
            return Number(op="number", value=value)
        return self.call(node)

    def call(self, node: Tree[Token]) -> OperandNode:
        """A quantity, or the bound of one."""
        from lark import Tree

        name, given, _ = self._arguments(node)
        if name not in BOUND_MODELS:
            return self._quantity(node)
        inner, at = given["of"]
        if not isinstance(inner, Tree) or str(inner.children[0]) not in QUANTITY_MODELS:
            raise ConditionError(at, f"{name} takes a quantity such as speedup(...), not {self._shown(inner)}")
        return BOUND_MODELS[name].model_validate({"op": name, "of": self._quantity(inner)})

    def _quantity(self, node: Tree[Token]) -> QuantityNode:
        name, given, column = self._arguments(node)
        if name in VERDICTS:
            raise ConditionError(
                column,
                f"{name}(...) is a verdict, not a number: write it on its own, e.g. {name}(score, arm=A, over=B) and ...",
            )
        values = self._names(name, given)
        if "over" in values and "arm" in values and values["arm"] == values["over"]:
            raise ConditionError(column, f"{name} compares arm {values['arm']} with itself; give two arms")
        quantity: QuantityNode = QUANTITY_MODELS[name].model_validate({"op": name, **values})
        if self.against is not None:
            why = missing(quantity, self.against)
            if why is not None:
                raise ConditionError(column, why)
        return quantity

    def _names(self, name: str, given: dict[str, tuple[Token | Tree[Token], int]]) -> dict[str, str]:
        """Each parameter's value, which must be a bare name of its kind."""
        from lark import Token

        values: dict[str, str] = {}
        for param, (value, at) in given.items():
            if not isinstance(value, Token):
                raise ConditionError(at, f"{name}'s {param} is a name, not {self._shown(value)}")
            values[param] = self._name(name, param, str(value), at)
        return values

    def _arguments(self, node: Tree[Token]) -> tuple[str, dict[str, tuple[Token | Tree[Token], int]], int]:
        """The function's name, each parameter's value and column, and the call's column."""
        from lark import Tree

        name_token, *rest = node.children
        name = str(name_token)
        column = _column(name_token)
        signature = FUNCTIONS.get(name)
        if signature is None:
            close = difflib.get_close_matches(name.lower(), list(FUNCTIONS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConditionError(
                column, f"unknown function {shorten(name, 40)} (the functions: {', '.join(sorted(FUNCTIONS))}){hint}"
            )
        given: dict[str, tuple[Token | Tree[Token], int]] = {}
        positional = 0
        seen_keyword = False
        for argument in (a for a in rest if a is not None):
            if isinstance(argument, Tree) and argument.data == "keyword":
                key, value = argument.children
                param, at = str(key), _column(key)
                if param not in signature.params:
                    raise ConditionError(
                        _column(key),
                        f"{name} has no parameter {shorten(param, 40)} (its parameters: {', '.join(signature.params)})",
                    )
                seen_keyword = True
            else:
                if seen_keyword:
                    raise ConditionError(_column(argument), f"a positional argument of {name} after a named one")
                if positional >= len(signature.params):
                    raise ConditionError(_column(argument), f"{name} takes at most {len(signature.params)} argument(s)")
                param, value, at = signature.params[positional], argument, _column(argument)
                positional += 1
            if param in given:
                raise ConditionError(at, f"{name}'s {param} is given twice")
            given[param] = (value, _column(value))
        for param in signature.params:
            if param not in given and param not in signature.optional:
                raise ConditionError(column, f"{name} needs its {param}: {name}({self._usage(name)})")
        return name, given, column

    @staticmethod
    def _name(function: str, param: str, value: str, column: int) -> str:
        context = f"{function}'s {param}"
        if param == "kernel":
            return _choice("kernel", value, KERNEL_CHOICES[function], column, context)
        if param == "config":
            return _choice("config", value, CONFIG_CHOICES, column, context)
        if param == "layer":
            return _choice("layer", value, LAYER_CHOICES, column, context)
        if param == "metric":
            if not METRIC_RE.fullmatch(value):
                raise ConditionError(
                    column,
                    f"{shorten(value, 40)} is not a metric name (lowercase letters, digits and '_', a letter first)",
                )
            return value
        if param in ("arm", "over") and function in ARMS_FUNCTIONS:
            if not BACKEND_RE.fullmatch(value) or len(value) > 128:
                raise ConditionError(
                    column, f"{shorten(value, 40)} is not an arm name (lowercase letters, digits, '-' and '.')"
                )
            return value
        if not BACKEND_RE.fullmatch(value) or len(value) > 128:
            raise ConditionError(
                column, f"{shorten(value, 40)} is not a backend name (lowercase letters, digits, '-' and '.')"
            )
        return value

    @staticmethod
    def _usage(name: str) -> str:
        signature = FUNCTIONS[name]
        return ", ".join(
            p.upper() if i < signature.positional else f"{p}={p.upper()}" for i, p in enumerate(signature.params)
        )

    def _shown(self, value: Any) -> str:
        from lark import Tree

        if isinstance(value, Tree):
            return f"a call of {shorten(str(value.children[0]), 40)}"
        return f"the name {shorten(str(value), 40)}"
