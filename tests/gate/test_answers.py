"""Each answer of a proposal checked on its own, by the rules the whole proposal meets later."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import complete_record, failed_record, freeze_evaluator, write_registry


@pytest.fixture
def registry(tmp_path: Path):
    from ptreg.store.directory import load_directory

    root = write_registry(
        tmp_path / "reg",
        [complete_record("blocked-fwd"), failed_record("blocked-da", varied_from="blocked-fwd", varied="dA")],
    )
    freeze_evaluator(root)
    return load_directory(root)


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("id", "Blocked DB", "invalid attempt id"),
        ("id", "blocked-da", "already exists"),
        ("name", "   ", "must not be empty"),
        ("kind", "benchmark", "closest: runtime-benchmark"),
        ("methods", ["cache-blocking", "tiling"], "method 'tiling'"),
        ("varied_from", "blocked-d", "did you mean: blocked-da"),
        ("evaluator", "kernels-xxl", "no frozen evaluator named"),
        ("budget_seconds", 0.0, "must be more than 0"),
        ("budget_seconds", float("nan"), "finite"),
        ("budget_threads", 0, "must be more than 0"),
        ("data_rows", -1, "must be at least 0"),
        ("tracking_issue", "issue 3", "not a tracking issue reference"),
        ("family", "Runtime perf", "is not a slug (lowercase letters, digits and '-'), e.g. 'runtime-perf'"),
    ],
)
def test_an_answer_that_cannot_be_used_says_why(registry, name: str, value, fragment: str) -> None:
    from ptreg.gate.answers import problem

    why = problem(name, value, registry)
    assert why is not None and fragment in why, why


@pytest.mark.parametrize(
    "name, value",
    [
        ("id", "blocked-db"),
        ("kind", "runtime-benchmark"),
        ("methods", ["cache-blocking"]),
        ("varied_from", "blocked-da"),
        ("evaluator", "kernels-xl"),
        ("budget_seconds", 60.0),
        ("tracking_issue", "owner/repo#3"),
        ("data_rows", 0),
        ("family", "runtime-perf"),
    ],
)
def test_an_answer_that_can_be_used_passes(registry, name: str, value) -> None:
    from ptreg.gate.answers import problem

    assert problem(name, value, registry) is None


def test_typed_answers_are_parsed_with_plain_reasons() -> None:
    from ptreg.gate.answers import parse

    assert parse("methods", "a, b") == (["a", "b"], None)
    assert parse("methods", "a,,b")[1] == "an empty item between commas"
    assert parse("budget_seconds", "90") == (90.0, None)
    assert "not a number of seconds" in (parse("budget_seconds", "ten")[1] or "")
    assert "not a whole number" in (parse("data_rows", "1.5")[1] or "")


def test_shape_fields_are_asked_only_for_kinds_that_carry_them(registry) -> None:
    from ptreg.gate.answers import questions
    from ptreg.gate.proposal_input import ProposalInput

    shaped = [q.name for q in questions(ProposalInput(id="x", name="X", kind="runtime-benchmark"), registry)]
    assert {"objective", "methods", "bases"} <= set(shaped)
    plain = [q.name for q in questions(ProposalInput(id="x", name="X", kind="infrastructure"), registry)]
    assert not {"objective", "methods", "bases"} & set(plain)
    varied = [q.name for q in questions(ProposalInput(id="x", name="X", varied_from="blocked-da"), registry)]
    assert "varied" in varied and "answers_disposition" in varied


def test_defaults_are_real_ones(registry, tmp_path: Path) -> None:
    from ptreg.gate.answers import default
    from ptreg.gate.proposal_input import ProposalInput

    fresh = ProposalInput(id="x", name="X")
    assert default("evaluator", fresh, registry).startswith("kernels-xl@")  # the only frozen one
    assert default("family", fresh, registry) is None  # nothing follows: no default shown
    varied = ProposalInput(id="x", name="X", varied_from="blocked-da")
    parent = registry.by_id()["blocked-da"]
    assert default("kind", varied, registry) == parent.kind
    freeze_evaluator(registry.root, name="kernels-other")
    assert default("evaluator", fresh, registry) is None  # two frozen: no guess
