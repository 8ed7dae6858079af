"""Conditions on intervals that say what they are over (results version 8): one seed's interval
leaves the seeds' variance unknown, and unknown stays unknown; version 7 runs decide as they did;
an interval with its own degrees of freedom is taken to another level with them."""

from __future__ import annotations

import pytest
from scipy.stats import t

from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.condition_grammar import parse
from ptreg.records.decision import decide
from ptreg.records.evaluator import parse_spec
from ptreg.records.intervals import ONE_SEED, at_level
from ptreg.records.run_results import Cell, Measurement, MetricSample, Provenance, Roles, RunResults, new_results

SPEC = parse_spec(
    {
        "name": "ship",
        "workload": "command",
        "command": ["python3", "x.py", "{model}"],
        "arms": {"champion": {"model": "a"}, "challenger": {"model": "b"}},
        "baseline": "champion",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 1,
        "seed": 0,
        "timeout_seconds": 10,
    },
    "spec",
)
CANDIDATE = "arm=challenger, over=champion"


def run(items: dict[str, list[dict[str, float]]], version: int = 8) -> RunResults:
    """A run of the two arms, each repeat's items given, summarised and compared as runs of
    ``version`` were."""
    workload = CommandWorkload()
    cells = []
    for arm, repeats in items.items():
        samples = [
            MetricSample(
                repeat=r, seed=r, values={"score": sum(scored.values()) / len(scored)}, items={"score": scored}
            )
            for r, scored in enumerate(repeats)
        ]
        cell = Cell(backend=arm, config="all", status="measured")
        workload.summarize(SPEC, cell, list(samples), results_version=version)
        cells.append(cell)
    workload.compare(SPEC, cells, Roles(reference=None, peer=None), results_version=version)
    made = new_results(
        SPEC,
        Measurement([], cells, Roles(reference=None, peer=None), [], "complete", None),
        Provenance(["ptreg", "run"], "2026-12-02T00:00:00Z", "2026-12-02T00:01:00Z", 2, run_id="20261202T000000Z"),
    )
    return RunResults.model_validate({**made.model_dump(), "results_version": version})


CLEAR = {  # the challenger answers 28 of 30 items the champion misses, in the one seed
    "champion": [{f"q{i}": 0.0 for i in range(30)}],
    "challenger": [{f"q{i}": (1.0 if i < 28 else 0.0) for i in range(30)}],
}


@pytest.mark.parametrize(
    "condition",
    [
        f"diff(score, {CANDIDATE}) > 0",
        f"better(score, {CANDIDATE})",
        f"not worse(score, {CANDIDATE})",
        f"low(diff(score, {CANDIDATE})) > 0.5",
        "metric(score, arm=challenger) > 0.5",
    ],
)
def test_one_seed_decides_nothing_and_says_why(condition: str) -> None:
    found = decide(parse(condition), run(CLEAR))
    assert found.truth is None, found.summary()
    assert ONE_SEED in found.summary()


def test_a_version_7_run_of_one_seed_decides_as_it_did() -> None:
    old = run(CLEAR, version=7)
    comparison = (old.cells[1].versus or {})["champion"]["score"]
    assert comparison.variance is None and comparison.ci is not None
    assert decide(parse(f"diff(score, {CANDIDATE}) > 0"), old).truth is True
    assert decide(parse(f"better(score, {CANDIDATE})"), old).truth is True
    assert decide(parse("metric(score, arm=challenger) > 0.5"), old).truth is True  # a point, as before


def test_two_seeds_decide() -> None:
    two = {arm: repeats * 2 for arm, repeats in CLEAR.items()}
    assert decide(parse(f"better(score, {CANDIDATE})"), run(two)).truth is True


def test_an_older_run_that_claims_what_its_intervals_are_over_is_refused() -> None:
    data = run(CLEAR, version=7).model_dump(mode="json")
    data["cells"][1]["versus"]["champion"]["score"]["variance"] = "items and seeds"
    with pytest.raises(ValueError, match="what an interval is over is recorded from results_version 8 on"):
        RunResults.model_validate(data)


def test_an_interval_is_taken_to_another_level_with_its_own_degrees_of_freedom() -> None:
    low, high = at_level(-1.0, 3.0, 40, "linear", 0.975, df=2.5)
    factor = t.ppf(0.9875, 2.5) / t.ppf(0.975, 2.5)
    assert (low, high) == pytest.approx((1 - 2 * factor, 1 + 2 * factor))
    assert at_level(-1.0, 3.0, 40, "linear", 0.975) != pytest.approx((low, high))  # n - 1 = 39 would be narrower


def test_an_or_splits_a_two_way_interval_at_its_degrees_of_freedom() -> None:
    # five seeds, each moving every item of the challenger alike: the seeds' variance decides
    shifts = [0.3, 0.1, 0.2, 0.25, 0.15]
    items = {
        "champion": [{f"q{i}": 0.5 for i in range(30)} for _ in shifts],
        "challenger": [{f"q{i}": 0.5 + s + 0.01 * (i % 3) for i in range(30)} for s in shifts],
    }
    results = run(items)
    comparison = (results.cells[1].versus or {})["champion"]["score"]
    assert comparison.variance == "items and seeds" and comparison.df is not None and comparison.df < 5
    found = decide(parse(f"diff(score, {CANDIDATE}) > 0 or diff(score, {CANDIDATE}) > 5"), results)
    reading = found.readings[0]
    assert reading.df == comparison.df
    assert comparison.ci is not None
    wider = at_level(comparison.ci.low, comparison.ci.high, comparison.n, "linear", 0.975, comparison.df)
    assert reading.interval(0.975) == pytest.approx(wider)


def test_the_table_says_what_the_intervals_are_over_and_gives_no_verdict_for_one_seed() -> None:
    (score,) = [t for t in CommandWorkload().tables(run(CLEAR)) if t.title.startswith("score")]
    assert score.headers[-2] == "intervals over"
    challenger = score.rows[1]
    assert challenger[-2] == "items only; seed variance unknown"
    assert challenger[5] == f"no verdict: {ONE_SEED}"
    (old,) = [t for t in CommandWorkload().tables(run(CLEAR, version=7)) if t.title.startswith("score")]
    assert "intervals over" not in old.headers and old.rows[1][5] == "better"  # as version 7 said
