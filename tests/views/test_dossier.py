"""The dossier (`ptreg show`): the seed page's facts under the seed page's headings, the seed's
section order (ptreg's own sections after), "unknown" for what is not known, and three formats.
tests/views/test_seed_page.py holds the seed page to the letter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import complete_record, failed_record, write_registry
from ptreg.records.attempt import Attempt
from ptreg.records.vocabulary import default_meta
from ptreg.store.directory import load_directory
from ptreg.views.dossier import SECTION_TITLES, render_text, sections

# The seed page's sections in its order, then ptreg's own lineage section.
ISSUE_ORDER = [
    "Evidence readout",
    "What the attempt taught",
    "Why it stopped or stayed bounded",
    "Method and scope",
    "Disposition",
    "How to read this dossier",
    "Source provenance",
    "Lineage",
]
SEED_ID = "wasm-backward-da-blocking"


def is_heading(line: str) -> bool:
    """A heading of the seed page: a short title line, capitalised, no list mark, no final
    punctuation, no code. Content lines are long sentences, list items or readouts."""
    text = line.strip()
    return (
        0 < len(text) <= 40
        and text[0].isupper()
        and not text.startswith("- ")
        and text[-1] not in ".:;,)`"
        and "`" not in text
    )


def split_sections(lines: list[str], headings: set[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.strip() in headings:
            current = line.strip()
            found.setdefault(current, [])
        elif current is not None and line.strip():
            found[current].append(line.strip())
    return found


@pytest.fixture(scope="module")
def seed_sections(seed_file: Path) -> tuple[list[str], dict[str, list[str]]]:
    lines = seed_file.read_text(encoding="utf-8").splitlines()
    headings = [line.strip() for line in lines if is_heading(line)]
    return headings, split_sections(lines, set(headings))


def test_seed_headings_are_parsed(seed_sections) -> None:
    headings, _ = seed_sections
    assert headings == ISSUE_ORDER[:7]


def test_show_presents_the_seed_facts(cli, shared_registry: Path, seed_sections) -> None:
    seed_headings, seed = seed_sections
    result = cli("--registry", shared_registry, "show", SEED_ID)
    assert result.code == 0, result.err
    ours = split_sections(result.out.splitlines(), set(seed_headings) | set(ISSUE_ORDER))
    for heading in seed_headings[:5]:
        first = seed[heading][0]  # the family too: shown as words, as the seed page reads it
        assert heading in ours, heading
        assert first in ours[heading], (heading, first, ours[heading])


def test_show_sections_in_the_issue_order(cli, shared_registry: Path) -> None:
    lines = [line.strip() for line in cli("--registry", shared_registry, "show", SEED_ID).out.splitlines()]
    positions = [lines.index(title) for title in ISSUE_ORDER]
    assert positions == sorted(positions)
    assert list(SECTION_TITLES) == ISSUE_ORDER


def test_show_seed_record_scope_and_disposition(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    record = next(a for a in shared_raw["attempts"] if a["id"] == SEED_ID)
    out = split_sections(cli("--registry", shared_registry, "show", SEED_ID).out.splitlines(), set(ISSUE_ORDER))
    assert "- Experiment family: runtime perf." in out["Method and scope"]  # its words, as the seed reads it
    shown = cli("--registry", shared_registry, "show", SEED_ID, "--format", "json").json()
    assert shown["attempt"]["family"] == "runtime-perf"  # the id stays the slug that --family takes
    assert "- Record kind: infrastructure." in out["Method and scope"]
    assert any(record["status"] in line for line in out["Disposition"])
    provenance = "\n".join(out["Source provenance"])
    assert record["source"] in provenance and record["failure_reason_confidence"] in provenance
    assert any("nothing" in line for line in out["Lineage"])


def test_markdown_format(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    record = next(a for a in shared_raw["attempts"] if a["id"] == SEED_ID)
    result = cli("--registry", shared_registry, "show", SEED_ID, "--format", "markdown")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == f"# {record['name']}"
    headings = [line[3:] for line in lines if line.startswith("## ")]
    assert [h for h in headings if h in ISSUE_ORDER] == ISSUE_ORDER
    assert record["evidence"] in result.out and record["lesson"] in result.out


def test_json_format(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    record = next(a for a in shared_raw["attempts"] if a["id"] == SEED_ID)
    data = cli("--registry", shared_registry, "show", SEED_ID, "--format", "json").json()
    assert data["attempt"] == record
    titles = [s["title"] for s in data["sections"]]
    assert titles[: len(ISSUE_ORDER)] == ISSUE_ORDER
    by_title = {s["title"]: s["lines"] for s in data["sections"]}
    assert by_title["Evidence readout"] == [record["evidence"]]
    assert by_title["Why it stopped or stayed bounded"] == [record["failure_reason"]]


def test_missing_fields_print_unknown(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [{"id": "bare", "name": "Bare legacy record", "status": "failed"}])
    result = cli("--registry", root, "show", "bare")
    assert result.code == 0, result.err
    out = split_sections(result.out.splitlines(), set(ISSUE_ORDER))
    assert out["Evidence readout"] == ["unknown"]
    assert out["What the attempt taught"] == ["unknown"]
    assert out["Why it stopped or stayed bounded"] == ["unknown"]
    scope = "\n".join(out["Method and scope"])
    for label in ("Experiment family", "Record kind", "Methods", "Bases", "Objective", "Data rows"):
        assert f"{label}: unknown." in scope, label
    assert out["Disposition"][0] == "unknown"
    provenance = "\n".join(out["Source provenance"])
    assert "Source: unknown." in provenance and "Evidence sources: unknown." in provenance
    assert "confidence: unknown" in provenance
    assert " 0." not in scope, "an unknown count is not zero"


def test_zero_rows_is_not_unknown(tmp_path: Path) -> None:
    attempt = Attempt.model_validate(complete_record("z", data_rows=0))
    text = render_text(attempt, sections(attempt, {"z": attempt}, default_meta(), None))
    assert "- Data rows: 0." in text


def test_lineage_section_shows_chain_and_successors(tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "reg",
        [
            failed_record("a"),
            failed_record("b", varied_from="a", varied="tile 32 -> 64"),
            complete_record("c", varied_from="b", varied="register tile"),
        ],
    )
    by_id = load_directory(root).by_id()
    parts = {s.title: s.lines for s in sections(by_id["b"], by_id, default_meta(), None)}
    lineage = "\n".join(parts["Lineage"])
    assert "a -> b" in lineage and "tile 32 -> 64" in lineage
    assert "c" in lineage and "register tile" in lineage and "Superseded by" in lineage


def test_lineage_section_keeps_varied_when_the_parent_is_missing(tmp_path: Path) -> None:
    """The dossier of an attempt whose varied_from is not in the registry (e.g. a partial
    import) still says what the attempt varied."""
    attempt = Attempt.model_validate(complete_record("orphan", varied_from="gone", varied="rank 8 -> 16"))
    parts = {s.title: s.lines for s in sections(attempt, {"orphan": attempt}, default_meta(), None)}
    lineage = "\n".join(parts["Lineage"])
    assert "gone" in lineage
    assert "rank 8 -> 16" in lineage, lineage


def test_show_of_the_sample_registry_in_each_format(cli, sample_registry: Path) -> None:
    for fmt in ("text", "markdown", "json"):
        result = cli("--registry", sample_registry, "show", "cache-blocked", "-f", fmt)
        assert result.code == 0, (fmt, result.err)
        assert "tile loops 64x64" in result.out
    json.loads(cli("--registry", sample_registry, "show", "harness-fix", "--format", "json").out)
