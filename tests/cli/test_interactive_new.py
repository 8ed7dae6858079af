"""`ptreg new` at a real terminal (a pseudo-terminal driven by pexpect): each answer is checked
when given and asked again with the reason, choices come from the vocabularies, a shown default
is taken with Enter, and the whole proposal is confirmed before the gate runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from helpers import (
    add_run,
    as_a_shell_starts_it,
    blocked_chain,
    complete_record,
    freeze_evaluator,
    patient,
    snapshot,
    step_cell,
    step_results,
    write_registry,
)


@pytest.fixture
def reg(tmp_path: Path) -> tuple[Path, str]:
    root = write_registry(tmp_path / "reg", blocked_chain())
    return root, freeze_evaluator(root)  # the only frozen evaluator: the evaluator prompt's default


def terminal(root: Path, *flags: str):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PTREG_REGISTRY")}
    env.update(COLUMNS="100", TERM="dumb")
    child = pexpect.spawn(
        sys.executable,
        ["-c", "from ptreg.cli import main; main()", "-r", str(root), "new", *flags],
        env=env,
        encoding="utf-8",
        timeout=patient(120),  # each expect ends when its text arrives: a slow machine waits, never fails
        dimensions=(40, 100),
        preexec_fn=as_a_shell_starts_it,  # Ctrl-C interrupts, however pytest was started
    )
    return child


def answer(child, prompt: str, text: str) -> None:
    child.expect_exact(prompt)
    child.sendline(text)


def finished(child) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    # waited for, not closed: close() gives an exiting child 0.1 s before it signals it
    code = child.wait()
    child.close()
    return code, child.before


def test_a_person_finishes_a_proposal_with_every_mistake_caught_on_the_spot(reg) -> None:
    root, ref = reg
    child = terminal(root)
    answer(child, "id (a lowercase slug; the file name):", "Blocked DB")
    child.expect_exact("invalid attempt id")  # asked again, with the reason
    answer(child, "id (a lowercase slug; the file name):", "blocked-da")
    child.expect_exact("already exists")
    answer(child, "id (a lowercase slug; the file name):", "blocked-db")
    answer(child, "name:", "Blocked dB")
    answer(child, "varied from (the id of the attempt it varies) (Enter to skip):", "")  # varies nothing
    answer(child, "family:", "runtime-perf")
    child.expect_exact("runtime-benchmark")  # the kind vocabulary, listed before the prompt
    answer(child, "kind:", "benchmark")
    child.expect_exact("closest: runtime-benchmark")
    answer(child, "kind:", "runtime-benchmark")
    child.expect_exact("training-step-time")
    answer(child, "objective:", "training-step-time")
    child.expect_exact("cache-blocking")
    answer(child, "methods (comma-separated) (Enter to skip):", "cache-blocking, tiling")
    child.expect_exact("method 'tiling' is not in the method vocabulary")
    answer(child, "methods (comma-separated) (Enter to skip):", "cache-blocking")
    answer(child, "bases it builds on (comma-separated) (Enter to skip):", "")
    answer(child, "question (what this run answers):", "How much of the step does dB take once blocked?")
    answer(child, "hypothesis (the expected answer) (Enter to skip):", "")
    answer(child, f"evaluator [{ref}]:", "")  # a shown default is taken with Enter
    answer(child, "margins (METRIC=VALUE, comma-separated: the smallest effects that matter) (Enter to skip):", "")
    answer(child, "worked if", "gflops(step, backend=naive, config=tiny) > 0")
    child.expect_exact("measures no config tiny")  # checked against the evaluator just named
    answer(child, "worked if", "gflops(step, backend=naive, config=xl) > -1")
    answer(child, "regressed if (a condition, checked first) (Enter to skip):", "")
    answer(child, "budget: wall-clock seconds at most:", "ten minutes")
    child.expect_exact("is not a number of seconds")
    answer(child, "budget: wall-clock seconds at most:", "0")
    child.expect_exact("must be more than 0")
    answer(child, "budget: wall-clock seconds at most:", "600")
    answer(child, "tracking issue", "issue three")
    child.expect_exact("is not a tracking issue reference")
    answer(child, "tracking issue", "owner/ptreg#3")
    child.expect_exact("the proposal:")
    child.expect_exact("method               cache-blocking")
    answer(child, "check it against the gate, and write it if admitted? [Y/n]:", "y")
    code, shown = finished(child)
    assert code == 0, shown
    assert "admitted: wrote" in shown
    record = json.loads((root / "blocked-db.json").read_text())
    assert record["methods"] == ["cache-blocking"] and record["evaluator"] == ref and "bases" not in record
    assert record["budget"] == {"wall_clock_seconds": 600.0} and record["kind"] == "runtime-benchmark"
    assert record["plan"]["worked_if"]["text"] == "gflops(step, backend=naive, config=xl) > -1"


def test_varying_an_attempt_offers_its_values_and_shows_its_disposition(reg) -> None:
    root, ref = reg
    child = terminal(root, "--id", "blocked-db", "--name", "Blocked dB", "--varied-from", "blocked-da")
    answer(child, "family [runtime-perf]:", "")  # inherited from the attempt it varies
    answer(child, "kind [runtime-benchmark]:", "")
    answer(child, "objective [training-step-time]:", "")
    answer(child, "methods (comma-separated) (Enter to skip):", "cache-blocking")
    answer(child, "bases it builds on (comma-separated) (Enter to skip):", "")
    answer(child, "question (what this run answers):", "How much of the step does dB take once blocked?")
    answer(child, "hypothesis (the expected answer) (Enter to skip):", "")
    child.expect_exact("Only continue if dB shows headroom.")
    answer(child, "what is varied from blocked-da:", "block dB as well")
    answer(child, "how this answers that disposition:", "We measure dB's headroom first.")
    answer(child, f"evaluator [{ref}]:", "")
    answer(child, "margins (METRIC=VALUE, comma-separated: the smallest effects that matter) (Enter to skip):", "")
    answer(child, "worked if", "gflops(step, backend=naive, config=xl) > 0")
    answer(child, "regressed if (a condition, checked first) (Enter to skip):", "")
    answer(child, "budget: wall-clock seconds at most:", "600")
    answer(child, "tracking issue", "owner/ptreg#3")
    answer(child, "[Y/n]:", "")
    code, shown = finished(child)
    assert code == 0, shown
    record = json.loads((root / "blocked-db.json").read_text())
    assert record["family"] == "runtime-perf" and record["objective"] == "training-step-time"
    assert record["answers_disposition"] == "We measure dB's headroom first."


def test_a_flag_that_cannot_be_used_is_asked_again_not_fatal(reg) -> None:
    root, _ = reg
    child = terminal(root, "--id", "blocked-db", "--name", "Blocked dB", "--kind", "benchmark", "--family", "perf")
    child.expect_exact("--kind 'benchmark': kind 'benchmark' is not in the kind vocabulary")
    answer(child, "varied from (the id of the attempt it varies) (Enter to skip):", "")
    answer(child, "kind:", "infrastructure")  # no shape fields: no objective, methods or bases asked
    answer(child, "question (what this run answers):", "Does the harness restart cleanly?")
    child.expect_exact("hypothesis")
    child.sendcontrol("c")
    code, _ = finished(child)
    assert code == 130  # Ctrl-C at a prompt ends ptreg as Ctrl-C does anywhere


def test_declining_writes_nothing_and_prints_the_command_to_start_again(reg) -> None:
    root, ref = reg
    before = snapshot(root)
    flags = ["--id", "blocked-db", "--name", "Blocked dB", "--family", "runtime-perf", "--kind", "infrastructure"]
    flags += ["--question", "Does the harness restart?", "--evaluator", ref, "--tracking-issue", "#4"]
    flags += ["--worked-if", "gflops(step, backend=naive, config=xl) > 0"]
    child = terminal(root, *flags)
    answer(child, "varied from (the id of the attempt it varies) (Enter to skip):", "")
    answer(child, "hypothesis (the expected answer) (Enter to skip):", "")
    answer(child, "budget: wall-clock seconds at most:", "60")
    answer(child, "[Y/n]:", "n")
    code, shown = finished(child)
    assert code == 1
    assert "nothing written" in shown and "ptreg new --id blocked-db" in shown and "--budget-seconds 60.0" in shown
    assert snapshot(root) == before


VARIED_FROM = "varied from (the id of the attempt it varies) (Enter to skip):"


def test_an_empty_answer_is_asked_again_with_the_reason(reg) -> None:
    root, _ = reg
    child = terminal(root, "--id", "blocked-db")
    answer(child, "name:", "")
    child.expect_exact("name is needed: the proposal cannot go to the gate without it; try again")
    answer(child, "name:", "Blocked dB")
    child.expect_exact(VARIED_FROM)
    child.sendcontrol("c")
    assert finished(child)[0] == 130


def test_a_stale_question_is_caught_when_asked_and_the_attempt_to_vary_is_named(reg) -> None:
    root, _ = reg
    asked = "Does blocking the forward kernel pay off end to end?"
    record = json.loads((root / "blocked-fwd.json").read_text())
    (root / "blocked-fwd.json").write_text(json.dumps({**record, "question": asked}))
    flags = ["--id", "blocked-db", "--name", "Blocked dB", "--family", "runtime-perf", "--kind", "infrastructure"]
    child = terminal(root, *flags)
    answer(child, VARIED_FROM, "")
    answer(child, "question (what this run answers):", asked)
    child.expect_exact("the same question as blocked-fwd")
    child.expect_exact("or vary it (answer blocked-fwd to 'varied from')")
    answer(child, "question (what this run answers):", "Does the harness restart cleanly after a kill?")
    child.expect_exact("hypothesis")
    child.sendcontrol("c")
    assert finished(child)[0] == 130


def test_a_condition_that_holds_answers_the_disposition_without_a_prompt(cli, tmp_path: Path) -> None:
    run = "20261201T092700Z"
    measured = complete_record("a", status="not-tried", evidence=None, lesson=None, next_action=None)
    root = write_registry(tmp_path / "held", [measured])
    cells = [
        step_cell("naive", "xl", ms=10000, shares=(0.32, 0.33, 0.32), vs_naive=1.0, vs_baseline=0.05),
        step_cell("numba", "xl", ms=1000, shares=(0.24, 0.2, 0.31), vs_naive=10.0, vs_baseline=0.68),
    ]
    add_run(root, step_results("a", run, cells))
    concluded = cli(
        "-r", root, "conclude", "a", "--status", "worked", "--lesson", "Measured.", "--evidence", "A run.",
        "--next-action", "Only go on while dB is a third of the step.",
        "--continue-if", "share(backward_db, numba, xl) >= 0.3",
    )  # fmt: skip
    assert concluded.code == 0, concluded.err
    ref = freeze_evaluator(root)
    flags = ["--id", "b", "--name", "B", "--varied-from", "a", "--family", "runtime-perf"]
    flags += ["--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "cache-blocking"]
    flags += ["--base", "matmul-f32", "--question", "Does blocking dB as well pay off?", "--hypothesis", "yes"]
    flags += ["--varied", "block dB", "--evaluator", ref, "--budget-seconds", "60", "--tracking-issue", "#9"]
    flags += ["--worked-if", "gflops(step, backend=naive, config=xl) > 0"]
    child = terminal(root, *flags)
    child.expect_exact("it holds: share(backward_db, backend=numba, config=xl) = 0.31 >= 0.3")
    child.expect_exact("the disposition is answered, nothing to add")
    index = child.expect_exact(["how this answers that disposition", "the proposal:"])
    assert index == 1  # no answer asked for: the flags alone are admitted too
    answer(child, "[Y/n]:", "y")
    code, shown = finished(child)
    assert code == 0, shown
    assert "disposition-respected" in shown and "admitted: wrote" in shown
