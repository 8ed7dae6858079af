"""The peer ledger's decisions as analysis plans (tests/data/peer_plans.json).

For each training run and model evaluation of ../shared/data/posttrainllm-attempts.json the
file holds the evaluator it would need, its decision written as a plan, how much of the decision
the plan states (fits, partly, no) and, where the ledger has the numbers, a run that reproduces
them. Here every plan must be one that ptreg registers against its evaluator, and must decide on
that run the status the entry says; where that is not the status the ledger recorded, the entry
says why. With ../shared, every id, status and number is checked against the ledger itself, and
none of the ledger's sentences may have been carried over. docs/plans-in-practice.md gives the
counts this file holds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from helpers import REPO
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.analysis_plan import CONSISTENT, Plan, PlanRule, margin_problems, rule_problems
from ptreg.records.attempt import RunRef
from ptreg.records.condition import render
from ptreg.records.condition_grammar import parse
from ptreg.records.evaluator import ALL_CONFIG, ArmsSpec, parse_spec
from ptreg.records.run_results import (
    RESULTS_VERSION,
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
from ptreg.views.plans import Deciding, plan_outcome

PLANS = json.loads((REPO / "tests" / "data" / "peer_plans.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = PLANS["entries"]
PAGE = REPO / "docs" / "plans-in-practice.md"
CLASSES = ("fits", "partly", "no")
RUN_ID = "20260805T000000Z"
# The ledger's kinds whose decisions are about a model's numbers (the rest are infrastructure).
DECIDED_KINDS = ("training-run", "model-evaluation")
# The ledger's own text fields, which the file's sentences must not repeat.
LEDGER_TEXT = ("name", "evidence", "failure_reason", "lesson", "next_action", "varied")
# A run of this many words in common with the ledger is a copied sentence, not a shared fact.
COPIED_WORDS = 6


def with_plan() -> list[dict[str, Any]]:
    return [e for e in ENTRIES if e["plan"] is not None]


def with_run() -> list[dict[str, Any]]:
    return [e for e in ENTRIES if e["run"] is not None]


def spec_of(entry: dict[str, Any]) -> ArmsSpec:
    """The entry's evaluator sketch as a command evaluator ptreg would freeze."""
    sketch = entry["spec"]
    raw = {
        "name": entry["id"],
        "workload": "command",
        "command": sketch["command"],
        "arms": sketch["arms"],
        "baseline": sketch["baseline"],
        "metrics": sketch["metrics"],
        "repeats": 1,
        "seed": 0,
        "timeout_seconds": 3600,
    }
    spec = parse_spec(raw, f"{entry['id']} spec")
    assert isinstance(spec, ArmsSpec)
    return spec


def plan_of(entry: dict[str, Any]) -> Plan:
    """The entry's plan as ptreg registers it: each rule parsed and stored in its canonical text."""
    written = entry["plan"]

    def rule(flag: str) -> PlanRule | None:
        if written[flag] is None:
            return None
        tree = parse(written[flag], what=flag.replace("_", "-"))
        return PlanRule(text=render(tree), tree=tree)

    worked = rule("worked_if")
    assert worked is not None
    return Plan(worked_if=worked, regressed_if=rule("regressed_if"), margins=written["margins"])


# The ledger's figures are one evaluation each, one seed: its runs are taken as runs of results
# version 7, which paired items within one seed; from version 8 one seed decides nothing.
LEDGER_VERSION = 7


def run_of(entry: dict[str, Any], spec: ArmsSpec, version: int = LEDGER_VERSION) -> RunResults:
    """One round of the entry's arms, scoring what the ledger records: a share of n items as
    that many items, the first k of them right (so arms agree on as many items as their counts
    allow), a value without items as that value; what the ledger does not record is absent;
    summarised and compared as runs of ``version`` were."""
    workload = CommandWorkload()
    cells = []
    for arm in spec.arms:
        values: dict[str, float] = {}
        items: dict[str, dict[str, float]] = {}
        for metric, figure in entry["run"].get(arm, {}).items():
            if "correct" in figure:
                scored = {f"item-{i}": 1.0 if i < figure["correct"] else 0.0 for i in range(figure["of"])}
                items[metric] = scored
                values[metric] = figure["correct"] / figure["of"]
            else:
                values[metric] = figure["value"]
        sample = MetricSample(repeat=0, seed=0, values=values, items=items or None)
        cell = Cell(backend=arm, config=ALL_CONFIG, status="measured")
        workload.summarize(spec, cell, [sample], results_version=version)
        cells.append(cell)
    roles = Roles(reference=None, peer=None)
    workload.compare(spec, cells, roles, results_version=version)
    code = CodeIdentity(
        ptreg_version="0.1.0",
        commit=None,
        dirty=None,
        workload=PluginCode(
            target="ptreg.engine.workloads.command:CommandWorkload",
            distribution="ptreg",
            version="0.1.0",
            digest="0" * 64,
        ),
        arms={},
        repository_code=True,
    )
    made = Provenance(
        ["ptreg", "run", entry["id"]],
        "2026-08-05T00:00:00Z",
        "2026-08-05T00:01:00Z",
        2,
        attempt=entry["id"],
        run_id=RUN_ID,
        code=code,
    )
    found = new_results(spec, Measurement([], cells, roles, [], "complete", None), made)
    return RunResults.model_validate({**found.model_dump(), "results_version": version})


def decided(entry: dict[str, Any], version: int = LEDGER_VERSION) -> str:
    spec = spec_of(entry)
    on = Deciding([RunRef(run_id=RUN_ID, status="complete")], [], run_of(entry, spec, version))
    return plan_outcome(plan_of(entry), on).status


# --------------------------------------------------------------------------- the file alone


def test_every_entry_is_classed_with_a_reason_and_what_the_rest_needs() -> None:
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids))
    for entry in ENTRIES:
        assert entry["class"] in CLASSES, entry["id"]
        assert entry["reason"].strip(), entry["id"]
        # a decision the plan states whole needs nothing more; any other names what it needs
        assert (entry["class"] == "fits") == (not entry["needs"]), entry["id"]
        assert set(entry["needs"]) <= set(PLANS["needs"]), entry["id"]
        # no decision to state, no plan; every other class is written as one
        assert (entry["class"] == "no") == (entry["plan"] is None), entry["id"]
        if entry["run"] is None:
            assert entry["no_run"].strip(), entry["id"]


@pytest.mark.parametrize("entry", with_plan(), ids=lambda e: e["id"])
def test_each_plan_is_one_ptreg_registers_against_its_evaluator(entry: dict[str, Any]) -> None:
    spec = spec_of(entry)
    assert CommandWorkload().check_settings(spec) is None
    plan = plan_of(entry)
    margins = plan.margins or {}
    for flag, rule in plan.rules():
        assert rule_problems(rule.tree, spec, margins) == [], (entry["id"], flag)
    assert margin_problems(margins, spec) == [], entry["id"]


@pytest.mark.parametrize("entry", with_run(), ids=lambda e: e["id"])
def test_each_plan_decides_on_the_ledgers_numbers_the_status_its_entry_gives(entry: dict[str, Any]) -> None:
    spec = spec_of(entry)
    for arm, metrics in entry["run"].items():
        assert arm in spec.arms, (entry["id"], arm)
        assert set(metrics) <= set(spec.metrics), (entry["id"], arm)
    assert decided(entry) == entry["plan_status"]


@pytest.mark.parametrize("entry", with_plan(), ids=lambda e: e["id"])
def test_where_the_plan_and_the_ledger_disagree_the_entry_says_why(entry: dict[str, Any]) -> None:
    if entry["run"] is None:
        assert entry["plan_status"] == "inconclusive"  # nothing to decide on
    # a status the plan's allows (a caveat narrows a result that worked), or an attempt never run
    agrees = entry["ledger_status"] in CONSISTENT[entry["plan_status"]] or entry["ledger_status"] == "not-tried"
    assert agrees == (entry["disagreement"] is None), entry["id"]


def test_a_plan_checks_the_numbers_it_is_given() -> None:
    """The check above is not vacuous: moved by one figure, a decision moves."""
    entry = next(e for e in ENTRIES if e["id"] == "character-chess-44m-masked-10k-pilot")
    assert decided(entry) == "failed"
    won = json.loads(json.dumps(entry))
    won["run"]["raw"]["val_exact"]["value"] = 0.17  # past the frozen gate of +10 points
    won["run"]["guarded"]["game_wins"]["correct"] = 4
    assert decided(won) == "worked"


def test_from_version_8_one_seed_of_the_ledger_decides_nothing() -> None:
    """The ledger's runs are one seed each: a run of today's ptreg with one round leaves the
    seeds' variance unknown, and a plan over items decided on it is inconclusive."""
    entry = next(e for e in ENTRIES if e["id"] == "sql-toy-sft-r4")
    assert decided(entry) == "worked"
    assert decided(entry, version=RESULTS_VERSION) == "inconclusive"


def test_the_page_gives_the_counts_this_file_holds() -> None:
    page = " ".join(PAGE.read_text(encoding="utf-8").split())  # a figure may wrap across lines
    total = len(ENTRIES)
    counts = Counter(e["class"] for e in ENTRIES)

    def share(n: int) -> str:
        return f"{round(100 * n / total)}%"

    stated = counts["fits"] + counts["partly"]
    assert f"{counts['fits']} of the {total} decisions whole ({share(counts['fits'])})" in page
    assert f"{stated} of them in part or whole ({share(stated)})" in page
    for name in CLASSES:
        assert f"| {name} | {counts[name]} | {share(counts[name])} |" in page, name
    checked = sum(1 for e in with_run() if e["class"] == "fits")
    assert f"({checked} of them checked on the ledger's numbers; {counts['fits'] - checked} have none)" in page
    disagreements = sum(1 for e in ENTRIES if e["disagreement"] is not None)
    assert f"{disagreements} of the {len(with_plan())} plans" in page
    agreeing = sum(1 for e in with_run() if e["disagreement"] is None)
    assert f"Of the {len(with_run())} entries whose numbers the ledger keeps" in page
    assert f"for {agreeing}." in page
    for need in PLANS["needs"]:
        shown = sum(1 for e in ENTRIES if need in e["needs"])
        assert f"| `{need}` | {shown} |" in page, need
    bars = sum(1 for e in with_plan() if "metric(" in e["plan"]["worked_if"] + (e["plan"]["regressed_if"] or ""))
    assert f"{bars} entries use such bars" in page


# --------------------------------------------------------------------------- against the ledger


def _ledger_text(attempt: dict[str, Any]) -> str:
    return " ".join(str(attempt.get(field, "")) for field in LEDGER_TEXT)


def _figure(number: dict[str, Any]) -> str:
    """The number as the ledger writes it, in the form of its `as`: k/n, a percentage or a
    decimal with as many digits, signed where the ledger signs it."""
    shown: str = number["as"]
    value = number["correct"] / number["of"] if "correct" in number else number["value"]
    if "/" in shown:
        return f"{number['correct']}/{number['of']}"
    percent = shown.endswith("%")
    digits = shown.rstrip("%").partition(".")[2]
    value = 100 * value if percent else value
    sign = "+" if shown[0] in "+-" else ""
    return f"{value:{sign}.{len(digits)}f}" + ("%" if percent else "")


def test_the_entries_are_the_ledgers_runs_and_evaluations_in_its_order(shared_raw: dict[str, Any]) -> None:
    decided_there = [a for a in shared_raw["attempts"] if a["kind"] in DECIDED_KINDS]
    assert [e["id"] for e in ENTRIES] == [a["id"] for a in decided_there]
    for entry, attempt in zip(ENTRIES, decided_there, strict=True):
        assert (entry["kind"], entry["ledger_status"]) == (attempt["kind"], attempt["status"]), entry["id"]


def test_every_number_of_a_run_is_one_the_ledger_records(shared_raw: dict[str, Any]) -> None:
    by_id = {a["id"]: a for a in shared_raw["attempts"]}
    for entry in with_run():
        for arm, metrics in entry["run"].items():
            for metric, number in metrics.items():
                where = (entry["id"], arm, metric)
                assert _figure(number) == number["as"], where
                source = by_id[number.get("from", entry["id"])]
                assert number["as"] in _ledger_text(source), where


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _runs_of_words(text: str) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + COPIED_WORDS]) for i in range(len(words) - COPIED_WORDS + 1)}


def test_no_sentence_of_the_ledger_is_carried_over(shared_raw: dict[str, Any]) -> None:
    ledger = set().union(*(_runs_of_words(_ledger_text(a)) for a in shared_raw["attempts"]))
    ours = [PLANS["about"], *PLANS["needs"].values(), PAGE.read_text(encoding="utf-8")]
    for entry in ENTRIES:
        ours += [entry["reason"], entry.get("no_run") or "", entry["disagreement"] or "", *entry["assumed"]]
    for text in ours:
        copied = _runs_of_words(text) & ledger
        assert not copied, (text[:80], sorted(copied)[:3])
