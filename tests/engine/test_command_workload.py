"""The command workload, end to end as issue 32 accepts it: the spec form freezes, the gate
admits it, `ptreg run` measures every arm, `show` says which way is better, and a condition on
the difference is accepted by `conclude`; an edited input fails the gate naming it; a command
that hangs is killed at its timeout with nothing left running; garbage is one line; and an
evaluator that arrived by import runs only once trusted."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import patient, plan_flags, ptreg_in_process
from ptreg.engine.workloads.arms import compare_arms
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.engine.workloads.command_output import read_items, read_metrics
from ptreg.engine.workloads.discovery import spec_problem
from ptreg.engine.workloads.named_code import named_code, python_path
from ptreg.engine.workloads.stages import placeholders
from ptreg.records.evaluator import ArmsSpec, MetricDeclaration, parse_spec
from ptreg.records.run_results import RESULTS_VERSION, MetricSample

TOY = """\
import argparse, json, os, random
p = argparse.ArgumentParser()
p.add_argument("--level", type=int)
p.add_argument("--seed", type=int)
a = p.parse_args()
items = [json.loads(line) for line in open("items.jsonl")]
rng = random.Random(a.seed * 1000 + a.level)
scores = []
with open(os.environ["PTREG_ITEMS"], "w") as out:
    for item in items:
        score = 1 if rng.random() < a.level / 10 else 0
        scores.append(score)
        out.write(json.dumps({"item": item["id"], "score": score}) + "\\n")
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"score": sum(scores) / len(scores)}) + "\\n")
"""
SPEC = {
    "name": "toy-eval",
    "workload": "command",
    "command": ["python3", "toy_eval.py", "--level", "{level}", "--seed", "{seed}"],
    "arms": {"baseline": {"level": "3"}, "candidate": {"level": "6"}},
    "baseline": "baseline",
    "inputs": ["items.jsonl"],
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 3,
    "seed": 0,
    "timeout_seconds": 60,
}


def ptreg(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ptreg in the project, with this interpreter's scripts first on PATH (the commands' python3).
    In this process: what is tested is the command workload, not the start of a program; the
    processes that matter (the worker, the commands) are started by the run as ever."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    found = ptreg_in_process(project, list(args), env)
    assert "Traceback" not in found.stdout + found.stderr, found.stderr
    return found


def propose(project: Path, attempt: str, evaluator: str, issue: int) -> None:
    done = ptreg(
        project,
        *("new", "--no-input", "--id", attempt, "--name", attempt, "--family", "eval", "--kind", "model-evaluation"),
        *("--question", f"Does {attempt} separate the arms, question {issue}?", "--method", "vendor-blas"),
        *("--objective", "command-latency", "--evaluator", evaluator, "--budget-seconds", "200"),
        *("--tracking-issue", f"me/toy#{issue}"),
        *plan_flags(project / "attempts", evaluator),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def project_with(tmp_path: Path, spec: dict[str, object], name: str = "project") -> Path:
    project = tmp_path / name
    project.mkdir()
    (project / "toy_eval.py").write_text(TOY)
    (project / "items.jsonl").write_text("".join(json.dumps({"id": f"q{i}"}) + "\n" for i in range(60)))
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    frozen = ptreg(project, "evaluator", "freeze", "spec.json")
    assert frozen.returncode == 0, frozen.stderr
    return project


def test_the_acceptance_spec_freezes_runs_shows_and_concludes(tmp_path: Path) -> None:
    project = project_with(tmp_path, SPEC)
    propose(project, "toy-level", "toy-eval", 1)
    run = ptreg(project, "run", "toy-level", "--json")
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)["results"]
    assert results["status"] == "complete" and results["results_version"] == RESULTS_VERSION
    cells = {c["backend"]: c for c in results["cells"]}
    assert set(cells) == {"baseline", "candidate"}
    for cell in cells.values():
        assert cell["metrics"]["score"]["n"] == 3
        assert cell["metrics"]["wall_seconds"]["n"] == 3 and cell["metrics"]["peak_memory_mb"]["mean"] > 0
    versus = cells["candidate"]["versus"]["baseline"]["score"]
    assert versus["paired_by"] == "item" and versus["n"] == 60 and versus["seeds"] == 3
    assert versus["won"] + versus["lost"] + versus["tied"] == 60
    assert versus["variance"] == "items and seeds" and versus["items_left_out"] == 0
    assert cells["baseline"]["metrics"]["wall_seconds"]["scale"] == "log"
    shown = ptreg(project, "show", "toy-level").stdout
    assert "score (fraction, higher is better; difference to baseline)" in shown
    assert "items and seeds" in shown and "rounds; log scale" in shown
    concluded = ptreg(
        project,
        *("conclude", "toy-level", "--status", "worked", "--lesson", "level 6 scores higher"),
        *("--next-action", "none", "--confidence", "not-applicable"),
        *("--continue-if", "diff(score, arm=candidate, over=baseline) > 0"),
    )
    assert concluded.returncode == 0, concluded.stderr
    assert "continue-if" in concluded.stdout
    # the site draws a chart per metric, each titled with its direction
    built = ptreg(project, "site", "-o", "site")
    assert built.returncode == 0, built.stderr
    page = next((project / "site" / "runs" / "toy-level").glob("*.html")).read_text(encoding="utf-8")
    assert "score: each arm&#39;s mean, 95% interval (higher is better; intervals over items and seeds)" in page
    assert "score: each arm minus baseline, paired (higher is better; 0 is no change)" in page
    assert "wall_seconds: each arm over baseline (lower is better; 1 is no change)" in page
    # and compare reads two runs of arms metric by metric
    propose(project, "toy-level-again", "toy-eval", 9)
    assert ptreg(project, "run", "toy-level-again").returncode == 0
    compared = ptreg(project, "compare", "toy-level", "toy-level-again", "--json", "--fail-on-regression")
    # the times have no history of A's code yet, so no verdict: a gate does not pass on that
    assert compared.returncode == 1 and "of B given no verdict" in compared.stderr, compared.stderr
    compared = ptreg(
        project, "compare", "toy-level", "toy-level-again", "--json", "--fail-on-regression", "--no-verdict=pass"
    )
    assert compared.returncode == 0, compared.stdout + compared.stderr
    score = next(
        m for m in json.loads(compared.stdout)["metrics"] if m["arm"] == "candidate" and m["metric"] == "score"
    )
    assert score["estimate"] == 0 and score["paired_by"] == "item" and score["verdict"] == "no difference resolved"


def test_an_edited_input_fails_the_gate_naming_it_and_run_refuses(tmp_path: Path) -> None:
    project = project_with(tmp_path, SPEC)
    propose(project, "toy-level", "toy-eval", 1)
    with (project / "items.jsonl").open("a") as items:
        items.write(json.dumps({"id": "extra"}) + "\n")
    gate = ptreg(project, "gate", "toy-level")
    assert gate.returncode == 1 and "input items.jsonl changed since it was frozen" in gate.stdout
    run = ptreg(project, "run", "toy-level")
    assert run.returncode == 1 and "items.jsonl" in run.stderr
    assert not (project / "attempts" / "runs" / "toy-level").exists()


def test_a_hanging_command_is_killed_with_all_it_started_and_garbage_is_one_line(tmp_path: Path) -> None:
    script = (
        "import os, subprocess, sys, time\n"
        "if sys.argv[1] == 'hang':\n"
        "    child = subprocess.Popen(['sleep', '300'])\n"
        "    escaped = subprocess.Popen(['sleep', '301'], start_new_session=True)\n"
        "    open('child.pid', 'w').write(f'{child.pid} {escaped.pid}')\n"
        "    time.sleep(300)\n"
        "open(os.environ['PTREG_METRICS'], 'w').write('not json\\n')\n"
    )
    spec = {
        **SPEC,
        "name": "misbehaves",
        "command": ["python3", "bad.py", "{mode}"],
        "arms": {"hangs": {"mode": "hang"}, "garbage": {"mode": "garbage"}},
        "baseline": "hangs",
        "inputs": [],
        "repeats": 1,
        "timeout_seconds": 3,
    }
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text(script)
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    assert ptreg(project, "evaluator", "freeze", "spec.json").returncode == 0
    propose(project, "misbehaving", "misbehaves", 2)
    run = ptreg(project, "run", "misbehaving", "--json")
    assert run.returncode == 1
    results = json.loads(run.stdout)["results"]
    reasons = {c["backend"]: c["reason"] for c in results["cells"]}
    assert reasons["hangs"] == "repeat 0 (seed 0): killed at its timeout of 3 s"
    assert reasons["garbage"].startswith("repeat 0 (seed 0): line 1 of its metrics is not JSON")
    # its child in its group, and one it started in a session of its own, both ended with it
    for child in map(int, (project / "child.pid").read_text().split()):
        deadline = time.monotonic() + patient(60)
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.1)
        assert not _alive(child), f"the command's child {child} outlived its timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split(") ")[-1][:1] != "Z"


def test_an_imported_command_evaluator_runs_only_once_trusted(tmp_path: Path) -> None:
    spec = {**SPEC, "command": ["python3", "-c", "open('ran', 'w').write('x')"], "arms": {"baseline": {}}}
    source = project_with(tmp_path, spec, "source")
    bundle = tmp_path / "bundle.tar.gz"
    assert ptreg(source, "export", "--bundle", str(bundle)).returncode == 0
    target = tmp_path / "target"
    target.mkdir()
    for name in ("items.jsonl", "toy_eval.py"):  # a clone: the same files (Python -c imports from the root)
        shutil.copy(source / name, target / name)
    assert ptreg(target, "init").returncode == 0
    assert ptreg(target, "import", str(bundle)).returncode == 0
    ref = json.loads(ptreg(target, "evaluator", "list", "--json").stdout)[0]["ref"]
    propose(target, "imported", "toy-eval", 3)
    env_home = tmp_path / "someone-else"
    os.environ["PTREG_CONFIG_HOME"] = str(env_home)  # another user's configuration: no consent
    refused = ptreg(target, "run", "imported")
    assert refused.returncode == 2 and "ptreg evaluator trust " + ref in refused.stderr
    assert "open('ran'" in refused.stderr and not (target / "ran").exists()
    assert ptreg(target, "evaluator", "trust", ref).returncode == 0
    assert json.loads((env_home / "trusted-evaluators.json").read_text())["sha256"]
    ran = ptreg(target, "run", "imported")
    assert (target / "ran").exists(), ran.stderr


# --------------------------------------------------------------------------- the pieces


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"command": "python3 x.py"}, "command must be a non-empty list of strings"),
        ({"command": ["x", "{level:>3}"]}, "is not a plain {name}"),
        ({"command": ["x", "{missing}"]}, "command names {missing}, which arm 'baseline' does not give"),
        ({"shell": True}, "field 'shell' is not one of workload 'command''s own"),
        ({"workload": "nothing-here"}, "no workload 'nothing-here' is registered"),
    ],
)
def test_spec_problems_are_one_line(change: dict[str, object], problem: str) -> None:
    spec = parse_spec({**SPEC, **change}, "spec.json")
    found = spec_problem(spec)
    assert found is not None and problem in found and "\n" not in found


def test_placeholders_are_plain_names() -> None:
    assert placeholders(["a{x}b", "{seed}", "{{literal}}"]) == ["x", "seed"]


def test_what_a_command_writes_is_refused_in_one_line(tmp_path: Path) -> None:
    declared = {"score": MetricDeclaration(better="higher", unit="fraction")}
    metrics = tmp_path / "metrics"
    for text, problem in [
        ("", "it wrote no metrics"),
        ('{"other": 1}\n', "names 'other', which the evaluator does not declare"),
        ('{"score": true}\n', "score is not a finite number"),
        ('{"score": NaN}\n', "score is not a finite number"),
        ("[1]\n", "is not a JSON object"),
        ('{"score": 1e999}\n', "score is not a finite number"),
        ('{"score": ' + "9" * 4000 + "}\n", "score is not a finite number"),  # an int no float holds
        ("[" * 100_000 + "\n", "line 1 of its metrics is nested too deeply"),
    ]:
        metrics.write_text(text)
        with pytest.raises(ValueError, match=problem):
            read_metrics(metrics, declared)
    # what a child left running may put there after the command exits: never followed or waited on
    metrics.unlink()
    metrics.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="its metrics file: is a symlink; not followed"):
        read_metrics(metrics, declared)
    metrics.unlink()
    os.mkfifo(metrics)
    with pytest.raises(ValueError, match="its metrics file: not a regular file; not read"):
        read_metrics(metrics, declared)
    metrics.unlink()
    metrics.write_text('{"score": 0.5}\n{"score": 0.75}\n')
    assert read_metrics(metrics, declared) == {"score": 0.75}  # the last value stands
    items = tmp_path / "items"
    items.write_text('{"item": "a", "score": 1}\n{"item": "a", "score": 0}\n')
    with pytest.raises(ValueError, match="a second time"):
        read_items(items, declared)


def test_a_difference_is_paired_by_item_after_averaging_the_seeds() -> None:
    declaration = MetricDeclaration(better="higher", unit="fraction")

    def sample(repeat: int, scores: dict[str, float]) -> MetricSample:
        return MetricSample(repeat=repeat, seed=repeat, values={"score": 0.0}, items={"score": scores})

    mine = [sample(0, {"a": 1, "b": 1, "c": 0}), sample(1, {"a": 1, "b": 0, "c": 0})]
    theirs = [sample(0, {"a": 0, "b": 1, "c": 0}), sample(1, {"a": 0, "b": 1, "c": 0})]
    found = compare_arms(mine, theirs, "score", declaration)
    assert found is not None and found.paired_by == "item" and found.n == 3 and found.seeds == 2
    # per item: a +1, b -0.5, c 0
    assert found.estimate == pytest.approx(0.5 / 3)
    assert (found.won, found.lost, found.tied) == (1, 1, 1)


def test_a_failing_command_is_named_by_its_last_words_however_much_it_printed(tmp_path: Path) -> None:
    spec = {
        **SPEC,
        "name": "chatty",
        "command": [
            "python3",
            "-c",
            "import sys; sys.stdout.write('x' * 3_000_000 + '\\nfinal words\\n'); sys.exit(3)",
        ],
        "arms": {"baseline": {}},
        "inputs": [],
        "repeats": 1,
    }
    project = project_with(tmp_path, spec)
    propose(project, "chatty", "chatty", 4)
    run = ptreg(project, "run", "chatty", "--json")
    assert run.returncode == 1
    (cell,) = json.loads(run.stdout)["results"]["cells"]
    assert cell["reason"] == "repeat 0 (seed 0): exited with status 3: 'final words'"


# --------------------------------------------------------------------------- consent covers the code it runs

BENCH = """\
import os, pathlib
pathlib.Path("ran-" + pathlib.Path(__file__).read_text().splitlines()[0].strip("# ")).write_text("x")
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write('{"score": 1}\\n')
"""
BENCH_SPEC = {
    "name": "bench",
    "workload": "command",
    "command": ["python3", "bench.py"],
    "arms": {"baseline": {}},
    "baseline": "baseline",
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 1,
    "seed": 0,
    "timeout_seconds": 60,
}


def bench_project(tmp_path: Path, name: str, mark: str, spec: dict[str, object] = BENCH_SPEC) -> Path:
    project = tmp_path / name
    project.mkdir()
    (project / "bench.py").write_text(f"# {mark}\n" + BENCH)
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    return project


def test_consent_to_a_command_covers_the_script_it_runs_not_only_its_spec(tmp_path: Path) -> None:
    """Frozen (and so consented to) in one project with no inputs, the evaluator file copied into
    another whose bench.py differs: that bench.py is not what was consented to, and is refused
    like an imported evaluator, nothing run, naming the file and both digests."""
    mine = bench_project(tmp_path, "mine", "mine")
    frozen = ptreg(mine, "evaluator", "freeze", "spec.json", "--json")
    assert frozen.returncode == 0, frozen.stderr
    ref = json.loads(frozen.stdout)["ref"]
    code = json.loads((mine / "attempts" / "evaluators" / f"{ref}.json").read_text())["code"]
    assert set(code) == {"bench.py"}  # the script, and what Python imports beside it
    propose(mine, "shared", ref, 11)
    other = bench_project(tmp_path, "other", "other")  # a clone, by git, where bench.py differs
    shutil.rmtree(other / "attempts")
    shutil.copytree(mine / "attempts", other / "attempts")
    gate = ptreg(other, "gate", "shared")
    assert gate.returncode == 1 and "bench.py: sha256" in gate.stdout
    refused = ptreg(other, "run", "shared")
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    ours = hashlib.sha256((mine / "bench.py").read_bytes()).hexdigest()[:12]
    theirs = hashlib.sha256((other / "bench.py").read_bytes()).hexdigest()[:12]
    assert f"bench.py: sha256 {ours} when frozen, {theirs} now" in line and "nothing run" in line
    assert not list(other.glob("ran-*"))
    # consenting again is consent to what was frozen, which it says; it runs no other bench.py
    trusted = ptreg(other, "evaluator", "trust", ref)
    assert trusted.returncode == 0 and "differs from what you consented to: bench.py" in trusted.stderr
    assert ptreg(other, "run", "shared").returncode == 2 and not list(other.glob("ran-*"))
    # where the file is what was frozen, the same consent runs it
    ran = ptreg(mine, "run", "shared")
    assert ran.returncode == 0, ran.stderr
    assert (mine / "ran-mine").exists()


def test_a_module_placed_beside_the_script_is_code_the_command_runs(tmp_path: Path) -> None:
    """Python imports from the script's folder first: a json.py added there after freezing would
    run in place of the standard library's. It is refused, named, before anything runs."""
    spec = {**BENCH_SPEC, "command": ["python3", "harness/eval.py"]}
    project = tmp_path / "project"
    (project / "harness").mkdir(parents=True)
    (project / "harness" / "eval.py").write_text(
        "import json, os\nopen(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': 1}) + '\\n')\n"
    )
    (project / "harness" / "helper.py").write_text("X = 1\n")
    (project / "harness" / "data.txt").write_text("not code\n")
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    frozen = ptreg(project, "evaluator", "freeze", "spec.json", "--json")
    assert frozen.returncode == 0, frozen.stderr
    ref = json.loads(frozen.stdout)["ref"]
    code = json.loads((project / "attempts" / "evaluators" / f"{ref}.json").read_text())["code"]
    assert set(code) == {"harness/eval.py", "harness/helper.py"}
    propose(project, "shadowed", ref, 13)
    (project / "harness" / "data.txt").write_text("still not code\n")  # not importable: not code
    (project / "harness" / "json.py").write_text("import pathlib\npathlib.Path('shadowed').write_text('x')\n")
    refused = ptreg(project, "run", "shadowed")
    assert refused.returncode == 2
    assert "harness/json.py: sha256 absent when frozen" in refused.stderr and not (project / "shadowed").exists()
    (project / "harness" / "json.py").unlink()
    ran = ptreg(project, "run", "shadowed")
    assert ran.returncode == 0, ran.stderr


def test_a_script_named_through_a_symlink_is_refused_unless_the_spec_says_why(tmp_path: Path) -> None:
    project = bench_project(tmp_path, "project", "p")
    (project / "link.py").symlink_to(project / "bench.py")
    linked = {**BENCH_SPEC, "command": ["python3", "link.py"]}
    (project / "spec.json").write_text(json.dumps(linked))
    refused = ptreg(project, "evaluator", "freeze", "spec.json")
    assert refused.returncode == 1 and "link.py is a symlink; not followed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not list((project / "attempts" / "evaluators").glob("bench@*"))
    said = {**linked, "not_frozen": {"link.py": "points to bench.py, which is frozen beside it"}}
    (project / "spec.json").write_text(json.dumps(said))
    frozen = ptreg(project, "evaluator", "freeze", "spec.json", "--json")
    assert frozen.returncode == 0, frozen.stderr
    shown = ptreg(project, "evaluator", "show", json.loads(frozen.stdout)["ref"]).stdout
    assert "points to bench.py, which is frozen beside it" in shown and "bench.py  sha256 " in shown


def test_an_evaluator_frozen_before_the_rule_says_what_its_consent_covers(tmp_path: Path) -> None:
    """An evaluator frozen before ptreg froze a command's code (this project's cloze-eval and
    warmup-heldout) keeps its identity and runs as before; the gate and `evaluator show` say
    that its consent covers its spec and inputs only."""
    from ptreg.records.evaluator import frozen_from_spec
    from ptreg.store.evaluator_files import store_frozen
    from ptreg.store.trust import trust

    project = bench_project(tmp_path, "project", "p")
    old = frozen_from_spec(parse_spec(BENCH_SPEC, "spec.json"), 2)  # as ptreg froze it then: no code
    store_frozen(project / "attempts", old)
    trust(old.sha256)
    propose(project, "older", old.ref, 14)
    gate = ptreg(project, "gate", "older")
    assert gate.returncode == 0 and "frozen before ptreg froze the code a command runs" in gate.stdout
    shown = ptreg(project, "evaluator", "show", old.ref)
    assert "frozen before ptreg froze the code a command runs" in shown.stdout
    assert ptreg(project, "run", "older").returncode == 0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python3", "a/b.py", "--x", "1"], ("a/b.py", None)),
        (["/usr/bin/python3.11", "-u", "-X", "dev", "-W", "error", "b.py"], ("b.py", None)),
        (["python", "-Wignore", "-OO", "s.py"], ("s.py", None)),
        ([".venv/bin/python", "-m", "pkg.tool"], (None, "")),
        (["python3", "-c", "import json"], (None, "")),
        (["python3", "-P", "x.py"], (None, None)),
        (["python3", "-Im", "pkg"], (None, None)),
        (["env", "OMP_NUM_THREADS=1", "python3", "x.py"], ("x.py", None)),
        (["python3"], (None, "")),
        (["bash", "run.sh"], (None, None)),
        (["python3-config", "x.py"], (None, None)),
    ],
)
def test_where_a_python_command_imports_from(argv: list[str], expected: tuple[str | None, str | None]) -> None:
    assert python_path(argv) == expected


def test_every_argument_of_every_arm_and_seed_is_looked_at(tmp_path: Path) -> None:
    spec = parse_spec(
        {
            **BENCH_SPEC,
            "command": ["python3", "{script}", "--config={config}", "--data", "split-{seed}.txt"],
            "arms": {"a": {"script": "one.py", "config": "a.toml"}, "b": {"script": "two.py", "config": "b.toml"}},
            "baseline": "a",
            "repeats": 2,
        },
        "spec",
    )
    assert isinstance(spec, ArmsSpec)
    named = named_code(spec)
    assert {"one.py", "two.py", "a.toml", "b.toml", "split-0.txt", "split-1.txt"} <= set(named.arguments)
    assert named.scripts == ["one.py", "two.py"]
    for name in ("one.py", "a.toml", "split-1.txt"):
        (tmp_path / name).write_text(name)
    registry = tmp_path / "attempts"
    registry.mkdir()
    (registry / "stray.py").write_text("the registry holds no code")
    found = CommandWorkload().code(spec, registry)
    assert found is not None and set(found) == {"one.py", "a.toml", "split-1.txt"}
    (tmp_path / "two.py").write_text("appeared")  # a file the command names, there now: different code
    assert "two.py" in CommandWorkload().code(spec, registry)


def test_too_many_arguments_to_look_at_is_a_spec_problem() -> None:
    spec = parse_spec(
        {**BENCH_SPEC, "command": ["x", "{seed}"] * 128, "arms": {f"a{i}": {} for i in range(64)}, "baseline": "a0"}
        | {"repeats": 1000},
        "spec",
    )
    problem = spec_problem(spec)
    assert problem is not None and "more than the 1,000,000 ptreg looks at" in problem


# --------------------------------------------------------------------------- inputs re-checked after the run

REWRITES_ITSELF = """\
import os, sys
if os.environ["PTREG_SEED"] == "0":  # the first repeat edits the harness the evaluator froze
    with open(__file__, "a") as me:
        me.write("# tuned during the run\\n")
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write('{"score": 0.5}\\n')
"""


def test_an_input_changed_during_the_run_is_recorded_and_decides_nothing(tmp_path: Path) -> None:
    spec = {**BENCH_SPEC, "name": "self-editing", "command": ["python3", "cmd.py"], "inputs": ["cmd.py"], "repeats": 2}
    project = tmp_path / "project"
    project.mkdir()
    (project / "cmd.py").write_text(REWRITES_ITSELF)
    frozen_digest = hashlib.sha256(REWRITES_ITSELF.encode()).hexdigest()[:12]
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    assert ptreg(project, "evaluator", "freeze", "spec.json").returncode == 0
    propose(project, "edited", "self-editing", 21)
    run = ptreg(project, "run", "edited", "--json")
    assert run.returncode == 1, run.stderr
    results = json.loads(run.stdout)["results"]
    now = hashlib.sha256((project / "cmd.py").read_bytes()).hexdigest()[:12]
    assert results["status"] == "failed"
    assert results["inputs_changed"] == f"input cmd.py changed since it was frozen (sha256 {frozen_digest}, now {now})"
    assert results["reason"].startswith("inputs changed during the run: input cmd.py")
    assert all(c["status"] == "measured" for c in results["cells"])  # measured, and decides nothing
    shown = ptreg(project, "show", "edited").stdout
    assert "It decides nothing: inputs changed during the run (input cmd.py changed" in " ".join(shown.split())
    validated = ptreg(project, "validate")
    assert validated.returncode == 0 and "warning [run-inputs-changed]" in validated.stdout
    strict = ptreg(project, "validate", "--strict")
    assert strict.returncode == 1 and "error [run-inputs-changed]" in strict.stdout
    assert "decides nothing: inputs changed during the run (input cmd.py" in strict.stdout
    verified = ptreg(project, "evaluator", "verify")
    assert verified.returncode == 1 and "input cmd.py changed since it was frozen" in verified.stdout
    assert "decides nothing: inputs changed during the run" in verified.stderr
    (project / "cmd.py").write_text(REWRITES_ITSELF)  # restored: the evaluator verifies again, the run stays as it was
    assert ptreg(project, "evaluator", "verify").returncode == 0
    concluded = ptreg(
        project,
        *("conclude", "edited", "--status", "inconclusive", "--lesson", "its harness changed under it"),
        *("--next-action", "run it again", "--evidence", "x", "--failure-reason", "harness edited"),
        *("--confidence", "exact", "--continue-if", "metric(score, arm=baseline) >= 0"),
    )
    assert concluded.returncode == 1 and "has no complete run" in concluded.stderr


def test_a_module_added_beside_the_script_during_the_run_is_named(tmp_path: Path) -> None:
    adds = (
        "import os, pathlib\n"
        "pathlib.Path(__file__).with_name('late.py').write_text('X = 1\\n')\n"
        "open(os.environ['PTREG_METRICS'], 'w').write('{\"score\": 1}\\n')\n"
    )
    spec = {**BENCH_SPEC, "name": "adds-code", "command": ["python3", "tool/run.py"]}
    project = tmp_path / "project"
    (project / "tool").mkdir(parents=True)
    (project / "tool" / "run.py").write_text(adds)
    (project / "spec.json").write_text(json.dumps(spec))
    assert ptreg(project, "init").returncode == 0
    assert ptreg(project, "evaluator", "freeze", "spec.json").returncode == 0
    propose(project, "adds", "adds-code", 22)
    run = ptreg(project, "run", "adds", "--json")
    assert run.returncode == 1
    changed = json.loads(run.stdout)["results"]["inputs_changed"]
    assert changed.startswith("tool/late.py: sha256 absent when frozen, ")
