"""Whether an analysis plan's decision errs at most at its stated rate, by simulation.

Run: python benchmarks/plan_calibration.py [--sims N] [--seed S] [--out FILE] [--rows KEY,...]

Each simulated attempt runs two arms, baseline and candidate, whose true difference is set by
the row, and decides the row's plan on them through ptreg's own path: per repeat (one seed) a
``MetricSample`` of each arm, with a 0/1 score per item for an item-level metric and one value
per round for a latency, a throughput or a memory; the ``command`` workload's ``summarize`` and
``compare`` as a run of the current results version records them (a score taken over its items
crossed with its seeds, a ratio paired by round with its rounds in order, each with its 95%
t-interval); a ``RunResults`` of an arms evaluator made by ``new_results``, so of that version;
``decide`` on the trees ``parse`` gives; ``status_of``; and, for a plan that pools runs,
``pooled``. Nothing is vectorised past the drawing of the numbers: every decision is ptreg's.

The world, unless a row says otherwise: 400 items, each with its own chance of being answered
(0.15 to 0.85) and its own gain under the candidate (uniform within 0.05 of the row's effect,
so the population's mean gain is the effect exactly), scored 0/1 by each of 5 seeds; latency
and throughput taken once per arm per round, the arms of a round run back to back in a fresh
order and sharing the round's load (log-normal, 10%), each run with its own noise (5%); peak
memory with 2% noise. Throughput is measured apart from latency, so their noise is
independent. A row's harsher noise changes one of these at a time.

A row counts how often each claim is made over ``--sims`` attempts, and sets it beside the rate
ptreg states for it, with a 95% Clopper-Pearson interval (scipy.stats.binomtest). A row's
numbers depend only on ``--seed``, ``--sims`` and the row's key. Nothing here times anything.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.analysis_plan import Plan, PlanRule, PlanStatus, margin_problems, rule_problems, status_of
from ptreg.records.condition import Or, render
from ptreg.records.condition_grammar import parse
from ptreg.records.decision import SIDE, decide
from ptreg.records.evaluator import ArmsSpec, parse_spec
from ptreg.records.run_results import Cell, Measurement, MetricSample, Provenance, Roles, RunResults, new_results
from ptreg.views.plans import pooled

ARMS = ("baseline", "candidate")
TASKS = tuple(f"task{i}" for i in range(10))
SPEC = parse_spec(
    {
        "name": "plan-calibration",
        "workload": "command",
        "command": ["python3", "evaluate.py", "{variant}"],
        "arms": {"baseline": {"variant": "a"}, "candidate": {"variant": "b"}},
        "baseline": "baseline",
        "metrics": {
            "score": {"better": "higher", "unit": "fraction"},
            "loss": {"better": "lower", "unit": "nats"},
            "latency_ms": {"better": "lower", "unit": "ms", "compare": "ratio"},
            "throughput": {"better": "higher", "unit": "tokens/s", "compare": "ratio"},
            **{task: {"better": "higher", "unit": "fraction"} for task in TASKS},
        },
        "repeats": 5,
        "seed": 0,
        "timeout_seconds": 600,
    },
    "plan-calibration spec",
)
assert isinstance(SPEC, ArmsSpec)
WORKLOAD = CommandWorkload()
ROLES = Roles(reference=None, peer=None)
CANDIDATE = "arm=candidate, over=baseline"


# --------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class World:
    """What is true, and how noisy measuring it is. A metric left None is not measured."""

    items: int = 400
    seeds: int = 5  # repeats: one round per seed, every arm once per round
    score: float | None = 0.0  # the candidate's true mean gain in score, per item (|gain| <= 0.1)
    tasks: int = 0  # further item-level scores (task0...), 100 items each, all without a gain
    loss: bool = False  # a continuous per-item loss with heavy tails (Student's t, 3 df), no gain
    latency: float | None = None  # the candidate's latency over the baseline's (its geometric mean)
    throughput: float | None = None
    memory: float | None = None
    # each seed of each arm trains its own model: a shift of all its items' chances (absolute)
    seed_spread: float = 0.0
    seed_tails: bool = False  # that shift drawn from Student's t with 3 df (scaled), not normal
    timing: Literal["interleaved", "back-to-back"] = "interleaved"
    timing_tails: bool = False  # each run's timing noise from Student's t with 3 df


@dataclass(frozen=True)
class Items:
    """One attempt's evaluation set: each item's chance of being answered under each arm (the
    same items for every run of the attempt), per item-level metric; and the loss's items."""

    chances: dict[str, tuple[np.ndarray, np.ndarray]]
    loss_base: np.ndarray | None
    names: dict[str, list[str]]


def draw_items(rng: np.random.Generator, world: World) -> Items:
    chances = {}
    sizes: dict[str, int] = {}
    metrics = ([("score", world.score)] if world.score is not None else []) + [(t, 0.0) for t in TASKS[: world.tasks]]
    for metric, gain in metrics:
        assert abs(gain) <= 0.1, "a gain beyond 0.1 would push a chance outside [0, 1]"
        size = world.items if metric == "score" else 100
        base = 0.15 + 0.7 * rng.beta(2, 2, size)
        chances[metric] = (base, base + gain + rng.uniform(-0.05, 0.05, size))
        sizes[metric] = size
    loss_base = 2.0 + 0.5 * rng.standard_t(3, world.items) if world.loss else None
    if world.loss:
        sizes["loss"] = world.items
    names = {metric: [f"q{i}" for i in range(size)] for metric, size in sizes.items()}
    return Items(chances, loss_base, names)


def _seed_shifts(rng: np.random.Generator, world: World) -> np.ndarray:
    """Per arm and seed, how much better or worse that seed's model answers every item."""
    shape = (len(ARMS), world.seeds)
    if world.seed_spread == 0:
        return np.zeros(shape)
    # t with 3 df has variance 3: scaled to the stated spread
    draws = rng.standard_t(3, shape) / np.sqrt(3.0) if world.seed_tails else rng.normal(0.0, 1.0, shape)
    return np.multiply(world.seed_spread, draws)


def _timing(rng: np.random.Generator, world: World, ratio: float, scale: float) -> np.ndarray:
    """One timing-like value per arm and round: the round's load, shared by its arms, and each
    run's own noise. Back to back, the load drifts from run to run (AR(1), heavy-tailed steps)
    and each round runs its arms in a fresh order, as ptreg does."""
    runs = len(ARMS) * world.seeds
    noise = rng.standard_t(3, runs) / np.sqrt(3) if world.timing_tails else rng.normal(0.0, 1.0, runs)
    noise = 0.05 * noise.reshape(world.seeds, len(ARMS))
    if world.timing == "interleaved":
        load = np.repeat(rng.normal(0.0, 0.10, (world.seeds, 1)), len(ARMS), axis=1)
    else:
        steps = rng.standard_t(3, runs) / np.sqrt(3) * 0.10 * np.sqrt(1 - 0.9**2)
        drift = np.empty(runs)
        drift[0] = rng.normal(0.0, 0.10)
        for slot in range(1, runs):
            drift[slot] = 0.9 * drift[slot - 1] + steps[slot]
        slots = np.array([rng.permutation(len(ARMS)) for _ in range(world.seeds)]) + len(ARMS) * np.arange(
            world.seeds
        ).reshape(-1, 1)
        load = drift[slots]
    ratios = np.array([1.0, ratio])
    return (scale * ratios * np.exp(load + noise)).T  # arm by round


def draw_run(rng: np.random.Generator, world: World, items: Items) -> dict[str, list[MetricSample]]:
    """One run of the evaluator: every arm once per round, one MetricSample each."""
    shifts = _seed_shifts(rng, world)
    scored: dict[str, np.ndarray] = {}  # metric: arm by seed by item
    for metric, (base, cand) in items.chances.items():
        chance = np.stack([base, cand])[:, None, :] + shifts[:, :, None]
        scored[metric] = (rng.random(chance.shape) < np.clip(chance, 0.0, 1.0)).astype(float)
    if items.loss_base is not None:
        noise = 0.3 * rng.standard_t(3, (len(ARMS), world.seeds, len(items.loss_base)))
        scored["loss"] = items.loss_base[None, None, :] + noise
    timed = {
        metric: _timing(rng, world, ratio, scale)
        for metric, ratio, scale in (("latency_ms", world.latency, 100.0), ("throughput", world.throughput, 1000.0))
        if ratio is not None
    }
    memory = (
        500.0 * np.array([1.0, world.memory])[:, None] * np.exp(rng.normal(0.0, 0.02, (len(ARMS), world.seeds)))
        if world.memory is not None
        else None
    )
    found: dict[str, list[MetricSample]] = {}
    for a, arm in enumerate(ARMS):
        samples = []
        for s in range(world.seeds):
            values = {metric: float(v[a, s].mean()) for metric, v in scored.items()}
            values.update({metric: float(v[a, s]) for metric, v in timed.items()})
            samples.append(
                MetricSample(
                    repeat=s,
                    seed=s,
                    values=values,
                    items={
                        metric: dict(zip(items.names[metric], v[a, s].tolist(), strict=True))
                        for metric, v in scored.items()
                    }
                    or None,
                    peak_memory_mb=float(memory[a, s]) if memory is not None else None,
                )
            )
        found[arm] = samples
    return found


def _template() -> RunResults:
    """A complete run of the evaluator, whose cells each simulated run replaces."""
    return new_results(
        SPEC,
        Measurement([], [], ROLES, [], "complete", None),
        Provenance(["ptreg", "run", "simulated"], "2026-12-02T00:00:00Z", "2026-12-02T00:01:00Z", 2),
    )


TEMPLATE = _template()


def results_of(samples: dict[str, list[MetricSample]]) -> RunResults:
    """The samples summarised and compared by the command workload, as a run records them."""
    cells = []
    for arm in ARMS:
        cell = Cell(backend=arm, config="all", status="measured")
        WORKLOAD.summarize(SPEC, cell, list(samples[arm]))
        cells.append(cell)
    WORKLOAD.compare(SPEC, cells, ROLES)
    return TEMPLATE.model_copy(update={"cells": cells})


# --------------------------------------------------------------------------- plans and claims


def plan(worked: str, regressed: str | None = None, margins: dict[str, float] | None = None, runs: int = 1) -> Plan:
    """A plan as the gate admits it: each rule's tree and canonical text, checked against the
    evaluator as the gate checks it."""

    def rule(text: str, what: str) -> PlanRule:
        tree = parse(text, what=what)
        problems = rule_problems(tree, SPEC, margins or {}, WORKLOAD.metrics)
        assert not problems, problems
        return PlanRule(text=render(tree), tree=tree)

    assert not margin_problems(margins or {}, SPEC, WORKLOAD.metrics)
    return Plan(
        worked_if=rule(worked, "worked-if"),
        regressed_if=rule(regressed, "regressed-if") if regressed is not None else None,
        margins=margins,
        runs=runs,
    )


def status(the_plan: Plan, results: RunResults) -> PlanStatus:
    """The status the plan gives these results, as ``decide_plan`` decides it."""
    margins = the_plan.margins or {}
    worked = decide(the_plan.worked_if.tree, results, margins)
    regressed = decide(the_plan.regressed_if.tree, results, margins) if the_plan.regressed_if is not None else None
    return status_of(worked.truth, regressed.truth if regressed else None, regressed is not None)[0]


Claim = Callable[[Plan, list[RunResults]], bool]


def first_run(*statuses: PlanStatus) -> Claim:
    """The plan's rule: the first complete run decides."""
    return lambda p, runs: status(p, runs[0]) in statuses


def pooled_runs(p: Plan, runs: list[RunResults]) -> bool:
    """The plan pools its first ``p.runs`` runs and decides once."""
    return status(p, pooled(runs[: p.runs])) == "worked"


def until_it_holds(p: Plan, runs: list[RunResults]) -> bool:
    """Not ptreg's rule: run again until worked-if holds, up to as many runs as were drawn."""
    return any(status(p, results) == "worked" for results in runs)


def each_at_95(p: Plan, runs: list[RunResults]) -> bool:
    """Not ptreg's rule: an or called true when any alternative holds at its own 95%."""
    tree = p.worked_if.tree
    assert isinstance(tree, Or)
    return any(decide(alternative, runs[0], p.margins or {}).truth is True for alternative in tree.args)


@dataclass(frozen=True)
class Line:
    """One claim of a row: what is counted and the rate ptreg states for it."""

    claim: str
    count: Claim
    bound: float = SIDE
    contrast: bool = False  # a rule ptreg does not follow, shown to exceed the bound
    # the truth sits exactly on the claim's boundary (an effect equal to its margin, or 0 with
    # none), where the rate should be the bound itself rather than below it
    boundary: bool = False


@dataclass(frozen=True)
class Row:
    key: str
    name: str
    plan_name: str  # a key of PLANS
    truth: str
    world: World
    lines: tuple[Line, ...]
    runs: int = 1  # runs drawn per attempt, over the same items

    @property
    def plan(self) -> Plan:
        return PLANS[self.plan_name]


def plan_text(the_plan: Plan) -> str:
    """A plan in one line of markdown: its rules, margins and runs."""
    shown = f"worked-if `{the_plan.worked_if.text}`"
    if the_plan.regressed_if is not None:
        shown += f"; regressed-if `{the_plan.regressed_if.text}`"
    if the_plan.margins:
        shown += "; margins " + ", ".join(f"{m} {v:g}" for m, v in the_plan.margins.items())
    if the_plan.runs > 1:
        shown += f"; decides on the first {the_plan.runs} runs, pooled"
    return shown


WORKED = Line("worked", first_run("worked"))
AT_BOUNDARY = replace(WORKED, boundary=True)


def ship_lines(worked: Line) -> tuple[Line, ...]:
    return (
        worked,
        Line("regressed", first_run("regressed")),
        Line("worked or regressed (each rule at 2.5%)", first_run("worked", "regressed"), bound=2 * SIDE),
    )


OR_LINES = (WORKED, Line("worked, each alternative at 95% (contrast)", each_at_95, contrast=True))
SCORE_MARGIN = 0.05

# The plans, by the name the table gives them.
PLANS: dict[str, Plan] = {
    "better": plan(f"better(score, {CANDIDATE})"),
    "better-margin": plan(f"better(score, {CANDIDATE})", margins={"score": SCORE_MARGIN}),
    "equivalent": plan(f"equivalent(score, {CANDIDATE})", margins={"score": SCORE_MARGIN}),
    "non-inferior": plan(f"diff(score, {CANDIDATE}) > -0.02"),
    "faster-margin": plan(f"better(latency_ms, {CANDIDATE})", margins={"latency_ms": 1.05}),
    "faster": plan(f"better(latency_ms, {CANDIDATE})"),
    "three-and": plan(
        f"better(score, {CANDIDATE}) and better(latency_ms, {CANDIDATE}) and better(throughput, {CANDIDATE})"
    ),
    "three-or": plan(
        f"better(score, {CANDIDATE}) or better(latency_ms, {CANDIDATE}) or better(throughput, {CANDIDATE})"
    ),
    "ship": plan(
        f"diff(score, {CANDIDATE}) > -0.02 and better(latency_ms, {CANDIDATE}) "
        f"and not worse(peak_memory_mb, {CANDIDATE})",
        f"worse(score, {CANDIDATE}) or lost(score, {CANDIDATE}) > 200",
        margins={"score": 0.02, "latency_ms": 1.05, "peak_memory_mb": 1.10},
    ),
    "better-pooled": plan(f"better(score, {CANDIDATE})", runs=3),
    "lower-loss": plan(f"better(loss, {CANDIDATE})"),
    "ten-or": plan(" or ".join(f"better({task}, {CANDIDATE})" for task in TASKS)),
}
TIMED = World(score=None, latency=1.0)
SEEDED = World(seed_spread=0.02)

ROWS: tuple[Row, ...] = (
    Row("one", "one metric, null", "better", "score gain 0", World(), (AT_BOUNDARY,)),
    Row(
        "margin-better",
        "at the margin",
        "better-margin",
        f"score gain {SCORE_MARGIN:+g} (the margin)",
        World(score=0.05),
        (AT_BOUNDARY,),
    ),
    Row(
        "margin-equivalent-above",
        "at the margin",
        "equivalent",
        f"score gain {SCORE_MARGIN:+g} (the margin)",
        World(score=SCORE_MARGIN),
        (AT_BOUNDARY,),
    ),
    Row(
        "margin-equivalent-below",
        "at the margin",
        "equivalent",
        f"score gain {-SCORE_MARGIN:+g} (minus the margin)",
        World(score=-SCORE_MARGIN),
        (AT_BOUNDARY,),
    ),
    Row("margin-noninferior", "at the margin", "non-inferior", "score gain -0.02", World(score=-0.02), (AT_BOUNDARY,)),
    Row(
        "margin-ratio",
        "at the margin, a ratio",
        "faster-margin",
        "latency 1/1.05x (the margin)",
        replace(TIMED, latency=1 / 1.05),
        (AT_BOUNDARY,),
    ),
    Row(
        "three-and-null",
        "three metrics, and, all null",
        "three-and",
        "score 0, latency 1x, throughput 1x",
        World(latency=1.0, throughput=1.0),
        (WORKED,),
    ),
    Row(
        "three-and-score",
        "three metrics, and, one null (worst case)",
        "three-and",
        "score 0, latency 0.7x, throughput 1.4x",
        World(latency=0.7, throughput=1.4),
        (AT_BOUNDARY,),
    ),
    Row(
        "three-and-latency",
        "three metrics, and, one null (worst case)",
        "three-and",
        "score +0.08, latency 1x, throughput 1.4x",
        World(score=0.08, latency=1.0, throughput=1.4),
        (AT_BOUNDARY,),
    ),
    Row(
        "three-or-null",
        "three metrics, or, all null",
        "three-or",
        "score 0, latency 1x, throughput 1x",
        World(latency=1.0, throughput=1.0),
        OR_LINES,
    ),
    Row(
        "ship-null",
        "ship/reject, null",
        "ship",
        "score 0, latency 1x, memory 1x",
        World(latency=1.0, memory=1.0),
        ship_lines(WORKED),
    ),
    Row(
        "ship-score-margin",
        "ship/reject, score at its margins",
        "ship",
        "score -0.02, latency 0.8x, memory 1x",
        World(score=-0.02, latency=0.8, memory=1.0),
        ship_lines(AT_BOUNDARY),
    ),
    Row(
        "ship-latency-margin",
        "ship/reject, latency at its margin",
        "ship",
        "score +0.05, latency 1/1.05x, memory 1x",
        World(score=0.05, latency=1 / 1.05, memory=1.0),
        ship_lines(AT_BOUNDARY),
    ),
    Row(
        "ship-memory-margin",
        "ship/reject, memory at its margin",
        "ship",
        "score +0.05, latency 0.8x, memory 1.1x",
        World(score=0.05, latency=0.8, memory=1.10),
        ship_lines(AT_BOUNDARY),
    ),
    Row(
        "reruns",
        "re-runs, null",
        "better",
        "score gain 0; 3 runs of the same items",
        World(),
        (
            Line("worked on the first run (ptreg's rule)", first_run("worked"), boundary=True),
            Line("worked on any of 3 runs: run again until it holds (contrast)", until_it_holds, contrast=True),
        ),
        runs=3,
    ),
    Row(
        "pooled",
        "re-runs pooled, null",
        "better-pooled",
        "score gain 0; 3 runs of the same items",
        World(),
        (Line("worked on the 3 runs pooled", pooled_runs, boundary=True),),
        runs=3,
    ),
    Row(
        "tails-items",
        "harsher: heavy-tailed item noise",
        "lower-loss",
        "loss gain 0; items and noise t(3)",
        World(score=None, loss=True),
        (WORKED,),
    ),
    Row("seed-normal", "harsher: seed effects", "better", "score gain 0; each seed's model sd 0.02", SEEDED, (WORKED,)),
    Row(
        "seed-tails",
        "harsher: seed effects, heavy-tailed",
        "better",
        "score gain 0; each seed's model sd 0.02, t(3)",
        replace(SEEDED, seed_tails=True),
        (WORKED,),
    ),
    Row(
        "many-items",
        "harsher: many items, few seeds",
        "better",
        "score gain 0; 2000 items, 2 seeds",
        World(items=2000, seeds=2),
        (WORKED,),
    ),
    Row(
        "many-items-seeded",
        "harsher: many items, few seeds, seed effects",
        "better",
        "score gain 0; 2000 items, 2 seeds, each seed's model sd 0.01",
        World(items=2000, seeds=2, seed_spread=0.01),
        (WORKED,),
    ),
    Row(
        "back-to-back",
        "harsher: runs back to back",
        "faster",
        "latency 1x; load drifts from run to run (AR(1), t(3) steps)",
        replace(TIMED, timing="back-to-back"),
        (WORKED,),
    ),
    Row(
        "timing-tails",
        "harsher: heavy-tailed timing noise, 3 rounds",
        "faster",
        "latency 1x; each run's noise t(3)",
        replace(TIMED, seeds=3, timing_tails=True),
        (WORKED,),
    ),
    Row(
        "ten-or",
        "harsher: 10 metrics at once, or",
        "ten-or",
        "10 scores of 100 items each, gain 0",
        World(score=None, tasks=10),
        OR_LINES,
    ),
    Row(
        "ten-or-seeded",
        "harsher: 10 metrics at once, or, seed effects",
        "ten-or",
        "10 scores, gain 0; each seed's model sd 0.02 on all",
        World(score=None, tasks=10, seed_spread=0.02),
        OR_LINES,
    ),
)


# --------------------------------------------------------------------------- counting


@dataclass
class Counted:
    row: Row
    sims: int
    made: list[int] = field(default_factory=list)  # per line, how many attempts made the claim


def count(row: Row, sims: int, seed: int) -> Counted:
    """Simulate ``sims`` attempts of the row and count each line's claims."""
    rng = np.random.default_rng([seed, zlib.crc32(row.key.encode())])
    made = [0] * len(row.lines)
    for _ in range(sims):
        items = draw_items(rng, row.world)
        runs = [results_of(draw_run(rng, row.world, items)) for _ in range(row.runs)]
        for i, line in enumerate(row.lines):
            made[i] += line.count(row.plan, runs)
    return Counted(row, sims, made)


def interval(made: int, sims: int) -> tuple[float, float]:
    """The 95% Clopper-Pearson interval of a rate."""
    found = binomtest(made, sims).proportion_ci(confidence_level=0.95, method="exact")
    return float(found.low), float(found.high)


def holds(made: int, sims: int, bound: float) -> str:
    """yes: observed within the bound; within noise: above it, but not by more than the
    simulation can tell; no: the data show the bound exceeded."""
    if made / sims <= bound:
        return "yes"
    return "within noise" if interval(made, sims)[0] <= bound else "no"


def percent(rate: float) -> str:
    return f"{100 * rate:.2f}%"


def table(counted: Sequence[Counted]) -> list[str]:
    """The results, one line per claim, then the plans they name."""
    lines = [
        "| row | plan | truth | claim | N | observed (95% CI) | stated bound | holds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in counted:
        for line, made in zip(c.row.lines, c.made, strict=True):
            low, high = interval(made, c.sims)
            lines.append(
                f"| {c.row.name} | {c.row.plan_name} | {c.row.truth} | {line.claim} | {c.sims} | "
                f"{percent(made / c.sims)} ({percent(low)} to {percent(high)}) | <= {percent(line.bound)} | "
                f"{holds(made, c.sims, line.bound)} |"
            )
    at = [(made, c.sims) for c in counted for line, made in zip(c.row.lines, c.made, strict=True) if line.boundary]
    if at:
        made, sims = sum(m for m, _ in at), sum(n for _, n in at)
        low, high = interval(made, sims)
        lines += [
            "",
            f"The {len(at)} claims above whose truth sits exactly on their boundary, outside the harsher rows, "
            f"together: {made} of {sims} attempts, {percent(made / sims)} ({percent(low)} to {percent(high)}), "
            f"against {percent(SIDE)}.",
        ]
    named = dict.fromkeys(c.row.plan_name for c in counted)
    lines += ["", "| plan | rules |", "| --- | --- |"]
    lines += [f"| {name} | {plan_text(PLANS[name])} |" for name in named]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000, help="simulated attempts per row")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, help="also write the table, as markdown, here")
    parser.add_argument("--rows", help="only these rows, by key, comma-separated")
    args = parser.parse_args(argv)
    wanted = args.rows.split(",") if args.rows else [r.key for r in ROWS]
    unknown = sorted(set(wanted) - {r.key for r in ROWS})
    if unknown:
        parser.error(f"no row {', '.join(unknown)} (rows: {', '.join(r.key for r in ROWS)})")
    counted = []
    for row in ROWS:
        if row.key in wanted:
            counted.append(count(row, args.sims, args.seed))
            print(f"{row.key}: {', '.join(str(m) for m in counted[-1].made)} of {args.sims}", file=sys.stderr)
    command = f"python benchmarks/plan_calibration.py --sims {args.sims} --seed {args.seed}"
    command += f" --rows {args.rows}" if args.rows else ""
    lines = [f"{args.sims} simulated attempts per row, seed {args.seed}: `{command}`", "", *table(counted)]
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
