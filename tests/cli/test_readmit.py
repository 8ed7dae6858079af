"""Two clones admit alike proposals apart, then merge: `ptreg validate` and `ptreg gate --all`
name the conflict, `run` and `conclude` refuse the later attempt, and `ptreg readmit` resolves
it or withdraws it, on the record."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    HAND_RUN,
    assert_one_line_error,
    complete_record,
    freeze_evaluator,
    plan_flags,
    registry_with_a_run,
    snapshot,
    write_registry,
)

QUESTION = "Does tiling the loops speed up the step?"
NEW_QUESTION = "How much does tiling dB add once dA is tiled?"


def new(cli, root: Path, ref: str, attempt_id: str, question: str, issue: str = "#5") -> None:
    result = cli(
        "-r", root, "new", "--id", attempt_id, "--name", attempt_id, "--family", "runtime-perf",
        "--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "cache-blocking",
        "--question", question, "--evaluator", ref, "--budget-seconds", "600", "--tracking-issue", issue,
        *plan_flags(root, ref), "--no-input",
    )  # fmt: skip
    assert result.code == 0, result.err


def set_admitted_at(root: Path, attempt_id: str, at: str) -> None:
    """Two clones admit within one second in a test; a team's clones, minutes apart."""
    path = root / f"{attempt_id}.json"
    record = json.loads(path.read_text())
    record["admission"]["admitted_at"] = at
    path.write_text(json.dumps(record, indent=2))


@pytest.fixture
def clones(cli, tmp_path: Path) -> tuple[Path, Path]:
    """Clone a admits tile-a, clone b tile-b (admitted later): the same question up to a space,
    one tracking issue, different lineages. Neither gate could see the other's."""
    base = write_registry(tmp_path / "base", [])
    ref = freeze_evaluator(base)
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(base, a)
    shutil.copytree(base, b)
    new(cli, a, ref, "tile-a", QUESTION)
    new(cli, b, ref, "tile-b", "Does tiling the loops  speed up the step ?")
    set_admitted_at(a, "tile-a", "2026-12-04T10:00:00Z")
    set_admitted_at(b, "tile-b", "2026-12-04T10:05:00Z")
    return a, b


def merged(clones: tuple[Path, Path]) -> Path:
    a, b = clones
    shutil.copy2(b / "tile-b.json", a / "tile-b.json")
    return a


def conflicts_of(cli, root: Path) -> list[dict[str, Any]]:
    result = cli("-r", root, "validate", "--json")
    assert result.code == 1, result.out
    return [
        {k: p[k] for k in ("rule", "attempt_id", "message", "severity")}
        for p in result.json()["problems"]
        if p["rule"].startswith("readmission-")
    ]


def test_validate_after_the_merge_names_both_with_the_remedy_whichever_way_it_went(cli, clones) -> None:
    a, b = clones
    assert cli("-r", a, "validate").code == 0 and cli("-r", b, "validate").code == 0  # each clone alone
    shutil.copy2(b / "tile-b.json", a / "tile-b.json")  # b merged into a
    shutil.copy2(a / "tile-a.json", b / "tile-a.json")  # a merged into b
    result = cli("-r", a, "validate")
    assert result.code == 1
    lines = [line for line in result.out.splitlines() if "[readmission-" in line]
    assert len(lines) == 2 and all("tile-b" in line and "after tile-a" in line for line in lines)
    assert "error [readmission-question]" in lines[0] and "--varies tile-a" in lines[0]
    assert "error [readmission-tracking-issue]" in lines[1] and "--tracking-issue NEW" in lines[1]
    assert conflicts_of(cli, a) == conflicts_of(cli, b)
    assert [c["severity"] for c in conflicts_of(cli, a)] == ["error", "error"]


def test_gate_all_lists_the_order_and_the_conflicts(cli, clones) -> None:
    root = merged(clones)
    result = cli("-r", root, "gate", "--all")
    assert result.code == 1
    assert "holds      tile-a" in result.out and "CONFLICT   tile-b" in result.out
    data = cli("-r", root, "gate", "--all", "--json").json()
    assert data["order"] == ["tile-a", "tile-b"] and not data["holds"]
    assert [(c["id"], c["rule"], [e["id"] for e in c["earlier"]]) for c in data["conflicts"]] == [
        ("tile-b", "readmission-question", ["tile-a"]),
        ("tile-b", "readmission-tracking-issue", ["tile-a"]),
    ]
    assert_one_line_error(cli("-r", root, "gate"), 2, "name one attempt (ID) or --all")
    assert_one_line_error(cli("-r", root, "gate", "tile-a", "--all"), 2, "name one attempt (ID) or --all")


def test_the_earlier_admission_holds_and_the_later_does_not(cli, clones) -> None:
    root = merged(clones)
    assert cli("-r", root, "gate", "tile-a").code == 0  # judged against what came before it: nothing
    later = cli("-r", root, "gate", "tile-b")
    assert later.code == 1 and "conflict [readmission-question]" in later.out
    assert "2 conflicts with attempts admitted before it" in later.out
    data = cli("-r", root, "gate", "tile-b", "--json").json()
    assert [c["rule"] for c in data["conflicts"]] == ["readmission-question", "readmission-tracking-issue"]


def test_run_and_conclude_refuse_the_conflicted_attempt_in_one_line(cli, clones) -> None:
    root = merged(clones)
    before = snapshot(root)
    for command in (
        ["run", "tile-b"],
        ["conclude", "tile-b", "--status", "worked", "--lesson", "x", "--next-action", "y"],
    ):
        result = cli("-r", root, *command)
        assert_one_line_error(
            result, 1, "tile-b: unresolved conflict [readmission-question]", "after tile-a", "remedy:"
        )
    assert snapshot(root) == before


def test_readmit_resolves_records_the_resolution_and_validate_passes(cli, clones) -> None:
    root = merged(clones)
    before = snapshot(root)
    # a new tracking issue alone leaves the question: refused, nothing written
    partial = cli("-r", root, "readmit", "tile-b", "--tracking-issue", "#6")
    assert_one_line_error(partial, 1, "tile-b still conflicts; nothing written", "readmission-question")
    assert snapshot(root) == before
    result = cli(
        "-r", root, "readmit", "tile-b", "--varies", "tile-a", "--varied", "tile dB too", "--question", NEW_QUESTION
    )
    assert result.code == 0, result.err
    assert "tile-b readmitted: readmission-question, readmission-tracking-issue with tile-a" in result.out
    record = json.loads((root / "tile-b.json").read_text())
    assert record["question"] == NEW_QUESTION and record["varied_from"] == "tile-a"
    assert record["admission"]["admitted_at"] == "2026-12-04T10:05:00Z"  # its place in the order is kept
    [kept] = record["readmissions"]
    assert kept["resolution"] == "readmitted" and kept["earlier"] == ["tile-a"]
    assert kept["conflicts"] == ["readmission-question", "readmission-tracking-issue"]
    assert {"field": "question", "before": "Does tiling the loops  speed up the step ?"} in kept["changes"]
    assert {"field": "varied_from"} in kept["changes"]
    assert cli("-r", root, "validate").code == 0
    assert cli("-r", root, "gate", "--all").code == 0
    assert cli("-r", root, "gate", "tile-b").code == 0
    shown = cli("-r", root, "show", "tile-b").out
    assert "after readmission-question, readmission-tracking-issue with tile-a, admitted before it" in shown
    assert "with a new question (was 'Does tiling the loops  speed up the step ?'), varied_from (none before)" in shown
    again = cli("-r", root, "readmit", "tile-b", "--tracking-issue", "#7")
    assert_one_line_error(again, 1, "its admission holds", "nothing to readmit")


def test_a_withdrawn_attempt_is_not_run_or_concluded_again(cli, clones) -> None:
    root = merged(clones)
    result = cli("-r", root, "readmit", "tile-b", "--withdraw", "tile-a asks the same question", "--json")
    assert result.code == 0, result.err
    assert result.json()["readmission"]["resolution"] == "withdrawn"
    assert cli("-r", root, "validate").code == 0
    assert "- Withdrawn at " in cli("-r", root, "show", "tile-b").out
    gate = cli("-r", root, "gate", "tile-b")
    assert gate.code == 1 and "admission withdrawn" in gate.out
    for command in (
        ["run", "tile-b"],
        ["conclude", "tile-b", "--status", "worked", "--lesson", "x", "--next-action", "y"],
    ):
        assert_one_line_error(cli("-r", root, *command), 1, "tile-b was withdrawn", "tile-a asks the same question")
    assert_one_line_error(cli("-r", root, "readmit", "tile-b", "--withdraw", "again"), 1, "a withdrawal is final")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "say how the conflict is resolved"),
        (["--withdraw", "dup", "--question", "Q?"], "--withdraw stands alone"),
        (["--varies", "tile-a"], "--varies and --varied go together"),
        (["--tracking-issue", "issue five"], "--tracking-issue: 'issue five' is not a tracking issue reference"),
        (["--question", "  "], "--question is empty"),
        (["--varies", "nowhere", "--varied", "x", "--question", NEW_QUESTION], "--varies nowhere: no attempt"),
        (["--evaluator", "nothing@aaaaaaaaaaaa"], "nothing@aaaaaaaaaaaa"),
    ],
)
def test_readmit_refuses_unusable_words_and_writes_nothing(cli, clones, args, fragment) -> None:
    root = merged(clones)
    before = snapshot(root)
    result = cli("-r", root, "readmit", "tile-b", *args)
    assert result.code in (1, 2) and fragment in result.err, result.err
    assert_one_line_error(result, result.code)
    assert snapshot(root) == before


def test_a_measured_attempt_keeps_its_question_and_evidence(cli, tmp_path: Path) -> None:
    """An attempt already run conflicts as any other; it keeps what it was measured under, and
    its evidence when it is withdrawn."""
    root = registry_with_a_run(tmp_path / "reg")
    measured = json.loads((root / "measured.json").read_text())
    first = {**measured, "id": "first", "name": "first", "runs": None}
    del first["runs"]
    for record, at in ((first, "2026-12-04T10:00:00Z"), (measured, "2026-12-04T10:05:00Z")):
        record.update(question=QUESTION, tracking_issue="#5")
        record["budget"] = {"wall_clock_seconds": 600.0}
        record["admission"] = {
            "admitted_at": at,
            "ptreg_version": "0.1.0",
            "registry_state": {"attempts": 1, "evaluators": 1, "sha256": "0" * 64},
            "checks": [],
            "precedents": [],
        }
        (root / f"{record['id']}.json").write_text(json.dumps(record, indent=2))
    assert cli("-r", root, "validate").code == 1
    conclude = cli("-r", root, "conclude", "measured", "--status", "worked", "--lesson", "x", "--next-action", "y")
    assert_one_line_error(conclude, 1, "measured: unresolved conflict [readmission-question]")
    changed = cli("-r", root, "readmit", "measured", "--question", NEW_QUESTION)
    assert_one_line_error(changed, 1, "was measured under its question")
    assert cli("-r", root, "readmit", "measured", "--withdraw", "first asks it").code == 0
    record = json.loads((root / "measured.json").read_text())
    assert record["runs"] == measured["runs"] and record["question"] == QUESTION
    assert (root / HAND_RUN / "results.json").is_file()
    assert cli("-r", root, "validate").code == 0


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_real_git_merge_either_way_gives_the_same_errors(cli, tmp_path: Path) -> None:
    """Two clones of one repository each admit one tile; `git merge` brings them together
    without a conflict (different files), and validate names the later one either way."""
    origin = tmp_path / "origin"
    root = write_registry(origin / "attempts", [])
    ref = freeze_evaluator(root)
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "registry")
    answers = []
    for first, second in (("a", "b"), ("b", "a")):
        clones = {name: tmp_path / f"{first}{second}-{name}" for name in ("a", "b")}
        for name, clone in clones.items():
            git(tmp_path, "clone", "-q", str(origin), str(clone))
            attempt_id = f"tile-{name}"
            new(cli, clone / "attempts", ref, attempt_id, QUESTION if name == "a" else QUESTION + " ")
            set_admitted_at(clone / "attempts", attempt_id, f"2026-12-04T10:0{0 if name == 'a' else 5}:00Z")
            git(clone, "add", "attempts")
            git(clone, "commit", "-qm", attempt_id)
        git(clones[first], "pull", "-q", "--no-rebase", str(clones[second]), "main")
        answers.append(conflicts_of(cli, clones[first] / "attempts"))
    assert answers[0] == answers[1]
    assert [(c["attempt_id"], c["rule"]) for c in answers[0]] == [
        ("tile-b", "readmission-question"),
        ("tile-b", "readmission-tracking-issue"),
    ]


def admitted_record(attempt_id: str, at: str, **changes: Any) -> dict[str, Any]:
    return complete_record(
        attempt_id,
        status="not-tried",
        evidence=None,
        lesson=None,
        next_action=None,
        question=f"What does {attempt_id} change in the step?",
        budget={"wall_clock_seconds": 600.0},
        tracking_issue=f"owner/{attempt_id}#1",
        admission={
            "admitted_at": at,
            "ptreg_version": "0.1.0",
            "registry_state": {"attempts": 0, "evaluators": 1, "sha256": "0" * 64},
            "checks": [],
            "precedents": [],
        },
        **changes,
    )


def test_one_evaluator_name_frozen_with_two_specs_is_found_by_gate_and_validate(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [])
    first_ref = freeze_evaluator(root)
    clone = write_registry(tmp_path / "clone", [])  # a name is one identity in a registry: another clone's, merged
    second_ref = freeze_evaluator(clone, repeats=7)
    shutil.copy(clone / "evaluators" / f"{second_ref}.json", root / "evaluators")
    assert first_ref.split("@")[0] == second_ref.split("@")[0] and first_ref != second_ref
    for record in (
        admitted_record("first", "2026-12-04T10:00:00Z", evaluator=first_ref),
        admitted_record("second", "2026-12-04T10:05:00Z", evaluator=second_ref),
    ):
        (root / f"{record['id']}.json").write_text(json.dumps(record, indent=2))
    assert [(c["attempt_id"], c["rule"]) for c in conflicts_of(cli, root)] == [("second", "readmission-evaluator")]
    gate = cli("-r", root, "gate", "second")
    assert gate.code == 1 and "conflict [readmission-evaluator]" in gate.out and second_ref in gate.out
    assert cli("-r", root, "gate", "first").code == 0
    _, third_ref = freeze_evaluator(root), freeze_evaluator(root, repeats=7, name="kernels-xl-7")
    assert cli("-r", root, "readmit", "second", "--evaluator", third_ref).code == 0
    assert cli("-r", root, "validate").code == 0
