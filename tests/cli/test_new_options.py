"""`ptreg new`'s options are made from ProposalInput: every field has a flag (the command line's,
never the gate's) and its help, and a value given on the command line lands in the record field
the model names."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from helpers import complete_record, freeze_evaluator, write_registry
from ptreg.cli.proposing import METAVARS, flag_of
from ptreg.gate.proposal import ProposalInput


def test_every_proposal_field_is_an_option_with_its_help(cli) -> None:
    shown = cli("new", "--help")
    assert shown.code == 0
    text = " ".join(shown.out.split())
    assert set(METAVARS) == {f.name for f in fields(ProposalInput)}
    for f in fields(ProposalInput):
        assert flag_of(f.name) in text, f.name
        assert " ".join(f.metadata["help"].split()[:3]) in text, f.name
        assert not any(str(v).startswith("--") for v in f.metadata.values()), f"{f.name} carries a flag"


def test_each_option_fills_the_field_the_model_names(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("base-one")])
    ref = freeze_evaluator(root)
    result = cli(
        "-r",
        root,
        "new",
        "--id",
        "prop",
        "--name",
        "Proposal",
        "--family",
        "runtime-perf",
        "--kind",
        "runtime-benchmark",
        "--objective",
        "peak-memory",
        "--method",
        "buffer-reuse",
        "--base",
        "b1",
        "--base",
        "b2",
        "--data-rows",
        "5",
        "--question",
        "Does reuse cut the peak?",
        "--hypothesis",
        "It does.",
        "--evaluator",
        ref,
        "--budget-seconds",
        "60",
        "--budget-repeats",
        "9",
        "--tracking-issue",
        "#12",
        "--source",
        "notes.md",
        "--worked-if",
        "gflops(step, backend=naive, config=xl) > 0",
        "--regressed-if",
        "gflops(step, backend=numpy-blas, config=xl) < 1",
        "--decide-on-runs",
        "2",
        "--no-input",
        "--json",
    )
    assert result.code == 0, result.err
    import json

    attempt = json.loads(result.out)["attempt"]
    assert attempt["methods"] == ["buffer-reuse"] and attempt["bases"] == ["b1", "b2"]
    assert attempt["data_rows"] == 5 and attempt["hypothesis"] == "It does." and attempt["source"] == "notes.md"
    assert attempt["budget"] == {"wall_clock_seconds": 60.0, "max_repeats": 9}
    assert attempt["tracking_issue"] == "#12" and attempt["evaluator"] == ref
    plan = attempt["plan"]
    assert plan["worked_if"]["text"] == "gflops(step, backend=naive, config=xl) > 0"
    assert plan["regressed_if"]["text"] == "gflops(step, backend=numpy-blas, config=xl) < 1"
    assert plan["runs"] == 2 and "margins" not in plan


def test_a_budget_limit_without_seconds_names_the_seconds_flag(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("base-one")])
    ref = freeze_evaluator(root)
    result = cli(
        "-r",
        root,
        "new",
        "--id",
        "prop",
        "--name",
        "P",
        "--family",
        "f",
        "--kind",
        "runtime-benchmark",
        "--objective",
        "peak-memory",
        "--question",
        "Q?",
        "--evaluator",
        ref,
        "--budget-threads",
        "2",
        "--tracking-issue",
        "#1",
        "--no-input",
    )
    assert result.code == 1
    assert "no wall-clock seconds, which every budget needs" in result.out


def test_the_proposal_to_confirm_shows_a_budget_as_a_person_writes_it() -> None:
    from ptreg.cli.proposing import summary_lines

    given = ProposalInput(
        id="x", name="X", family="runtime-perf", budget_seconds=300.0, budget_memory_mb=1.5, budget_threads=4
    )
    lines = [" ".join(line.split()) for line in summary_lines(given)]
    assert "budget-seconds 300 s" in lines
    assert "budget-threads 4 threads" in lines
    assert "budget-memory-mb 1.5 MB peak memory" in lines
    assert "family runtime-perf" in lines
    assert not any("300.0" in line for line in lines)
