"""The ``inspect`` workload: an Inspect AI evaluation, its arms (models) compared sample by sample.

The spec names the task (a task file of the project, ``path/task.py`` or ``path/task.py@name``,
or a task's registry name), its ``task_args``, and each arm's ``model``. Each round evaluates
the task once per arm through Inspect's Python API (``inspect_ai.eval``, one epoch, the round's
seed as the generate config's seed) inside the cell's worker, reads the EvalLog back through
``inspect_ai.log.read_eval_log``, and turns every sample's scores into items
(``evaluations.py``): Inspect's epochs are ptreg's rounds. Each scorer is a metric
``<task>__<scorer>`` whose direction the spec declares (a scorer nobody declared is refused);
input and output tokens and working time are kept per sample beside them.

With ``logs`` ({arm: a .eval file of the project}) a run reads those logs instead of
evaluating: round r reads epoch r + 1 of each. The logs are inputs, frozen by their digest like
any other, so a log edited since is refused by the gate.

Inspect itself is imported only inside the worker (``inspect_cell.py``), from the ``inspect``
extra; without it the workload is listed as not installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ...errors import UnusableInput
from ...records.evaluator import AnySpec, ArmsSpec, MetricDeclaration
from ...records.run_results import RESULTS_VERSION, Cell, Roles
from ...store.code_digests import code_digests
from ...store.input_digests import project_root
from ..backends import Backend
from ..protocol import CellTask
from .arms import ArmsWorkload, arms_spec
from .base import CellRun
from .evaluations import unpaired
from .inspect_cell import InspectRun  # imports Inspect only when a cell of it is set up
from .inspect_spec import USAGE, settings_problem, task_file


class InspectWorkload(ArmsWorkload):
    name = "inspect"
    description = (
        "An Inspect AI task: its arms (models) compared sample by sample on each scorer, with tokens and working time."
    )
    metrics: ClassVar[dict[str, MetricDeclaration]] = USAGE
    spec_fields: ClassVar[dict[str, str]] = {
        "task": "the task: a file of the project (path/task.py, or path/task.py@name) or a registry name",
        "task_args": "the task's arguments, an object (optional)",
        "logs": "in place of evaluating: {arm: path of an Inspect .eval log in inputs}, round r read from epoch r + 1",
    }
    optional_fields: ClassVar[frozenset[str]] = frozenset({"task", "task_args", "logs"})
    runs_code = True
    requires_modules: ClassVar[tuple[str, ...]] = ("inspect_ai",)
    install_hint: ClassVar[str | None] = "pip install 'ptreg[inspect]'"

    def check_settings(self, spec: AnySpec) -> str | None:
        return settings_problem(arms_spec(spec))

    def code(self, spec: AnySpec, registry: Path) -> dict[str, str] | None:
        spec = arms_spec(spec)
        task = spec.settings.get("task")
        named = task_file(task) if isinstance(task, str) and "logs" not in spec.settings else None
        if named is None:
            return None  # a registry name runs an installed package's task, or logs are only read
        if not (project_root(registry) / named[0]).is_file():
            raise UnusableInput(f"evaluator {spec.name}: task file {named[0]!r} is not a file of the project")
        return code_digests(
            project_root(registry),
            [named[0]],
            [named[0]],
            [],
            spec.not_frozen,
            registry=registry.absolute().name,
        )

    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        assert task.spec is not None
        spec = ArmsSpec.model_validate(task.spec)
        return InspectRun(task, spec, {**self.metrics, **spec.metrics})

    def compare(self, spec: AnySpec, cells: list[Cell], roles: Roles, results_version: int = RESULTS_VERSION) -> None:
        """Arms compared as any arms are, once every sample one arm scored the other scored too:
        a sample one arm lacks fails the run, named, rather than being left out of the pairing."""
        scores = {
            c.backend: [
                s.model_copy(update={"items": {m: v for m, v in (s.items or {}).items() if m not in self.metrics}})
                for s in c.metric_samples or []
                if s.problem is None
            ]
            for c in cells
        }
        problem = unpaired(scores)
        if problem is not None:
            for cell in cells:
                if cell.status == "measured":
                    cell.status, cell.reason = "failed", f"samples unpaired across arms: {problem}"
        super().compare(spec, cells, roles, results_version)
