"""At 80 columns the tables of this project's own registry fit, and what they say is never
cut: a chain, a list of backends, a verdict or a note is carried whole, in blocks when a table
cannot fit, and a note moves below a table rather than widening it."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import REPO
from ptreg.views.tables import plain

WIDTH = 80


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # a copy: reading a registry writes its query index beside it. In a short folder, whatever
    # pytest's own are (xdist adds a level): an evaluator that does not verify in a copy names
    # the missing folder by its absolute path, which no table can break
    folder = Path(tempfile.mkdtemp(prefix="ptreg-"))
    monkeypatch.chdir(folder)
    try:
        yield Path(shutil.copytree(REPO / "attempts", folder / "attempts"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _flat(text: str) -> str:
    """The text with its line breaks and alignment gone, to find a wrapped cell whole."""
    return " ".join(text.split())


@pytest.mark.parametrize("command", [["list"], ["streaks"], ["evaluator", "list"], ["backends"]])
def test_the_projects_tables_fit_80_columns(cli, project: Path, monkeypatch, command: list[str]) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    shown = cli("-r", "attempts", *command)
    assert shown.code == 0, shown.err
    too_wide = [line for line in _lines(shown.out) if len(line) > WIDTH]
    assert not too_wide
    if command in (["streaks"], ["evaluator", "list"]):  # no free text: nothing cut
        assert "…" not in shown.out


def test_a_streak_chain_and_an_evaluators_backends_are_never_cut(cli, project: Path, monkeypatch) -> None:
    # the longest run of names the registry's streaks print today, the negatives at the tip or the
    # attempts before them ("(after a -> b -> c)"), as the table writes it: the registry grows
    streaks = json.loads(cli("-r", "attempts", "streaks", "--json").out)
    runs = [s["trailing"] for s in streaks] + [[n for n in s["chain"] if n not in s["trailing"]] for s in streaks]
    chain = " -> ".join(max(runs, key=len))
    assert chain.count(" -> ") >= 2, chain
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert chain in _flat(cli("-r", "attempts", "streaks").out)
    assert "naive,blocked-numpy,numba,numpy-blas" in cli("-r", "attempts", "evaluator", "list").out
    monkeypatch.setenv("COLUMNS", "200")  # room enough: the chain on a line of its own, whole
    wide = cli("-r", "attempts", "streaks").out
    assert any(chain in line for line in _lines(wide))


def test_a_verdict_in_a_compared_table_is_never_cut(cli, project: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    shown = cli("-r", "attempts", "compare", "tinygpt-step-attribution", "tinygpt-fast-kernels")
    assert shown.code == 0, shown.err
    assert "not comparable: different machines" in shown.out and "…" not in shown.out


def test_a_run_table_moves_its_notes_below_it_and_never_cuts_them(cli, project: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    shown = cli("-r", "attempts", "show", "tinygpt-step-attribution").out
    step = shown.split("Training step:")[1].split("Per-kernel")[0]
    assert "[1] spread too wide to trust" in step and "spread too …" not in step
    assert max(len(line) for line in _lines(step)) <= 100
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    narrow = cli("-r", "attempts", "show", "tinygpt-step-attribution").out
    step = narrow.split("Training step:")[1].split("Per-kernel")[0]
    assert max(len(line) for line in _lines(step)) <= WIDTH and "[1] spread too wide to trust" in step


def test_a_table_that_cannot_fit_is_laid_out_as_blocks_with_every_word() -> None:
    verdict = "slower (q=0.01 after Benjamini-Hochberg), beyond the drift between runs"
    rows = [["small", "naive", "1.31x (1.10-1.52)", verdict], ["xl", "numba", "0.95x", "no difference"]]
    headers = ["config", "backend", "B/A (95% CI)", "verdict"]
    shown = plain(rows, headers, width=50)
    assert max(len(line) for line in _lines(shown)) <= 50
    assert verdict in _flat(shown) and "…" not in shown
    blocks = shown.split("\n\n")
    assert len(blocks) == 2 and blocks[1].splitlines()[0].split() == ["config", "xl"]
    # free text is still cut to its line in a block: --json has it whole
    cut = plain([["a", "word " * 40]], ["id", "lesson"], shrink=(1,), width=30)
    assert max(len(line) for line in _lines(cut)) <= 30 and "…" in cut


def test_notes_move_below_the_table_each_once() -> None:
    note = "spread too wide to trust: rerun on a quiet machine"
    rows = [["small", "1.0", note], ["large", "2.0", ""], ["xl", "3.0", note]]
    shown = plain(rows, ["config", "ms", "note"], width=40, notes=(2,))
    lines = _lines(shown)
    assert max(map(len, lines)) <= 40
    assert lines[2].split() == ["small", "1.0", "[1]"] and lines[4].split() == ["xl", "3.0", "[1]"]
    assert _flat(shown).count("[1] spread too wide to trust: rerun on a quiet machine") == 1
    assert plain(rows, ["config", "ms", "note"], width=200, notes=(2,)).count(note) == 2  # room: in place
