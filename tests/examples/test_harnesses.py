"""The worked experiments' harness scripts (examples/), run as ptreg's command workload runs them.

Each script runs in a subprocess from the repository root with a minimal environment and
PTREG_METRICS / PTREG_ITEMS naming files, in a tiny mode where it has one (few steps, the
tiny config); the tests read what it wrote the way ptreg will: JSON lines, the metric names
the frozen evaluator declares, finite values, each item once. The generators must give the
committed data back byte for byte, since the evaluators freeze those files by digest.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO

WARMUP = REPO / "examples" / "warmup"
EVAL = REPO / "examples" / "eval"
EVALUATORS = REPO / "benchmarks" / "evaluators"


def run(
    args: list[str], tmp_path: Path, *, ptreg_files: bool = True, ok: bool = True
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """Run a script as the command workload would: repo root, minimal environment, one thread."""
    metrics, items = tmp_path / "metrics.jsonl", tmp_path / "items.jsonl"
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV") if k in os.environ}
    env["OMP_NUM_THREADS"] = "1"  # the evaluator's command sets it too; one thread is deterministic
    if ptreg_files:
        env |= {"PTREG_ARM": "baseline", "PTREG_SEED": "0", "PTREG_METRICS": str(metrics), "PTREG_ITEMS": str(items)}
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode == 0) == ok, done.stderr
    return done, metrics, items


def json_lines(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert all(isinstance(row, dict) for row in rows), rows
    return rows


def evaluator(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((EVALUATORS / f"{name}.json").read_text(encoding="utf-8"))
    return spec


def test_make_data_reproduces_the_committed_corpus(tmp_path: Path) -> None:
    run([str(WARMUP / "make_data.py"), "--out", str(tmp_path / "data")], tmp_path, ptreg_files=False)
    for name in ("train.txt", "heldout.txt"):
        assert (tmp_path / "data" / name).read_bytes() == (WARMUP / "data" / name).read_bytes(), name
    train = (WARMUP / "data" / "train.txt").read_text(encoding="ascii").splitlines()
    heldout = (WARMUP / "data" / "heldout.txt").read_text(encoding="ascii").splitlines()
    assert len(set(train)) > 0.9 * len(train)  # a grammar, not a repeated sentence
    assert len(set(heldout) - set(train)) > 0.9 * len(heldout)  # held out, not repeated


def test_make_items_reproduces_the_committed_items(tmp_path: Path) -> None:
    run([str(EVAL / "make_items.py"), "--out", str(tmp_path / "items.jsonl")], tmp_path, ptreg_files=False)
    assert (tmp_path / "items.jsonl").read_bytes() == (EVAL / "items.jsonl").read_bytes()


def test_the_items_are_well_formed_and_unseen_in_training() -> None:
    items = json_lines(EVAL / "items.jsonl")
    ids = [item["id"] for item in items]
    assert len(ids) == len(set(ids))
    groups = {item["group"] for item in items}
    assert groups == {"primary", "breadth"}
    training = set((WARMUP / "data" / "train.txt").read_text(encoding="ascii").splitlines())
    for item in items:
        options = item["options"]
        assert item["text"].count("___") == 1, item["id"]
        assert len(options) == len(set(options)) >= 2, item["id"]
        assert 0 <= item["answer"] < len(options), item["id"]
        assert item["text"].replace("___", options[item["answer"]]) not in training, item["id"]


def test_train_writes_the_declared_metrics(tmp_path: Path) -> None:
    args = [str(WARMUP / "train.py"), "--config", "tiny", "--steps", "4", "--warmup-steps", "2", "--seed", "3"]
    done, metrics, _ = run([*args, "--heldout-windows", "8"], tmp_path)
    assert done.stdout == ""  # everything went to the file
    rows = json_lines(metrics)
    assert len(rows) == 1
    assert set(rows[0]) == set(evaluator("warmup-heldout")["metrics"])
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in rows[0].values()), rows
    # an untrained byte model is near log(256) nats per byte; four steps cannot be far below
    assert 3.0 < rows[0]["heldout_loss"] < 6.0


def test_train_is_a_function_of_its_seed(tmp_path: Path) -> None:
    """Both arms of a round get the same seed: same seed, same run; another seed, another run."""
    losses = []
    for i, seed in enumerate(("0", "0", "1")):
        args = [str(WARMUP / "train.py"), "--config", "tiny", "--steps", "3", "--warmup-steps", "0", "--seed", seed]
        (tmp_path / str(i)).mkdir()
        _, metrics, _ = run([*args, "--heldout-windows", "4"], tmp_path / str(i))
        losses.append(json_lines(metrics)[0]["heldout_loss"])
    assert losses[0] == losses[1] != losses[2]


def test_train_standalone_prints_the_metrics(tmp_path: Path) -> None:
    args = [str(WARMUP / "train.py"), "--config", "tiny", "--steps", "2", "--warmup-steps", "0", "--seed", "0"]
    done, metrics, _ = run([*args, "--heldout-windows", "2"], tmp_path, ptreg_files=False)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 1 and set(rows[0]) == {"heldout_loss", "train_loss", "tokens_per_second"}
    assert not metrics.exists()


def test_train_refuses_a_warmup_longer_than_the_run(tmp_path: Path) -> None:
    args = [str(WARMUP / "train.py"), "--config", "tiny", "--steps", "2", "--warmup-steps", "5", "--seed", "0"]
    done, metrics, _ = run(args, tmp_path, ok=False)
    assert done.returncode == 2 and "warmup-steps" in done.stderr
    assert not metrics.exists()


@pytest.mark.parametrize("model", ["bigram", "trigram"])
def test_eval_writes_every_item_once_and_consistent_means(tmp_path: Path, model: str) -> None:
    _, metrics, items_file = run([str(EVAL / "eval.py"), "--model", model, "--seed", "4"], tmp_path)
    items = {item["id"]: item for item in json_lines(EVAL / "items.jsonl")}
    rows = json_lines(items_file)
    assert sorted(row["item"] for row in rows) == sorted(items)  # each item exactly once
    by_metric: dict[str, list[int]] = {"score": [], "breadth": []}
    for row in rows:
        (metric,) = set(row) - {"item"}
        assert metric == ("score" if items[row["item"]]["group"] == "primary" else "breadth"), row
        assert row[metric] in (0, 1) and isinstance(row[metric], int), row
        by_metric[metric].append(row[metric])
    (aggregate,) = json_lines(metrics)
    assert set(aggregate) == set(evaluator("cloze-eval")["metrics"])
    for name, values in by_metric.items():
        assert aggregate[name] == pytest.approx(sum(values) / len(values))


def test_eval_depends_on_the_seed_and_only_on_it(tmp_path: Path) -> None:
    outputs = []
    for i, seed in enumerate(("0", "0", "1")):
        (tmp_path / str(i)).mkdir()
        _, _, items_file = run([str(EVAL / "eval.py"), "--model", "trigram", "--seed", seed], tmp_path / str(i))
        outputs.append(items_file.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] != outputs[2]


@pytest.mark.parametrize("name", ["warmup-heldout", "cloze-eval"])
def test_the_evaluators_name_what_exists(name: str) -> None:
    """Every input is in the repository, every placeholder is an arm's parameter or the seed."""
    spec = evaluator(name)
    assert spec["workload"] == "command" and spec["baseline"] in spec["arms"]
    for path in spec["inputs"]:
        assert (REPO / path).exists(), path
    placeholders = {p for part in spec["command"] for p in re.findall(r"\{(\w+)\}", part)}
    for arm in spec["arms"].values():
        assert placeholders - {"seed"} == set(arm)
    for metric in spec["metrics"].values():
        assert metric["better"] in ("lower", "higher") and metric["compare"] in ("ratio", "difference")
