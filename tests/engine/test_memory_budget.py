"""The memory budget stops an arm whose whole process tree crosses it, and the run says so:
an arm that allocates in two children at once is measured at their sum, and stopped by a
budget below it, under every supervision method this machine offers (the sampled one too)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import complete_record, write_registry
from ptreg.engine import cgroups, processes

TWO_CHILDREN = """\
import json, os, subprocess, sys
mb = int(sys.argv[1])
# each child touches every page of its buffer, then holds it a while
hold = f"import time; b = bytearray({mb} << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"
children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(2)]
assert all(c.wait() == 0 for c in children)
open(os.environ["PTREG_METRICS"], "w").write(json.dumps({"score": 1}) + "\\n")
"""


def methods_here() -> list[str]:
    found = []
    for method in processes.METHODS[:2]:
        try:
            cgroups.make_cgroup(method).rmdir()
        except OSError:
            continue
        found.append(method)
    return [*found, "process-tree"]


def measured(tmp_path: Path, mb: int, *budget: str):
    """Run an arm whose command starts two children of ``mb`` MB each, under ``budget``."""
    from ptreg.cli import main
    from ptreg.gate.freezing import freeze
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    project = tmp_path / "project"
    project.mkdir(parents=True)
    (project / "two.py").write_text(TWO_CHILDREN)
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    spec = {
        "name": "two-children",
        "workload": "command",
        "command": [sys.executable, "two.py", "{mb}"],
        "arms": {"pair": {"mb": str(mb)}},
        "baseline": "pair",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 1,
        "seed": 0,
        "timeout_seconds": 60,
    }
    (project / "spec.json").write_text(json.dumps(spec))
    ref = freeze(root, project / "spec.json").evaluator.ref
    proposal = ["-r", str(root), "new", "--no-input", "--id", "two-run", "--name", "two", "--family", "eval"]
    proposal += ["--kind", "model-evaluation", "--question", "Is the whole tree's memory counted and bounded?"]
    proposal += ["--method", "vendor-blas", "--objective", "command-latency", "--evaluator", ref]
    proposal += ["--tracking-issue", "me/mem#1", "--worked-if", "metric(score, arm=pair) > 0"]
    proposal += ["--budget-seconds", "120", *budget]
    with pytest.raises(SystemExit) as exited:
        main(proposal)
    assert not exited.value.code
    return read_results(run_attempt(root, "two-run", ["test"]).folder)


def check(tmp_path: Path, mb: int, budget_mb: int) -> None:
    results = measured(tmp_path / "free", mb)
    (cell,) = results.cells
    assert results.status == "complete", cell.reason
    assert cell.metrics is not None
    assert cell.metrics["peak_memory_mb"].mean >= 2 * mb  # both children, not the larger one

    results = measured(tmp_path / "bounded", mb, "--budget-memory-mb", str(budget_mb))
    (cell,) = results.cells
    assert results.status == "budget-exhausted", cell.reason
    assert cell.backend == "pair" and cell.status == "budget-exhausted"
    assert f"reaching the budget's {budget_mb} MB of memory" in (cell.reason or "")
    assert cell.worker is not None and cell.worker["memory"]["bounded_by"]


@pytest.mark.parametrize("method", methods_here())
def test_800_mb_in_two_children_is_measured_whole_and_stopped_by_a_300_mb_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    check(tmp_path, 400, 300)
