"""Output paths the second round of attacks on issue 43 tried that the corpus cannot hold as a
path (tests/data/bad/cases-second-round-43.json holds the rest)."""

from __future__ import annotations

from pathlib import Path

from helpers import sample_records, write_registry


def test_an_output_named_with_a_trailing_slash_is_a_folder_and_refused(tmp_path: Path, cli) -> None:
    """`> ledger.json/` fails in a shell; so does `-o ledger.json/`, and no file `ledger.json` is made."""
    root = write_registry(tmp_path / "reg", sample_records())
    result = cli("-r", root, "export", "-o", f"{tmp_path / 'ledger.json'}/")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"ptreg: error: {tmp_path / 'ledger.json'}/: ends in /, so names a folder; give the name of a file to write"
    ]
    assert not (tmp_path / "ledger.json").exists()
