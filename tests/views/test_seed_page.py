"""`ptreg show wasm-backward-da-blocking` against the seed page (../shared/seeds): every fact of it,
its sections in its order with the record's own text first, the seed's ideas in ptreg's own
words (none of its sentences copied), and markdown that a CommonMark renderer (markdown-it-py)
reads paragraph by paragraph."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from helpers import complete_record, write_registry
from ptreg.views.dossier import READING_NOTE, RETAINED_NOTE, SEED_SECTIONS

SEED_ID = "wasm-backward-da-blocking"
# the sections of the seed whose text is the record's own (the rest is the page's fixed text)
RECORD_FIELDS = {
    "Evidence readout": "evidence",
    "What the attempt taught": "lesson",
    "Why it stopped or stayed bounded": "failure_reason",
    "Disposition": "next_action",
}


@pytest.fixture(scope="module")
def seed(seed_file: Path) -> dict[str, list[str]]:
    """The seed page's sections, each with its lines, in its order."""
    found: dict[str, list[str]] = {}
    current = None
    for line in seed_file.read_text(encoding="utf-8").splitlines():
        if line.strip() in SEED_SECTIONS:
            current = line.strip()
            found[current] = []
        elif current is not None and line.strip():
            found[current].append(line.strip())
    return found


@pytest.fixture(scope="module")
def record(shared_raw: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in shared_raw["attempts"] if a["id"] == SEED_ID)


def sections_of(text: str, titles: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.strip() in titles:
            current = line.strip()
            found[current] = []
        elif current is not None and line.strip():
            found[current].append(line.strip())
    return found


def shown(cli, registry: Path, *args: str) -> str:
    result = cli("--registry", registry, "show", SEED_ID, *args)
    assert result.code == 0, result.err
    return result.out


def test_the_seed_has_the_sections_ptreg_follows(seed: dict[str, list[str]]) -> None:
    assert list(seed) == list(SEED_SECTIONS)


def test_sections_in_the_seeds_order_with_ptregs_own_after(cli, shared_registry: Path) -> None:
    lines = [line.strip() for line in shown(cli, shared_registry).splitlines()]
    positions = [lines.index(title) for title in SEED_SECTIONS]
    assert positions == sorted(positions)
    assert lines.index("How to read this dossier") < lines.index("Source provenance")
    assert lines.index("Lineage") > lines.index("Source provenance"), "ptreg's own section after the seed's"


def test_every_fact_of_the_seed_with_the_records_text_first(
    cli, shared_registry: Path, seed: dict[str, list[str]], record: dict[str, Any]
) -> None:
    ours = sections_of(shown(cli, shared_registry), [*SEED_SECTIONS, "Lineage"])
    for title, field in RECORD_FIELDS.items():
        assert seed[title][0] == record[field], "the seed renders this field"
        assert ours[title][0] == record[field], title
    assert seed["Method and scope"] == ["- Experiment family: runtime perf.", "- Record kind: infrastructure."]
    # the family as the seed spells it, in words; the record and `list` keep the slug
    assert ours["Method and scope"][:2] == seed["Method and scope"]
    # what ptreg adds within a section comes after the record's text and the page's own
    disposition = ours["Disposition"]
    assert disposition.index(f"- Status: {record['status']}.") > disposition.index(RETAINED_NOTE)
    provenance = ours["Source provenance"]
    assert "docs/performance.md" in "\n".join(provenance) and "exact" in "\n".join(provenance)


def test_provenance_opens_with_the_file_the_record_came_from(
    cli, shared_registry: Path, shared_file: Path, seed: dict[str, list[str]]
) -> None:
    assert "docs/attempts.json" in seed["Source provenance"][0]
    first = sections_of(shown(cli, shared_registry), list(SEED_SECTIONS))["Source provenance"][0]
    assert first.startswith(f"This record was imported from {shared_file}, schema_version 2")


def words(text: str) -> list[list[str]]:
    """Clauses (split at sentence and clause punctuation) as lists of lowercase words."""
    return [re.findall(r"[a-z0-9']+", clause) for clause in re.split(r"[.;:!?]", text.lower())]


def shared_runs(ours: str, theirs: str, length: int) -> set[tuple[str, ...]]:
    def runs(text: str) -> set[tuple[str, ...]]:
        return {tuple(c[i : i + length]) for c in words(text) for i in range(len(c) - length + 1)}

    return runs(ours) & runs(theirs)


def test_the_fixed_texts_are_ptregs_own_words(
    cli, shared_registry: Path, seed: dict[str, list[str]], record: dict[str, Any]
) -> None:
    """None of the seed page's own sentences, nor any eight words of them in a row."""
    record_text = {str(v) for v in record.values()}
    fixed = [line for lines in seed.values() for line in lines if line not in record_text and not line.startswith("- ")]
    assert len(fixed) >= 5, "the seed's fixed texts: disposition note, reading guide, provenance"
    page = shown(cli, shared_registry)
    for line in fixed:
        for sentence in re.split(r"(?<=\.) ", line):
            assert sentence not in page, sentence
    ours = " ".join([RETAINED_NOTE, *READING_NOTE])
    assert shared_runs(ours, " ".join(fixed), 8) == set()
    provenance = sections_of(page, list(SEED_SECTIONS))["Source provenance"][0]
    assert shared_runs(provenance, " ".join(seed["Source provenance"]), 6) == set()


def test_the_seeds_ideas_are_carried(cli, shared_registry: Path) -> None:
    page = shown(cli, shared_registry)
    guide = " ".join(sections_of(page, list(SEED_SECTIONS))["How to read this dossier"])
    assert "Keep negative outcomes and regressions beside any improvement" in guide
    assert "a local win is not a general claim" in guide
    for idea in ("unknown, never as zero", "hypothesis", "smallest new comparison", "evaluator", "budget"):
        assert idea in guide, idea
    for idea in ("question", "frozen", "budget", "tracking issue", "does not license"):
        assert idea in RETAINED_NOTE, idea


# --------------------------------------------------------------------------- markdown, read by a renderer


def blocks(markdown: str) -> list[tuple[str, str]]:
    """The top-level blocks a CommonMark renderer (with GFM tables) sees: (kind, text)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    found = []
    for index, token in enumerate(tokens):
        if token.level != 0 or not token.type.endswith("_open"):
            continue
        kind = token.type.removesuffix("_open")
        inline = next((t for t in tokens[index:] if t.type == "inline"), None)
        found.append((kind, inline.content if inline is not None else ""))
    return found


def test_every_paragraph_renders_as_its_own_paragraph(cli, shared_registry: Path, record: dict[str, Any]) -> None:
    found = blocks(shown(cli, shared_registry, "--format", "markdown"))
    headings = [text for kind, text in found if kind == "heading"]
    assert headings[1 : 1 + len(SEED_SECTIONS)] == list(SEED_SECTIONS)
    paragraphs = [text for kind, text in found if kind == "paragraph"]
    for text in (record["evidence"], record["lesson"], record["failure_reason"], record["next_action"]):
        assert text in paragraphs, text
    assert RETAINED_NOTE in paragraphs, "the retained-disposition note is a paragraph, not part of a list item"
    for text in READING_NOTE:
        assert text in paragraphs, text
    lists = [index for index, (kind, _) in enumerate(found) if kind == "bullet_list"]
    assert lists, "the scope, status and sources are lists"


def test_markdown_keeps_hostile_text_in_its_paragraph(cli, tmp_path: Path) -> None:
    evidence = "# not a heading\n- not an item\n1. not a list\n    not code\n---\nthe end"
    lesson = "> not a quote"
    root = write_registry(tmp_path / "reg", [complete_record("odd", evidence=evidence, lesson=lesson)])
    result = cli("--registry", root, "show", "odd", "--format", "markdown")
    assert result.code == 0, result.err
    found = blocks(result.out)
    assert [kind for kind, _ in found].count("heading") == 1 + len(SEED_SECTIONS) + 1
    html = MarkdownIt("commonmark").render(result.out)
    assert "<blockquote>" not in html and "<pre>" not in html and "<ol>" not in html and "<hr" not in html
    paragraph = next(text for kind, text in found if kind == "paragraph" and "not a heading" in text)
    for line in ("not an item", "not a list", "not code", "the end"):
        assert line in paragraph


def test_json_keeps_the_sections_and_the_origin(
    cli, shared_registry: Path, shared_file: Path, shared_raw: dict[str, Any], record: dict[str, Any]
) -> None:
    data = json.loads(shown(cli, shared_registry, "--format", "json"))
    assert data["attempt"] == record, "the record as its ledger holds it"
    origin = data["origin"]
    assert (origin["file"], origin["schema_version"]) == (str(shared_file), 2)
    assert shared_raw["attempts"][origin["position"]] == record and origin["keys"] == list(record)
    assert [s["title"] for s in data["sections"]][: len(SEED_SECTIONS)] == list(SEED_SECTIONS)
