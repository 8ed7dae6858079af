"""A run whose inputs changed under it decides nothing: it is never complete, and a condition
is not decided on it even when a record (edited by hand) calls it complete."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers import complete_record
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.attempt import Attempt
from ptreg.records.condition import render
from ptreg.records.condition_grammar import parse
from ptreg.records.evaluator import ArmsSpec, parse_spec
from ptreg.records.run_results import (
    Cell,
    Measurement,
    MetricSample,
    Provenance,
    Roles,
    RunResults,
    new_results,
    run_is_decisive,
)
from ptreg.store.runs import write_run
from ptreg.views.dispositions import decide_disposition
from ptreg.views.run_report import evidence_line

RUN_ID = "20261202T000000Z"
CHANGED = "input cmd.py changed since it was frozen (sha256 0123456789ab, now ba9876543210)"
SPEC = parse_spec(
    {
        "name": "toy",
        "workload": "command",
        "command": ["python3", "cmd.py", "{level}"],
        "arms": {"baseline": {"level": "1"}, "candidate": {"level": "2"}},
        "baseline": "baseline",
        "inputs": ["cmd.py"],
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 3,
        "seed": 0,
        "timeout_seconds": 10,
    },
    "spec",
)


def results(inputs_changed: str | None) -> RunResults:
    """A run of two arms, each scoring 0.5 then better, made under ``inputs_changed``."""
    assert isinstance(SPEC, ArmsSpec)
    workload, cells = CommandWorkload(), []
    for step, arm in enumerate(SPEC.arms):
        samples = [
            MetricSample(repeat=r, seed=r, values={"score": 0.5 + step * 0.1 + r * 0.01}, wall_seconds=1.0 + r)
            for r in range(SPEC.repeats)
        ]
        cell = Cell(backend=arm, config="all", status="measured")
        workload.summarize(SPEC, cell, list(samples))
        cells.append(cell)
    roles = Roles(reference=None, peer=None)
    workload.compare(SPEC, cells, roles)
    stamp = "2026-12-02T00:00:00Z"
    made = Provenance(
        ["ptreg", "run", "decided"], stamp, stamp, 2, attempt="decided", run_id=RUN_ID, inputs_changed=inputs_changed
    )
    return new_results(SPEC, Measurement([], cells, roles, [], "complete", None), made)


def test_a_run_whose_inputs_changed_is_failed_and_not_decisive() -> None:
    same, changed = results(None), results(CHANGED)
    assert same.status == "complete" and run_is_decisive(same)
    assert changed.status == "failed" and not run_is_decisive(changed)
    assert changed.reason == f"inputs changed during the run: {CHANGED}"
    assert f"It decides nothing: inputs changed during the run ({CHANGED})." in evidence_line(changed)
    with pytest.raises(ValidationError, match="a run whose inputs changed under it is not complete"):
        RunResults.model_validate({**changed.model_dump(), "status": "complete"})


def test_a_condition_is_not_decided_on_a_run_whose_inputs_changed(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    write_run(root, results(CHANGED), {})
    tree = parse("diff(score, arm=candidate, over=baseline) >= 0")
    record = complete_record(
        "decided",
        # the record, edited by hand, calls the run complete; its results say otherwise
        runs=[{"run_id": RUN_ID, "status": "complete"}],
        continue_if={
            "text": render(tree),
            "tree": tree.model_dump(mode="json"),
            "set_at": "2026-12-02T00:00:00Z",
            "run": RUN_ID,
            "held_at_conclusion": True,
        },
    )
    decided = decide_disposition(root, Attempt.model_validate(record))
    assert decided is not None and decided.truth is None and decided.decision is None
    assert (
        decided.summary()
        == f"cannot be decided: run {RUN_ID} of decided decides nothing: inputs changed during the run ({CHANGED})"
    )
    write_run(tmp_path / "other", results(None), {})  # the same run with its inputs intact decides
    decided = decide_disposition(tmp_path / "other", Attempt.model_validate(record))
    assert decided is not None and decided.truth is True
