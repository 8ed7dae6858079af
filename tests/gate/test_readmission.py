"""Admissions decided again in admission order (``gate/readmission.py``): each rule firing and
not firing, the order (by time, then id; never by the order the records come in), and what
counts as "before"."""

from __future__ import annotations

import itertools
import random
from typing import Any

from helpers import complete_record, failed_record
from ptreg.gate.readmission import (
    ADMITTED_AT,
    EVALUATOR,
    QUESTION,
    STREAK,
    TRACKING_ISSUE,
    readmit_all,
    unresolved,
)
from ptreg.records.attempt import Attempt

QUESTION_TEXT = "Does tiling the loops speed up the step?"
EVALUATOR_A = "kx@aaaaaaaaaaaa"
EVALUATOR_B = "kx@bbbbbbbbbbbb"


def admission(at: str) -> dict[str, Any]:
    return {
        "admitted_at": at,
        "ptreg_version": "0.1.0",
        "registry_state": {"attempts": 0, "evaluators": 1, "sha256": "0" * 64},
        "checks": [],
        "precedents": [],
    }


def proposal(attempt_id: str, at: str | None, **changes: Any) -> Attempt:
    """An admitted proposal (not yet run) of its own lineage, admitted at ``at`` (None: no admission)."""
    values: dict[str, Any] = {
        "status": "not-tried",
        "evidence": None,
        "lesson": None,
        "next_action": None,
        "question": f"What does {attempt_id} change in the step?",
        "evaluator": EVALUATOR_A,
        "budget": {"wall_clock_seconds": 600.0},
        "tracking_issue": f"owner/{attempt_id}#1",  # an issue of its own
        "admission": None if at is None else admission(at),
    }
    values.update(changes)
    return Attempt.model_validate(complete_record(attempt_id, **values))


def rules_of(attempts: list[Attempt]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.attempt_id, c.rule, c.earlier) for c in readmit_all(attempts).conflicts]


def tiles() -> list[Attempt]:
    """The merged scenario: the same question up to a space, one tracking issue, two lineages."""
    return [
        proposal("tile-a", "2026-12-04T10:00:00Z", question=QUESTION_TEXT, tracking_issue="#5"),
        proposal(
            "tile-b", "2026-12-04T10:00:05Z", question="Does tiling the loops  speed up the step ?", tracking_issue="#5"
        ),
    ]


# --------------------------------------------------------------------------- the scenario, and order


def test_the_later_of_two_alike_admissions_conflicts_naming_both_which_came_first_and_the_remedy() -> None:
    found = readmit_all(tiles())
    assert [(c.attempt_id, c.rule, c.earlier) for c in found.conflicts] == [
        ("tile-b", QUESTION, ("tile-a",)),
        ("tile-b", TRACKING_ISSUE, ("tile-a",)),
    ]
    question, issue = (c.message() for c in found.conflicts)
    assert "admitted 2026-12-04T10:00:05Z, after tile-a (admitted 2026-12-04T10:00:00Z)" in question
    assert "--varies tile-a" in question and "--withdraw" in question
    assert "--tracking-issue NEW" in issue and "--varies tile-a" in issue
    assert found.of("tile-a") == [] and found.order == ("tile-a", "tile-b")


def test_the_answer_does_not_depend_on_the_order_the_records_come_in() -> None:
    attempts = [
        *tiles(),
        proposal("tile-c", "2026-12-04T09:00:00Z", question="Does tiling the loops speed up the step!"),
        proposal("other", "2026-12-04T11:00:00Z", tracking_issue="#5"),
    ]
    expected = readmit_all(attempts)
    assert expected.order == ("tile-c", "tile-a", "tile-b", "other")
    # the earliest asked first: tile-a and tile-b both conflict with tile-c, not with each other
    assert {(c.attempt_id, c.rule, c.earlier) for c in expected.conflicts if c.rule == QUESTION} == {
        ("tile-a", QUESTION, ("tile-c",)),
        ("tile-b", QUESTION, ("tile-c",)),
    }
    for permutation in itertools.permutations(attempts):
        assert readmit_all(list(permutation)) == expected


def test_a_tie_in_time_is_broken_by_id() -> None:
    at = "2026-12-04T10:00:00Z"
    pair = [
        proposal("tile-b", at, question=QUESTION_TEXT),
        proposal("tile-a", at, question=QUESTION_TEXT),
    ]
    for shuffled in (pair, pair[::-1]):
        assert rules_of(shuffled) == [("tile-b", QUESTION, ("tile-a",))]


def test_times_in_other_zones_are_ordered_as_moments() -> None:
    later_by_text = proposal("east", "2026-12-04T11:00:00+02:00", question=QUESTION_TEXT)  # 09:00 UTC
    first_by_text = proposal("west", "2026-12-04T10:00:00Z", question=QUESTION_TEXT)
    assert rules_of([first_by_text, later_by_text]) == [("west", QUESTION, ("east",))]


# --------------------------------------------------------------------------- each rule


def test_question_fires_only_for_an_alike_question_in_the_lineage_or_family() -> None:
    assert rules_of([*tiles()[:1], proposal("tile-b", "2026-12-04T10:00:05Z", tracking_issue="#6")]) == []
    elsewhere = proposal("tile-b", "2026-12-04T10:00:05Z", question=QUESTION_TEXT, family="memory", tracking_issue="#6")
    assert rules_of([tiles()[0], elsewhere]) == []  # another family, another lineage: not the same question
    same = proposal("tile-b", "2026-12-04T10:00:05Z", question=QUESTION_TEXT, tracking_issue="#6")
    assert rules_of([tiles()[0], same]) == [("tile-b", QUESTION, ("tile-a",))]


def test_varying_the_earlier_with_a_question_of_its_own_resolves_both() -> None:
    resolved = proposal(
        "tile-b",
        "2026-12-04T10:00:05Z",
        question="How much does tiling dB add once dA is tiled?",
        tracking_issue="#5",
        varied_from="tile-a",
        varied="tile dB too",
    )
    assert rules_of([tiles()[0], resolved]) == []


def test_tracking_issue_fires_across_lineages_only() -> None:
    a = proposal("first", "2026-12-04T10:00:00Z", tracking_issue="owner/repo#9")
    b = proposal("second", "2026-12-04T10:00:01Z", tracking_issue="owner/repo#9")
    assert rules_of([a, b]) == [("second", TRACKING_ISSUE, ("first",))]
    varying = proposal("second", "2026-12-04T10:00:01Z", tracking_issue="owner/repo#9", varied_from="first", varied="x")
    assert rules_of([a, varying]) == []


def streak_chain() -> list[Attempt]:
    """Two negatives known before any admission, and a third admitted at 10:00."""
    return [
        Attempt.model_validate(failed_record("n1")),
        Attempt.model_validate(failed_record("n2", varied_from="n1", varied="a")),
        Attempt.model_validate(
            failed_record("n3", varied_from="n2", varied="b", admission=admission("2026-12-04T10:00:00Z"))
        ),
    ]


def test_streak_fires_when_the_chain_before_it_ends_in_three_negatives() -> None:
    later = proposal("p", "2026-12-04T10:00:01Z", varied_from="n3", varied="c")
    assert rules_of([*streak_chain(), later]) == [("p", STREAK, ("n1", "n2", "n3"))]
    assert "--override-streak" in readmit_all([*streak_chain(), later]).conflicts[0].remedy


def test_streak_does_not_fire_before_the_third_negative_or_with_a_new_axis_or_a_reason() -> None:
    earlier = proposal("p", "2026-12-04T09:00:00Z", varied_from="n2", varied="c")  # n3 admitted after it
    assert rules_of([*streak_chain(), earlier]) == []
    new_axis = proposal("p", "2026-12-04T10:00:01Z", varied_from="n3", varied="c", methods=["vendor-blas"])
    assert rules_of([*streak_chain(), new_axis]) == []
    reason = proposal("p", "2026-12-04T10:00:01Z", varied_from="n3", varied="c", streak_override="dB is untested")
    assert rules_of([*streak_chain(), reason]) == []


def test_evaluator_fires_for_one_name_with_two_identities() -> None:
    a = proposal("first", "2026-12-04T10:00:00Z", evaluator=EVALUATOR_A)
    b = proposal("second", "2026-12-04T10:00:01Z", evaluator=EVALUATOR_B)
    assert rules_of([a, b]) == [("second", EVALUATOR, ("first",))]
    message = readmit_all([a, b]).conflicts[0].message()
    assert EVALUATOR_A in message and EVALUATOR_B in message and "--evaluator NEW@HASH" in message
    assert rules_of([a, proposal("second", "2026-12-04T10:00:01Z", evaluator=EVALUATOR_A)]) == []
    assert rules_of([a, proposal("second", "2026-12-04T10:00:01Z", evaluator="ky@bbbbbbbbbbbb")]) == []


def test_an_admission_time_that_cannot_be_read_is_an_error_of_its_own() -> None:
    for at, why in (("yesterday", "is not an ISO 8601 time"), ("2026-12-04T10:00:00", "names no time zone")):
        found = readmit_all([tiles()[0], proposal("odd", at, question=QUESTION_TEXT, tracking_issue="#5")])
        assert [(c.attempt_id, c.rule) for c in found.conflicts] == [("odd", ADMITTED_AT)]
        assert why in found.conflicts[0].message() and "odd" not in found.order


# --------------------------------------------------------------------------- what counts as before


def test_a_record_without_an_admission_counts_as_known_before_every_admission() -> None:
    unadmitted = proposal("imported", None, question=QUESTION_TEXT, tracking_issue="#6")
    admitted = proposal("new-one", "2026-12-04T10:00:00Z", question=QUESTION_TEXT)
    found = readmit_all([admitted, unadmitted])
    assert [(c.attempt_id, c.rule, c.earlier) for c in found.conflicts] == [("new-one", QUESTION, ("imported",))]
    assert "imported (no admission: known before every admission)" in found.conflicts[0].message()


def withdrawal() -> dict[str, Any]:
    return {
        "readmitted_at": "2026-12-05T10:00:00Z",
        "conflicts": [QUESTION],
        "earlier": ["tile-a"],
        "resolution": "withdrawn",
        "reason": "tile-a asks it",
    }


def test_a_withdrawn_attempt_is_not_decided_again_and_no_longer_clashes() -> None:
    a, b = tiles()
    b = Attempt.model_validate({**b.to_json_dict(), "readmissions": [withdrawal()]})
    found = readmit_all([a, b])
    assert found.conflicts == () and found.withdrawn == ("tile-b",)
    assert "withdrawn" in (unresolved(found, b) or "")
    a = Attempt.model_validate({**a.to_json_dict(), "readmissions": [{**withdrawal(), "earlier": ["tile-b"]}]})
    assert rules_of([a, tiles()[1]]) == []  # the earlier one withdrawn: the later stands alone


def test_unresolved_names_the_conflict_and_the_remedy_in_one_line() -> None:
    found = readmit_all(tiles())
    line = unresolved(found, tiles()[1])
    assert line is not None and "\n" not in line
    assert line.startswith("tile-b: unresolved conflict [readmission-question]") and "remedy:" in line
    assert "(and 1 more: `ptreg gate --all`)" in line
    assert unresolved(found, tiles()[0]) is None


def test_many_random_orders_of_a_larger_registry_agree() -> None:
    rng = random.Random(38)
    attempts = [
        proposal(
            f"p{i}",
            f"2026-12-04T10:{i % 7:02d}:00Z",
            question=f"Does change {i % 5} speed up the step?",
            tracking_issue=f"#{i % 4 + 1}",
            evaluator=f"kx@{(str(i % 3) * 12)}",
        )
        for i in range(30)
    ]
    expected = readmit_all(attempts)
    assert expected.conflicts  # the setup does clash
    for _ in range(20):
        rng.shuffle(attempts)
        assert readmit_all(attempts) == expected


def test_deciding_one_admission_agrees_with_deciding_them_all() -> None:
    attempts = [
        *streak_chain(),
        *tiles(),
        proposal("tile-c", "2026-12-04T09:00:00Z", question="Does tiling the loops speed up the step!"),
        proposal("p", "2026-12-04T10:00:01Z", varied_from="n3", varied="c", evaluator=EVALUATOR_B),
        proposal("odd", "never", question=QUESTION_TEXT),
    ]
    every = readmit_all(attempts)
    for attempt in attempts:
        one = readmit_all(attempts, only=attempt.id)
        assert one.of(attempt.id) == every.of(attempt.id) and one.order == every.order
        assert {c.attempt_id for c in one.conflicts} <= {attempt.id}


def test_a_variation_comes_after_the_attempt_it_varies_whatever_the_clocks_say() -> None:
    """Two clones' clocks may disagree, and one second may hold both admissions: a gate admits a
    variation only once its parent is known, so the parent is first however the times and ids sort."""
    parent = proposal("zeta", "2026-12-04T10:00:09Z", tracking_issue="#8")
    child = proposal(
        "alpha",
        "2026-12-04T10:00:01Z",
        tracking_issue="#8",
        varied_from="zeta",
        varied="the tile",
        answers_disposition=None,
    )
    for attempts in ([parent, child], [child, parent]):
        found = readmit_all(attempts)
        assert found.order == ("zeta", "alpha")
        assert found.conflicts == ()
        assert found.admitted_after("zeta") == {"alpha"}
