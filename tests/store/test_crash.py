"""Crash tests: kill ptreg (SIGKILL) at every numbered step of its writes, then check that the
registry validates, that every record it held before is intact byte for byte, that a
change of many files (an import) is there whole or not at all, and that the query index a
kill leaves is current or visibly stale (never wrong under a stamp that still matches), so
that the next command answers as a full read does.

``PTREG_CRASH_AT=N`` (ptreg/faults.py) makes the N-th write step kill the process, so each
trial is exact and repeatable; the slow suite adds kills after random delays, which also land
between the numbered steps. Default suite: every step of new, conclude and freeze, every
third step of two imports, and a sample of a run's. Slow suite: every step of the imports and
of a run, and 150 random kills.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from crash_launcher import run_forked

from helpers import (
    assert_index_agrees,
    complete_record,
    freeze_evaluator,
    plan_flags,
    registry_with_a_run,
    sample_records,
    tiny_spec,
    write_attempts_file,
    write_registry,
)

TINY = tiny_spec("crash-tiny")
KILLED = -signal.SIGKILL


def ptreg(root: Path, *args: str, crash_at: int | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PTREG_CRASH_AT"}
    if crash_at is not None:
        env["PTREG_CRASH_AT"] = str(crash_at)
    return run_forked(root, list(args), env, timeout)


def start(root: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "PTREG_CRASH_AT"}
    return subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), *args],
        env=env,
        cwd=root.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# An import stamps its records with the second it ran (origin.imported_at): the killed run and
# the control run it is compared with ran at different moments, and nothing else may differ.
_IMPORT_TIME = re.compile(rb'"imported_at": "[0-9T:Z-]+"')


def record_files(root: Path) -> dict[str, bytes]:
    """Every file that is part of the record: attempts, registry.json, evaluators, run folders
    (the time an import was made blanked, so that two runs of one import compare equal)."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_file() and not any(part.startswith(".") for part in Path(name).parts):
            found[name] = _IMPORT_TIME.sub(b'"imported_at": "..."', path.read_bytes())
    return found


def assert_valid(root: Path) -> list[Any]:
    """`ptreg validate` accepts it (warnings allowed); returns the problems."""
    from ptreg.operations.validate import validate_path

    _, problems = validate_path(root)  # finishes a cut-short import first, as every command does
    errors = [f"{p.location()}: {p.message}" for p in problems if p.severity == "error"]
    assert not errors, errors
    return problems


def assert_repaired(root: Path) -> None:
    """`ptreg repair` puts right what the kill left. In this process: the repair is not what is
    killed, and a second process start per step was half of this module's time."""
    from ptreg.cli import main

    told = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(told):
        try:
            main(["-r", str(root), "repair"])
        except SystemExit as exited:
            assert not exited.code, told.getvalue()
    problems = assert_valid(root)
    assert not [p for p in problems if p.rule in ("orphaned-run", "leftover")], problems
    left = [p for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".tmp-")]
    assert not left, left


def current_index(root: Path) -> None:
    """Bring the copy's index up to date: a copy gives every file a new inode and ctime."""
    from ptreg.store.index import open_index

    open_index(root).close()


def index_after_kill(root: Path) -> bool:
    """Check the index a kill left: every way it differs from the files shows as a file whose
    stamp moved (or a file it lacks or still lists), none as content that differs under a
    matching stamp; then the next reader's index answers as a full read. Whether it was stale."""
    from ptreg.store.index import compare_with_files

    differences, _ = compare_with_files(root)
    assert not [d for d in differences if d.what == "differs"], differences
    assert_index_agrees(root)
    return bool(differences)


def sweep(
    template: Path,
    work: Path,
    args: list[str],
    check: Callable[[Path, int], None],
    points: Iterable[int] | None = None,
    stride: int = 1,
    stale: list[int] | None = None,
) -> int:
    """Kill ``ptreg args`` at each ``stride``-th step in turn until it finishes (or at
    ``points``); check each registry left behind, and its index (the steps at which the index
    was left stale go to ``stale``). Returns the number of kills."""
    kills = 0
    for k in points if points is not None else range(1, 500, stride):
        root = work / f"k{k}" / template.name
        shutil.copytree(template, root, symlinks=True)
        current_index(root)
        done = ptreg(root, *args, crash_at=k)
        if done.returncode != KILLED:
            assert points is None, f"step {k} was never reached: {done.returncode} {done.stderr}"
            assert done.returncode == 0, done.stderr
            assert kills * stride > 3, "too few write steps were found to kill at"
            return kills
        kills += 1
        if index_after_kill(root) and stale is not None:  # before anything else brings it up to date
            stale.append(k)
        check(root, k)
        assert_repaired(root)
        shutil.rmtree(root.parent)
    assert points is not None, "the command never finished"
    return kills


# --------------------------------------------------------------------------- the registry to kill writers in


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A registry with records, a frozen evaluator, and an attempt with one complete run."""
    from ptreg.cli import main

    root = write_registry(tmp_path_factory.mktemp("template") / "reg", sample_records())
    ref = freeze_evaluator(root, **TINY)
    for attempt_id, issue in (("crash-run", "#61"), ("crash-conclude", "#62")):
        args = [
            "-r",
            str(root),
            "new",
            "--id",
            attempt_id,
            "--name",
            attempt_id,
            "--family",
            "runtime-perf",
            "--kind",
            "runtime-benchmark",
            "--objective",
            "training-step-time",
            "--method",
            "vendor-blas",
            "--question",
            f"What does {attempt_id} cost?",
            "--evaluator",
            ref,
            "--budget-seconds",
            "600",
            "--tracking-issue",
            issue,
            *plan_flags(root, ref),
            "--no-input",
        ]
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert not exited.value.code
    with pytest.raises(SystemExit) as exited:
        main(["-r", str(root), "run", "crash-conclude"])
    assert exited.value.code == 0
    assert (root / ".ptreg-index.sqlite").exists()  # each kill below starts from a current index
    return root


@pytest.fixture(scope="module")
def incoming(tmp_path_factory) -> Path:
    """An attempts.json of eight new records and two that the template already holds."""
    records = [complete_record(f"imported-{i}") for i in range(8)]
    records += [
        complete_record("harness-fix", lesson="Replaced by the import."),
        complete_record("register-blocked", lesson="Replaced too."),
    ]
    return write_attempts_file(tmp_path_factory.mktemp("incoming") / "attempts.json", records)


def expected_after(template: Path, work: Path, args: list[str]) -> dict[str, bytes]:
    root = work / "control" / template.name
    shutil.copytree(template, root, symlinks=True)
    done = ptreg(root, *args)
    assert done.returncode == 0, done.stderr
    return record_files(root)


def every_file_old_or_new(before: dict[str, bytes], after: dict[str, bytes], now: dict[str, bytes]) -> set[str]:
    """Assert each record file holds its old bytes or its new ones; return those holding new."""
    changed = set()
    for name in set(before) | set(after) | set(now):
        assert now.get(name) in (before.get(name), after.get(name)), f"{name} is neither its old nor its new content"
        if now.get(name) != before.get(name):
            changed.add(name)
    return changed


# --------------------------------------------------------------------------- import: all or nothing


STRIDES = [pytest.param(3, id="every-3rd-step"), pytest.param(1, id="every-step", marks=pytest.mark.slow)]


@pytest.mark.parametrize("stride", STRIDES)
@pytest.mark.parametrize("replace", [False, True], ids=["new-ids", "replace"])
def test_import_killed_at_every_step_lands_whole_or_not_at_all(
    template: Path, incoming: Path, tmp_path: Path, replace: bool, stride: int
) -> None:
    args = ["import", str(incoming)] + (["--replace"] if replace else [])
    if not replace:  # without --replace the clashing ids refuse the whole file; import only the new ones
        records = json.loads(incoming.read_text())["attempts"][:8]
        incoming = write_attempts_file(tmp_path / "new-only.json", records)
        args = ["import", str(incoming)]
    before = record_files(template)
    after = expected_after(template, tmp_path, args)
    imported = set(after) - set(before) | {n for n in before if after.get(n) != before[n]}
    assert len(imported) == (10 if replace else 8)

    def check(root: Path, k: int) -> None:
        assert_valid(root)
        changed = every_file_old_or_new(before, after, record_files(root))
        assert changed in (set(), imported), f"killed at step {k}: {len(changed)} of {len(imported)} files landed"

    assert sweep(template, tmp_path, args, check, stride=stride) >= 30 // stride


def test_bundle_import_killed_at_every_step_lands_whole_or_not_at_all(template: Path, tmp_path: Path) -> None:
    """A bundle brings records, a frozen evaluator and a run folder: all of them land or none."""
    from ptreg.cli import main

    source = registry_with_a_run(tmp_path / "source")
    bundle = tmp_path / "bundle.tar.gz"
    with pytest.raises(SystemExit) as exited:
        main(["-r", str(source), "export", "--bundle", str(bundle)])
    assert not exited.value.code
    args = ["import", str(bundle)]
    before = record_files(template)
    after = expected_after(template, tmp_path, args)
    imported = set(after) - set(before) | {n for n in before if after.get(n) != before[n]}
    assert any(n.startswith("evaluators/") for n in imported) and any(n.startswith("runs/") for n in imported)

    def check(root: Path, k: int) -> None:
        assert_valid(root)
        changed = every_file_old_or_new(before, after, record_files(root))
        assert changed in (set(), imported), f"killed at step {k}: {len(changed)} of {len(imported)} files landed"

    assert sweep(template, tmp_path, args, check) >= len(imported)


# --------------------------------------------------------------------------- single-record writes


def test_conclude_killed_at_every_step_leaves_the_old_record_or_the_new(template: Path, tmp_path: Path) -> None:
    args = ["conclude", "crash-conclude", "--status", "worked", "--lesson", "It ran.", "--next-action", "Keep it."]
    before = record_files(template)
    after = expected_after(template, tmp_path, args)
    assert set(after) == set(before)

    def check(root: Path, k: int) -> None:
        assert_valid(root)
        assert every_file_old_or_new(before, after, record_files(root)) <= {"crash-conclude.json"}
        if k in stale:  # the record written, its index update killed: the next command sees the new one
            from ptreg.store.index import open_index

            assert json.loads((root / "crash-conclude.json").read_text())["status"] == "worked"
            index = open_index(root)
            try:
                summary = index.summary("crash-conclude")
                assert summary is not None and summary.status == "worked"
            finally:
                index.close()

    stale: list[int] = []
    sweep(template, tmp_path, args, check, stale=stale)
    # the kills between the record's rename and the index's commit left a stale index, which the
    # next command detected (index_after_kill) and answered from the new record
    assert stale, "no kill landed between the record and the index update"


def test_freeze_killed_at_every_step_leaves_no_evaluator_or_a_whole_one(template: Path, tmp_path: Path) -> None:
    from helpers import evaluator_spec

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(evaluator_spec(name="crash-freeze")), encoding="utf-8")
    args = ["evaluator", "freeze", str(spec)]
    before = record_files(template)
    after = expected_after(template, tmp_path, args)

    def check(root: Path, k: int) -> None:
        assert_valid(root)
        changed = every_file_old_or_new(before, after, record_files(root))
        assert len(changed) <= 1 and all(n.startswith("evaluators/crash-freeze@") for n in changed)

    sweep(template, tmp_path, args, check)


def test_new_killed_at_every_step_leaves_no_record_or_a_whole_admitted_one(template: Path, tmp_path: Path) -> None:
    ref = next((template / "evaluators").iterdir()).stem
    args = [
        "new",
        "--id",
        "crash-new",
        "--name",
        "Crash new",
        "--family",
        "runtime-perf",
        "--kind",
        "runtime-benchmark",
        "--objective",
        "training-step-time",
        "--method",
        "vendor-blas",
        "--question",
        "Does a kill lose it?",
        "--evaluator",
        ref,
        "--budget-seconds",
        "600",
        "--tracking-issue",
        "#63",
        *plan_flags(template, ref),
        "--no-input",
    ]
    before = record_files(template)

    def check(root: Path, k: int) -> None:
        assert_valid(root)
        now = record_files(root)
        assert {n for n in now if now[n] != before.get(n)} <= {"crash-new.json"}
        if "crash-new.json" in now:
            record = json.loads(now["crash-new.json"])
            assert record["status"] == "not-tried" and record["admission"]["checks"]

    sweep(template, tmp_path, args, check)


# --------------------------------------------------------------------------- a run: folder first, then the link


def _check_run(template: Path) -> Callable[[Path, int], None]:
    before = record_files(template)
    runs_before = (
        {p.name for p in (template / "runs" / "crash-run").iterdir()}
        if (template / "runs" / "crash-run").exists()
        else set()
    )

    def check(root: Path, k: int) -> None:
        problems = assert_valid(root)
        now = record_files(root)
        changed = {n for n in now if now[n] != before.get(n)} | (set(before) - set(now))
        assert all(n == "crash-run.json" or n.startswith("runs/crash-run/") for n in changed), changed
        folder = root / "runs" / "crash-run"
        new_runs = (
            {p.name for p in folder.iterdir() if not p.name.startswith(".")} - runs_before if folder.exists() else set()
        )
        assert len(new_runs) <= 1
        record = json.loads(now["crash-run.json"])
        linked = {r["run_id"] for r in record.get("runs", [])}
        if new_runs and not new_runs <= linked:
            # folder complete, link not written: a warning, and repair links it
            assert [p for p in problems if p.rule == "orphaned-run"], problems
            assert_repaired(root)
            record = json.loads((root / "crash-run.json").read_text())
            assert new_runs <= {r["run_id"] for r in record["runs"]}
        assert linked <= runs_before | new_runs

    return check


def test_run_killed_at_sampled_steps_leaves_a_registry_that_validates(template: Path, tmp_path: Path) -> None:
    # Steps 1-4 take the run lock; the measurement follows; the last steps write and link.
    # A sample here, every step in the slow suite.
    kills = sweep(template, tmp_path, ["run", "crash-run"], _check_run(template), points=[2, 9, 13, 17, 21])
    assert kills == 5


@pytest.mark.slow
def test_run_killed_at_every_step_leaves_a_registry_that_validates(template: Path, tmp_path: Path) -> None:
    assert sweep(template, tmp_path, ["run", "crash-run"], _check_run(template)) >= 15


# --------------------------------------------------------------------------- kills after random delays


@pytest.mark.slow
def test_150_kills_after_random_delays_never_lose_a_record(template: Path, incoming: Path, tmp_path: Path) -> None:
    """Kills that land anywhere, also inside a write system call, not only at numbered steps."""
    rng = random.Random(6)
    big = write_attempts_file(tmp_path / "big.json", [complete_record(f"bulk-{i}") for i in range(300)])
    before = record_files(template)
    after = expected_after(template, tmp_path, ["import", str(big)])
    imported = set(after) - set(before)
    outcomes = {"none": 0, "all": 0}
    for trial in range(150):
        root = tmp_path / f"r{trial}" / template.name
        shutil.copytree(template, root, symlinks=True)
        process = start(root, "import", str(big))
        time.sleep(rng.uniform(0.2, 2.5))  # start-up is ~0.4 s; the import's writes follow
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert_valid(root)
        changed = every_file_old_or_new(before, after, record_files(root))
        assert changed in (set(), imported), f"trial {trial}: {len(changed)} of {len(imported)} landed"
        outcomes["all" if changed else "none"] += 1
        assert_repaired(root)
        shutil.rmtree(root.parent)
    assert outcomes["none"] and outcomes["all"], outcomes  # the kills did land before and after the commit
