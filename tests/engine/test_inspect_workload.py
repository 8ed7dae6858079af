"""The inspect workload, offline: a task of 20 samples in the test's own project, two arms on
model APIs registered with Inspect's @modelapi in a file the task imports, run through the gate
with per-sample items paired across arms and the difference decided by the plan; existing .eval
logs read as a run's evidence, and a log edited since it was frozen refused by the gate.

Inspect is kept offline and inside the test's folder: HOME and the XDG folders point into
tmp_path, no telemetry hook is set, and the worker gives Inspect a scratch folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, block_after, plan_flags, ptreg_in_process
from ptreg.engine.workloads.discovery import spec_problem
from ptreg.records.evaluator import parse_spec

MODELS = '''\
"""Two offline models: one adds the numbers, one answers the first number only."""
from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, ModelUsage, modelapi


class Arithmetic(ModelAPI):
    def __init__(self, model_name, base_url=None, api_key=None, config=GenerateConfig(), **kwargs):
        super().__init__(model_name, base_url, api_key, [], config)

    async def generate(self, input, tools, tool_choice, config):
        # what the spec set reaches the model: the round's seed, and the adder's max_tokens
        if config.seed is None or (self.model_name == "adder" and config.max_tokens != 8):
            raise RuntimeError(f"generate config not passed: seed {config.seed}, max_tokens {config.max_tokens}")
        first, second = (int(n) for n in input[-1].text.split("+"))
        answer = first + second if self.model_name == "adder" or first % 4 == 0 else first
        output = ModelOutput.from_content(self.model_name, str(answer))
        output.usage = ModelUsage(input_tokens=3, output_tokens=len(str(answer)), total_tokens=3 + len(str(answer)))
        return output


@modelapi(name="ptregtest")
def ptregtest():
    return Arithmetic
'''
TASK = """\
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate

import offline_models  # registers the ptregtest model API


@task
def arith(n: int = 10):
    samples = [Sample(input=f"{i}+{i % 3 + 1}", target=str(i + i % 3 + 1), id=f"q{i}") for i in range(n)]
    return Task(dataset=samples, solver=generate(), scorer=match())
"""
SPEC = {
    "name": "arith-inspect",
    "workload": "inspect",
    "task": "evals/arith.py@arith",
    "task_args": {"n": 20},
    "arms": {"first": {"model": "ptregtest/first"}, "adder": {"model": "ptregtest/adder", "max_tokens": "8"}},
    "baseline": "first",
    "metrics": {"arith__match": {"better": "higher", "unit": "fraction"}},
    "repeats": 1,
    "seed": 0,
    "seeds": [3, 4],
    "timeout_seconds": 300,
}
OFFLINE = {
    # nowhere to send anything: no proxy reaches out, and no hook is configured
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "",
}


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
    home = tmp_path / "home"
    for folder in ("data", "cache", "config"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    env.update(
        OFFLINE,
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_CONFIG_HOME=str(home / "config"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    return env


def ptreg(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # in this process: the evaluations run in the run's worker and commands, as ever
    found = ptreg_in_process(project, list(args), environment(project.parent))
    assert "Traceback" not in found.stdout + found.stderr, found.stderr
    return found


def project_with(tmp_path: Path, spec: dict[str, object]) -> Path:
    project = tmp_path / "project"
    (project / "evals").mkdir(parents=True)
    (project / "evals" / "offline_models.py").write_text(MODELS)
    (project / "evals" / "arith.py").write_text(TASK)
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    return project


def freeze_and_propose(project: Path, worked_if: str) -> None:
    frozen = ptreg(project, "evaluator", "freeze", "spec.json")
    assert frozen.returncode == 0, frozen.stdout + frozen.stderr
    assert plan_flags(project / "attempts", "arith-inspect")  # the helper finds the evaluator just frozen
    done = ptreg(
        project,
        *("new", "--no-input", "--id", "adder-vs-first", "--name", "adder against first", "--family", "eval"),
        *("--kind", "model-evaluation", "--question", "Does the adder answer more sums than the first-number rule?"),
        *("--method", "vendor-blas", "--objective", "command-latency", "--evaluator", "arith-inspect"),
        *("--budget-seconds", "600", "--tracking-issue", "me/evals#1", "--worked-if", worked_if),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_models_are_compared_sample_by_sample_and_decided_by_the_plan(tmp_path: Path) -> None:
    project = project_with(tmp_path, SPEC)
    before = set(os.listdir(tempfile_root()))
    freeze_and_propose(project, "diff(arith__match, arm=adder, over=first) > 0.2")
    run = ptreg(project, "run", "adder-vs-first", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout)["results"]
    assert results["status"] == "complete", results
    cells = {c["backend"]: c for c in results["cells"]}
    # the rule answers q0, q4, q8, q12, q16 right: 5 of 20; the adder all 20
    assert cells["first"]["metrics"]["arith__match"]["mean"] == pytest.approx(0.25)
    assert cells["adder"]["metrics"]["arith__match"]["mean"] == 1.0
    items = cells["adder"]["metric_samples"][0]["items"]["arith__match"]
    assert sorted(items) == sorted(f"arith/q{i}" for i in range(20))
    versus = cells["adder"]["versus"]["first"]["arith__match"]
    assert versus["paired_by"] == "item" and versus["n"] == 20 and versus["seeds"] == 2
    assert (versus["won"], versus["lost"], versus["tied"]) == (15, 0, 5)
    assert versus["estimate"] == pytest.approx(0.75) and versus["items_left_out"] == 0
    # usage beside the scores, per sample: the adder's longer answers cost output tokens
    tokens = cells["adder"]["versus"]["first"]["output_tokens"]
    assert tokens["paired_by"] == "item" and tokens["estimate"] > 0
    assert cells["first"]["metrics"]["input_tokens"]["mean"] == 3.0
    concluded = ptreg(
        project,
        *("conclude", "adder-vs-first", "--status", "worked", "--lesson", "the adder answers every sum"),
        *("--next-action", "none", "--confidence", "not-applicable"),
    )
    assert concluded.returncode == 0, concluded.stdout + concluded.stderr
    # Inspect wrote nothing into the project but the registry, and left no scratch folder behind
    written = {str(p.relative_to(project)) for p in project.rglob("*") if not p.is_relative_to(project / "attempts")}
    assert written - {"spec.json", "evals", "evals/arith.py", "evals/offline_models.py"} <= {
        "evals/__pycache__",
        *(f"evals/__pycache__/{p.name}" for p in (project / "evals" / "__pycache__").glob("*")),
    }
    assert not {n for n in set(os.listdir(tempfile_root())) - before if n.startswith("ptreg-inspect-")}
    # nor in the user's folders: its traces and view state went to the worker's scratch folder
    assert not [p for p in (tmp_path / "home").rglob("*") if p.is_file()]


def tempfile_root() -> str:
    import tempfile

    return tempfile.gettempdir()


def write_logs(project: Path) -> None:
    """Two .eval logs of the task, two epochs each, written by Inspect itself in a process of its own."""
    script = (
        "import sys; sys.path.insert(0, 'evals')\n"
        "from inspect_ai import eval\n"
        "import arith\n"
        "for model in ('first', 'adder'):\n"
        "    [log] = eval(arith.arith(n=20), model=f'ptregtest/{model}', log_dir='logs-raw', display='none', epochs=2, seed=1, max_tokens=8)\n"
        "    import shutil; shutil.copy(log.location, f'logs/{model}.eval')\n"
    )
    (project / "logs").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=project,
        env=environment(project.parent),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    subprocess.run(["rm", "-rf", str(project / "logs-raw")], check=True)


def test_existing_logs_are_a_runs_evidence_and_an_edited_log_is_refused_by_the_gate(tmp_path: Path) -> None:
    spec = {
        **{k: v for k, v in SPEC.items() if k not in ("task", "task_args", "seeds")},
        "arms": {"first": {"model": "ptregtest/first"}, "adder": {"model": "ptregtest/adder"}},
        "logs": {"first": "logs/first.eval", "adder": "logs/adder.eval"},
        "inputs": ["logs/first.eval", "logs/adder.eval"],
        "repeats": 2,
    }
    project = project_with(tmp_path, spec)
    write_logs(project)
    freeze_and_propose(project, "diff(arith__match, arm=adder, over=first) > 0.2")
    run = ptreg(project, "run", "adder-vs-first", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout)["results"]
    assert results["status"] == "complete", results
    versus = {c["backend"]: c for c in results["cells"]}["adder"]["versus"]["first"]["arith__match"]
    assert versus["paired_by"] == "item" and versus["n"] == 20 and versus["seeds"] == 2
    assert (versus["won"], versus["lost"], versus["tied"]) == (15, 0, 5)

    with (project / "logs" / "adder.eval").open("ab") as log:
        log.write(b"\0")
    gate = ptreg(project, "gate", "adder-vs-first")
    assert gate.returncode == 1
    assert "no longer verifies: input logs/adder.eval changed since it was frozen" in gate.stdout, gate.stdout


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"arms": {"first": {"model": "a/b", "api_key": "sk"}, "adder": {"model": "a/c"}}},
            "arm 'first': 'api_key' is not a setting of an inspect arm (model, temperature, top_p",
        ),
        ({"arms": {"first": {}, "adder": {"model": "a/c"}}}, "arm 'first' names no model"),
        ({"metrics": {}}, "declares each scorer's metric"),
        ({"task": "../outside.py"}, "must be a relative path"),
        ({"logs": {"first": "x.eval"}}, "logs must name one .eval log for each arm (first, adder)"),
        ({"logs": {"first": "x.eval", "adder": "y.eval"}}, "'x.eval' is not one of inputs"),
        ({"task_args": [1]}, "task_args must be an object"),
        (
            {"logs": {"first": "a.eval", "adder": "b.eval"}, "inputs": ["a.eval", "b.eval"]},
            "arm 'adder': an arm read from a log sets no generate config",
        ),
    ],
)
def test_a_spec_the_workload_cannot_run_is_one_line(change: dict[str, object], problem: str) -> None:
    spec = parse_spec({**SPEC, **change}, "spec.json")
    found = spec_problem(spec)
    assert found is not None and problem in found and "\n" not in found


def test_a_sample_one_arm_lacks_fails_the_run_naming_it() -> None:
    from ptreg.engine.workloads.evaluations import SampleScore, repeat_sample
    from ptreg.engine.workloads.inspect_eval import InspectWorkload
    from ptreg.records.run_results import Cell, Roles

    spec = parse_spec(SPEC, "spec.json")
    scores = [SampleScore("arith", f"q{i}", "match", 1.0, 3) for i in range(3)]
    usage = {"output_tokens": {"arith/q0": 2.0}}  # usage a sample lacks is left out, not a mismatch
    cells = [
        Cell(
            backend="first", config="all", status="measured", metric_samples=[repeat_sample(0, 3, scores, None, usage)]
        ),
        Cell(backend="adder", config="all", status="measured", metric_samples=[repeat_sample(0, 3, scores[:2])]),
    ]
    InspectWorkload().compare(spec, cells, Roles(reference="first", peer=None))
    for cell in cells:
        assert cell.status == "failed"
        assert cell.reason == (
            "samples unpaired across arms: seed 3, arith__match: arm 'first' scored 'arith/q2' and arm 'adder' did not"
        )
    cells[1].metric_samples = [repeat_sample(0, 3, scores)]
    cells[0].status = cells[1].status = "measured"
    InspectWorkload().compare(spec, cells, Roles(reference="first", peer=None))
    assert [c.status for c in cells] == ["measured", "measured"]
    assert cells[1].versus is not None and cells[1].versus["first"]["arith__match"].n == 3


def test_the_docs_show_this_tests_spec() -> None:
    page = REPO / "docs" / "workloads.md"
    label = "The spec of `tests/engine/test_inspect_workload.py`, a task of 20 sums and two model APIs of its own:"
    assert json.loads(block_after(page, page.read_text(encoding="utf-8"), label, "json")) == SPEC


def test_listing_and_checking_the_workload_imports_no_inspect() -> None:
    """Inspect is imported by the worker of a run of it, never by `ptreg workloads` or a spec's check."""
    script = (
        "import sys\n"
        "from ptreg.engine.workloads.discovery import describe_all, spec_problem\n"
        "from ptreg.records.evaluator import parse_spec\n"
        f"assert [w.available for w in describe_all() if w.name == 'inspect'] == [True]\n"
        f"assert spec_problem(parse_spec({SPEC!r}, 'spec.json')) is None\n"
        "print('inspect_ai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_without_inspect_the_workload_is_listed_as_not_installed_and_refused(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ptreg.engine.workloads import discovery

    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # what find_spec answers for a module not installed
    discovery.workload_named.cache_clear()
    try:
        shown = cli("workloads")
        assert shown.code == 0
        assert "inspect is unavailable: not installed: pip install 'ptreg[inspect]'" in " ".join(shown.out.split())
        listed = {w["name"]: w for w in json.loads(cli("workloads", "--json").out)}
        assert not listed["inspect"]["available"] and listed["command"]["available"]
        refused = spec_problem(parse_spec(SPEC, "spec.json"))
        assert refused == "workload 'inspect' is unavailable: not installed: pip install 'ptreg[inspect]'"
    finally:
        discovery.workload_named.cache_clear()
