"""Tables fit the terminal: free text is cut with "…", then optional columns are left out, and
ids, statuses and numbers are never cut; `--json` keeps every character."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import complete_record, write_registry
from ptreg.text import Table
from ptreg.views.tables import plain, simple

LONG_ID = "an-attempt-whose-id-is-long-and-must-stay-whole"
LESSON = "A lesson long enough that no narrow terminal shows it whole, " * 3


def widths(text: str) -> list[int]:
    return [len(line) for line in text.splitlines()]


def test_free_text_is_cut_and_ids_never_are() -> None:
    rows = [[LONG_ID, "failed", "runtime-perf", LESSON]]
    shown = plain(rows, ["id", "status", "family", "lesson"], shrink=(2, 3), width=100)
    assert max(widths(shown)) <= 100
    assert LONG_ID in shown and "…" in shown


def test_optional_columns_are_left_out_in_order_when_cutting_is_not_enough() -> None:
    rows = [[LONG_ID, "worked", "runtime-perf", "runtime-benchmark", "training-step-time", LESSON]]
    headers = ["id", "status", "family", "kind", "objective", "lesson"]
    shown = plain(rows, headers, shrink=(2, 3, 4, 5), drop=(2, 3, 4), width=80)
    assert max(widths(shown)) <= 80
    header = shown.splitlines()[0].split()
    assert header[:2] == ["id", "status"] and "lesson" in header and "family" not in header
    wide = plain(rows, headers, shrink=(2, 3, 4, 5), drop=(2, 3, 4), width=400)
    assert wide.splitlines()[0].split() == headers and LESSON.strip() in wide


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_list_and_backends_fit_the_terminal_and_json_keeps_all(cli, tmp_path: Path, monkeypatch, columns) -> None:
    root = write_registry(
        tmp_path / "reg", [complete_record(LONG_ID, lesson=LESSON.strip()), complete_record("short", lesson="Short.")]
    )
    monkeypatch.setenv("COLUMNS", str(columns))
    listed = cli("-r", root, "list")
    assert listed.code == 0 and max(widths(listed.out)) <= columns
    assert LONG_ID in listed.out
    assert json.loads(cli("-r", root, "list", "--json").out)[0]["lesson"] == LESSON.strip()
    backends = cli("backends")
    table = backends.out.split("\n\n")[0]  # unavailable backends are explained below the table
    assert backends.code == 0 and max(widths(table.split(" is unavailable:")[0])) <= columns


def test_a_dossier_at_a_terminal_wraps_its_prose_and_fits_its_tables() -> None:
    from ptreg.records.attempt import Attempt
    from ptreg.views.dossier import Section, render_text

    attempt = Attempt.model_validate(complete_record("d"))
    note = Table("t", [["naive", "passed", "a finding " * 20]], ["backend", "parity", "finding"], text=("finding",))
    parts = [Section("Evidence readout", ["word " * 60, "- item " * 30, note])]
    text = render_text(attempt, parts, wrap=60)
    assert max(widths(text)) <= 60 and "a findin…" in text
    assert "\n  item" in text  # a list item's lines hang under it
    piped = render_text(attempt, parts, wrap=None)
    assert ("word " * 60).strip() in piped  # in a pipe a paragraph stays one line, for grep


_CELL = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp", "Cf")), max_size=12)


@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(_CELL.filter(lambda h: h == h.strip() and h != ""), min_size=n, max_size=n),
            st.lists(st.lists(_CELL, min_size=n, max_size=n), max_size=6),
        )
    )
)
def test_simple_lays_out_a_table_as_tabulate_does(table) -> None:
    """`plain` lays out large tables itself (tabulate's type guessing cost seconds at 100,000
    rows); it must print exactly what tabulate's "simple" format prints."""
    import tabulate as tabulate_module

    headers, rows = table
    if tabulate_module.WIDE_CHARS_MODE and not all(c.isascii() for row in [headers, *rows] for c in row):
        return  # plain() hands such tables to tabulate
    expected = tabulate_module.tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    assert simple(rows, headers) == expected
