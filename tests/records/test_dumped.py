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
from ptreg.records import attempt_view, ledger
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


def view_members(view: type) -> dict[str, Any]:
    """Each member ``view`` (a protocol of records/attempt_view.py) declares, its own and
    inherited, with the protocol its value is read as when it is one (else None)."""
    found: dict[str, Any] = {}
    for klass in reversed(view.__mro__):
        if not getattr(klass, "_is_protocol", False) or klass is typing.Protocol:
            continue
        for name, member in vars(klass).items():
            if name.startswith("_"):
                continue
            returned = None
            if isinstance(member, property) and member.fget is not None:
                hint = typing.get_type_hints(member.fget, vars(attempt_view) | vars(ledger)).get("return")
                returned = next(
                    (a for a in (hint, *_arguments(hint)) if isinstance(a, type) and getattr(a, "_is_protocol", False)),
                    None,
                )
            found[name] = returned
    return found


def _arguments(hint: Any) -> list[Any]:
    return [b for a in typing.get_args(hint) for b in (a, *_arguments(a))]


def test_a_dumped_attempt_answers_every_member_of_the_view_the_dossier_reads() -> None:
    """``dumped_attempt`` is typed as an AttemptView with no cast; mypy takes its attribute
    look-up on trust, so this holds each member, at every depth, to what it answers."""
    raw = next(r for r in records() if r.get("admission") and r.get("budget") and r.get("continue_if"))
    held = Attempt.model_validate(raw)
    read = dumped_attempt(raw)

    def check(view: type, held_value: Any, read_value: Any, where: str) -> None:
        for name, inner in view_members(view).items():
            assert hasattr(read_value, name), f"{where}.{name}"
            if callable(getattr(held_value, name)):
                continue
            h, r = getattr(held_value, name), getattr(read_value, name)
            if inner is not None and h is not None:
                if isinstance(h, list):
                    for n, (hi, ri) in enumerate(zip(h, r, strict=True)):
                        check(inner, hi, ri, f"{where}.{name}[{n}]")
                else:
                    check(inner, h, r, f"{where}.{name}")
            elif not isinstance(h, BaseModel):
                assert h == r, f"{where}.{name}"

    check(attempt_view.AttemptView, held, read, raw["id"])
