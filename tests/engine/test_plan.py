"""The plan of a measurement: cell order, the order of each round, the round-time estimate,
when an adaptive plan has enough rounds, the run-status policy and the ad hoc bench's spec.
Pure functions; no process is started."""

from __future__ import annotations

from typing import Any

import pytest

from ptreg.engine.plan import (
    NOT_CHECKED,
    PARITY_SHAPES,
    PlannedCell,
    bench_spec,
    cells,
    estimate_round,
    interrupted_reason,
    narrow_enough,
    order_seed,
    parity_shapes,
    round_order,
    run_status,
)
from ptreg.errors import EXIT_UNUSABLE, PtregError
from ptreg.records.configs import CONFIGS, linear_shapes, step_flops
from ptreg.records.evaluator import EvaluatorSpec
from ptreg.records.run_results import Cell, Interval, ParityOutcome, Ratio


def spec(**changes: Any) -> EvaluatorSpec:
    fields: dict[str, Any] = {
        "name": "plan",
        "workload": "tinygpt-train",
        "metric": "ms-per-step",
        "configs": ["tiny", "small", "medium"],
        "backends": ["naive", "numpy-blas"],
        "baseline": "numpy-blas",
        "warmup_steps": 0,
        "timed_steps": 1,
        "repeats": 1,
        "seed": 0,
        "threads": 1,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "max_relative_spread": 1.0,
    }
    fields.update(changes)
    return EvaluatorSpec.model_validate(fields)


def passed(backend: str) -> ParityOutcome:
    return ParityOutcome(backend=backend, passed=True, summary=f"{backend}: parity passed", checks=[])


def cell(backend: str, config: str, status: Any = "measured", reason: Any = None) -> Cell:
    return Cell(backend=backend, config=config, status=status, reason=reason)


# --------------------------------------------------------------------------- what is measured, in which order


def test_cells_run_config_by_config_with_the_backends_side_by_side() -> None:
    assert [(c.config, c.backend) for c in cells(spec())] == [
        ("tiny", "naive"),
        ("tiny", "numpy-blas"),
        ("small", "naive"),
        ("small", "numpy-blas"),
        ("medium", "naive"),
        ("medium", "numpy-blas"),
    ]
    assert PlannedCell("xl", "numba").label == "numba/xl"


def test_parity_shapes_are_the_fixed_ones_then_each_layer_shape_once() -> None:
    shapes = parity_shapes(spec(configs=["tiny", "small"]))
    assert shapes[: len(PARITY_SHAPES)] == list(PARITY_SHAPES)
    layers = {(s.m, s.k, s.n) for c in ("tiny", "small") for s in linear_shapes(CONFIGS[c])}
    assert set(shapes[len(PARITY_SHAPES) :]) == layers - set(PARITY_SHAPES)
    assert len(shapes) == len(set(shapes))


# --------------------------------------------------------------------------- rounds


def test_each_rounds_order_is_drawn_again_from_the_seed_alone() -> None:
    backends = ["naive", "blocked-numpy", "numba", "numpy-blas"]
    orders = [round_order(0, "small", r, backends) for r in range(8)]
    assert all(sorted(o) == sorted(backends) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # the order changes from round to round
    assert orders == [round_order(0, "small", r, backends) for r in range(8)]
    assert orders != [round_order(1, "small", r, backends) for r in range(8)]


@pytest.mark.parametrize("size", [2, 3, 4])
def test_every_backend_takes_every_place_equally_often_in_each_block_of_rounds(size: int) -> None:
    """Over any whole number of blocks (as many rounds as backends), each backend goes first,
    second, ... exactly as often as any other; whatever the seed. Two arms go AB BA or BA AB."""
    backends = [f"b{i}" for i in range(size)]
    for seed in range(20):
        for blocks in (1, 3):
            orders = [round_order(seed, "c", r, backends) for r in range(size * blocks)]
            for place in range(size):
                assert sorted(o[place] for o in orders) == sorted(backends * blocks), (seed, orders)
    firsts = {
        tuple(round_order(seed, "c", 0, ["a", "b"]) + round_order(seed, "c", 1, ["a", "b"])) for seed in range(40)
    }
    assert firsts == {("a", "b", "b", "a"), ("b", "a", "a", "b")}


def test_a_runs_order_seed_is_drawn_afresh_and_fits_the_record() -> None:
    from ptreg.records.refs import INT_MAX

    seeds = {order_seed() for _ in range(20)}
    assert len(seeds) == 20 and all(0 <= s <= INT_MAX for s in seeds)


def test_a_rounds_time_is_its_own_last_round_else_the_earlier_configs_scaled_by_work() -> None:
    assert estimate_round({}, "tiny", spec()) is None
    ratio = step_flops(CONFIGS["medium"]) / step_flops(CONFIGS["tiny"])
    assert estimate_round({"tiny": 2.0}, "medium", spec()) == pytest.approx(2.0 * ratio)
    assert estimate_round({"tiny": 2.0, "small": 5.0}, "medium", spec()) == pytest.approx(
        5.0 * step_flops(CONFIGS["medium"]) / step_flops(CONFIGS["small"])
    )
    assert estimate_round({"tiny": 2.0, "medium": 9.0}, "medium", spec()) == 9.0


def ratio_within(half: float) -> Ratio:
    return Ratio(median=2.0, n=4, ci=Interval(low=2.0 - 2 * half, high=2.0 + 2 * half, level=0.95, method="t"))


def test_an_adaptive_config_stops_once_every_ratio_is_narrow_enough() -> None:
    narrow = cell("numba", "tiny")
    narrow.vs_naive_ratio = ratio_within(0.02)
    wide = cell("blocked-numpy", "tiny")
    wide.vs_naive_ratio = ratio_within(0.05)
    assert narrow_enough([narrow], 0.03)
    assert not narrow_enough([narrow, wide], 0.03)
    unknown = cell("numba", "tiny")
    unknown.vs_naive_ratio = Ratio(median=2.0, n=1, ci=None)
    assert not narrow_enough([unknown], 0.03)


def test_a_spec_gives_one_plan_fixed_or_adaptive() -> None:
    adaptive = spec(repeats=None, min_repeats=3, max_repeats=20, target_ci=0.03)
    assert (adaptive.least_repeats, adaptive.most_repeats) == (3, 20)
    assert "until every ratio is known within ±3%" in adaptive.plan()
    assert (spec().least_repeats, spec().most_repeats) == (1, 1)
    for wrong in (
        {"repeats": None},
        {"min_repeats": 3, "max_repeats": 20, "target_ci": 0.03},
        {"repeats": None, "min_repeats": 9, "max_repeats": 3, "target_ci": 0.03},
    ):
        with pytest.raises(ValueError):
            spec(**wrong)


# --------------------------------------------------------------------------- the run-status policy


def test_every_cell_measured_is_complete() -> None:
    s = spec(configs=["tiny"])
    assert run_status(
        s,
        [passed("naive"), passed("numpy-blas")],
        [cell("naive", "tiny"), cell("numpy-blas", "tiny")],
        budget_hit=False,
    ) == ("complete", None)


def test_the_budget_explains_the_cells_it_stopped() -> None:
    s = spec(configs=["tiny"])
    stopped = [cell("naive", "tiny"), cell("numpy-blas", "tiny", "not-started", "estimated 9 s, 1 s left")]
    assert run_status(s, [passed("naive"), passed("numpy-blas")], stopped, budget_hit=False) == (
        "budget-exhausted",
        "1 of 2 cells measured within the budget",
    )
    killed = [cell("naive", "tiny"), cell("numpy-blas", "tiny", "budget-exhausted")]
    assert run_status(s, [], killed, budget_hit=True)[0] == "budget-exhausted"
    unchecked = ParityOutcome(backend="numpy-blas", passed=False, summary=f"{NOT_CHECKED}: out of time", checks=[])
    assert (
        run_status(s, [passed("naive"), unchecked], [cell("naive", "tiny")], budget_hit=False)[0] == "budget-exhausted"
    )


def test_a_cell_not_measured_fails_the_run_and_is_named() -> None:
    s = spec(configs=["tiny", "small"], backends=["naive", "numpy-blas"])
    measured = [
        cell("naive", "tiny", "failed", "worker killed by SIGKILL"),
        cell("numpy-blas", "tiny"),
        cell("naive", "small", "parity-failed", "naive: parity FAILED"),
        cell("numpy-blas", "small"),
    ]
    status, reason = run_status(s, [passed("numpy-blas")], measured, budget_hit=False)
    assert status == "failed"
    assert reason == ("2 cell(s) not measured: naive/tiny: worker killed by SIGKILL; naive/small: naive: parity FAILED")


def test_more_than_three_failed_cells_are_counted_not_listed() -> None:
    s = spec(configs=["tiny", "small", "medium"], backends=["naive", "numpy-blas"])
    measured = [cell(b, c, "failed", "x") for c in s.configs for b in s.backends]
    status, reason = run_status(s, [], measured, budget_hit=False)
    assert status == "failed" and reason is not None and reason.endswith("x and 3 more")


def test_an_interruption_counts_the_cells_measured_before_it() -> None:
    assert interrupted_reason(spec(), [cell("naive", "tiny")], "SIGINT") == (
        "interrupted by SIGINT; 1 of 6 cells measured"
    )


# --------------------------------------------------------------------------- the ad hoc bench


def test_bench_spec_fills_only_what_an_evaluator_would_fix() -> None:
    s = bench_spec(
        workload="kernels",
        configs=["tiny"],
        backends=["naive", "numpy-blas"],
        baseline=None,
        warmup_steps=1,
        timed_steps=2,
        repeats=3,
        seed=0,
        threads=1,
    )
    assert s.baseline == "naive" and s.metric == "gflops" and s.repeats == 3


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"configs": ["huge"]}, "--config 'huge'"),
        ({"workload": "inference"}, "workload"),
        ({"baseline": "numba"}, "baseline 'numba' is not one of the backends"),
    ],
)
def test_bench_spec_refuses_unusable_options_in_one_line(changes: dict[str, Any], field: str) -> None:
    options: dict[str, Any] = {
        "workload": "kernels",
        "configs": ["tiny"],
        "backends": ["naive"],
        "baseline": None,
        "warmup_steps": 1,
        "timed_steps": 1,
        "repeats": 1,
        "seed": 0,
        "threads": 1,
    }
    options.update(changes)
    with pytest.raises(PtregError) as caught:
        bench_spec(**options)
    assert caught.value.exit_code == EXIT_UNUSABLE and field in caught.value.message
    assert "\n" not in caught.value.message


def test_an_adaptive_plan_takes_at_least_its_stopping_rules_floor_of_rounds() -> None:
    from ptreg.engine.measurement import least_rounds
    from ptreg.engine.stats import ADAPTIVE_MIN_ROUNDS

    def adaptive(least: int, most: int) -> EvaluatorSpec:
        return spec(repeats=None, min_repeats=least, max_repeats=most, target_ci=0.05)

    assert least_rounds(spec(repeats=3)) == 3  # a fixed plan is its own
    assert least_rounds(adaptive(2, 40)) == ADAPTIVE_MIN_ROUNDS
    assert least_rounds(adaptive(ADAPTIVE_MIN_ROUNDS + 2, 40)) == ADAPTIVE_MIN_ROUNDS + 2
    assert least_rounds(adaptive(2, ADAPTIVE_MIN_ROUNDS - 2)) == ADAPTIVE_MIN_ROUNDS - 2  # up to its ceiling
