"""A newcomer's first project, start to end, with ptreg's own command line only: no JSON of the
registry is ever edited. In a fresh folder with its own git repository: init, add a term,
freeze an evaluator, propose, run (cut short by its budget), conclude, show, export the whole
registry as a bundle, import it elsewhere, and validate both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import tiny_spec


def test_a_first_project_from_init_to_a_restored_bundle(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "CI")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t")
    env.update(GIT_COMMITTER_EMAIL="t@example.org", COLUMNS="120")

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, env=env, check=True)
        return done.stdout

    def ptreg(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "ptreg", *args], cwd=project, capture_output=True, text=True, env=env, timeout=600
        )
        assert done.returncode == code, f"ptreg {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        return done

    git("init", "-q")
    ptreg("init")
    ptreg("vocab", "add", "method", "loop-tiling", "--description", "Tile the loops of a kernel by hand.")
    assert "loop-tiling" in ptreg("vocab", "list", "method").stdout

    # The evaluator spec is the one file a person writes: how the attempt will be measured.
    (project / "tiny.json").write_text(json.dumps({**tiny_spec("tiny-naive", timed_steps=2, repeats=2), "seed": 0}))
    frozen = ptreg("evaluator", "freeze", "tiny.json", "--json")
    ref = json.loads(frozen.stdout)["ref"]

    ptreg(
        "new", "--id", "tiled-step", "--name", "Tiled training step", "--family", "runtime-perf",
        "--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "loop-tiling",
        "--question", "Does tiling the loops change the tiny step time?", "--evaluator", ref,
        "--budget-seconds", "600", "--budget-memory-mb", "1", "--tracking-issue", "#1", "--no-input",
    )  # fmt: skip
    ran = ptreg("run", "tiled-step", code=1)  # the 1 MB budget stops every worker: nothing measured
    assert "budget-exhausted" in ran.stdout + ran.stderr

    ptreg(
        "conclude", "tiled-step", "--status", "inconclusive",
        "--lesson", "A memory budget below a worker's size measures nothing.",
        "--next-action", "Propose again with a memory budget above a worker's size.",
        "--failure-reason", "The budget stopped every worker before its first step.",
        "--confidence", "inferred", "--evidence", "The run's cells were all stopped at 1 MB.",
    )  # fmt: skip
    shown = json.loads(ptreg("show", "tiled-step", "--json").stdout)
    assert shown["attempt"]["status"] == "inconclusive"
    assert "nothing was measured" in shown["attempt"]["evidence"]
    assert "Tiled training step" in ptreg("show", "tiled-step").stdout
    ptreg("validate", "--check-sources")

    git("add", "-A")
    assert not [
        line for line in git("status", "--porcelain", "--ignored").splitlines() if "lock" in line and "!!" not in line
    ]
    git("commit", "-q", "-m", "first attempt")

    ptreg("export", "--bundle", str(tmp_path / "registry.tar.gz"))
    restored = tmp_path / "elsewhere" / "attempts"
    (tmp_path / "elsewhere").mkdir()
    imported = json.loads(ptreg("-r", str(restored), "import", str(tmp_path / "registry.tar.gz"), "--json").stdout)
    assert (imported["imported"], imported["evaluators_added"], imported["runs_added"]) == (1, 1, 1)
    ptreg("-r", str(restored), "validate", "--check-sources")
    assert json.loads(ptreg("-r", str(restored), "show", "tiled-step", "--json").stdout)["attempt"] == shown["attempt"]
    assert git("status", "--porcelain") == ""  # the lock and working files are ignored
