"""A newcomer's first project, start to end, with ptreg's own command line only: no JSON of the
registry is ever edited. In a fresh folder with its own git repository: init, add a term,
freeze an evaluator, propose, run (cut short by its budget), see the run await its conclusion,
conclude, show, propose the next attempt at a terminal, build the site, export the whole
registry as a bundle, import it elsewhere, and validate both. Wrong registry paths on the way
point to the right one (issue 35: items 1, 4, 10 and 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect

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
        "--worked-if", "ms_per_step(backend=naive, config=tiny) > 0",
    )  # fmt: skip
    ran = ptreg("run", "tiled-step", code=1)  # the 1 MB budget stops every worker: nothing measured
    assert "budget-exhausted" in ran.stdout + ran.stderr

    # the project's root, or a folder that is not there, is no registry: each error says where to go
    root_given = ptreg("-r", ".", "list", code=2)
    assert "use `-r attempts`" in root_given.stderr and "ptreg init" not in root_given.stderr
    assert "`ptreg init elsewhere`" in ptreg("-r", "elsewhere", "list", code=2).stderr
    assert not (project / "elsewhere").exists() and not (project / "attempts" / "attempts").exists()

    # ran, not yet concluded: said wherever its status shows
    listed = ptreg("list").stdout
    assert "tiled-step  not-tried (ran)" in listed and "awaits `ptreg conclude ID`" in listed
    assert "tiled-step [not-tried (ran)]" in ptreg("lineage", "tiled-step").stdout
    environment = next((project / "attempts" / "runs" / "tiled-step").glob("*/environment.json"))
    assert json.loads(environment.read_text())["git"]["dirty"] is None  # no commit yet: neither clean nor dirty
    built = ptreg("site")  # at its default place, site/ beside the registry: git leaves it out
    assert "a run awaits its conclusion" in (project / "site" / "attempts" / "tiled-step.html").read_text(), built

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

    # the next attempt, proposed at a terminal: it varies the first, and each answer is checked as given
    child = pexpect.spawn(
        sys.executable, ["-m", "ptreg", "new"], cwd=str(project), env=env, encoding="utf-8", timeout=120
    )

    def answer(prompt: str, text: str) -> None:
        child.expect_exact(prompt)
        child.sendline(text)

    answer("id (a lowercase slug; the file name):", "tiled-step-512mb")
    answer("name:", "")
    child.expect_exact("name is needed")  # an empty answer is asked again, with the reason
    answer("name:", "Tiled training step within 512 MB")
    answer("varied from (the id of the attempt it varies) (Enter to skip):", "tiled-step")
    answer("family [runtime-perf]:", "")  # from the attempt it varies
    answer("kind [runtime-benchmark]:", "")
    answer("objective [training-step-time]:", "")
    answer("methods (comma-separated) (Enter to skip):", "loop-tiling")
    answer("bases it builds on (comma-separated) (Enter to skip):", "")
    answer("question (what this run answers):", "Does tiling the loops change the tiny step time?")
    child.expect_exact("the same question as tiled-step")  # stale: said now, not after every prompt
    answer("question (what this run answers):", "Within 512 MB, does tiling the loops change the tiny step time?")
    answer("hypothesis (the expected answer) (Enter to skip):", "")
    child.expect_exact("Propose again with a memory budget above a worker's size.")
    answer("what is varied from tiled-step:", "a memory budget of 512 MB")
    answer("how this answers that disposition:", "Its budget is above a worker's size.")
    answer(f"evaluator [{ref}]:", "")
    answer("margins (METRIC=VALUE, comma-separated: the smallest effects that matter) (Enter to skip):", "")
    answer("worked if", "ms_per_step(backend=naive, config=tiny) < 1000")
    answer("regressed if (a condition, checked first) (Enter to skip):", "")
    answer("budget: wall-clock seconds at most:", "600")
    answer("tracking issue", "#2")
    answer("[Y/n]:", "y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "admitted: wrote" in child.before

    git("add", "-A")
    status = git("status", "--porcelain", "--ignored").splitlines()
    assert not [line for line in status if ".lock" in line and "!!" not in line], status  # the registry lock files
    assert not [line for line in status if "site" in line and "!!" not in line], status
    git("commit", "-q", "-m", "first attempt")

    ptreg("export", "--bundle", str(tmp_path / "registry.tar.gz"))
    restored = tmp_path / "elsewhere" / "attempts"
    (tmp_path / "elsewhere").mkdir()
    imported = json.loads(ptreg("-r", str(restored), "import", str(tmp_path / "registry.tar.gz"), "--json").stdout)
    assert (imported["imported"], imported["evaluators_added"], imported["runs_added"]) == (2, 1, 1)
    ptreg("-r", str(restored), "validate", "--check-sources")
    assert json.loads(ptreg("-r", str(restored), "show", "tiled-step", "--json").stdout)["attempt"] == shown["attempt"]
    assert git("status", "--porcelain") == ""  # the lock and working files are ignored
