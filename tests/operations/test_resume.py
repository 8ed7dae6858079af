"""`ptreg run ID --resume`: a run stopped by SIGTERM, or lost with a SIGKILLed ptreg, is
continued by a new run that carries the rounds measured whole and measures only the rest, so that
every (arm, round) is in the continuation exactly once, the kept ones as they were measured."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import complete_record, env_without_hooks, patient, propose_for_run, snapshot, write_registry

ROUNDS = 4
# Each repeat sleeps a little and reports a score that depends on its arm and seed only, so a
# round measured twice would show as a sample twice, and a kept one changed as another value.
ARM = (
    "import json, os, sys, time\n"
    "time.sleep(0.15)\n"
    "score = int(sys.argv[1]) * 100 + int(os.environ['PTREG_SEED'])\n"
    "open(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': score}) + '\\n')\n"
)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The project of each ``mark``, made once (a freeze and a proposal are two process starts)
    for the tests to copy: nothing in it names the folder it is in."""
    projects: dict[str, Path] = {}

    def project_of(mark: str) -> Path:
        if mark not in projects:
            projects[mark] = make_project(tmp_path_factory.mktemp("project"), mark)[0]
        return projects[mark]

    return project_of


def project_with_attempt(tmp_path: Path, made: Callable[[str], Path], mark: str = "") -> tuple[Path, Path]:
    """A copy of the project holding an evaluator of arm.py and the attempt `go-on` to run."""
    from ptreg.cli import main

    project = tmp_path / "project"
    shutil.copytree(made(mark), project, symlinks=True)
    root = project / "attempts"
    # the freeze consented in another test's configuration: consent again in this one's
    (evaluator,) = (root / "evaluators").iterdir()
    with contextlib.chdir(project), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["-r", str(root), "evaluator", "trust", evaluator.stem])
        except SystemExit as exited:
            assert not exited.code, exited.code
    return project, root


def make_project(tmp_path: Path, mark: str = "") -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "arm.py").write_text(ARM)
    spec = {
        "name": "resumable",
        "workload": "command",
        "command": [sys.executable, "arm.py", "{n}", *([mark] if mark else [])],
        "arms": {"one": {"n": "1"}, "two": {"n": "2"}},
        "baseline": "one",
        "metrics": {"score": {"better": "higher", "unit": "points"}},
        "repeats": ROUNDS,
        "seed": 0,
        "timeout_seconds": 60,
    }
    (project / "spec.json").write_text(json.dumps(spec))
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    frozen = ptreg(root, project, "evaluator", "freeze", str(project / "spec.json"))
    assert frozen.returncode == 0, frozen.stderr
    propose_for_run(root, "resumable", "go-on", "#46")
    return project, root


def ptreg(root: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptreg", "-r", str(root), *args],
        capture_output=True,
        text=True,
        env=env_without_hooks(),
        cwd=project,
        timeout=300,
    )


def start_run(root: Path, project: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), "run", "go-on"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env_without_hooks(),
        cwd=project,
        start_new_session=True,  # a group of its own, for the test to kill whole
    )


def journal_rounds(root: Path) -> int:
    """Rounds in the journal of the run in progress (0 before there is one)."""
    found = list((root / "runs" / "go-on").glob(".running-*/samples.jsonl"))
    return len(found[0].read_text().splitlines()) - 1 if found else 0


def wait_for_rounds(root: Path, process: subprocess.Popen[str], rounds: int) -> None:
    deadline = time.monotonic() + 120
    while journal_rounds(root) < rounds:
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before it was stopped"
        time.sleep(0.05)


def samples_by_round(results) -> dict[tuple[str, int], tuple[int, float]]:
    """Each (arm, round) of a run, with the seed and score measured for it; a round there twice fails."""
    found: dict[tuple[str, int], tuple[int, float]] = {}
    for cell in results.cells:
        for sample in cell.metric_samples or ():
            key = (cell.backend, sample.repeat)
            assert key not in found, f"{key} is in the run twice"
            found[key] = (sample.seed, sample.values["score"])
    return found


def every_round_once(results) -> None:
    found = samples_by_round(results)
    assert sorted(found) == sorted((arm, r) for arm in ("one", "two") for r in range(ROUNDS))
    for (arm, r), (seed, score) in found.items():
        assert seed == r and score == {"one": 100, "two": 200}[arm] + r


def the_run(root: Path, run_id: str):
    from ptreg.store.runs import read_results

    return read_results(root / "runs" / "go-on" / run_id, root)


def test_sigterm_then_resume_measures_each_round_once(tmp_path: Path, made: Callable[[str], Path]) -> None:
    from ptreg.records.continuation import counted_once
    from ptreg.store.directory import read_attempt
    from ptreg.views.plans import complete_runs

    project, root = project_with_attempt(tmp_path, made)
    process = start_run(root, project)
    wait_for_rounds(root, process, 3)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 143, out
    (first,) = [p.name for p in (root / "runs" / "go-on").iterdir()]  # its in-progress folder is gone
    stopped = the_run(root, first)
    assert stopped.status == "interrupted"
    kept = samples_by_round(stopped)
    assert len(kept) >= 3

    resumed = ptreg(root, project, "run", "go-on", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    run_id = json.loads(resumed.stdout)["run_id"]
    results = the_run(root, run_id)
    assert results.status == "complete" and results.continues == first and results.continues_partial is None
    every_round_once(results)
    found = samples_by_round(results)
    assert {k: found[k] for k in kept} == kept, "the kept rounds are carried as measured"
    assert [r.order_seed for r in results.rounds] == [r.order_seed for r in stopped.rounds]
    assert sorted(p.name for p in (root / "runs" / "go-on").iterdir()) == sorted([first, run_id])

    attempt = read_attempt(root, "go-on")
    assert [r.continues for r in attempt.runs] == [None, first]
    assert [r.run_id for r in counted_once(attempt.runs)] == [run_id], "the continued run is counted no more"
    assert [r.run_id for r in complete_runs(attempt)] == [run_id]
    shown = ptreg(root, project, "show", "go-on").stdout
    assert f"Run {first}: interrupted" in shown and "continued by a later run, which counts in its place" in shown
    assert f"continues run {first} with its rounds measured whole" in shown
    again = ptreg(root, project, "run", "go-on", "--resume")
    assert again.returncode == 2 and "nothing to resume" in again.stderr and len(again.stderr.splitlines()) == 1


def processes_with(mark: str) -> list[int]:
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if mark in " ".join(p.info["cmdline"] or ()):
            found.append(p.info["pid"])
    return found


def test_sigkill_of_ptreg_then_resume_reads_its_journal(tmp_path: Path, made: Callable[[str], Path]) -> None:
    from ptreg.store.rounds_journal import read_journal

    mark = f"ptreg-resume-{uuid.uuid4().hex}"
    project, root = project_with_attempt(tmp_path, made, mark)
    process = start_run(root, project)
    wait_for_rounds(root, process, 3)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    # the workers are told of their parent's death and end their commands' trees with them
    deadline = time.monotonic() + patient(60)
    while processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with(mark), "a process of the killed run outlived it"
    (folder,) = list((root / "runs" / "go-on").iterdir())
    assert folder.name.startswith(".running-")
    journal = read_journal(folder)
    kept = {(line.arm, line.round): (line.samples[0].seed, line.samples[0].values["score"]) for line in journal.rounds}
    assert len(kept) >= 3

    checked = ptreg(root, project, "validate", "--json")
    assert checked.returncode == 0, checked.stdout
    assert "--resume" in checked.stdout, "validate names the lost run as one to resume"

    resumed = ptreg(root, project, "run", "go-on", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    results = the_run(root, json.loads(resumed.stdout)["run_id"])
    assert results.status == "complete"
    assert results.continues is None and results.continues_partial == journal.head.run_id
    every_round_once(results)
    found = samples_by_round(results)
    assert {k: found[k] for k in kept} == kept
    assert [p.name for p in (root / "runs" / "go-on").iterdir()] == [results.run_id], "the journal is gone with it"


def interrupted_in_process(root: Path, project: Path, after_round: int) -> str:
    """A run of go-on interrupted (as SIGTERM would) when round ``after_round`` begins; its id."""
    from ptreg.engine.interruption import Interrupted
    from ptreg.operations.running import run_attempt

    def progress(event) -> None:
        if event.phase == "round" and event.done == after_round:
            raise Interrupted(signal.SIGTERM)

    here = os.getcwd()
    os.chdir(project)
    try:
        done = run_attempt(root, "go-on", ["test"], progress=progress)
    finally:
        os.chdir(here)
    assert done.results.status == "interrupted"
    assert done.results.run_id is not None
    return done.results.run_id


def test_resume_is_refused_when_a_file_the_command_runs_changed(tmp_path: Path, made: Callable[[str], Path]) -> None:
    project, root = project_with_attempt(tmp_path, made)
    interrupted_in_process(root, project, 2)
    (project / "arm.py").write_text(ARM + "# changed\n")
    before = snapshot(root)
    refused = ptreg(root, project, "run", "go-on", "--resume")
    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and "arm.py" in refused.stderr and "--resume" in refused.stderr
    assert snapshot(root) == before, "nothing run or written"


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def lost_run(
    root: Path, project: Path, lines: list[str], pid: int | None = None, started: float = 1.0, evaluator: str = ""
) -> Path:
    """The in-progress folder a killed ptreg would leave, its journal holding ``lines`` after
    a true head."""
    from ptreg.engine.identity import code_identity
    from ptreg.records.run_journal import JournalHead
    from ptreg.store.evaluator_files import evaluator_files

    (path,) = [p for p in evaluator_files(root) if p.name.startswith("resumable@")]
    frozen = json.loads(path.read_text())
    from ptreg.records.evaluator import ArmsSpec

    spec = ArmsSpec.model_validate(frozen["spec"])
    head = JournalHead(
        journal=1,
        run_id="20260101T000000Z",
        attempt="go-on",
        evaluator=evaluator or path.name.removesuffix(".json"),
        order_seed=7,
        pid=pid or dead_pid(),
        process_started=started,
        started_at="2026-01-01T00:00:00Z",
        code=code_identity(spec, root),
    )
    folder = root / "runs" / "go-on" / ".running-20260101T000000Z"
    folder.mkdir(parents=True, mode=0o700)
    (folder / "samples.jsonl").write_text("\n".join([head.model_dump_json(), *lines]) + "\n")
    return folder


def round_line(arm: str, r: int, score: float, **changes: object) -> str:
    sample = {"repeat": r, "seed": r, "values": {"score": score}, "wall_seconds": 0.3}
    return json.dumps({"config": "all", "arm": arm, "round": r, "samples": [sample], **changes})


FORGED = [
    (round_line("three", 0, 300.0), "'three'"),
    (round_line("one", ROUNDS, 1.0), f"round {ROUNDS}"),
    (round_line("one", 0, 100.0), "round 0 of one twice"),
    ('{"config": "all", "arm": "one", "round": 1, "samples": [{"repeat": 2, "seed": 2, "values": {}}]}', "round"),
    (
        '{"config": "all", "arm": "one", "round": 1, "samples": [{"repeat": 1, "seed": 1, "values": {"score": NaN}}]}',
        "line 3",
    ),
]


def test_a_forged_journal_line_is_not_believed(tmp_path: Path, made: Callable[[str], Path]) -> None:
    """An unknown arm, a round beyond the plan, a round twice, a sample filed under another
    round, a number that is not finite: each refuses the resume, naming it, and changes nothing."""
    project, root = project_with_attempt(tmp_path, made)
    for forged, named in FORGED:
        folder = lost_run(root, project, [round_line("one", 0, 100.0), forged, round_line("two", 0, 200.0)])
        before = snapshot(root)
        refused = ptreg(root, project, "run", "go-on", "--resume")
        assert refused.returncode == 2, (forged, refused.stderr)
        assert len(refused.stderr.splitlines()) == 1 and named in refused.stderr, (forged, refused.stderr)
        assert snapshot(root) == before
        shutil.rmtree(folder)


def test_a_torn_last_line_is_measured_again(tmp_path: Path, made: Callable[[str], Path]) -> None:
    project, root = project_with_attempt(tmp_path, made)
    lines = [round_line("one", 0, 100.0), round_line("two", 0, 200.0), round_line("one", 1, 101.0)[:30]]
    lost_run(root, project, lines)
    resumed = ptreg(root, project, "run", "go-on", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    results = the_run(root, json.loads(resumed.stdout)["run_id"])
    assert results.continues_partial == "20260101T000000Z"
    said = json.loads(resumed.stdout)["resumed"]
    assert "carrying 2 round(s)" in said and "samples.jsonl line 4" in said, said
    every_round_once(results)
    assert [r.order_seed for r in results.rounds] == [7]


def test_a_lost_run_whose_process_still_lives_is_not_resumed(tmp_path: Path, made: Callable[[str], Path]) -> None:
    """Its pid with its creation time: a process that is still there may still be measuring."""
    import psutil

    project, root = project_with_attempt(tmp_path, made)
    me = psutil.Process()
    lost_run(root, project, [round_line("one", 0, 100.0)], pid=me.pid, started=me.create_time())
    before = snapshot(root)
    refused = ptreg(root, project, "run", "go-on", "--resume")
    assert refused.returncode == 2 and "still in progress" in refused.stderr, refused.stderr
    assert snapshot(root) == before


def test_a_run_measured_under_another_evaluator_is_not_resumed(tmp_path: Path, made: Callable[[str], Path]) -> None:
    project, root = project_with_attempt(tmp_path, made)
    lost_run(root, project, [round_line("one", 0, 100.0)], evaluator="resumable@000000000000")
    before = snapshot(root)
    refused = ptreg(root, project, "run", "go-on", "--resume")
    assert refused.returncode == 2 and "measured under resumable@000000000000" in refused.stderr, refused.stderr
    assert snapshot(root) == before


def test_code_that_changed_since_the_run_is_named() -> None:
    from ptreg.operations.resuming import code_changed
    from ptreg.records.run_results import CodeIdentity

    before = CodeIdentity(
        ptreg_version="1.0", commit="a" * 40, dirty=True, workload=None, arms={}, repository_code=True
    )
    assert code_changed(before, before.model_copy(update={"dirty": False})) is None  # the run wrote the registry
    said = code_changed(before, before.model_copy(update={"commit": "b" * 40}))
    assert said is not None and "the project's commit changed" in said and "aaaa" in said
    assert "ptreg's version" in (code_changed(before, before.model_copy(update={"ptreg_version": "1.1"})) or "")
    assert code_changed(None, before) == "the code the run measured is unknown"


def test_a_run_stopped_by_its_budget_is_resumed(tmp_path: Path, made: Callable[[str], Path]) -> None:
    """The budget's clock jumps past its end as round 2 begins: the run is budget-exhausted
    with rounds 0 and 1 kept, and its continuation, with the budget counted afresh, completes."""
    from ptreg.operations.running import run_attempt

    project, root = project_with_attempt(tmp_path, made)
    jump = [0.0]

    def progress(event) -> None:
        if event.phase == "round" and event.done == 2:
            jump[0] = 1e6

    here = os.getcwd()
    os.chdir(project)
    try:
        done = run_attempt(root, "go-on", ["test"], progress=progress, clock=lambda: time.monotonic() + jump[0])
    finally:
        os.chdir(here)
    assert done.results.status == "budget-exhausted"
    kept = samples_by_round(done.results)
    assert {r for _, r in kept} == {0, 1}
    resumed = ptreg(root, project, "run", "go-on", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    results = the_run(root, json.loads(resumed.stdout)["run_id"])
    assert results.status == "complete" and results.continues == done.results.run_id
    every_round_once(results)
    assert {k: v for k, v in samples_by_round(results).items() if k in kept} == kept


TRAIN = (
    "import os, sys\n"
    "out = sys.argv[1]\n"
    "os.makedirs(out, exist_ok=True)\n"
    "open(os.path.join(out, 'model.txt'), 'w').write(sys.argv[2])\n"
    "open('trained.log', 'a').write(out + '\\n')\n"
)
EVALUATE = (
    "import json, os, sys, time\n"
    "time.sleep(0.1)\n"
    "score = float(open(os.path.join(sys.argv[1], 'model.txt')).read())\n"
    "open(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': score}) + '\\n')\n"
)


def test_a_resumed_run_reruns_no_finished_once_stage(tmp_path: Path) -> None:
    """Stopped in the middle of seed 0's repeats, the continuation measures seed 0's last repeat
    on the checkpoint its once stage made before, reused (its artifacts still match), not trained again."""
    from ptreg.engine.interruption import Interrupted
    from ptreg.operations.running import run_attempt

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "evaluate.py").write_text(EVALUATE)
    spec = {
        "name": "staged",
        "workload": "command",
        "stages": [
            {
                "name": "train",
                "command": [sys.executable, "train.py", "out/{arm}-{seed}", "{n}"],
                "outputs": ["out/{arm}-{seed}"],
                "repeat": "once",
            },
            {"name": "evaluate", "command": [sys.executable, "evaluate.py", "out/{arm}-{seed}"], "repeat": "each"},
        ],
        "arms": {"one": {"n": "1"}, "two": {"n": "2"}},
        "baseline": "one",
        "metrics": {"score": {"better": "higher", "unit": "points"}},
        "seed": 0,
        "seeds": [0, 1],
        "repeats": 2,
        "timeout_seconds": 60,
    }
    (project / "spec.json").write_text(json.dumps(spec))
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    frozen = ptreg(root, project, "evaluator", "freeze", str(project / "spec.json"))
    assert frozen.returncode == 0, frozen.stderr
    propose_for_run(root, "staged", "go-on", "#46")

    def progress(event) -> None:
        if event.phase == "round" and event.done == 1:
            raise Interrupted(signal.SIGTERM)

    here = os.getcwd()
    os.chdir(project)
    try:
        stopped = run_attempt(root, "go-on", ["test"], progress=progress)
    finally:
        os.chdir(here)
    assert stopped.results.status == "interrupted"
    assert sorted(samples_by_round(stopped.results)) == [("one", 0), ("two", 0)]

    resumed = ptreg(root, project, "run", "go-on", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    results = the_run(root, json.loads(resumed.stdout)["run_id"])
    assert results.status == "complete" and results.continues == stopped.results.run_id
    trained = (project / "trained.log").read_text().split()
    assert sorted(trained) == ["out/one-0", "out/one-1", "out/two-0", "out/two-1"], "each arm and seed trained once"
    for cell in results.cells:
        round_1 = next(s for s in cell.metric_samples if s.repeat == 1)
        (train,) = [st for st in round_1.stages if st.name == "train"]
        assert train.reused is True, "seed 0's checkpoint was reused by the continuation"


def test_a_detached_resume_refuses_in_the_foreground_then_continues_in_the_background(
    tmp_path: Path, made: Callable[[str], Path]
) -> None:
    project, root = project_with_attempt(tmp_path, made)
    before = snapshot(root)
    nothing = ptreg(root, project, "run", "go-on", "--detach", "--resume")
    assert nothing.returncode == 2 and "nothing to resume" in nothing.stderr, nothing.stderr
    assert snapshot(root) == before, "refused before anything was reserved"
    first = interrupted_in_process(root, project, 2)
    started = ptreg(root, project, "run", "go-on", "--detach", "--resume", "--json")
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    results_file = root / "runs" / "go-on" / run_id / "results.json"
    deadline = time.monotonic() + 120
    linked = root / "go-on.json"
    while not results_file.exists() or run_id not in linked.read_text():  # written, then linked
        assert time.monotonic() < deadline, "the detached continuation never wrote its run"
        time.sleep(0.2)
    results = the_run(root, run_id)
    assert results.status == "complete" and results.continues == first
    every_round_once(results)
