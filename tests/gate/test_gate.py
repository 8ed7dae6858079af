"""The rerun gate, one check at a time: each passing and each failing, through `propose`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers import complete_record, failed_record, freeze_evaluator, snapshot, write_registry
from ptreg.errors import PtregError
from ptreg.gate import checks as gate_checks
from ptreg.gate.checks import SIMILAR_QUESTION, check_gate, question_tokens, similarity
from ptreg.gate.gate_inputs import read_gate_inputs
from ptreg.gate.proposal import ProposalInput, propose
from ptreg.records.attempt import Attempt
from ptreg.store.full_read import FullRead


def records() -> list[dict[str, Any]]:
    """A lineage on training-step-time (root, then a failure), a peak-memory attempt of
    another family, and one asking a question already."""
    return [
        complete_record("blocked-fwd", question="Does forward blocking speed up the step?", next_action=None),
        failed_record(
            "blocked-da",
            varied_from="blocked-fwd",
            varied="block dA too",
            next_action="Only continue if dB shows headroom.",
            tracking_issue="#7",
        ),
        complete_record(
            "arena",
            family="memory",
            objective="peak-memory",
            methods=["buffer-reuse"],
            question="Does an arena allocator cut peak memory by a third?",
        ),
    ]


@pytest.fixture(scope="module")
def _registry_master(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = write_registry(tmp_path_factory.mktemp("gate") / "reg", records())
    return root, freeze_evaluator(root)


@pytest.fixture
def registry(_registry_master: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """Each test's own copy of one registry built once: writing it file by file, each write
    synced to disk, cost more than most of the tests that use it."""
    master, ref = _registry_master
    return shutil.copytree(master, tmp_path / "reg", symlinks=True), ref


def given(ref: str, **changes: Any) -> ProposalInput:
    values: dict[str, Any] = {
        "id": "blocked-db",
        "name": "Blocked dB",
        "family": "runtime-perf",
        "kind": "runtime-benchmark",
        "objective": "training-step-time",
        "methods": ["cache-blocking"],
        "question": "How much of the step does backward dB still take once it is blocked?",
        "varied_from": "blocked-da",
        "varied": "block dB as well",
        "answers_disposition": "The attribution measures dB's headroom before any blocking is kept.",
        "evaluator": ref,
        "budget_seconds": 600.0,
        "tracking_issue": "#7",
        "worked_if": "gflops(step, backend=naive, config=xl) > 0",
    }
    values.update(changes)
    return ProposalInput(**values)


def outcome(root: Path, ref: str, check: str, **changes: Any) -> tuple[str, str, Any]:
    report = propose(root, given(ref, **changes), dry_run=True).report
    found = next(c for c in report.checks if c.check == check)
    return found.outcome, found.detail, found.remedy


def test_a_complete_proposal_passes_every_check(registry) -> None:
    root, ref = registry
    report = propose(root, given(ref), dry_run=True).report
    assert report.admitted
    assert [c.outcome for c in report.checks] == ["passed"] * 7
    assert [c.check for c in report.checks] == [
        "fresh-question",
        "frozen-evaluator",
        "analysis-plan",
        "explicit-budget",
        "scoped-tracking-issue",
        "disposition-respected",
        "streak",
    ]


def test_dry_run_and_refusal_write_nothing(registry) -> None:
    root, ref = registry
    before = snapshot(root)
    assert propose(root, given(ref), dry_run=True).path is None
    assert not propose(root, given(ref, question=None)).written
    assert snapshot(root) == before


# --------------------------------------------------------------------------- fresh question


def test_question_normalisation() -> None:
    assert question_tokens("Does  Blocking, dB help?!") == ["does", "blocking", "db", "help"]
    assert similarity("Does blocking dB help?", "does BLOCKING db help") == 1.0
    assert similarity("a b c d e", "a b c d e f") == pytest.approx(5 / 6)
    assert similarity("a b c d e", "a b c x y") < SIMILAR_QUESTION


@pytest.mark.parametrize("question", [None, "", "   ", "?!"])
def test_a_missing_question_fails(registry, question) -> None:
    state, detail, remedy = outcome(*registry, "fresh-question", question=question)
    assert state == "failed" and "asks no question" in detail and "--question" in remedy


def test_the_same_question_in_the_family_fails_whatever_the_case_and_punctuation(registry) -> None:
    state, detail, remedy = outcome(*registry, "fresh-question", question="does FORWARD blocking speed up the step")
    assert state == "failed" and "blocked-fwd" in detail and "the same question" in detail
    assert "ptreg show blocked-fwd" in remedy


def test_a_near_duplicate_fails(registry) -> None:
    # 6 of 7 tokens shared: Jaccard 0.86
    state, detail, _ = outcome(*registry, "fresh-question", question="Does forward blocking speed up the whole step?")
    assert state == "failed" and "near-duplicate" in detail


def test_a_question_alike_only_outside_lineage_and_family_passes(registry) -> None:
    state, _, _ = outcome(*registry, "fresh-question", question="Does an arena allocator cut peak memory by a third?")
    assert state == "passed"


def test_a_question_alike_in_the_lineage_fails_across_families(registry) -> None:
    state, detail, _ = outcome(
        *registry, "fresh-question", family="other-family", question="Does forward blocking speed up the step?"
    )
    assert state == "failed" and "(lineage" in detail


def test_attempts_without_a_question_are_not_compared(registry) -> None:
    state, detail, _ = outcome(*registry, "fresh-question")
    assert state == "passed" and "1 attempt there records no question" in detail  # blocked-da


def test_varying_without_saying_what_fails(registry) -> None:
    state, detail, remedy = outcome(*registry, "fresh-question", varied=None)
    assert state == "failed" and "does not say what is varied" in detail and "--varied" in remedy


def test_varying_an_unknown_attempt_fails(registry) -> None:
    report = propose(registry[0], given(registry[1], varied_from="no-such", tracking_issue="#8"), dry_run=True).report
    failed = {c.check for c in report.failures}
    assert failed == {"fresh-question", "disposition-respected"}


# --------------------------------------------------------------------------- frozen evaluator


def test_no_evaluator_fails(registry) -> None:
    state, detail, remedy = outcome(*registry, "frozen-evaluator", evaluator=None)
    assert state == "failed" and "no evaluator" in detail and "ptreg evaluator freeze" in remedy


def test_an_evaluator_name_alone_resolves_when_frozen_once(registry) -> None:
    root, ref = registry
    proposal = propose(root, given(ref, evaluator="kernels-xl"), dry_run=True)
    assert proposal.attempt.evaluator == ref and proposal.report.admitted


@pytest.mark.parametrize("name", ["unknown-one", "kernels-xl@000000000000", "Bad@Ref"])
def test_an_unknown_evaluator_is_unusable_input(registry, name) -> None:
    with pytest.raises(PtregError) as raised:
        propose(registry[0], given(registry[1], evaluator=name), dry_run=True)
    assert raised.value.exit_code == 2


def test_a_tampered_evaluator_fails(registry) -> None:
    root, ref = registry
    path = root / "evaluators" / f"{ref}.json"
    body = json.loads(path.read_text())
    body["spec"]["repeats"] = 3
    path.write_text(json.dumps(body))
    state, detail, remedy = outcome(root, ref, "frozen-evaluator")
    assert state == "failed" and "no longer verifies" in detail and str(path) in detail
    assert "never edited" in remedy


def test_an_evaluator_frozen_for_other_code_fails(registry, monkeypatch) -> None:
    root, ref = registry
    monkeypatch.setattr(gate_checks, "EVALUATOR_VERSION", gate_checks.EVALUATOR_VERSION + 1)
    state, detail, _ = outcome(root, ref, "frozen-evaluator")
    assert state == "failed" and "code version" in detail


# --------------------------------------------------------------------------- budget


def test_no_budget_fails(registry) -> None:
    state, detail, remedy = outcome(*registry, "explicit-budget", budget_seconds=None)
    assert state == "failed" and "no budget" in detail and "--budget-seconds" in remedy


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"budget_seconds": 0.0}, "a budget of 0.0 wall-clock seconds is refused"),
        ({"budget_seconds": -5.0}, "a budget of -5.0 wall-clock seconds is refused"),
        ({"budget_seconds": 1e9}, "less than or equal to 604800"),
        ({"budget_seconds": float("nan")}, "a budget of nan wall-clock seconds is refused"),
        ({"budget_seconds": float("inf")}, "a budget of inf wall-clock seconds is refused"),
        ({"budget_threads": 0}, "a budget of 0 threads is refused"),
        ({"budget_memory_mb": -1.0}, "a budget of -1.0 MB of peak memory is refused"),
        ({"budget_repeats": 10**6}, "1000000 repeats"),
        ({"budget_seconds": None, "budget_steps": 10}, "no wall-clock seconds"),
    ],
)
def test_a_zero_negative_absurd_or_partial_budget_fails(registry, changes, fragment) -> None:
    state, detail, _ = outcome(*registry, "explicit-budget", **changes)
    assert state == "failed" and fragment in detail


@pytest.mark.parametrize(
    ("limit", "what"), [("budget_threads", "threads"), ("budget_repeats", "repeats"), ("budget_steps", "timed steps")]
)
def test_a_budget_the_evaluator_cannot_fit_fails(registry, limit, what) -> None:
    root = registry[0]
    ref = freeze_evaluator(root, name="needy", threads=2, repeats=5, timed_steps=10)
    state, detail, _ = outcome(root, ref, "explicit-budget", **{limit: 1})
    assert state == "failed" and what in detail and "the evaluator needs" in detail


def test_a_full_budget_passes_and_is_stored(registry) -> None:
    root, ref = registry
    proposal = propose(root, given(ref, budget_steps=10, budget_repeats=5, budget_threads=2, budget_memory_mb=512.0))
    assert proposal.written
    assert json.loads(proposal.path.read_text())["budget"] == {
        "wall_clock_seconds": 600.0,
        "max_timed_steps": 10,
        "max_repeats": 5,
        "max_threads": 2,
        "max_memory_mb": 512.0,
    }


# --------------------------------------------------------------------------- tracking issue


@pytest.mark.parametrize("reference", ["https://github.com/o/r/issues/3", "#12", "owner/repo#3", "PROJ-123"])
def test_well_formed_tracking_issues_pass(registry, reference) -> None:
    state, detail, _ = outcome(*registry, "scoped-tracking-issue", tracking_issue=reference)
    assert state == "passed" and reference in detail


@pytest.mark.parametrize(
    "reference",
    [None, "", "  ", "issue 12", "#0", "owner/repo#", "proj-1", "ftp://x/1", "https://", "#1" * 300, "#12\n"],
)
def test_missing_or_malformed_tracking_issues_fail(registry, reference) -> None:
    state, _, remedy = outcome(*registry, "scoped-tracking-issue", tracking_issue=reference)
    assert state == "failed" and "owner/repo#123" in remedy


def test_one_tracking_issue_scopes_one_lineage(registry) -> None:
    state, detail, _ = outcome(*registry, "scoped-tracking-issue")
    assert state == "passed" and "also scopes blocked-da" in detail
    state, detail, remedy = outcome(
        *registry, "scoped-tracking-issue", varied_from=None, varied=None, answers_disposition=None
    )
    assert state == "failed" and "another lineage" in detail and "--varied-from blocked-da" in remedy


# --------------------------------------------------------------------------- disposition


def test_an_unanswered_disposition_fails(registry) -> None:
    state, detail, remedy = outcome(*registry, "disposition-respected", answers_disposition=None)
    assert state == "failed" and "Only continue if dB shows headroom." in detail and "--answers-disposition" in remedy


def test_an_answered_disposition_passes(registry) -> None:
    state, detail, _ = outcome(*registry, "disposition-respected")
    assert state == "passed" and "answers blocked-da" in detail


def test_a_parent_without_disposition_needs_no_answer(registry) -> None:
    state, detail, _ = outcome(
        *registry, "disposition-respected", varied_from="blocked-fwd", answers_disposition=None, tracking_issue="#8"
    )
    assert state == "passed" and "no disposition" in detail


def test_no_parent_no_disposition(registry) -> None:
    state, _, _ = outcome(*registry, "disposition-respected", varied_from=None, varied=None, tracking_issue="#8")
    assert state == "passed"


# --------------------------------------------------------------------------- streak


def chain_of_negatives(count: int) -> list[dict[str, Any]]:
    chain = [complete_record("s0", methods=["vectorization"])]
    for i in range(1, count + 1):
        chain.append(
            failed_record(
                f"s{i}", methods=["vectorization"], bases=["f32"], varied_from=f"s{i - 1}", varied=f"step {i}"
            )
        )
    return chain


def streak_registry(tmp_path: Path, negatives: int) -> tuple[Path, str]:
    root = write_registry(tmp_path / f"streak{negatives}", chain_of_negatives(negatives))
    return root, freeze_evaluator(root)


def streak_given(ref: str, **changes: Any) -> ProposalInput:
    values = {
        "varied_from": f"s{changes.pop('parent', 1)}",
        "methods": ["vectorization"],
        "tracking_issue": "#1",
        "answers_disposition": "Stopping is weighed.",
    }
    values.update(changes)
    return given(ref, **values)


def streak_check(root: Path, ref: str, **changes: Any):
    report = propose(root, streak_given(ref, **changes), dry_run=True).report
    return next(c for c in report.checks if c.check == "streak"), report


def test_one_negative_passes(tmp_path: Path) -> None:
    check, report = streak_check(*streak_registry(tmp_path, 1), parent=1)
    assert check.outcome == "passed" and report.admitted


def test_two_negatives_give_a_caution_and_admit(tmp_path: Path) -> None:
    check, report = streak_check(*streak_registry(tmp_path, 2), parent=2)
    assert check.outcome == "caution" and "CAUTION" in check.detail and report.admitted


def test_three_negatives_refuse_the_same_axis(tmp_path: Path) -> None:
    check, report = streak_check(*streak_registry(tmp_path, 3), parent=3)
    assert check.outcome == "failed" and "STOP AND RETHINK" in check.detail and "s1, s2, s3" in check.detail
    assert "--override-streak" in check.remedy and not report.admitted


def test_three_negatives_refuse_even_a_proposal_elsewhere_on_the_objective(tmp_path: Path) -> None:
    root, ref = streak_registry(tmp_path, 3)
    check, _ = streak_check(root, ref, varied_from=None, varied=None, answers_disposition=None)
    assert check.outcome == "failed"


def test_a_change_of_axis_is_admitted(tmp_path: Path) -> None:
    check, report = streak_check(*streak_registry(tmp_path, 3), parent=3, methods=["vectorization", "jit-compilation"])
    assert check.outcome == "passed" and "jit-compilation is new" in check.detail and report.admitted


def test_an_override_is_admitted_and_stored(tmp_path: Path) -> None:
    root, ref = streak_registry(tmp_path, 3)
    proposal = propose(
        root, streak_given(ref, parent=3, override_streak="The harness changed; the old numbers are void.")
    )
    check = next(c for c in proposal.report.checks if c.check == "streak")
    assert check.outcome == "overridden" and proposal.written
    stored = json.loads(proposal.path.read_text())
    assert stored["streak_override"] == "The harness changed; the old numbers are void."
    assert {"check": "streak", "outcome": "overridden", "detail": check.detail} in stored["admission"]["checks"]


def test_proposing_cannot_clear_a_streak(tmp_path: Path) -> None:
    """An admitted (not-tried) proposal at the tip has no outcome: the next one still meets STOP."""
    root, ref = streak_registry(tmp_path, 3)
    assert propose(root, streak_given(ref, parent=3, override_streak="One more, with a new timer.")).written
    check, _ = streak_check(root, ref, id="after", varied_from="blocked-db", question="Is the new timer stable?")
    assert check.outcome == "failed" and "s1, s2, s3" in check.detail


def test_no_objective_no_streak(registry) -> None:
    root, ref = registry
    proposal = propose(
        root,
        given(
            ref,
            kind="infrastructure",
            objective=None,
            methods=[],
            varied_from=None,
            varied=None,
            answers_disposition=None,
            tracking_issue="#9",
        ),
        dry_run=True,
    )
    check = next(c for c in proposal.report.checks if c.check == "streak")
    assert check.outcome == "passed" and "infrastructure" in check.detail


# --------------------------------------------------------------------------- re-checking an admitted attempt


def admitted(registry) -> tuple[Path, str, Attempt]:
    root, ref = registry
    proposal = propose(root, given(ref))
    assert proposal.written
    return root, ref, proposal.attempt


def recheck(root: Path, attempt_id: str):
    reader = FullRead(root)
    return check_gate(reader.registry.get(attempt_id), read_gate_inputs(reader, reader.registry.get(attempt_id), root))


def test_an_admitted_attempt_still_passes_against_itself_excluded(registry) -> None:
    root, _, attempt = admitted(registry)
    assert recheck(root, attempt.id).admitted  # its own question is not a duplicate of itself


def test_admission_no_longer_holds_without_a_budget(registry) -> None:
    root, _, attempt = admitted(registry)
    path = root / f"{attempt.id}.json"
    body = json.loads(path.read_text())
    del body["budget"]
    path.write_text(json.dumps(body))
    assert {c.check for c in recheck(root, attempt.id).failures} == {"explicit-budget"}


def test_admission_no_longer_holds_with_an_edited_evaluator(registry) -> None:
    root, ref, attempt = admitted(registry)
    path = root / "evaluators" / f"{ref}.json"
    path.write_text(path.read_text().replace('"seed": 0', '"seed": 1'))
    assert {c.check for c in recheck(root, attempt.id).failures} == {"frozen-evaluator"}


def test_the_admission_records_checks_time_and_registry_state(registry) -> None:
    root, _, attempt = admitted(registry)
    stored = json.loads((root / f"{attempt.id}.json").read_text())
    admission = stored["admission"]
    assert stored["status"] == "not-tried"
    assert [c["check"] for c in admission["checks"]] == [c.check for c in recheck(root, attempt.id).checks]
    assert admission["registry_state"]["attempts"] == 3 and admission["registry_state"]["evaluators"] == 1
    assert len(admission["registry_state"]["sha256"]) == 64
    assert admission["admitted_at"].endswith("Z")
    assert admission["precedents"][0] == "blocked-da"  # same objective, method and lineage; a failure
