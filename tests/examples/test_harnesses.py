"""The worked experiments' harness scripts (examples/), run as ptreg's command workload runs them.

Each script runs in a subprocess from the repository root with a minimal environment and
PTREG_METRICS / PTREG_ITEMS naming files, in a tiny mode where it has one (few steps, the
tiny config); the tests read what it wrote the way ptreg will: JSON lines, the metric names
the frozen evaluator declares, finite values, each item once. The generators must give the
committed data back byte for byte, since the evaluators freeze those files by digest.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers import REPO

WARMUP = REPO / "examples" / "warmup"
EVAL = REPO / "examples" / "eval"
CHALLENGER = REPO / "examples" / "challenger" / "challenger.py"
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


@pytest.mark.parametrize("name", ["warmup-heldout", "cloze-eval", "challenger-eval"])
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


# The ship/reject harness. The challenger runs here on a few items only: its score against the
# champion is for the registered run to say, not for a test to have looked at first.
FEW = "3"


def primary_ids() -> list[str]:
    return [item["id"] for item in json_lines(EVAL / "items.jsonl") if item["group"] == "primary"]


@pytest.mark.parametrize(("model", "limit"), [("champion", None), ("challenger", FEW)])
def test_challenger_harness_writes_the_declared_metrics_and_every_item(
    tmp_path: Path, model: str, limit: str | None
) -> None:
    args = [str(CHALLENGER), "--model", model, "--seed", "2", *(["--limit", limit] if limit else [])]
    done, metrics, items_file = run(args, tmp_path)
    assert done.stdout == ""  # everything went to the files
    expected = primary_ids()[: int(limit) if limit else None]
    rows = json_lines(items_file)
    assert [row["item"] for row in rows] == expected  # every scored item once, in order
    assert all(set(row) == {"item", "score"} and row["score"] in (0, 1) for row in rows), rows
    assert all(isinstance(row["score"], int) for row in rows), rows
    (aggregate,) = json_lines(metrics)
    assert set(aggregate) == set(evaluator("challenger-eval")["metrics"])
    assert all(isinstance(v, float) and math.isfinite(v) for v in aggregate.values()), aggregate
    assert aggregate["score"] == pytest.approx(sum(row["score"] for row in rows) / len(rows))
    assert aggregate["latency_ms"] > 0 and aggregate["items_per_second"] > 0
    # in milliseconds, and of one item: the median item takes no longer than the whole loop
    assert aggregate["latency_ms"] / 1000 < len(rows) / aggregate["items_per_second"]


@pytest.mark.parametrize("seed", ["0", "3"])
def test_the_champion_answers_every_item_as_the_cloze_trigram(tmp_path: Path, seed: str) -> None:
    """The champion is the cloze evaluation's trigram, rebuilt: same training half, same
    smoothing, same scoring of a line, same ties, so the same answer on each primary item."""
    (tmp_path / "cloze").mkdir()
    (tmp_path / "champion").mkdir()
    _, _, cloze_items = run([str(EVAL / "eval.py"), "--model", "trigram", "--seed", seed], tmp_path / "cloze")
    _, _, champion_items = run([str(CHALLENGER), "--model", "champion", "--seed", seed], tmp_path / "champion")
    cloze = [row for row in json_lines(cloze_items) if "score" in row]
    assert json_lines(champion_items) == cloze
    assert len(cloze) == len(primary_ids())


def test_the_harness_depends_on_the_seed_and_only_on_it(tmp_path: Path) -> None:
    outputs = []
    for i, seed in enumerate(("0", "0", "1")):
        (tmp_path / str(i)).mkdir()
        _, _, items_file = run([str(CHALLENGER), "--model", "champion", "--seed", seed], tmp_path / str(i))
        outputs.append(items_file.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] != outputs[2]
    for i, seed in enumerate(("5", "5"), start=3):
        (tmp_path / str(i)).mkdir()
        _, _, items_file = run(
            [str(CHALLENGER), "--model", "challenger", "--seed", seed, "--limit", FEW], tmp_path / str(i)
        )
        outputs.append(items_file.read_text(encoding="utf-8"))
    assert outputs[3] == outputs[4]


def test_the_harness_run_by_hand_prints_the_metrics(tmp_path: Path) -> None:
    args = [str(CHALLENGER), "--model", "challenger", "--seed", "0", "--limit", FEW]
    done, metrics, items_file = run(args, tmp_path, ptreg_files=False)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 1 and set(rows[0]) == {"score", "latency_ms", "items_per_second"}
    assert not metrics.exists() and not items_file.exists()


def test_the_harness_refuses_an_empty_selection(tmp_path: Path) -> None:
    done, metrics, _ = run([str(CHALLENGER), "--model", "champion", "--seed", "0", "--limit", "0"], tmp_path, ok=False)
    assert done.returncode == 2 and "--limit" in done.stderr
    assert not metrics.exists()


def script(path: Path) -> ModuleType:
    """A script as a module, to reach its models without running an evaluation."""
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def training_half(seed: int) -> list[bytes]:
    sentences = (WARMUP / "data" / "train.txt").read_bytes().splitlines()
    return random.Random(seed).sample(sentences, len(sentences) // 2)


# a history of padding, a common one, one seen rarely, and ones made of bytes never seen
HISTORIES = [b"\n\n", b"th", b"e ", b"zq", b"\x00\x01", b"q\xff"]


@pytest.mark.parametrize("model", ["champion", "challenger"])
def test_each_model_is_a_distribution_over_the_next_byte(model: str) -> None:
    module = script(CHALLENGER)
    built = module.MODELS[model](training_half(0))
    for history in HISTORIES:
        probabilities = [built.prob(history, byte) for byte in range(256)]
        assert all(p > 0 for p in probabilities), history  # no byte is impossible
        assert math.fsum(probabilities) == pytest.approx(1.0, abs=1e-12), history


def test_the_challenger_is_kneser_ney_not_the_champion() -> None:
    module = script(CHALLENGER)
    half = training_half(0)
    champion, challenger = module.WittenBell(half), module.KneserNey(half)
    assert len(challenger.discounts) == 3 and all(0 < d <= 1 for d in challenger.discounts)
    # counted here afresh: after "th", raw counts; after "t", how many distinct bytes came before "t c"
    after_th: dict[int, int] = {}
    before_t: dict[int, set[int]] = {}
    for line in half:
        padded = b"\n\n" + line + b"\n"
        for i in range(2, len(padded)):
            if padded[i - 2 : i] == b"th":
                after_th[padded[i]] = after_th.get(padded[i], 0) + 1
            if padded[i - 1] == ord("t"):
                before_t.setdefault(padded[i], set()).add(padded[i - 2])
    top, middle = challenger.discounts[2], challenger.discounts[1]
    trigrams = [n for nxt in module.ngram_counts(half)[2].values() for n in nxt.values()]
    ones, twos = trigrams.count(1), trigrams.count(2)
    assert top == ones / (ones + 2 * twos)  # Ney, Essen and Kneser's estimate, from the training half alone
    kept, weight = challenger.levels[2][b"th"]
    total = sum(after_th.values())
    assert kept == pytest.approx({c: (n - top) / total for c, n in after_th.items()})
    assert weight == pytest.approx(top * len(after_th) / total)
    kept, weight = challenger.levels[1][b"t"]
    distinct = sum(len(left) for left in before_t.values())
    assert distinct < sum(n for n in module.ngram_counts(half)[1][b"t"].values())  # not the raw count
    assert kept == pytest.approx({c: (len(left) - middle) / distinct for c, left in before_t.items()})
    assert weight == pytest.approx(middle * len(before_t) / distinct)
    assert any(champion.prob(h, ord("e")) != challenger.prob(h, ord("e")) for h in HISTORIES)
    # a function of the seed's training half
    line = b"The miller bought an angry knife behind the bridge."
    assert module.line_logprob(challenger, line) == module.line_logprob(module.KneserNey(half), line)
    assert module.line_logprob(challenger, line) != module.line_logprob(module.KneserNey(training_half(1)), line)


def test_the_champion_scores_every_line_as_the_cloze_trigram_does() -> None:
    """To the last bit: equal likelihoods decide ties, so the champion's must be the cloze
    evaluation's numbers, not merely close to them."""
    module, cloze = script(CHALLENGER), script(EVAL / "eval.py")
    half = training_half(4)
    champion, trigram = module.WittenBell(half), cloze.NGramModel(3, half)
    lines = [
        item["text"].replace("___", option, 1).encode("ascii")
        for item in json_lines(EVAL / "items.jsonl")
        if item["group"] == "primary"
        for option in item["options"]
    ]
    assert [module.line_logprob(champion, line) for line in lines] == [trigram.score(line) for line in lines]
