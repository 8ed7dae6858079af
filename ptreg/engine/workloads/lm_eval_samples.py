"""lm-evaluation-harness's per-sample results, as ``simple_evaluate(..., log_samples=True)``
returns them and as ``lm_eval --log_samples`` writes them (``samples_<task>_<date>.jsonl``, one
JSON object a line), turned into ``SampleScore``s (``evaluations.py``).

lm-eval has no reader of its own for these files, so they are read here, as hostile as any file
ptreg reads: a regular file only, never through a symlink, bounded, and a line that is not a
sample (no ``doc_id``, a metric it lists without a value) is one line naming the file and the
line. A sample's metrics are the names its ``metrics`` list gives; under a filter other than
``none`` (a generation task's ``strict-match``), the metric is ``<metric>,<filter>``, as lm-eval
names it in its results, so that two filters never share a metric.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...errors import UnusableInput
from ...store.jsonio import JsonError, read_bytes
from ...text import shorten
from .evaluations import SampleScore

# A samples file of a few hundred thousand documents with their prompts stays far below this.
MAX_SAMPLES_BYTES = 512 * 1024 * 1024
MAX_FILES = 10_000  # in one folder of samples files
NO_FILTER = "none"
# lm-eval names each file samples_<task>_<date>.jsonl, the date as 2024-05-01T12-00-00.123456
SAMPLES_FILE = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")


class SamplesError(UnusableInput):
    """A samples file that cannot be read as lm-eval's: one line naming the file and the line."""


def per_sample_value(value: Any) -> float | None:
    """A per-sample score as a number; None for what lm-eval aggregates over the whole corpus
    (bleu's and perplexity's per-sample values are tuples), which cannot be paired by item."""
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def metric_of(metric: str, filter_name: str) -> str:
    """A sample's metric as lm-eval's results name it apart from its filter."""
    return metric if filter_name == NO_FILTER else f"{metric},{filter_name}"


def sample_scores(
    task: str, rows: Iterable[tuple[str, Mapping[str, Any]]], seed: int
) -> tuple[list[SampleScore], set[tuple[str, str]]]:
    """The scores of one task's samples (each with where it came from, for the message), and the
    metrics whose per-sample values are not numbers (corpus-level: left out here, and refused
    by the caller where the evaluator declares them), as (task, metric)."""
    scores: list[SampleScore] = []
    corpus: set[tuple[str, str]] = set()
    for where, row in rows:
        doc_id = row.get("doc_id")
        if isinstance(doc_id, bool) or not isinstance(doc_id, int | str) or doc_id == "":
            raise SamplesError(f"{where}: no doc_id (a number or a string)")
        metrics = row.get("metrics")
        if not isinstance(metrics, list) or not all(isinstance(m, str) and m for m in metrics):
            raise SamplesError(f"{where}: no metrics (a list of the metric names scored)")
        filter_name = row.get("filter", NO_FILTER)
        if not isinstance(filter_name, str) or not filter_name:
            raise SamplesError(f"{where}: filter is not a name")
        for metric in metrics:
            if metric not in row:
                raise SamplesError(
                    f"{where}: doc {shorten(str(doc_id), 40)} lists {shorten(metric, 40)} without a value"
                )
            name = metric_of(metric, filter_name)
            value = per_sample_value(row[metric])
            if value is None:
                corpus.add((task, name))
                continue
            scores.append(SampleScore(task, str(doc_id), name, value, seed))
    return scores, corpus


def _lines(path: Path, shown: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        data = read_bytes(path, MAX_SAMPLES_BYTES, follow=False)
    except JsonError as exc:
        raise SamplesError(f"{shown}: {exc.problem}") from None
    found = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{shown}, line {number}"
        try:
            value = json.loads(line, parse_constant=lambda c: None)
        except (ValueError, RecursionError):  # not JSON, a number too long, nested too deep
            raise SamplesError(f"{where}: not a JSON object") from None
        if not isinstance(value, dict):
            raise SamplesError(f"{where}: not a JSON object")
        found.append((where, value))
    return found


def samples_files(root: Path, relative: str) -> list[tuple[str, str]]:
    """The samples files a log path of the spec names, each with its task: the file itself, or
    every ``samples_<task>_<date>.jsonl`` directly in the folder, by name. One task's file twice
    (two dates) is refused: which one was meant is not the reader's to guess."""
    path = root / relative
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise SamplesError(f"{relative}: cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(mode):
        raise SamplesError(f"{relative}: is a symlink, which ptreg does not follow")
    if stat.S_ISDIR(mode):
        with os.scandir(path) as listing:
            # every file lm-eval could have meant as one: one misnamed is refused below, not skipped
            names = sorted(e.name for e in listing if e.name.startswith("samples_") and e.name.endswith(".jsonl"))
        if len(names) > MAX_FILES:
            raise SamplesError(f"{relative}: more than {MAX_FILES:,} samples files")
        files = [f"{relative}/{name}" for name in names]
        if not files:
            raise SamplesError(f"{relative}: holds no samples_<task>_<date>.jsonl file")
    else:
        files = [relative]
    found: dict[str, str] = {}
    for file in files:
        matched = SAMPLES_FILE.match(file.rsplit("/", 1)[-1])
        if matched is None:
            raise SamplesError(f"{file}: not named as lm-eval names a samples file (samples_<task>_<date>.jsonl)")
        task = matched["task"]
        if task in found:
            raise SamplesError(f"{file}: a second samples file of task {task!r} (the first: {found[task]})")
        found[task] = file
    return [(file, task) for task, file in found.items()]


def read_samples(root: Path, relative: str, seed: int) -> tuple[list[SampleScore], set[tuple[str, str]]]:
    """Every score of the samples files a log path names, taken as one repeat under ``seed``,
    and the metrics no sample gave a number of."""
    scores: list[SampleScore] = []
    corpus: set[tuple[str, str]] = set()
    for file, task in samples_files(root, relative):
        found, aggregated = sample_scores(task, _lines(root / file, file), seed)
        scores += found
        corpus |= aggregated
    return scores, corpus
