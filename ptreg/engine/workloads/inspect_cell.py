"""The worker's side of the ``inspect`` workload: Inspect imported, its task run or its log read,
and every sample's scores turned into ``SampleScore``s (``evaluations.py``).

Inspect keeps traces, caches and a view state in the user's data and cache folders, reads a
``.env`` from the working directory upward, and calls a telemetry hook when one is configured:
in the worker, its folders are a scratch folder of the cell's own (removed when the worker
ends), the evaluation runs with that folder as its working directory, and the telemetry and key
override hooks are unset. Its console display is off and whatever it prints goes to stderr,
since stdout carries the worker's events.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import math
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import PtregError
from ...records.evaluator import ArmsSpec, MetricDeclaration
from ...records.run_results import MetricSample
from ...text import shorten
from ..protocol import CellTask
from .base import CellRun, Record, ReportProgress
from .evaluations import EvaluationError, SampleScore, metric_name, repeat_sample
from .inspect_spec import GENERATE_SETTINGS, MODEL, USAGE, logs_of, task_file

# Variables that would send Inspect's logs and usage to a provider's hook, or rewrite API keys.
HOOK_VARIABLES = ("INSPECT_TELEMETRY", "INSPECT_API_KEY_OVERRIDE", "INSPECT_REQUIRED_HOOKS")
MAX_LOG_BYTES = 1 << 30  # a log of a billion bytes is not a log of a few thousand samples
# The strings Inspect's value_to_float maps to a number; any other it would read as 0, silently.
NAMED_VALUES = {"c", "i", "p", "n", "yes", "no", "true", "false"}


@contextlib.contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def quiet_inspect(scratch: Path) -> None:
    """Inspect's own folders under ``scratch``, and no hook sending anything anywhere."""
    for variable, folder in (("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config")):
        (scratch / folder).mkdir(exist_ok=True)
        os.environ[variable] = str(scratch / folder)
    for variable in HOOK_VARIABLES:
        os.environ.pop(variable, None)
    os.environ["INSPECT_DISPLAY"] = "none"


def score_number(value: Any, where: str) -> float:
    """A sample's score as a number, as Inspect's value_to_float maps it (C 1, I 0, P 0.5, N 0,
    yes/no, true/false, numbers); EvaluationError for anything it would turn into 0 unread."""
    from inspect_ai.scorer import value_to_float

    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            if value.lower() not in NAMED_VALUES:
                raise EvaluationError(
                    f"{where}: score {shorten(value, 40)} is not a value Inspect reads as a number"
                ) from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise EvaluationError(f"{where}: score {shorten(repr(value), 40)} is not a number")
    number = value_to_float()(value)
    if not math.isfinite(number):
        raise EvaluationError(f"{where}: score {shorten(repr(value), 40)} is not a finite number")
    return number


def log_scores(log: Any, epoch: int, seed: int) -> tuple[list[SampleScore], dict[str, dict[str, float]]]:
    """The scores of every sample of one epoch of an EvalLog, under ``seed``; and its usage per
    sample (tokens over every model it called, working time), by usage metric and item. A
    sample that recorded no usage has none: it is left out, never counted as zero."""
    task = log.eval.task
    scores: list[SampleScore] = []
    usage: dict[str, dict[str, float]] = {}
    taken = [s for s in log.samples or [] if s.epoch == epoch]
    if not taken:
        raise EvaluationError(f"task {shorten(task, 60)}: no sample of epoch {epoch} in its log")
    for sample in taken:
        sample_id = str(sample.id)
        item = f"{task}/{sample_id}"
        for scorer, score in (sample.scores or {}).items():
            value = score.value
            pairs = [(f"{scorer}_{k}", v) for k, v in value.items()] if isinstance(value, dict) else [(scorer, value)]
            for metric, v in pairs:
                where = f"task {shorten(task, 60)}, sample {shorten(sample_id, 60)}, {shorten(metric, 40)}"
                scores.append(SampleScore(task, sample_id, metric, score_number(v, where), seed))
        used = list((sample.model_usage or {}).values())
        if used:
            usage.setdefault("input_tokens", {})[item] = float(sum(u.input_tokens for u in used))
            usage.setdefault("output_tokens", {})[item] = float(sum(u.output_tokens for u in used))
        if sample.working_time is not None:
            usage.setdefault("working_seconds", {})[item] = float(sample.working_time)
    return scores, usage


def read_log(path: Path) -> Any:
    """An EvalLog through Inspect's reader, from a regular file opened without following a
    symlink and bounded in size; CheckFailed-like one line otherwise."""
    from inspect_ai.log import read_eval_log

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise EvaluationError(f"log {path.name}: cannot be opened ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise EvaluationError(f"log {path.name}: not a regular file")
        if found.st_size > MAX_LOG_BYTES:
            raise EvaluationError(f"log {path.name}: larger than {MAX_LOG_BYTES:,} bytes")
        try:
            return read_eval_log(handle, format="eval")
        except Exception as exc:  # a hostile file: whatever Inspect's reader says of it, in one line
            raise EvaluationError(
                f"log {path.name}: not an Inspect log ({type(exc).__name__}: {shorten(str(exc))})"
            ) from None


class InspectRun(CellRun):
    """One arm: its task evaluated once per round, or its log read epoch by epoch."""

    def __init__(self, task: CellTask, spec: ArmsSpec, declared: dict[str, MetricDeclaration]):
        assert task.root is not None
        self.spec, self.declared, self.arm = spec, declared, task.backend
        self.root = Path(task.root)
        self.scratch = Path(tempfile.mkdtemp(prefix="ptreg-inspect-"))
        atexit.register(shutil.rmtree, self.scratch, True)
        self.log = logs_of(spec).get(self.arm)
        self.task_factory: Any = None

    def warm_up(self, progress: ReportProgress) -> None:
        quiet_inspect(self.scratch)
        if self.log is None:
            named = task_file(str(self.spec.settings["task"]))
            if named is not None:
                self.task_factory = self._load(*named)
        progress("ready", 1, 1)

    def _load(self, relative: str, name: str | None) -> Any:
        """The task function of a task file, imported from its folder as Inspect would (which
        also registers the model APIs the file imports, before any model is resolved)."""
        from inspect_ai import list_tasks

        path = self.root / relative
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        if name is None:
            found = list_tasks(str(path), root_dir=self.root)
            if len(found) != 1:
                raise EvaluationError(f"task file {relative} has {len(found)} tasks: name one (task.py@name)")
            name = found[0].name
        module_spec = importlib.util.spec_from_file_location(f"ptreg_inspect_task_{path.stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise EvaluationError(f"task file {relative}: not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        with _working_directory(path.parent):
            module_spec.loader.exec_module(module)
        factory = getattr(module, name, None)
        if not callable(factory):
            raise EvaluationError(f"task file {relative} has no task {name!r}")
        return factory

    def run_repeat(self, repeat: int, record: Record, progress: ReportProgress) -> None:
        seed = self.spec.round_seed(repeat)
        started = time.monotonic()
        try:
            if self.log is not None:
                log, epoch = read_log(self.root / self.log), repeat + 1
            else:
                log, epoch = self._evaluate(repeat, seed), 1
            if log.status != "success":
                why = log.error.message if log.error is not None else log.status
                raise EvaluationError(f"the evaluation ended {log.status}: {str(why)[:300]}")
            scores, usage = log_scores(log, epoch, seed)
            sample = self._sample(repeat, seed, scores, usage)
        except PtregError as exc:
            sample = MetricSample(repeat=repeat, seed=seed, values={}, problem=exc.message)
        except Exception as exc:  # the task's code, the model's, Inspect's: one line, the repeat failed
            sample = MetricSample(
                repeat=repeat, seed=seed, values={}, problem=f"{type(exc).__name__}: {shorten(str(exc))}"
            )
        wall = time.monotonic() - started
        record(sample.model_copy(update={"wall_seconds": wall}) if wall > 0 and sample.problem is None else sample)
        progress("evaluated", 1, 1)

    def _evaluate(self, repeat: int, seed: int) -> Any:
        """One epoch of the task on this arm's model, logged in the scratch folder and read back."""
        from inspect_ai import eval as evaluate
        from inspect_ai.log import read_eval_log
        from inspect_ai.model import GenerateConfig

        args = dict(self.spec.settings.get("task_args") or {})
        params = self.spec.arms[self.arm]
        # strings of the spec, as `inspect eval --temperature 0.5` gives them: Inspect's GenerateConfig reads them
        given = {name: params[name] for name in GENERATE_SETTINGS if name in params}
        generate: dict[str, Any] = GenerateConfig.model_validate(given).model_dump(exclude_unset=True)
        logs = self.scratch / f"logs-{repeat}"
        with _working_directory(self.scratch), contextlib.redirect_stdout(sys.stderr):
            task = self.task_factory(**args) if self.task_factory is not None else self.spec.settings["task"]
            done = evaluate(
                task,
                model=params[MODEL],
                task_args={} if self.task_factory is not None else args,
                log_dir=str(logs),
                log_format="eval",
                display="none",
                epochs=1,
                seed=seed,
                **generate,
            )
        if len(done) != 1 or not done[0].location:
            raise EvaluationError(f"the evaluation wrote {len(done)} logs, not one")
        try:
            return read_eval_log(done[0].location)
        finally:
            shutil.rmtree(logs, ignore_errors=True)

    def _sample(
        self, repeat: int, seed: int, scores: list[SampleScore], usage: dict[str, dict[str, float]]
    ) -> MetricSample:
        undeclared = sorted({metric_name(s.task, s.metric) for s in scores} - set(self.declared))
        if undeclared:
            raise EvaluationError(
                f"scorer metric {undeclared[0]} is not declared: the spec's metrics say which way each is better"
            )
        found = repeat_sample(repeat, seed, scores, usage_items={m: usage[m] for m in USAGE if usage.get(m)})
        missing = sorted(set(self.declared) - set(found.values) - set(USAGE))
        if missing:
            raise EvaluationError(f"no sample was scored on {missing[0]}, which the spec declares")
        return found
