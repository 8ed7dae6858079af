"""The ``lm-eval`` workload: EleutherAI's lm-evaluation-harness, each arm a model, every sample
of every task an item, so that two models are compared document by document.

Each repeat runs ``lm_eval.simple_evaluate`` (the harness's own Python API, ``log_samples``
on) in the worker, with the round's seed as every seed it takes; or, where the spec gives
``logs``, reads the ``--log_samples`` files an earlier evaluation wrote, frozen inputs of the
evaluator like any other. Each sample's per-sample metrics become ``SampleScore``s with its
``doc_id`` as the sample id (``evaluations.py`` turns them into items ``<task>/<doc_id>`` of the
metric ``<task>__<metric>``). The evaluator declares every metric it compares; where lm-eval
says which way a metric is better (``higher_is_better``), a declaration that says otherwise is
refused. lm_eval is imported only in the worker: the module is named so as not to shadow it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from ...errors import PtregError, UnusableInput
from ...records.evaluator import AnySpec, ArmsSpec, MetricDeclaration
from ...records.run_results import RESULTS_VERSION, Cell, MetricSample, Roles
from ...store.input_digests import digest_inputs, project_root
from ...text import shorten
from ..backends import Backend
from ..protocol import CellTask
from .arms import ArmsWorkload, arms_spec
from .base import CellRun, Record, ReportProgress
from .command_output import missing_metric
from .evaluations import SampleScore, metric_name, repeat_sample, unpaired
from .lm_eval_samples import read_samples, sample_scores

MODEL, MODEL_ARGS = "model", "model_args"
MAX_TASKS = 256
MAX_TASK_NAME = 200
MAX_FEWSHOT = 1000
MAX_MODULES = 1000  # of include_path, frozen as the code the evaluation runs
# the module a spec's model_file is imported as in the worker: no installed module has it
MODEL_MODULE = "ptreg_lm_eval_models"


def _covered(path: str, inputs: list[str]) -> bool:
    """Whether a path of the spec is one of its frozen inputs, or inside one of its folders."""
    return any(path == i or path.startswith(i.rstrip("/") + "/") for i in inputs)


def _logs(settings: dict[str, Any]) -> dict[str, list[str]] | None:
    """Each arm's log paths, one per round (a single path is a list of one)."""
    logs = settings.get("logs")
    if logs is None:
        return None
    return {arm: [paths] if isinstance(paths, str) else list(paths) for arm, paths in logs.items()}


def _path_problem(field: str, value: Any, inputs: list[str]) -> str | None:
    if not isinstance(value, str) or not value or len(value) > 500:
        return f"{field} must be a path of the project (a string)"
    if value.startswith("/") or any(part in ("", ".", "..") for part in value.split("/")):
        return f"{field} {shorten(value, 80)} must be a relative path without '.', '..' or empty parts"
    if not _covered(value, inputs):
        return f"{field} {shorten(value, 80)} is not among the evaluator's inputs, so its content would not be frozen"
    return None


def _logs_problem(spec: ArmsSpec, logs: Any) -> str | None:
    if not isinstance(logs, dict) or set(logs) != set(spec.arms):
        return "logs must give every arm, and only the arms, its samples file or folder (or a list, one per round)"
    for arm, paths in logs.items():
        taken = [paths] if isinstance(paths, str) else paths
        if not isinstance(taken, list) or len(taken) != spec.rounds:
            return f"logs of arm {arm!r}: one samples file or folder per round, {spec.rounds} of them"
        for path in taken:
            problem = _path_problem(f"logs of arm {arm!r}:", path, spec.inputs)
            if problem is not None:
                return problem
    evaluated = sorted(f for f in ("num_fewshot", "limit", "include_path", "model_file") if f in spec.settings)
    if evaluated:
        return f"{evaluated[0]} says how to evaluate, but logs are read, not evaluated"
    return None


def _tasks_problem(tasks: Any) -> str | None:
    if not isinstance(tasks, list) or not 0 < len(tasks) <= MAX_TASKS:
        return f"tasks must be a list of 1 to {MAX_TASKS} lm-eval task names"
    for task in tasks:
        if not isinstance(task, str) or not 0 < len(task) <= MAX_TASK_NAME or not task.isprintable():
            return f"task {shorten(task, 60)} is not a task name (1 to {MAX_TASK_NAME} printable characters)"
    if len(set(tasks)) != len(tasks):
        return "tasks names a task twice"
    return None


def _evaluation_problem(spec: ArmsSpec) -> str | None:
    settings = spec.settings
    fewshot = settings.get("num_fewshot")
    if fewshot is not None and (
        isinstance(fewshot, bool) or not isinstance(fewshot, int) or not 0 <= fewshot <= MAX_FEWSHOT
    ):
        return f"num_fewshot must be a whole number from 0 to {MAX_FEWSHOT}"
    limit = settings.get("limit")
    if limit is not None:
        whole = isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1
        share = isinstance(limit, float) and 0 < limit < 1
        if not (whole or share):
            return "limit must be a whole number of documents per task, or a fraction between 0 and 1 of them"
    if not isinstance(settings.get("include_defaults", True), bool):
        return "include_defaults must be true or false"
    for field in ("include_path", "model_file"):
        if field in settings:
            problem = _path_problem(field, settings[field], spec.inputs)
            if problem is not None:
                return problem
    if str(settings.get("model_file", ".py")).rsplit(".", 1)[-1] != "py":
        return "model_file must be a Python file (.py)"
    for arm, params in spec.arms.items():
        if not params.get(MODEL):
            return f"arm {arm!r} names no model (lm-eval's --model, e.g. hf)"
    return None


def _modules_below(root: Path, folder: str) -> list[str]:
    """The Python files below a folder of the project, symlinks neither followed nor taken (the
    inputs' digest refuses them), at most MAX_MODULES of them."""
    found: list[str] = []
    for here, folders, names in os.walk(root / folder):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        found += [Path(here, n).relative_to(root).as_posix() for n in sorted(names) if n.endswith(".py")]
        if len(found) > MAX_MODULES:
            raise UnusableInput(f"include_path {folder}: more than {MAX_MODULES:,} Python files")
    return found


def _tasks_logged(tasks: list[str], logged: set[str], where: str) -> str | None:
    """Why a log's samples are not those of the spec's tasks (a task with no samples file, or a
    file of a task the spec does not name), or None."""
    missing = sorted(set(tasks) - logged)
    if missing:
        return f"{where}: no samples of task {missing[0]!r}"
    extra = sorted(logged - set(tasks))
    if extra:
        return f"{where}: samples of task {extra[0]!r}, which tasks does not name"
    return None


class LmEvalRun(CellRun):
    """One arm in its worker: its model evaluated on the tasks once per round, or its logs read."""

    def __init__(self, task: CellTask, spec: ArmsSpec):
        assert task.root is not None
        self.spec, self.arm, self.root = spec, task.backend, Path(task.root)
        self.settings = spec.settings
        self.logs = (_logs(self.settings) or {}).get(self.arm)
        self.manager: Any = None

    def warm_up(self, progress: ReportProgress) -> None:
        # the worker speaks to the executor on stdout: what the harness, a task or a model
        # prints goes to stderr, so that a print without its newline cannot swallow an event
        with contextlib.redirect_stdout(sys.stderr):
            self._set_up()
        progress("ready", 1, 1)

    def _set_up(self) -> None:
        if self.logs is None:
            # lm-eval resolves a task's local data_files against the working directory: the
            # project's, as a command's is
            os.chdir(self.root)
            from lm_eval.tasks import TaskManager

            if "model_file" in self.settings:
                self._import_models(self.root / self.settings["model_file"])
            include = self.settings.get("include_path")
            self.manager = TaskManager(
                include_path=str(self.root / include) if include else None,
                include_defaults=self.settings.get("include_defaults", True),
            )

    def _import_models(self, path: Path) -> None:
        """The project's file of models (``@register_model``), frozen as an input: imported so
        that an arm can name them."""
        if path.is_symlink() or not path.is_file():
            raise PtregError(f"model_file {self.settings['model_file']}: not a regular file")
        found = importlib.util.spec_from_file_location(MODEL_MODULE, path)
        assert found is not None and found.loader is not None
        module = importlib.util.module_from_spec(found)
        sys.modules[MODEL_MODULE] = module
        found.loader.exec_module(module)

    def run_repeat(self, repeat: int, record: Record, progress: ReportProgress) -> None:
        seed = self.spec.round_seed(repeat)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                sample = self._repeat(repeat, seed)
        except PtregError as exc:
            sample = MetricSample(repeat=repeat, seed=seed, values={}, problem=exc.message)
        except Exception as exc:  # the harness's, a task's or a model's failure: this repeat's only
            problem = f"lm_eval raised {type(exc).__name__}: {shorten(str(exc), 200)}"
            sample = MetricSample(repeat=repeat, seed=seed, values={}, problem=problem)
        record(sample)
        progress("evaluated", 1, 1)

    def _repeat(self, repeat: int, seed: int) -> MetricSample:
        wall: float | None = None
        better: dict[tuple[str, str], bool] = {}
        if self.logs is not None:
            scores, corpus = read_samples(self.root, self.logs[repeat], seed)
            problem = _tasks_logged(self.settings["tasks"], {s.task for s in scores}, self.logs[repeat])
            if problem is not None:
                return MetricSample(repeat=repeat, seed=seed, values={}, problem=problem)
        else:
            started = time.perf_counter()
            scores, corpus, better = self._evaluate(seed)
            wall = time.perf_counter() - started
        problem = self._undeclared(scores, corpus, better)
        if problem is not None:
            return MetricSample(repeat=repeat, seed=seed, values={}, problem=problem)
        sample = repeat_sample(repeat, seed, scores)
        declared = self.spec.metrics
        problem = missing_metric({m: v for m, v in sample.values.items() if m in declared}, declared)
        extra = sorted(set(sample.values) - set(declared))
        if extra:
            problem = f"it scored {extra[0]}, which the evaluator does not declare"
        if problem is not None:
            return MetricSample(repeat=repeat, seed=seed, values={}, problem=f"lm-eval: {problem}")
        return sample.model_copy(update={"wall_seconds": wall})

    def _undeclared(
        self, scores: list[SampleScore], corpus: set[tuple[str, str]], better: dict[tuple[str, str], bool]
    ) -> str | None:
        """Why these scores cannot be the declared metrics: a declared one lm-eval only
        aggregates over the corpus, or one declared the other way round from lm-eval's own
        higher_is_better; None when they can."""
        declared = self.spec.metrics
        for task, metric in sorted(corpus):
            name = metric_name(task, metric)
            if name in declared:
                return f"task {task}: {metric} has no per-sample number (lm-eval aggregates it), so {name} cannot be compared by item"
        for (task, metric), higher in sorted(better.items()):
            name = metric_name(task, metric)
            said: MetricDeclaration | None = declared.get(name)
            if said is not None and (said.better == "higher") != higher:
                way = "higher" if higher else "lower"
                return f"task {task}: lm-eval says {way} {metric} is better, and the evaluator declares {name} {said.better}"
        if not scores:
            return "lm-eval scored no sample"
        return None

    def _evaluate(self, seed: int) -> tuple[list[SampleScore], set[tuple[str, str]], dict[tuple[str, str], bool]]:
        import lm_eval

        params = self.spec.arms[self.arm]
        result = lm_eval.simple_evaluate(
            model=params[MODEL],
            model_args=params.get(MODEL_ARGS) or None,
            tasks=list(self.settings["tasks"]),
            num_fewshot=self.settings.get("num_fewshot"),
            limit=self.settings.get("limit"),
            task_manager=self.manager,
            log_samples=True,
            bootstrap_iters=0,  # its stderr intervals: ptreg computes its own, over items and seeds
            random_seed=seed,
            numpy_random_seed=seed,
            torch_random_seed=seed,
            fewshot_random_seed=seed,
        )
        if not isinstance(result, dict) or not isinstance(result.get("samples"), dict):
            raise PtregError("lm-eval returned no per-sample results")
        scores: list[SampleScore] = []
        corpus: set[tuple[str, str]] = set()
        for task, rows in result["samples"].items():
            where = f"task {shorten(str(task), 60)}, sample"
            found, aggregated = sample_scores(str(task), ((f"{where} {n}", r) for n, r in enumerate(rows)), seed)
            scores += found
            corpus |= aggregated
        better = {
            (str(task), str(metric)): bool(higher)
            for task, by_metric in (result.get("higher_is_better") or {}).items()
            for metric, higher in (by_metric or {}).items()
            if isinstance(higher, bool)
        }
        # a filter's metric is named <metric>,<filter>, and is better the same way
        for score in scores:
            base = score.metric.split(",", 1)[0]
            if (score.task, base) in better:
                better.setdefault((score.task, score.metric), better[(score.task, base)])
        return scores, corpus, better


class LmEvalWorkload(ArmsWorkload):
    name = "lm-eval"
    description = (
        "EleutherAI's lm-evaluation-harness: each arm a model (--model, --model_args) on lm-eval tasks, "
        "every sample (doc_id) an item, per task and metric; or the --log_samples files of an earlier evaluation."
    )
    spec_fields: ClassVar[dict[str, str]] = {
        "tasks": "lm-eval task or group names, as --tasks takes them",
        "num_fewshot": "few-shot examples per document (--num_fewshot); the task's own when not given",
        "limit": "documents per task (--limit): a whole number, or a fraction of the task's documents",
        "include_path": "a folder of the project with task YAML files (--include_path), among the inputs",
        "include_defaults": "false: only the tasks of include_path are indexed (lm-eval's TaskManager)",
        "model_file": "a Python file of the project whose @register_model classes the arms may name, among the inputs",
        "logs": "per arm, --log_samples files or a folder of them (a list: one per round), read instead of evaluating",
    }
    optional_fields = frozenset(spec_fields) - {"tasks"}
    runs_code = True  # a model, a task's !function, a model_file: code the spec names
    requires_modules = ("lm_eval",)
    install_hint = "pip install 'ptreg[lm-eval]'"

    def check_settings(self, spec: AnySpec) -> str | None:
        spec = arms_spec(spec)
        problem = _tasks_problem(spec.settings.get("tasks"))
        if problem is not None:
            return problem
        for arm, params in spec.arms.items():
            other = sorted(set(params) - {MODEL, MODEL_ARGS})
            if other:
                return f"arm {arm!r}: {other[0]!r} is not one of an lm-eval arm's fields ({MODEL}, {MODEL_ARGS})"
        if "logs" in spec.settings:
            return _logs_problem(spec, spec.settings["logs"])
        return _evaluation_problem(spec)

    def code(self, spec: AnySpec, registry: Path) -> dict[str, str] | None:
        """The project's Python the evaluation runs, by content: the model_file, and every module
        of include_path a task's ``!function`` may import. Both are inputs too; an evaluator
        that names neither runs only installed code (its models, lm-eval's tasks): none here."""
        settings = arms_spec(spec).settings
        root = project_root(registry)
        files = [settings["model_file"]] if isinstance(settings.get("model_file"), str) else []
        include = settings.get("include_path")
        if isinstance(include, str) and (root / include).is_dir() and not (root / include).is_symlink():
            files += _modules_below(root, include)
        return digest_inputs(root, files, "code")

    def compare(self, spec: AnySpec, cells: list[Cell], roles: Roles, results_version: int = RESULTS_VERSION) -> None:
        """As any arms workload compares, once every arm scored the same documents seed by
        seed: a document one model was scored on and another was not fails the run, naming it,
        rather than being left out of the comparison unremarked."""
        measured = [c for c in cells if c.status == "measured"]
        problem = unpaired({c.backend: [s for s in c.metric_samples or [] if s.problem is None] for c in measured})
        if problem is not None:
            for cell in measured:
                cell.status, cell.reason = "failed", f"documents not paired across arms: {problem}"
        super().compare(spec, cells, roles, results_version)

    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        return LmEvalRun(task, arms_spec(ArmsSpec.model_validate(task.spec)))
