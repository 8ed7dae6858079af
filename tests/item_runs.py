"""A run of arms whose items are known, for the tests of `ptreg items`, its MCP tool and its
site table: built in memory through the command workload's own summaries and comparisons, and
written as a real run folder of a registry."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import complete_record, write_registry
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.evaluator import ArmsSpec, parse_spec
from ptreg.records.run_results import (
    RESULTS_VERSION,
    Cell,
    Measurement,
    MetricSample,
    Provenance,
    Roles,
    RunResults,
    new_results,
)

SPEC = parse_spec(
    {
        "name": "graded",
        "workload": "command",
        "command": ["python3", "x.py", "{model}"],
        "arms": {"champion": {"model": "a"}, "challenger": {"model": "b"}, "third": {"model": "c"}},
        "baseline": "champion",
        "metrics": {
            "score": {"better": "higher", "unit": "fraction"},
            "loss": {"better": "lower", "unit": "nats"},
            "latency_ms": {"better": "lower", "unit": "ms", "compare": "ratio"},
        },
        "repeats": 3,
        "seed": 0,
        "timeout_seconds": 10,
    },
    "spec",
)
NO_ROLES = Roles(reference=None, peer=None)
RUN = "20261201T000000Z"


def arms_run(by_arm: dict[str, list[dict[str, dict[str, float]]]], version: int = RESULTS_VERSION) -> RunResults:
    """A run of the arms: each repeat (its own seed) as items by metric."""
    assert isinstance(SPEC, ArmsSpec)
    workload = CommandWorkload()
    cells = []
    for arm, repeats in by_arm.items():
        samples = [
            MetricSample(
                repeat=r,
                seed=r,
                values={
                    **{m: sum(v.values()) / len(v) for m, v in items.items() if v},
                    "latency_ms": 10.0 + r,
                    **({"score": 0.5} if "score" not in items else {}),
                    **({"loss": 1.0} if "loss" not in items else {}),
                },
                items={m: v for m, v in items.items() if v} or None,
                wall_seconds=1.0,
            )
            for r, items in enumerate(repeats)
        ]
        cell = Cell(backend=arm, config="all", status="measured")
        workload.summarize(SPEC, cell, list(samples), results_version=version)
        cells.append(cell)
    workload.compare(SPEC, cells, NO_ROLES, results_version=version)
    made = new_results(
        SPEC,
        Measurement([], cells, NO_ROLES, [], "complete", None),
        Provenance(["ptreg", "run"], "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z", 2, attempt="graded", run_id=RUN),
    )
    return RunResults.model_validate({**made.model_dump(), "results_version": version})


def seeds(*columns: dict[str, float], metric: str = "score") -> list[dict[str, dict[str, float]]]:
    """One repeat per column, each its own seed."""
    return [{metric: dict(c)} for c in columns]


# Three seeds. Against champion, challenger loses q1 outright (1 -> 0 in every seed), loses q2 in
# one seed of three (a mean of -1/3), wins q3 in two seeds (+2/3), and ties the rest, q4 by
# winning one seed and losing another: what counts is the mean over the seeds.
CHAMPION = [{"q1": 1, "q2": 1, "q3": 0, "q4": 0, "q5": 1}] * 3
CHALLENGER = [
    {"q1": 0, "q2": 0, "q3": 1, "q4": 1, "q5": 1},
    {"q1": 0, "q2": 1, "q3": 1, "q4": 0, "q5": 1},
    {"q1": 0, "q2": 1, "q3": 0, "q4": -1, "q5": 1},
]
THIRD = [{"q1": 1, "q2": 1, "q3": 0, "q4": 0, "q5": 0}] * 3


def known() -> RunResults:
    return arms_run({"champion": seeds(*CHAMPION), "challenger": seeds(*CHALLENGER), "third": seeds(*THIRD)})


def registry(tmp_path: Path, results: RunResults | None = None) -> Path:
    linked = [{"run_id": RUN, "status": "complete"}]
    root = write_registry(tmp_path / "reg", [complete_record("graded", runs=linked)])
    folder = root / "runs" / "graded" / RUN
    folder.mkdir(parents=True)
    body = (results or known()).model_dump(mode="json")
    (folder / "results.json").write_text(json.dumps(body), encoding="utf-8")
    (folder / "environment.json").write_text("{}\n", encoding="utf-8")
    return root
