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

from helpers import blocked_chain, freeze_evaluator, snapshot, write_registry


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
        timeout=60,
        dimensions=(40, 100),
    )
    return child


def answer(child, prompt: str, text: str) -> None:
    child.expect_exact(prompt)
    child.sendline(text)


def finished(child) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, child.before


def test_a_person_finishes_a_proposal_with_every_mistake_caught_on_the_spot(reg) -> None:
    root, ref = reg
    child = terminal(root)
    answer(child, "id (a lowercase slug; the file name):", "Blocked DB")
    child.expect_exact("invalid attempt id")  # asked again, with the reason
    answer(child, "id (a lowercase slug; the file name):", "blocked-da")
    child.expect_exact("already exists")
    answer(child, "id (a lowercase slug; the file name):", "blocked-db")
    answer(child, "name:", "Blocked dB")
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
    answer(child, "kind:", "infrastructure")  # no shape fields: no objective, methods or bases asked
    answer(child, "question (what this run answers):", "Does the harness restart cleanly?")
    child.expect_exact("hypothesis")
    child.sendcontrol("c")
    code, _ = finished(child)
    assert code != 0


def test_declining_writes_nothing_and_prints_the_command_to_start_again(reg) -> None:
    root, ref = reg
    before = snapshot(root)
    flags = ["--id", "blocked-db", "--name", "Blocked dB", "--family", "runtime-perf", "--kind", "infrastructure"]
    flags += ["--question", "Does the harness restart?", "--evaluator", ref, "--tracking-issue", "#4"]
    child = terminal(root, *flags)
    answer(child, "hypothesis (the expected answer) (Enter to skip):", "")
    answer(child, "budget: wall-clock seconds at most:", "60")
    answer(child, "[Y/n]:", "n")
    code, shown = finished(child)
    assert code == 1
    assert "nothing written" in shown and "ptreg new --id blocked-db" in shown and "--budget-seconds 60.0" in shown
    assert snapshot(root) == before
