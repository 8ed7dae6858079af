"""One verification of a frozen evaluator, with the same answer and the same words from every
command that asks: `evaluator list`, `evaluator show`, `evaluator verify`, `validate`, `gate`,
`run` and interactive `new`'s evaluator question (its default offer included). Also: a name
frozen twice (a registry merged from two clones) is refused to a new attempt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import assert_one_line_error, plan_flags, snapshot

HARNESS = """\
import json, os
items = [json.loads(line) for line in open("items.jsonl")]
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"score": len(items) / 100}) + "\\n")
"""
SPEC = {
    "name": "sentiment-acc",
    "workload": "command",
    "command": ["python3", "harness.py"],
    "arms": {"baseline": {}, "candidate": {}},
    "baseline": "baseline",
    "inputs": ["items.jsonl"],
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 60,
}


@pytest.fixture
def project(tmp_path: Path, cli) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "harness.py").write_text(HARNESS)
    (project / "items.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(30)))
    (project / "spec.json").write_text(json.dumps(SPEC))
    assert cli("init", project / "attempts").code == 0
    return project


def freeze(cli, project: Path, spec: dict | None = None) -> str:
    path = project / "spec-now.json"
    path.write_text(json.dumps(spec or SPEC))
    done = cli("-r", project / "attempts", "evaluator", "freeze", path, "--json")
    assert done.code == 0, done.err
    return done.json()["ref"]


def propose(cli, project: Path, attempt: str, ref: str, *, code: int = 0):
    root = project / "attempts"
    done = cli(
        *("-r", root, "new", "--no-input", "--id", attempt, "--name", attempt, "--family", "eval"),
        *("--kind", "model-evaluation", "--objective", "command-latency", "--method", "vendor-blas"),
        *("--question", f"Does {attempt} score higher?", "--evaluator", ref, "--budget-seconds", "120"),
        *("--tracking-issue", f"me/p#{len(attempt)}"),
        *plan_flags(root, ref),
    )
    assert done.code == code, done.out + done.err
    return done


def said_everywhere(cli, project: Path, ref: str, words: str) -> None:
    """Every command that asks whether ``ref`` verifies answers no, in ``words``."""
    root = project / "attempts"
    flat = lambda text: " ".join(text.split())  # noqa: E731  a wrapped line read as one

    listed = {i["ref"]: i for i in cli("-r", root, "evaluator", "list", "--json").json()}
    assert listed[ref]["verified"] is False and words in listed[ref]["problem"]
    text = cli("-r", root, "evaluator", "list")
    assert text.code == 0 and f"{ref} no longer verifies: {words}" in flat(text.out)
    shown = cli("-r", root, "evaluator", "show", ref)
    assert shown.code == 1 and f"no longer verifies: {words}" in flat(shown.out)
    shown_json = cli("-r", root, "evaluator", "show", ref, "--json")
    assert shown_json.code == 1 and words in shown_json.json()["problem"]
    verified = cli("-r", root, "evaluator", "verify")
    assert verified.code == 1 and "1 frozen evaluator checked, 1 does not verify" in verified.out
    assert words in flat(verified.out)
    # validate is about records: the change is a warning, said in the same words, not silence
    validated = cli("-r", root, "validate")
    assert validated.code == 0 and "warning [evaluator-project-files]" in validated.out
    assert f"its evaluator {ref} no longer verifies: {words}" in flat(validated.out)
    problems = cli("-r", root, "validate", "--json").json()["problems"]
    found = [(p["rule"], p["severity"], p["attempt_id"], p["pointer"]) for p in problems]
    assert found == [("evaluator-project-files", "warning", "scored", "/evaluator")]
    gated = cli("-r", root, "gate", "scored")
    assert gated.code == 1 and f"{ref} no longer verifies: {words}" in flat(gated.out)


def test_an_edited_input_fails_verification_in_the_same_words_everywhere(cli, project: Path) -> None:
    ref = freeze(cli, project)
    propose(cli, project, "scored", ref)
    assert cli("-r", project / "attempts", "evaluator", "verify").code == 0
    with (project / "items.jsonl").open("a") as items:
        items.write(json.dumps({"id": "extra"}) + "\n")
    said_everywhere(cli, project, ref, "input items.jsonl changed since it was frozen")
    ran = cli("-r", project / "attempts", "run", "scored")
    assert_one_line_error(ran, 1, f"{ref} no longer verifies: input items.jsonl changed since it was frozen")


def test_an_edited_harness_fails_verification_in_the_same_words_everywhere(cli, project: Path) -> None:
    ref = freeze(cli, project)
    propose(cli, project, "scored", ref)
    (project / "harness.py").write_text(HARNESS + "# edited\n")
    said_everywhere(cli, project, ref, "a file its command runs changed since it was frozen: harness.py: sha256")


def test_interactive_new_neither_offers_nor_takes_a_stale_evaluator(cli, project: Path) -> None:
    from ptreg.gate.answers import default, problem
    from ptreg.gate.proposal_input import ProposalInput
    from ptreg.store.directory import load_directory

    ref = freeze(cli, project)
    registry = load_directory(project / "attempts")
    assert problem("evaluator", ref, registry) is None
    assert default("evaluator", ProposalInput("scored", "scored"), registry) == ref  # the one frozen evaluator, offered
    (project / "items.jsonl").write_text("changed\n")
    why = problem("evaluator", ref, registry)
    assert why is not None and f"{ref} no longer verifies: input items.jsonl changed" in why
    assert default("evaluator", ProposalInput("scored", "scored"), registry) is None  # a stale one is never offered


def test_a_name_frozen_twice_is_refused_to_a_new_attempt(cli, project: Path, tmp_path: Path) -> None:
    """Two clones each froze an edit under one name and were merged: `new` takes neither, at the
    evaluator question too, and says to freeze under a name of its own."""
    from ptreg.gate.answers import problem
    from ptreg.store.directory import load_directory

    first = freeze(cli, project)
    clone = tmp_path / "clone"
    shutil.copytree(project, clone, ignore=shutil.ignore_patterns("attempts"))
    assert cli("init", clone / "attempts").code == 0
    other = freeze(cli, clone, {**SPEC, "repeats": 3})
    shutil.copy(clone / "attempts" / "evaluators" / f"{other}.json", project / "attempts" / "evaluators")
    before = snapshot(project / "attempts")
    refused = propose(cli, project, "scored", first, code=1)
    assert_one_line_error(refused, 1, "evaluator sentiment-acc is frozen twice", first, other, "sentiment-acc-2")
    assert snapshot(project / "attempts") == before
    why = problem("evaluator", other, load_directory(project / "attempts"))
    assert why is not None and "frozen twice" in why
