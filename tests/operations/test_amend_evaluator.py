"""The everyday harness-bug loop: a first run fails on a bug in the harness, the fix changes the
frozen evaluator's code so `run` refuses, and `readmit --evaluator NEW --reason` amends the
attempt before any outcome; after a run that measured something the evaluator is fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import assert_one_line_error, plan_flags

HARNESS = """\
import argparse, json, os
p = argparse.ArgumentParser()
p.add_argument("--level", type=int)
p.add_argument("--seed", type=int)
a = p.parse_args()
BUG
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"score": a.level / 10 + a.seed / 1000}) + "\\n")
"""
BROKEN = HARNESS.replace("BUG", "raise KeyError('tokenizer')")
FIXED = HARNESS.replace("BUG", "")
FAILS_ON_SEED_1 = HARNESS.replace("BUG", "assert a.seed != 1, 'seed 1 breaks it'")
SPEC = {
    "name": "level-eval",
    "workload": "command",
    "command": ["python3", "harness.py", "--level", "{level}", "--seed", "{seed}"],
    "arms": {"baseline": {"level": "3"}, "candidate": {"level": "6"}},
    "baseline": "baseline",
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 60,
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> Path:
    """A project whose harness raises, its evaluator frozen, and an attempt admitted with it."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    (folder / "harness.py").write_text(BROKEN)
    assert cli("init").code == 0
    freeze(folder, cli, "level-eval")
    proposed = cli(
        *("new", "--no-input", "--id", "level", "--name", "level", "--family", "eval", "--kind", "model-evaluation"),
        *("--question", "Does a higher level score higher?", "--method", "vendor-blas"),
        *("--objective", "command-latency", "--evaluator", "level-eval", "--budget-seconds", "200"),
        *("--tracking-issue", "me/level#1", *plan_flags("attempts", "level-eval")),
    )
    assert proposed.code == 0, proposed.err
    return folder


def freeze(folder: Path, cli, name: str) -> None:
    (folder / f"{name}.json").write_text(json.dumps({**SPEC, "name": name}))
    frozen = cli("evaluator", "freeze", f"{name}.json")
    assert frozen.code == 0, frozen.err


def record(folder: Path) -> dict:
    return json.loads((folder / "attempts" / "level.json").read_text())


def test_a_harness_fixed_before_any_outcome_takes_a_new_evaluator_and_the_run_completes(project: Path, cli) -> None:
    failed = cli("run", "level")
    assert failed.code == 1 and "KeyError: 'tokenizer'" in failed.out + failed.err
    (project / "harness.py").write_text(FIXED)
    refused = cli("run", "level")
    assert refused.code != 0 and "harness.py" in refused.err
    freeze(project, cli, "level-eval-fixed")
    # the fix is amended with its reason, or not at all
    assert_one_line_error(cli("readmit", "level", "--evaluator", "level-eval-fixed"), 2, "--reason TEXT")
    assert_one_line_error(cli("readmit", "level", "--reason", "why"), 2, "give the new one with --evaluator")
    old = record(project)["evaluator"]
    amended = cli("readmit", "level", "--evaluator", "level-eval-fixed", "--reason", "the harness read a missing key")
    assert amended.code == 0, amended.err
    assert "level amended: evaluator level-eval@" in amended.out
    after = record(project)
    assert after["evaluator"].startswith("level-eval-fixed@") and after["evaluator"] != old
    (amendment,) = after["amendments"]
    assert amendment["before"] == old and amendment["after"] == after["evaluator"]
    assert amendment["reason"] == "the harness read a missing key" and amendment["field"] == "evaluator"
    assert amendment["runs"] == [r["run_id"] for r in after["runs"]] and len(amendment["runs"]) == 1
    assert after["runs"][0]["evaluator"] == old  # the failed run keeps what it was measured under
    done = cli("run", "level")
    assert done.code == 0, done.err
    validated = cli("validate")
    assert validated.code == 0 and "0 errors" in validated.out, validated.out
    shown = " ".join(cli("show", "level").out.split())
    assert f"Amended at {amendment['amended_at']}, after 1 run that measured nothing: evaluator" in shown
    assert f"in place of {old}; the harness read a missing key." in shown
    # a complete run measured: the evaluator is fixed for good
    freeze(project, cli, "level-eval-third")
    before = (project / "attempts" / "level.json").read_bytes()
    again = cli("readmit", "level", "--evaluator", "level-eval-third", "--reason", "another idea")
    assert_one_line_error(again, 1, "measured something (it is complete)", "fixed for good")
    assert (project / "attempts" / "level.json").read_bytes() == before


def test_one_good_sample_in_a_failed_run_fixes_the_evaluator(project: Path, cli) -> None:
    (project / "harness.py").write_text(FAILS_ON_SEED_1)
    freeze(project, cli, "level-eval-half")
    amended = cli("readmit", "level", "--evaluator", "level-eval-half", "--reason", "a first try")
    assert amended.code == 0, amended.err  # no run yet: nothing measured
    assert "before any run" in " ".join(cli("show", "level").out.split())
    failed = cli("run", "level")
    assert failed.code == 1
    (project / "harness.py").write_text(FIXED)
    freeze(project, cli, "level-eval-fixed")
    before = (project / "attempts" / "level.json").read_bytes()
    refused = cli("readmit", "level", "--evaluator", "level-eval-fixed", "--reason", "seed 1 fixed")
    assert_one_line_error(refused, 1, "holds a measured sample", "fixed for good")
    assert (project / "attempts" / "level.json").read_bytes() == before


def test_a_run_that_cannot_be_read_is_not_taken_for_one_that_measured_nothing(project: Path, cli) -> None:
    assert cli("run", "level").code == 1
    (folder,) = (project / "attempts" / "runs" / "level").iterdir()
    (folder / "results.json").write_text("{forged")
    (project / "harness.py").write_text(FIXED)
    freeze(project, cli, "level-eval-fixed")
    before = (project / "attempts" / "level.json").read_bytes()
    refused = cli("readmit", "level", "--evaluator", "level-eval-fixed", "--reason", "fixed")
    assert_one_line_error(refused, 1, f"run {folder.name} cannot be read", "evaluator stays")
    assert (project / "attempts" / "level.json").read_bytes() == before


def test_a_forged_amendment_after_a_complete_run_is_a_validate_error(project: Path, cli) -> None:
    (project / "harness.py").write_text(FIXED)
    freeze(project, cli, "level-eval-fixed")
    assert cli("readmit", "level", "--evaluator", "level-eval-fixed", "--reason", "fixed").code == 0
    assert cli("run", "level").code == 0
    assert cli("validate").code == 0
    # written by hand: the evaluator swapped after the complete run, as if amended before it
    freeze(project, cli, "level-eval-third")
    third = next(p.stem for p in (project / "attempts" / "evaluators").glob("level-eval-third@*.json"))
    raw = record(project)
    fixed = raw["evaluator"]
    raw["amendments"].append(
        {"amended_at": "2026-12-06T00:00:00Z", "field": "evaluator", "before": fixed, "after": third, "reason": "x"}
    )
    raw["evaluator"] = third
    (project / "attempts" / "level.json").write_text(json.dumps(raw))
    found = cli("validate")
    assert found.code == 1
    assert "error [amendment]" in found.out and "measured something under " + fixed in found.out
    # and one whose last amendment does not give the attempt its evaluator
    raw["evaluator"] = fixed
    raw["amendments"].pop()
    raw["amendments"][0]["after"] = third
    (project / "attempts" / "level.json").write_text(json.dumps(raw))
    found = cli("validate")
    assert found.code == 1 and f"the last amendment gives {third}, but the attempt is measured by {fixed}" in found.out
