"""The weekday task: which day of the week is a date of 1700-2299 (dates.jsonl, from
make_dates.py), scored by whether the answer ends with the right day's name."""

from __future__ import annotations

from pathlib import Path

import offline_models  # noqa: F401  (registers the almanac model API)
from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def weekday() -> Task:
    return Task(
        dataset=json_dataset(str(Path(__file__).parent / "dates.jsonl")),
        solver=generate(),
        scorer=match(location="end", ignore_case=True),
    )
