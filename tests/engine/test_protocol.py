"""The worker protocol: tasks and events round-trip, another version is refused, stray output
is not taken for an event, a real worker answers a bad task or order with one error event, and
a warm cell worker times exactly the repeats it is asked for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from ptreg.engine.protocol import (
    PROTOCOL_VERSION,
    CellTask,
    Done,
    Failed,
    ParityDone,
    ParityTask,
    Progress,
    Ready,
    RepeatDone,
    RunRepeat,
    Sample,
    ThreadState,
    Warm,
    decode_event,
    decode_order,
    decode_task,
    encode,
)
from ptreg.records.run_results import KernelSample, ParityOutcome, StepSample

CELL = CellTask(
    backend="naive",
    workload="tinygpt-train",
    config="tiny",
    warmup_steps=1,
    timed_steps=2,
    seed=0,
    threads=1,
)
PARITY = ParityTask(backend="numba", reference="naive", shapes=[(1, 2, 3)], rtol=1e-4, atol=1e-6, seed=0, threads=2)


@pytest.mark.parametrize("task", [CELL, PARITY])
def test_a_task_round_trips_as_one_line(task: CellTask | ParityTask) -> None:
    line = encode(task)
    assert line.endswith("\n") and line.count("\n") == 1
    assert decode_task(line) == task
    assert json.loads(line)["protocol_version"] == PROTOCOL_VERSION


def test_a_task_of_another_version_or_kind_is_refused() -> None:
    raw = json.loads(encode(CELL))
    with pytest.raises(ValidationError):
        decode_task(json.dumps({**raw, "protocol_version": PROTOCOL_VERSION + 1}))
    with pytest.raises(ValidationError):
        decode_task(json.dumps({**raw, "kind": "train"}))
    with pytest.raises(ValidationError):
        decode_task(json.dumps({**raw, "surprise": 1}))


@pytest.mark.parametrize(
    "event",
    [
        Ready(pid=12, threads=ThreadState(requested=1, backend=1, pools=[{"user_api": "blas", "num_threads": 1}])),
        Progress(phase="timed", done=3, total=9),
        Sample(sample=StepSample(repeat=0, step=1, seconds=0.01, kernel_seconds={"forward": 0.001}, loss=5.5)),
        Sample(sample=KernelSample(repeat=2, layer="qkv", kernel="backward_db", calls=3, seconds_per_call=1e-4)),
        ParityDone(result=ParityOutcome(backend="naive", passed=True, summary="naive: parity passed", checks=[])),
        Done(runtime={"numba_threads": 2}),
        Done(runtime=None),
        Warm(),
        RepeatDone(repeat=3),
        Failed(message="backend 'x' failed to start"),
    ],
)
def test_every_event_round_trips(event: object) -> None:
    assert decode_event(encode(event)) == event  # type: ignore[arg-type]


def test_a_sample_keeps_its_kind() -> None:
    step = decode_event(encode(Sample(sample=StepSample(repeat=0, step=0, seconds=1.0, kernel_seconds={}, loss=1.0))))
    kernel = decode_event(
        encode(Sample(sample=KernelSample(repeat=0, layer="fc", kernel="forward", calls=1, seconds_per_call=1.0)))
    )
    assert isinstance(step, Sample) and isinstance(step.sample, StepSample)
    assert isinstance(kernel, Sample) and isinstance(kernel.sample, KernelSample)


@pytest.mark.parametrize("line", ["compiling...\n", "[1, 2]\n", '{"event": "gossip"}\n', '{"event": "progress"}\n', ""])
def test_stray_output_is_no_event(line: str) -> None:
    assert decode_event(line) is None


def test_a_worker_answers_a_bad_task_with_one_error_event() -> None:
    bad = json.dumps({**json.loads(encode(CELL)), "protocol_version": 99})
    done = subprocess.run(
        [sys.executable, "-m", "ptreg.engine.worker"], input=bad, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    events = [decode_event(line) for line in done.stdout.splitlines()]
    assert len(events) == 1 and isinstance(events[0], Failed) and "protocol_version" in events[0].message


def worker(stdin: str) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-m", "ptreg.engine.worker"], input=stdin, capture_output=True, text=True, timeout=120
    )
    return [decode_event(line) for line in done.stdout.splitlines()]


def test_a_warm_worker_times_the_repeats_it_is_asked_for_in_the_order_asked() -> None:
    orders = "".join(encode(RunRepeat(repeat=r)) for r in (2, 0))
    events = worker(encode(CELL) + orders)
    kinds = [type(e).__name__ for e in events if not isinstance(e, Progress)]
    assert kinds[:2] == ["Ready", "Warm"] and kinds[-1] == "Done"
    assert [e.repeat for e in events if isinstance(e, RepeatDone)] == [2, 0]
    samples = [e.sample for e in events if isinstance(e, Sample)]
    assert [(s.repeat, s.step) for s in samples] == [(2, 0), (2, 1), (0, 0), (0, 1)]


def test_an_order_that_is_not_one_is_one_error_event() -> None:
    assert decode_order(encode(RunRepeat(repeat=1))) == RunRepeat(repeat=1)
    events = worker(encode(CELL) + '{"order": "train"}\n')
    assert isinstance(events[-1], Failed) and "not an order of worker protocol version" in events[-1].message
