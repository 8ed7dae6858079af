"""Every published version of the shared ledger (../shared/data/history and the current file):
each imports, validates with exit 0 and exports back byte for byte in its own schema_version, in
its order and its key order; what an older format lacked stays unknown and is a warning naming
its origin; a vocabulary a file lacks is taken from the terms its records use, never from
ptreg's defaults. Expectations are computed from the raw JSON, not from ptreg."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import HISTORY_FILES, add_run, complete_record, snapshot, step_cell, step_results, write_attempts_file
from ptreg.records.vocabulary import default_meta
from ptreg.store.directory import load_meta

# the statuses the source project's query tool counts as negative
NEGATIVE = {"failed", "regressed", "inconclusive"}


@pytest.fixture(params=HISTORY_FILES, ids=lambda p: p.stem)
def ledger(request: pytest.FixtureRequest, shared_dir: Path) -> Path:
    return Path(request.param)


def raw(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def imported(cli, ledger: Path, root: Path, *more: str) -> Any:
    result = cli("--registry", root, "import", ledger, *more)
    assert result.code == 0, result.err
    return result


def test_every_version_imports_validates_and_exports_back_byte_for_byte(cli, ledger: Path, tmp_path: Path) -> None:
    original = raw(ledger)
    root = tmp_path / "reg"
    imported(cli, ledger, root)
    checked = cli("--registry", root, "validate", "--json")
    assert checked.code == 0, checked.out
    assert (checked.json()["attempts"], checked.json()["errors"]) == (len(original["attempts"]), 0)
    out = tmp_path / "exported.json"
    exported = cli("--registry", root, "export", "-o", out, "--schema-version", original["schema_version"])
    assert exported.code == 0, exported.err
    again = raw(out)
    assert again == original, "value for value"
    assert [a["id"] for a in again["attempts"]] == [a["id"] for a in original["attempts"]], "the ledger's order"
    assert [list(a) for a in again["attempts"]] == [list(a) for a in original["attempts"]], "each record's key order"
    assert list(again) == list(original), "the top-level keys, in their order"
    assert out.read_bytes() == ledger.read_bytes()


def test_an_exported_ledger_imports_again_as_the_same_registry(cli, ledger: Path, tmp_path: Path) -> None:
    version = raw(ledger)["schema_version"]
    imported(cli, ledger, tmp_path / "a")
    out = tmp_path / "out.json"
    assert cli("--registry", tmp_path / "a", "export", "-o", out, "--schema-version", version).code == 0
    imported(cli, out, tmp_path / "b")
    for path in sorted((tmp_path / "a").glob("*.json")):
        ours, theirs = raw(path), raw(tmp_path / "b" / path.name)
        ours.pop("origin", None), theirs.pop("origin", None)
        assert ours == theirs, path.name


def test_the_older_formats_are_warnings_naming_their_origin_and_errors_when_strict(
    cli, ledger: Path, tmp_path: Path
) -> None:
    original = raw(ledger)
    root = tmp_path / "reg"
    imported(cli, ledger, root)
    problems = cli("--registry", root, "validate", "--json").json()["problems"]
    strict = cli("--registry", root, "validate", "--strict", "--json")
    complete = "kind_vocabulary" in original  # only the current file has every field
    assert (strict.code == 0) is complete
    if complete:
        assert problems == [] and strict.json()["problems"] == []
        return
    assert problems and {p["severity"] for p in problems} == {"warning"}
    assert all(p["message"].startswith(f"imported from schema_version {original['schema_version']}") for p in problems)
    assert {p["severity"] for p in strict.json()["problems"]} == {"error"}
    assert len(strict.json()["problems"]) == len(problems)
    # exactly the fields a complete record states and these records do not have
    by_id = {a["id"]: a for a in original["attempts"]}
    for p in problems:
        field = p["pointer"].rsplit("/", 1)[1]
        assert field not in by_id[p["attempt_id"]], (p["attempt_id"], field)


def test_version_1_says_what_it_lacks(cli, shared_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    result = imported(cli, HISTORY_FILES[0], root)
    assert "its format has no family" in result.out and "lesson" in result.out
    text = cli("--registry", root, "validate").out
    first = raw(HISTORY_FILES[0])["attempts"][0]["id"]
    assert f"warning [unknown-field] {first}: imported from schema_version 1: no lesson" in text
    assert text.strip().endswith("0 errors, 85 warnings: valid")


def test_missing_vocabularies_come_from_the_records_and_never_from_the_defaults(
    cli, ledger: Path, tmp_path: Path
) -> None:
    original = raw(ledger)
    root = tmp_path / "reg"
    result = imported(cli, ledger, root)
    meta = load_meta(root).model_dump(mode="json")
    defaults = default_meta().model_dump(mode="json")
    missing = [
        k
        for k in ("confidence_vocabulary", "method_vocabulary", "objective_vocabulary", "kind_vocabulary")
        if k not in original
    ]
    if missing:
        assert f"the file has no {', '.join(missing)}" in result.out, "every missing part, in one report"
    for key in ("confidence_vocabulary", "method_vocabulary", "objective_vocabulary", "kind_vocabulary"):
        if key in original:
            assert meta[key] == original[key]
        else:
            assert meta[key] != defaults[key] and all(text is None for text in meta[key].values())


def test_terms_used_without_a_vocabulary_are_imported_without_a_definition(cli, tmp_path: Path) -> None:
    """A schema_version 2 file with kinds and methods but no vocabularies of them."""
    record = {
        "id": "fused-step",
        "name": "Fused step",
        "family": "runtime-perf",
        "status": "worked",
        "evidence": "1.1x",
        "failure_reason_confidence": "not-applicable",
        "lesson": "Fusion helps.",
        "next_action": "Keep it.",
        "evidence_sources": ["notes.md"],
        "source": "notes.md",
        "kind": "runtime-benchmark",
        "methods": ["operator-fusion", "hand-tiling"],
        "objective": "step-time",
    }
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"schema_version": 2, "attempts": [record]}), encoding="utf-8")
    root = tmp_path / "reg"
    result = imported(cli, path, root)
    assert "confidence_vocabulary, method_vocabulary, objective_vocabulary, kind_vocabulary" in result.out
    meta = load_meta(root).model_dump(mode="json")
    assert meta["method_vocabulary"] == {"operator-fusion": None, "hand-tiling": None}
    assert meta["kind_vocabulary"] == {"runtime-benchmark": None}
    assert meta["confidence_vocabulary"] == {"not-applicable": None}
    assert cli("--registry", root, "validate").code == 0
    coverage = cli("--registry", root, "coverage").out
    assert "hand-tiling" in coverage and "imported without a definition" in coverage
    terms = {t["term"]: t for t in cli("--registry", root, "coverage", "--json").json()["vocabulary"]}
    assert terms["hand-tiling"]["without_definition"] is True
    shown = cli("--registry", root, "show", "fused-step").out
    assert "- Record kind: runtime-benchmark (imported without a definition)." in shown
    assert "hand-tiling (imported without a definition)" in shown
    out = tmp_path / "out.json"
    exported = cli("--registry", root, "export", "-o", out)
    assert "imported without a definition" in exported.err and "method hand-tiling" in exported.err
    assert list(raw(out)) == ["schema_version", "attempts"], "no definition to write, so no vocabulary"
    assert cli("--registry", root, "vocab", "add", "method", "hand-tiling", "--description", "Tiles by hand.").code == 0
    assert load_meta(root).model_dump(mode="json")["method_vocabulary"]["hand-tiling"] == "Tiles by hand."
    again = cli("--registry", root, "vocab", "add", "method", "hand-tiling", "--description", "Other.")
    assert again.code == 1, "a defined term is never redefined"


def test_export_refuses_version_1_when_records_would_lose_fields(cli, shared_file: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    imported(cli, shared_file, root)
    out = tmp_path / "v1.json"
    result = cli("--registry", root, "export", "--schema-version", "1", "-o", out)
    assert result.code == 1 and not out.exists()
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.err
    first = raw(shared_file)["attempts"][0]
    assert first["id"] in lines[0] and "family" in lines[0] and "66 attempts would lose fields" in lines[0]


def test_version_1_registry_exports_in_its_own_version_unless_told(cli, shared_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    imported(cli, HISTORY_FILES[0], root)
    out = tmp_path / "plain.json"
    assert cli("--registry", root, "export", "-o", out).code == 0
    assert out.read_bytes() == Path(HISTORY_FILES[0]).read_bytes(), "the version it came in, byte for byte"
    assert cli("validate", out).code == 0
    assert cli("--registry", tmp_path / "again", "import", out).code == 0
    assert cli("--registry", tmp_path / "again", "validate", "--json").json()["errors"] == 0
    result = cli("--registry", root, "export", "--schema-version", "2")  # asked for: with a note
    assert result.code == 0
    document = json.loads(result.out)
    assert document["schema_version"] == 2 and list(document) == ["schema_version", "attempts"]
    assert "older format" in result.err and "--schema-version 1" in result.err


def test_a_mix_of_version_1_records_and_others_asks_for_a_version(cli, shared_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    imported(cli, HISTORY_FILES[0], root)
    (root / "added-here.json").write_text(json.dumps(complete_record("added-here")))
    result = cli("--registry", root, "export")
    assert result.code == 2 and result.out == "" and "Traceback" not in result.err
    assert "--schema-version 2" in result.err and "--schema-version 1" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert json.loads(cli("--registry", root, "export", "--schema-version", "2").out)["schema_version"] == 2


def test_export_keeps_the_ledgers_order_unless_sorted(cli, shared_file: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    imported(cli, shared_file, root)
    ids = [a["id"] for a in raw(shared_file)["attempts"]]
    assert ids != sorted(ids), "the ledger's order is not the order of its ids"
    assert [a["id"] for a in json.loads(cli("--registry", root, "export").out)["attempts"]] == ids
    by_id = json.loads(cli("--registry", root, "export", "--sort", "id").out)["attempts"]
    assert [a["id"] for a in by_id] == sorted(ids)
    assert [a["id"] for a in cli("--registry", root, "list", "--json").json()] == ids, "list, too"
    assert cli("--registry", root, "export", "--sort", "name").code == 2


def test_a_later_import_comes_after_an_earlier_one(cli, tmp_path: Path) -> None:
    """Two imports within the same second still keep their order."""
    first = write_attempts_file(tmp_path / "first.json", [{"id": "zeta", "name": "Z", "status": "not-tried"}], 1)
    second = write_attempts_file(tmp_path / "second.json", [{"id": "alpha", "name": "A", "status": "not-tried"}], 1)
    root = tmp_path / "reg"
    imported(cli, first, root)
    imported(cli, second, root)
    document = json.loads(cli("--registry", root, "export", "--schema-version", "1").out)
    assert [a["id"] for a in document["attempts"]] == ["zeta", "alpha"]
    assert raw(root / "alpha.json")["origin"]["import_number"] == 2


def test_importing_the_same_file_again_changes_no_byte(cli, ledger: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    imported(cli, ledger, root)
    before = snapshot(root)
    imported(cli, ledger, root, "--replace")
    assert snapshot(root) == before


def test_provenance_names_the_file_the_record_came_from(cli, shared_file: Path, tmp_path: Path) -> None:
    records = raw(shared_file)["attempts"]
    position = next(i for i, a in enumerate(records) if a["id"] == "wasm-backward-da-blocking")
    root = tmp_path / "reg"
    imported(cli, shared_file, root, "--origin", "docs/attempts.json")
    shown = cli("--registry", root, "show", "wasm-backward-da-blocking").out
    provenance = shown.split("Source provenance\n", 1)[1]
    assert f"imported from docs/attempts.json, schema_version 2, where it is attempt {position + 1}" in provenance
    assert f"#/attempts/{position}" in provenance
    data = cli("--registry", root, "show", "wasm-backward-da-blocking", "--json").json()
    assert data["origin"]["file"] == "docs/attempts.json" and data["attempt"] == records[position]
    other = tmp_path / "other"
    imported(cli, shared_file, other)
    assert f"imported from {shared_file}" in cli("--registry", other, "show", "wasm-backward-da-blocking").out


def test_a_record_concluded_through_ptreg_must_be_complete(cli, shared_dir: Path, tmp_path: Path) -> None:
    """An older format's record may stay incomplete while it is as imported; rewritten, it may not."""
    root = tmp_path / "reg"
    imported(cli, HISTORY_FILES[0], root)
    attempt_id = raw(HISTORY_FILES[0])["attempts"][0]["id"]
    cell = step_cell("naive", "xl", ms=10000, shares=(0.32, 0.33, 0.32))
    add_run(root, step_results(attempt_id, "20261201T092700Z", [cell]))
    before = (root / f"{attempt_id}.json").read_bytes()
    result = cli(
        "--registry", root, "conclude", attempt_id, "--status", "worked", "--lesson", "l", "--next-action", "n"
    )
    assert result.code == 1, result.err
    assert "imported from schema_version 1: no family" in result.err and "nothing written" in result.err
    assert (root / f"{attempt_id}.json").read_bytes() == before


# --------------------------------------------------------------------------- queries as the original tool answers


def original_streak_order(attempts: list[dict[str, Any]]) -> list[str]:
    """The objectives in the order the source project's query tool prints its streaks
    (data/README.md: by negatives, then chain length, descending; otherwise the ledger's order),
    over every root-to-tip chain, walked from the roots in the ledger's order."""
    by_id = {a["id"]: a for a in attempts}
    children: dict[str, list[str]] = {}
    for a in attempts:
        if a.get("varied_from") in by_id:
            children.setdefault(a["varied_from"], []).append(a["id"])
    paths: list[list[dict[str, Any]]] = []

    def walk(node: str, path: list[str]) -> None:
        path = [*path, node]
        if not children.get(node):
            paths.append([by_id[i] for i in path])
        for child in children.get(node, []):
            walk(child, path)

    for a in attempts:
        if a.get("varied_from") not in by_id:
            walk(a["id"], [])
    worst: dict[str, tuple[int, int]] = {}
    for path in paths:
        objective = path[-1].get("objective")
        if not objective:
            continue
        streak = 0
        for a in reversed(path):
            if a["status"] not in NEGATIVE:
                break
            streak += 1
        if objective not in worst or streak > worst[objective][0]:
            worst[objective] = (streak, len(path))
    return sorted(worst, key=lambda o: worst[o], reverse=True)


def test_streaks_come_in_the_original_tools_order(cli, shared_file: Path, shared_registry: Path) -> None:
    expected = original_streak_order(raw(shared_file)["attempts"])
    found = cli("--registry", shared_registry, "streaks", "--json").json()
    assert [s["objective"] for s in found] == expected
    ties = [(s["negatives"], s["depth"]) for s in found]
    assert len(set(ties)) < len(ties), "the shared ledger has ties, so the order of ties is tested"


def test_the_streak_text_shows_the_negatives_at_the_tip_first(cli, shared_registry: Path) -> None:
    text = cli("--registry", shared_registry, "streaks").out
    warning = next(line for line in text.splitlines() if line.startswith("CAUTION: planner-oos-refusal"))
    assert warning.endswith("at pace-planner-v11: pace-planner-v10 -> pace-planner-v11")
    # the chain is never cut: too long for a row of 120 columns, the table is laid out as blocks,
    # and the chain's line starts with the negatives at the tip
    block = next(b for b in text.split("\n\n") if b.startswith("level") and "CAUTION" in b.splitlines()[0])
    chain = next(line for line in block.splitlines() if line.startswith("chain"))
    assert chain.split("first)", 1)[1].strip().startswith("pace-planner-v10 -> pace-planner-v11"), chain
