"""Tables as text: plain for the terminal, GitHub-flavoured for the dossier's markdown."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any


def plain(rows: Sequence[Sequence[Any]], headers: Sequence[str], widths: dict[int, int] | None = None) -> str:
    """A plain table; long text columns are cut to keep one row a line, and None reads unknown."""
    from tabulate import tabulate  # 34 ms to import: only for commands that print a table

    def cut(value: Any, width: int | None) -> Any:
        text = "unknown" if value is None else value
        if width and isinstance(text, str) and len(text) > width:
            return text[: width - 1] + "…"
        return text

    limits = widths or {}
    shown = [[cut(v, limits.get(i)) for i, v in enumerate(row)] for row in rows]
    return str(tabulate(shown, headers=list(headers), tablefmt="simple", disable_numparse=True))


def markdown(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> list[str]:
    """The lines of a GitHub-flavoured table, then an empty line."""
    from tabulate import tabulate  # 34 ms to import: only for commands that print a table

    return [*str(tabulate(rows, list(headers), tablefmt="github", disable_numparse=True)).splitlines(), ""]


def room_left(rows: Sequence[Sequence[Any]], headers: Sequence[str], column: int) -> int:
    """Characters left for ``column`` once the other columns fit the terminal (at least 24)."""
    used = sum(
        max(len(str(h)), *(len(str(r[i] if r[i] is not None else "unknown")) for r in rows)) + 2
        for i, h in enumerate(headers)
        if i != column
    )
    return max(24, shutil.get_terminal_size((120, 24)).columns - used)
