"""What an ``inspect`` evaluator's spec says (``inspect_eval.py``), read alike by the workload
when it checks a spec and by the worker when it runs one."""

from __future__ import annotations

from ...records.evaluator import ArmsSpec, MetricDeclaration, path_problem
from ...text import shorten

MODEL = "model"
# Generate config an arm may set beside its model, as `inspect eval` takes them (--temperature ...):
# strings in the spec, read by Inspect's own GenerateConfig in the worker.
GENERATE_SETTINGS = ("temperature", "top_p", "top_k", "max_tokens", "reasoning_effort", "max_connections")
TASK_FILE_SUFFIX = ".py"
# Usage Inspect records of each sample, kept per sample beside its scores.
USAGE: dict[str, MetricDeclaration] = {
    "input_tokens": MetricDeclaration(
        better="lower", unit="tokens", description="input tokens of a sample, over every model it called"
    ),
    "output_tokens": MetricDeclaration(
        better="lower", unit="tokens", description="output tokens of a sample, over every model it called"
    ),
    "working_seconds": MetricDeclaration(
        better="lower", unit="s", description="a sample's working time, as Inspect measures it"
    ),
}


def task_file(task: str) -> tuple[str, str | None] | None:
    """A task named by file: its path in the project and the task's name after '@', if given;
    None for a registry name."""
    path, _, name = task.partition("@")
    if not path.endswith(TASK_FILE_SUFFIX):
        return None
    return path, name or None


def logs_of(spec: ArmsSpec) -> dict[str, str]:
    found = spec.settings.get("logs")
    return dict(found) if isinstance(found, dict) else {}


def settings_problem(spec: ArmsSpec) -> str | None:
    settings = spec.settings
    task = settings.get("task")
    logs = settings.get("logs")
    if logs is None and not isinstance(task, str):
        return "task must name a task file of the project (path/task.py or path/task.py@name) or a registry name"
    if isinstance(task, str):
        if not 0 < len(task) <= 500:
            return "task must be 1 to 500 characters"
        named = task_file(task)
        if named is not None and (problem := path_problem(named[0], "task file")) is not None:
            return problem
    args = settings.get("task_args")
    if args is not None and not (isinstance(args, dict) and all(isinstance(k, str) for k in args)):
        return "task_args must be an object of the task's arguments"
    if logs is not None:
        if not isinstance(logs, dict) or set(logs) != set(spec.arms):
            return f"logs must name one .eval log for each arm ({', '.join(spec.arms)})"
        for arm, path in logs.items():
            if not isinstance(path, str) or not path.endswith(".eval"):
                return f"logs: arm {arm!r}: {shorten(path)} is not an Inspect .eval log"
            if (problem := path_problem(path, f"logs: arm {arm!r}: log")) is not None:
                return problem
            if path not in spec.inputs:
                return f"logs: arm {arm!r}: {path!r} is not one of inputs (a log is frozen by its digest)"
    for arm, params in spec.arms.items():
        other = sorted(set(params) - {MODEL, *GENERATE_SETTINGS})
        if other:
            return f"arm {arm!r}: {other[0]!r} is not a setting of an inspect arm ({', '.join((MODEL, *GENERATE_SETTINGS))})"
        if logs is not None and set(params) - {MODEL}:
            return f"arm {arm!r}: an arm read from a log sets no generate config (the log's own was used)"
        if logs is None and MODEL not in params:
            return f"arm {arm!r} names no model (e.g. 'openai/gpt-4o', or a model API of your own)"
    if not spec.metrics:
        return "the spec declares each scorer's metric, <task>__<scorer>, with which way is better (metrics)"
    return None
