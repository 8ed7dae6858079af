"""Continue-if conditions where they are set (`conclude`), decided (the gate, `gate`, `run`) and
read (`show`, `list --continuable/--blocked`, `disposition check`), on registries whose runs
carry known numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    add_run,
    assert_one_line_error,
    complete_record,
    freeze_evaluator,
    plan_flags,
    snapshot,
    step_cell,
    step_results,
    write_registry,
)
from ptreg.gate.proposal import ProposalInput, propose

RUN = "20261201T092700Z"
NEXT = "Only continue matmul blocking if backward_dB still shows enough headroom."


def cells() -> list[dict[str, Any]]:
    """numba at xl: dB 31% of the step, 0.68x numpy-blas (95% CI 0.65-0.72)."""
    return [
        step_cell("naive", "xl", ms=10000, shares=(0.32, 0.33, 0.32), vs_naive=1.0, vs_baseline=0.05),
        step_cell(
            "numba",
            "xl",
            ms=1000,
            shares=(0.24, 0.2, 0.31),
            ms_ci=(990, 1010),
            vs_naive=10.0,
            vs_naive_ci=(9.5, 10.5),
            vs_baseline=0.68,
            vs_baseline_ci=(0.65, 0.72),
        ),
        step_cell("numpy-blas", "xl", ms=500, shares=(0.16, 0.16, 0.16), vs_naive=20.0, vs_baseline=1.0),
    ]


def measured(attempt_id: str) -> dict[str, Any]:
    """A not-tried attempt, to be linked to a run and concluded."""
    return complete_record(attempt_id, status="not-tried", evidence=None, lesson=None, next_action=None)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Three measured attempts (a, b, c) with the same complete run, and a prose-only one."""
    root = write_registry(
        tmp_path / "reg",
        [measured("a"), measured("b"), measured("c"), complete_record("prose", next_action=NEXT)],
    )
    for attempt_id in ("a", "b", "c"):
        add_run(root, step_results(attempt_id, RUN, cells()))
    return root


def conclude(cli, root: Path, attempt_id: str, *condition: str):
    extra = ["--continue-if", condition[0]] if condition else []
    return cli(
        "-r",
        root,
        "conclude",
        attempt_id,
        "--status",
        "worked",
        "--lesson",
        "Measured.",
        "--evidence",
        "A run.",
        "--next-action",
        NEXT,
        *extra,
    )


def results_path(root: Path, attempt_id: str) -> Path:
    return root / "runs" / attempt_id / RUN / "results.json"


def set_share(root: Path, attempt_id: str, share: float) -> None:
    """Edit numba's dB share in the run's results, as a hand (or a bad tool) might."""
    path = results_path(root, attempt_id)
    results = json.loads(path.read_text())
    cell = next(c for c in results["cells"] if c["backend"] == "numba")
    cell["attribution"]["backward_db"]["share"] = share
    path.write_text(json.dumps(results))


TRUE = "share(backward_db, numba, xl) >= 0.3"
TRUE_CANONICAL = "share(backward_db, backend=numba, config=xl) >= 0.3"  # as the record stores it
FALSE = "share(backward_db, backend=numba, config=xl) >= 0.4"
UNDECIDED = "speedup(numba, over=numpy-blas, config=xl) >= 0.7"


# --------------------------------------------------------------------------- conclude


def test_conclude_stores_the_condition_in_its_canonical_text_parsed_and_decided(cli, root: Path) -> None:
    done = conclude(cli, root, "a", TRUE)
    assert done.code == 0, done.err
    assert f"continue-if holds: share(backward_db, backend=numba, config=xl) = 0.31 >= 0.3 on run {RUN}" in done.out
    stored = json.loads((root / "a.json").read_text())["continue_if"]
    assert stored["text"] == TRUE_CANONICAL and stored["run"] == RUN and stored["held_at_conclusion"] is True
    assert stored["tree"]["left"] == {"op": "share", "kernel": "backward_db", "backend": "numba", "config": "xl"}
    assert cli("-r", root, "validate").code == 0
    assert conclude(cli, root, "b", UNDECIDED).code == 0
    assert "held_at_conclusion" not in json.loads((root / "b.json").read_text())["continue_if"]


def test_a_conclusion_without_the_condition_drops_it_and_says_so(cli, root: Path) -> None:
    conclude(cli, root, "a", TRUE)
    again = conclude(cli, root, "a")
    assert again.code == 0 and f"the earlier condition {TRUE_CANONICAL!r} is dropped" in again.out
    assert "continue_if" not in json.loads((root / "a.json").read_text())


@pytest.mark.parametrize(
    "condition, code, fragment",
    [
        ("share(backward_db, numba, xl) >=", 2, "column 33: unexpected end"),
        ("share(backward_db, backend=blocked-numpy, config=xl) >= 0.3", 2, "no cell blocked-numpy/xl"),
        ("share(backward_db, backend=numba, config=large) >= 0.3", 2, "no cell numba/large"),
        ("speedup(numba, over=numba, config=xl) > 1", 2, "records speedups over naive and numpy-blas only"),
        ("gflops(step, backend=numba, config=xl) > 1", 2, "does not record (it measured tinygpt-train)"),
        ("__import__('os').system('touch pwned')", 2, "column 12"),
        ("share(dB, numba, xl) > 0.3", 2, "unknown kernel 'dB'"),
        ("x" * 2001, 2, "at most 2,000"),
        ("(" * 33 + TRUE + ")" * 33, 2, "levels"),
    ],
)
def test_a_condition_that_cannot_be_used_is_one_line_and_writes_nothing(
    cli, root: Path, condition: str, code: int, fragment: str
) -> None:
    before = snapshot(root)
    assert_one_line_error(conclude(cli, root, "a", condition), code, fragment)
    assert snapshot(root) == before
    assert not Path("pwned").exists()


def test_without_a_complete_run_a_condition_cannot_be_set(cli, root: Path) -> None:
    (root / "d.json").write_text(json.dumps(measured("d")))
    add_run(root, step_results("d", RUN, cells(), status="budget-exhausted"))
    before = snapshot(root)
    assert_one_line_error(conclude(cli, root, "d", TRUE), 1, "d has no complete run", RUN + " budget-exhausted")
    assert snapshot(root) == before


# --------------------------------------------------------------------------- the gate


def proposal(ref: str, parent: str, **changes: Any) -> ProposalInput:
    values: dict[str, Any] = {
        "id": f"after-{parent}",
        "name": "Block dB",
        "family": "runtime-perf",
        "kind": "runtime-benchmark",
        "objective": "training-step-time",
        "methods": ["cache-blocking"],
        "question": f"Does blocking dB after {parent} lift the step?",
        "varied_from": parent,
        "varied": "block dB",
        "evaluator": ref,
        "budget_seconds": 600.0,
        "tracking_issue": f"#{ord(parent[0])}",
        "worked_if": "gflops(step, backend=naive, config=xl) > 0",
    }
    values.update(changes)
    return ProposalInput(**values)


def disposition_check(root: Path, ref: str, parent: str, **changes: Any):
    report = propose(root, proposal(ref, parent, **changes), dry_run=True).report
    return next(c for c in report.checks if c.check == "disposition-respected"), report


def test_the_gate_admits_while_the_condition_holds_and_refuses_with_the_values_when_not(cli, root: Path) -> None:
    conclude(cli, root, "a", TRUE)
    conclude(cli, root, "b", FALSE)
    ref = freeze_evaluator(root)
    check, report = disposition_check(root, ref, "a")
    assert check.outcome == "passed" and report.admitted
    assert (
        check.detail == f"a's condition holds: share(backward_db, backend=numba, config=xl) = 0.31 >= 0.3 on run {RUN}"
    )
    check, report = disposition_check(root, ref, "b", answers_disposition="We think it is worth it anyway.")
    assert check.outcome == "failed" and not report.admitted  # an answer does not outvote the numbers
    assert check.detail == (
        f"b's condition does not hold: share(backward_db, backend=numba, config=xl) = 0.31, not >= 0.4 on run {RUN}"
    )
    assert "`ptreg show b`" in (check.remedy or "")


def test_an_undecidable_condition_needs_an_answer_which_is_stored(cli, root: Path) -> None:
    conclude(cli, root, "c", UNDECIDED)
    ref = freeze_evaluator(root)
    check, _ = disposition_check(root, ref, "c")
    assert check.outcome == "failed" and "cannot be decided" in check.detail and "straddles" in check.detail
    assert "--answers-disposition" in (check.remedy or "")
    answer = "The interval straddles 0.7; a longer run settles it."
    done = propose(root, proposal(ref, "c", answers_disposition=answer))
    assert done.written
    stored = json.loads((root / "after-c.json").read_text())
    assert stored["answers_disposition"] == answer
    kept = next(c for c in stored["admission"]["checks"] if c["check"] == "disposition-respected")
    assert kept["outcome"] == "overridden" and answer in kept["detail"]


def test_a_run_that_cannot_be_read_leaves_the_condition_undecided(cli, root: Path) -> None:
    conclude(cli, root, "a", TRUE)
    ref = freeze_evaluator(root)
    results_path(root, "a").write_text("{")
    check, _ = disposition_check(root, ref, "a")
    assert check.outcome == "failed" and "cannot be decided: run 20261201T092700Z of a cannot be read" in check.detail


def test_a_prose_disposition_keeps_asking_for_an_answer(cli, root: Path) -> None:
    ref = freeze_evaluator(root)
    check, _ = disposition_check(root, ref, "prose")
    assert check.outcome == "failed" and "does not answer it" in check.detail
    check, _ = disposition_check(root, ref, "prose", answers_disposition="It does.")
    assert check.outcome == "passed" and check.detail.startswith("answers prose's disposition")


def test_gate_and_run_decide_again_on_the_registry_as_it_is_now(cli, root: Path) -> None:
    conclude(cli, root, "a", TRUE)
    ref = freeze_evaluator(root)
    assert propose(root, proposal(ref, "a")).written
    assert cli("-r", root, "gate", "after-a").code == 0
    set_share(root, "a", 0.25)
    gate = cli("-r", root, "gate", "after-a")
    assert gate.code == 1
    assert (
        "FAILED     disposition-respected  a's condition does not hold: share(backward_db, backend=numba, config=xl) = 0.25, not >= 0.3"
        in gate.out
    )
    before = snapshot(root)
    run = cli("-r", root, "run", "after-a")
    assert_one_line_error(run, 1, "the gate no longer admits it", "disposition-respected")
    assert snapshot(root) == before


def test_new_shows_the_condition_beside_the_disposition(cli, root: Path) -> None:
    conclude(cli, root, "b", FALSE)
    ref = freeze_evaluator(root)
    args = ["--id", "x", "--name", "x", "--family", "runtime-perf", "--kind", "runtime-benchmark"]
    args += ["--objective", "training-step-time", "--question", "Is dB worth blocking?", "--varied-from", "b"]
    args += ["--varied", "block dB", "--evaluator", ref, "--budget-seconds", "60", "--tracking-issue", "#9"]
    args += plan_flags(root, ref)
    done = cli("-r", root, "new", *args, "--no-input", "--dry-run")
    assert done.code == 1
    assert (
        f"b retains this disposition (its next_action), which its numbers decide:\n  {NEXT}\n  continue if: {FALSE}"
        in done.out
    )
    assert "refused: 1 gate check(s) failed (disposition-respected)" in done.out


# --------------------------------------------------------------------------- reading


def test_show_renders_the_condition_its_values_and_its_truth(cli, root: Path) -> None:
    conclude(cli, root, "c", UNDECIDED)
    shown = cli("-r", root, "show", "c").out
    disposition = shown.split("\nDisposition\n", 1)[1].split("\nLineage\n", 1)[0]
    assert f"- Continue if: {UNDECIDED}" in disposition
    assert (
        "- Now it cannot be decided: speedup(numba, over=numpy-blas, config=xl) = 0.68 (95% CI 0.65 to 0.72) >= 0.7"
        in disposition
    )
    assert f"on run {RUN}) it could not be decided." in disposition
    assert "- Reads speedup(numba, over=numpy-blas, config=xl) = 0.68 (95% CI 0.65 to 0.72)." in disposition
    data = cli("-r", root, "show", "c", "--json").json()
    assert data["attempt"]["continue_if"]["text"] == UNDECIDED


def test_list_continuable_and_blocked(cli, root: Path) -> None:
    conclude(cli, root, "a", TRUE)
    conclude(cli, root, "b", FALSE)
    conclude(cli, root, "c", UNDECIDED)
    ids = lambda *flags: [a["id"] for a in cli("-r", root, "list", *flags, "--json").json()]  # noqa: E731
    assert ids("--continuable") == ["a"]
    assert ids("--blocked") == ["b"]
    assert ids("--blocked", "--status", "failed") == []
    assert sorted(ids()) == ["a", "b", "c", "prose"]
    assert_one_line_error(cli("-r", root, "list", "--continuable", "--blocked"), 2, "exclude each other")


def test_disposition_check_for_ci(cli, root: Path) -> None:
    conclude(cli, root, "a", TRUE)
    conclude(cli, root, "b", FALSE)
    conclude(cli, root, "c", UNDECIDED)
    done = cli("-r", root, "disposition", "check")
    assert done.code == 0
    assert (
        f"a: {TRUE_CANONICAL}\n  now it holds: share(backward_db, backend=numba, config=xl) = 0.31 >= 0.3 on run {RUN}"
        in done.out
    )
    assert "3 conditions: 1 hold, 1 do not, 1 cannot be decided; none has turned false since its conclusion" in done.out
    set_share(root, "a", 0.25)  # held at conclusion, false now
    set_share(root, "b", 0.45)  # false at conclusion, true now: not a failure
    done = cli("-r", root, "disposition", "check")
    assert done.code == 1
    assert "  CHANGED: it held at conclusion and does not hold now" in done.out
    data = cli("-r", root, "disposition", "check", "--json")
    assert data.code == 1
    found = {c["id"]: c for c in data.json()["conditions"]}
    assert data.json()["turned_false"] == ["a"]
    assert (found["a"]["truth"], found["a"]["held_at_conclusion"], found["b"]["truth"], found["c"]["truth"]) == (
        False,
        True,
        True,
        None,
    )
    assert found["a"]["readings"][0] == {
        "quantity": "share(backward_db, backend=numba, config=xl)",
        "value": 0.25,
        "low": None,
        "high": None,
        "unknown": None,
    }
    chosen = cli("-r", root, "disposition", "check", "b", "prose", "--json")
    assert chosen.code == 0 and chosen.json()["without_condition"] == ["prose"]
    assert "prose: no condition" in cli("-r", root, "disposition", "check", "prose").out
    assert_one_line_error(cli("-r", root, "disposition", "check", "nosuch"), 2, "no attempt 'nosuch'")


def test_show_and_list_never_load_the_parser(cli, root: Path) -> None:
    """Deciding a stored condition needs no parser, nor does reading a record whose condition is
    stored in its canonical text, as conclude stores it (the index is built by the commands below)."""
    conclude(cli, root, "a", TRUE)
    code = (
        "import sys\nfrom ptreg.cli import main\n"
        "for args in (['show', 'a'], ['list', '--continuable'], ['disposition', 'check']):\n"
        "    try:\n        main(['-r', sys.argv[1], *args])\n    except SystemExit:\n        pass\n"
        "print('lark' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "False"
