"""Terminal output at the size of a real project: one attempt with 20 runs, read at 80 and 200
columns. `history` is a table a screen holds, `show` shows the latest runs and counts the rest,
`next` names the runs once and uses the width it has, `compare` never cuts an interval, `run`
prints every metric in one form, and `list` keeps family and kind at 80 columns."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from helpers import assert_one_line_error, registry_with_runs
from ptreg.store.runs import read_results, run_folder
from ptreg.views.run_report import tables

RUNS = 20


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A registry with one attempt of 20 runs, built once: no test here writes to it."""
    root = tmp_path_factory.mktemp("real-sizes") / "attempts"
    return root, registry_with_runs(root, RUNS)


def width(line: str) -> int:
    """The columns a terminal gives ``line``: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def widest(text: str) -> int:
    return max(map(width, text.splitlines()), default=0)


def flat(text: str) -> str:
    return " ".join(text.split())


def table_width(rows: list[list[str]], headers: list[str]) -> int:
    """How wide a table is laid out one row a line, nothing cut: each column its widest cell or
    its header and two, two spaces apart."""
    columns = [max([len(h) + 2, *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return sum(columns) + 2 * (len(columns) - 1)


def run_ids(root: Path, attempt: str) -> list[str]:
    return [r["run_id"] for r in json.loads((root / f"{attempt}.json").read_text(encoding="utf-8"))["runs"]]


def test_history_of_20_runs_is_a_table_a_screen_holds(cli, many, monkeypatch) -> None:
    root, attempt = many
    monkeypatch.setenv("COLUMNS", "80")
    shown = cli("-r", root, "history", attempt)
    assert shown.code == 0, shown.err
    assert len(shown.out.splitlines()) <= 150 and widest(shown.out) <= 80
    # each run is a row of each metric's table, named by its id once the title names the attempt
    for run in run_ids(root, attempt):
        assert len(re.findall(rf"^{run}  ", shown.out, re.MULTILINE)) >= 3, run
    assert f"runs of {attempt}" in flat(shown.out) and f"{attempt}/" not in shown.out
    monkeypatch.setenv("COLUMNS", "200")
    wide = cli("-r", root, "history", attempt).out
    assert re.search(r"^run +baseline +candidate$", wide, re.MULTILINE)  # the arms side by side
    assert len(wide.splitlines()) < len(shown.out.splitlines()) and widest(wide) <= 200


def test_show_gives_the_latest_runs_and_counts_the_rest(cli, many, monkeypatch) -> None:
    root, attempt = many
    monkeypatch.setenv("COLUMNS", "80")
    runs = run_ids(root, attempt)
    three = cli("-r", root, "show", attempt, "--runs", "3")
    assert three.code == 0, three.err
    assert len(three.out.splitlines()) <= 200
    assert re.findall(r"^Run (\S+)$", three.out, re.MULTILINE) == runs[::-1][:3]  # latest first
    said = f"17 earlier runs not shown: `ptreg show {attempt} --runs all` shows every run."
    assert said in three.out
    assert cli("-r", root, "show", attempt).out == three.out  # the default, as its help says
    for every in ("all", "0"):
        whole = cli("-r", root, "show", attempt, "--runs", every).out
        assert re.findall(r"^Run (\S+)$", whole, re.MULTILINE) == runs[::-1] and "earlier runs" not in whole
    # a script reads every run unless it asks for fewer
    sections = [s["title"] for s in json.loads(cli("-r", root, "show", attempt, "--json").out)["sections"]]
    assert [t for t in sections if t.startswith("Run ")] == [f"Run {run}" for run in runs]  # as the MCP tool
    assert_one_line_error(cli("-r", root, "show", attempt, "--runs", "many"), 2, "--runs", "'many'")
    assert_one_line_error(cli("-r", root, "show", attempt, "--runs", "-1"), 2, "--runs", "'-1'")


def test_next_names_the_runs_once_and_uses_the_width_it_has(cli, many, monkeypatch) -> None:
    root, attempt = many
    runs = run_ids(root, attempt)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = cli("-r", root, "next")
    assert narrow.code == 0, narrow.err
    assert widest(narrow.out) <= 80
    assert f"{attempt} has 20 runs (20 complete)" in flat(narrow.out)
    assert all(narrow.out.count(run) <= 1 for run in runs)  # once at most, never twice
    assert all(f"{attempt}/{run}" in narrow.out for run in runs[-3:])  # the latest are named
    monkeypatch.setenv("COLUMNS", "200")
    wide = cli("-r", root, "next").out
    assert 80 < widest(wide) <= 200
    assert len(wide.splitlines()) < len(narrow.out.splitlines())


def test_piped_compare_keeps_every_interval_whole(cli, many, monkeypatch) -> None:
    root, attempt = many
    a = f"{attempt}/{run_ids(root, attempt)[15]}"
    found = json.loads(cli("-r", root, "compare", a, attempt, "--json").out)
    spans = [  # each interval as the table writes it: of a difference, or of a ratio
        f"({m['low']:+.4g} to {m['high']:+.4g})" if m["kind"] != "ratio" else f"({m['low']:.3f}-{m['high']:.3f})"
        for m in found["metrics"]
        if m["low"] is not None
    ]
    assert len(spans) == len(found["metrics"])  # every metric has its interval: a history of runs of A's code
    # 130 columns once cut the interval column to fit its row; 80 stacks it; a pipe has no width
    for columns in ("80", "130", "200", None):
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        shown = cli("-r", root, "compare", a, attempt)
        assert shown.code == 0, shown.err
        assert all(span in flat(shown.out) for span in spans), (columns, shown.out)
        assert "…" not in shown.out.split("method:")[1]
        if columns is not None:
            assert widest(shown.out) <= int(columns)


def test_a_runs_metrics_are_printed_in_one_form(many, capsys) -> None:
    from ptreg.cli.measuring import print_results

    root, attempt = many
    results = read_results(run_folder(root, attempt, run_ids(root, attempt)[0]), root)
    found = tables(results)
    widths = sorted({table_width(t.rows, t.headers) for t in found})
    assert len(widths) > 1  # the score's table is wider than the others (it counts won/lost/tied)
    between = widths[0]  # room for every table but the widest as rows
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("COLUMNS", str(between))
    try:
        print_results(results)
    finally:
        monkeypatch.undo()
    out = capsys.readouterr().out
    turned = re.findall(r"^arm +baseline +candidate$", out, re.MULTILINE)
    as_rows = re.findall(r"^arm +n +mean", out, re.MULTILINE)
    assert len(turned) == len(found) and not as_rows, out  # never one metric a table and the next turned
    assert widest(out) <= between
    from ptreg.views.tables import plain_tables

    laid = plain_tables(found, width=200)
    assert all(text.splitlines()[0].split()[:3] == ["arm", "n", "mean"] for text in laid)  # room: all rows


def test_plain_tables_lays_out_tables_of_one_kind_alike() -> None:
    from ptreg.text import Table
    from ptreg.views.tables import ROWS, TURNED, _laid, plain_tables

    headers = ["arm", "n", "mean", "95% CI", "verdict"]
    narrow = Table("a", [["x", "2", "1.0", "0.9 to 1.1", "same"], ["y", "2", "2.0", "1.9 to 2.1", "same"]], headers)
    wide = Table(
        "b", [["x", "2", "1.0", "0.9 to 1.1", "better"], ["y", "2", "2.0", "1.9 to 2.1", "no difference"]], headers
    )
    other = Table("c", [["tiny", "3"]], ["config", "ms"])
    assert _laid(narrow.rows, narrow.headers, (), 42, (), (), ROWS)[0] == ROWS
    assert _laid(wide.rows, wide.headers, (), 42, (), (), ROWS)[0] == TURNED
    first, second, third = plain_tables([narrow, wide, other], width=42)
    assert first.splitlines()[0].split() == ["arm", "x", "y"] == second.splitlines()[0].split()
    assert third.splitlines()[0].split() == ["config", "ms"]  # another kind of row keeps its own form


def test_list_keeps_family_and_kind_at_80_columns(cli, many, monkeypatch) -> None:
    root, _ = many
    monkeypatch.setenv("COLUMNS", "80")
    shown = cli("-r", root, "list")
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[0].split()[:4] == ["id", "status", "family", "kind"]
    assert widest(shown.out) <= 80
    assert "Blocking pays off at these shapes." in shown.out  # the lesson whole, on a line of its own
    monkeypatch.setenv("COLUMNS", "100")
    wider = cli("-r", root, "list").out
    assert wider.splitlines()[0].split() == ["id", "status", "family", "kind", "lesson"] and widest(wider) <= 100
    lesson = next(line for line in wider.splitlines() if line.startswith("plain ")).split("  ")[-1].strip()
    assert len(lesson) >= 24 and "Blocking pays off at these shapes.".startswith(lesson.rstrip("…"))


def test_a_lesson_is_cut_at_a_word_and_never_unreadably_narrow() -> None:
    from ptreg.views.tables import READABLE, cut_at_word, with_free_text

    lesson = "Durable bulk writes are bound by fsync waits, not by the CPU; overlapping them helps"
    assert cut_at_word(lesson, 30) == "Durable bulk writes are bound…"
    rows = [["an-attempt-with-a-long-id", "worked", "runtime-perf", "runtime-benchmark", "x", "m", lesson]]
    headers = ["id", "status", "family", "kind", "objective", "methods", "lesson"]
    for columns in (80, 100, 120, 160):
        shown = with_free_text(rows, headers, optional=(5, 4), last=(3, 2), width=columns)
        lines = shown.splitlines()
        assert widest(shown) <= columns and lines[0].split()[:4] == ["id", "status", "family", "kind"]
        kept = lines[2].split("  ")[-1].strip() if lines[0].endswith("lesson") else lines[3].strip()
        assert len(kept) >= READABLE and lesson.startswith(kept.rstrip("…"))


def test_a_history_of_step_runs_of_two_attempts_keeps_a_row_per_run(cli, tmp_path: Path, monkeypatch) -> None:
    """Runs of backends whose history spans two attempts: each run a row, named attempt/run,
    the orientation column ("vs first") given up before a row becomes a block."""
    from helpers import complete_record, write_registry
    from ptreg.engine.workloads.training import TrainingWorkload
    from ptreg.records.evaluator import EvaluatorSpec
    from ptreg.records.run_results import Cell, Measurement, Provenance, Roles, StepSample, new_results
    from ptreg.store.runs import write_run

    attempts = ["a-first-attempt-with-a-long-id", "a-second-attempt"]
    root = write_registry(tmp_path / "attempts", [complete_record(a, status="not-tried") for a in attempts])
    spec = EvaluatorSpec.model_validate(
        {
            "name": "steps",
            "workload": "tinygpt-train",
            "metric": "ms-per-step",
            "configs": ["small"],
            "backends": ["naive", "numpy-blas"],
            "baseline": "numpy-blas",
            "warmup_steps": 0,
            "timed_steps": 1,
            "repeats": 3,
            "seed": 0,
            "threads": 1,
            "tolerance": {"rtol": 1e-4, "atol": 1e-6},
            "max_relative_spread": 5.0,
        }
    )
    for n in range(RUNS):
        cells = []
        for backend in spec.backends:
            samples: list = [
                StepSample(repeat=r, step=0, seconds=0.5 + 0.001 * (n + r), kernel_seconds={}, loss=1.0)
                for r in range(3)
            ]
            cell = Cell(backend=backend, config="small", status="measured")
            TrainingWorkload().summarize(spec, cell, samples)
            cells.append(cell)
        started = f"2026-12-01T{n:02d}:00:00Z"
        results = new_results(
            spec,
            Measurement([], cells, Roles(reference="naive", peer="numpy-blas"), [], "complete", None),
            Provenance(["ptreg", "run"], started, started, 2, attempt=attempts[n % 2], run_id=f"20261201T{n:02d}0000Z"),
        )
        write_run(root, results.model_copy(update={"evaluator": "steps@" + "0" * 12}), {})
    monkeypatch.setenv("COLUMNS", "80")
    shown = cli("-r", root, "history", "--evaluator", "steps")
    assert shown.code == 0, shown.err
    assert widest(shown.out) <= 80 and len(shown.out.splitlines()) <= 60
    assert len(re.findall(r"^a-(first|second)-\S+/20261201T\d{6}Z +\S", shown.out, re.MULTILINE)) == 2 * RUNS
    monkeypatch.setenv("COLUMNS", "200")
    assert "vs first" in cli("-r", root, "history", "--evaluator", "steps").out  # room: the orientation too
