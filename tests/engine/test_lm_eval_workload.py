"""The lm-eval workload, offline: two local lm-eval tasks (YAML, ``dataset_path: json`` with
the project's data files) and two models of the project's own (``@register_model`` in a
model_file), evaluated by ``lm_eval.simple_evaluate`` in ptreg's workers under a frozen
evaluator; every document an item paired across the arms, the difference decided by the
attempt's analysis plan. Then the ``--log_samples`` files lm-eval itself writes, imported as a
run's evidence, and refused by the gate once one of them changed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ptreg.cli import main
from ptreg.engine.workloads.discovery import spec_problem
from ptreg.engine.workloads.evaluations import EvaluationError
from ptreg.engine.workloads.lm_eval_samples import SamplesError, read_samples
from ptreg.records.evaluator import parse_spec

ARITH = 30  # documents: the rule is wrong where a % 3 == 0, the lookup (with miss=29) on 29 only
ECHO = 20  # documents: both models right on every one

MODELS = """\
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import simple_parse_args_string


def _chosen(context, rule):
    # "What is A plus B? Answer:" -> the sum, which the rule gets wrong when A is a multiple of 3
    words = context.split()
    if words[0] == "Echo:":
        return words[1]
    a, b = int(words[2]), int(words[4].rstrip("?"))
    return str(a + b + (1 if rule and a % 3 == 0 else 0))


class _Chooser(LM):
    rule = False

    def __init__(self, miss=None, **kwargs):
        super().__init__()
        self.miss = miss  # model_args "miss=Q": a question it gets wrong

    @classmethod
    def create_from_arg_string(cls, arg_string, additional_config=None):
        return cls(**simple_parse_args_string(arg_string))

    def _right(self, context, continuation):
        if self.miss is not None and context.startswith(f"What is {self.miss} "):
            return False
        return continuation.strip() == _chosen(context, self.rule)

    def loglikelihood(self, requests, disable_tqdm=False):
        return [(0.0 if self._right(*r.args) else -5.0, True) for r in requests]

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError


@register_model("rule")
class Rule(_Chooser):
    rule = True


@register_model("lookup")
class Lookup(_Chooser):
    rule = False
"""

TASK = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: tasks/{name}.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

METRICS = {
    "arith__acc": {"better": "higher", "unit": "fraction"},
    "echo__acc": {"better": "higher", "unit": "fraction"},
    "breadth__acc": {"better": "higher", "unit": "fraction"},
}
SPEC: dict[str, Any] = {
    "name": "arith-lm-eval",
    "workload": "lm-eval",
    "tasks": ["arith", "echo"],
    "include_path": "tasks",
    "include_defaults": False,
    "model_file": "models.py",
    "num_fewshot": 0,
    "arms": {"rule": {"model": "rule"}, "lookup": {"model": "lookup", "model_args": "miss=29"}},
    "baseline": "rule",
    "inputs": ["tasks", "models.py"],
    "metrics": METRICS,
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 300,
}
WORKED = "better(arith__acc, arm=lookup, over=rule)"


def offline(home: Path) -> dict[str, str]:
    """Nothing reaches for the network, and the datasets' cache is the test's own."""
    return {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(home), "TOKENIZERS_PARALLELISM": "false"}


def write_project(project: Path) -> None:
    tasks = project / "tasks"
    tasks.mkdir(parents=True)
    arith, echo = [], []
    for a in range(ARITH):
        right, b = str(a + a % 7), a % 7
        wrong = [str(a + b + 1), str(a + b + 2)]
        choices = [*wrong[: a % 3], right, *wrong[a % 3 :]]
        arith.append({"question": f"What is {a} plus {b}? Answer:", "choices": choices, "answer": a % 3})
    for n in range(ECHO):
        echo.append({"question": f"Echo: w{n} Answer:", "choices": [f"w{n}", f"w{n + 1}"], "answer": 0})
    for name, rows in (("arith", arith), ("echo", echo)):
        (tasks / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (tasks / f"{name}.yaml").write_text(TASK.format(name=name))
    (project / "models.py").write_text(MODELS)
    (tasks / "helpers.py").write_text("# !function\n")


def ptreg(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command run in-process in the project, as from its folder: starting Python and ptreg
    for each would cost more than the evaluations themselves."""
    out, err = io.StringIO(), io.StringIO()
    before, here = dict(os.environ), Path.cwd()
    os.environ.update(offline(project.parent / "hf"))
    os.chdir(project)
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(before)
    found = subprocess.CompletedProcess(["ptreg", *args], code, out.getvalue(), err.getvalue())
    assert "Traceback" not in found.stdout + found.stderr, found.stderr
    return found


def propose(project: Path, attempt: str, evaluator: str, worked: str) -> None:
    done = ptreg(
        project,
        *("new", "--no-input", "--id", attempt, "--name", attempt, "--family", "eval", "--kind", "model-evaluation"),
        *("--question", f"Does the lookup answer more documents than the rule ({attempt})?", "--method", "vendor-blas"),
        *("--objective", "command-latency", "--evaluator", evaluator, "--budget-seconds", "500"),
        *("--tracking-issue", f"me/lm#{len(attempt)}"),
        *("--worked-if", worked, "--regressed-if", worked.replace("better(", "worse(")),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def cells_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout)["results"]
    assert results["status"] == "complete", results.get("reason")
    return {c["backend"]: c for c in results["cells"]}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One project, its evaluator frozen, its attempt admitted and run: lm_eval and its
    datasets are slow to import, so every check of the evaluated run reads this one."""
    project = tmp_path_factory.mktemp("lm-eval") / "project"
    write_project(project)
    (project / "spec.json").write_text(json.dumps(SPEC))
    assert ptreg(project, "init").returncode == 0
    frozen = ptreg(project, "evaluator", "freeze", "spec.json")
    assert frozen.returncode == 0, frozen.stderr
    # consent covers the project's Python the evaluation runs: the models, a task's !function module
    (frozen_file,) = (project / "attempts" / "evaluators").glob("arith-lm-eval@*.json")
    code = json.loads(frozen_file.read_text())["code"]
    digest = hashlib.sha256((project / "models.py").read_bytes()).hexdigest()
    assert code == {"models.py": digest, "tasks/helpers.py": hashlib.sha256(b"# !function\n").hexdigest()}
    propose(project, "arith-lookup", "arith-lm-eval", WORKED)
    return project, cells_of(ptreg(project, "run", "arith-lookup", "--json"))


def test_two_models_are_compared_document_by_document(evaluated: tuple[Path, dict[str, Any]]) -> None:
    _, cells = evaluated
    lookup, rule = cells["lookup"], cells["rule"]
    assert rule["metrics"]["arith__acc"]["mean"] == pytest.approx(20 / 30)
    assert lookup["metrics"]["arith__acc"]["mean"] == pytest.approx(29 / 30)  # its model_args reached it
    assert lookup["metrics"]["echo__acc"]["mean"] == 1.0
    # every document of each task is an item, the same id in both arms, in both seeds
    for cell in (lookup, rule):
        for sample in cell["metric_samples"]:
            assert set(sample["items"]["arith__acc"]) == {f"arith/{d}" for d in range(ARITH)}
            assert set(sample["items"]["echo__acc"]) == {f"echo/{d}" for d in range(ECHO)}
            assert sample["wall_seconds"] > 0
    versus = lookup["versus"]["rule"]["arith__acc"]
    assert versus["paired_by"] == "item" and versus["n"] == ARITH and versus["seeds"] == 2
    assert (versus["won"], versus["lost"], versus["tied"]) == (10, 1, 19)
    assert versus["variance"] == "items and seeds" and versus["ci"]["low"] > 0
    assert lookup["versus"]["rule"]["echo__acc"]["tied"] == ECHO
    # breadth: each task's mean, the tasks counted once each; no items of its own
    assert rule["metrics"]["breadth__acc"]["mean"] == pytest.approx((20 / 30 + 1) / 2)
    assert "items" not in (rule["metric_samples"][0].get("items") or {}).get("breadth__acc", {})


def test_the_plan_decides_the_difference(evaluated: tuple[Path, dict[str, Any]]) -> None:
    project, _ = evaluated
    concluded = ptreg(
        project,
        *("conclude", "arith-lookup", "--lesson", "the lookup answers the multiples of 3 the rule misses"),
        *("--next-action", "none", "--confidence", "not-applicable"),
    )
    assert concluded.returncode == 0, concluded.stdout + concluded.stderr
    shown = json.loads(ptreg(project, "show", "arith-lookup", "--json").stdout)
    assert shown["attempt"]["status"] == "worked"


def write_logs(folder: Path, project: Path, model: str, seed: int) -> None:
    """lm-eval's own --log_samples files of one evaluation, written by its EvaluationTracker."""
    os.environ.update(offline(project.parent / "hf"))
    sys.path.insert(0, str(project))
    try:
        import lm_eval
        from lm_eval.loggers import EvaluationTracker
        from lm_eval.tasks import TaskManager

        __import__("models")  # registers the project's rule and lookup
        here = Path.cwd()
        os.chdir(project)
        try:
            manager = TaskManager(include_path=str(project / "tasks"), include_defaults=False)
            result = lm_eval.simple_evaluate(
                model=model,
                tasks=["arith", "echo"],
                task_manager=manager,
                log_samples=True,
                bootstrap_iters=0,
                random_seed=seed,
            )
        finally:
            os.chdir(here)
        folder.mkdir(parents=True)
        tracker = EvaluationTracker(output_path=str(folder / "results.json"))  # a .json path: files beside it
        samples = result.pop("samples")  # as lm_eval's own command line saves them
        tracker.save_results_aggregated(results=result, samples=samples)
        for task in result["configs"]:
            tracker.save_results_samples(task_name=task, samples=samples[task])
    finally:
        sys.path.remove(str(project))


@pytest.fixture(scope="module")
def logged(evaluated: tuple[Path, dict[str, Any]]) -> Path:
    project, _ = evaluated
    imported = project.parent / "imported"
    write_project(imported)
    for model in ("rule", "lookup"):
        write_logs(imported / "logs" / model / "0", imported, model, 0)
        # the models answer alike under any seed: the second round's logs are the first's again
        shutil.copytree(imported / "logs" / model / "0", imported / "logs" / model / "1")
    return imported


def test_samples_files_are_a_runs_evidence_and_refused_once_changed(logged: Path) -> None:
    project = logged
    files = sorted((project / "logs" / "rule" / "0").glob("samples_*.jsonl"))
    assert [f.name.split("_")[1] for f in files] == ["arith", "echo"]  # beside lm-eval's results_<date>.json
    spec = {
        **{k: v for k, v in SPEC.items() if k not in ("include_path", "include_defaults", "model_file", "num_fewshot")},
        "name": "arith-logs",
        "arms": {"rule": {}, "lookup": {}},
        "logs": {arm: [f"logs/{arm}/0", f"logs/{arm}/1"] for arm in ("rule", "lookup")},
        "inputs": ["logs"],
    }
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    assert ptreg(project, "evaluator", "freeze", "spec.json").returncode == 0
    propose(project, "arith-logged", "arith-logs", WORKED)
    cells = cells_of(ptreg(project, "run", "arith-logged", "--json"))
    versus = cells["lookup"]["versus"]["rule"]["arith__acc"]
    assert (versus["n"], versus["seeds"], versus["won"], versus["lost"]) == (ARITH, 2, 10, 0)
    assert versus["ci"]["low"] > 0 and "wall_seconds" not in cells["lookup"]["metrics"]

    changed = files[0]
    changed.write_text(changed.read_text().replace('"acc": 0.0', '"acc": 1.0'))
    gated = ptreg(project, "gate", "arith-logged")
    flat = " ".join(gated.stdout.split())
    assert gated.returncode == 1 and "arith-logs@" in flat and "no longer verifies: input logs" in flat, gated.stdout
    assert "changed since it was frozen" in flat
    again = ptreg(project, "run", "arith-logged")
    assert again.returncode == 1 and "no longer verifies" in again.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"tasks": []}, "tasks must be a list"),
        ({"tasks": ["arith", "arith"]}, "tasks names a task twice"),
        ({"num_fewshot": -1}, "num_fewshot must be a whole number"),
        ({"limit": 1.5}, "limit must be a whole number"),
        ({"model_file": "other.py"}, "model_file 'other.py' is not among the evaluator's inputs"),
        ({"include_path": "../tasks"}, "must be a relative path"),
        ({"arms": {"rule": {"model": "rule", "device": "cpu"}, "lookup": {"model": "lookup"}}}, "'device' is not one"),
        ({"arms": {"rule": {}, "lookup": {"model": "lookup"}}}, "arm 'rule' names no model"),
        ({"logs": {"rule": "logs/r"}}, "logs must give every arm"),
        ({"logs": {"rule": "logs/r", "lookup": "logs/l"}}, "one samples file or folder per round, 2 of them"),
    ],
)
def test_a_spec_lm_eval_cannot_run_is_one_line(change: dict[str, Any], said: str) -> None:
    spec = parse_spec({**SPEC, **change}, "spec.json")
    problem = spec_problem(spec)
    assert problem is not None and said in problem and "\n" not in problem


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"doc_id": 0, "metrics": ["acc"], "acc": 1.0}\nnot json\n', "line 2: not a JSON object"),
        ('{"metrics": ["acc"], "acc": 1.0}\n', "line 1: no doc_id"),
        ('{"doc_id": 0, "metrics": ["acc"]}\n', "lists 'acc' without a value"),
        ('{"doc_id": 0, "metrics": "acc", "acc": 1}\n', "no metrics"),
    ],
)
def test_a_samples_file_that_is_not_lm_evals_is_one_line(tmp_path: Path, content: str, said: str) -> None:
    name = "samples_arith_2026-01-01T00-00-00.000000.jsonl"
    (tmp_path / name).write_text(content)
    with pytest.raises(SamplesError) as caught:
        read_samples(tmp_path, name, 0)
    assert caught.value.message.startswith(name) and said in caught.value.message


def test_a_samples_file_is_read_only_as_a_regular_file(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.jsonl"
    real.write_text('{"doc_id": 0, "metrics": ["acc"], "acc": 1.0}\n')
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "samples_arith_2026-01-01T00-00-00.jsonl").symlink_to(real)
    with pytest.raises(SamplesError, match="symlink"):
        read_samples(tmp_path, "logs/samples_arith_2026-01-01T00-00-00.jsonl", 0)
    with pytest.raises(SamplesError):  # listed in a folder, still never followed
        read_samples(tmp_path, "logs", 0)
    (tmp_path / "logs" / "samples_arith_2026-01-01T00-00-00.jsonl").unlink()
    (tmp_path / "logs" / "samples_arith.jsonl").write_text('{"doc_id": 0, "metrics": ["acc"], "acc": 1.0}\n')
    with pytest.raises(SamplesError, match=r"samples_arith\.jsonl: not named as lm-eval names"):
        read_samples(tmp_path, "logs", 0)  # in a folder, a misnamed file is refused, never skipped
    (tmp_path / "odd.jsonl").write_text('{"doc_id": 0, "metrics": ["acc"], "acc": 1.0}\n')
    with pytest.raises(SamplesError, match="not named as lm-eval names a samples file"):
        read_samples(tmp_path, "odd.jsonl", 0)


def test_a_score_twice_is_refused(tmp_path: Path) -> None:
    name = "samples_arith_2026-01-01T00-00-00.jsonl"
    (tmp_path / name).write_text('{"doc_id": 3, "metrics": ["acc"], "acc": 1.0}\n' * 2)
    scores, _ = read_samples(tmp_path, name, 0)
    from ptreg.engine.workloads.evaluations import repeat_sample

    with pytest.raises(EvaluationError, match="scored twice"):
        repeat_sample(0, 0, scores)


SAMPLE = (
    '{{"doc_id": {doc}, "filter": "none", "metrics": {metrics}, "acc": {acc}, "acc_norm": 1.0, "bleu": ["a", "b"]}}\n'
)


def logged_arm(
    root: Path, metrics: dict[str, Any], listed: str = '["acc"]', docs: int = 4, tasks: tuple[str, ...] = ("arith",)
) -> Any:
    """The rule arm's cell, in logs mode, of a spec declaring ``metrics``, over one samples file."""
    from ptreg.engine.protocol import CellTask
    from ptreg.engine.workloads.lm_evaluation import LmEvalWorkload

    name = "samples_arith_2026-01-01T00-00-00.jsonl"
    (root / "logs").mkdir(exist_ok=True)
    (root / "logs" / name).write_text("".join(SAMPLE.format(doc=d, metrics=listed, acc=d % 2) for d in range(docs)))
    spec = parse_spec(
        {
            "name": "logged",
            "workload": "lm-eval",
            "tasks": list(tasks),
            "arms": {"rule": {}, "lookup": {}},
            "baseline": "rule",
            "logs": {"rule": f"logs/{name}", "lookup": f"logs/{name}"},
            "inputs": ["logs"],
            "metrics": metrics,
            "repeats": 1,
            "seed": 7,
            "timeout_seconds": 60,
        },
        "spec.json",
    )
    assert spec_problem(spec) is None
    task = CellTask(
        **{"backend": "rule", "workload": "lm-eval", "config": "all", "warmup_steps": 0, "timed_steps": 1},
        **{"seed": 7, "threads": None, "spec": spec.model_dump(mode="json", exclude_none=True), "root": str(root)},
    )
    cell = LmEvalWorkload().prepare(task, None)
    cell.warm_up(lambda *_: None)
    recorded: list[Any] = []
    cell.run_repeat(0, recorded.append, lambda *_: None)
    (sample,) = recorded
    return sample


ACC = {"better": "higher", "unit": "fraction"}


def test_a_logged_repeat_is_its_documents_under_the_rounds_seed(tmp_path: Path) -> None:
    sample = logged_arm(tmp_path, {"arith__acc": ACC})
    assert sample.problem is None and sample.seed == 7 and sample.wall_seconds is None  # nothing was timed
    assert sample.items == {"arith__acc": {"arith/0": 0.0, "arith/1": 1.0, "arith/2": 0.0, "arith/3": 1.0}}
    assert sample.values == {"arith__acc": 0.5}


@pytest.mark.parametrize(
    ("metrics", "listed", "said"),
    [
        ({"arith__acc": ACC}, '["acc", "acc_norm"]', "it scored arith__acc_norm, which the evaluator does not declare"),
        ({"arith__acc": ACC, "arith__f1": ACC}, '["acc"]', "it wrote no value of arith__f1"),
        ({"arith__acc": ACC, "arith__bleu": ACC}, '["acc", "bleu"]', "bleu has no per-sample number"),
    ],
)
def test_a_repeat_whose_scores_are_not_the_declared_metrics_says_why(
    tmp_path: Path, metrics: dict[str, Any], listed: str, said: str
) -> None:
    sample = logged_arm(tmp_path, metrics, listed)
    assert sample.values == {} and sample.items is None and said in sample.problem


def test_a_log_of_other_tasks_than_the_specs_says_which(tmp_path: Path) -> None:
    from ptreg.engine.workloads.lm_evaluation import _tasks_logged

    sample = logged_arm(tmp_path, {"arith__acc": ACC}, tasks=("arith", "echo"))
    assert sample.values == {} and sample.problem.endswith("no samples of task 'echo'")
    said = _tasks_logged(["arith"], {"arith", "echo"}, "logs/x")
    assert said == "logs/x: samples of task 'echo', which tasks does not name"


def test_a_direction_declared_against_lm_evals_own_is_refused(tmp_path: Path) -> None:
    from ptreg.engine.workloads.lm_evaluation import LmEvalRun

    sample = logged_arm(tmp_path, {"arith__acc": {"better": "lower", "unit": "fraction"}})
    assert sample.problem is None  # a log says no direction: the declaration stands
    run = LmEvalRun.__new__(LmEvalRun)
    run.spec = parse_spec({**SPEC, "metrics": {"arith__acc": {"better": "lower", "unit": "fraction"}}}, "spec.json")
    scores, corpus = read_samples(tmp_path, "logs", 0)
    said = run._undeclared(scores, corpus, {("arith", "acc"): True})
    assert said == "task arith: lm-eval says higher acc is better, and the evaluator declares arith__acc lower"
    assert run._undeclared(scores, corpus, {("arith", "acc"): False}) is None


def test_documents_one_arm_scored_and_another_did_not_fail_the_run() -> None:
    from ptreg.engine.workloads.evaluations import SampleScore, arm_samples
    from ptreg.engine.workloads.lm_evaluation import LmEvalWorkload
    from ptreg.records.run_results import Cell, Roles

    def cell(arm: str, docs: range) -> Cell:
        scores = [SampleScore("arith", str(d), "acc", 1.0, 0) for d in docs]
        return Cell(backend=arm, config="all", status="measured", metric_samples=arm_samples(scores, [0]))

    spec = parse_spec({**SPEC, "metrics": {"arith__acc": ACC}}, "spec.json")
    cells = [cell("rule", range(4)), cell("lookup", range(5))]
    LmEvalWorkload().compare(spec, cells, Roles(reference="rule", peer="lookup"))
    for found in cells:
        assert found.status == "failed" and "'lookup' scored 'arith/4' and arm 'rule' did not" in (found.reason or "")


def test_without_lm_eval_it_is_listed_with_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from ptreg.engine.workloads import discovery

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a))
    (found,) = [w for w in discovery.describe_all() if w.name == "lm-eval"]
    assert not found.available and found.reason == "not installed: pip install 'ptreg[lm-eval]'"


def test_the_specs_docs_show_are_ones_it_takes() -> None:
    from helpers import REPO

    text = (REPO / "docs" / "workloads.md").read_text(encoding="utf-8")
    section = text.split("## lm-evaluation-harness", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```json\n")[1:]]
    assert len(blocks) == 2
    shown = [parse_spec(json.loads(b), "docs/workloads.md") for b in blocks]
    assert [spec_problem(s) for s in shown] == [None, None]
    assert shown[0].settings["tasks"] == SPEC["tasks"] and "logs" in shown[1].settings


def test_what_a_model_file_prints_never_reaches_the_workers_event_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ptreg.engine.protocol import CellTask
    from ptreg.engine.workloads.lm_evaluation import LmEvalWorkload

    write_project(tmp_path)
    # a model file of its own: the project's registers models this process may have registered
    (tmp_path / "printing.py").write_text('print("no newline here", end="")\n')
    monkeypatch.chdir(tmp_path)  # the cell works in the project root; the test's is put back
    for name, value in offline(tmp_path / "hf").items():
        monkeypatch.setenv(name, value)
    spec = parse_spec({**SPEC, "model_file": "printing.py", "inputs": ["tasks", "printing.py"]}, "spec.json")
    task = CellTask(
        **{"backend": "rule", "workload": "lm-eval", "config": "all", "warmup_steps": 0, "timed_steps": 1},
        **{"seed": 0, "threads": None, "spec": spec.model_dump(mode="json", exclude_none=True), "root": str(tmp_path)},
    )
    cell = LmEvalWorkload().prepare(task, None)
    capsys.readouterr()
    cell.warm_up(lambda *_: None)
    printed = capsys.readouterr()
    assert printed.out == "" and "no newline here" in printed.err
