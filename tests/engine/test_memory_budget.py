"""The memory budget stops an arm whose whole process tree crosses it, and the run says so:
an arm that allocates in two children at once is measured at their sum, and stopped by a
budget below it, under every supervision method this machine offers (the sampled one too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from command_projects import ATTEMPT, command_attempt

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
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    root = command_attempt(tmp_path / "project", TWO_CHILDREN, {"pair": {"mb": str(mb)}}, *budget)
    return read_results(run_attempt(root, ATTEMPT, ["test"]).folder)


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
    # the run says so itself, naming the arm and the MB
    assert results.reason is not None
    assert "pair/all: its process tree was killed at " in results.reason
    assert f"reaching the budget's {budget_mb} MB of memory" in results.reason
    assert cell.worker is not None and cell.worker["memory"]["bounded_by"]


@pytest.mark.parametrize("method", methods_here())
def test_800_mb_in_two_children_is_measured_whole_and_stopped_by_a_300_mb_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    check(tmp_path, 400, 300)
