"""Schema problems as ptreg reports them, and the committed JSON Schema files: in step with the
models, and usable by another tool (jsonschema) on their own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from helpers import SCHEMAS, complete_record, failed_record, write_attempts_file, write_registry
from ptreg.errors import PtregError
from ptreg.operations.validate import check_registry
from ptreg.records.schema import SCHEMAS as SCHEMA_NAMES
from ptreg.records.schema import generate
from ptreg.store.attempts_file import load_attempts_file
from ptreg.store.directory import load_directory
from ptreg.store.schema_files import check_schemas


def dir_problems(tmp_path: Path, records: list[dict[str, Any]], files: dict[str, Any] | None = None):
    return check_registry(load_directory(write_registry(tmp_path / "reg", records, files)))


# --------------------------------------------------------------------------- schema problems


@pytest.mark.parametrize(
    "field, value, pointer",
    [
        ("data_rows", "12", "/data_rows"),
        ("data_rows", 12.5, "/data_rows"),
        ("data_rows", -1, "/data_rows"),
        ("data_rows", True, "/data_rows"),
        ("methods", "cache-blocking", "/methods"),
        ("bases", ["ok", 7], "/bases/1"),
        ("status", "great", "/status"),
        ("failure_reason_confidence", "sure", "/failure_reason_confidence"),
        ("evidence", "", "/evidence"),
        ("evidence_sources", "docs/bench.md", "/evidence_sources"),
        ("name", 3, "/name"),
        ("color", "blue", "/color"),
    ],
)
def test_wrong_type_is_a_schema_problem_at_the_field(tmp_path: Path, field: str, value: Any, pointer: str) -> None:
    record = complete_record("typed")
    record[field] = value
    problems = dir_problems(tmp_path, [record])
    assert [(p.rule, p.attempt_id, p.pointer) for p in problems] == [("schema", "typed", pointer)]
    assert problems[0].file.endswith("typed.json")


def test_extra_field_is_named_unknown(tmp_path: Path) -> None:
    problems = dir_problems(tmp_path, [complete_record("x", color="blue")])
    assert "unknown field" in problems[0].message


def test_missing_required_field(tmp_path: Path) -> None:
    problems = dir_problems(tmp_path, [complete_record("x", name=None)])
    assert [(p.rule, p.pointer) for p in problems] == [("schema", "/name")]


def test_every_schema_problem_of_a_record_is_reported(tmp_path: Path) -> None:
    record = complete_record("x", data_rows="12", methods="lora", status="great", color="blue")
    pointers = {p.pointer for p in dir_problems(tmp_path, [record])}
    assert pointers == {"/data_rows", "/methods", "/status", "/color"}


@pytest.mark.parametrize("content", [["a", "list"], "a string", 42, None])
def test_record_that_is_not_an_object(tmp_path: Path, content: Any) -> None:
    problems = dir_problems(tmp_path, [complete_record("good")], files={"odd.json": json.dumps(content)})
    assert [(p.rule, p.pointer) for p in problems] == [("schema", "")]
    assert problems[0].file.endswith("odd.json")
    assert "object" in problems[0].message


def test_record_that_is_not_an_object_in_a_file(tmp_path: Path) -> None:
    path = write_attempts_file(tmp_path / "a.json", [complete_record("good"), ["x"], "y"])
    problems = check_registry(load_attempts_file(path))
    assert [(p.rule, p.pointer) for p in problems] == [("schema", "/attempts/1"), ("schema", "/attempts/2")]


def test_file_name_must_match_id(tmp_path: Path) -> None:
    problems = dir_problems(tmp_path, [], files={"old-name.json": complete_record("new-name")})
    assert [(p.rule, p.attempt_id, p.pointer) for p in problems] == [("file-name", "new-name", "/id")]
    assert "old-name" in problems[0].message


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    text = '{\n  "id": "broken",\n  "name": \n}\n'
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    problems = dir_problems(tmp_path, [complete_record("good")], files={"broken.json": text})
    assert [(p.rule, p.attempt_id) for p in problems] == [("json", "broken")]
    assert f"line {expected.value.lineno} column {expected.value.colno}" in problems[0].message


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    text = '{"id": "dup", "name": "first", "status": "worked", "name": "second"}'
    problems = dir_problems(tmp_path, [], files={"dup.json": text})
    assert [(p.rule, p.attempt_id) for p in problems] == [("json", "dup")]
    assert "duplicate key 'name'" in problems[0].message


def test_non_utf8_bytes_are_refused(tmp_path: Path) -> None:
    data = json.dumps(complete_record("latin", lesson="caf\u00e9"), ensure_ascii=False).encode("latin-1")
    assert b"caf\xe9" in data
    problems = dir_problems(tmp_path, [], files={"latin.json": data})
    assert [(p.rule, p.attempt_id) for p in problems] == [("json", "latin")]
    assert "UTF-8" in problems[0].message


def test_invalid_json_attempts_file_is_unusable(tmp_path: Path) -> None:
    path = tmp_path / "attempts.json"
    path.write_text('{"schema_version": 2,\n "attempts": [,]}')
    with pytest.raises(PtregError) as caught:
        load_attempts_file(path)
    assert caught.value.exit_code == 2
    assert str(path) in caught.value.message and "line 2 column" in caught.value.message


# --------------------------------------------------------------------------- the schema files


def test_committed_schemas_match_the_models() -> None:
    assert check_schemas(SCHEMAS) == []


def test_drift_is_detected(tmp_path: Path) -> None:
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, copy)
    schema = json.loads((copy / "attempt.schema.json").read_text())
    schema["properties"]["invented"] = {"type": "string"}
    (copy / "attempt.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
    (copy / "registry.schema.json").unlink()
    assert sorted(check_schemas(copy)) == ["attempt.schema.json", "registry.schema.json"]


@pytest.mark.parametrize("name", sorted(SCHEMA_NAMES))
def test_schema_files_are_draft_2020_12(name: str) -> None:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema == generate(name)


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((SCHEMAS / name).read_text(encoding="utf-8")))


def test_shared_file_validates_against_the_schema_alone(shared_raw: dict[str, Any]) -> None:
    errors = list(validator("attempts-file.schema.json").iter_errors(shared_raw))
    assert errors == [], [e.message for e in errors[:5]]


def test_registry_files_validate_against_their_schemas(shared_registry: Path) -> None:
    attempt = validator("attempt.schema.json")
    registry = validator("registry.schema.json")
    files = sorted(shared_registry.glob("*.json"))
    assert len(files) == 67
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        checker = registry if path.name == "registry.json" else attempt
        errors = [e.message for e in checker.iter_errors(data)]
        assert errors == [], (path.name, errors)
    term = validator("term.schema.json")
    term_files = sorted(shared_registry.glob("vocabulary/*/*.json"))
    assert term_files
    for path in term_files:
        assert [e.message for e in term.iter_errors(json.loads(path.read_text(encoding="utf-8")))] == [], path


def test_synthetic_records_validate_against_the_attempt_schema() -> None:
    attempt = validator("attempt.schema.json")
    for record in (complete_record("a"), failed_record("b", varied_from="a", varied="x")):
        assert list(attempt.iter_errors(record)) == []


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(failed_record("x", failure_reason=None), id="failed-without-reason"),
        pytest.param(failed_record("x", lesson=None), id="failed-without-lesson"),
        pytest.param(failed_record("x", status="regressed", next_action=None), id="regressed-without-next-action"),
        pytest.param(failed_record("x", failure_reason_confidence="not-applicable"), id="failed-not-applicable"),
        pytest.param(complete_record("x", kind="infrastructure"), id="infrastructure-with-shape"),
        pytest.param(
            complete_record("x", kind="infrastructure", methods=None, bases=None, objective=None, data_rows=7),
            id="infrastructure-with-data-rows",
        ),
        pytest.param(complete_record("x", varied_from="a"), id="varied-from-without-varied"),
        pytest.param(complete_record("x", data_rows="12"), id="data-rows-string"),
        pytest.param(complete_record("x", color="blue"), id="extra-field"),
        pytest.param(complete_record("../x"), id="id-escaping"),
        pytest.param(complete_record("registry"), id="id-reserved"),
        pytest.param(complete_record("x", family=None), id="without-family"),
        pytest.param(complete_record("x", kind=None), id="without-kind"),
        pytest.param(complete_record("x", failure_reason_confidence=None), id="without-confidence"),
        pytest.param(complete_record("x", evidence_sources=None), id="tried-without-evidence-sources"),
        pytest.param(complete_record("x", evidence_sources=[]), id="empty-evidence-sources"),
        pytest.param(complete_record("x", lesson=None), id="worked-without-lesson"),
        pytest.param(complete_record("x", failure_reason_confidence="inferred"), id="worked-sure-of-no-reason"),
        pytest.param(
            failed_record("x", runs=[{"run_id": "20261201T092700Z", "status": "failed"}]),
            id="exact-without-a-complete-run",
        ),
    ],
)
def test_jsonschema_rejects_what_the_rules_reject(record: dict[str, Any], tmp_path: Path) -> None:
    assert list(validator("attempt.schema.json").iter_errors(record)) != []
    if record["id"] == "x":  # the others cannot even be a record file's name
        problems = check_registry(load_directory(write_registry(tmp_path / "reg", [record])))
        assert [p for p in problems if p.severity == "error"], "and so do the rules"


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(complete_record("x", evidence_sources=None, lesson=None, status="not-tried"), id="not-tried"),
        pytest.param(
            complete_record("x", failure_reason="bounded", failure_reason_confidence="inferred"),
            id="worked-with-reason",
        ),
        pytest.param(
            failed_record("x", runs=[{"run_id": "20261201T092700Z", "status": "complete"}]),
            id="exact-on-a-complete-run",
        ),
    ],
)
def test_jsonschema_accepts_what_the_rules_accept(record: dict[str, Any]) -> None:
    assert list(validator("attempt.schema.json").iter_errors(record)) == []


def test_a_field_its_origins_format_lacked_may_be_unknown() -> None:
    """The schema's completeness rules yield, field by field, to what the origin says its format had."""
    legacy = {"id": "old", "name": "Old", "status": "failed", "evidence": "flat", "source": "notes.md"}
    origin = {"file": "a.json", "schema_version": 1, "position": 0, "keys": list(legacy)}
    lacking = ["family", "kind", "failure_reason", "failure_reason_confidence", "lesson", "next_action"]
    schema = validator("attempt.schema.json")
    assert list(schema.iter_errors(legacy)) != []
    assert list(schema.iter_errors({**legacy, "origin": {**origin, "lacks": lacking}})) != [], "evidence_sources"
    whole = {**legacy, "origin": {**origin, "lacks": [*lacking, "evidence_sources"]}}
    assert list(schema.iter_errors(whole)) == []


def test_registry_schema_rejects_a_newer_version() -> None:
    from helpers import meta_json

    meta = meta_json()
    assert list(validator("registry-v2.schema.json").iter_errors(meta)) == []
    meta["schema_version"] = 3
    assert list(validator("registry-v2.schema.json").iter_errors(meta)) != []
    layout = {"schema_version": 3, "vocabularies": "vocabulary"}
    assert list(validator("registry.schema.json").iter_errors(layout)) == []
    assert list(validator("registry.schema.json").iter_errors({**layout, "schema_version": 4})) != []
