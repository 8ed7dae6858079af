"""Analysis plans: the language a real decision needs, decided on known synthetic runs; the
status a plan gives; which runs decide; and a plan edited after admission."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import assert_one_line_error, complete_record, snapshot, write_registry
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.errors import PtregError
from ptreg.records.analysis_plan import Plan, PlanRule, plan_digest, rule_problems, status_of
from ptreg.records.attempt import Attempt
from ptreg.records.condition import render
from ptreg.records.condition_grammar import parse
from ptreg.records.decision import decide
from ptreg.records.evaluator import ArmsSpec, parse_spec
from ptreg.records.run_results import (
    RESULTS_VERSION,
    Cell,
    Measurement,
    MetricSample,
    Provenance,
    Roles,
    RunResults,
    new_results,
)
from ptreg.views.plans import decide_plan, pooled

SPEC = parse_spec(
    {
        "name": "ship",
        "workload": "command",
        "command": ["python3", "x.py", "{model}"],
        "arms": {"champion": {"model": "a"}, "challenger": {"model": "b"}},
        "baseline": "champion",
        "metrics": {
            "score": {"better": "higher", "unit": "fraction"},
            "latency_ms": {"better": "lower", "unit": "ms", "compare": "ratio"},
        },
        "repeats": 3,
        "seed": 0,
        "timeout_seconds": 10,
    },
    "spec",
)
CANDIDATE = "arm=challenger, over=champion"


def arms_run(
    items: dict[str, list[dict[str, float]]],
    memory: dict[str, list[float]] | None = None,
    latency: dict[str, list[float]] | None = None,
    run_id: str | None = None,
    attempt: str | None = None,
    version: int = RESULTS_VERSION,
) -> RunResults:
    """A run of the two arms: each repeat's items (score 0..1), peak memory and latency, as runs
    of ``version`` record it."""
    assert isinstance(SPEC, ArmsSpec)
    workload = CommandWorkload()
    cells = []
    for arm, repeats in items.items():
        samples = [
            MetricSample(
                repeat=r,
                seed=r,
                values={
                    "score": sum(scored.values()) / len(scored),
                    "latency_ms": (latency or {}).get(arm, [10.0] * len(repeats))[r],
                },
                items={"score": scored},
                wall_seconds=1.0 + 0.01 * r,
                peak_memory_mb=(memory or {}).get(arm, [30.0] * len(repeats))[r],
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
        Provenance(["ptreg", "run"], "2026-12-02T00:00:00Z", "2026-12-02T00:01:00Z", 2, attempt=attempt, run_id=run_id),
    )
    return RunResults.model_validate({**made.model_dump(), "results_version": version})


def scores(values: list[float], repeats: int = 3) -> list[dict[str, float]]:
    return [{f"q{i}": v for i, v in enumerate(values)}] * repeats


def truth(text: str, results: RunResults, margins: dict[str, float] | None = None) -> bool | None:
    return decide(parse(text, against=results), results, margins).truth


# --------------------------------------------------------------------------- the language


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        (f"diff(score, {CANDIDATE}) > -0.02", f"diff(score, {CANDIDATE}) > -0.02"),
        (f"diff(score, {CANDIDATE}) >= - .5", f"diff(score, {CANDIDATE}) >= -0.5"),
        (f"-diff(score, {CANDIDATE}) < 0.02", f"-diff(score, {CANDIDATE}) < 0.02"),
        ("lost(score, challenger, champion) <= 3", f"lost(score, {CANDIDATE}) <= 3"),
        (f"won(score, {CANDIDATE}) > lost(score, {CANDIDATE})", f"won(score, {CANDIDATE}) > lost(score, {CANDIDATE})"),
        (f"equivalent(peak_memory_mb, {CANDIDATE})", f"equivalent(peak_memory_mb, {CANDIDATE})"),
        (
            f"better(score, {CANDIDATE}) and not worse(latency_ms, {CANDIDATE})",
            f"better(score, {CANDIDATE}) and not worse(latency_ms, {CANDIDATE})",
        ),
        (f"diff(score, {CANDIDATE}) > -0", f"diff(score, {CANDIDATE}) > 0"),
    ],
)
def test_a_real_decision_parses_to_its_canonical_text_and_back(text: str, canonical: str) -> None:
    tree = parse(text)
    assert render(tree) == canonical
    assert parse(render(tree)).model_dump(mode="json") == tree.model_dump(mode="json")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (f"diff(score, {CANDIDATE}) > --0.02", "a minus sign twice"),
        (f"diff(score, {CANDIDATE}) > 0.5-0.02", "no arithmetic"),
        (f"better(score, {CANDIDATE}) > 0", "is a verdict, not a number"),
        (f"diff(score, {CANDIDATE})", "is a quantity, not a verdict"),
        ("lost(score, champion, champion) <= 3", "with itself"),
        (f"-low(diff(score, {CANDIDATE})) < 1", "'-' takes a number or a quantity"),
    ],
)
def test_what_is_not_a_decision_is_refused_in_one_line(text: str, fragment: str) -> None:
    with pytest.raises(PtregError) as refused:
        parse(text, what="worked-if")
    assert refused.value.message.startswith("worked-if condition, column ")
    assert fragment in refused.value.message and "\n" not in refused.value.message


# --------------------------------------------------------------------------- decided on known runs


def test_a_non_inferiority_margin_holds_where_a_superiority_test_does_not() -> None:
    # every item scores 0.02 lower for the challenger, on every seed: no spread
    champion = scores([0.5] * 50)
    challenger = scores([0.48] * 50)
    results = arms_run({"champion": champion, "challenger": challenger})
    assert truth(f"diff(score, {CANDIDATE}) > -0.03", results) is True
    assert truth(f"diff(score, {CANDIDATE}) > -0.02", results) is False  # -0.02 is not above -0.02
    assert truth(f"diff(score, {CANDIDATE}) > 0", results) is False


def test_items_lost_are_counted_and_compared() -> None:
    champion = scores([1.0] * 10 + [0.0] * 10)
    challenger = scores([0.0] * 3 + [1.0] * 7 + [1.0] * 4 + [0.0] * 6)  # 3 lost, 4 won, 13 tied
    results = arms_run({"champion": champion, "challenger": challenger})
    assert truth(f"lost(score, {CANDIDATE}) <= 3", results) is True
    assert truth(f"lost(score, {CANDIDATE}) <= 2", results) is False
    assert truth(f"won(score, {CANDIDATE}) >= 4 and tied(score, {CANDIDATE}) > 12", results) is True


def test_a_difference_within_the_margin_is_no_practical_difference() -> None:
    # peak memory 35.41 against 35.39 MB: resolved, but nobody cares at a 5% margin
    items = {"champion": scores([1.0]), "challenger": scores([1.0])}
    memory = {"champion": [35.39, 35.39, 35.39], "challenger": [35.41, 35.41, 35.41]}
    results = arms_run(items, memory=memory)
    assert truth(f"worse(peak_memory_mb, {CANDIDATE})", results) is True  # no margin: any resolved difference
    margins = {"peak_memory_mb": 1.05}
    assert truth(f"worse(peak_memory_mb, {CANDIDATE})", results, margins) is False
    assert truth(f"better(peak_memory_mb, {CANDIDATE})", results, margins) is False
    assert truth(f"equivalent(peak_memory_mb, {CANDIDATE})", results, margins) is True
    # well outside the margin: not equivalent, and worse
    memory = {"champion": [30.0, 30.2, 29.9], "challenger": [40.0, 40.1, 39.8]}
    results = arms_run(items, memory=memory)
    assert truth(f"equivalent(peak_memory_mb, {CANDIDATE})", results, margins) is False
    assert truth(f"worse(peak_memory_mb, {CANDIDATE})", results, margins) is True


def test_equivalence_without_a_margin_is_undecided_not_guessed() -> None:
    results = arms_run({"champion": scores([1.0]), "challenger": scores([1.0])})
    decided = decide(parse(f"equivalent(score, {CANDIDATE})"), results, {})
    assert decided.truth is None and "no margin" in decided.summary()


def test_an_or_holds_each_alternative_to_its_share_of_the_error() -> None:
    # a difference whose 95% interval clears 0 but whose 97.5% interval does not (t = 2.65 on 7
    # degrees of freedom, between 2.36 and 2.84)
    # (two seeds that agree item for item: the seeds add no variance, and the items' gives the t)
    champion = [{f"q{i}": 0.0 for i in range(8)}] * 2
    challenger = [{f"q{i}": (1.0 if i < 4 else 0.0) for i in range(8)}] * 2
    results = arms_run({"champion": champion, "challenger": challenger})
    alone = decide(parse(f"diff(score, {CANDIDATE}) > 0"), results)
    assert alone.truth is True, alone.summary()
    split = decide(parse(f"diff(score, {CANDIDATE}) > 0 or diff(score, {CANDIDATE}) > 5"), results)
    assert split.truth is None and "97.5% CI" in split.summary(), split.summary()
    # an and keeps the full level for each part (intersection-union): the same part holds
    both = decide(parse(f"diff(score, {CANDIDATE}) > 0 and lost(score, {CANDIDATE}) <= 10"), results)
    assert both.truth is True, both.summary()


def test_the_plans_order_gives_the_status() -> None:
    assert status_of(True, True, True)[0] == "regressed"
    assert status_of(True, False, True)[0] == "worked"
    assert status_of(True, None, True)[0] == "inconclusive"
    assert status_of(True, None, False)[0] == "worked"
    assert status_of(False, None, True)[0] == "failed"
    assert status_of(None, False, True)[0] == "inconclusive"


def test_the_gate_names_what_the_evaluator_does_not_measure() -> None:
    assert isinstance(SPEC, ArmsSpec)
    found = rule_problems(parse("better(accuracy, arm=challenger, over=champion)"), SPEC, {})
    assert found == [
        "better(accuracy, arm=challenger, over=champion): evaluator ship declares no metric accuracy "
        "(its metrics: latency_ms, peak_memory_mb, score, wall_seconds)"
    ]
    assert "has no arm rookie" in rule_problems(parse("diff(score, arm=rookie, over=champion) > 0"), SPEC, {})[0]
    assert "--margin score=VALUE" in rule_problems(parse(f"equivalent(score, {CANDIDATE})"), SPEC, {})[0]
    assert "compared as a ratio" in rule_problems(parse(f"lost(latency_ms, {CANDIDATE}) < 3"), SPEC, {})[0]
    assert "reads backends" in rule_problems(parse("speedup(numba, over=naive, config=xl) > 1"), SPEC, {})[0]


# --------------------------------------------------------------------------- which runs decide


def plan_record(attempt_id: str, worked_if: str, runs: int = 1, margins: dict[str, float] | None = None) -> Any:
    tree = parse(worked_if)
    plan = Plan(worked_if=PlanRule(text=render(tree), tree=tree), runs=runs, margins=margins)
    return complete_record(
        attempt_id, status="not-tried", evidence=None, lesson=None, next_action=None, plan=plan.model_dump(mode="json")
    )


def add_arms_run(root: Path, attempt_id: str, run_id: str, results: RunResults) -> None:
    folder = root / "runs" / attempt_id / run_id
    folder.mkdir(parents=True)
    body = results.model_copy(update={"run_id": run_id, "attempt": attempt_id}).model_dump(mode="json")
    (folder / "results.json").write_text(json.dumps(body), encoding="utf-8")
    (folder / "environment.json").write_text("{}\n", encoding="utf-8")
    path = root / f"{attempt_id}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["runs"] = [*record.get("runs", []), {"run_id": run_id, "status": "complete"}]
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")


WIN = {"champion": scores([0.0] * 20), "challenger": scores([1.0] * 20)}
LOSS = {"champion": scores([1.0] * 20), "challenger": scores([0.0] * 20)}
ZEROS, ONES = {f"q{i}": 0.0 for i in range(20)}, {f"q{i}": 1.0 for i in range(20)}
NOISE = {  # two rounds each way, the runs' seeds the same: pooled, every item of every seed ties
    "champion": [ZEROS, ZEROS, ONES, ONES],
    "challenger": [ONES, ONES, ZEROS, ZEROS],
}


def test_a_second_run_never_changes_the_decision_of_a_plan_on_the_first(tmp_path: Path, cli) -> None:
    root = write_registry(tmp_path / "reg", [plan_record("ship-it", f"better(score, {CANDIDATE})")])
    add_arms_run(root, "ship-it", "20261201T000000Z", arms_run(WIN))
    first = decide_plan(root, Attempt.model_validate(json.loads((root / "ship-it.json").read_text())))
    assert first is not None and first.status == "worked" and first.runs == ["20261201T000000Z"]
    add_arms_run(root, "ship-it", "20261202T000000Z", arms_run(LOSS))
    again = decide_plan(root, Attempt.model_validate(json.loads((root / "ship-it.json").read_text())))
    assert again is not None and again.status == "worked" and again.runs == ["20261201T000000Z"]
    assert again.runs_text() == "2 complete runs; the plan decides on the first (1 later run(s) counted, not read)"
    words = ["--lesson", "It won.", "--next-action", "Ship it.", "--evidence", "Two runs."]
    done = cli("-r", root, "conclude", "ship-it", *words)
    assert done.code == 0, done.err
    assert "the plan decides worked: worked-if holds" in done.out and "(1 later run(s) counted, not read)" in done.out
    record = json.loads((root / "ship-it.json").read_text())
    assert record["status"] == "worked" and record["plan_decision"]["runs"] == ["20261201T000000Z"]
    # and a continue-if reads the same run the plan decides on, not the latest
    before = snapshot(root)
    again = cli("-r", root, "conclude", "ship-it", *words, "--continue-if", f"diff(score, {CANDIDATE}) < 0")
    assert again.code == 0 and "continue-if does not hold" in again.out and "20261201T000000Z" in again.out
    assert snapshot(root) != before


def test_a_plan_that_pools_runs_waits_for_them_and_decides_on_the_pool(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [plan_record("pooled", f"better(score, {CANDIDATE})", runs=2)])
    add_arms_run(root, "pooled", "20261201T000000Z", arms_run({k: v[:2] for k, v in NOISE.items()}))

    def outcome() -> Any:
        return decide_plan(root, Attempt.model_validate(json.loads((root / "pooled.json").read_text())))

    waiting = outcome()
    assert waiting.status == "inconclusive" and "1 complete run(s) of the 2 its plan pools" in waiting.because
    add_arms_run(root, "pooled", "20261202T000000Z", arms_run({k: v[2:] for k, v in NOISE.items()}))
    pooled = outcome()
    assert pooled.runs == ["20261201T000000Z", "20261202T000000Z"]
    # each seed's items averaged over the two runs tie, so not better; the first run alone said worked
    assert pooled.status == "failed" and "(pooled)" in pooled.readout[0], pooled.readout
    add_arms_run(root, "pooled", "20261203T000000Z", arms_run(WIN))
    assert outcome().runs == pooled.runs  # a third run is counted, never read


def test_a_contrary_status_needs_a_deviation_which_is_recorded_and_shown(tmp_path: Path, cli) -> None:
    root = write_registry(tmp_path / "reg", [plan_record("lost-it", f"better(score, {CANDIDATE})")])
    add_arms_run(root, "lost-it", "20261201T000000Z", arms_run(LOSS))
    before = snapshot(root)
    words = ["--lesson", "It lost.", "--next-action", "Keep the champion.", "--evidence", "One run."]
    refused = cli("-r", root, "conclude", "lost-it", "--status", "worked", *words)
    assert_one_line_error(refused, 1, "--status worked is not what its plan decides failed", "--deviation")
    assert snapshot(root) == before
    done = cli(
        "-r", root, "conclude", "lost-it", "--status", "inconclusive", *words,
        "--deviation", "The items were mislabelled after the freeze.", "--failure-reason", "Labels.",
        "--confidence", "inferred",
    )  # fmt: skip
    assert done.code == 0, done.err
    record = json.loads((root / "lost-it.json").read_text())
    assert record["plan_decision"]["status"] == "failed" and record["status"] == "inconclusive"
    assert record["deviation"] == "The items were mislabelled after the freeze."
    assert cli("-r", root, "validate").code == 0
    shown = cli("-r", root, "show", "lost-it").out
    assert "deviates from its plan" in shown and "The items were mislabelled after the freeze." in shown
    listed = cli("-r", root, "list").out
    assert "inconclusive (deviates)" in listed


def test_a_plan_edited_after_admission_is_caught(tmp_path: Path, cli) -> None:
    record = plan_record("edited", f"better(score, {CANDIDATE})")
    record["admission"] = {
        "admitted_at": "2026-12-01T00:00:00Z",
        "ptreg_version": "0.1.0",
        "registry_state": {"attempts": 0, "evaluators": 0, "sha256": "0" * 64},
        "checks": [],
        "precedents": [],
        "plan_sha256": plan_digest(Plan.model_validate(record["plan"])),
    }
    root = write_registry(tmp_path / "reg", [record])
    assert cli("-r", root, "validate").code == 0
    path = root / "edited.json"
    body = json.loads(path.read_text())
    looser = parse(f"diff(score, {CANDIDATE}) > -1")
    body["plan"]["worked_if"] = {"text": render(looser), "tree": looser.model_dump(mode="json")}
    path.write_text(json.dumps(body))
    checked = cli("-r", root, "validate")
    assert checked.code == 1 and "[plan-integrity]" in checked.out and "edited after admission" in checked.out


def test_a_pool_of_runs_before_version_8_is_decided_as_they_were_recorded() -> None:
    # one seed in each run, the same seed: version 7 paired the items, version 8 gives no verdict
    one = {"champion": [ZEROS], "challenger": [ONES]}
    old = [arms_run(one, version=7) for _ in range(2)]
    for run in old:  # as version 7 recorded them
        for cell in run.cells:
            for summary in (cell.metrics or {}).values():
                assert summary.variance is None
    pool = pooled(old)
    assert pool.results_version == 7
    versus = (pool.cells[1].versus or {})["champion"]["score"]
    assert versus.variance is None and versus.ci is not None  # items averaged over the repeats
    assert decide(parse(f"better(score, {CANDIDATE})"), pool).truth is True
    new = pooled([arms_run(one), arms_run(one)])
    assert (new.cells[1].versus or {})["champion"]["score"].variance == "items only"
    assert decide(parse(f"better(score, {CANDIDATE})"), new).truth is None
