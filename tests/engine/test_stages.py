"""Stages of a command: once per arm and seed (artifacts digested, not rerun while their key
and artifacts stand), each repeat measured; seeds apart from repeats; the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_command_workload import propose, ptreg

from ptreg.engine.protocol import CellTask
from ptreg.engine.workloads.arms import compare_arms, items_by_seed, summarize_arm_metric
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.engine.workloads.discovery import spec_problem
from ptreg.engine.workloads.named_code import command_lines, named_code
from ptreg.errors import UnusableInput
from ptreg.records.evaluator import ArmsSpec, MetricDeclaration, parse_spec
from ptreg.records.run_results import MetricSample, StageRecord

# train appends a line to ran-<arm>-<seed>.log (so the test counts its runs) and writes a model
# file and a metric; evaluate reads the model and writes a score and items
TRAIN = """\
import json, os, sys
arm, seed, lr = sys.argv[1:4]
open(f"ran-{arm}-{seed}.log", "a").write("x\\n")
os.makedirs("out", exist_ok=True)
open(f"out/{arm}-{seed}.model", "w").write(lr + seed)
open(os.environ["PTREG_METRICS"], "w").write(json.dumps({"train_loss": float(lr)}) + "\\n")
"""
EVALUATE = """\
import json, os, sys
model = open(sys.argv[1]).read()
open("evaluated.log", "a").write(sys.argv[1] + "\\n")
open(os.environ["PTREG_METRICS"], "w").write(json.dumps({"score": len(model)}) + "\\n")
open(os.environ["PTREG_ITEMS"], "w").write(json.dumps({"item": "q1", "score": len(model)}) + "\\n")
"""
STAGED: dict[str, Any] = {
    "name": "staged",
    "workload": "command",
    "stages": [
        {
            "name": "train",
            "command": ["python3", "train.py", "{arm}", "{seed}", "{lr}"],
            "outputs": ["out/{arm}-{seed}.model"],
            "repeat": "once",
        },
        {"name": "evaluate", "command": ["python3", "evaluate.py", "out/{arm}-{seed}.model"], "repeat": "each"},
    ],
    "arms": {"small": {"lr": "1"}, "large": {"lr": "22"}},
    "baseline": "small",
    "metrics": {
        "score": {"better": "higher", "unit": "chars"},
        "train_loss": {"better": "lower", "unit": "loss"},
    },
    "repeats": 3,
    "seeds": [4, 9],
    "seed": 0,
    "timeout_seconds": 30,
}


def spec_of(raw: dict[str, Any]) -> ArmsSpec:
    spec = parse_spec(raw, "spec.json")
    assert isinstance(spec, ArmsSpec)
    return spec


def cell(root: Path, spec: ArmsSpec, arm: str, reuse: list[StageRecord] | None = None) -> Any:
    (root / "train.py").write_text(TRAIN)
    (root / "evaluate.py").write_text(EVALUATE)
    task = CellTask(
        backend=arm,
        workload="command",
        config="all",
        warmup_steps=0,
        timed_steps=1,
        seed=spec.seed,
        threads=None,
        spec=spec.model_dump(mode="json", exclude_none=True),
        root=str(root),
        reuse_stages=reuse,
    )
    assert CellTask.model_validate_json(task.model_dump_json()) == task  # as the worker reads it
    return CommandWorkload().prepare(task, None)


def run_rounds(
    root: Path, spec: ArmsSpec, arm: str, rounds: range, reuse: list[StageRecord] | None = None
) -> list[MetricSample]:
    found: list[MetricSample] = []
    run = cell(root, spec, arm, reuse)
    run.warm_up(lambda *_: None)
    for r in rounds:
        run.run_repeat(r, lambda s: found.append(s), lambda *_: None)
    return found


def test_seeds_beside_repeats_give_each_seed_its_repeats_in_a_row() -> None:
    spec = spec_of(STAGED)
    assert spec.rounds == 6 == spec.most_repeats == spec.least_repeats
    assert [spec.round_seed(r) for r in range(6)] == [4, 4, 4, 9, 9, 9]
    assert spec.plan() == "6 rounds (3 repeat(s) of each of seeds 4, 9)"
    plain = spec_of({**STAGED, "seeds": None, "seed": 7})
    assert plain.rounds == 3 and [plain.round_seed(r) for r in range(3)] == [7, 8, 9]
    with pytest.raises(UnusableInput, match="seeds names a seed twice"):
        spec_of({**STAGED, "seeds": [1, 1]})


def test_once_runs_once_per_arm_and_seed_each_runs_every_repeat(tmp_path: Path) -> None:
    spec = spec_of(STAGED)
    assert spec_problem(spec) is None
    samples = run_rounds(tmp_path, spec, "large", range(6))
    assert (tmp_path / "ran-large-4.log").read_text() == "x\n" and (tmp_path / "ran-large-9.log").read_text() == "x\n"
    assert len((tmp_path / "evaluated.log").read_text().splitlines()) == 6
    assert [s.problem for s in samples] == [None] * 6
    assert [s.seed for s in samples] == [4, 4, 4, 9, 9, 9]
    # the once stage's record is with the first repeat of its seed, its artifact digested
    first = samples[0].stages
    assert first is not None and [(r.name, r.repeat) for r in first] == [("train", "once"), ("evaluate", "each")]
    train = first[0]
    assert train.artifacts is not None and list(train.artifacts) == ["out/large-4.model"]
    assert train.key is not None and train.wall_seconds is not None and train.exit_code == 0
    assert samples[1].stages is not None and [r.name for r in samples[1].stages] == ["evaluate"]
    # metrics come from whichever stage writes them: train's counts for every repeat of its seed
    assert all(s.values == {"train_loss": 22.0, "score": 3.0} for s in samples)
    # the repeat's own time is its each stages', not the training's
    assert samples[0].wall_seconds == pytest.approx(first[1].wall_seconds)


def test_a_once_stage_is_reused_from_earlier_records_unless_its_artifact_changed(tmp_path: Path) -> None:
    spec = spec_of({**STAGED, "seeds": [4], "repeats": 1})
    earlier = run_rounds(tmp_path, spec, "small", range(1))
    kept = [r for r in earlier[0].stages or [] if r.repeat == "once"]
    again = run_rounds(tmp_path, spec, "small", range(1), reuse=kept)
    assert (tmp_path / "ran-small-4.log").read_text() == "x\n"  # not rerun
    reused = (again[0].stages or [])[0]
    assert reused.reused is True and reused.key == kept[0].key and reused.artifacts == kept[0].artifacts
    assert again[0].values["train_loss"] == 1.0  # its metric carried with its record
    # an artifact changed on disk: the record no longer stands, the stage runs again
    (tmp_path / "out" / "small-4.model").write_text("tampered")
    third = run_rounds(tmp_path, spec, "small", range(1), reuse=kept)
    assert (tmp_path / "ran-small-4.log").read_text() == "x\nx\n"
    assert (third[0].stages or [])[0].reused is None
    # a forged record naming other artifacts under the same key is not believed
    forged = kept[0].model_copy(update={"artifacts": {}})
    run_rounds(tmp_path, spec, "small", range(1), reuse=[forged])
    assert (tmp_path / "ran-small-4.log").read_text() == "x\nx\nx\n"


def test_an_artifact_changed_between_repeats_reruns_the_stage(tmp_path: Path) -> None:
    spec = spec_of({**STAGED, "seeds": [4], "repeats": 2})
    run = cell(tmp_path, spec, "small")
    found: list[MetricSample] = []
    run.run_repeat(0, found.append, lambda *_: None)
    (tmp_path / "out" / "small-4.model").write_text("changed")
    run.run_repeat(1, found.append, lambda *_: None)
    assert (tmp_path / "ran-small-4.log").read_text() == "x\nx\n"
    assert [r.name for r in found[1].stages or []] == ["train", "evaluate"]


def test_a_failed_once_stage_fails_its_seeds_repeats_naming_it(tmp_path: Path) -> None:
    raw = json.loads(json.dumps(STAGED))
    raw["stages"][0]["command"] = ["python3", "-c", "import sys; open('failed.log', 'a').write('x'); sys.exit(3)"]
    raw["stages"][0]["outputs"] = []
    samples = run_rounds(tmp_path, spec_of({**raw, "seeds": [4], "repeats": 2}), "small", range(2))
    assert [s.problem for s in samples] == ["stage train (once, seed 4): exited with status 3"] * 2
    assert (tmp_path / "failed.log").read_text() == "x"  # not retried for the seed's next repeat
    assert samples[0].stages is not None and samples[0].stages[0].exit_code == 3
    assert not (tmp_path / "evaluated.log").exists()


def test_a_missing_output_and_a_metric_written_twice_are_problems_of_the_repeat(tmp_path: Path) -> None:
    raw = json.loads(json.dumps(STAGED))
    raw["stages"][0]["outputs"] = ["out/nothing-{seed}"]
    samples = run_rounds(tmp_path, spec_of({**raw, "seeds": [4], "repeats": 1}), "small", range(1))
    assert samples[0].problem is not None
    assert samples[0].problem.startswith("stage train (once, seed 4): output 'out/nothing-4': ")
    assert "does not exist" in samples[0].problem
    raw = json.loads(json.dumps(STAGED))
    raw["stages"][1]["command"] = [
        "python3",
        "-c",
        "import json, os; open(os.environ['PTREG_METRICS'], 'w').write(json.dumps(dict(train_loss=1, score=2)))",
    ]
    samples = run_rounds(tmp_path, spec_of({**raw, "seeds": [5], "repeats": 1}), "small", range(1))
    assert samples[0].problem == "stage evaluate wrote train_loss, which stage train wrote too"


def test_every_stage_of_every_arm_and_seed_is_named_for_consent() -> None:
    spec = spec_of(STAGED)
    lines = command_lines(spec)
    # train and evaluate, per arm and per seed (both name {seed})
    assert len(lines) == 2 * 2 * 2
    assert ["python3", "train.py", "large", "9", "22"] in lines
    assert "out/small-4.model" in named_code(spec).arguments


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"command": ["python3", "x.py"]}, "give command (one command line) or stages (a list of them), not both"),
        ({"stages": None}, "stages must be a list of 1 to 16 stages"),
        ({"stages": [{"name": "e", "command": ["x"], "repeat": "each"}] * 2}, "stage e is named twice"),
        ({"stages": [{"name": "E", "command": ["x"], "repeat": "each"}]}, "stages[0] needs a name: a slug"),
        ({"stages": [{"name": "t", "command": ["x"], "repeat": "once"}]}, "stages has no each stage"),
        (
            {"stages": [{"name": "t", "command": ["x"], "repeat": "once", "outputs": ["../up"]}]},
            "stage t: output '../up' must be a relative path without '.', '..' or empty parts",
        ),
        (
            {"stages": [{"name": "t", "command": ["x"], "repeat": "once", "outputs": ["/etc"]}]},
            "stage t: output '/etc' must be a relative path inside the project root",
        ),
        (
            {
                "stages": [
                    {"name": "e", "command": ["x"], "repeat": "each"},
                    {"name": "t", "command": ["x"], "repeat": "once"},
                ]
            },
            "stage t is once after an each stage",
        ),
        (
            {"stages": [{"name": "e", "command": ["x"], "repeat": "each", "outputs": ["a"]}]},
            "stage e: outputs are recorded of once stages only",
        ),
        ({"stages": [{"name": "e", "command": ["x", "{nope}"], "repeat": "each"}]}, "stage e names {nope}"),
        ({"stages": [{"name": "e", "command": "x", "repeat": "each"}]}, "stage e: command must be a non-empty list"),
        ({"stages": [{"name": "e", "command": ["x"], "repeat": "twice"}]}, "stage e: repeat must be 'once'"),
        (
            {"stages": [{"name": "e", "command": ["x"], "repeat": "each", "shell": 1}]},
            "stages[0] has the field 'shell'",
        ),
        (
            {
                "arms": {"small": {"lr": "1", "where": "a/../.."}, "large": {"lr": "2", "where": "b"}},
                "stages": [
                    {"name": "t", "command": ["x"], "repeat": "once", "outputs": ["out/{where}"]},
                    STAGED["stages"][1],
                ],
            },
            "stage t: output 'out/a/../..' (arm small, seed 4) must be a relative path without '.', '..'",
        ),
    ],
)
def test_stage_refusals_are_one_line(change: dict[str, Any], problem: str) -> None:
    found = spec_problem(spec_of({**STAGED, **change}))
    assert found is not None and problem in found and "\n" not in found, found


def test_neither_command_nor_stages_is_refused() -> None:
    raw = {k: v for k, v in STAGED.items() if k != "stages"}
    found = spec_problem(spec_of(raw))
    assert found == "give command (one command line) or stages (a list of them), not both and not neither"


def test_several_repeats_of_one_seed_average_per_item() -> None:
    def sample(repeat: int, seed: int, score: float) -> MetricSample:
        return MetricSample(repeat=repeat, seed=seed, values={"score": score}, items={"score": {"q1": score, "q2": 1}})

    samples = [sample(0, 4, 0.0), sample(1, 4, 1.0), sample(2, 9, 0.5), sample(3, 9, 0.5)]
    assert items_by_seed(samples, "score") == {4: {"q1": 0.5, "q2": 1.0}, 9: {"q1": 0.5, "q2": 1.0}}
    declared = MetricDeclaration(better="higher", unit="x")
    summary = summarize_arm_metric(samples, "score", declared, 9)
    # two seeds, not four: the repeats of a seed measure one model
    assert summary is not None and summary.n == 2 and summary.items == 2


def test_a_staged_evaluator_freezes_runs_and_shows_its_stages(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "evaluate.py").write_text(EVALUATE)
    (project / "out").mkdir()
    (project / "out" / "small-4.model").write_text("left from a trial")  # named by evaluate's argv: not code
    (project / "spec.json").write_text(json.dumps({**STAGED, "repeats": 2}))
    assert ptreg(project, "init").returncode == 0
    frozen = ptreg(project, "evaluator", "freeze", "spec.json", "--json")
    assert frozen.returncode == 0, frozen.stdout + frozen.stderr
    propose(project, "staged-run", "staged", 46)
    run = ptreg(project, "run", "staged-run", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout)["results"]
    assert results["results_version"] == 9 and results["status"] == "complete", results["reason"]
    frozen_code = json.loads(next((project / "attempts" / "evaluators").glob("staged@*.json")).read_text())["code"]
    assert "out/small-4.model" not in frozen_code and "evaluate.py" in frozen_code
    for arm in ("small", "large"):
        for seed in (4, 9):
            assert (project / f"ran-{arm}-{seed}.log").read_text() == "x\n"
    assert len((project / "evaluated.log").read_text().splitlines()) == 2 * 2 * 2
    shown = ptreg(project, "show", "staged-run")
    assert shown.returncode == 0, shown.stderr
    assert "Stages: once stages run before their seed's repeats" in shown.stdout
    assert "4 rounds (2 repeat(s) of each of seeds 4, 9)" in shown.stdout
    train_rows = [line for line in shown.stdout.splitlines() if line.lstrip("| ").startswith("train ")]
    assert len(train_rows) == 2 and all("2 path(s): " in row for row in train_rows), shown.stdout
    built = ptreg(project, "site", "-o", "site")
    assert built.returncode == 0, built.stderr
    page = next((project / "site" / "runs" / "staged-run").glob("*.html")).read_text(encoding="utf-8")
    assert "Stages: once stages run before their seed&#39;s repeats" in page and "evaluate" in page


def test_a_metric_without_items_counts_seeds_not_their_repeats() -> None:
    def sample(repeat: int, seed: int, score: float) -> MetricSample:
        return MetricSample(repeat=repeat, seed=seed, values={"score": score})

    mine = [sample(0, 4, 1.0), sample(1, 4, 3.0), sample(2, 9, 5.0), sample(3, 9, 7.0)]
    theirs = [sample(0, 4, 0.0), sample(1, 4, 0.0), sample(2, 9, 1.0), sample(3, 9, 1.0)]
    declared = MetricDeclaration(better="higher", unit="x")
    summary = summarize_arm_metric(mine, "score", declared, 9)
    assert summary is not None and summary.n == 2 and summary.mean == 4.0  # seed means 2 and 6
    against = compare_arms(mine, theirs, "score", declared, 9)
    assert (
        against is not None and against.n == 2 and against.seeds == 2 and against.estimate == 3.5
    )  # seed differences 2 and 5
    # a run before version 9 (no seeds beside repeats) is decided as it was: by round
    older = compare_arms(mine, theirs, "score", declared, 8)
    assert older is not None and older.n == 4
    # and one seed per round, as without seeds, is by round as before
    single = [sample(r, r, float(r)) for r in range(4)]
    assert compare_arms(single, [sample(r, r, 0.0) for r in range(4)], "score", declared, 9).n == 4  # type: ignore[union-attr]


def test_a_stage_is_killed_at_the_timeout_with_what_it_started(tmp_path: Path) -> None:
    raw = json.loads(json.dumps(STAGED))
    hang = "import subprocess, time; c = subprocess.Popen(['sleep', '60']); open('child', 'w').write(str(c.pid)); time.sleep(60)"
    raw["stages"][0] = {"name": "train", "command": ["python3", "-c", hang], "repeat": "once"}
    samples = run_rounds(
        tmp_path, spec_of({**raw, "seeds": [4], "repeats": 1, "timeout_seconds": 1}), "small", range(1)
    )
    assert samples[0].problem == "stage train (once, seed 4): killed at its timeout of 1 s"
    child = int((tmp_path / "child").read_text())
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split(") ")[-1][:1] == "Z"
