"""A problem found in a registry: where it is (file, attempt id, JSON Pointer) and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Optional

from pydantic import ValidationError

from .model import ID_PATTERN


@dataclass(frozen=True)
class Problem:
    rule: str  # a stable short name, e.g. "needs-lesson", for scripts
    message: str
    attempt_id: Optional[str] = None
    pointer: str = ""  # JSON Pointer into `file`
    file: Optional[str] = None
    severity: str = "error"  # "error" fails validation; "warning" does not

    def location(self) -> str:
        where = self.file or ""
        if self.pointer:
            where = f"{where}#{self.pointer}" if where else self.pointer
        return where

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pointer_join(base: str, *parts: Any) -> str:
    """Extend a JSON Pointer, escaping '~' and '/' in each part (RFC 6901)."""
    escaped = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return base + "".join("/" + p for p in escaped)


def _schema_message(error: dict[str, Any]) -> str:
    loc = error["loc"]
    if error["type"] == "string_pattern_mismatch" and loc and loc[-1] in ("id", "varied_from", "run_id"):
        return f"not a valid id {error['input']!r}: use lowercase letters, digits, '-' and single '.' (pattern {ID_PATTERN})"
    if error["type"] == "extra_forbidden":
        return "unknown field (not in the schema)"
    if error["type"] == "missing":
        return "required field is missing"
    message = error["msg"]
    value = error.get("input")
    if error["type"] != "missing" and (value is None or isinstance(value, (str, int, float, bool))):
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        message = f"{message} (got {shown})"
    return message


def schema_problems(
    exc: ValidationError, *, attempt_id: Optional[str], pointer: str, file: Optional[str]
) -> Iterable[Problem]:
    for error in exc.errors(include_url=False):
        yield Problem(
            rule="schema",
            message=_schema_message(error),
            attempt_id=attempt_id,
            pointer=pointer_join(pointer, *error["loc"]),
            file=file,
        )


def count_errors(problems: Iterable[Problem]) -> int:
    return sum(1 for p in problems if p.severity == "error")
