"""`ptreg run --detach` in the library: a run that cannot start frees its id; with `--executor
ray`, the run submitted through Ray's Job Submission API, and `ptreg runs` asking Ray after the
job, against a fake of Ray's client (tests/engine/test_ray_job.py runs a real head)."""

from __future__ import annotations

import json
import shlex
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import complete_record, freeze_evaluator, propose_for_run, tiny_spec, write_registry
from ptreg.errors import PtregError
from ptreg.operations.detaching import submit_run
from ptreg.operations.listing_runs import list_runs
from ptreg.store.locks import run_lock
from ptreg.store.progress import JOB_FILE


class FakeClient:
    """What a test needs of ``JobSubmissionClient``: the jobs submitted, and their states."""

    def __init__(self, address: str | None, refuse: bool = False) -> None:
        self.address, self.refuse = address, refuse
        self.jobs: dict[str, dict[str, Any]] = {}
        self.states: dict[str, str] = {}

    def submit_job(self, *, entrypoint: str, submission_id: str | None = None, metadata: Any = None) -> str:
        if self.refuse:
            raise RuntimeError("Request failed with status code 500: job already exists\nmore")
        assert submission_id is not None
        self.jobs[submission_id] = {"entrypoint": entrypoint, "metadata": metadata}
        self.states[submission_id] = "RUNNING"
        return submission_id

    def get_job_status(self, job_id: str) -> Any:
        return self.states[job_id]


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    root = write_registry(tmp_path / "attempts", [complete_record("seed-record")])
    propose_for_run(root, freeze_evaluator(root, **tiny_spec("tiny-naive")), "ray-step", "#81")
    return root


def test_a_detached_ray_run_is_a_job_running_ptreg_run_with_its_run_id(registry: Path) -> None:
    client = FakeClient("http://head:8265")
    made: list[str | None] = []

    def make(address: str | None) -> FakeClient:
        made.append(address)
        return client

    done = submit_run(registry, "ray-step", ["--executor", "ray"], "http://head:8265", make, python="/py")
    (job_id,) = client.jobs
    assert made == ["http://head:8265"] and done.job_id == job_id == f"ptreg-ray-step-{done.run_id}"
    command = client.jobs[job_id]["entrypoint"]
    cd, _, run = command.partition(" && exec ")
    assert shlex.split(cd) == ["cd", str(registry.parent.absolute())]  # the project root
    words = shlex.split(run)
    assert words[0] == "/py" and words[words.index("-m") + 1] == "ptreg"
    assert words[words.index("run") :] == ["run", "ray-step", "--run-id", done.run_id, "--executor", "ray"]
    assert client.jobs[job_id]["metadata"] == {"ptreg_attempt": "ray-step", "ptreg_run": done.run_id}
    assert json.loads((done.folder / JOB_FILE).read_text())["job_id"] == job_id
    assert done.folder.name == f".running-{done.run_id}"

    (listed,) = list_runs(registry, make)
    assert listed.job == {"job_id": job_id, "address": "http://head:8265", "state": "RUNNING"}
    assert listed.state == "running"  # no progress.json here: the job runs where this machine cannot see
    client.states[job_id] = "FAILED"
    (listed,) = list_runs(registry, make)
    assert listed.state == "process gone" and listed.job is not None and listed.job["state"] == "FAILED"


def test_ray_unreachable_leaves_the_state_unknown_and_a_refused_job_leaves_nothing(registry: Path) -> None:
    def gone(address: str | None) -> FakeClient:
        raise ConnectionError("no dashboard")

    with pytest.raises(PtregError, match=r"^--address http://h:1: Ray did not take the job: RuntimeError: .*exists$"):
        submit_run(registry, "ray-step", [], "http://h:1", lambda a: FakeClient(a, refuse=True))
    assert not list(registry.joinpath("runs").rglob(".running-*"))  # the id is free again

    done = submit_run(registry, "ray-step", [], None, FakeClient)
    (listed,) = list_runs(registry, gone)
    assert listed.job == {"job_id": done.job_id, "address": "", "state": "unknown"}
    assert listed.state == "process gone"


def test_the_gate_refuses_before_anything_is_submitted(registry: Path) -> None:
    client = FakeClient(None)
    with pytest.raises(PtregError, match="seed-record is concluded"):
        submit_run(registry, "seed-record", [], None, lambda a: client)
    held, done = threading.Event(), threading.Event()

    def hold() -> None:  # another run of it, in another thread: the lock is each thread's own
        with run_lock(registry, "ray-step"):
            held.set()
            done.wait(30)

    other = threading.Thread(target=hold)
    other.start()
    held.wait(30)
    try:
        with pytest.raises(PtregError, match="already being run"):
            submit_run(registry, "ray-step", [], None, lambda a: client)
    finally:
        done.set()
        other.join()
    assert client.jobs == {} and not list(registry.joinpath("runs").rglob(".running-*"))


def test_a_detached_run_that_cannot_start_leaves_its_id_free(registry: Path, tmp_path: Path) -> None:
    from ptreg.operations.detaching import detach_run

    with pytest.raises(FileNotFoundError):
        detach_run(registry, "ray-step", [], python=str(tmp_path / "no-python"))
    assert not list(registry.joinpath("runs").rglob(".running-*"))
