"""The semantic rules: one broken record per rule, each problem named by rule, attempt id and
JSON Pointer, and every problem of a registry reported in one pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import complete_record, failed_record, problems_by, write_attempts_file, write_registry
from ptreg.operations.validate import check_registry
from ptreg.records.attempt import SHAPE_FIELDS
from ptreg.store.attempts_file import load_attempts_file
from ptreg.store.directory import load_directory


def dir_problems(tmp_path: Path, records: list[dict[str, Any]], **kwargs: Any):
    return check_registry(load_directory(write_registry(tmp_path / "reg", records)), **kwargs)


def file_problems(tmp_path: Path, records: list[Any]):
    return check_registry(load_attempts_file(write_attempts_file(tmp_path / "attempts.json", records)))


def triples(problems) -> set[tuple[str, Any, str]]:
    return {(p.rule, p.attempt_id, p.pointer) for p in problems}


def test_complete_records_break_no_rule(tmp_path: Path) -> None:
    records = [
        complete_record("a"),
        failed_record("b", varied_from="a", varied="tile 32 -> 64"),
        complete_record("c", status="not-tried", evidence=None, lesson=None, next_action=None),
        complete_record("d", kind="infrastructure", methods=None, bases=None, objective=None, data_rows=None),
        # worked with a reason of its own may state how sure it is
        complete_record("e", failure_reason="bounded by memory", failure_reason_confidence="inferred"),
    ]
    assert dir_problems(tmp_path, records) == []
    assert file_problems(tmp_path, records) == []


# --------------------------------------------------------------------------- ids


def test_unique_id_in_a_file(tmp_path: Path) -> None:
    problems = file_problems(tmp_path, [complete_record("a"), complete_record("b"), complete_record("a")])
    assert triples(problems) == {("unique-id", "a", "/attempts/2/id")}
    assert "/attempts/0" in problems[0].message  # names where the first one is


def test_unique_id_in_a_directory(tmp_path: Path) -> None:
    # other.json holds id "a" too: a duplicate, and a file named unlike its id
    root = write_registry(tmp_path / "reg", [complete_record("a")], files={"other.json": complete_record("a")})
    found = triples(check_registry(load_directory(root)))
    assert ("unique-id", "a", "/id") in found
    assert ("file-name", "a", "/id") in found


@pytest.mark.parametrize("bad_id", ["sql/v1", "sql..v1", "sql v1", "SQL-v1", "Sql", "../escape", ".hidden", "a" * 129])
def test_id_must_be_a_lowercase_slug(tmp_path: Path, bad_id: str) -> None:
    problems = file_problems(tmp_path, [complete_record("fine"), complete_record(bad_id)])
    assert triples(problems) == {("schema", bad_id, "/attempts/1/id")}


@pytest.mark.parametrize("good_id", ["a", "qwen3.5-9b", "sql-public-bmc2-v2", "v1.2.3"])
def test_slug_ids_with_single_dots_are_fine(tmp_path: Path, good_id: str) -> None:
    assert file_problems(tmp_path, [complete_record(good_id)]) == []


def test_id_registry_is_reserved(tmp_path: Path) -> None:
    problems = file_problems(tmp_path, [complete_record("registry")])
    assert triples(problems) == {("id-reserved", "registry", "/attempts/0/id")}


# --------------------------------------------------------------------------- status


@pytest.mark.parametrize("status", ["failed", "regressed", "worked-with-caveat", "inconclusive"])
def test_status_needs_failure_reason(tmp_path: Path, status: str) -> None:
    record = failed_record("x", status=status, failure_reason=None)
    assert triples(dir_problems(tmp_path, [record])) == {("needs-reason", "x", "/failure_reason")}


@pytest.mark.parametrize("status", ["failed", "regressed", "worked-with-caveat", "inconclusive"])
@pytest.mark.parametrize("field", ["lesson", "next_action"])
def test_status_needs_lesson_and_next_action(tmp_path: Path, status: str, field: str) -> None:
    record = failed_record("x", status=status, **{field: None})
    assert triples(dir_problems(tmp_path, [record])) == {("unknown-field", "x", f"/{field}")}


@pytest.mark.parametrize("status", ["failed", "regressed", "worked-with-caveat", "inconclusive"])
def test_status_needs_a_real_confidence(tmp_path: Path, status: str) -> None:
    record = failed_record("x", status=status, failure_reason_confidence="not-applicable")
    assert triples(dir_problems(tmp_path, [record])) == {("confidence", "x", "/failure_reason_confidence")}


@pytest.mark.parametrize("status", ["failed", "inconclusive"])
def test_status_needs_a_confidence_at_all(tmp_path: Path, status: str) -> None:
    record = failed_record("x", status=status, failure_reason_confidence=None)
    assert triples(dir_problems(tmp_path, [record])) == {("unknown-field", "x", "/failure_reason_confidence")}


@pytest.mark.parametrize("status", ["worked", "not-tried"])
@pytest.mark.parametrize("confidence", ["exact", "inferred", "missing-evidence"])
def test_no_reason_means_not_applicable(tmp_path: Path, status: str, confidence: str) -> None:
    record = complete_record("x", status=status, failure_reason_confidence=confidence)
    assert triples(dir_problems(tmp_path, [record])) == {("confidence", "x", "/failure_reason_confidence")}


# --------------------------------------------------------------------------- vocabularies


def test_kind_outside_vocabulary(tmp_path: Path) -> None:
    record = complete_record("x", kind="benchmarking")
    assert triples(dir_problems(tmp_path, [record])) == {("vocabulary", "x", "/kind")}


def test_method_outside_vocabulary_points_at_the_item(tmp_path: Path) -> None:
    record = complete_record("x", methods=["cache-blocking", "magic", "vectorization", "voodoo"])
    assert triples(dir_problems(tmp_path, [record])) == {
        ("vocabulary", "x", "/methods/1"),
        ("vocabulary", "x", "/methods/3"),
    }


def test_objective_outside_vocabulary(tmp_path: Path) -> None:
    record = complete_record("x", objective="vibes")
    assert triples(dir_problems(tmp_path, [record])) == {("vocabulary", "x", "/objective")}


def test_vocabulary_comes_from_the_registry_not_a_builtin_list(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("x", methods=["lora"])])
    assert triples(check_registry(load_directory(root))) == {("vocabulary", "x", "/methods/0")}
    (root / "vocabulary" / "method" / "lora.json").write_text(
        json.dumps({"term": "lora", "description": "Low rank.", "order": 0}), encoding="utf-8"
    )
    assert check_registry(load_directory(root)) == []


# --------------------------------------------------------------------------- lineage


def test_varied_from_must_resolve(tmp_path: Path) -> None:
    record = complete_record("x", varied_from="nowhere", varied="rank 8 -> 16")
    assert triples(dir_problems(tmp_path, [record])) == {("varied-from", "x", "/varied_from")}


def test_varied_from_needs_varied(tmp_path: Path) -> None:
    records = [complete_record("a"), complete_record("b", varied_from="a")]
    assert triples(dir_problems(tmp_path, records)) == {("varied-from", "b", "/varied")}


def test_varied_without_varied_from(tmp_path: Path) -> None:
    record = complete_record("x", varied="rank 8 -> 16")
    assert triples(dir_problems(tmp_path, [record])) == {("varied-from", "x", "/varied")}


def test_two_cycle_reported_once(tmp_path: Path) -> None:
    records = [
        complete_record("root"),
        complete_record("a", varied_from="b", varied="from b"),
        complete_record("b", varied_from="a", varied="from a"),
    ]
    problems = dir_problems(tmp_path, records)
    cycles = problems_by(problems, "varied-from-cycle")
    assert len(cycles) == 1, problems
    assert cycles[0].attempt_id in ("a", "b") and cycles[0].pointer == "/varied_from"
    assert "a" in cycles[0].message and "b" in cycles[0].message
    assert len(problems) == 1


def test_self_cycle_reported_once(tmp_path: Path) -> None:
    problems = dir_problems(tmp_path, [complete_record("a", varied_from="a", varied="itself")])
    assert triples(problems) == {("varied-from-cycle", "a", "/varied_from")}


def test_cycle_in_a_file_points_into_the_file(tmp_path: Path) -> None:
    records = [complete_record("a", varied_from="b", varied="x"), complete_record("b", varied_from="a", varied="y")]
    assert triples(file_problems(tmp_path, records)) == {("varied-from-cycle", "a", "/attempts/0/varied_from")}


# --------------------------------------------------------------------------- infrastructure, sources


SHAPE_VALUES = {
    "methods": ["cache-blocking"],
    "bases": ["matmul-f32"],
    "objective": "training-step-time",
    "data_rows": 10,
}


@pytest.mark.parametrize("field", SHAPE_FIELDS)
def test_infrastructure_carries_no_shape_field(tmp_path: Path, field: str) -> None:
    infra = complete_record("infra", kind="infrastructure", methods=None, bases=None, objective=None, data_rows=None)
    infra[field] = SHAPE_VALUES[field]
    problems = dir_problems(tmp_path, [complete_record("base"), infra])
    assert triples(problems) == {("infrastructure-shape", "infra", f"/{field}")}


def test_infrastructure_may_vary_another(tmp_path: Path) -> None:
    """Lineage is not shape: an infrastructure attempt may say what it varies."""
    infra = complete_record("infra", kind="infrastructure", methods=None, bases=None, objective=None, data_rows=None)
    infra.update(varied_from="base", varied="harness rewritten")
    assert triples(dir_problems(tmp_path, [complete_record("base"), infra])) == set()


def test_infrastructure_with_empty_shape_list_is_still_shaped(tmp_path: Path) -> None:
    infra = complete_record("infra", kind="infrastructure", methods=[], bases=None, objective=None, data_rows=None)
    assert triples(dir_problems(tmp_path, [infra])) == {("infrastructure-shape", "infra", "/methods")}


def test_evidence_sources_not_empty(tmp_path: Path) -> None:
    record = complete_record("x", evidence_sources=[])
    assert triples(dir_problems(tmp_path, [record])) == {("evidence-sources", "x", "/evidence_sources")}


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    base = tmp_path / "project"
    (base / "docs").mkdir(parents=True)
    (base / "docs" / "bench.md").write_text("measured\n")
    (tmp_path / "outside.md").write_text("exists, but outside the project\n")
    return base


def test_check_sources_existing_file_and_url_pass(tmp_path: Path, source_dir: Path) -> None:
    record = complete_record(
        "x", evidence_sources=["docs/bench.md", "docs/bench.md#table-2", "https://example.invalid/never-fetched.md"]
    )
    assert dir_problems(tmp_path, [record], check_sources=source_dir) == []


def test_check_sources_missing_file(tmp_path: Path, source_dir: Path) -> None:
    record = complete_record("x", evidence_sources=["docs/bench.md", "docs/missing.md"])
    problems = dir_problems(tmp_path, [record], check_sources=source_dir)
    assert triples(problems) == {("source-exists", "x", "/evidence_sources/1")}
    assert "docs/missing.md" in problems[0].message


def test_a_source_may_lead_out_of_the_base_and_must_still_exist(tmp_path: Path, source_dir: Path) -> None:
    # a registry in attempts/ names the project's files as ../README.md
    record = complete_record("x", evidence_sources=["../outside.md", "../missing.md"], source="docs/bench.md")
    problems = dir_problems(tmp_path, [record], check_sources=source_dir)
    assert triples(problems) == {("source-exists", "x", "/evidence_sources/1")}


def test_check_sources_covers_source_field(tmp_path: Path, source_dir: Path) -> None:
    record = complete_record("x", source="docs/gone.md")
    assert triples(dir_problems(tmp_path, [record], check_sources=source_dir)) == {("source-exists", "x", "/source")}


def test_sources_are_not_checked_without_the_option(tmp_path: Path) -> None:
    record = complete_record("x", evidence_sources=["docs/missing.md", "../../etc/passwd"], source="nowhere.md")
    assert dir_problems(tmp_path, [record]) == []


# --------------------------------------------------------------------------- one pass


def test_one_record_with_many_problems_reports_them_all(tmp_path: Path) -> None:
    record = failed_record(
        "messy",
        failure_reason=None,
        failure_reason_confidence="not-applicable",
        kind="infrastructure",
        objective="vibes",
        evidence_sources=[],
        varied="something",
        lesson=None,
    )
    found = triples(dir_problems(tmp_path, [record]))
    expected = {
        ("needs-reason", "messy", "/failure_reason"),
        ("confidence", "messy", "/failure_reason_confidence"),
        ("unknown-field", "messy", "/lesson"),
        ("vocabulary", "messy", "/objective"),
        ("varied-from", "messy", "/varied"),
        ("infrastructure-shape", "messy", "/methods"),
        ("infrastructure-shape", "messy", "/bases"),
        ("infrastructure-shape", "messy", "/objective"),
        ("infrastructure-shape", "messy", "/data_rows"),
        ("evidence-sources", "messy", "/evidence_sources"),
    }
    assert found == expected


def test_problems_of_every_kind_reported_in_one_pass(tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "reg",
        [
            complete_record("good"),
            complete_record("bad-kind", kind="nope"),
            complete_record("typed", data_rows="12"),
            complete_record("loop-a", varied_from="loop-b", varied="b"),
            complete_record("loop-b", varied_from="loop-a", varied="a"),
        ],
        files={"broken.json": "{not json", "mismatch.json": complete_record("elsewhere")},
    )
    found = check_registry(load_directory(root))
    rules = {(p.rule, p.attempt_id) for p in found}
    assert {
        ("vocabulary", "bad-kind"),
        ("schema", "typed"),
        ("varied-from-cycle", "loop-a"),
        ("json", "broken"),
        ("file-name", "elsewhere"),
    } <= rules
