"""`ptreg new`, `ptreg gate` and `ptreg precedents` from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from helpers import (
    SCHEMAS,
    assert_one_line_error,
    blocked_chain,
    complete_record,
    failed_record,
    freeze_evaluator,
    plan_flags,
    snapshot,
    write_registry,
)


@pytest.fixture
def reg(tmp_path: Path) -> tuple[Path, str]:
    root = write_registry(
        tmp_path / "reg",
        [
            *blocked_chain(),
            failed_record("fused-adam", objective="peak-memory", methods=["operator-fusion"]),
            complete_record("threads", methods=["multithreading"], bases=["matmul-f32"]),
        ],
    )
    return root, freeze_evaluator(root)


def new_args(root: Path, ref: str, **changes: Any) -> list[str]:
    flags: dict[str, Any] = {
        "--id": "blocked-db",
        "--name": "Blocked dB",
        "--family": "runtime-perf",
        "--kind": "runtime-benchmark",
        "--objective": "training-step-time",
        "--method": "cache-blocking",
        "--question": "How much of the step does backward dB take once blocked?",
        "--varied-from": "blocked-da",
        "--varied": "block dB as well",
        "--answers-disposition": "The attribution measures dB's headroom first.",
        "--evaluator": ref,
        "--budget-seconds": "600",
        "--tracking-issue": "owner/ptreg#3",
        "--worked-if": plan_flags(root, ref)[1],
    }
    for key, value in changes.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            flags.pop(flag, None)
        else:
            flags[flag] = value
    args = ["-r", str(root), "new"]
    for flag, value in flags.items():
        args += [flag, value] if value is not True else [flag]
    return args


def test_new_admits_writes_and_validates(cli, reg) -> None:
    root, ref = reg
    result = cli(*new_args(root, ref))
    assert result.code == 0, result.err
    assert "admitted: wrote" in result.out and "precedents" in result.out
    assert "Only continue if dB shows headroom." in result.out  # the disposition is shown
    record = json.loads((root / "blocked-db.json").read_text())
    assert record["status"] == "not-tried" and record["evaluator"] == ref
    assert record["tracking_issue"] == "owner/ptreg#3" and record["budget"] == {"wall_clock_seconds": 600.0}
    assert len(record["admission"]["checks"]) == 7
    assert cli("-r", root, "validate").code == 0
    schema = json.loads((SCHEMAS / "attempt.schema.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(record)) == []
    assert cli("-r", root, "gate", "blocked-db").code == 0


def test_new_refused_exits_1_names_the_check_and_writes_nothing(cli, reg) -> None:
    root, ref = reg
    before = snapshot(root)
    result = cli(*new_args(root, ref, question=None, tracking_issue="nope"))
    assert result.code == 1
    assert "FAILED     fresh-question" in result.out and "how to satisfy: state the question" in result.out
    assert "FAILED     scoped-tracking-issue" in result.out
    assert "refused: 2 gate check(s) failed (fresh-question, scoped-tracking-issue); nothing written" in result.out
    assert snapshot(root) == before


def test_new_json(cli, reg) -> None:
    root, ref = reg
    data = cli(*new_args(root, ref, dry_run=True, json=True)).json()
    assert data["admitted"] and not data["written"] and data["path"] is None
    assert [c["outcome"] for c in data["gate"]["checks"]] == ["passed"] * 7
    assert data["precedents"][0]["id"] == "blocked-da"
    assert data["attempt"]["id"] == "blocked-db" and "admission" not in data["attempt"]
    assert not (root / "blocked-db.json").exists()


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"budget_seconds": "abc"}, "--budget-seconds"),
        ({"id": "../escape"}, "invalid attempt id"),
        ({"id": "Upper"}, "invalid attempt id"),
        ({"varied_from": "../x"}, "--varied-from: not a valid id"),
        ({"evaluator": "nope"}, "no frozen evaluator named 'nope'"),
        ({"kind": "nope"}, "kind 'nope' is not in the kind vocabulary"),
        ({"method": "nope"}, "method 'nope' is not in the method vocabulary"),
        ({"objective": "nope"}, "objective 'nope' is not in the objective vocabulary"),
        ({"id": None}, "missing --id"),
        ({"family": None}, "missing --family"),
        (
            {"family": 'Runtime "perf"'},
            """--family 'Runtime "perf"' is not a slug (lowercase letters, digits and '-'), e.g. 'runtime-perf'""",
        ),
        ({"family": "runtime perf"}, "e.g. 'runtime-perf'"),
        ({"margin": "a{x}=1"}, "--margin 'a{x}=1' is not METRIC=VALUE"),
        ({"objective": None}, "missing --objective"),
        ({"kind": "infrastructure"}, "infrastructure attempt carries no shape fields"),
        ({"name": ""}, "missing --name"),
        ({"data_rows": "-1"}, "--data-rows"),
        ({"unknown_flag": "x"}, "No such option"),
    ],
)
def test_new_unusable_input_exits_2_in_one_line(cli, reg, changes, fragment) -> None:
    root, ref = reg
    before = snapshot(root)
    result = cli(*new_args(root, ref, **changes))
    assert_one_line_error(result, 2, fragment)
    assert snapshot(root) == before


def test_new_warns_about_records_left_out(cli, reg) -> None:
    root, ref = reg
    (root / "broken.json").write_text("{not json")
    result = cli(*new_args(root, ref, dry_run=True))
    assert result.code == 0 and "1 record file(s) could not be used" in result.err


def test_new_refuses_an_existing_id(cli, reg) -> None:
    root, ref = reg
    before = snapshot(root)
    assert_one_line_error(cli(*new_args(root, ref, id="threads")), 1, "already exists")
    assert snapshot(root) == before


def test_new_into_a_missing_registry(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli(*new_args(tmp_path / "none", "x@000000000000")), 2, "not a registry directory")


def test_new_never_prompts_without_a_terminal(reg) -> None:
    """In a pipe, missing values are not asked for: the gate refuses at once."""
    root, ref = reg
    proc = subprocess.run(
        [sys.executable, "-c", "from ptreg.cli import main; main()", *new_args(root, ref, question=None)],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "fresh-question" in proc.stdout
    assert "question (" not in proc.stdout + proc.stderr


def test_no_input_flag_stops_prompts(reg, monkeypatch, cli) -> None:
    from ptreg.cli import proposing as cli_proposal

    root, ref = reg
    monkeypatch.setattr(cli_proposal.sys.stdin, "isatty", lambda: True, raising=False)
    assert not cli_proposal._interactive(True)
    assert cli(*new_args(root, ref, question=None, no_input=True)).code == 1


def test_two_racing_news_of_one_id_exactly_one_wins(reg) -> None:
    root, ref = reg
    command = [sys.executable, "-c", "from ptreg.cli import main; main()", *new_args(root, ref)]
    env = {k: v for k, v in os.environ.items() if k != "PTREG_REGISTRY"}
    for _trial in range(3):
        target = root / "blocked-db.json"
        if target.exists():
            target.unlink()
        procs = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for _ in range(2)
        ]
        outcomes = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        codes = sorted(code for code, _ in outcomes)
        assert codes == [0, 1], outcomes
        loser = next(err for code, err in outcomes if code == 1)
        assert "already exists" in loser or "created by another process" in loser
        assert json.loads(target.read_text())["id"] == "blocked-db"
        assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_exclusive_create_refuses_an_existing_file(tmp_path: Path) -> None:
    from ptreg.store.jsonio import create_text_exclusive

    target = tmp_path / "x.json"
    create_text_exclusive(target, "first\n")
    with pytest.raises(FileExistsError):
        create_text_exclusive(target, "second\n")
    assert target.read_text() == "first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


# --------------------------------------------------------------------------- gate


def test_gate_of_an_admitted_attempt_then_a_tampered_evaluator(cli, reg) -> None:
    root, ref = reg
    assert cli(*new_args(root, ref)).code == 0
    result = cli("-r", root, "gate", "blocked-db")
    assert result.code == 0 and "admission holds" in result.out and "unchanged since" in result.out
    path = root / "evaluators" / f"{ref}.json"
    path.write_text(path.read_text().replace('"threads": 1', '"threads": 2'))
    result = cli("-r", root, "gate", "blocked-db")
    assert result.code == 1 and "FAILED     frozen-evaluator" in result.out and "changed since" in result.out
    assert cli("-r", root, "gate", "blocked-db", "--json").json()["admitted"] is False
    assert cli("-r", root, "evaluator", "verify").code == 1


def test_gate_sees_a_hand_edit_after_it_kept_the_registry_digest(cli, reg) -> None:
    """The index keeps the admission's digest of the records; any edit of a record drops it."""
    root, ref = reg
    assert cli(*new_args(root, ref)).code == 0
    for _ in range(2):  # the second answer is the kept one
        assert "unchanged since" in cli("-r", root, "gate", "blocked-db").out
    other = next(p for p in sorted(root.glob("*.json")) if p.stem not in ("registry", "blocked-db"))
    record = json.loads(other.read_text())
    other.write_text(json.dumps({**record, "lesson": "edited by hand"}, indent=2))
    assert "the registry has changed since" in cli("-r", root, "gate", "blocked-db").out


def test_gate_of_an_attempt_never_proposed(cli, reg) -> None:
    root, _ = reg
    result = cli("-r", root, "gate", "threads")
    assert result.code == 1 and "no recorded admission" in result.out


def test_gate_of_an_unknown_id(cli, reg) -> None:
    assert_one_line_error(cli("-r", reg[0], "gate", "blocked-fwdd"), 2, "did you mean: blocked-fwd")


# --------------------------------------------------------------------------- precedents


def test_precedents_rank_objective_over_methods_and_failures_first(cli, reg) -> None:
    root, _ = reg
    data = cli(
        "-r", root, "precedents", "--objective", "training-step-time", "--method", "operator-fusion", "--json"
    ).json()
    ids = [p["id"] for p in data]
    # fused-adam shares a method but not the objective: it comes after every objective match.
    assert ids[-1] == "fused-adam"
    # among the objective matches with nothing else shared, the failure comes first
    assert ids[:3] == ["blocked-da", "blocked-fwd", "threads"]
    assert data[0]["shared"] == {"objective": True, "methods": [], "bases": [], "lineage": False, "family": False}


def test_precedents_shared_methods_count(cli, reg) -> None:
    root, _ = reg
    data = cli(
        "-r",
        root,
        "precedents",
        "--objective",
        "training-step-time",
        "--method",
        "multithreading",
        "--base",
        "matmul-f32",
        "--json",
    ).json()
    assert data[0]["id"] == "threads"


def test_precedents_text_and_limit(cli, reg) -> None:
    root, _ = reg
    result = cli("-r", root, "precedents", "--objective", "training-step-time", "--limit", "1")
    assert result.code == 0 and "blocked-da" in result.out and "threads" not in result.out


def test_precedents_need_a_shape(cli, reg) -> None:
    assert_one_line_error(cli("-r", reg[0], "precedents"), 2, "give --objective, --method, --base or --family")


# --------------------------------------------------------------------------- show


def test_show_renders_preregistration_override_and_admission(cli, tmp_path: Path) -> None:
    chain = [complete_record("s0", methods=["vectorization"])] + [
        failed_record(f"s{i}", methods=["vectorization"], varied_from=f"s{i - 1}", varied=f"step {i}")
        for i in (1, 2, 3)
    ]
    root = write_registry(tmp_path / "reg", chain)
    ref = freeze_evaluator(root)
    args = new_args(
        root, ref, id="s4", varied_from="s3", method="vectorization", answers_disposition="We stop after this one."
    )
    refused = cli(*args)
    assert refused.code == 1 and "STOP AND RETHINK" in refused.out and "--override-streak" in refused.out
    assert cli(*args, "--override-streak", "The timer was wrong in s1-s3.").code == 0
    shown = cli("-r", root, "show", "s4").out
    assert "Streak override (went on despite STOP AND RETHINK): The timer was wrong in s1-s3." in shown
    assert "Tracking issue: owner/ptreg#3 (https://github.com/owner/ptreg/issues/3)." in shown
    assert "Answer to the disposition it varies (s3: Stop here.): We stop after this one." in shown
    assert "- streak: overridden;" in shown and "Admission" in shown
    markdown = cli("-r", root, "show", "s4", "--format", "markdown").out
    assert "## Admission" in markdown and "## Pre-registration" in markdown


# --------------------------------------------------------------------------- the shared registry


def test_proposal_varying_the_seed_attempt_on_the_shared_registry(cli, shared_file: Path, tmp_path: Path) -> None:
    """Imported records have no question: unknown, so freshness compares only with known ones."""
    root = tmp_path / "shared-reg"
    assert cli("-r", root, "init").code == 0  # default vocabularies (runtime-benchmark, training-step-time)
    assert cli("-r", root, "import", shared_file).code == 0
    ref = freeze_evaluator(root)
    question = "Does blocking backward_dB too lift end-to-end training past the 1.13x of dA blocking?"
    first = new_args(
        root,
        ref,
        id="wasm-backward-db-blocking",
        varied_from="wasm-backward-da-blocking",
        question=question,
        tracking_issue="owner/ptreg#3",
        answers_disposition="The per-kernel attribution shows dB's headroom before blocking is kept.",
    )
    result = cli(*first)
    assert result.code == 0, result.out
    assert "Only continue matmul blocking if backward_dB" in result.out
    assert "record no question: compared by name, hypothesis and lesson" in result.out
    again = new_args(
        root,
        ref,
        id="wasm-backward-db-blocking-2",
        varied_from="wasm-backward-da-blocking",
        question="does blocking BACKWARD_DB too lift end to end training past the 1.13x of da blocking",
        tracking_issue="owner/ptreg#3",
        answers_disposition="Same.",
    )
    before = snapshot(root)
    refused = cli(*again)
    assert refused.code == 1 and "the same question as wasm-backward-db-blocking" in refused.out
    assert snapshot(root) == before
    assert cli("-r", root, "validate").code == 0


def test_re_asking_what_an_imported_attempt_asked_is_refused(
    cli, shared_file: Path, shared_raw, tmp_path: Path
) -> None:
    """An imported record asks no question; what it asked is in its name, hypothesis and lesson,
    and a proposal asking that again, in its family, is a near-duplicate like any other."""
    root = tmp_path / "shared-reg"
    assert cli("-r", root, "init").code == 0
    assert cli("-r", root, "import", shared_file).code == 0
    ref = freeze_evaluator(root)
    imported = next(a for a in shared_raw["attempts"] if a["id"] == "sql-public-bmc2-v4")
    # the lesson, turned into a question: the same words, the same question
    words = imported["lesson"].rstrip(".").split()
    asked = f"{words[1].capitalize()} {' '.join(words[2:6])} {words[0].lower()} {' '.join(words[6:])}?"
    args = new_args(root, ref, id="sql-again", family="sql", varied_from=None, varied=None, answers_disposition=None)
    args += ["--question", asked]
    before = snapshot(root)
    refused = cli(*args)
    assert refused.code == 1, refused.out
    assert "FAILED     fresh-question" in refused.out and "sql-public-bmc2-v4" in refused.out
    assert "asks no question, and its lesson says" in refused.out
    assert snapshot(root) == before
    # in words of its own, the question is fresh
    fresh = new_args(root, ref, id="sql-fresh", family="sql", varied_from=None, varied=None, answers_disposition=None)
    fresh += ["--question", "Does routing by input keep both gates where one adapter failed?", "--dry-run"]
    assert "ok         fresh-question" in cli(*fresh).out


def test_an_infrastructure_attempt_varies_another_on_the_shared_registry(cli, shared_registry: Path) -> None:
    """Lineage is not shape: an infrastructure attempt may vary an imported one, and still carries
    no objective, method, base or data rows."""
    root = shared_registry
    ref = freeze_evaluator(root)
    args = new_args(
        root,
        ref,
        id="cold-start-bundle-large",
        kind="infrastructure",
        objective=None,
        method=None,
        varied_from="cold-start-bundle",
        varied="a 200 MB checkpoint instead of the toy one",
        question="Does the bundle still cold-start under a second with a 200 MB checkpoint?",
        answers_disposition="Re-measures on a real checkpoint, as its next action asks.",
    )
    admitted = cli(*args)
    assert admitted.code == 0, admitted.out + admitted.err
    written = json.loads((root / "cold-start-bundle-large.json").read_text(encoding="utf-8"))
    assert (written["kind"], written["varied_from"]) == ("infrastructure", "cold-start-bundle")
    assert cli("-r", root, "validate").code == 0
    assert "cold-start-bundle-large" in cli("-r", root, "lineage", "cold-start-bundle").out
    # the rule is still there for what is shape
    before = snapshot(root)
    shaped = cli(*new_args(root, ref, id="infra-shaped", kind="infrastructure", objective=None, method="lora"))
    assert_one_line_error(shaped, 2, "an infrastructure attempt carries no shape fields; drop --method")
    assert snapshot(root) == before
