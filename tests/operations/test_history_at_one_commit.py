"""Runs of a project's own command at one commit form a history: the registry's folder, which
every run rewrites, is not part of the code's identity, and a change anywhere else still is."""

from __future__ import annotations

import itertools
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers import plan_flags
from ptreg.clock import utc_now
from ptreg.engine.environment import git_state

SCRIPT = """\
import argparse, json, os
p = argparse.ArgumentParser()
p.add_argument("--level", type=int)
p.add_argument("--seed", type=int)
a = p.parse_args()
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"score": a.level / 10 + a.seed / 1000}) + "\\n")
"""
SPEC = {
    "name": "level-eval",
    "workload": "command",
    "command": ["python3", "level_eval.py", "--level", "{level}", "--seed", "{seed}"],
    "arms": {"baseline": {"level": "3"}, "candidate": {"level": "6"}},
    "baseline": "baseline",
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 60,
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository holding a command, its registry in attempts/, all committed."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name, value in (("NAME", "t"), ("EMAIL", "t@example.org")):
        monkeypatch.setenv(f"GIT_AUTHOR_{name}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{name}", value)
    monkeypatch.chdir(folder)
    git(folder, "init", "-q")
    (folder / "level_eval.py").write_text(SCRIPT)
    (folder / "spec.json").write_text(json.dumps(SPEC))
    return folder


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True).stdout


def test_a_change_in_the_registry_leaves_the_code_clean_and_one_outside_makes_it_dirty(project: Path) -> None:
    registry = project / "attempts"
    registry.mkdir()
    (registry / "a.json").write_text("{}")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "first")
    assert git_state(registry)["dirty"] is False
    (registry / "a.json").write_text('{"runs": []}')  # what a run does to its attempt's record
    assert git_state(registry)["dirty"] is False
    (project / "level_eval.py").write_text(SCRIPT + "# edited\n")
    assert git_state(registry)["dirty"] is True
    git(project, "checkout", "--", "level_eval.py")
    # a registry that is the repository's top folder has no folder to leave out: its files count
    (project / "spec.json").write_text("{}")
    assert git_state(project)["dirty"] is True


def test_five_runs_at_one_commit_form_a_history_that_compare_decides_from(
    project: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the machine a run records includes the BLAS libraries loaded in this process: loaded before
    # the first run (scipy brings its own), so that every run here is of one machine
    import scipy.stats  # noqa: F401

    assert cli("init").code == 0
    assert cli("evaluator", "freeze", "spec.json").code == 0
    proposed = cli(
        *("new", "--no-input", "--id", "level", "--name", "level", "--family", "eval", "--kind", "model-evaluation"),
        *("--question", "Does a higher level score higher?", "--method", "vendor-blas"),
        *("--objective", "command-latency", "--evaluator", "level-eval", "--budget-seconds", "200"),
        *("--tracking-issue", "me/level#1", *plan_flags("attempts", "level-eval")),
    )
    assert proposed.code == 0, proposed.err
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "the attempt, admitted")
    # each run an hour after the last, as runs taken on different days are: batches of their own
    hours = itertools.count()
    start = datetime(2026, 12, 1, tzinfo=UTC)
    monkeypatch.setattr("ptreg.operations.running.utc_now", lambda: utc_now(start + timedelta(hours=next(hours))))
    for _ in range(5):
        done = cli("run", "level")
        assert done.code == 0, done.err
    assert git(project, "status", "--porcelain", "--untracked-files=no").strip() == "M attempts/level.json"
    folders = sorted(p.name for p in (project / "attempts" / "runs" / "level").iterdir())
    assert len(folders) == 5
    for folder in folders:
        results = json.loads((project / "attempts" / "runs" / "level" / folder / "results.json").read_text())
        assert results["code"]["dirty"] is False
    compared = cli("compare", f"level/{folders[3]}", f"level/{folders[4]}", "--json")
    assert compared.code == 0, compared.err
    times = {m["arm"]: m for m in json.loads(compared.out)["metrics"] if m["metric"] == "wall_seconds"}
    assert set(times) == {"baseline", "candidate"}
    for shift in times.values():
        # A and the three runs before it: four batches of A's code, enough for a verdict
        assert not shift["verdict"].startswith("no verdict"), shift["verdict"]
