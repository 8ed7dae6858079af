"""floor_ratio(part, backend=..., config=...): a part's ms per step over the floor a run
recorded for it, read from a synthetic results.json; undecided, never false, when the run
recorded no floors; refused where the plan's evaluator records no training step."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import step_cell, step_results
from ptreg.records.condition import ConditionError
from ptreg.records.condition_grammar import parse
from ptreg.records.configs import CONFIGS
from ptreg.records.decision import decide
from ptreg.records.run_results import RunResults
from ptreg.records.step_work import config_floors

RUN = "20261207T000000Z"


def data(floors: bool = True) -> dict[str, Any]:
    """numba at xl: 1000 ms a step, forward 24% of it (240 ms), attention 100 ms (10%)."""
    cell = step_cell("numba", "xl", ms=1000, shares=(0.24, 0.2, 0.31))
    cell["attribution"]["ops"] = {"attention": {"ms": 100.0, "share": 0.1, "amdahl_bound": 1 / 0.9}}
    cell["attribution"]["other"] = {"ms": 150.0, "share": 0.15, "amdahl_bound": 1 / 0.85}
    results = step_results("a", RUN, [cell, step_cell("numpy-blas", "xl", ms=500, shares=(0.2, 0.2, 0.2))], version=6)
    if floors:
        found = config_floors(CONFIGS["xl"], 1, 240.0, 30.0, "0" * 16, "2026-12-07T00:00:00+00:00")
        results["floors"] = {"xl": found.model_dump(mode="json")}
    return results


def run(floors: bool = True) -> RunResults:
    return RunResults.model_validate(data(floors))


def floor_of(part: str) -> float:
    found = (run().floors or {})["xl"].floor_ms(part)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("part", "ms"),
    [("attention", 100.0), ("forward", 240.0), ("step", 1000.0)],
)
def test_a_part_is_read_as_its_ms_over_its_recorded_floor(part: str, ms: float) -> None:
    ratio = ms / floor_of(part)
    assert decide(parse(f"floor_ratio({part}, backend=numba, config=xl) < {ratio * 1.01}"), run()).truth is True
    assert decide(parse(f"floor_ratio({part}, backend=numba, config=xl) < {ratio * 0.99}"), run()).truth is False


def test_a_run_without_floors_leaves_it_undecided_not_false() -> None:
    decision = decide(parse("floor_ratio(attention, backend=numba, config=xl) < 3"), run(floors=False))
    assert decision.truth is None
    assert "recorded no floors at xl" in decision.summary()
    # Kleene: false and unknown is false, true or unknown is true
    either = "floor_ratio(attention, backend=numba, config=xl) < 3 or ms_per_step(backend=numba, config=xl) < 2000"
    assert decide(parse(either), run(floors=False)).truth is True


def test_an_op_the_cell_did_not_time_is_unknown_never_zero() -> None:
    decision = decide(parse("floor_ratio(gelu, backend=numba, config=xl) < 3"), run())
    assert decision.truth is None and "recorded no time for gelu" in decision.summary()


def test_what_has_no_floor_is_refused_when_written() -> None:
    with pytest.raises(ConditionError, match="unknown kernel 'other'"):
        parse("floor_ratio(other, backend=numba, config=xl) < 3")


def test_the_canonical_text_round_trips() -> None:
    text = "floor_ratio(attention, backend=numba, config=xl) < 3"
    from ptreg.records.condition import render

    assert render(parse(text)) == text
    assert parse(render(parse("floor_ratio(kernel=step, config=xl, backend=numba) <= 1.3"))) == parse(
        "floor_ratio(step, backend=numba, config=xl) <= 1.3"
    )
