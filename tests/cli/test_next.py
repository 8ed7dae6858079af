"""`ptreg next`: ranked suggestions as text that fits the terminal, or JSON that parses."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import assert_one_line_error


def test_next_text_fits_80_columns_and_cites_its_sources(cli, sample_registry: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = cli("-r", sample_registry, "next", "--limit", "0")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines and all(len(line) <= 80 for line in lines)
    # the sample's not-tried proposal has no admission; its concluded tip's next action is open
    assert "run: fused-adam" in result.out
    assert "open-next-action: register-blocked" in result.out


def test_next_json_is_the_same_suggestions_limited(cli, sample_registry: Path) -> None:
    whole = json.loads(cli("-r", sample_registry, "next", "--json", "--limit", "0").out)
    first = json.loads(cli("-r", sample_registry, "next", "--json", "--limit", "1").out)
    assert whole["total"] == first["total"] == len(whole["suggestions"]) >= 2
    assert first["suggestions"] == whole["suggestions"][:1]
    for s in whole["suggestions"]:
        assert s["attempts"], s  # every suggestion cites a record


def test_next_refuses_a_negative_limit(cli, sample_registry: Path) -> None:
    assert_one_line_error(cli("-r", sample_registry, "next", "--limit", "-1"), 2, "--limit")


def test_next_on_a_missing_registry_is_one_line(cli, tmp_path: Path) -> None:
    result = cli("-r", tmp_path / "nowhere", "next")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1
