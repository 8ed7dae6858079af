"""The worked experiments' harness scripts (examples/), run as ptreg's command workload runs them.

Each script runs in a subprocess from the repository root with a minimal environment and
PTREG_METRICS / PTREG_ITEMS naming files, in a tiny mode where it has one (few steps, the
tiny config); the tests read what it wrote the way ptreg will: JSON lines, the metric names
the frozen evaluator declares, finite values, each item once. The generators must give the
committed data back byte for byte, since the evaluators freeze those files by digest.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers import REPO
from ptreg.records.evaluator import parse_spec

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


@pytest.mark.parametrize("name", ["warmup-heldout", "cloze-eval", "challenger-eval", "cloze-breadth"])
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


# The breadth evaluation: more items of the cloze evaluation's breadth kind, scored as it scores
# them. Its two arms are compared by the registered run alone: here the new items are run a few
# at a time, and the scorer is held to the cloze evaluation on the old breadth items.
BREADTH = REPO / "examples" / "breadth"
BREADTH_EVAL = BREADTH / "eval.py"
VOWELS = "aeiou"


def words_in(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def old_breadth_file(tmp_path: Path) -> Path:
    """The cloze evaluation's 120 breadth items, alone in a file of their own."""
    lines = (EVAL / "items.jsonl").read_text(encoding="ascii").splitlines(keepends=True)
    path = tmp_path / "old-breadth.jsonl"
    path.write_text("".join(line for line in lines if json.loads(line)["group"] == "breadth"), encoding="ascii")
    return path


def misspelling_kinds(word: str, wrong: str) -> set[str]:
    """Which of the old items' three kinds of misspelling turn the word into this one."""
    kinds = set()
    if len(wrong) == len(word) + 1 and any(wrong == word[:i] + word[i] + word[i:] for i in range(1, len(word))):
        kinds.add("doubled")
    if len(wrong) == len(word):
        differ = [i for i in range(len(word)) if word[i] != wrong[i]]
        if len(differ) == 1 and word[differ[0]] in VOWELS and wrong[differ[0]] in VOWELS:
            kinds.add("vowel")
        inside = range(1, len(word) - 2)
        if any(wrong == word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in inside):
            kinds.add("swapped")
    return kinds


def test_make_breadth_items_reproduces_the_committed_items(tmp_path: Path) -> None:
    run([str(BREADTH / "make_items.py"), "--out", str(tmp_path / "items.jsonl")], tmp_path, ptreg_files=False)
    assert (tmp_path / "items.jsonl").read_bytes() == (BREADTH / "items.jsonl").read_bytes()


def test_the_breadth_items_are_fresh_and_of_the_old_kind() -> None:
    """Four times the old breadth items at least; words unseen in training; none a word of any
    old item (text or option, breadth or primary); three misspellings, one of each old kind."""
    new, old = json_lines(BREADTH / "items.jsonl"), json_lines(EVAL / "items.jsonl")
    old_breadth = [item for item in old if item["group"] == "breadth"]
    assert len(new) >= 4 * len(old_breadth) == 480
    assert len({item["id"] for item in new}) == len(new)
    assert not {item["id"] for item in new} & {item["id"] for item in old}
    training = words_in((WARMUP / "data" / "train.txt").read_text(encoding="ascii"))
    old_words = set().union(*(words_in(" ".join([item["text"], *item["options"]])) for item in old))
    answers = [item["options"][item["answer"]] for item in new]
    assert len(set(answers)) == len(answers)
    for item in new:
        assert (item["group"], item["kind"], item["text"]) == ("breadth", "spelling", "___"), item["id"]
        options = item["options"]
        assert len(options) == len(set(options)) == 4 and 0 <= item["answer"] < 4, item["id"]
        for option in options:
            assert option.isascii() and option.isalpha() and option.islower(), item["id"]
            assert option not in training and option not in old_words, (item["id"], option)
        word = options[item["answer"]]
        kinds = [misspelling_kinds(word, wrong) for wrong in options if wrong != word]
        assert sorted(k for found in kinds for k in found) == ["doubled", "swapped", "vowel"], (item["id"], kinds)
        assert not set(options) - {word} & set(answers), item["id"]  # no misspelling is another item's word
    assert {frozenset(item["options"]) for item in new}.isdisjoint(frozenset(item["options"]) for item in old)


@pytest.mark.parametrize(("model", "seed"), [("bigram", "2"), ("trigram", "4")])
def test_the_breadth_scorer_answers_the_old_breadth_items_as_the_cloze_evaluation(
    tmp_path: Path, model: str, seed: str
) -> None:
    """Both scripts on the same file of the 120 old breadth items: every item's answer and the
    mean are the cloze evaluation's. The seeds are ones where some item ties, so the tie rule
    (the seed's stream, one draw per item in file order) is exercised too."""
    old = old_breadth_file(tmp_path)
    cloze = script(EVAL / "eval.py")
    half = cloze.NGramModel({"bigram": 2, "trigram": 3}[model], training_half(int(seed)))
    tied = 0
    for item in json_lines(old):
        scores = [half.score(option.encode("ascii")) for option in item["options"]]
        tied += scores.count(max(scores)) > 1
    assert tied > 0
    outputs = []
    for name, path in (("cloze", EVAL / "eval.py"), ("breadth", BREADTH_EVAL)):
        (tmp_path / name).mkdir()
        _, metrics, items_file = run(
            [str(path), "--model", model, "--seed", seed, "--items", str(old)], tmp_path / name
        )
        outputs.append((json_lines(items_file), json_lines(metrics)))
    assert outputs[0] == outputs[1]
    assert len(outputs[0][0]) == 120


def test_the_breadth_scorer_differs_from_the_frozen_cloze_run_only_where_a_tie_was_drawn(tmp_path: Path) -> None:
    """On its whole file the cloze evaluation draws a breadth item's tie after 300 primary
    items' draws; alone in a file the same items draw from the start of the stream. So an
    answer may differ there, and only on an item whose best options tie."""
    old = old_breadth_file(tmp_path)
    (tmp_path / "cloze").mkdir()
    (tmp_path / "breadth").mkdir()
    _, _, cloze_items = run([str(EVAL / "eval.py"), "--model", "trigram", "--seed", "1"], tmp_path / "cloze")
    _, _, breadth_items = run(
        [str(BREADTH_EVAL), "--model", "trigram", "--seed", "1", "--items", str(old)], tmp_path / "breadth"
    )
    cloze = {row["item"]: row["breadth"] for row in json_lines(cloze_items) if "breadth" in row}
    ours = {row["item"]: row["breadth"] for row in json_lines(breadth_items)}
    assert set(cloze) == set(ours)
    model = script(EVAL / "eval.py").NGramModel(3, training_half(1))
    for item in json_lines(old):
        if cloze[item["id"]] != ours[item["id"]]:
            scores = [model.score(option.encode("ascii")) for option in item["options"]]
            assert scores.count(max(scores)) > 1, item["id"]


@pytest.mark.parametrize("order", [2, 3])
def test_the_breadth_model_scores_every_line_as_the_cloze_evaluation(order: int) -> None:
    """To the last bit, on every option of the old and the new breadth items: equal
    likelihoods decide ties, so close is not enough."""
    mine, cloze = script(BREADTH_EVAL), script(EVAL / "eval.py")
    half = training_half(3)
    ours, theirs = mine.WittenBell(order, half), cloze.NGramModel(order, half)
    items = [item for item in json_lines(EVAL / "items.jsonl") if item["group"] == "breadth"]
    lines = [
        option.encode("ascii") for item in items + json_lines(BREADTH / "items.jsonl") for option in item["options"]
    ]
    assert [ours.line_logprob(line) for line in lines] == [theirs.score(line) for line in lines]


@pytest.mark.parametrize("model", ["bigram", "trigram"])
def test_breadth_eval_writes_the_declared_metric_and_every_item(tmp_path: Path, model: str) -> None:
    done, metrics, items_file = run([str(BREADTH_EVAL), "--model", model, "--seed", "100", "--limit", FEW], tmp_path)
    assert done.stdout == ""  # everything went to the files
    rows = json_lines(items_file)
    assert [row["item"] for row in rows] == [item["id"] for item in json_lines(BREADTH / "items.jsonl")][: int(FEW)]
    assert all(set(row) == {"item", "breadth"} and type(row["breadth"]) is int for row in rows), rows
    assert all(row["breadth"] in (0, 1) for row in rows), rows
    (aggregate,) = json_lines(metrics)
    assert set(aggregate) == set(evaluator("cloze-breadth")["metrics"]) == {"breadth"}
    assert aggregate["breadth"] == pytest.approx(sum(row["breadth"] for row in rows) / len(rows))


def test_breadth_eval_depends_on_the_seed_and_only_on_it(tmp_path: Path) -> None:
    old = old_breadth_file(tmp_path)
    outputs = []
    for i, seed in enumerate(("0", "0", "1")):
        (tmp_path / str(i)).mkdir()
        _, _, items_file = run(
            [str(BREADTH_EVAL), "--model", "trigram", "--seed", seed, "--items", str(old)], tmp_path / str(i)
        )
        outputs.append(items_file.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] != outputs[2]


def test_breadth_eval_by_hand_prints_the_metric(tmp_path: Path) -> None:
    done, metrics, items_file = run(
        [str(BREADTH_EVAL), "--model", "bigram", "--seed", "0", "--limit", FEW], tmp_path, ptreg_files=False
    )
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 1 and set(rows[0]) == {"breadth"}
    assert not metrics.exists() and not items_file.exists()


def test_breadth_eval_needs_nothing_of_the_cloze_evaluation(tmp_path: Path) -> None:
    """Standard library and NumPy only, and run from a copy that has no examples/eval/ beside
    it, it answers as it does here."""
    tree = ast.parse(BREADTH_EVAL.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"numpy"}, imported
    copy = tmp_path / "project" / "examples"
    (copy / "breadth").mkdir(parents=True)
    (copy / "warmup" / "data").mkdir(parents=True)
    shutil.copy(BREADTH_EVAL, copy / "breadth" / "eval.py")
    shutil.copy(BREADTH / "items.jsonl", copy / "breadth" / "items.jsonl")
    shutil.copy(WARMUP / "data" / "train.txt", copy / "warmup" / "data" / "train.txt")
    outputs = []
    for name, path in (("here", BREADTH_EVAL), ("copy", copy / "breadth" / "eval.py")):
        (tmp_path / name).mkdir()
        _, metrics, items_file = run([str(path), "--model", "trigram", "--seed", "7", "--limit", FEW], tmp_path / name)
        outputs.append((items_file.read_text(encoding="utf-8"), metrics.read_text(encoding="utf-8")))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("lines", "named"),
    [
        (['{"id": "x", "group": "primary", "text": "a ___", "options": ["a", "b"], "answer": 0}'], "group"),
        (['{"id": "x", "group": "breadth", "text": "___", "options": ["a", "b"], "answer": 0}'] * 2, "twice"),
        (['{"id": "x", "group": "breadth", "text": "___", "options": ["a", "b"], "answer": 2}'], "answer"),
        (['{"id": "x", "group": "breadth", "text": "no blank", "options": ["a", "b"], "answer": 0}'], "___"),
        (['{"id": "x", "group": "breadth", "text": "___", "options": ["a", "a"], "answer": 0}'], "options"),
        (["{not json"], "JSON"),
        (["[1, 2]"], "object"),
        ([], "no items"),
    ],
)
def test_breadth_eval_refuses_an_unusable_items_file(tmp_path: Path, lines: list[str], named: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    done, metrics, items_file = run(
        [str(BREADTH_EVAL), "--model", "bigram", "--seed", "0", "--items", str(bad)], tmp_path, ok=False
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and str(bad) in done.stderr and named in done.stderr
    assert not metrics.exists() and not items_file.exists()


def test_the_breadth_evaluator_asks_what_the_cloze_disposition_asks() -> None:
    """The cloze evaluation's arms, on the new items only, at seeds it never used."""
    spec, cloze = evaluator("cloze-breadth"), evaluator("cloze-eval")
    parse_spec(spec, "cloze-breadth.json")  # ptreg would freeze it as it stands
    assert spec["arms"] == cloze["arms"] == {"baseline": {"model": "bigram"}, "candidate": {"model": "trigram"}}
    assert spec["baseline"] == "baseline"
    assert spec["command"][:2] == ["python3", "examples/breadth/eval.py"]
    assert spec["inputs"] == [
        "examples/breadth/eval.py",
        "examples/breadth/items.jsonl",
        "examples/breadth/make_items.py",
        "examples/warmup/data/train.txt",
    ]
    assert {k: v for k, v in spec["metrics"]["breadth"].items() if k != "description"} == cloze["metrics"]["breadth"]
    assert set(spec["metrics"]) == {"breadth"}
    assert (spec["repeats"], spec["threads"]) == (5, 1) and spec["timeout_seconds"] > 0
    seeds, cloze_seeds = (range(s["seed"], s["seed"] + s["repeats"]) for s in (spec, cloze))
    assert not set(seeds) & set(cloze_seeds)
