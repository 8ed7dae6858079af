"""Backends taken at git revisions: one backend measured at two commits of the project in one
interleaved run. A temporary git repository holds a tiny backend package at two commits; its
entry point is registered the way an editable install registers one (a ``.dist-info`` in a
folder of its own, the package's folder on the import path), and `ptreg run` measures
``tiny@before`` against ``tiny@after``, each worker importing the module from its revision's
checkout. Unchanged code gives no verdict; a later revision that is slower is found slower, and
each cell's worker is shown to have run its own revision's code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_revisions import git

from helpers import evaluator_spec, ptreg_in_process, snapshot
from ptreg.engine.measurement import Places, cell_task, parity_task
from ptreg.engine.processes import python_argv
from ptreg.engine.worker import create_taken
from ptreg.errors import UnusableInput
from ptreg.records.evaluator import EvaluatorSpec, parse_spec
from ptreg.records.run_results import Roles

BACKEND = """\
import time

import numpy as np


class TinyBackend:
    name = "tiny"
    description = "a backend of a project, measured at two of its revisions"
    order_preserving = False
    thread_control = "none"

    @staticmethod
    def default_threads():
        return 1

    def set_threads(self, n):
        return 1

    def _slowed(self, product):
        # a product of the tiny config takes microseconds, where what differs between two worker
        # processes (where their arrays landed, their caches) can move it by half: the work a
        # revision changes is a fixed wait, which no process moves by more than its jitter
        product()
        time.sleep(0.002 * {factor})

    def matmul_forward(self, a, b, out):
        self._slowed(lambda: np.matmul(a, b, out=out))

    def matmul_backward_da(self, dc, b, out):
        self._slowed(lambda: np.matmul(dc, b.T, out=out))

    def matmul_backward_db(self, a, dc, out):
        self._slowed(lambda: np.matmul(a.T, dc, out=out))

    def runtime_details(self):
        return {{"code": "{code}"}}
"""
SPEC = {
    "name": "tiny-at-two",
    "workload": "kernels",
    "configs": ["tiny"],
    "backends": ["tiny@before", "tiny@after"],
    "baseline": "tiny@before",
    "revisions": {"before": "HEAD~1", "after": "HEAD"},
    "warmup_steps": 1,
    "timed_steps": 3,
    "repeats": 5,
    "seed": 0,
    "threads": 1,
    "tolerance": {"rtol": 1e-5, "atol": 1e-6},
    "max_relative_spread": 10,
    "metric": "gflops",
}


def commit(project: Path, message: str, factor: float, code: str) -> None:
    (project / "src" / "tinyback" / "__init__.py").write_text(BACKEND.format(factor=factor, code=code))
    (project / "notes.txt").write_text(f"{message}\n")
    git(project, "add", "src", "notes.txt")
    git(project, "commit", "-q", "-m", message)


class Project:
    """A project in git holding the tiny backend at two commits, the backend registered by an
    entry point, a registry, and the folder the runs use for temporary files."""

    def __init__(self, tmp_path: Path, after: tuple[float, str], spec: dict[str, object] = SPEC) -> None:
        self.project, self.tmp, site = tmp_path / "project", tmp_path / "tmp", tmp_path / "site"
        for folder in (self.project / "src" / "tinyback", self.tmp, site / "tinyback-0.1.dist-info"):
            folder.mkdir(parents=True)
        dist = site / "tinyback-0.1.dist-info"
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyback\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text("[ptreg.backends]\ntiny = tinyback:TinyBackend\n")
        git(self.project, "init", "-q")
        commit(self.project, "before", 1, "one")
        commit(self.project, "after", *after)
        # the package's folder on the import path and its entry point beside: an editable install
        self.path = [str(site), str(self.project / "src")]
        (self.project / "spec.json").write_text(json.dumps(spec))
        assert self.ptreg("init").returncode == 0
        frozen = self.ptreg("evaluator", "freeze", "spec.json")
        assert frozen.returncode == 0, frozen.stderr

    def ptreg(self, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        python_path = os.pathsep.join([*self.path, os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PATH": path, "TMPDIR": str(self.tmp), "PYTHONPATH": python_path, **variables}
        if args[0] != "run":  # in this process: nothing but a run imports the backend
            found = ptreg_in_process(self.project, list(args), env)
        else:  # a program, whose import path is the editable install's, as the workers' is
            found = subprocess.run(
                [sys.executable, "-m", "ptreg", *args],
                capture_output=True,
                text=True,
                cwd=self.project,
                env=env,
                timeout=300,
            )
        assert "Traceback" not in found.stdout + found.stderr, found.stderr
        return found

    def propose(self, attempt: str, later: str = "tiny@after") -> None:
        done = self.ptreg(
            *("new", "--no-input", "--id", attempt, "--name", attempt, "--family", "runtime-perf"),
            *("--kind", "runtime-benchmark", "--question", f"Is tiny slower at HEAD than at HEAD~1 ({attempt})?"),
            *("--method", "vendor-blas", "--objective", "kernel-throughput", "--evaluator", "tiny-at-two"),
            *("--budget-seconds", "300", "--tracking-issue", "me/ci#3"),
            # a change of 10% is the smallest that matters here
            *("--worked-if", f"low(speedup({later}, over=tiny@before, config=tiny)) > 1.1"),
            *("--regressed-if", f"high(speedup({later}, over=tiny@before, config=tiny)) < 0.9"),
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def run(self, attempt: str) -> dict[str, object]:
        done = self.ptreg("run", attempt, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        results: dict[str, object] = json.loads(done.stdout)["results"]
        return results

    def plan_decides(self, attempt: str) -> str:
        """The status the attempt's plan gives on its runs, from `ptreg show --json`."""
        shown = json.loads(self.ptreg("show", attempt, "--json").stdout)
        lines = [line for section in shown["sections"] if section["title"] == "Decision" for line in section["lines"]]
        said = [line for line in lines if "its plan decides " in line]
        assert len(said) == 1, lines
        return said[0].split("its plan decides ", 1)[1].split(":", 1)[0]

    def left_behind(self) -> list[str]:
        worktrees = [
            line
            for line in git(self.project, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")
        ]
        return worktrees[1:] + [p.name for p in self.tmp.iterdir() if p.name.startswith("ptreg-revisions-")]


def cells(results: dict[str, object]) -> dict[str, dict[str, object]]:
    return {c["backend"]: c for c in results["cells"]}  # type: ignore[attr-defined]


def test_a_later_revision_slower_is_found_and_each_worker_ran_its_own_revision(tmp_path: Path) -> None:
    project = Project(tmp_path, (3, "two"))
    project.propose("slower")
    results = project.run("slower")
    assert results["status"] == "complete", results.get("reason")
    found = cells(results)
    # each worker imported the backend from its revision's checkout, not from the working tree
    assert found["tiny@before"]["worker"]["runtime"] == {"code": "one"}  # type: ignore[index]
    assert found["tiny@after"]["worker"]["runtime"] == {"code": "two"}  # type: ignore[index]
    recorded = results["revisions"]
    heads = {"before": git(project.project, "rev-parse", "HEAD~1"), "after": git(project.project, "rev-parse", "HEAD")}
    assert {label: r["commit"] for label, r in recorded.items()} == heads  # type: ignore[attr-defined]
    assert list(recorded["before"]["code"]) == ["src/tinyback/__init__.py"]  # type: ignore[index]
    assert recorded["before"]["code"] != recorded["after"]["code"]  # type: ignore[index]
    # the code a comparison across runs takes each cell to have measured: the revision's
    identity = results["code"]["arms"]  # type: ignore[index]
    assert identity["tiny@before"]["digest"] != identity["tiny@after"]["digest"] is not None
    ratio = found["tiny@after"]["vs_baseline_ratio"]  # type: ignore[index]
    assert ratio["ci"]["high"] < 1, ratio  # three times the work: slower over the whole interval
    assert project.plan_decides("slower") == "regressed"
    shown = project.ptreg("show", "slower").stdout
    assert "Revisions: each backend taken at a revision was imported from a checkout of its commit" in shown
    assert heads["before"][:12] in shown and heads["after"][:12] in shown
    assert project.left_behind() == []


def a_and_a(tmp_path: Path, runs: int) -> None:
    """Runs of one evaluator whose two revisions hold the same backend code: each run's plan
    (a change of 10% either way) decides neither worked nor regressed."""
    project = Project(tmp_path, (1, "one"))
    project.propose("same")  # one attempt, run again and again: a CI job per commit
    for n in range(runs):
        results = project.run("same")
        assert results["status"] == "complete", results.get("reason")
        recorded = results["revisions"]
        assert recorded["before"]["code"] == recorded["after"]["code"] != {}  # type: ignore[index]
        identity = results["code"]["arms"]  # type: ignore[index]
        assert identity["tiny@before"]["digest"] == identity["tiny@after"]["digest"] is not None
        ratio = cells(results)["tiny@after"]["vs_baseline_ratio"]  # type: ignore[index]
        # the plan decides on the latest complete run: neither worked nor regressed
        assert project.plan_decides("same") in ("failed", "inconclusive"), (n, ratio)
        assert project.left_behind() == []


def test_unchanged_code_at_two_revisions_gives_no_verdict(tmp_path: Path) -> None:
    a_and_a(tmp_path, 1)


@pytest.mark.slow
def test_unchanged_code_at_two_revisions_gives_no_verdict_in_20_runs(tmp_path: Path) -> None:
    a_and_a(tmp_path, 20)


def test_a_backend_imported_from_outside_the_repository_is_refused_in_one_line(tmp_path: Path) -> None:
    # example-transpose is installed into a folder of the test session's, outside the project's repository
    spec = {**SPEC, "backends": ["tiny@before", "example-transpose@after"]}
    project = Project(tmp_path, (1, "one"), spec)
    project.propose("outside", later="example-transpose@after")
    before = snapshot(project.project / "attempts")
    done = project.ptreg("run", "outside")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "backend example-transpose@after: its module ptreg_example_backend is imported from " in lines[0]
    assert "outside the repository at " in lines[0] and "cannot be told apart" in lines[0]
    assert snapshot(project.project / "attempts") == before
    assert project.left_behind() == []


def test_consent_covers_the_revisions_by_name_and_a_stranger_is_refused(tmp_path: Path) -> None:
    project = Project(tmp_path, (1, "one"))
    frozen = json.loads(next((project.project / "attempts" / "evaluators").glob("tiny-at-two@*.json")).read_text())
    assert frozen["code"] == {}  # the revisions' code is consented to by name, not by content
    ref = frozen["name"] + "@" + frozen["sha256"][:12]
    shown = project.ptreg("evaluator", "show", ref).stdout
    assert "whatever code the revisions HEAD~1 (before), HEAD (after) of this repository hold" in shown
    project.propose("stranger")
    # another user (another configuration folder) never consented to the revisions' code
    done = project.ptreg("run", "stranger", PTREG_CONFIG_HOME=str(tmp_path / "someone-else"))
    assert done.returncode == 2 and "was not frozen by you" in done.stderr, done.stdout + done.stderr
    assert project.left_behind() == []


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"revisions": {"before": "HEAD~1", "after": "HEAD", "other": "HEAD~2"}}, "revision 'other' is taken by no"),
        ({"revisions": {"before": "HEAD~1"}}, "a backend is taken at revision 'after', which revisions does not name"),
        ({"revisions": {"before": "-p", "after": "HEAD"}}, "is not a plain git revision: starts with '-'"),
        ({"backends": ["tiny@Before"], "baseline": "tiny@Before"}, "String should match pattern"),
        ({"baseline": "tiny"}, "baseline 'tiny' is not one of the backends"),
    ],
)
def test_a_spec_whose_revisions_and_backends_disagree_is_refused(changes: dict[str, object], problem: str) -> None:
    with pytest.raises(UnusableInput) as caught:
        parse_spec({**SPEC, **changes}, "spec.json")
    assert problem in caught.value.message


def test_only_the_worker_of_a_backend_at_a_revision_gets_the_checkout_first_on_its_path() -> None:
    spec = parse_spec(
        evaluator_spec(backends=["naive", "naive@before"], baseline="naive", revisions={"before": "HEAD~1"}), "s"
    )
    assert isinstance(spec, EvaluatorSpec)
    places = Places(None, 0, {}, {"naive@before": Path("/checkout/backends")})
    assert cell_task(spec, "xl", "naive@before", places).import_folder == "/checkout/backends"
    assert cell_task(spec, "xl", "naive", places).import_folder is None
    roles = Roles(reference="naive", peer=None)
    assert parity_task(spec, "naive@before", roles, [], Path("/checkout/backends")).import_folder is not None
    assert parity_task(spec, "naive", roles, []).import_folder is None
    path = ["/usr/lib/python3.11", "/site"]
    plain = json.loads(python_argv("python", "m", path, [], None)[-2])
    taken = json.loads(python_argv("python", "m", path, [], None, ["/checkout/backends"])[-2])
    # the checkout first, and nothing else added
    assert taken == [["/checkout/backends", *plain[0]], ["/checkout/backends", *plain[1]]]


def test_a_worker_refuses_a_backend_at_a_revision_not_imported_from_its_checkout(tmp_path: Path) -> None:
    with pytest.raises(UnusableInput, match="not from the checkout of revision before"):
        create_taken("example-transpose@before", str(tmp_path))
    create_taken("example-transpose", None)  # as installed: no checkout to come from
