"""A problem found in a record: where it is (file, attempt id, JSON Pointer) and why."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from ..text import SHOWN_MAX, printable, shorten
from .refs import ID_MAX_LENGTH, ID_PATTERN


@dataclass(frozen=True)
class Problem:
    rule: str  # a stable short name, e.g. "needs-reason", for scripts
    message: str
    attempt_id: str | None = None
    pointer: str = ""  # JSON Pointer into `file`
    file: str | None = None
    severity: str = "error"  # "error" fails validation; "warning" does not

    def location(self) -> str:
        where = self.file or ""
        if self.pointer:
            where = f"{where}#{self.pointer}" if where else self.pointer
        return printable(where)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def shown_id(value: str) -> str:
    """An id as it may appear in a report: whole when printable and not absurdly long."""
    return value if value.isprintable() and len(value) <= 2 * ID_MAX_LENGTH else shorten(value)


def pointer_join(base: str, *parts: Any) -> str:
    """Extend a JSON Pointer, escaping '~' and '/' in each part (RFC 6901)."""
    escaped = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return base + "".join("/" + p for p in escaped)


def _schema_message(error: Any) -> str:
    loc = error["loc"]
    value = error.get("input")
    if error["type"] == "string_pattern_mismatch" and loc and loc[-1] in ("id", "varied_from", "run_id"):
        return (
            f"not a valid id {shorten(value)}: use lowercase letters, digits, '-' and single '.' (pattern {ID_PATTERN})"
        )
    if error["type"] == "string_too_long" and isinstance(value, str):
        # never the text itself: it may be megabytes long
        limit = (error.get("ctx") or {}).get("max_length")
        return f"text of {len(value)} characters is longer than the {limit} allowed"
    if error["type"] == "extra_forbidden":
        return "unknown field (not in the schema)"
    if error["type"] == "missing":
        return "required field is missing"
    message = str(error["msg"]).removeprefix("Value error, ")  # pydantic's prefix, not ptreg's words
    if value is None or isinstance(value, (str, int, float, bool)):
        message = f"{message} (got {shorten(value)})"
    return message


# How a union's member is tagged in a validation error's location (records/evaluator.py's spec
# kinds): a character no field name holds.
UNION_TAG = "~"


def schema_problems(
    exc: ValidationError, *, attempt_id: str | None, pointer: str, file: str | None
) -> Iterable[Problem]:
    for error in exc.errors(include_url=False):
        # A key in the location may come from the input (an unknown field): shown cut short. The
        # tag of a union's member (UNION_TAG) names no field of the file and is left out.
        parts = [
            p[:SHOWN_MAX] + "..." if isinstance(p, str) and len(p) > SHOWN_MAX else p
            for p in error["loc"]
            if not (isinstance(p, str) and p.startswith(UNION_TAG))
        ]
        yield Problem(
            rule="schema",
            message=_schema_message(error),
            attempt_id=attempt_id,
            pointer=pointer_join(pointer, *parts),
            file=file,
        )


def first_schema_error(exc: ValidationError, where: str) -> str:
    """The first schema error of the file ``where`` as one line: ``file#/pointer: why``."""
    first = next(iter(schema_problems(exc, attempt_id=None, pointer="", file=where)))
    return f"{first.location()}: {first.message}"


def plain_message(error: Any) -> str:
    """What a pydantic error means, in words a person who typed the value reads: the limit or the
    choices, never pydantic's own phrasing."""
    kind, ctx = error["type"], error.get("ctx") or {}
    words = {
        "greater_than_equal": lambda: f"must be at least {ctx.get('ge')}",
        "greater_than": lambda: f"must be more than {ctx.get('gt')}",
        "less_than_equal": lambda: f"must be at most {ctx.get('le')}",
        "less_than": lambda: f"must be less than {ctx.get('lt')}",
        "literal_error": lambda: f"must be one of {ctx.get('expected')}",
        "string_too_short": lambda: "must not be empty",
        "too_short": lambda: "must not be empty",
        "missing": lambda: "is required",
        "finite_number": lambda: "must be a finite number",
        "int_parsing": lambda: "must be a whole number",
        "int_type": lambda: "must be a whole number",
        "float_parsing": lambda: "must be a number",
        "float_type": lambda: "must be a number",
        "value_error": lambda: str(error["msg"]).removeprefix("Value error, "),
    }
    made = words.get(kind)
    return made() if made is not None else _schema_message(error)


def flag_message(exc: ValidationError, attempt_id: str | None, flags: dict[str, str] | None = None) -> str:
    """The first error of a model built from command-line options, as ``--flag value: why``:
    the flag is the field's name with dashes, unless ``flags`` names it otherwise."""
    error = exc.errors(include_url=False)[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    if not field:  # a rule across fields: its message names them
        return plain_message(error)
    flag = (flags or {}).get(field) or "--" + field.replace("_", "-")
    value = error.get("input")
    given = f" {shorten(value)}" if isinstance(value, (str, int, float)) else ""
    if error["type"] == "string_pattern_mismatch" and field in ("id", "varied_from"):
        return f"{flag}: {_schema_message(error)}"
    return f"{flag}{given}: {plain_message(error)}"


def every_schema_error(exc: ValidationError, where: str) -> str:
    """Every schema error of the file ``where``, in one line: ``file: #/a: why; #/b: why``."""
    return one_line(list(schema_problems(exc, attempt_id=None, pointer="", file=where)), where)


def one_line(problems: list[Problem], where: str) -> str:
    """The problems of the file ``where`` in one line: ``file#/a: why`` for one,
    ``file: 2 problems: #/a: why; #/b: why`` for more."""
    if len(problems) == 1:
        return f"{problems[0].location()}: {problems[0].message}"
    listed = "; ".join(f"#{p.pointer}: {p.message}" if p.pointer else p.message for p in problems)
    return f"{where}: {len(problems)} problems: {listed}"


def count_errors(problems: Iterable[Problem]) -> int:
    return sum(1 for p in problems if p.severity == "error")
