"""The staged experiment's scripts (examples/staged-gpt/), run as its evaluator's stages would run
them, with a few training steps: train saves a checkpoint, evaluate and load read it, and every
line they write through ptreg.harness is one the command workload reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptreg.engine.workloads.command import read_items, read_metrics
from ptreg.records.evaluator import MetricDeclaration

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "examples" / "staged-gpt"
SPEC = json.loads((FOLDER / "evaluator.json").read_text(encoding="utf-8"))
DECLARED = {name: MetricDeclaration.model_validate(d) for name, d in SPEC["metrics"].items()}
OUT = "examples/staged-gpt/out/{arm}-{seed}"


def stage_argv(name: str, arm: str, seed: int, out: Path) -> list[str]:
    """The stage's argv as the spec gives it, filled in for ``arm`` and ``seed``, with the
    checkpoint in ``out`` and (for train) a few steps of the tiny config."""
    stage = next(s for s in SPEC["stages"] if s["name"] == name)
    values = {**SPEC["arms"][arm], "arm": arm, "seed": str(seed)}
    argv = [str(out) if word == OUT else word.format(**values) for word in stage["command"]]
    if name == "train":
        argv[argv.index("--steps") + 1] = "3"
        argv += ["--config", "tiny"]
    return [sys.executable, *argv[1:]]


def run_stage(argv: list[str], scratch: Path) -> tuple[dict[str, float], dict[str, dict[str, float]] | None, str]:
    """One stage run with ptreg's variables set, as the command workload sets them."""
    metrics, items = scratch / "metrics.jsonl", scratch / "items.jsonl"
    for path in (metrics, items):
        path.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTREG_")}
    env.update(PTREG_METRICS=str(metrics), PTREG_ITEMS=str(items), PTREG_DECLARED=json.dumps(sorted(DECLARED)))
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return read_metrics_of(metrics), read_items(items, DECLARED), done.stdout


def read_metrics_of(path: Path) -> dict[str, float]:
    # each stage writes some of the declared metrics; the workload merges them into the repeat
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    merged = {k: v for line in lines for k, v in line.items()}
    assert read_metrics(path, {k: DECLARED[k] for k in merged}) == merged
    return merged


def test_the_spec_trains_once_and_evaluates_and_loads_each_repeat() -> None:
    assert [(s["name"], s["repeat"]) for s in SPEC["stages"]] == [
        ("train", "once"),
        ("evaluate", "each"),
        ("load", "each"),
    ]
    assert SPEC["stages"][0]["outputs"] == [OUT] and all(OUT in s["command"] for s in SPEC["stages"])
    assert SPEC["seeds"] == [0, 1] and SPEC["repeats"] == 2 and len(SPEC["arms"]) == 2
    assert {n: d.better for n, d in DECLARED.items()} == {
        "heldout_loss": "lower",
        "accuracy": "higher",
        "train_loss": "lower",
        "cold_start_seconds": "lower",
    }


def test_train_evaluate_and_load_write_what_the_command_workload_reads(tmp_path: Path) -> None:
    out = tmp_path / "baseline-0"
    trained, items, _ = run_stage(stage_argv("train", "baseline", 0, out), tmp_path)
    assert set(trained) == {"train_loss"} and items is None
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "model.npz"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"] == "tiny" and meta["lr"] == 1e-3 and meta["steps"] == 3 and meta["seed"] == 0
    evaluated, items, _ = run_stage(stage_argv("evaluate", "baseline", 0, out), tmp_path)
    assert set(evaluated) == {"heldout_loss", "accuracy"}
    assert items is not None and set(items) == {"heldout_loss", "accuracy"}
    windows = items["heldout_loss"]
    assert len(windows) >= 300  # the tiny config's 16-byte context: every held-out window, up to 400
    assert evaluated["heldout_loss"] == pytest.approx(sum(windows.values()) / len(windows))
    assert 0 <= evaluated["accuracy"] <= 1 and all(0 <= a <= 1 for a in items["accuracy"].values())
    loaded, items, said = run_stage(stage_argv("load", "baseline", 0, out), tmp_path)
    assert set(loaded) == {"cold_start_seconds"} and loaded["cold_start_seconds"] > 0 and items is None
    assert said.startswith("first token: ")


def test_a_seed_trains_the_same_checkpoint_again_and_another_does_not(tmp_path: Path) -> None:
    """A once stage's checkpoint is a function of its arm and seed (one BLAS thread), so that a
    checkpoint kept for reuse is the one the stage would train again."""
    first, again, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run_stage(stage_argv("train", "candidate", 1, first), tmp_path)
    run_stage(stage_argv("train", "candidate", 1, again), tmp_path)
    run_stage(stage_argv("train", "candidate", 2, other), tmp_path)
    assert (first / "model.npz").read_bytes() == (again / "model.npz").read_bytes()
    assert (first / "model.npz").read_bytes() != (other / "model.npz").read_bytes()


def test_run_by_hand_they_print_what_they_would_record(tmp_path: Path) -> None:
    out = tmp_path / "by-hand"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTREG_")}
    for name in ("train", "load"):
        done = subprocess.run(
            stage_argv(name, "baseline", 0, out), cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "ptreg.harness: outside ptreg, would record metrics: {" in done.stderr
