"""An attempt read off its file's JSON (records/dumped.py) answers as the validated model, for
exactly the files `Attempt.is_dumped_as` accepts; what is not a field is never read as None."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import complete_record
from ptreg.records.attempt import Attempt
from ptreg.records.dumped import FIELDS, Dumped, dumped_attempt

ATTEMPTS = Path(__file__).resolve().parents[2] / "attempts"


def models_in(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[type[BaseModel]]:
    """``model`` and every model its fields hold, at any depth."""
    seen = set() if seen is None else seen
    if model in seen:
        return seen
    seen.add(model)

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            models_in(annotation, seen)
        for argument in typing.get_args(annotation):
            visit(argument)

    for info in model.model_fields.values():
        visit(info.annotation)
    return seen


def the_projects_records() -> list[dict[str, Any]]:
    return [
        json.loads(p.read_text(encoding="utf-8")) for p in sorted(ATTEMPTS.glob("*.json")) if p.name != "registry.json"
    ]


def records() -> list[dict[str, Any]]:
    """As ptreg writes them: the project's own (admissions, runs, conditions, budgets), and
    a small imported one."""
    imported = complete_record(
        "imported",
        lesson=None,
        origin={"file": "a.json", "schema_version": 1, "position": 0, "keys": ["id"], "lacks": ["lesson"]},
    )
    return [*the_projects_records(), Attempt.model_validate(imported).to_json_dict()]


def assert_same(held: Any, read: Any, where: str) -> None:
    if isinstance(held, BaseModel):
        assert isinstance(read, Dumped), where
        for name in type(held).model_fields:
            assert_same(getattr(held, name), getattr(read, name), f"{where}.{name}")
    elif isinstance(held, list | tuple):
        assert isinstance(read, list) and len(read) == len(held), where
        for i, (h, r) in enumerate(zip(held, read, strict=True)):
            assert_same(h, r, f"{where}[{i}]")
    else:
        assert type(read) is type(held) and read == held, (where, held, read)


def test_fields_are_every_field_of_the_attempts_models() -> None:
    assert {name for model in models_in(Attempt) for name in model.model_fields} == FIELDS


@pytest.mark.parametrize("raw", records(), ids=lambda r: r["id"])
def test_a_dumped_file_answers_every_field_as_the_model(raw: dict[str, Any]) -> None:
    attempt = Attempt.model_validate(raw)
    assert attempt.is_dumped_as(raw)
    read = dumped_attempt(json.loads(json.dumps(raw)))
    assert_same(attempt, read, attempt.id)
    assert read.ledger == attempt.ledger
    assert all(read.lacks(name) == attempt.lacks(name) for name in Attempt.model_fields)
    assert read.to_json_dict() == attempt.to_json_dict()


def test_what_is_not_a_field_is_never_read_as_none() -> None:
    """A model's methods and properties, other than those the view gives, raise."""
    for model in models_in(Attempt):
        for name in dir(model):
            if name.startswith("_") or name in model.model_fields or hasattr(BaseModel, name):
                continue
            if model is Attempt and name in ("ledger", "lacks", "to_json_dict"):
                continue
            with pytest.raises(AttributeError):
                getattr(dumped_attempt({"id": "x"}), name)
    with pytest.raises(AttributeError):
        dumped_attempt({"id": "x"}).lesssson  # noqa: B018  # a typo is not an unknown field


def test_left_out_is_unknown_and_objects_inside_read_alike() -> None:
    read = dumped_attempt({"id": "x", "origin": {"file": "a.json", "lacks": []}, "methods": ["a"]})
    assert read.lesson is None and read.budget is None
    assert read.origin.file == "a.json" and read.origin.lacks == [] and read.origin.imported_at is None
    assert read.methods == ["a"]


def _reordered(raw: dict[str, Any]) -> dict[str, Any]:
    return dict(reversed(raw.items()))


def _whole_seconds(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "budget": {"wall_clock_seconds": 60}}  # the model holds 60.0


def _explicit_null(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "hypothesis": None}


def _lacks_left_out(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "origin": {k: v for k, v in raw["origin"].items() if k != "lacks"}}  # the model holds []


@pytest.mark.parametrize("change", [_reordered, _whole_seconds, _explicit_null, _lacks_left_out])
def test_a_file_that_is_not_exactly_the_dump_is_not_taken_for_one(change: Any) -> None:
    raw = change(records()[-1])
    attempt = Attempt.model_validate(raw)  # valid all the same
    assert not attempt.is_dumped_as(raw)
    assert attempt.is_dumped_as(attempt.to_json_dict())
