"""Concurrent writers: the registry lock serializes every read-modify-write, runs of one
attempt are kept apart, and a lock left by a killed process neither blocks nor goes unsaid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from helpers import (
    PROPOSER,
    complete_record,
    env_without_hooks,
    finish,
    freeze_evaluator,
    patient,
    plan_flags,
    propose_for_run,
    proposer,
    tiny_spec,
    wait_for_timed_steps,
    write_registry,
)
from ptreg.store.directory import load_meta

TINY = tiny_spec("lock-tiny", timed_steps=2, repeats=2)


def ptreg(root: Path, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env_without_hooks(), **env},
    )


def validate(root: Path) -> dict:
    from ptreg.operations.validate import validate_path

    registry, problems = validate_path(root)
    return {
        "attempts": len(registry.attempts),
        "problems": problems,
        "errors": [p for p in problems if p.severity == "error"],
    }


def test_two_processes_creating_50_attempts_each_end_with_100_valid_records(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    plans = [[(f"{who}-{i}", f"#{1000 * n + i}") for i in range(50)] for n, who in enumerate(("alpha", "beta"), 1)]
    writers = [proposer(root, ref, plan) for plan in plans]
    for writer in writers:
        code, out, err = finish(writer)
        assert code == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == [0] * 50, err
    found = validate(root)
    assert not found["errors"], found["errors"]
    assert found["attempts"] == 101
    assert not list(root.glob("*.tmp"))


# A writer process adding terms through the CLI's own entry point, in a loop.
TERM_ADDER = textwrap.dedent("""
    import json, sys
    from ptreg.cli import main

    root, terms = sys.argv[1], json.loads(sys.argv[2])
    codes = []
    for term in terms:
        try:
            main(["-r", root, "vocab", "add", "method", term, "--description", f"The term {term}."])
            codes.append(0)
        except SystemExit as exc:
            codes.append(exc.code or 0)
    print(json.dumps(codes))
""")


def test_two_processes_adding_terms_at_once_keep_every_term_and_one_of_each_shared_one(tmp_path: Path) -> None:
    """Both add 15 terms of their own and the same 5: each own term lands, each shared one is
    added by exactly one of them (the other is refused: a term is never redefined)."""
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    shared = [f"shared-{i}" for i in range(5)]
    plans = [[f"{who}-{i}" for i in range(15)] + shared for who in ("alpha", "beta")]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", TERM_ADDER, str(root), json.dumps(plan)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_without_hooks(),
        )
        for plan in plans
    ]
    codes = []
    for writer in writers:
        code, out, _ = finish(writer)
        assert code == 0
        codes.append(json.loads(out.strip().splitlines()[-1]))
    assert codes[0][:15] == codes[1][:15] == [0] * 15
    for i in range(15, 20):
        assert sorted((codes[0][i], codes[1][i])) == [0, 1], (i, codes)
    methods = load_meta(root).method_vocabulary
    assert {*plans[0], *plans[1]} <= set(methods)
    assert sorted(p.name for p in (root / "vocabulary" / "method").iterdir() if p.name.startswith(".")) == []
    assert not validate(root)["errors"]


def test_the_gate_and_the_write_are_one_step_so_two_writers_cannot_share_an_issue(tmp_path: Path) -> None:
    """Both writers propose 20 attempts under the same 20 tracking issues. One issue scopes one
    lineage, so exactly one of each pair may be admitted; without the lock both would pass the
    gate before either had written."""
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    plans = [[(f"{who}-{i}", f"#{500 + i}") for i in range(20)] for who in ("alpha", "beta")]
    writers = [proposer(root, ref, plan) for plan in plans]
    codes = []
    for writer in writers:
        code, out, err = finish(writer)
        assert code == 0, err
        codes.append(json.loads(out.strip().splitlines()[-1]))
    for i in range(20):
        assert sorted((codes[0][i], codes[1][i])) == [0, 1], (i, codes[0][i], codes[1][i])
    found = validate(root)
    assert found["attempts"] == 21 and not found["errors"]
    assert not [p for p in found["problems"] if p.rule == "tracking-issue-scope"]


def test_two_runs_of_different_attempts_at_once_both_complete(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    propose_for_run(root, ref, "run-left", "#71")
    propose_for_run(root, ref, "run-right", "#72")
    runs = [ptreg(root, "run", "run-left", "--json"), ptreg(root, "run", "run-right", "--json")]
    for process in runs:
        code, out, err = finish(process)
        assert code == 0, err
        assert json.loads(out)["status"] == "complete"
    for attempt_id in ("run-left", "run-right"):
        record = json.loads((root / f"{attempt_id}.json").read_text())
        assert len(record["runs"]) == 1 and record["runs"][0]["status"] == "complete"
    assert not validate(root)["errors"]


def wait_until(condition, failure: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + patient(seconds)
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)


def start_run(tmp_path: Path, attempt_id: str, issue: str, timed_steps: int) -> tuple[Path, subprocess.Popen]:
    """A registry with one proposed attempt, and `ptreg run` of it started and holding its run lock."""
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **{**TINY, "timed_steps": timed_steps})
    propose_for_run(root, ref, attempt_id, issue)
    process = ptreg(root, "run", attempt_id)
    holder = root / f".ptreg-run-{attempt_id}.lock.holder"
    wait_until(holder.exists, f"{holder} did not appear")
    return root, process


def test_a_second_run_of_the_same_attempt_is_refused_while_the_first_goes_on(tmp_path: Path) -> None:
    root, first = start_run(tmp_path, "run-once", "#73", timed_steps=40)
    code, _out, err = finish(ptreg(root, "run", "run-once"))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert f"run-once is already being run by pid {first.pid}" in lines[0] and " run run-once`" in lines[0]
    code, _, err = finish(first)
    assert code == 0, err
    record = json.loads((root / "run-once.json").read_text())
    assert len(record["runs"]) == 1


CONCLUDE = ("--status", "failed", "--deviation", "d", "--lesson", "l", "--next-action", "n", "--failure-reason", "r", "--confidence", "inferred")  # fmt: skip


def test_a_conclusion_is_refused_while_a_run_of_the_attempt_goes_on(tmp_path: Path) -> None:
    """As a second run is: at once, in one line naming the running process, nothing written;
    the run then links to the record it started on, and the conclusion goes through after."""
    from helpers import snapshot

    root, first = start_run(tmp_path, "run-then-conclude", "#76", timed_steps=40)

    def records() -> dict[str, bytes]:
        # the run's own in-progress folder changes as it measures, whatever the conclusion does
        return {path: data for path, data in snapshot(root).items() if "/.running-" not in path}

    before = records()
    code, _out, err = finish(ptreg(root, "conclude", "run-then-conclude", *CONCLUDE))
    assert code == 1 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"run-then-conclude is being run by pid {first.pid}" in lines[0] and " run run-then-conclude`" in lines[0]
    assert "cannot be concluded while its run measures" in lines[0]
    assert records() == before
    code, _, err = finish(first)
    assert code == 0, err
    record = json.loads((root / "run-then-conclude.json").read_text())
    assert record["status"] == "not-tried" and len(record["runs"]) == 1
    code, _, err = finish(ptreg(root, "conclude", "run-then-conclude", *CONCLUDE))
    assert code == 0, err
    assert json.loads((root / "run-then-conclude.json").read_text())["status"] == "failed"


def test_a_lock_or_holder_file_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    """A lock file is opened without following a symlink and never truncated: a name pointing
    at another file neither empties nor locks it."""
    from helpers import snapshot

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    victim = tmp_path / "victim.txt"
    for name in (".ptreg.lock", ".ptreg.lock.holder", ".ptreg-run-seed-record.lock"):
        victim.write_text("keep me\n", encoding="utf-8")
        (root / name).symlink_to(victim)
        before = snapshot(root)
        code, _, err = finish(ptreg(root, "conclude", "seed-record", *CONCLUDE))
        assert code == 2 and "Traceback" not in err, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ptreg: error: {root / name}: is a symlink"), lines
        assert "left alone" in lines[0]
        assert victim.read_text(encoding="utf-8") == "keep me\n"
        assert (root / name).is_symlink() and snapshot(root) == before
        (root / name).unlink()


def test_a_lock_left_by_a_killed_writer_is_reported_and_does_not_block(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    # Kill an import while it holds the lock (step 6: its files are being staged).
    incoming = tmp_path / "in.json"
    incoming.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "attempts": [{"id": "late", "name": "n", "status": "worked", "evidence": "e", "source": "s"}],
            }
        )
    )
    killed = ptreg(root, "import", str(incoming), PTREG_CRASH_AT="6")
    finish(killed)
    assert killed.returncode == -signal.SIGKILL
    assert (root / ".ptreg.lock.holder").exists()
    started = time.monotonic()
    code, out, err = finish(proposer(root, ref, [("after-kill", "#74")]))
    assert code == 0 and json.loads(out.strip().splitlines()[-1]) == [0], err
    assert time.monotonic() - started < 30  # not the lock's 60 s wait
    assert f"the last writer, pid {killed.pid}" in err and "was killed while it held the lock" in err
    assert "ptreg repair" in err
    assert not (root / ".ptreg.lock.holder").exists()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ptreg.store.locks import registry_lock

    with registry_lock(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(60)
""")


def test_a_busy_lock_names_its_holder_and_what_to_do(tmp_path: Path) -> None:
    from helpers import snapshot

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True, env=env_without_hooks()
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(root)
        code, _, err = finish(
            ptreg(
                root,
                "conclude",
                "seed-record",
                "--status",
                "failed",
                "--lesson",
                "l",
                "--next-action",
                "n",
                "--failure-reason",
                "r",
                "--confidence",
                "inferred",
                PTREG_LOCK_TIMEOUT="1",
            )
        )
        assert code == 1 and "Traceback" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1
        assert f"is being written by pid {holder.pid}" in lines[0] and "Retry when it has finished" in lines[0]
        assert snapshot(root) == before
    finally:
        holder.kill()
        holder.wait()
    # Killed, its lock is gone at once: the same command now goes through.
    code, _, err = finish(
        ptreg(root, "conclude", "seed-record", "--status", "worked", "--lesson", "l", "--next-action", "n")
    )
    assert ref and code in (0, 1) and "is being written by" not in err


def test_a_run_killed_mid_measurement_leaves_no_lock_that_stops_the_next(tmp_path: Path) -> None:
    root, first = start_run(tmp_path, "run-killed", "#75", timed_steps=2000)
    time.sleep(1)
    first.kill()  # SIGKILL: no handler runs, nothing is written
    finish(first)
    # no run folder: only the killed run's in-progress folder, which `ptreg runs` shows as gone
    runs = root / "runs" / "run-killed"
    assert not runs.exists() or all(p.name.startswith(".running-") for p in runs.iterdir())
    second = ptreg(root, "run", "run-killed", "--json")
    holder = root / ".ptreg-run-run-killed.lock.holder"
    # The killed run's holder file is still there; wait until the second run's replaces it
    # (atomically, so it is never read half-written).
    wait_until(lambda: json.loads(holder.read_text()).get("pid") == second.pid, "the second run never took the lock")
    wait_for_timed_steps(root, "run-killed", second)  # into the measurement, with a step to keep
    second.send_signal(signal.SIGINT)  # no need to wait for 2000 steps: stop it, and it writes what it has
    code, out, err = finish(second)
    assert code == 130, err
    assert f"the last run of run-killed, pid {first.pid}" in err and "was killed before it finished" in err
    assert json.loads(out)["status"] == "interrupted"


def test_readers_beside_two_writers_always_answer_and_the_index_ends_current(tmp_path: Path) -> None:
    """Readers update the index too (a changed file is re-read by whoever looks first): readers
    and writers at once never fail, never see fewer attempts than before, and leave an index
    that agrees with the files."""
    from helpers import assert_index_agrees
    from ptreg.store.index import compare_with_files

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    plans = [[(f"{who}-{i}", f"#{1000 * n + i}") for i in range(20)] for n, who in enumerate(("alpha", "beta"), 1)]
    # their output goes to files: a pipe nobody reads while the readers loop would fill and stop them
    logs = [tmp_path / f"writer-{n}.out" for n in range(len(plans))]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", PROPOSER, str(root), ref, json.dumps(plan), plan_flags(root, ref)[1]],
            stdout=out.open("w"),
            stderr=subprocess.STDOUT,
            env=env_without_hooks(),
        )
        for plan, out in zip(plans, logs, strict=True)
    ]
    seen: list[int] = []
    rounds = 0
    while any(w.poll() is None for w in writers) or rounds < 2:
        readers = [ptreg(root, "list", "--json"), ptreg(root, "streaks", "--json")]
        outputs = [r.communicate(timeout=120) for r in readers]
        for reader, (out, err) in zip(readers, outputs, strict=True):
            assert reader.returncode == 0, err
            json.loads(out)
        seen.append(len(json.loads(outputs[0][0])))
        rounds += 1
    for writer, out in zip(writers, logs, strict=True):
        assert writer.wait(timeout=600) == 0, out.read_text()
        assert json.loads(out.read_text().strip().splitlines()[-1]) == [0] * 20
    assert seen == sorted(seen) and seen[0] >= 1 and seen[-1] <= 41, seen
    differences, _ = compare_with_files(root)
    assert differences == [], differences  # the writers' own updates left it current
    assert_index_agrees(root)
    assert len(json.loads(ptreg(root, "list", "--json").communicate(timeout=60)[0])) == 41


# --------------------------------------------------------------------------- threads of one process


def _held_in_a_thread(lock) -> tuple[threading.Thread, threading.Event]:
    """``lock`` (a context manager) taken and held by a thread of its own until the event is set."""
    taken, release = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def hold() -> None:
        try:
            with lock:
                taken.set()
                release.wait(60)
        except BaseException as exc:  # said by the test below, not lost in the thread
            failed.append(exc)
            taken.set()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(60) and not failed, failed
    return thread, release


def test_two_threads_of_one_process_contend_for_the_registry_lock_as_two_processes_do(tmp_path: Path) -> None:
    """The MCP server answers tool calls on threads of one process: a second thread's write
    must wait for the first, never pass for a re-entry of it."""
    from ptreg.errors import LockBusy
    from ptreg.store.locks import registry_lock

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    thread, release = _held_in_a_thread(registry_lock(root))
    try:
        with pytest.raises(LockBusy) as busy, registry_lock(root, timeout=0.3):
            pass
        assert f"is being written by pid {os.getpid()}" in busy.value.message
    finally:
        release.set()
        thread.join()
    with registry_lock(root, timeout=0), registry_lock(root, timeout=0):  # one thread re-enters its own hold
        assert json.loads((root / ".ptreg.lock.holder").read_text())["pid"] == os.getpid()
    assert not (root / ".ptreg.lock.holder").exists()


def test_a_second_thread_is_refused_the_run_lock_a_first_one_holds(tmp_path: Path) -> None:
    from ptreg.errors import CheckFailed
    from ptreg.store.locks import run_in_progress, run_lock

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    assert not run_in_progress(root, "seed-record")
    thread, release = _held_in_a_thread(run_lock(root, "seed-record"))
    try:
        assert run_in_progress(root, "seed-record")
        with pytest.raises(CheckFailed, match="seed-record is already being run by pid"), run_lock(root, "seed-record"):
            pass
        concluding = run_lock(root, "seed-record", "conclude")
        with pytest.raises(CheckFailed, match="cannot be concluded while its run measures"), concluding:
            pass
    finally:
        release.set()
        thread.join()
    assert not run_in_progress(root, "seed-record")


def test_eight_threads_proposing_at_once_leave_every_record_and_a_current_index(tmp_path: Path) -> None:
    """Each thread proposes its own attempts and, with the others, the same tracking issues:
    one issue scopes one lineage, so exactly one proposal per shared issue is admitted; every
    write takes the lock for real, so the index ends as the files are."""
    from helpers import assert_index_agrees
    from ptreg.gate.proposal import propose
    from ptreg.gate.proposal_input import ProposalInput
    from ptreg.store.index import compare_with_files, open_index

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    open_index(root).close()  # an index to keep current
    admitted: dict[str, list[str]] = {}
    failed: list[BaseException] = []

    def proposer_thread(n: int) -> None:
        try:
            propose_all(n)
        except BaseException as exc:
            failed.append(exc)

    worked_if = plan_flags(root, ref)[1]

    def propose_all(n: int) -> None:
        for i in range(4):
            for attempt_id, issue in ((f"t{n}-{i}", f"#{100 * (n + 1) + i}"), (f"t{n}-shared-{i}", f"#9{i}")):
                given = ProposalInput(
                    id=attempt_id, name=attempt_id, family="runtime-perf", kind="runtime-benchmark",
                    objective="training-step-time", methods=["vendor-blas"], question=f"Does plan {attempt_id.replace('-', 'x')} pay off?",
                    evaluator=ref, budget_seconds=600, tracking_issue=issue, worked_if=worked_if,
                )  # fmt: skip
                if propose(root, given).written:
                    admitted.setdefault(issue, []).append(attempt_id)

    threads = [threading.Thread(target=proposer_thread, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed, failed
    assert all(len(admitted[f"#{100 * (n + 1) + i}"]) == 1 for n in range(8) for i in range(4)), admitted
    assert all(len(admitted[f"#9{i}"]) == 1 for i in range(4)), admitted
    found = validate(root)
    assert found["attempts"] == 1 + 32 + 4 and not found["errors"], found["errors"]
    differences, _ = compare_with_files(root)
    assert differences == [], differences
    assert_index_agrees(root)


# --------------------------------------------------------------------------- a run whose end finds the registry busy


def _busy_registry_run(tmp_path: Path, attempt_id: str, issue: str) -> tuple[Path, str]:
    """`ptreg run` of a fresh attempt while another process holds the registry lock past the
    run's wait: the run's folder, kept whole but not linked, and the run's one-line error."""
    from helpers import snapshot

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    propose_for_run(root, ref, attempt_id, issue)
    unlinked = (root / f"{attempt_id}.json").read_bytes()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True, env=env_without_hooks()
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = finish(ptreg(root, "run", attempt_id, PTREG_LOCK_TIMEOUT="1"))
        records = {k: v for k, v in snapshot(root).items() if k.endswith(".json") and "/" not in k}
    finally:
        holder.kill()
        holder.wait()
    assert code == 1 and "Traceback" not in err, err
    [folder] = list((root / "runs" / attempt_id).iterdir())
    error = err.strip().splitlines()[-1]  # after the progress lines a pipe gets
    assert error.startswith(
        f"ptreg: error: {attempt_id} was measured, but {root / '.ptreg.lock'} stayed locked by pid {holder.pid}"
    )
    assert f"It is kept, written whole to {folder}: `ptreg repair` links it once the lock is free" in error
    assert json.loads((folder / "results.json").read_text())["status"] == "complete"
    assert json.loads((folder / "environment.json").read_text())
    assert records[f"{attempt_id}.json"] == unlinked  # nothing linked while the lock was held
    problems = validate(root)["problems"]
    assert [p.rule for p in problems] == ["orphaned-run"], problems
    return root, folder.name


def test_a_run_that_finds_the_registry_busy_at_its_end_keeps_its_run_and_the_next_run_links_it(
    tmp_path: Path,
) -> None:
    root, kept = _busy_registry_run(tmp_path, "run-kept", "#77")
    code, out, err = finish(ptreg(root, "run", "run-kept", "--json"))
    assert code == 0, err
    record = json.loads((root / "run-kept.json").read_text())
    assert [r["run_id"] for r in record["runs"]] == [kept, json.loads(out)["run_id"]]  # the measured one first
    assert len(record["evidence"].splitlines()) == 2
    assert not validate(root)["problems"]


def test_a_run_kept_for_a_busy_registry_is_linked_by_the_conclusion_before_its_verdict(tmp_path: Path) -> None:
    root, kept = _busy_registry_run(tmp_path, "run-then-verdict", "#78")
    code, out, err = finish(ptreg(root, "conclude", "run-then-verdict", *CONCLUDE))
    assert code == 0, err
    assert f"linked run {kept} first" in out
    record = json.loads((root / "run-then-verdict.json").read_text())
    assert record["status"] == "failed" and [r["run_id"] for r in record["runs"]] == [kept]
    assert record["source"] == f"runs/run-then-verdict/{kept}/results.json"
    assert not validate(root)["problems"]
