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


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` as a terminal may be given it: every character a terminal would act on instead
    of showing (C0 and C1 controls, so escape sequences; bidi overrides and isolates; zero-width
    and other format characters; line and paragraph separators; unassigned code points and
    lone surrogates, which cannot even be encoded) written visibly as Python writes it,
    ``\\x1b``, ``\\u202e``, ``\\U000e0041``, while letters in any script stay as they are.
    With ``lines`` a newline is kept (multi-line output); without it the text stays on one line.

    The one home of this rule: the command line prints record-derived text only through it
    (ptreg/cli/common.py's ``say``), and `printable(printable(t)) == printable(t)`, so that
    text made safe early (a table's cells, measured for width) passes again unchanged."""
    if text.isprintable() or (lines and text.replace("\n", "").isprintable()):
        return text  # the usual case, one scan in C
    kept = "\n" if lines else ""
    return "".join(c if c.isprintable() or c == kept else repr(c)[1:-1] for c in text)


def printable_json(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with the characters
    ``printable`` escapes written as JSON's ``\\uXXXX`` instead, so that it parses to the same
    value. json.dumps escapes only C0 controls; C1 controls, bidi and zero-width characters
    pass through it raw. Newlines outside strings (the indentation) stay."""
    if text.replace("\n", "").isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else _json_escape(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON spells a character beyond the first plane
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """'1 attempt', '2 attempts', '0 attempts'."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


@dataclass(frozen=True)
class Table:
    """A table a report shows: its cells as text, which of its columns are free text (a narrow
    terminal may cut those; ids and numbers are never cut), and which hold notes (never cut:
    moved below the table when it is too wide)."""

    title: str
    rows: list[list[str]]
    headers: list[str]
    text: tuple[str, ...] = ()  # the headers of the free-text columns
    notes: tuple[str, ...] = ()  # the headers of the columns of notes, which move below a table too wide

    @property
    def text_columns(self) -> tuple[int, ...]:
        return tuple(i for i, h in enumerate(self.headers) if h in self.text)

    @property
    def note_columns(self) -> tuple[int, ...]:
        return tuple(i for i, h in enumerate(self.headers) if h in self.notes)
