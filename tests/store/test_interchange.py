"""Import and export of the single-file attempts.json: all or nothing, nothing invented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    V1_FIELDS,
    complete_record,
    failed_record,
    meta_json,
    problems_by,
    sample_records,
    snapshot,
    write_attempts_file,
    write_registry,
)
from ptreg.errors import PtregError
from ptreg.operations.importing import import_into as import_file
from ptreg.operations.validate import check_registry
from ptreg.store.directory import init_registry, load_directory, load_meta
from ptreg.store.interchange import ImportRefused, export_registry

V1_RECORDS = [
    {"id": "old-failed", "name": "Old failure", "status": "failed", "evidence": "loss flat", "source": "notes.md"},
    {"id": "old-worked", "name": "Old win", "status": "worked", "evidence": "1.3x", "source": "notes.md"},
    {"id": "old-idea", "name": "Old idea", "status": "not-tried", "source": "ideas.md"},
]


def v1_file(tmp_path: Path) -> Path:
    return write_attempts_file(tmp_path / "v1.json", V1_RECORDS, version=1)


# --------------------------------------------------------------------------- version 2


def test_import_creates_a_registry_of_one_file_per_attempt(tmp_path: Path, sample_file: Path) -> None:
    root = tmp_path / "fresh"
    report = import_file(root, sample_file)
    assert report.created_registry and report.schema_version == 2
    assert sorted(report.imported) == sorted(r["id"] for r in sample_records())
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [".gitignore", ".ptreg.lock", "registry.json", "vocabulary"] + [f"{r['id']}.json" for r in sample_records()]
    )
    for position, record in enumerate(sample_records()):
        written = json.loads((root / f"{record['id']}.json").read_text())
        origin = written.pop("origin")
        assert written == record
        assert (origin["file"], origin["schema_version"], origin["position"]) == (str(sample_file), 2, position)
        assert origin["keys"] == list(record) and origin["lacks"] == [] and origin["import_number"] == 1
    assert check_registry(load_directory(root)) == []
    assert report.problems_after == []


def test_export_round_trips_the_import(tmp_path: Path, sample_file: Path) -> None:
    root = tmp_path / "reg"
    import_file(root, sample_file)
    exported = export_registry(load_directory(root))
    original = json.loads(sample_file.read_text())
    assert list(exported) == list(original)
    assert {k: v for k, v in exported.items() if k != "attempts"} == {
        k: v for k, v in original.items() if k != "attempts"
    }
    assert {a["id"]: a for a in exported["attempts"]} == {a["id"]: a for a in original["attempts"]}


def test_export_refuses_a_registry_with_unreadable_records(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("ok")], files={"bad.json": "{"})
    with pytest.raises(PtregError) as caught:
        export_registry(load_directory(root))
    assert caught.value.exit_code == 1 and "bad.json" in caught.value.message


# --------------------------------------------------------------------------- version 1


def test_v1_import_invents_nothing_and_reports_the_unknown(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    report = import_file(root, v1_file(tmp_path))
    assert report.schema_version == 1
    assert sorted(report.imported) == sorted(r["id"] for r in V1_RECORDS)
    for record in V1_RECORDS:
        written = json.loads((root / f"{record['id']}.json").read_text())
        origin = written.pop("origin")
        assert written == record, "the written record holds exactly what the file held, and where it came from"
        assert set(written) <= set(V1_FIELDS)
        assert origin["schema_version"] == 1 and "lesson" in origin["lacks"] and "evidence" not in origin["lacks"]
    for name in ("family", "kind", "failure_reason_confidence", "lesson", "next_action", "evidence_sources"):
        assert name in report.unknown_fields, name
    assert report.unknown_fields["family"] == 3
    assert report.unknown_fields["kind"] == 3


def test_v1_records_are_reported_as_unknown_by_validate(tmp_path: Path) -> None:
    """Unknown because their format had no such field: warnings naming the origin, errors with strict."""
    root = tmp_path / "reg"
    import_file(root, v1_file(tmp_path))
    problems = check_registry(load_directory(root))
    unknown = {(p.attempt_id, p.pointer) for p in problems_by(problems, "unknown-field")}
    for record in V1_RECORDS:
        for name in ("family", "kind", "failure_reason_confidence"):
            assert (record["id"], f"/{name}") in unknown
    assert ("old-failed", "/lesson") in unknown and ("old-failed", "/next_action") in unknown
    assert ("old-failed", "/evidence_sources") in unknown
    # A not-tried proposal has no outcome yet, so no lesson and no evidence to source.
    assert ("old-idea", "/lesson") not in unknown and ("old-idea", "/evidence_sources") not in unknown
    assert all(p.severity == "warning" for p in problems)
    lesson = next(p for p in problems if (p.attempt_id, p.pointer) == ("old-failed", "/lesson"))
    assert lesson.message.startswith("imported from schema_version 1: no lesson")
    assert {(p.rule, p.attempt_id) for p in problems_by(problems, "needs-reason")} == {("needs-reason", "old-failed")}
    strict = check_registry(load_directory(root), strict=True)
    assert [(p.rule, p.attempt_id, p.pointer) for p in strict] == [(p.rule, p.attempt_id, p.pointer) for p in problems]
    assert all(p.severity == "error" for p in strict)


def test_v1_file_validates_as_incomplete(tmp_path: Path) -> None:
    from ptreg.store.attempts_file import load_attempts_file

    problems = check_registry(load_attempts_file(v1_file(tmp_path)))
    assert ("unknown-field", "old-worked", "/attempts/1/family") in {
        (p.rule, p.attempt_id, p.pointer) for p in problems
    }


def test_v1_import_into_an_existing_registry_keeps_its_vocabularies(tmp_path: Path, sample_registry: Path) -> None:
    meta_before = (sample_registry / "registry.json").read_bytes()
    report = import_file(sample_registry, v1_file(tmp_path))
    assert not report.created_registry
    assert (sample_registry / "registry.json").read_bytes() == meta_before
    assert len(load_directory(sample_registry).attempts) == len(sample_records()) + len(V1_RECORDS)


# --------------------------------------------------------------------------- refusals


def test_ids_already_present_are_refused_and_named(tmp_path: Path, sample_registry: Path) -> None:
    incoming = write_attempts_file(
        tmp_path / "clash.json",
        [
            complete_record("brand-new"),
            complete_record("harness-fix", lesson="changed"),
            failed_record("naive-baseline"),
        ],
    )
    before = snapshot(sample_registry)
    with pytest.raises(PtregError) as caught:
        import_file(sample_registry, incoming)
    assert caught.value.exit_code == 1
    assert "harness-fix" in caught.value.message and "naive-baseline" in caught.value.message
    assert "brand-new" not in caught.value.message
    assert snapshot(sample_registry) == before


def test_replace_overwrites(tmp_path: Path, sample_registry: Path) -> None:
    incoming = write_attempts_file(
        tmp_path / "clash.json",
        [
            complete_record("brand-new"),
            complete_record(
                "harness-fix",
                kind="infrastructure",
                methods=None,
                bases=None,
                objective=None,
                data_rows=None,
                lesson="changed",
            ),
        ],
    )
    report = import_file(sample_registry, incoming, replace=True)
    assert report.replaced == ["harness-fix"]
    assert json.loads((sample_registry / "harness-fix.json").read_text())["lesson"] == "changed"
    assert (sample_registry / "brand-new.json").exists()
    assert not [p for p in sample_registry.iterdir() if p.name.endswith(".tmp")]


def test_a_schema_error_imports_nothing(tmp_path: Path, sample_registry: Path) -> None:
    incoming = write_attempts_file(
        tmp_path / "typed.json", [complete_record("fine-one"), complete_record("typed", data_rows="12")]
    )
    before = snapshot(sample_registry)
    with pytest.raises(ImportRefused) as caught:
        import_file(sample_registry, incoming)
    assert caught.value.exit_code == 1
    assert [(p.attempt_id, p.pointer) for p in caught.value.problems] == [("typed", "/attempts/1/data_rows")]
    assert snapshot(sample_registry) == before
    fresh = tmp_path / "fresh"
    with pytest.raises(ImportRefused):
        import_file(fresh, incoming)
    assert not fresh.exists()


def test_an_id_twice_imports_nothing(tmp_path: Path, sample_registry: Path) -> None:
    incoming = write_attempts_file(
        tmp_path / "twice.json", [complete_record("twin"), complete_record("other"), complete_record("twin")]
    )
    before = snapshot(sample_registry)
    with pytest.raises(PtregError) as caught:
        import_file(sample_registry, incoming)
    assert caught.value.exit_code == 1 and "twin" in caught.value.message
    assert snapshot(sample_registry) == before
    with pytest.raises(PtregError):
        import_file(tmp_path / "fresh", incoming)
    assert not (tmp_path / "fresh").exists()


def test_schema_version_3_is_refused(tmp_path: Path, sample_registry: Path) -> None:
    incoming = write_attempts_file(tmp_path / "v3.json", [complete_record("future")], version=3)
    before = snapshot(sample_registry)
    with pytest.raises(PtregError) as caught:
        import_file(sample_registry, incoming)
    assert "schema_version 3" in caught.value.message and "2" in caught.value.message
    assert snapshot(sample_registry) == before


@pytest.mark.parametrize(
    "document",
    [
        {"attempts": []},
        {"schema_version": "2", "attempts": []},
        {"schema_version": 2, "attempts": {}},
        [],
    ],
)
def test_malformed_files_are_refused(tmp_path: Path, sample_registry: Path, document: Any) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document))
    before = snapshot(sample_registry)
    with pytest.raises(PtregError):
        import_file(sample_registry, path)
    assert snapshot(sample_registry) == before


def test_failure_while_staging_leaves_the_registry_untouched(
    tmp_path: Path, sample_registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ptreg.store.interchange as interchange

    incoming = write_attempts_file(tmp_path / "many.json", [complete_record(f"new-{i}") for i in range(5)])
    before = snapshot(sample_registry)
    calls = {"n": 0}
    real_stage = interchange.stage_text

    def flaky(root: Path, text: str, **kwargs: object) -> str:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        return real_stage(root, text, **kwargs)

    monkeypatch.setattr(interchange, "stage_text", flaky)
    with pytest.raises(OSError):
        import_file(sample_registry, incoming)
    assert snapshot(sample_registry) == before
    assert not list(sample_registry.glob(".*.tmp")), "staged temporary files were left behind"


def test_new_vocabulary_terms_are_added(tmp_path: Path, sample_registry: Path) -> None:
    document = json.loads(
        write_attempts_file(tmp_path / "v.json", [complete_record("tuned", methods=["autotune"])]).read_text()
    )
    document["method_vocabulary"]["autotune"] = "Search tile sizes at run time."
    (tmp_path / "v.json").write_text(json.dumps(document))
    report = import_file(sample_registry, tmp_path / "v.json")
    assert report.vocabulary_added == {"method_vocabulary": ["autotune"]}
    assert "autotune" in load_meta(sample_registry).method_vocabulary
    added = json.loads((sample_registry / "vocabulary" / "method" / "autotune.json").read_text())
    assert added == {"term": "autotune", "description": "Search tile sizes at run time.", "order": 13}
    assert check_registry(load_directory(sample_registry)) == []


def test_import_into_an_empty_initialised_registry(tmp_path: Path, sample_file: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    report = import_file(root, sample_file)
    assert not report.created_registry
    assert load_meta(root).model_dump(mode="json") == meta_json()


def test_reserved_id_imports_nothing(tmp_path: Path, sample_registry: Path) -> None:
    """An id the registry cannot hold ('registry' is its own file) refuses the whole import and,
    like every other refusal, leaves no trace: not in an existing registry, and no new directory."""
    incoming = write_attempts_file(
        tmp_path / "reserved.json", [complete_record("fine-one"), complete_record("registry")]
    )
    before = snapshot(sample_registry)
    with pytest.raises(PtregError) as caught:
        import_file(sample_registry, incoming)
    assert "registry" in caught.value.message
    assert snapshot(sample_registry) == before
    fresh = tmp_path / "fresh"
    with pytest.raises(PtregError):
        import_file(fresh, incoming)
    assert not fresh.exists(), f"a refused import left {sorted(p.name for p in fresh.iterdir())} in a new directory"
