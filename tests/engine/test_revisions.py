"""Arms that name a git revision: the CI gate of one run. A temporary git repository holds a
script that sleeps and reports how long it slept, at two commits; an evaluator whose arms are
HEAD~1 and HEAD is frozen, proposed with a plan and run through `ptreg`, as a CI job would.
Unchanged code between the revisions gives no verdict of change; a later revision 1.5x slower
is found worse. Revisions that do not resolve, a project outside git and revisions that could
be read as options are refused in one line, with nothing written and nothing left checked out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ptreg_in_process, snapshot
from ptreg.engine.revisions import resolve
from ptreg.engine.workloads import discovery
from ptreg.engine.workloads.arms import better_word
from ptreg.engine.workloads.discovery import spec_problem
from ptreg.errors import UnusableInput
from ptreg.records.evaluator import PTREG_METRICS, MetricDeclaration, parse_spec
from ptreg.records.run_results import RESULTS_VERSION, MetricComparison

WORK = """\
import json, os, time
SLEEP = {sleep}
start = time.perf_counter()
time.sleep(SLEEP)
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({{"work_ms": 1000 * (time.perf_counter() - start)}}) + "\\n")
"""
SPEC = {
    "name": "ci-gate",
    "workload": "command",
    "command": ["python3", "work.py", "--seed", "{seed}"],
    "arms": {"before": {"revision": "HEAD~1"}, "after": {"revision": "HEAD"}},
    "baseline": "before",
    "metrics": {"work_ms": {"better": "lower", "unit": "ms", "compare": "ratio"}},
    "repeats": 5,
    "seed": 0,
    "timeout_seconds": 30,
}
WORK_MS = MetricDeclaration(better="lower", unit="ms", compare="ratio")
MARGIN = 1.05  # the smallest change of a time that matters here: 5%
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(project: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(project), *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=True
    )
    return done.stdout.strip()


def ptreg(project: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "TMPDIR": str(tmp)}
    # in this process: the subject is the run's revisions and verdicts, not the start of a
    # program (the interrupted run below is a program, signalled)
    found = ptreg_in_process(project, list(args), env)
    assert "Traceback" not in found.stdout + found.stderr, found.stderr
    return found


def repository(tmp_path: Path, before: float, after: float, spec: dict[str, object] = SPEC) -> tuple[Path, Path]:
    """A project in git with two commits of work.py (sleeping ``before``, then ``after``
    seconds), a registry and the evaluator frozen; and the folder its runs use for temporary files."""
    project, tmp = tmp_path / "project", tmp_path / "tmp"
    project.mkdir()
    tmp.mkdir()
    git(project, "init", "-q")
    (project / "work.py").write_text(WORK.format(sleep=before))
    git(project, "add", "work.py")
    git(project, "commit", "-q", "-m", "before")
    (project / "work.py").write_text(WORK.format(sleep=after))
    (project / "notes.txt").write_text("a change beside the code\n")
    git(project, "add", "work.py", "notes.txt")
    git(project, "commit", "-q", "-m", "after")
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, tmp, "init").returncode == 0
    frozen = ptreg(project, tmp, "evaluator", "freeze", "spec.json")
    assert frozen.returncode == 0, frozen.stderr
    return project, tmp


def propose(project: Path, tmp: Path, attempt: str) -> None:
    done = ptreg(
        project,
        tmp,
        *("new", "--no-input", "--id", attempt, "--name", attempt, "--family", "runtime-perf"),
        *("--kind", "runtime-benchmark", "--question", f"Is HEAD slower than HEAD~1 ({attempt})?"),
        *("--method", "vendor-blas", "--objective", "command-latency", "--evaluator", "ci-gate"),
        *("--budget-seconds", "300", "--tracking-issue", "me/ci#1"),
        # the plan of docs/comparing.md's CI recipe: rules on the interval's ends always decide
        *("--worked-if", f"high(ratio(wall_seconds, arm=after, over=before)) < {MARGIN}"),
        *("--regressed-if", f"low(ratio(wall_seconds, arm=after, over=before)) > {MARGIN}"),
        *("--margin", f"wall_seconds={MARGIN}", "--margin", f"work_ms={MARGIN}"),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def run(project: Path, tmp: Path, attempt: str, gate: int | None = None) -> dict[str, object]:
    """A run of the attempt; with ``gate``, as the CI recipe runs it (``--fail-on-regression``),
    expecting that exit code."""
    done = ptreg(project, tmp, "run", attempt, "--json", *(["--fail-on-regression"] if gate is not None else []))
    assert done.returncode == (gate or 0), done.stdout + done.stderr
    results: dict[str, object] = json.loads(done.stdout)["results"]
    return results


def verdicts(results: dict[str, object], margin: float | None) -> dict[str, str]:
    """The word the run's tables give each metric of `after` against `before`."""
    cells = {c["backend"]: c for c in results["cells"]}  # type: ignore[attr-defined]
    versus = cells["after"]["versus"]["before"]
    declared = {"work_ms": WORK_MS, **PTREG_METRICS}
    return {
        metric: better_word(MetricComparison.model_validate(versus[metric]), declared[metric], margin)
        for metric in ("wall_seconds", "work_ms")
    }


def left_behind(project: Path, tmp: Path) -> list[str]:
    """Checkouts a run left: worktrees git still knows of, and temporary folders."""
    worktrees = [
        line for line in git(project, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")
    ]
    return worktrees[1:] + [p.name for p in tmp.iterdir() if p.name.startswith("ptreg-revisions-")]


def estimates(results: dict[str, object]) -> dict[str, float]:
    cells = {c["backend"]: c for c in results["cells"]}  # type: ignore[attr-defined]
    return {m: cells["after"]["versus"]["before"][m]["estimate"] for m in ("wall_seconds", "work_ms")}


def a_and_a(tmp_path: Path, runs: int) -> None:
    """Runs of one evaluator whose two revisions hold the same code: no verdict of change at a
    5% margin in any run (the acceptance of the CI gate; a flag count, not a timing). The work
    (0.3 s) outweighs the start of Python and its process tree: at 0.05 s, start-up jitter alone
    (repeats of 0.09-0.14 s) spread about 40 quiet A/A runs over 0.85-1.12x, and one of them
    once read as a change; at 0.3 s thirty A/A runs read 0.975-1.032x."""
    project, tmp = repository(tmp_path, 0.3, 0.3)
    heads = {"before": git(project, "rev-parse", "HEAD~1"), "after": git(project, "rev-parse", "HEAD")}
    propose(project, tmp, "same")  # one attempt, run again and again: a CI job per commit
    for n in range(runs):
        results = run(project, tmp, "same", gate=0 if n == 0 else None)  # the gate passes unchanged code
        assert results["status"] == "complete" and results["results_version"] == RESULTS_VERSION
        recorded = results["revisions"]
        assert {arm: found["commit"] for arm, found in recorded.items()} == heads  # type: ignore[attr-defined]
        # the same work.py at both commits: the same code, by content
        assert recorded["before"]["code"] == recorded["after"]["code"] != {}  # type: ignore[index]
        found = verdicts(results, MARGIN)
        assert not {"better", "worse"} & set(found.values()), (n, found, estimates(results))
        if n == 0:  # the plan decides on the first complete run
            assert plan_decides(project, tmp, "same") in ("failed", "worked")
        assert left_behind(project, tmp) == []


def test_unchanged_code_between_two_revisions_gives_no_verdict_of_change(tmp_path: Path) -> None:
    a_and_a(tmp_path, 3)


@pytest.mark.slow
def test_unchanged_code_between_two_revisions_gives_no_verdict_of_change_in_20_runs(tmp_path: Path) -> None:
    a_and_a(tmp_path, 20)


def test_a_later_revision_1_5x_slower_is_found_worse_and_shown(tmp_path: Path) -> None:
    # 8 rounds: a repeat's wall time carries the start of Python and of its process tree
    # (about 0.07 s here quiet, 0.3 s or more and noisy with both cores busy), which dilutes
    # 1.5x; at 0.1 against 0.15 s of work a loaded run once read no regression, so the work is
    # long enough that the start-up, quiet or busy, dilutes it to no less than about 1.25x
    project, tmp = repository(tmp_path, 0.3, 0.45, {**SPEC, "repeats": 8})
    propose(project, tmp, "slower")
    results = run(project, tmp, "slower", gate=1)  # the gate fails it
    assert results["status"] == "complete"
    assert verdicts(results, MARGIN) == {"wall_seconds": "worse", "work_ms": "worse"}
    assert verdicts(results, None) == {"wall_seconds": "worse", "work_ms": "worse"}
    recorded = results["revisions"]
    assert recorded["before"]["code"] != recorded["after"]["code"]  # type: ignore[index]
    shown = ptreg(project, tmp, "show", "slower").stdout
    assert "Revisions: each arm ran in a checkout of its commit" in shown
    assert git(project, "rev-parse", "HEAD")[:12] in shown and git(project, "rev-parse", "HEAD~1")[:12] in shown
    assert left_behind(project, tmp) == []
    # the plan reads the same verdict, as the CI recipe of docs/comparing.md reads it
    assert plan_decides(project, tmp, "slower") == "regressed"


def plan_decides(project: Path, tmp: Path, attempt: str) -> str:
    """The status the attempt's plan gives on its runs, from `ptreg show --json`."""
    shown = json.loads(ptreg(project, tmp, "show", attempt, "--json").stdout)
    lines = [line for section in shown["sections"] if section["title"] == "Decision" for line in section["lines"]]
    said = [line for line in lines if "its plan decides " in line]
    assert len(said) == 1, lines
    return said[0].split("its plan decides ", 1)[1].split(":", 1)[0]


def test_consent_covers_the_revisions_by_name(tmp_path: Path) -> None:
    project, tmp = repository(tmp_path, 0.01, 0.01)
    frozen = json.loads(next((project / "attempts" / "evaluators").glob("ci-gate@*.json")).read_text())
    assert frozen["code"] == {}  # no arm runs the working tree's files
    shown = ptreg(project, tmp, "evaluator", "show", frozen["name"] + "@" + frozen["sha256"][:12]).stdout
    assert "HEAD~1 (arm before), HEAD (arm after)" in shown
    assert "each run records the commit each resolved to" in shown


def refused_run(project: Path, tmp: Path, attempt: str) -> str:
    propose(project, tmp, attempt)
    before = snapshot(project / "attempts")
    done = ptreg(project, tmp, "run", attempt)
    assert done.returncode == 2, done.stdout + done.stderr
    assert snapshot(project / "attempts") == before
    assert left_behind(project, tmp) == []
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_revision_that_names_no_commit_is_refused_in_one_line(tmp_path: Path) -> None:
    spec = {**SPEC, "arms": {"before": {"revision": "no-such-branch"}, "after": {"revision": "HEAD"}}}
    project, tmp = repository(tmp_path, 0.01, 0.01, spec)
    line = refused_run(project, tmp, "missing")
    assert "arm before: revision 'no-such-branch' names no commit" in line and "nothing run" in line


def test_a_project_outside_git_is_refused_in_one_line(tmp_path: Path) -> None:
    project, tmp = repository(tmp_path, 0.01, 0.01)
    subprocess.run(["rm", "-rf", str(project / ".git")], check=True)
    propose(project, tmp, "no-git")
    before = snapshot(project / "attempts")
    done = ptreg(project, tmp, "run", "no-git")
    assert done.returncode == 2 and "is in no git repository; nothing run" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(project / "attempts") == before


def test_a_revision_lacking_a_frozen_input_is_refused(tmp_path: Path) -> None:
    spec = {**SPEC, "inputs": ["items.txt"]}
    project, tmp = tmp_path / "project", tmp_path / "tmp"
    project.mkdir()
    tmp.mkdir()
    git(project, "init", "-q")
    (project / "work.py").write_text(WORK.format(sleep=0.01))
    git(project, "add", "work.py")
    git(project, "commit", "-q", "-m", "before")
    (project / "items.txt").write_text("q1\n")
    git(project, "add", "items.txt")
    git(project, "commit", "-q", "-m", "after")
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, tmp, "init").returncode == 0
    assert ptreg(project, tmp, "evaluator", "freeze", "spec.json").returncode == 0
    line = refused_run(project, tmp, "no-input")
    assert "arm before: revision 'HEAD~1' (" in line and "does not hold the evaluator's frozen inputs" in line, line


@pytest.mark.parametrize(
    ("revision", "problem"),
    [
        ("--output=/tmp/x", "starts with '-'"),
        ("-p", "starts with '-'"),
        ("HEAD\n~1", "holds a control character"),
        ("HEAD\x1b[2J", "holds a control character"),
        ("  ", "is empty"),
    ],
)
def test_a_revision_that_is_not_a_plain_rev_is_refused_by_the_spec(revision: str, problem: str) -> None:
    spec = {**SPEC, "arms": {"before": {"revision": revision}, "after": {"revision": "HEAD"}}}
    with pytest.raises(Exception) as caught:
        parse_spec(spec, "spec.json")
    assert "is not a plain git revision: " + problem in str(caught.value)


def test_an_interrupted_run_leaves_no_checkout_behind(tmp_path: Path) -> None:
    project, tmp = repository(tmp_path, 5, 5, {**SPEC, "repeats": 3})
    propose(project, tmp, "cut")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    running = subprocess.Popen(
        [sys.executable, "-m", "ptreg", "run", "cut"],
        cwd=project,
        env={**os.environ, "PATH": path, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp.glob("ptreg-command-*")):  # an arm's command is running, in its checkout
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.05)
    assert len(left_behind(project, tmp)) == 3  # two worktrees, and their folder
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=120)
    assert running.returncode == 128 + signal.SIGINT, out + err
    assert "Traceback" not in out + err
    assert left_behind(project, tmp) == []


def test_an_arm_without_a_revision_runs_the_working_tree_whose_code_is_frozen(tmp_path: Path) -> None:
    spec = {
        **SPEC,
        "command": ["python3", "work.py", "--arm", "{arm}"],
        "arms": {"before": {"revision": "HEAD~1", "arm": "before"}, "now": {"arm": "now"}},
        "repeats": 2,
    }
    project, tmp = repository(tmp_path, 0.01, 0.02, spec)
    frozen = json.loads(next((project / "attempts" / "evaluators").glob("ci-gate@*.json")).read_text())
    assert list(frozen["code"]) == ["work.py"]  # the working tree's, run by the arm without a revision
    propose_plain(project, tmp, "mixed")
    results = run(project, tmp, "mixed")
    assert results["status"] == "complete"
    assert list(results["revisions"]) == ["before"]  # type: ignore[call-overload]
    (project / "work.py").write_text(WORK.format(sleep=0.03))  # the working tree's code is no longer what was frozen
    done = ptreg(project, tmp, "run", "mixed")
    assert done.returncode == 2 and "work.py: sha256" in done.stderr, done.stderr


def propose_plain(project: Path, tmp: Path, attempt: str) -> None:
    done = ptreg(
        project,
        tmp,
        *("new", "--no-input", "--id", attempt, "--name", attempt, "--family", "runtime-perf"),
        *("--kind", "runtime-benchmark", "--question", f"Does the working tree differ ({attempt})?"),
        *("--method", "vendor-blas", "--objective", "command-latency", "--evaluator", "ci-gate"),
        *("--budget-seconds", "300", "--tracking-issue", "me/ci#2"),
        *("--worked-if", "better(wall_seconds, arm=now, over=before)"),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_engine_passes_no_revision_git_could_read_as_an_option(tmp_path: Path) -> None:
    project, _ = tmp_path / "p", None
    project.mkdir()
    git(project, "init", "-q")
    git(project, "commit", "-q", "--allow-empty", "-m", "one")
    assert resolve(project, "e", "a", "HEAD") == git(project, "rev-parse", "HEAD")
    for revision in ("--all", "-h", "HEAD\n--all"):
        with pytest.raises(UnusableInput, match="nothing run"):
            resolve(project, "e", "a", revision)
    # past the spec's check, git still takes what follows --end-of-options as a revision
    with pytest.raises(UnusableInput, match="names no commit"):
        resolve(project, "e", "a", "HEAD --all")


def test_only_a_workload_that_checks_revisions_out_may_be_given_one(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_workloads import Fine

    monkeypatch.setattr(discovery, "workload_named", lambda name: Fine())
    spec = parse_spec({k: v for k, v in SPEC.items() if k != "command"} | {"workload": "fake"}, "spec.json")
    assert spec_problem(spec) == "arm 'after' names a git revision, which workload 'fake' does not check out"
