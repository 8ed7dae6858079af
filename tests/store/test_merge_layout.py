"""Two clones of one registry, merged with plain `git merge` (issue 38, items 1 and 4).

A seeded generator makes random two-clone histories: a registry is initialised and committed,
cloned twice with `git clone`, and each clone does a random interleaving of `new` (through the
gate, as the command line does), `vocab add`, `evaluator freeze`, `run` (a real run of the
smallest workload) and `conclude`; sometimes both clones touch the same item (the same attempt
id, term or evaluator, or the attempt both started from) so that real conflicts arise. Each
clone commits, then A is merged into B and B into A, each in place, with no git configuration
and no merge driver. What must hold:

- each clone changed only the files of the items it wrote: no list, counter or manifest that
  every write touches (the layout's whole point);
- a merge conflicts exactly on the files of the items both clones changed differently, and both
  directions conflict alike;
- after a clean merge, both directions give the same tree, `ptreg validate` finds no error but
  the admissions in conflict (item 2), and the query index (kept from before the merge) answers
  as a full read of the merged files does;
- the admissions in conflict are the same whichever way the merge went, each a pair across the
  two clones, and those of a question or a tracking issue are exactly the pairs
  ``expected_conflicts`` finds from ``History`` (what each clone did: ids, questions, tracking
  issues, lineages, evaluators and their specs, the order of admission).

The default run takes a few histories; ``PTREG_MERGE_HISTORIES=200 python -m pytest -m slow
tests/store/test_merge_layout.py`` runs as many as asked.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers import assert_index_agrees, plan_flags, tiny_spec
from ptreg.cli import main
from ptreg.gate.checks import SIMILAR_QUESTION, similarity
from ptreg.store.directory import load_meta
from ptreg.store.index import open_index

CLONES = ("a", "b")
BASE_ID = "base"
BASE_ISSUE = "#1"
# Small pools, so that the two clones often pick the same one: the same id, term, evaluator
# name, tracking issue or question (one word apart from another clone's is a near-duplicate).
SHARED_IDS = ("shared-1", "shared-2")
TERMS = ("fusion", "unrolling", "tiling-by-hand", "prefetch")
EVALUATOR_NAMES = ("tiny-a", "tiny-b")
ISSUES = ("#2", "#3", "#4", "#5")
SUBJECTS = ("loop", "cache", "kernel", "buffer", "thread")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "ptreg tests",
    "GIT_AUTHOR_EMAIL": "tests@ptreg.invalid",
    "GIT_COMMITTER_NAME": "ptreg tests",
    "GIT_COMMITTER_EMAIL": "tests@ptreg.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


# --------------------------------------------------------------------------- what the clones did


@dataclass
class Admitted:
    """An attempt one clone admitted through the gate."""

    clone: str
    attempt_id: str
    question: str
    tracking_issue: str
    varied_from: str | None
    evaluator: str
    admitted_at: str


@dataclass
class History:
    seed: int
    admitted: list[Admitted] = field(default_factory=list)  # in the order each clone admitted them
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (clone, id, why) the gate refused
    terms: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CLONES})
    evaluators: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: {c: {} for c in CLONES})
    runs: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: {c: [] for c in CLONES})  # (id, run id)
    concluded: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CLONES})
    # every file each clone wrote, relative to the repository
    paths: dict[str, set[str]] = field(default_factory=lambda: {c: set() for c in CLONES})
    ops: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CLONES})

    def lineage_of(self, attempt_id: str, clone: str) -> str:
        """The root of the attempt's lineage as its clone saw it."""
        by_id = {a.attempt_id: a for a in self.admitted if a.clone == clone}
        seen = set()
        while attempt_id in by_id and by_id[attempt_id].varied_from is not None and attempt_id not in seen:
            seen.add(attempt_id)
            attempt_id = by_id[attempt_id].varied_from or attempt_id
        return attempt_id


def expected_conflicts(history: History) -> set[tuple[str, str, str]]:
    """(earlier id, later id, why) of each pair of attempts admitted in different clones that
    the gate would have refused had one clone seen the other: one tracking issue in two
    lineages, or questions alike (``gate/checks.py``'s similarity, every attempt here being of
    one family). Earlier is the first admitted (ties by id). The same id in both clones is a
    git conflict, not an admission to decide again, and is left out."""
    found: set[tuple[str, str, str]] = set()
    ones = [a for a in history.admitted if a.clone == "a"]
    others = [b for b in history.admitted if b.clone == "b"]
    for a in ones:
        for b in others:
            if a.attempt_id == b.attempt_id:
                continue
            first, second = sorted((a, b), key=lambda x: (x.admitted_at, x.attempt_id))
            if a.tracking_issue == b.tracking_issue and history.lineage_of(a.attempt_id, "a") != history.lineage_of(
                b.attempt_id, "b"
            ):
                found.add((first.attempt_id, second.attempt_id, "tracking-issue"))
            if similarity(a.question, b.question) >= SIMILAR_QUESTION:
                found.add((first.attempt_id, second.attempt_id, "question"))
    return found


# --------------------------------------------------------------------------- running things


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=check,
    )


def ptreg(registry: Path, *args: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["-r", str(registry), *args])
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), out.getvalue(), err.getvalue()


def must(registry: Path, *args: str) -> str:
    code, out, err = ptreg(registry, *args)
    assert code == 0, (args, code, out, err)
    return out


def propose(registry: Path, attempt_id: str, question: str, issue: str, evaluator: str, varied_from: str | None):
    args = [
        "new", "--id", attempt_id, "--name", attempt_id, "--family", "runtime-perf", "--kind", "runtime-benchmark",
        "--objective", "training-step-time", "--method", "vendor-blas", "--question", question,
        "--evaluator", evaluator, "--budget-seconds", "600", "--tracking-issue", issue, "--no-input", "--json",
        *plan_flags(registry, evaluator),
    ]  # fmt: skip
    if varied_from is not None:
        args += ["--varied-from", varied_from, "--varied", f"{attempt_id} instead of {varied_from}"]
    return ptreg(registry, *args)


def freeze(registry: Path, work: Path, spec: dict[str, Any]) -> str:
    path = work / f"spec-{len(list(work.glob('spec-*.json')))}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    must(registry, "evaluator", "freeze", str(path))
    return next(p.stem for p in (registry / "evaluators").glob(f"{spec['name']}@*.json") if _spec_of(p) == spec)


def _spec_of(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["spec"]
    return found


def tiny(name: str, timed_steps: int) -> dict[str, Any]:
    return {**tiny_spec(name, timed_steps=timed_steps), "seed": 0}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A committed repository whose registry holds one frozen evaluator and one admitted
    attempt (``base``), which both clones may vary, run and conclude; and the evaluator's ref."""
    top = tmp_path_factory.mktemp("template")
    repo = top / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    registry = repo / "attempts"
    must(registry, "init")
    ref = freeze(registry, top, tiny("tiny-base", 1))
    code, out, err = propose(registry, BASE_ID, "Which kernel bounds the tiny step?", BASE_ISSUE, ref, None)
    assert code == 0, (out, err)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a registry")
    return repo, ref


# --------------------------------------------------------------------------- one history


class Clone:
    def __init__(self, name: str, repo: Path, work: Path, history: History, rng: random.Random, base_ref: str):
        self.name, self.repo, self.work, self.history, self.rng = name, repo, work, history, rng
        self.registry = repo / "attempts"
        self.evaluators = [base_ref]
        self.mine: list[str] = []  # attempts this clone admitted
        self.ran: set[str] = set()
        self.concluded: set[str] = set()
        self.counter = 0

    def wrote(self, *paths: str) -> None:
        self.history.paths[self.name].update(f"attempts/{p}" for p in paths)

    def step(self, runs_left: int) -> bool:
        """One random operation; whether it was a run."""
        kinds = ["new", "new", "vocab", "freeze", "conclude"] + (["run", "run"] if runs_left else [])
        kind = self.rng.choice(kinds)
        self.history.ops[self.name].append(kind)
        getattr(self, kind)()
        return kind == "run"

    def new(self) -> None:
        self.counter += 1
        shared = self.rng.random() < 0.25
        attempt_id = self.rng.choice(SHARED_IDS) if shared else f"{self.name}-{self.counter}"
        if attempt_id in self.mine:
            attempt_id = f"{self.name}-{self.counter}"
        subject = self.rng.choice(SUBJECTS)
        question = f"Does blocking the {subject} make the tiny step faster?"
        if self.rng.random() < 0.3:  # one word apart: a near-duplicate of the same subject's question
            question = question.replace("make", "render")
        issue = self.rng.choice(ISSUES)
        parent = self.rng.choice([None, None, BASE_ID, *self.mine[-2:]])
        evaluator = self.rng.choice(self.evaluators)
        code, out, err = propose(self.registry, attempt_id, question, issue, evaluator, parent)
        if code != 0:  # the gate refused, or the id is taken: nothing written
            self.history.refused.append((self.name, attempt_id, (err or out).strip().splitlines()[-1]))
            return
        record = json.loads((self.registry / f"{attempt_id}.json").read_text(encoding="utf-8"))
        self.history.admitted.append(
            Admitted(self.name, attempt_id, question, issue, parent, evaluator, record["admission"]["admitted_at"])
        )
        self.mine.append(attempt_id)
        self.wrote(f"{attempt_id}.json")

    def vocab(self) -> None:
        term = self.rng.choice(TERMS)
        if term in self.history.terms[self.name]:
            return
        # the same term in both clones, defined alike or not
        description = self.rng.choice(["Fuse two passes into one.", f"Defined in clone {self.name}."])
        must(self.registry, "vocab", "add", "method", term, "--description", description)
        self.history.terms[self.name].append(term)
        self.wrote(f"vocabulary/method/{term}.json")

    def freeze(self) -> None:
        steps = self.rng.choice([1, 2])  # a name is one identity in a registry: the steps are in the name
        spec = tiny(f"{self.rng.choice(EVALUATOR_NAMES)}-{steps}", steps)
        before = set(os.listdir(self.registry / "evaluators"))
        ref = freeze(self.registry, self.work, spec)
        self.history.evaluators[self.name][ref] = spec
        if ref not in self.evaluators:
            self.evaluators.append(ref)
        self.wrote(*(f"evaluators/{n}" for n in set(os.listdir(self.registry / "evaluators")) - before))

    def _open(self) -> list[str]:
        return [i for i in [BASE_ID, *self.mine] if i not in self.concluded]

    def run(self) -> None:
        candidates = [i for i in self._open() if i not in self.ran]
        if not candidates:
            return
        attempt_id = self.rng.choice(candidates)
        folder = self.registry / "runs" / attempt_id
        before = set(os.listdir(folder)) if folder.is_dir() else set()
        code, out, err = ptreg(self.registry, "run", attempt_id)
        assert code == 0, (attempt_id, out, err)
        [run_id] = set(os.listdir(folder)) - before
        self.ran.add(attempt_id)
        self.history.runs[self.name].append((attempt_id, run_id))
        self.wrote(f"{attempt_id}.json", f"runs/{attempt_id}/{run_id}/results.json")
        self.wrote(f"runs/{attempt_id}/{run_id}/environment.json")

    def conclude(self) -> None:
        candidates = [i for i in self._open() if i in self.ran]
        if not candidates:
            return
        attempt_id = self.rng.choice(candidates)
        status = self.rng.choice(["inconclusive", "failed"])
        must(
            self.registry, "conclude", attempt_id, "--status", status, "--evidence", f"Run in clone {self.name}.",
            "--deviation", "The clone's noise outweighs the plan's bar.",
            "--lesson", "One run says little.", "--next-action", "Measure again.",
            "--failure-reason", f"Clone {self.name} saw noise.", "--confidence", "exact",
        )  # fmt: skip
        self.concluded.add(attempt_id)
        self.history.concluded[self.name].append(attempt_id)
        self.wrote(f"{attempt_id}.json")


def changed_files(repo: Path, since: str) -> set[str]:
    out = git(repo, "diff", "--name-only", "--no-renames", since, "HEAD").stdout
    return set(out.split())


def expected_conflict_paths(history: History, clones: dict[str, Path]) -> set[str]:
    """The files both clones wrote, where they differ: the only places a merge may conflict."""
    both = history.paths["a"] & history.paths["b"]
    return {p for p in both if _bytes(clones["a"] / p) != _bytes(clones["b"] / p)}


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def merge(repo: Path, other: str) -> tuple[set[str], str | None]:
    """Merge the ref ``other`` into ``repo``'s HEAD: (conflicting paths, the merged tree or None)."""
    done = git(repo, "merge", "--no-edit", "-q", other, check=False)
    if done.returncode == 0:
        return set(), git(repo, "rev-parse", "HEAD^{tree}").stdout.strip()
    conflicted = set(git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split())
    assert conflicted, done.stdout + done.stderr  # a merge refused for any other reason is a failure
    git(repo, "merge", "--abort")
    return conflicted, None


def flagged(registry: Path) -> set[tuple[str, str, str]]:
    """(earlier id, later id, rule) of every admission `ptreg gate --all` finds in conflict."""
    code, out, err = ptreg(registry, "gate", "--all", "--json")
    report = json.loads(out)
    assert code == (0 if report["holds"] else 1), err
    return {
        (earlier["id"], c["id"], c["rule"].removeprefix("readmission-"))
        for c in report["conflicts"]
        for earlier in c["earlier"]
    }


def check_merged(registry: Path, history: History) -> set[tuple[str, str, str]]:
    """A clean merge: a registry valid but for the admissions in conflict, those `validate`
    names being exactly the ones ``expected_conflicts`` finds, and an index that follows it."""
    code, out, err = ptreg(registry, "validate", "--json")
    report = json.loads(out)
    errors = [p for p in report["problems"] if p["severity"] == "error"]
    assert all(p["rule"].startswith("readmission-") for p in errors), (errors, err)
    assert code == 1 if errors else code in (0, 1), (code, err)  # warnings alone may exit 1
    found = flagged(registry)
    assert {(p["attempt_id"], p["rule"]) for p in errors} == {
        (later, f"readmission-{rule}") for _, later, rule in found
    }
    clone_of = {a.attempt_id: a.clone for a in history.admitted}
    # a clone's own gate decided its own admissions: only a pair across the clones can clash
    assert all(clone_of.get(first) != clone_of.get(second) for first, second, _ in found), found
    shown = {f for f in found if f[2] in ("question", "tracking-issue")}
    assert shown == expected_conflicts(history), (history.seed, sorted(shown), sorted(expected_conflicts(history)))
    ids = {a.attempt_id for a in history.admitted} | {BASE_ID}
    listed = {row["id"] for row in json.loads(must(registry, "list", "--json"))}
    assert listed == ids
    terms = set(history.terms["a"]) | set(history.terms["b"])
    index = open_index(registry)
    try:
        from_index = set(index.vocabularies().method_vocabulary)
    finally:
        index.close()
    assert terms <= from_index == set(load_meta(registry).method_vocabulary)
    assert_index_agrees(registry)
    return found


@dataclass
class Outcome:
    history: History
    conflicts: set[str]
    flagged: set[tuple[str, str, str]]  # the admissions in conflict after a clean merge


def one_history(seed: int, template: tuple[Path, str], top: Path, max_runs: int) -> Outcome:
    rng = random.Random(seed)
    history = History(seed)
    origin, base_ref = template
    work = top / f"h{seed}"
    work.mkdir()
    repos = {}
    for name in CLONES:
        repos[name] = work / name
        subprocess.run(["git", "clone", "-q", str(origin), str(repos[name])], check=True, env={**os.environ, **GIT_ENV})
    start = git(repos["a"], "rev-parse", "HEAD").stdout.strip()
    clones = {name: Clone(name, repos[name], work, history, rng, base_ref) for name in CLONES}
    runs_left = dict.fromkeys(CLONES, max_runs)
    # one interleaving of the two clones' steps, each clone's in its own order
    order = [name for name in CLONES for _ in range(rng.randint(2, 5))]
    rng.shuffle(order)
    for name in order:
        if clones[name].step(runs_left[name]):
            runs_left[name] -= 1
    for name, repo in repos.items():
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"clone {name}")
        changed = changed_files(repo, start)
        # only the files of the items this clone wrote: nothing every write touches
        assert changed <= history.paths[name], (name, sorted(changed - history.paths[name]))
    for name, repo in repos.items():
        other = "b" if name == "a" else "a"
        git(repo, "fetch", "-q", str(repos[other]), f"HEAD:refs/remotes/{other}/main")
    expected = expected_conflict_paths(history, repos)
    into_b, tree_b = merge(repos["b"], "refs/remotes/a/main")
    into_a, tree_a = merge(repos["a"], "refs/remotes/b/main")
    assert into_b == into_a == expected, (seed, history.ops, sorted(into_b), sorted(into_a), sorted(expected))
    flagged: set[tuple[str, str, str]] = set()
    if not expected:
        assert tree_a == tree_b  # the same registry, whichever way the merge went
        # the admissions decided again: the same conflicts whichever way, and exactly those expected
        answers = [check_merged(repo / "attempts", history) for repo in repos.values()]
        assert answers[0] == answers[1], (seed, answers)
        flagged = answers[0]
    shutil.rmtree(work)
    return Outcome(history, expected, flagged)


def run_histories(count: int, template: tuple[Path, str], top: Path, max_runs: int) -> list[Outcome]:
    return [one_history(seed, template, top, max_runs) for seed in range(count)]


def test_two_clones_merge_without_conflict_unless_one_item_changed_in_both(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    outcomes = run_histories(10, template, tmp_path, max_runs=1)
    # the generator makes both kinds of history, or it proves nothing
    assert any(o.conflicts for o in outcomes) and any(not o.conflicts for o in outcomes)
    assert any(o.history.runs["a"] or o.history.runs["b"] for o in outcomes)
    assert any(set(o.history.terms["a"]) and set(o.history.terms["b"]) for o in outcomes)


def _kind(path: str) -> str:
    """The kind of item a conflicting file belongs to."""
    inside = path.removeprefix("attempts/")
    if inside.startswith(("runs/", "evaluators/", "vocabulary/")):
        return inside.split("/", 1)[0]
    return "attempt"


@pytest.mark.slow
def test_many_two_clone_histories(template: tuple[Path, str], tmp_path: Path) -> None:
    count = int(os.environ.get("PTREG_MERGE_HISTORIES", "200"))
    outcomes = run_histories(count, template, tmp_path, max_runs=1)
    conflicted = sum(1 for o in outcomes if o.conflicts)
    pairs = sum(len(expected_conflicts(o.history)) for o in outcomes)
    kinds = Counter(_kind(path) for o in outcomes for path in o.conflicts)
    refused = sum(len(o.history.refused) for o in outcomes)
    admitted = sum(len(o.history.admitted) for o in outcomes)
    rules = Counter(rule for o in outcomes for _, _, rule in o.flagged)
    clean = sum(1 for o in outcomes if not o.conflicts)
    print(
        f"{count} histories, {conflicted} with a conflict (conflicting files: {dict(sorted(kinds.items()))}); "
        f"{admitted} admitted, {refused} refused by a gate; {pairs} admission pairs to re-decide; "
        f"after the {clean} clean merges, admissions in conflict by rule: {dict(sorted(rules.items()))}"
    )
    assert len(outcomes) == count


def test_the_issue_s_two_clones_each_adding_a_term_merge_cleanly(template: tuple[Path, str], tmp_path: Path) -> None:
    """The issue's first case: `fusion` in one clone, `unrolling` in the other."""
    origin, _ = template
    repos = {name: tmp_path / name for name in CLONES}
    for name, term in (("a", "fusion"), ("b", "unrolling")):
        subprocess.run(["git", "clone", "-q", str(origin), str(repos[name])], check=True, env={**os.environ, **GIT_ENV})
        must(repos[name] / "attempts", "vocab", "add", "method", term, "--description", f"{term} by hand.")
        git(repos[name], "add", "-A")
        git(repos[name], "commit", "-q", "-m", term)
    git(repos["b"], "fetch", "-q", str(repos["a"]), "HEAD:refs/remotes/a/main")
    assert merge(repos["b"], "refs/remotes/a/main")[0] == set()
    methods = list(load_meta(repos["b"] / "attempts").method_vocabulary)
    assert methods[-2:] == ["fusion", "unrolling"]  # one order, the same term's place in both: ties by name


def test_expected_conflicts_names_the_issue_s_pair() -> None:
    """The issue's second case, as a history: tile-a and tile-b, one question up to a space and
    one tracking issue, in two lineages."""
    history = History(0)
    question = "Does tiling the matmul help the step?"
    history.admitted += [
        Admitted("a", "tile-a", question, "#5", None, "tiny@0", "2026-01-01T00:00:00Z"),
        Admitted(
            "b", "tile-b", question.replace(" the step", "  the step"), "#5", None, "tiny@0", "2026-01-01T00:00:01Z"
        ),
        Admitted("b", "other", "What else is there to learn?", "#6", None, "tiny@0", "2026-01-01T00:00:02Z"),
    ]
    assert expected_conflicts(history) == {("tile-a", "tile-b", "tracking-issue"), ("tile-a", "tile-b", "question")}
