"""The shared real-world registry (../shared/data/posttrainllm-attempts.json): what its README
states holds in ptreg, it validates with 0 errors, and import then export gives it back."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from helpers import V1_FIELDS, assert_one_line_error, snapshot, write_attempts_file
from ptreg.operations.validate import check_registry
from ptreg.store.attempts_file import load_attempts_file
from ptreg.store.directory import load_directory
from ptreg.store.interchange import export_registry, import_file


def test_readme_facts_hold_in_ptreg(shared_registry: Path) -> None:
    registry = load_directory(shared_registry)
    attempts = registry.attempts
    assert len(attempts) == 66 and registry.problems == []
    assert Counter(a.status for a in attempts) == {
        "worked-with-caveat": 35,
        "failed": 11,
        "not-tried": 6,
        "regressed": 5,
        "inconclusive": 5,
        "worked": 4,
    }
    assert Counter(a.kind for a in attempts) == {"training-run": 30, "infrastructure": 28, "model-evaluation": 8}
    families = Counter(a.family for a in attempts)
    assert (families["sql"], families["pace-planner"], families["runtime-perf"], families["file-ops"]) == (
        17,
        14,
        14,
        3,
    )
    assert sum(a.failure_reason is not None for a in attempts) == 56
    assert sum(a.methods is not None for a in attempts) == 38
    assert sum(a.varied_from is not None for a in attempts) == 22
    assert sum(a.data_rows is not None for a in attempts) == 17


def test_shared_file_validates_with_zero_errors(shared_file: Path) -> None:
    assert check_registry(load_attempts_file(shared_file)) == []


def test_imported_shared_registry_validates_with_zero_errors(shared_registry: Path) -> None:
    assert check_registry(load_directory(shared_registry)) == []


def test_validate_command_on_file_and_directory(cli, shared_file: Path, shared_registry: Path) -> None:
    for target in (shared_file, shared_registry):
        result = cli("validate", target, "--json")
        assert result.code == 0, result.out
        data = result.json()
        assert (data["attempts"], data["errors"], data["valid"]) == (66, 0, True)


def test_check_sources_is_opt_in_and_then_finds_the_missing_sources(cli, shared_registry: Path, tmp_path: Path) -> None:
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    result = cli("validate", shared_registry, "--sources-base", empty, "--json")
    assert result.code == 1
    assert {p["rule"] for p in result.json()["problems"]} == {"source-exists"}


def test_import_then_export_gives_the_same_file(
    cli, shared_file: Path, shared_raw: dict[str, Any], tmp_path: Path
) -> None:
    root = tmp_path / "reg"
    imported = cli("--registry", root, "import", shared_file)
    assert imported.code == 0, imported.err
    assert cli("--registry", root, "validate").code == 0
    out = tmp_path / "exported.json"
    assert cli("--registry", root, "export", "-o", out).code == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert list(exported) == list(shared_raw), "same top-level keys, same order"
    assert exported["schema_version"] == 2
    for key in ("confidence_vocabulary", "method_vocabulary", "objective_vocabulary", "kind_vocabulary"):
        assert exported[key] == shared_raw[key], key
    ours = {a["id"]: a for a in exported["attempts"]}
    theirs = {a["id"]: a for a in shared_raw["attempts"]}
    assert len(ours) == len(exported["attempts"]) == 66
    assert set(ours) == set(theirs)
    for attempt_id, original in theirs.items():
        assert ours[attempt_id] == original, attempt_id


def test_export_of_the_library_equals_the_file(shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    exported = export_registry(load_directory(shared_registry))
    assert sorted(exported["attempts"], key=lambda a: a["id"]) == sorted(shared_raw["attempts"], key=lambda a: a["id"])


def test_second_import_is_refused_naming_ids(cli, shared_file: Path, shared_registry: Path) -> None:
    before = snapshot(shared_registry)
    first = sorted(a.id for a in load_directory(shared_registry).attempts)[0]
    result = cli("--registry", shared_registry, "import", shared_file)
    assert_one_line_error(result, 1, "66", first, "--replace")
    assert snapshot(shared_registry) == before
    replaced = cli("--registry", shared_registry, "import", shared_file, "--replace", "--json")
    assert replaced.code == 0 and len(replaced.json()["replaced"]) == 66
    assert snapshot(shared_registry) == before, "replacing with the same records changes no byte"


def test_version_1_of_the_shared_file(shared_raw: dict[str, Any], tmp_path: Path) -> None:
    """The project's earlier files held only id, name, status, evidence and source."""
    legacy = [{k: a[k] for k in V1_FIELDS if k in a} for a in shared_raw["attempts"]]
    path = write_attempts_file(tmp_path / "v1.json", legacy, version=1)
    root = tmp_path / "reg"
    report = import_file(root, path)
    assert report.schema_version == 1 and len(report.imported) == 66
    assert report.unknown_fields["family"] == 66 and report.unknown_fields["lesson"] == 66
    for record in legacy:
        written = json.loads((root / f"{record['id']}.json").read_text())
        assert written.pop("origin")["schema_version"] == 1
        assert written == record
    problems = check_registry(load_directory(root))
    assert {p.attempt_id for p in problems if p.rule == "unknown-field"} == {a["id"] for a in legacy}
    assert {p.severity for p in problems} == {"warning"}, "what version 1 did not have is a warning"
    assert not [p for p in problems if p.rule in ("schema", "json", "vocabulary", "infrastructure-shape")]


def test_lineage_loading_reads_the_same_lineage_as_a_full_load(shared_registry: Path) -> None:
    """`show` and `lineage` read only an attempt's neighbourhood; it must be the whole of it."""
    from ptreg.records.graph import ancestry, successors
    from ptreg.store.lineage_files import load_lineage

    full = load_directory(shared_registry).by_id()
    for attempt_id in full:
        part = load_lineage(shared_registry, attempt_id).by_id()
        assert [a.id for a in ancestry(attempt_id, part)] == [a.id for a in ancestry(attempt_id, full)]
        assert [(s.attempt.id, s.depth) for s in successors(attempt_id, part)] == [
            (s.attempt.id, s.depth) for s in successors(attempt_id, full)
        ]


def test_lineage_loading_follows_escaped_and_spaced_varied_from(tmp_path: Path) -> None:
    """A record written by another tool: other spacing, an escaped character in the value."""
    from helpers import complete_record, write_registry
    from ptreg.records.graph import successors
    from ptreg.store.lineage_files import load_lineage

    root = write_registry(tmp_path / "reg", [complete_record("a-b"), complete_record("c")])
    child = complete_record("c", varied="tile 64 -> 128")
    text = json.dumps(child)[:-1] + ', "varied_from"  :   "a\\u002db"}'
    (root / "c.json").write_text(text)
    assert [s.attempt.id for s in successors("a-b", load_lineage(root, "a-b").by_id())] == ["c"]


def test_lineage_loading_orders_successors_like_a_full_load(tmp_path: Path) -> None:
    """Ids that sort differently with and without '.json' ('a' < 'a-b', but 'a-b.json' < 'a.json')."""
    from helpers import complete_record, write_registry
    from ptreg.records.graph import successors
    from ptreg.store.lineage_files import load_lineage

    records = [complete_record("root")] + [
        complete_record(i, varied_from="root", varied="x") for i in ("a", "a-b", "a.b", "a0")
    ]
    root = write_registry(tmp_path / "reg", records)
    full = [s.attempt.id for s in successors("root", load_directory(root).by_id())]
    assert full == sorted(full)
    assert [s.attempt.id for s in successors("root", load_lineage(root, "root").by_id())] == full
