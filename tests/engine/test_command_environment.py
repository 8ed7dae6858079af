"""What a command sees of ptreg's environment: the variables its evaluator names in ``env``
(frozen with the spec), never others; their values recorded with the run, secrets redacted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from command_projects import ATTEMPT, command_attempt

from ptreg.engine.environment import REDACTED, command_variables, looks_like_key, recorded_value
from ptreg.engine.workloads.command import CommandWorkload, environment
from ptreg.engine.workloads.discovery import spec_problem
from ptreg.records.evaluator import ArmsSpec, parse_spec

SEES = """\
import json, os
names = ["ENVTEST_SEEN", "ENVTEST_HIDDEN", "ENVTEST_UNSET", "HF_TOKEN"]
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"score": 1}) + "\\n")
with open("seen.json", "w") as out:
    json.dump({name: os.environ.get(name) for name in names}, out)
"""


def spec(**changes: object) -> dict[str, object]:
    return {
        "name": "sees",
        "workload": "command",
        "command": [sys.executable, "sees.py"],
        "arms": {"only": {}},
        "baseline": "only",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 1,
        "seed": 0,
        "timeout_seconds": 60,
        "not_frozen": {"seen.json": "the file the command writes"},
        **changes,
    }


def test_declared_variables_reach_the_command_and_undeclared_ones_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_environment

    project = tmp_path / "project"
    env = ["ENVTEST_SEEN", "ENVTEST_UNSET", "HF_TOKEN"]
    root = command_attempt(project, SEES, {"only": {}}, env=env, not_frozen={"seen.json": "the command writes it"})

    monkeypatch.setenv("ENVTEST_SEEN", "/data/cache")
    monkeypatch.setenv("ENVTEST_HIDDEN", "not for the command")
    monkeypatch.delenv("ENVTEST_UNSET", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_abc")
    done = run_attempt(root, ATTEMPT, ["test"])
    assert done.results.status == "complete", [c.reason for c in done.results.cells]

    seen = json.loads((project / "seen.json").read_text())
    # declared and set: given; declared and unset: still unset (never defaulted); undeclared: not given
    assert seen == {"ENVTEST_SEEN": "/data/cache", "ENVTEST_HIDDEN": None, "ENVTEST_UNSET": None, "HF_TOKEN": "hf_abc"}
    recorded = read_environment(root, done.folder)
    assert recorded is not None
    assert recorded["command_variables"] == {"ENVTEST_SEEN": "/data/cache", "ENVTEST_UNSET": None, "HF_TOKEN": REDACTED}
    assert "hf_abc" not in (done.folder / "environment.json").read_text()

    from ptreg.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["-r", str(root), "show", ATTEMPT])
    assert not exited.value.code
    shown = capsys.readouterr().out
    assert (
        "- Variables given to the command: ENVTEST_SEEN=/data/cache, ENVTEST_UNSET=unset, HF_TOKEN=<redacted>." in shown
    )


def test_the_names_are_part_of_the_frozen_spec() -> None:
    without, named = parse_spec(spec(), "spec.json"), parse_spec(spec(env=["HF_HOME"]), "spec.json")
    assert isinstance(named, ArmsSpec) and named.env == ["HF_HOME"]
    assert without.model_dump(mode="json", exclude_none=True) != named.model_dump(mode="json", exclude_none=True)
    assert "env" not in without.model_dump(mode="json", exclude_none=True)  # old specs keep their hash


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (["lower_case"], "env"),
        (["9STARTS_WITH_DIGIT"], "env"),
        (["PTREG_ARM"], "ptreg's own"),
        (["LD_PRELOAD"], "changes what code the command runs"),
        (["DYLD_INSERT_LIBRARIES"], "changes what code the command runs"),
        (["PYTHONPATH"], "changes what code the command runs"),
        (["BASH_ENV"], "changes what code the command runs"),
        (["HF_HOME", "HF_HOME"], "twice"),
        ([f"V{n}" for n in range(65)], "env"),
    ],
)
def test_a_name_that_is_malformed_ptregs_own_or_changes_the_code_run_is_refused(names: list[str], problem: str) -> None:
    from ptreg.errors import UnusableInput

    with pytest.raises(UnusableInput, match=problem):
        parse_spec(spec(env=names), "spec.json")


@pytest.mark.parametrize("name", ["PATH", "HOME", "OMP_NUM_THREADS", "OMP_WAIT_POLICY"])
def test_a_name_ptreg_sets_itself_is_refused_by_the_workload(name: str) -> None:
    found = parse_spec(spec(env=[name]), "spec.json")
    assert CommandWorkload().check_settings(found) == (
        f"env: {name} is set by ptreg itself (kept from the caller, by threads, or for every worker)"
    )
    assert spec_problem(found) is not None


def test_the_environment_gives_only_what_is_declared_and_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("ENVTEST_HIDDEN", "x")
    monkeypatch.delenv("HF_HOME", raising=False)
    found = parse_spec(spec(env=["CUDA_VISIBLE_DEVICES", "HF_HOME"]), "spec.json")
    assert isinstance(found, ArmsSpec)
    env = environment(found, "only", 0, tmp_path / "m", tmp_path / "i")
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "HF_HOME" not in env and "ENVTEST_HIDDEN" not in env


@pytest.mark.parametrize(
    ("name", "value", "kept"),
    [
        ("HF_HOME", "/home/me/.cache/huggingface", True),
        ("CUDA_VISIBLE_DEVICES", "0,1", True),
        ("CUDA_VISIBLE_DEVICES", "GPU-8c7b6f9e-1b2c-4d5e-8f90-123456789abc", True),
        ("MODEL", "meta-llama/Llama-3.1-8B-Instruct", True),
        ("UPSTREAM", "https://me:hunter2@example.org/repo", False),
        ("ANY", "ghp_1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX", False),
        ("ANY", "sk-proj-Abc123Def456Ghi789Jkl0", False),
        ("ANY", "0123456789abcdef0123456789abcdef", False),
    ],
)
def test_a_value_that_looks_like_a_key_is_redacted_with_a_short_digest(name: str, value: str, kept: bool) -> None:
    assert looks_like_key(value) is not kept
    recorded = recorded_value(name, value)
    if kept:
        assert recorded == value
    else:
        assert recorded is not None and recorded.startswith("<redacted sha256:") and value not in recorded


@pytest.mark.parametrize("name", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GOOGLE_APPLICATION_CREDENTIALS"])
def test_a_secret_by_its_name_is_redacted_without_a_digest(name: str) -> None:
    assert command_variables([name, "UNSET_ONE"], {name: "short"}) == {name: REDACTED, "UNSET_ONE": None}
