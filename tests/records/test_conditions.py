"""The continue-if language: parsing into the stored tree and back to text, deciding a tree on
a run's results (points, intervals, three-valued logic), and a corpus of hostile conditions,
each refused with one line naming a column, none running code or touching a file."""

from __future__ import annotations

import builtins
import io
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from helpers import SCHEMAS, complete_record, step_cell, step_results
from ptreg.engine.backends import OP_METHODS, OPS
from ptreg.records.attempt import Attempt
from ptreg.records.condition import (
    BACKEND_PATTERN,
    MAX_DEPTH,
    MAX_TEXT,
    BoundedKernel,
    ConditionError,
    StepPart,
    depth,
    render,
)
from ptreg.records.condition_grammar import parse
from ptreg.records.configs import CONFIGS, LayerName, linear_shapes
from ptreg.records.decision import WHOLE_STEP_PARTS, decide
from ptreg.records.refs import ID_PATTERN
from ptreg.records.registry import parse_record
from ptreg.records.run_results import KERNELS, STEP_OPS, Cell, KernelTiming, RunResults
from ptreg.site.charts import PARTS

RUN = "20261201T092700Z"


def xl_run(version: int = 3) -> RunResults:
    """numba: dB 31% of the step, 1000 ms (990-1010), 0.68x numpy-blas (0.65-0.72), 10x naive
    (9.5-10.5); numpy-blas 500 ms; naive 10 s. Version 1 keeps the points and no interval."""
    ci = version > 1
    cells = [
        step_cell("naive", "xl", ms=10000, shares=(0.32, 0.33, 0.32), vs_naive=1.0, vs_baseline=0.05),
        step_cell(
            "numba",
            "xl",
            ms=1000,
            shares=(0.24, 0.2, 0.31),
            ms_ci=(990, 1010) if ci else None,
            vs_naive=10.0,
            vs_naive_ci=(9.5, 10.5) if ci else None,
            vs_baseline=0.68,
            vs_baseline_ci=(0.65, 0.72) if ci else None,
        ),
        step_cell("numpy-blas", "xl", ms=500, shares=(0.16, 0.16, 0.16), vs_naive=20.0, vs_baseline=1.0),
        step_cell("blocked-numpy", "xl", ms=5000, shares=(0.3, 0.3, 0.33), vs_naive=2.0, vs_baseline=0.1),
    ]
    return RunResults.model_validate(step_results("a", RUN, cells, version=version))


def truth(text: str, results: RunResults | None = None) -> bool | None:
    return decide(parse(text), results or xl_run()).truth


# --------------------------------------------------------------------------- parsing and text


def test_the_issue_examples_parse_to_the_documented_tree() -> None:
    tree = parse(
        "share(backward_db, backend=blocked-numpy, config=xl) >= 0.30 or speedup(numba, over=numpy-blas, config=xl) < 0.7"
    )
    assert tree.model_dump(mode="json", exclude_none=True) == {
        "op": "or",
        "args": [
            {
                "op": "compare",
                "cmp": ">=",
                "left": {"op": "share", "kernel": "backward_db", "backend": "blocked-numpy", "config": "xl"},
                "right": {"op": "number", "value": 0.3},
            },
            {
                "op": "compare",
                "cmp": "<",
                "left": {"op": "speedup", "backend": "numba", "over": "numpy-blas", "config": "xl"},
                "right": {"op": "number", "value": 0.7},
            },
        ],
    }


def test_positional_and_named_arguments_give_one_tree_and_one_canonical_text() -> None:
    forms = [
        "share(backward_db, numba, xl) >= 0.3",
        "share(backward_db, backend=numba, config=xl) >= 0.30",
        "share(kernel=backward_db, config=xl, backend=numba)>=.3",
        "  share( backward_db ,\tnumba , config = xl )  >=  3e-1 ",
    ]
    trees = [parse(f) for f in forms]
    assert all(t == trees[0] for t in trees)
    assert render(trees[0]) == "share(backward_db, backend=numba, config=xl) >= 0.3"


def test_precedence_not_over_and_over_or_and_parentheses_kept_in_the_text() -> None:
    a, b, c = (f"ms_per_step(backend=numba, config={x}) < 1" for x in ("small", "large", "xl"))
    assert parse(f"{a} or {b} and {c}").op == "or"
    assert parse(f"({a} or {b}) and {c}").op == "and"
    assert render(parse(f"not {a} and {b}")) == f"not {a} and {b}"
    assert render(parse(f"not ({a} and {b})")) == f"not ({a} and {b})"
    assert render(parse(f"{a} or ({b} or {c})")) == f"{a} or ({b} or {c})"


KERNEL = st.sampled_from(get_args(StepPart))
BACKEND = st.sampled_from(["naive", "numba", "blocked-numpy", "numpy-blas", "x.y-2"])
CONFIG = st.sampled_from(tuple(CONFIGS))
QUANTITY = st.one_of(
    st.builds(lambda k, b, c: f"share({k}, backend={b}, config={c})", KERNEL, BACKEND, CONFIG),
    st.builds(
        lambda k, b, c: f"amdahl({k}, backend={b}, config={c})",
        st.sampled_from(get_args(BoundedKernel)),
        BACKEND,
        CONFIG,
    ),
    st.builds(lambda b, c: f"ms_per_step(backend={b}, config={c})", BACKEND, CONFIG),
    st.builds(
        lambda k, b, c, layer: f"gflops({k}, backend={b}, config={c}" + (f", layer={layer})" if layer else ")"),
        st.sampled_from(["forward", "step"]),
        BACKEND,
        CONFIG,
        st.one_of(st.none(), st.sampled_from(get_args(LayerName))),
    ),
    st.builds(lambda b, o, c: f"speedup({b}, over={o}, config={c})", BACKEND, BACKEND, CONFIG),
)
MEASURED = st.one_of(QUANTITY, st.builds(lambda f, q: f"{f}({q})", st.sampled_from(["low", "high"]), QUANTITY))
NUMBER = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(repr)
OPERAND = st.one_of(MEASURED, NUMBER)
COMPARATOR = st.sampled_from([">=", ">", "<=", "<"])
# a comparison names a measurement on one side at least (two numbers decide nothing)
COMPARISON = st.one_of(
    st.builds(lambda a, op, b: f"{a} {op} {b}", MEASURED, COMPARATOR, OPERAND),
    st.builds(lambda a, op, b: f"{a} {op} {b}", NUMBER, COMPARATOR, MEASURED),
)
CONDITION = st.recursive(
    COMPARISON,
    lambda inner: st.one_of(
        st.builds(lambda a: f"not ({a})", inner),
        st.builds(lambda a, b, op: f"({a}) {op} ({b})", inner, inner, st.sampled_from(["and", "or"])),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(CONDITION)
def test_the_canonical_text_parses_back_to_the_same_tree(text: str) -> None:
    tree = parse(text)
    assert parse(render(tree)) == tree
    assert render(parse(render(tree))) == render(tree)


def test_the_language_names_what_the_formats_name() -> None:
    # a backend is a slug, or one taken at a revision's label (numba@before)
    assert ID_PATTERN.removesuffix("$") + "(@[a-z0-9][a-z0-9-]*)?$" == BACKEND_PATTERN
    assert get_args(BoundedKernel) == (*KERNELS, *STEP_OPS)
    assert get_args(StepPart) == (*KERNELS, *STEP_OPS, "other")
    assert (*KERNELS, "other") == WHOLE_STEP_PARTS
    assert tuple(OP_METHODS) == STEP_OPS == OPS
    assert (*KERNELS, *STEP_OPS, "other") == PARTS
    assert get_args(LayerName) == tuple(s.name for s in linear_shapes(CONFIGS["xl"]))


# --------------------------------------------------------------------------- deciding


@pytest.mark.parametrize(
    "text, expected",
    [
        ("share(backward_db, backend=numba, config=xl) >= 0.3", True),
        ("share(backward_db, backend=numba, config=xl) >= 0.31", True),  # a point on the threshold
        ("share(backward_db, backend=numba, config=xl) > 0.31", False),
        ("share(backward_db, backend=numba, config=xl) > 0.4", False),
        ("share(other, backend=numba, config=xl) < 0.3", True),  # 1 - 0.24 - 0.2 - 0.31 = 0.25
        ("amdahl(backward_db, backend=numba, config=xl) >= 1.44", True),  # 1 / 0.69 = 1.449...
        ("amdahl(backward_db, backend=numba, config=xl) >= 1.45", False),
        ("share(backward_db, backend=numba, config=xl) > share(forward, backend=numba, config=xl)", True),
        # an interval is decided only when all of it is on one side
        ("ms_per_step(backend=numba, config=xl) < 1020", True),
        ("ms_per_step(backend=numba, config=xl) < 1000", None),
        ("ms_per_step(backend=numba, config=xl) < 980", False),
        ("ms_per_step(backend=numba, config=xl) <= 1010", True),
        ("ms_per_step(backend=numba, config=xl) < 1010", None),
        ("speedup(numba, over=numpy-blas, config=xl) < 0.7", None),
        ("speedup(numba, over=numpy-blas, config=xl) < 0.75", True),
        ("speedup(numba, over=numpy-blas, config=xl) >= 0.7", None),
        ("speedup(numba, over=naive, config=xl) > 9", True),
        # the bounds of an interval are points
        ("low(speedup(numba, over=numpy-blas, config=xl)) >= 0.65", True),
        ("high(speedup(numba, over=numpy-blas, config=xl)) < 0.7", False),
        ("low(ms_per_step(backend=numba, config=xl)) > 985", True),
        # two intervals: decided only when they do not overlap
        ("ms_per_step(backend=numba, config=xl) > ms_per_step(backend=numpy-blas, config=xl)", True),
        # Kleene: false and unknown is false, true or unknown is true
        ("ms_per_step(backend=numba, config=xl) < 980 and speedup(numba, over=numpy-blas, config=xl) < 0.7", False),
        ("ms_per_step(backend=numba, config=xl) < 1020 or speedup(numba, over=numpy-blas, config=xl) < 0.7", True),
        ("ms_per_step(backend=numba, config=xl) < 1020 and speedup(numba, over=numpy-blas, config=xl) < 0.7", None),
        ("ms_per_step(backend=numba, config=xl) < 980 or speedup(numba, over=numpy-blas, config=xl) < 0.7", None),
        ("not speedup(numba, over=numpy-blas, config=xl) < 0.7", None),
        ("not ms_per_step(backend=numba, config=xl) < 980", True),
        ("not not ms_per_step(backend=numba, config=xl) < 980", False),
    ],
)
def test_decisions_on_a_run_with_intervals(text: str, expected: bool | None) -> None:
    assert truth(text) is expected


def test_a_run_without_intervals_compares_points_and_never_guesses_a_bound() -> None:
    old = xl_run(version=1)
    assert truth("speedup(numba, over=numpy-blas, config=xl) < 0.7", old) is True
    assert truth("ms_per_step(backend=numba, config=xl) < 1000.5", old) is True
    decision = decide(parse("low(speedup(numba, over=numpy-blas, config=xl)) > 0.5"), old)
    assert decision.truth is None
    assert "without an interval" in decision.summary()


def test_what_the_run_does_not_record_is_undecidable_with_the_reason() -> None:
    decision = decide(parse("speedup(numba, over=blocked-numpy, config=xl) > 1"), xl_run())
    assert decision.truth is None
    assert "records speedups over naive and numpy-blas only" in decision.summary()
    decision = decide(parse("share(forward, backend=numba, config=small) > 0.1"), xl_run())
    assert decision.truth is None and "has no cell numba/small" in decision.summary()
    decision = decide(parse("gflops(step, backend=numba, config=xl) > 1"), xl_run())
    assert decision.truth is None and "does not record (it measured tinygpt-train)" in decision.summary()


def test_an_op_share_is_read_from_a_run_that_timed_ops_and_unknown_before() -> None:
    data = xl_run(version=5).model_dump(mode="json")
    decision = decide(parse("share(layernorm, backend=numba, config=xl) >= 0.05"), RunResults.model_validate(data))
    assert decision.truth is None and "timed no op apart (results version 5)" in decision.summary()
    data["results_version"] = 6
    numba = next(c for c in data["cells"] if c["backend"] == "numba")
    numba["attribution"]["ops"] = {"layernorm": {"ms": 60.0, "share": 0.06, "amdahl_bound": 1 / 0.94}}
    numba["attribution"]["other"] = {"ms": 190.0, "share": 0.19, "amdahl_bound": None}
    run = RunResults.model_validate(data)
    assert decide(parse("share(layernorm, backend=numba, config=xl) >= 0.05"), run).truth is True
    assert decide(parse("amdahl(layernorm, backend=numba, config=xl) > 1.07"), run).truth is False
    assert decide(parse("share(other, backend=numba, config=xl) < 0.2"), run).truth is True
    # an op the run did not time apart in that cell is unknown, never zero
    assert decide(parse("share(gelu, backend=numba, config=xl) < 0.5"), run).truth is None


def test_the_summary_names_each_value_and_the_run() -> None:
    decision = decide(parse("share(backward_db, numba, xl) >= 0.3"), xl_run())
    assert decision.summary() == f"holds: share(backward_db, backend=numba, config=xl) = 0.31 >= 0.3 on run {RUN}"
    decision = decide(parse("speedup(numba, over=numpy-blas, config=xl) >= 0.8"), xl_run())
    assert decision.summary() == (
        "does not hold: speedup(numba, over=numpy-blas, config=xl) = 0.68 (95% CI 0.65 to 0.72), not >= 0.8 "
        f"on run {RUN}"
    )
    decision = decide(parse("speedup(numba, over=numpy-blas, config=xl) >= 0.7"), xl_run())
    assert "straddles" in decision.summary()
    assert [r.quantity for r in decision.readings] == ["speedup(numba, over=numpy-blas, config=xl)"]
    assert (decision.readings[0].low, decision.readings[0].high) == (0.65, 0.72)


def kernels_run() -> RunResults:
    """A kernels run of numba at xl: forward at every layer, 2 GFLOP/s at fc (1.8-2.2)."""
    spec = {**step_results("k", RUN, [step_cell("numba", "xl", ms=1, shares=(0.3, 0.3, 0.3))])["spec"]}
    spec.update(workload="kernels", metric="gflops", baseline="numba")
    timings = []
    for layer in linear_shapes(CONFIGS["xl"]):
        seconds = 2 * layer.m * layer.k * layer.n / 2e9  # 2 GFLOP/s at every layer
        summary = {"n": 4, "median": seconds, "min": seconds, "max": seconds, "q1": seconds, "q3": seconds}
        gflops = {"n": 4, "median": 2.0, "min": 2.0, "max": 2.0, "q1": 2.0, "q3": 2.0, "relative_spread": 0.0}
        ci = {"low": 1.8, "high": 2.2, "level": 0.95, "method": "student-t"}
        timings.append(
            KernelTiming.model_validate(
                {
                    "layer": layer.name,
                    "kernel": "forward",
                    "shape": [layer.m, layer.k, layer.n],
                    "per_step": layer.per_step,
                    "seconds": {**summary, "relative_spread": 0.0},
                    "gflops": {**gflops, "ci": ci if layer.name == "fc" else None},
                    "vs_naive": None,
                    "vs_peer": None,
                    "vs_baseline": None,
                }
            )
        )
    cell = Cell(backend="numba", config="xl", status="measured", step_gflops=2.5, kernels=timings)
    raw = step_results("k", RUN, [step_cell("numba", "xl", ms=1, shares=(0.3, 0.3, 0.3))])
    raw.update(spec=spec, cells=[cell.model_dump(mode="json")])
    return RunResults.model_validate(raw)


def test_gflops_of_a_step_of_a_kernel_and_of_a_kernel_at_a_layer() -> None:
    run = kernels_run()
    assert truth("gflops(step, backend=numba, config=xl) > 2.4", run) is True
    assert truth("gflops(forward, backend=numba, config=xl) > 1.99", run) is True  # work over time, all layers
    assert truth("gflops(forward, backend=numba, config=xl) < 2.01", run) is True
    assert truth("gflops(forward, backend=numba, config=xl, layer=fc) > 1.9", run) is None  # 1.8-2.2
    assert truth("low(gflops(forward, backend=numba, config=xl, layer=fc)) >= 1.8", run) is True
    assert truth("low(gflops(forward, backend=numba, config=xl, layer=qkv)) >= 1", run) is None  # no interval there
    assert truth("gflops(backward_db, backend=numba, config=xl) > 1", run) is None  # not timed
    with pytest.raises(
        ConditionError,
        match=r"share reads a training step's parts, which run [0-9TZ]+ does not record \(it measured kernels\)",
    ):
        parse("share(forward, backend=numba, config=xl) > 0.1", against=run)


def test_checked_against_a_run_every_cell_kernel_and_ratio_must_be_one_it_records() -> None:
    run = xl_run()
    parse("share(backward_db, backend=numba, config=xl) >= 0.3 and speedup(numba, over=naive, config=xl) > 1", run)
    for text, column, fragment in [
        ("share(backward_db, backend=numbaa, config=xl) >= 0.3", 1, "no cell numbaa/xl"),
        (
            "share(forward, backend=numba, config=xl) > 0 and share(forward, backend=numba, config=large) > 0",
            50,
            "no cell numba/large",
        ),
        ("speedup(numba, over=blocked-numpy, config=xl) > 1", 1, "speedups over naive and numpy-blas only"),
        ("speedup(numba, over=numpy, config=xl) > 1", 1, "no cell numpy/xl"),
    ]:
        with pytest.raises(ConditionError) as caught:
            parse(text, against=run)
        assert caught.value.column == column and fragment in caught.value.message


# --------------------------------------------------------------------------- the stored tree


def test_a_stored_condition_is_described_by_the_published_schema() -> None:
    validator = Draft202012Validator(json.loads((SCHEMAS / "attempt.schema.json").read_text()))
    tree = parse(
        "not (low(speedup(numba, over=numpy-blas, config=xl)) > 0.5 and gflops(step, backend=numba, config=xl) > 1)"
    )
    record = complete_record(
        "x",
        runs=[{"run_id": RUN, "status": "complete"}],
        continue_if={
            "text": "...",
            "tree": tree.model_dump(mode="json", exclude_none=True),
            "set_at": "2026-12-01T10:00:00Z",
            "run": RUN,
            "held_at_conclusion": True,
        },
    )
    assert list(validator.iter_errors(record)) == []
    Attempt.model_validate(record)
    for bad in (
        {"op": "compare", "cmp": "==", "left": {"op": "number", "value": 1}, "right": {"op": "number", "value": 1}},
        {"op": "compare", "cmp": ">", "left": {"op": "number", "value": "1"}, "right": {"op": "number", "value": 1}},
        {"op": "compare", "cmp": ">", "left": {"op": "eval", "value": 1}, "right": {"op": "number", "value": 1}},
        {"op": "and", "args": [{"op": "not", "arg": {"op": "number", "value": 1}}]},
        {
            "op": "compare",
            "cmp": ">",
            "left": {"op": "share", "kernel": "dB", "backend": "numba", "config": "xl"},
            "right": {"op": "number", "value": 1},
        },
    ):
        broken = {**record, "continue_if": {**record["continue_if"], "tree": bad}}
        assert list(validator.iter_errors(broken)), bad
    without_disposition = complete_record("x", next_action=None, continue_if=record["continue_if"])
    assert list(validator.iter_errors(without_disposition))


def test_a_hand_edited_tree_deeper_than_the_limit_is_refused_by_the_model() -> None:
    node: dict[str, Any] = {
        "op": "compare",
        "cmp": ">",
        "left": {"op": "ms_per_step", "backend": "numba", "config": "xl"},
        "right": {"op": "number", "value": 0},
    }
    for _ in range(MAX_DEPTH - 1):  # with the comparison and its operands, one level too many
        node = {"op": "not", "arg": node}
    record = complete_record("x", continue_if={"text": "x", "tree": node, "set_at": "t", "run": RUN})
    with pytest.raises(ValueError, match=f"deeper than {MAX_DEPTH}"):
        Attempt.model_validate(record)
    record["continue_if"]["tree"] = node["arg"]
    assert depth(Attempt.model_validate(record).continue_if.tree) == MAX_DEPTH  # type: ignore[union-attr]


# --------------------------------------------------------------------------- hostile conditions

Q = "share(forward, backend=numba, config=xl)"
HOSTILE: list[tuple[str, str | int, str | None]] = [
    # (condition, where the problem is: the first place of a text in it, or a column; a
    # fragment of the message)
    ("__import__('os').system('touch pwned')", "'os'", "no strings"),
    ("__import__(os).system(touch)", ".system", "attribute access"),
    ("share.__class__", ".__class__", "attribute access"),
    (f"{Q}.__class__ > 1", ".__class__", "attribute access"),
    ("(lambda: 1)()", ":", "outside the language"),
    ("lambda x: x", "x: x", "expected '('"),
    ("[x for x in y]", "[", "outside the language"),
    ("{'a': 1}", "{", "outside the language"),
    ('share("a", backend=numba, config=xl) > 1', '"a"', "no strings"),
    (f"{Q} > '0.3'", "'0.3'", "no strings"),
    (f"{Q} > b'0'", "'0'", "no strings"),
    ("eval(share) > 0", "eval", "unknown function 'eval'"),
    ("exec(x) > 0", "exec", "unknown function 'exec'"),
    ("open(x) > 0", "open", "unknown function 'open'"),
    ("getattr(share, x) > 0", "getattr", "unknown function 'getattr'"),
    ("globals() > 0", "globals", "unknown function 'globals'"),
    ("Share(forward, backend=numba, config=xl) > 0", "Share", "did you mean share"),
    (f"{Q} > 1; import os", ";", "outside the language"),
    (f"{Q} > 1 # comment", "#", None),
    (f"{Q} + 1 > 2", "+", "outside the language"),
    (f"{Q} ** 2 > 1", "**", "outside the language"),
    (f"{Q} == 1", "==", None),
    (f"{Q} != 1", "!=", "outside the language"),
    (f"{Q} > 1e999", "1e999", "out of range"),
    (f"{Q} > 0x10", "x10", None),
    (f"{Q} > True", len(Q) + 8, "expected '('"),
    (f"{Q} > 1 > 2", "> 2", "unexpected '>'"),
    (f"{Q} > 1 and", len(Q) + 9, "unexpected end"),
    (Q, 1, "compare it with a number"),
    ("share(forward, backend=numba, config=xl, config=xl) > 1", "config=xl)", "given twice"),
    ("share(forward, backend=numba, config=xl, __class__=x) > 1", "__class__", "no parameter '__class__'"),
    ("share(forward, numba, xl, fc) > 1", "fc", "at most 3"),
    ("share(kernel=forward, numba, xl) > 1", "numba", "positional argument"),
    ("share(forward, backend=numba) > 1", "share", "needs its config"),
    ("share(KERNEL, backend=numba, config=xl) > 1", "KERNEL", "unknown kernel 'KERNEL'"),
    ("share(backward_dB, backend=numba, config=xl) > 1", "backward_dB", "did you mean backward_db"),
    ("amdahl(other, backend=numba, config=xl) > 1", "other", "unknown kernel 'other'"),
    ("share(forward, backend=numba, config=xxl) > 1", "xxl", "unknown config 'xxl'"),
    ("gflops(forward, backend=numba, config=xl, layer=attention) > 1", "attention", "unknown layer"),
    ("share(forward, backend=Numba, config=xl) > 1", "Numba", "not a backend name"),
    ("share(forward, backend=../../etc/passwd, config=xl) > 1", ".", "unexpected character '.'"),
    (
        "share(forward, backend=numba, config=share(forward, backend=numba, config=xl)) > 1",
        "share(forward, backend=numba, config=xl)",
        "a name, not a call",
    ),
    ("low(0.3) > 1", "0.3", "takes a quantity"),
    ("low(low(speedup(numba, over=naive, config=xl))) > 1", "low(speedup", "takes a quantity"),
    ("shares(forward, backend=numba, config=xl) > 1", "shares", "did you mean share"),
    ("speedup(numba, over=nosuch, config=xl) > 1", "speedup", "no cell nosuch/xl"),
    ("share(forward, backend=nosuch, config=xl) > 1", "share", "no cell nosuch/xl"),
    (f"{Q} > 1\nor {Q} > 2", "\n", "unexpected character '\\n'"),
    (f"{Q} > 1\x00", "\x00", "unexpected character '\\x00'"),
    (f"{Q} > 1\u202e", "\u202e", "unexpected character"),
    ("σ(forward) > 1", "σ", "unexpected character"),
    ("", 1, "empty"),
    ("   ", 1, "empty"),
    ("()", ")", "unexpected ')'"),
    ("not", 4, "unexpected end"),
    (" and ".join([f"{Q} >= 0.3"] * 50), MAX_TEXT + 1, "at most 2,000"),
    ("(" * 40 + f"{Q} > 0" + ")" * 40, MAX_DEPTH + 1, f"more than {MAX_DEPTH} levels"),
    ("not " * 40 + f"{Q} > 0", 4 * MAX_DEPTH + 1, f"more than {MAX_DEPTH} levels"),
    ("(" * 1000 + f"{Q} > 0" + ")" * 1000, MAX_TEXT + 1, "at most 2,000"),
    ("(" * 900 + f"{Q} > 0" + ")" * 900, MAX_DEPTH + 1, f"more than {MAX_DEPTH} levels"),
    ("not " * 400 + f"{Q} > 0", 4 * MAX_DEPTH + 1, f"more than {MAX_DEPTH} levels"),
    # digits of other scripts, which a regular expression's \d and Python's float() both take
    (f"{Q} > 0.\u09ea", "\u09ea", "not an ASCII digit"),  # Bengali 4, which looks like 8
    (f"{Q} > \uff10.5", "\uff10", "not an ASCII digit"),  # full-width 0
    (f"{Q} > \U0001d7ce.5", "\U0001d7ce", "not an ASCII digit"),  # mathematical bold 0
    (f"{Q} > 1\u0660", "\u0660", "not an ASCII digit"),  # Arabic-Indic 0 after an ASCII digit
    (f"{Q} > \u0f23", "\u0f23", "not an ASCII digit"),  # Tibetan 3
    ("share(forward, backend=numba\u0663, config=xl) > 1", "\u0663", "not an ASCII digit"),
    ("1 >= 0", 1, "names no measurement"),
    (f"{Q} > 1 or 2 < 3", "2 < 3", "names no measurement"),
    (f"not (0.5 > 0.25) and {Q} > 1", "0.5", "names no measurement"),
    (f"{Q} > 1e-400", "1e-400", "out of range"),  # would be stored as 0
    (f"{Q} > 0.{'0' * 330}1", "0.", "out of range"),
    (f"{Q} > .{'0' * 400}5e2", ".", "out of range"),
    (f"{Q} < {'9' * 400}", "9", "out of range"),
    (f"{Q} < 1e309", "1e309", "out of range"),  # 1e308 * 10
    (" and ".join(["share(forward, numba, xl) > 0"] * 55), 1, "canonical text is 2,690 characters long"),
]


@contextmanager
def no_code_no_files() -> Iterator[list[str]]:
    """Every way a condition could run code or reach a file made to fail, for as long as the
    block runs (only the parse: pytest itself needs files); the imports made are recorded."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a condition reached code or a file: {args!r}")

    imported: list[str] = []
    real_import = builtins.__import__

    def recording(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        for owner, name in (
            (builtins, "open"),
            (builtins, "eval"),
            (builtins, "exec"),
            (builtins, "compile"),
            (io, "open"),
            (os, "open"),
            (os, "system"),
            (os, "popen"),
            (os, "remove"),
            (os, "unlink"),
            (os, "execv"),
            (subprocess, "Popen"),
            (subprocess, "run"),
        ):
            patch.setattr(owner, name, forbidden)
        patch.setattr(builtins, "__import__", recording)
        yield imported


@pytest.mark.parametrize("text, where, fragment", HOSTILE)
def test_a_hostile_condition_is_refused_with_one_line_naming_its_column(
    tmp_path: Path, text: str, where: str | int, fragment: str | None
) -> None:
    column = where if isinstance(where, int) else text.index(where) + 1
    run = xl_run()
    # the parser and the models are built first: building them reads no condition
    parse(
        "not (low(share(forward, backend=numba, config=xl)) > 0 and high(amdahl(forward, backend=numba, config=xl)) > 0)"
        " or ms_per_step(backend=numba, config=xl) > 0 or speedup(numba, over=naive, config=xl) > 0",
        against=run,
    )
    parse("gflops(step, backend=numba, config=xl, layer=fc) > 0")
    before = sorted(tmp_path.rglob("*"))
    refused: ConditionError | None = None
    with no_code_no_files() as imported:
        try:
            parse(text, against=run)
        except ConditionError as exc:
            refused = exc
    assert refused is not None, "the condition was accepted"
    assert "\n" not in refused.message and len(refused.message) < 400
    assert refused.message.startswith(f"continue-if condition, column {refused.column}: ")
    assert 1 <= refused.column <= max(len(text), MAX_TEXT) + 1
    assert refused.column == column, refused.message
    if fragment is not None:
        assert fragment in refused.message, refused.message
    assert refused.exit_code == 2
    assert sorted(tmp_path.rglob("*")) == before  # nothing created where it runs
    assert set(imported) <= {"lark", "lark.exceptions"}  # the parser, and nothing else


def test_the_guard_would_see_code_run_or_a_file_opened() -> None:
    """The hostile corpus means something only if its guards fire: they do, for real calls."""
    code = compile("__import__('os').system('true')", "<hostile>", "eval")
    run_it = builtins.eval  # taken before the guard forbids it
    with no_code_no_files() as imported, pytest.raises(AssertionError, match="reached code"):
        run_it(code)
    assert "os" in imported
    with no_code_no_files(), pytest.raises(AssertionError, match="reached code"):
        Path("anything").write_text("x")


def test_a_condition_of_the_longest_and_deepest_allowed_parses() -> None:
    deep = "(" * (MAX_DEPTH - 2) + f"{Q} > 0" + ")" * (MAX_DEPTH - 2)
    assert depth(parse(deep)) == 2  # groups leave no node in the stored tree: a comparison, its operands
    with pytest.raises(ConditionError, match="levels"):
        parse("(" * (MAX_DEPTH - 1) + f"{Q} > 0" + ")" * (MAX_DEPTH - 1))
    long = " or ".join([f"{Q} >= 0.3"] * 38)
    long = long + " " * (MAX_TEXT - len(long))
    assert len(long) == MAX_TEXT
    assert len(parse(long).args) == 38  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text, value", [("0", 0.0), ("0.000", 0.0), ("0e5", 0.0), ("00.0e-400", 0.0), ("5e-324", 5e-324)]
)
def test_a_zero_is_read_as_zero_and_the_smallest_double_as_itself(text: str, value: float) -> None:
    tree = parse(f"{Q} > {text}")
    assert tree.right.value == value  # type: ignore[union-attr]


def test_a_stored_comparison_of_two_numbers_is_refused_by_the_model() -> None:
    numbers = {
        "op": "compare",
        "cmp": ">=",
        "left": {"op": "number", "value": 1},
        "right": {"op": "number", "value": 0},
    }
    record = complete_record("x", continue_if={"text": "1 >= 0", "tree": numbers, "set_at": "t", "run": RUN})
    with pytest.raises(ValueError, match="names no measurement"):
        Attempt.model_validate(record)


# --------------------------------------------------------------------------- a stored text and tree


def stored(text: str, tree: dict[str, Any]) -> dict[str, Any]:
    return complete_record("x", continue_if={"text": text, "tree": tree, "set_at": "t", "run": RUN})


SHARE_TREE = {
    "op": "compare",
    "cmp": ">",
    "left": {"op": "share", "kernel": "forward", "backend": "numba", "config": "xl"},
    "right": {"op": "number", "value": 0.3},
}


@pytest.mark.parametrize(
    "text",
    [
        "share(forward, backend=numba, config=xl) > 0.3",  # the canonical text
        "share(forward, numba, xl) > 0.30",  # as written, in another spelling
        "  share( kernel=forward, config = xl, backend=numba )>3e-1 ",
    ],
)
def test_a_text_and_a_tree_that_say_the_same_agree(text: str) -> None:
    record, problems = parse_record(stored(text, SHARE_TREE), file="x.json")
    assert problems == [] and record.attempt is not None


@pytest.mark.parametrize(
    "text, tree, field, fragment",
    [
        (  # the tree replaced by one that always holds
            "share(forward, backend=numba, config=xl) > 0.3",
            {"op": "compare", "cmp": ">=", "left": {"op": "ms_per_step", "backend": "numba", "config": "xl"},
             "right": {"op": "number", "value": 0}},
            "tree",
            "the stored tree reads 'ms_per_step(backend=numba, config=xl) >= 0', not the condition's text "
            "'share(forward, backend=numba, config=xl) > 0.3'",
        ),
        ("share(forward, backend=numba, config=xl) > 0.31", SHARE_TREE, "tree", "reads 'share(forward, backend=numba, config=xl) > 0.3'"),
        ("share(forward, backend=numba, config=xl) < 0.3", SHARE_TREE, "tree", "not the condition's text"),
        ("share(backward_db, backend=numba, config=xl) > 0.3", SHARE_TREE, "tree", "not the condition's text"),
        ("not share(forward, backend=numba, config=xl) > 0.3", SHARE_TREE, "tree", "not the condition's text"),
        ("share(forward, backend=numba, config=xl) > 0.\u09ea", SHARE_TREE, "text", "column 46: unexpected character"),
        ("share(forward, backend=numba, config=xl) > 1e-400", {**SHARE_TREE, "right": {"op": "number", "value": 0}}, "text", "out of range"),
        ("1 >= 0 or share(forward, backend=numba, config=xl) > 0.3", SHARE_TREE, "text", "names no measurement"),
        ("share(forward, backend=numba, config=xl) > 0.3 or", SHARE_TREE, "text", "unexpected end"),
    ],
)  # fmt: skip
def test_a_text_and_a_tree_that_disagree_are_no_record(
    text: str, tree: dict[str, Any], field: str, fragment: str
) -> None:
    """What is decided (the tree) and what is shown (the text) must be one condition: a record
    whose two differ is refused whole, so no command decides it."""
    record, problems = parse_record(stored(text, tree), file="x.json")
    assert record.attempt is None
    [problem] = problems
    assert (problem.rule, problem.pointer, problem.attempt_id, problem.file) == (
        "continue-if",
        f"/continue_if/{field}",
        "x",
        "x.json",
    )
    assert fragment in problem.message and "\n" not in problem.message
