"""Tables as text: plain for the terminal, fitted to its width, and GitHub-flavoured for the
dossier's markdown."""

from __future__ import annotations

import shutil
from collections.abc import Collection, Sequence
from typing import Any

GAP = 2  # spaces tabulate's "simple" format puts between columns
NARROWEST = 12  # a column cut to fit is never cut below this, nor below its header
WIDTH_WITHOUT_TERMINAL = 120  # in a pipe there is no width to fit; scripts read --json


def terminal_width() -> int:
    """$COLUMNS, else the terminal's width, else 120."""
    return shutil.get_terminal_size((WIDTH_WITHOUT_TERMINAL, 24)).columns


def _text(value: Any) -> str:
    return "unknown" if value is None else str(value)


def fitted_widths(
    rows: Sequence[Sequence[str]], headers: Sequence[str], shrink: Collection[int], width: int
) -> dict[int, int]:
    """How wide each column in ``shrink`` may be for the table to fit ``width``: the widest of
    them gives way first. Columns not in ``shrink`` (ids, statuses, numbers) are never cut."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    limits = {i: natural[i] for i in shrink if i < len(headers)}
    floor = {i: max(NARROWEST, len(headers[i])) for i in limits}
    excess = sum(natural) + GAP * (len(headers) - 1) - width
    while excess > 0:
        cuttable = [i for i in limits if limits[i] > floor[i]]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: limits[i])
        runner_up = max((limits[i] for i in cuttable if i != widest), default=floor[widest])
        cut = min(excess, limits[widest] - max(floor[widest], runner_up)) or 1
        limits[widest] -= cut
        excess -= cut
    return {i: w for i, w in limits.items() if w < natural[i]}


def plain(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], shrink: Collection[int] = (), width: int | None = None
) -> str:
    """A plain table, one row a line: the columns in ``shrink`` (free text) are cut with "…"
    so that it fits ``width`` (default: the terminal); None reads unknown."""
    from tabulate import tabulate  # 34 ms to import: only for commands that print a table

    text = [[_text(v) for v in row] for row in rows]
    limits = fitted_widths(text, headers, shrink, terminal_width() if width is None else width)
    shown = [
        [v[: limits[i] - 1] + "…" if i in limits and len(v) > limits[i] else v for i, v in enumerate(row)]
        for row in text
    ]
    return str(tabulate(shown, headers=list(headers), tablefmt="simple", disable_numparse=True))


def markdown(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> list[str]:
    """The lines of a GitHub-flavoured table, then an empty line."""
    from tabulate import tabulate  # 34 ms to import: only for commands that print a table

    return [*str(tabulate(rows, list(headers), tablefmt="github", disable_numparse=True)).splitlines(), ""]
