"""A run submitted to a Ray cluster as a job (``ptreg run --detach --executor ray``), through Ray's
Job Submission API: the cluster runs it, so the client that submitted it may leave.

The job's entrypoint is ``python -m ptreg run ...`` in the project root, run on the head node,
which must see the registry at the same path (the machine itself, or a shared file system):
the run writes its run folder there, as any run does, and spreads its cells over the cluster
from inside the job. Ray is imported here only inside the functions, and this module only for
a detached Ray run or for `ptreg runs` asking after a job.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import UnusableInput

# The states of Ray's JobStatus that end a job: its run process is gone, whatever it wrote.
FINISHED = ("SUCCEEDED", "FAILED", "STOPPED")


class JobClient(Protocol):
    """What ptreg asks of Ray's ``JobSubmissionClient`` (a test gives a fake one)."""

    def submit_job(self, *, entrypoint: str, submission_id: str | None = ..., metadata: Any = ...) -> str: ...

    def get_job_status(self, job_id: str) -> Any: ...


def job_client(address: str | None) -> JobClient:
    """Ray's client of the cluster's Job API at ``address`` (its dashboard, http://HOST:8265);
    None: where Ray finds it ($RAY_API_SERVER_ADDRESS, $RAY_ADDRESS, the cluster started here)."""
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:
        raise UnusableInput(
            f"--executor ray needs Ray, which is not installed here ({exc}): pip install 'ptreg[ray]'"
        ) from None
    try:
        client: JobClient = JobSubmissionClient(address)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError or ValueError here
        raise UnusableInput(f"{_where(address)}: cannot reach the Ray cluster's Job API: {_first_line(exc)}") from None
    return client


def entrypoint(project: Path, argv: Sequence[str]) -> str:
    """The job's shell command: ``argv`` run in the project root, each word quoted."""
    return f"cd {shlex.quote(str(project))} && exec {shlex.join(argv)}"


def submit(
    address: str | None,
    command: str,
    submission_id: str,
    metadata: Mapping[str, str],
    make_client: Callable[[str | None], JobClient] = job_client,
) -> str:
    """Submit ``command`` as a job named ``submission_id``; its job id, or UnusableInput in one line."""
    client = make_client(address)
    try:
        return str(client.submit_job(entrypoint=command, submission_id=submission_id, metadata=dict(metadata)))
    except Exception as exc:  # the SDK's RuntimeError for a refused submission, or a lost connection
        raise UnusableInput(f"{_where(address)}: Ray did not take the job: {_first_line(exc)}") from None


def job_state(
    address: str | None, job_id: str, make_client: Callable[[str | None], JobClient] = job_client
) -> str | None:
    """The job's state as Ray reports it (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED), or None
    when Ray cannot be asked: a state not known is not guessed."""
    try:
        status = make_client(address).get_job_status(job_id)
    except Exception:  # no Ray here, the cluster gone, the job unknown to it
        return None
    value = getattr(status, "value", status)
    return value if isinstance(value, str) and value.isalpha() and len(value) <= 20 else None


def _where(address: str | None) -> str:
    return f"--address {address}" if address else "the Ray cluster ($RAY_ADDRESS, or the one started here)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__
