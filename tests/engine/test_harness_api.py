"""``ptreg.harness``: what a command's harness imports. Its lines are the ones the command
workload reads, what ptreg would refuse later is refused at the call, and outside ptreg it
prints instead of writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptreg import harness
from ptreg.engine.workloads.command import read_items, read_metrics
from ptreg.records.evaluator import MetricDeclaration

DECLARED = {
    "score": MetricDeclaration(better="higher", unit="fraction"),
    "loss": MetricDeclaration(better="lower", unit="nats"),
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The files ptreg names for one repeat, and the names it declares."""
    metrics, items = tmp_path / "metrics.jsonl", tmp_path / "items.jsonl"
    monkeypatch.setenv("PTREG_METRICS", str(metrics))
    monkeypatch.setenv("PTREG_ITEMS", str(items))
    monkeypatch.setenv("PTREG_DECLARED", json.dumps(sorted(DECLARED)))
    monkeypatch.setattr(harness, "_scored", set())  # a fresh process's
    return metrics, items


def test_what_it_writes_is_what_the_command_workload_reads(files: tuple[Path, Path]) -> None:
    metrics, items = files
    harness.item("q1", score=1, loss=0.25)
    harness.item("q2", score=0)
    harness.report(score=0.5)
    harness.report(loss=1.5, score=0.75)  # the last value written stands
    assert read_metrics(metrics, DECLARED) == {"score": 0.75, "loss": 1.5}
    assert read_items(items, DECLARED) == {"score": {"q1": 1.0, "q2": 0.0}, "loss": {"q1": 0.25}}
    assert items.read_text().splitlines()[0] == '{"item": "q1", "score": 1, "loss": 0.25}'


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda: harness.report(score=float("nan")), "score is nan, not a finite number"),
        (lambda: harness.report(score=float("inf")), "score is inf, not a finite number"),
        (lambda: harness.report(score=10**400), "not a finite number"),
        (lambda: harness.report(score=True), "score is bool, not a number"),
        (lambda: harness.report(score="0.5"), "score is str, not a number"),
        (lambda: harness.report(accuracy=0.5), "accuracy is not a metric the evaluator declares (it declares: loss"),
        (lambda: harness.report(**{"Score": 0.5}), "'Score' is not a metric name"),
        (lambda: harness.report(), "no metric given"),
        (lambda: harness.item("q1", loss=float("-inf")), "loss is -inf, not a finite number"),
        (lambda: harness.item("", score=1), "an item id is a string of 1 to 200 characters"),
        (lambda: harness.item("q" * 201, score=1), "an item id is a string of 1 to 200 characters"),
        (lambda: harness.item(17, score=1), "an item id is a string"),
        (lambda: harness.item("q1", item=1), "'item' names the item"),
        (lambda: harness.item("q1"), "no metric given"),
    ],
)
def test_what_ptreg_would_refuse_is_refused_at_the_call_and_nothing_is_written(
    files: tuple[Path, Path], call, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
        call()
    assert not files[0].exists() and not files[1].exists()


def test_an_item_scored_twice_on_a_metric_is_refused_and_the_first_stands(files: tuple[Path, Path]) -> None:
    harness.item("q1", score=1)
    harness.item("q1", loss=0.5)  # another metric of the same item is fine
    with pytest.raises(ValueError, match="item 'q1' was already scored on score"):
        harness.item("q1", score=0, loss=0.1)
    assert read_items(files[1], DECLARED) == {"score": {"q1": 1.0}, "loss": {"q1": 0.5}}


def test_without_a_declared_list_any_metric_name_is_written(
    files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PTREG_DECLARED")
    harness.report(accuracy=0.5)
    assert json.loads(files[0].read_text()) == {"accuracy": 0.5}
    monkeypatch.setenv("PTREG_DECLARED", "{not json")
    with pytest.raises(ValueError, match=r"\$PTREG_DECLARED is not a JSON list"):
        harness.report(score=0.5)


def test_a_symlink_in_place_of_its_file_is_not_followed(files: tuple[Path, Path], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("")
    files[0].symlink_to(elsewhere)
    with pytest.raises(OSError):
        harness.report(score=0.5)
    assert elsewhere.read_text() == ""


def test_outside_ptreg_it_prints_what_it_would_record(tmp_path: Path) -> None:
    script = tmp_path / "by_hand.py"
    script.write_text(
        "from ptreg.harness import item, report\nitem('q1', score=1)\nreport(score=0.5)\n"
        "try:\n    report(score=float('nan'))\nexcept ValueError as exc:\n    print('refused:', exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTREG_")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        'ptreg.harness: outside ptreg, would record items: {"item": "q1", "score": 1}',
        'ptreg.harness: outside ptreg, would record metrics: {"score": 0.5}',
    ]
    assert done.stdout == "refused: score is nan, not a finite number\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["by_hand.py"]


def test_importing_it_loads_nothing_heavy() -> None:
    code = (
        "import sys, ptreg.harness; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'numpy', 'scipy', 'typer') "
        "or (m.startswith('ptreg.') and m != 'ptreg.harness')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


HARNESS = """\
import argparse, json
from ptreg.harness import item, report
p = argparse.ArgumentParser()
p.add_argument("--level", type=int)
p.add_argument("--seed", type=int)
p.add_argument("--extra", default="")
a = p.parse_args()
scores = [int((i * 7 + a.seed) % 10 < a.level) for i in range(20)]
for i, score in enumerate(scores):
    item(f"q{i}", score=score)
report(score=sum(scores) / len(scores))
if a.extra:
    report(**{a.extra: 1.0})
"""


def test_a_harness_using_it_runs_end_to_end_and_an_undeclared_name_fails_the_repeat(tmp_path: Path) -> None:
    from test_command_workload import SPEC, propose, ptreg

    spec = {**SPEC, "command": ["python3", "harness.py", "--level", "{level}", "--seed", "{seed}"], "inputs": []}
    spec["arms"] = {"baseline": {"level": "3"}, "candidate": {"level": "6"}}
    project = tmp_path / "project"
    project.mkdir()
    (project / "harness.py").write_text(HARNESS)
    _freeze(project, spec, ptreg)
    propose(project, "levels", "toy-eval", 1)
    run = ptreg(project, "run", "levels", "--json")
    assert run.returncode == 0, run.stderr
    cells = {c["backend"]: c for c in json.loads(run.stdout)["results"]["cells"]}
    assert cells["baseline"]["metrics"]["score"]["mean"] == pytest.approx(0.3)
    assert cells["candidate"]["metrics"]["score"]["mean"] == pytest.approx(0.6)
    versus = cells["candidate"]["versus"]["baseline"]["score"]
    assert versus["paired_by"] == "item" and versus["n"] == 20
    # a harness reporting a name its evaluator does not declare stops at that call
    bad = {**spec, "name": "toy-eval-extra", "command": [*spec["command"], "--extra", "accuracy"]}
    (project / "extra.json").write_text(json.dumps(bad))
    assert ptreg(project, "evaluator", "freeze", "extra.json").returncode == 0
    propose(project, "extra", "toy-eval-extra", 2)
    failed = ptreg(project, "run", "extra", "--json")
    problems = [
        s["problem"]
        for c in json.loads(failed.stdout)["results"]["cells"]
        for s in c["metric_samples"]
        if s.get("problem")
    ]
    assert failed.returncode != 0 and len(problems) == 6
    assert all(
        "exited with status 1: 'ValueError: accuracy is not a metric the evaluator declares (it declares: score)" in p
        for p in problems
    )


def _freeze(project: Path, spec: dict[str, object], ptreg) -> None:
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    frozen = ptreg(project, "evaluator", "freeze", "spec.json")
    assert frozen.returncode == 0, frozen.stderr
