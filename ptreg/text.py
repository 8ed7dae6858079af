"""Text for people: how a value is quoted in a message (never whole when it is long, never
over two lines), counts with their nouns, and the table a report shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Messages quote keys and values at most this long, so a hostile input is never echoed whole.
SHOWN_MAX = 60


def shorten(value: Any, limit: int = SHOWN_MAX) -> str:
    """repr() of ``value``, cut to about ``limit`` characters, saying how long it was."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return shown[: limit - 3] + "..." + size


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def printable(text: str) -> str:
    """``text`` with control characters escaped, so that a report stays one line per problem."""
    return text if text.isprintable() else repr(text)[1:-1]


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """'1 attempt', '2 attempts', '0 attempts'."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


@dataclass(frozen=True)
class Table:
    """A table a report shows: its cells as text, and which of its columns are free text (a
    narrow terminal may cut those; ids and numbers are never cut)."""

    title: str
    rows: list[list[str]]
    headers: list[str]
    text: tuple[str, ...] = ()  # the headers of the free-text columns

    @property
    def text_columns(self) -> tuple[int, ...]:
        return tuple(i for i, h in enumerate(self.headers) if h in self.text)
