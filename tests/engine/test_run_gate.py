"""`ptreg run --fail-on-regression`: the analysis plan decides the exit code of a CI gate, on a
real command evaluator whose arms differ by a known amount."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_command_workload import SPEC, project_with, ptreg

CANDIDATE = "arm=candidate, over=baseline"


def proposed(project: Path, attempt: str, plan: list[str]) -> None:
    done = ptreg(
        project,
        *("new", "--no-input", "--id", attempt, "--name", attempt, "--family", "eval", "--kind", "model-evaluation"),
        *("--question", f"Is {attempt} a regression?", "--method", "vendor-blas"),
        *("--objective", "command-latency", "--evaluator", "toy-eval", "--budget-seconds", "200"),
        *("--tracking-issue", "me/toy#3", *plan),
    )
    assert done.returncode == 0, done.stdout + done.stderr


PLAN = [
    *("--worked-if", f"low(diff(score, {CANDIDATE})) > 0"),
    *("--regressed-if", f"high(diff(score, {CANDIDATE})) < 0"),
]


@pytest.mark.parametrize(
    ("levels", "status", "code"),
    [(("2", "8"), "worked", 0), (("8", "2"), "regressed", 1)],
)
def test_the_plan_decides_the_exit_code(tmp_path: Path, levels: tuple[str, str], status: str, code: int) -> None:
    spec = {**SPEC, "arms": {"baseline": {"level": levels[0]}, "candidate": {"level": levels[1]}}}
    project = project_with(tmp_path, spec)
    proposed(project, "gated", PLAN)
    run = ptreg(project, "run", "gated", "--fail-on-regression", "--json")
    assert run.returncode == code, run.stdout + run.stderr
    assert json.loads(run.stdout)["plan"]["status"] == status
    said = ptreg(project, "run", "gated", "--fail-on-regression")
    assert said.returncode == code and f"the plan decides {status}" in said.stdout


def test_a_gate_that_cannot_decide_fails(tmp_path: Path) -> None:
    # one round gives a ratio of wall times with no interval: the plan cannot decide
    project = project_with(tmp_path, {**SPEC, "repeats": 1})
    proposed(project, "undecided", ["--worked-if", f"low(ratio(wall_seconds, {CANDIDATE})) > 1"])
    run = ptreg(project, "run", "undecided", "--fail-on-regression", "--json")
    assert run.returncode == 1, run.stdout + run.stderr
    assert json.loads(run.stdout)["plan"]["status"] == "inconclusive"


def test_an_attempt_without_a_plan_is_refused_before_it_runs(tmp_path: Path) -> None:
    project = project_with(tmp_path, SPEC)
    proposed(project, "unplanned", PLAN)
    record = project / "attempts" / "unplanned.json"
    stripped = {k: v for k, v in json.loads(record.read_text()).items() if k != "plan"}
    record.write_text(json.dumps(stripped, indent=2) + "\n")  # as an attempt admitted before plans is
    before = record.read_bytes()
    refused = ptreg(project, "run", "unplanned", "--fail-on-regression")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "no analysis plan" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert record.read_bytes() == before and not list((project / "attempts").rglob("results.json"))
    unknown = ptreg(project, "run", "no-such-attempt", "--fail-on-regression")
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1
