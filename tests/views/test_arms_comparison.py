"""Runs of arms compared across runs: each metric in its own terms, paired by item or round."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.evaluator import ArmsSpec, parse_spec
from ptreg.records.run_results import (
    Cell,
    CodeIdentity,
    Measurement,
    MetricSample,
    PluginCode,
    Provenance,
    Roles,
    RunResults,
    new_results,
)
from ptreg.views.arms_comparison import metric_history, metric_shifts

SPEC = parse_spec(
    {
        "name": "toy",
        "workload": "command",
        "command": ["python3", "x.py", "{level}"],
        "arms": {"baseline": {"level": "1"}, "candidate": {"level": "2"}},
        "baseline": "baseline",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 3,
        "seed": 0,
        "timeout_seconds": 10,
    },
    "spec",
)


RUN_HOURS = itertools.count()


def run(
    scores: dict[str, list[dict[str, float]]], seconds: float, commit: str | None = "c" * 40, hour: int | None = None
) -> RunResults:
    """A run whose arms scored these items, repeat by repeat, of the command at ``commit``
    (clean; None: unknown), started at ``hour`` (by default, an hour after the previous run:
    each run a batch of its own, as a history taken over days is)."""
    at = next(RUN_HOURS) if hour is None else hour
    started = f"2026-12-{2 + at // 24:02d}T{at % 24:02d}:00:00Z"
    finished = f"2026-12-{2 + at // 24:02d}T{at % 24:02d}:01:00Z"
    assert isinstance(SPEC, ArmsSpec)
    workload = CommandWorkload()
    cells = []
    for arm, repeats in scores.items():
        samples = [
            MetricSample(
                repeat=r,
                seed=r,
                values={"score": sum(items.values()) / len(items)},
                items={"score": items},
                wall_seconds=seconds * (1 + 0.01 * r),
                peak_memory_mb=30.0,
            )
            for r, items in enumerate(repeats)
        ]
        cell = Cell(backend=arm, config="all", status="measured")
        workload.summarize(SPEC, cell, list(samples))
        cells.append(cell)
    workload.compare(SPEC, cells, Roles(reference=None, peer=None))
    return new_results(
        SPEC,
        Measurement([], cells, Roles(reference=None, peer=None), [], "complete", None),
        Provenance(
            ["ptreg", "run"],
            started,
            finished,
            2,
            code=CodeIdentity(
                ptreg_version="0.1.0",
                commit=commit,
                dirty=None if commit is None else False,
                workload=PluginCode(
                    target="ptreg.engine.workloads.command:CommandWorkload",
                    distribution="ptreg",
                    version="0.1.0",
                    digest="0" * 64,
                ),
                arms={},
                repository_code=True,
            ),
        ),
    )


ITEMS = [{"a": 1.0, "b": 0.0, "c": 1.0}] * 3


def test_the_same_scores_again_are_no_difference_and_a_drop_is_worse() -> None:
    a = run({"baseline": ITEMS, "candidate": ITEMS}, 1.0)
    same = metric_shifts(
        a, run({"baseline": ITEMS, "candidate": ITEMS}, 1.0), earlier=[], threshold=0.05, same_machine=True
    )
    score = {m.arm: m for m in same if m.metric == "score"}
    assert score["candidate"].estimate == 0 and score["candidate"].verdict == "no difference resolved"
    assert score["candidate"].paired_by == "item"
    worse_items = [{"a": 0.0, "b": 0.0, "c": 0.0}, {"a": 0.0, "b": 0.0, "c": 1.0}, {"a": 0.0, "b": 0.0, "c": 0.0}]
    dropped = metric_shifts(
        a, run({"baseline": ITEMS, "candidate": worse_items}, 1.0), earlier=[], threshold=0.05, same_machine=True
    )
    found = next(m for m in dropped if m.arm == "candidate" and m.metric == "score")
    assert found.estimate is not None and found.estimate < 0
    # per item over three seeds: a 1 -> 0, b 0 -> 0, c 1 -> 1/3; not every pair moved, so the
    # interval over three items straddles zero: an honest "no difference resolved"
    assert found.verdict in ("worse", "no difference resolved")


def test_ratio_metrics_are_judged_against_the_runs_of_the_same_code() -> None:
    """Times move with the machine between runs: B is judged against A and the earlier runs
    of the same commit (runs as the unit), with no verdict from fewer than 4 of them, none
    across machines, and a run at another commit (or an unknown one) is no one's history."""
    a = run({"baseline": ITEMS, "candidate": ITEMS}, 1.0)
    b = run({"baseline": ITEMS, "candidate": ITEMS}, 3.0)
    steady = [run({"baseline": ITEMS, "candidate": ITEMS}, s) for s in (0.98, 1.03, 1.01)]
    other_code = [run({"baseline": ITEMS, "candidate": ITEMS}, 1.0, commit=c) for c in ("d" * 40, None)]

    def wall(earlier: list[RunResults], same_machine: bool = True) -> dict[str, Any]:
        shifts = metric_shifts(a, b, earlier=earlier, threshold=0.05, same_machine=same_machine)
        return {m.arm: m for m in shifts if m.metric == "wall_seconds"}

    short = wall(steady[:2] + other_code)
    assert short["baseline"].verdict == "no verdict: 3 run(s) of A's code, 4 needed (1 more)"
    assert short["baseline"].history is not None and len(short["baseline"].history) == 3
    slow = wall(steady)
    assert slow["baseline"].estimate is not None and slow["baseline"].estimate > 2.5
    assert slow["baseline"].verdict == "worse" and slow["baseline"].paired_by == "runs"
    assert all(m.verdict == "not comparable: different machines" for m in wall(steady, False).values())


def test_history_lists_every_arm_and_metric_of_every_run() -> None:
    rows = metric_history([("x/1", run({"baseline": ITEMS, "candidate": ITEMS}, 1.0))])
    assert {(r.arm, r.metric) for r in rows} == {
        (arm, metric) for arm in ("baseline", "candidate") for metric in ("score", "wall_seconds", "peak_memory_mb")
    }


def test_every_arm_metric_is_adjusted_together() -> None:
    """One metric moved by a difference whose own p is about 0.03: alone it is worse; among
    two metrics, Holm's adjustment (p x 2) leaves it unresolved, so --fail-on-regression does
    not count it. Ten metrics of the same arm compared A/A are one family too."""

    def runs(metrics: int) -> tuple[RunResults, RunResults]:
        spec = parse_spec(
            {
                **SPEC.model_dump(exclude_none=True),
                "arms": {"only": {"level": "1"}},
                "baseline": "only",
                "metrics": {f"m{i}": {"better": "higher", "unit": "fraction"} for i in range(metrics)},
            },
            "spec",
        )
        made = []
        for shift in ([0.0] * 5, [-0.02, -0.05, -0.10, -0.15, -0.18]):
            samples = [
                MetricSample(
                    repeat=r,
                    seed=r,
                    values={f"m{i}": 0.5 + (shift[r] if i == 0 else 0.0) for i in range(metrics)},
                    wall_seconds=1.0,
                    peak_memory_mb=30.0,
                )
                for r in range(5)
            ]
            cell = Cell(backend="only", config="all", status="measured")
            CommandWorkload().summarize(spec, cell, list(samples))
            made.append(
                new_results(
                    spec,
                    Measurement([], [cell], Roles(reference=None, peer=None), [], "complete", None),
                    Provenance(["ptreg", "run"], f"2026-12-0{len(made) + 3}T00:00:00Z", "2026-12-05T00:01:00Z", 2),
                )
            )
        return made[0], made[1]

    alone = {m.metric: m for m in metric_shifts(*runs(1), earlier=[], threshold=0.05, same_machine=True)}
    assert alone["m0"].verdict == "worse" and alone["m0"].p is not None and 0.02 < alone["m0"].p < 0.05
    assert alone["m0"].q == alone["m0"].p  # a family of one
    two = {m.metric: m for m in metric_shifts(*runs(2), earlier=[], threshold=0.05, same_machine=True)}
    assert two["m0"].q == pytest.approx(2 * two["m0"].p) and two["m0"].verdict == "no difference resolved"


def test_runs_of_arms_taken_back_to_back_are_one_batch() -> None:
    """Four runs of the same commit started in the same hour: one batch, so a wall time three
    times A's gets no verdict, and the row says why."""
    a = run({"baseline": ITEMS, "candidate": ITEMS}, 1.0, hour=500)
    b = run({"baseline": ITEMS, "candidate": ITEMS}, 3.0, hour=600)
    session = [run({"baseline": ITEMS, "candidate": ITEMS}, s, hour=500) for s in (0.98, 1.03, 1.01)]
    shifts = metric_shifts(a, b, earlier=session, threshold=0.05, same_machine=True)
    wall = next(m for m in shifts if m.arm == "baseline" and m.metric == "wall_seconds")
    assert wall.batches == 1 and wall.p is None
    assert wall.verdict == (
        "no verdict: history is 1 batch of 4 runs taken back to back; 4 batches needed (3 more runs, each apart)"
    )
