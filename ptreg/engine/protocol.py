"""The worker protocol: a task in, a stream of events out, each a line of JSON.

This is the wire format between the executor and a worker process, kept as a data model of
its own (as pyperf keeps its worker's): another executor, a process pool or a cluster, speaks
it by sending a task on the worker's stdin and reading events from its stdout. A task names
the protocol version it was written for, and a worker refuses any other.

A parity task is the whole of its stdin. A cell task is its first line: the worker sets up,
warms up and says ``warm``; then each further line asks for one repeat (``RunRepeat``), which
it times and closes with ``repeat-done``. When its stdin ends, it says ``done`` and exits. So
the executor can interleave the repeats of several warm workers, round by round.

Events arrive as the worker produces them and are flushed at once, so that every sample
reaches the executor even if the worker is killed a moment later.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ..records.counting import CountedWorker
from ..records.run_results import KernelSample, MetricSample, ParityOutcome, StageRecord, StepSample

# 3: cells of arms workloads (the spec and the project root in the task)
# 4: no command's process group is announced: the executor kills the worker's whole process tree
# 5: a backend taken at a git revision: the checkout's folder its worker imports it from
PROTOCOL_VERSION: Final = 5
IMPORT_FOLDER = (
    "A backend taken at a git revision: the folder of the revision's checkout its module is imported from, which "
    "the executor puts first on the worker's import path."
)


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ParityTask(_Message):
    """Check one backend's kernels on ``shapes`` before any of it is timed."""

    kind: Literal["parity"] = "parity"
    protocol_version: Literal[5] = PROTOCOL_VERSION
    backend: str
    reference: str | None = Field(description="The backend whose bits an order-preserving one must reproduce.")
    shapes: list[tuple[int, int, int]]
    rtol: float
    atol: float
    seed: int
    threads: int
    op_configs: list[str] = Field(
        default_factory=list, description="The configs whose shapes the ops the backend provides are checked at."
    )
    import_folder: str | None = Field(default=None, description=IMPORT_FOLDER)


class CellTask(_Message):
    """Set up one (backend, config) cell of a workload and warm it up; its repeats of
    ``timed_steps`` are then asked for one at a time."""

    kind: Literal["cell"] = "cell"
    protocol_version: Literal[5] = PROTOCOL_VERSION
    backend: str = Field(description="The backend, or for an arms workload the arm.")
    workload: str
    config: str
    warmup_steps: int
    timed_steps: int
    seed: int
    threads: int | None = Field(description="Null: an arms spec that sets no thread count.")
    spec: dict[str, Any] | None = Field(default=None, description="Arms workloads: the evaluator spec, as frozen.")
    root: str | None = Field(default=None, description="Arms workloads: the project root, where commands run.")
    timer: Literal["wall", "instructions"] = Field(
        default="wall", description="instructions: the worker runs under callgrind and counts each timed region."
    )
    import_folder: str | None = Field(default=None, description=IMPORT_FOLDER)
    reuse_stages: list[StageRecord] | None = Field(
        default=None,
        description="A staged command: once-stage records of earlier samples (a run resumed); a once stage of the same "
        "key whose artifacts still match on disk is not rerun.",
    )


class RunRepeat(_Message):
    """Ask a warm cell worker for one repeat, numbered as its round."""

    order: Literal["repeat"] = "repeat"
    repeat: int = Field(ge=0)


Task = Annotated[ParityTask | CellTask, Field(discriminator="kind")]


class ThreadState(_Message):
    """The threads in effect for a cell: asked for, the backend's own, and every BLAS/OpenMP pool."""

    requested: int | None = Field(description="Null: nothing was asked (an arms spec without threads).")
    backend: int | None = Field(description="What the backend's set_threads said it uses; null when it has none.")
    pools: list[dict[str, Any]]


class Ready(_Message):
    event: Literal["ready"] = "ready"
    pid: int
    threads: ThreadState


class Progress(_Message):
    event: Literal["progress"] = "progress"
    phase: str
    done: int
    total: int
    line: str | None = Field(
        default=None, description="The last line a command printed so far, for a run's progress (shortened)."
    )


class Warm(_Message):
    event: Literal["warm"] = "warm"
    counting: CountedWorker | None = Field(
        default=None, description="A counted worker: the CPU it sees under valgrind, its BLAS kernel, a mark's cost."
    )


class RepeatDone(_Message):
    event: Literal["repeat-done"] = "repeat-done"
    repeat: int


class Sample(_Message):
    event: Literal["sample"] = "sample"
    sample: StepSample | KernelSample | MetricSample


class ParityDone(_Message):
    event: Literal["parity"] = "parity"
    result: ParityOutcome


class Done(_Message):
    event: Literal["done"] = "done"
    runtime: dict[str, Any] | None = Field(description="What the backend's runtime_details() hook reported.")


class Failed(_Message):
    event: Literal["error"] = "error"
    message: str


Event = Annotated[
    Ready | Progress | Warm | Sample | RepeatDone | ParityDone | Done | Failed,
    Field(discriminator="event"),
]
AnyEvent = Ready | Progress | Warm | Sample | RepeatDone | ParityDone | Done | Failed

# Built on first use: only the executor and the worker speak the protocol.
_TASK: TypeAdapter[Task] = TypeAdapter(Task, config=ConfigDict(defer_build=True))
_EVENT: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))


def encode(message: _Message) -> str:
    """One line of the wire format."""
    return message.model_dump_json() + "\n"


def decode_task(text: str) -> ParityTask | CellTask:
    """The task a worker was given; a ValidationError says why it is not one of this version."""
    return _TASK.validate_json(text)


def decode_order(line: str) -> RunRepeat:
    """A warm cell worker's next order; a ValidationError says why it is not one."""
    return RunRepeat.model_validate_json(line)


def decode_event(line: str) -> AnyEvent | None:
    """The event on one line of a worker's output, or None for anything else (a stray print)."""
    try:
        return _EVENT.validate_json(line)
    except ValidationError:
        return None
