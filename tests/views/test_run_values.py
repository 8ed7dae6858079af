"""Every number of a run that its readers rely on, whatever a file holds: a run either fails to
validate (and every reader then treats it as unreadable, in one line) or every reader can use
it, with no ZeroDivisionError, OverflowError or ValueError on the way.

The runs are a valid kernels run and a valid tinygpt-train run with one number replaced by a
hostile one: 0, a negative, a subnormal, the largest double, NaN, an infinity, an integer past
SQLite's 64 bits. Tests of single files through the command line are in the hostile corpus
(tests/data/bad/cases-values.json).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import REPO, step_cell, step_results
from ptreg.records.condition_grammar import parse
from ptreg.records.configs import CONFIGS, linear_shapes
from ptreg.records.decision import decide
from ptreg.records.refs import INT_MAX
from ptreg.records.run_results import KERNELS, RunResults
from ptreg.views import tables as render
from ptreg.views.cell_verdicts import HistoryRun, judge_cell
from ptreg.views.cell_verdicts import decide as decide_cells
from ptreg.views.comparison import cell_values
from ptreg.views.run_report import evidence_line, tables, verdict

KERNELS_RUN = json.loads((REPO / "tests" / "data" / "bad" / "values-run-good.json").read_text(encoding="utf-8"))
# whole rounds of samples (every layer and kernel, three repeats), which compare and history read
for _cell, _base in zip(KERNELS_RUN["cells"], (0.002, 0.001), strict=True):
    _cell["kernel_samples"] = [
        {"repeat": r, "layer": layer.name, "kernel": kernel, "calls": 10, "seconds_per_call": _base * (1 + 0.01 * r)}
        for r in range(3)
        for layer in linear_shapes(CONFIGS["xl"])
        for kernel in KERNELS
    ]
TRAINING_RUN = step_results(
    "a",
    "20261201T092700Z",
    [
        step_cell("naive", "xl", ms=10_000, shares=(0.1, 0.1, 0.1), vs_naive=1.0, vs_naive_ci=(1.0, 1.0)),
        step_cell("numba", "xl", ms=1000, shares=(0.24, 0.2, 0.31), ms_ci=(990, 1010), vs_naive=10.0, vs_naive_ci=(9.5, 10.5)),
    ],
)  # fmt: skip
for _cell, _base in zip(TRAINING_RUN["cells"], (10.0, 1.0), strict=True):  # timed_steps 2, repeats 0-2
    _cell["step_samples"] = [
        {"repeat": r, "step": step, "seconds": _base * (1 + 0.01 * r), "loss": 4.5,
         "kernel_seconds": {"forward": _base / 10, "backward_da": _base / 10, "backward_db": _base / 10}}
        for r in range(3)
        for step in range(2)
    ]  # fmt: skip
# Every quantity a condition reads from either run, and its interval's ends.
QUANTITIES = [
    "gflops(step, backend=numpy-blas, config=xl)",
    "gflops(forward, backend=numpy-blas, config=xl)",
    "gflops(forward, backend=numpy-blas, config=xl, layer=fc)",
    "speedup(numpy-blas, over=naive, config=xl)",
    "share(backward_db, backend=numba, config=xl)",
    "share(other, backend=numba, config=xl)",
    "amdahl(backward_db, backend=numba, config=xl)",
    "ms_per_step(backend=numba, config=xl)",
    "speedup(numba, over=naive, config=xl)",
]
CONDITIONS = [parse(f"{f}({q}) > 0.5") for q in QUANTITIES for f in ("low", "high")]
CONDITIONS += [parse(f"{q} > 0.5") for q in QUANTITIES]
HOSTILE = [0, 0.0, -0.0, -1.0, -1e-300, 5e-324, 1e-300, 1e300, 1.7976931348623157e308, math.nan, math.inf, -math.inf]
HOSTILE += [2**63, 2**64, -(2**63) - 1, INT_MAX, 10**400]


def numbers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every number in ``value`` (booleans are not numbers here)."""
    if isinstance(value, dict):
        return [p for key, child in value.items() for p in numbers(child, (*path, key))]
    if isinstance(value, list):
        return [p for index, child in enumerate(value) for p in numbers(child, (*path, index))]
    return [path] if isinstance(value, int | float) and not isinstance(value, bool) else []


def replaced(run: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(run)
    target = changed
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return changed


def read_everything(results: RunResults, unchanged: RunResults) -> None:
    """What show, disposition check, list --continuable and the gate do with a run, and what
    compare and history do with it and the run it was made from."""
    for table in tables(results):
        render.plain(table.rows, table.headers)
    evidence_line(results)
    verdict(results)
    for condition in CONDITIONS:
        decide(condition, results).summary()
    for relative_to in (None, results.ratio_roles.reference):
        before, after = cell_values(unchanged, relative_to), cell_values(results, relative_to)
        judged = [
            judge_cell(
                config,
                backend,
                [
                    HistoryRun(r, before.get((config, backend), values), f"2026-12-0{n + 1}T00:00:00Z", "?")
                    for n, r in enumerate("abc")
                ]
                + [HistoryRun("d", values, "2026-12-09T00:00:00Z", "2026-12-09T00:01:00Z")],
                values,
                0.05,
            )
            for (config, backend), values in after.items()
        ]
        decide_cells(judged, same_machine=True)


@pytest.mark.parametrize("run", [KERNELS_RUN, TRAINING_RUN], ids=["kernels", "tinygpt-train"])
def test_the_runs_used_are_valid_and_read(run: dict[str, Any]) -> None:
    results = RunResults.model_validate(run)
    read_everything(results, results)
    assert [len(values) for values in cell_values(results).values()] == [3, 3]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([KERNELS_RUN, TRAINING_RUN]).flatmap(
        lambda run: st.tuples(
            st.just(run),
            st.sampled_from(numbers(run)),
            st.one_of(st.sampled_from(HOSTILE), st.floats(), st.integers()),
        )
    )
)
def test_a_run_is_refused_or_read_whatever_one_number_holds(case: tuple[dict[str, Any], tuple[Any, ...], Any]) -> None:
    run, path, value = case
    try:
        results = RunResults.model_validate(replaced(run, path, value))
    except ValidationError:
        return  # refused whole: the readers show it as unreadable (tests/data/bad/cases-values.json)
    held = results.model_dump(mode="python")
    for where in numbers(held):
        number = held
        for part in where:
            number = number[part]
        assert math.isfinite(number) if isinstance(number, float) else abs(number) <= INT_MAX, (where, number)
    read_everything(results, RunResults.model_validate(run))
