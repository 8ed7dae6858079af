"""Tables as text: plain for the terminal, fitted to its width, and GitHub-flavoured for the
dossier's markdown."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Collection, Sequence
from typing import Any

from ..text import Table, printable

GAP = 2  # spaces tabulate's "simple" format puts between columns
HEADER_PADDING = 2  # and a column is at least its header plus these
NARROWEST = 12  # a column cut to fit is never cut below this, nor below its header
WIDTH_WITHOUT_TERMINAL = 120  # in a pipe there is no width to fit; scripts read --json


def terminal_width() -> int:
    """$COLUMNS, else the terminal's width, else 120."""
    return shutil.get_terminal_size((WIDTH_WITHOUT_TERMINAL, 24)).columns


def _text(value: Any) -> str:
    return "unknown" if value is None else str(value)


def _texts(column: Sequence[Any]) -> list[str]:
    """A column's cells as text a terminal shows as it is (ptreg/text.py's ``printable``), so
    that an escape sequence in a record is neither acted on nor measured as the wrong width."""
    cells = list(column) if set(map(type, column)) <= {str} else [_text(v) for v in column]  # usual: checked in C
    return cells if "".join(cells).isprintable() else [printable(c) for c in cells]


def _cut(
    natural: Sequence[int], headers: Sequence[str], kept: Sequence[int], shrink: Collection[int], width: int
) -> tuple[dict[int, int], int]:
    """How wide each kept column in ``shrink`` may be, the widest giving way first, and by how
    many characters the table is still too wide (0 or less when it fits)."""
    limits = {i: natural[i] for i in shrink if i in kept}
    floor = {i: max(NARROWEST, len(headers[i]) + HEADER_PADDING) for i in limits}
    excess = sum(natural[i] for i in kept) + GAP * (len(kept) - 1) - width
    while excess > 0:
        cuttable = [i for i in limits if limits[i] > floor[i]]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: limits[i])
        runner_up = max((limits[i] for i in cuttable if i != widest), default=floor[widest])
        cut = min(excess, limits[widest] - max(floor[widest], runner_up)) or 1
        limits[widest] -= cut
        excess -= cut
    return {i: w for i, w in limits.items() if w < natural[i]}, excess


def fit(
    natural: Sequence[int],
    headers: Sequence[str],
    shrink: Collection[int],
    drop: Sequence[int],
    width: int,
) -> tuple[list[int], dict[int, int], int]:
    """The columns shown, the widths of those cut and by how much it is still too wide (0 or
    less when it fits), for a table whose columns are ``natural``
    wide to fit ``width``: the free text columns in ``shrink`` are cut first, then the columns
    in ``drop`` are left out, in that order, while it is still too wide. Columns in neither
    (ids, statuses, numbers) are never cut or left out."""
    kept = list(range(len(headers)))
    limits, excess = _cut(natural, headers, kept, shrink, width)
    for column in drop:
        if excess <= 0:
            break
        kept.remove(column)
        limits, excess = _cut(natural, headers, kept, shrink, width)
    return kept, limits, excess


# The forms a table takes, most compact first: a line per row; turned, a line per column and
# a column per row (a few rows too wide side by side); blocks, a block per row.
ROWS, TURNED, BLOCKS = 0, 1, 2


def plain(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    shrink: Collection[int] = (),
    width: int | None = None,
    drop: Sequence[int] = (),
    notes: Collection[int] = (),
    form: int = ROWS,
) -> str:
    """A plain table, one row a line, fitted to ``width`` (default: the terminal): the columns
    in ``shrink`` (free text) are cut with "…", then those in ``drop`` left out, in that order,
    until it fits (``--json`` keeps everything); None reads unknown. The other columns (ids,
    numbers, intervals, verdicts, notes, hints) are never cut: the notes in ``notes`` move below
    the table, each once, marked [1], [2], ... in their cells, and a table that still does not
    fit is turned, a line per column and a column per row, when its rows fit side by side
    (``turned``), else laid out as blocks, one row each, a line per column (``stacked``).
    ``form`` asks for at least that form (TURNED, BLOCKS): ``plain_tables`` lays out tables of
    one kind alike."""
    return _laid(rows, headers, shrink, width, drop, notes, form)[1]


def plain_tables(tables: Sequence[Table], width: int | None = None) -> list[str]:
    """Each table as ``plain`` lays it out, in one form for the tables whose rows are the same
    things (their first column's header: a run's metrics, each a table of its arms): the least
    compact form any of them needs, so that one metric is never a table and the next a card."""
    forms: dict[str, int] = {}
    for t in tables:
        first = t.headers[0] if t.headers else ""
        form = _laid(t.rows, t.headers, t.text_columns, width, (), t.note_columns, ROWS)[0]
        forms[first] = max(forms.get(first, ROWS), form)
    return [
        plain(
            t.rows,
            t.headers,
            shrink=t.text_columns,
            width=width,
            notes=t.note_columns,
            form=forms[t.headers[0] if t.headers else ""],
        )
        for t in tables
    ]


def _laid(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    shrink: Collection[int],
    width: int | None,
    drop: Sequence[int],
    notes: Collection[int],
    form: int,
) -> tuple[int, str]:
    """``plain``'s table and the form it took."""
    # column by column, so that measuring and checking each is one call in C (a `list` of
    # 23,000 rows spent 0.2 s here cell by cell)
    columns = [_texts(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in headers]
    headers = _texts(headers)  # a run's table may head its columns with backend names
    room = terminal_width() if width is None else width
    natural = _natural(columns, headers)
    kept, limits, excess = fit(natural, headers, shrink, drop, room)
    below: list[str] = []
    whole = columns  # the notes in their cells, which a turned table may have room for
    if excess > 0 and notes:
        columns, below = _as_footnotes(columns, notes, room)
        natural = _natural(columns, headers)
        kept, limits, excess = fit(natural, headers, shrink, drop, room)
    if excess > 0 or form > ROWS:
        if form <= TURNED:
            turned = _turned(whole, headers, room)
            if turned is not None:
                return TURNED, turned
            if notes:
                columns, below = _as_footnotes(whole, notes, room)
                turned = _turned(columns, headers, room)
                if turned is not None:
                    return TURNED, turned + "".join(f"\n{line}" for line in below)
        return BLOCKS, _stacked(columns, headers, shrink, room) + "".join(f"\n{line}" for line in below)
    after = "".join(f"\n{line}" for line in below)
    shown = []
    for i in kept:
        limit = limits.get(i)
        column = columns[i]
        shown.append(column if limit is None else [c[: limit - 1] + "…" if len(c) > limit else c for c in column])
    heads = [headers[i] for i in kept]
    flat = "".join(heads) + "".join("".join(column) for column in shown)
    # With wcwidth installed tabulate counts East Asian wide characters twice; simple() counts
    # characters, so it lays out only what both count alike.
    if flat.isascii() or not _wide_characters_counted():
        return ROWS, _simple(shown, heads) + after
    from tabulate import tabulate  # 34 ms to import: only for tables simple() does not lay out

    laid = tabulate(list(zip(*shown, strict=True)), headers=heads, tablefmt="simple", disable_numparse=True)
    return ROWS, str(laid) + after


def _turned(columns: Sequence[Sequence[str]], headers: Sequence[str], width: int) -> str | None:
    """The table turned: its first column's cells head the columns, and each other column is a
    line, its header then every row's cell (a line whose cells are all empty says nothing and
    is left out); None when the rows do not fit side by side in ``width``, or when a wide
    character would be counted as one (``simple`` counts characters)."""
    if not columns or not columns[0]:
        return None
    cells = [list(map(str.strip, column)) for column in columns]
    lines = [i for i in range(1, len(headers)) if any(cells[i])]
    heads = [headers[0], *cells[0]]
    turned = [[headers[i] for i in lines], *([cells[i][r] for i in lines] for r in range(len(cells[0])))]
    if sum(_natural(turned, heads)) + GAP * (len(heads) - 1) > width:
        return None
    if not ("".join(heads) + "".join(map("".join, turned))).isascii() and _wide_characters_counted():
        return None
    return _simple(turned, heads)


READABLE = 24  # free text given a column of its own is never narrower than this


def cut_at_word(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: whole when it fits, else cut after its last
    whole word that leaves room for "…" (mid-word only when a first word is that long)."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if text[width - 1] != " " and space > width // 2:  # the last word is cut: leave it out
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def with_free_text(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    optional: Sequence[int],
    last: Sequence[int] = (),
    width: int | None = None,
) -> str:
    """A table whose last column is free text (a lesson) and the others are names and terms,
    each given the width it needs, never cut: the columns in ``optional`` are left out, in that
    order, while the free text would have fewer than READABLE characters; it then takes what
    remains, cut at a word. When even that is too little, each row's free text goes on a line of
    its own under the row, indented, cut at a word to the width; and the columns in ``last``
    are left out only when the others do not fit without it. ``--json`` has every one whole."""
    room = terminal_width() if width is None else width
    columns = [_texts(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in headers]
    heads = _texts(headers)
    natural = _natural(columns, heads)
    text = len(heads) - 1
    kept = list(range(text))

    def left() -> int:  # the free text's width beside the kept columns
        return room - sum(natural[i] + GAP for i in kept)

    for column in optional:
        if left() >= READABLE:
            break
        kept.remove(column)
    if left() >= READABLE:
        cut = [cut_at_word(cell.strip(), left()) for cell in columns[text]]
        shown = [*(columns[i] for i in kept), cut]
        return _laid(list(zip(*shown, strict=True)), [*(heads[i] for i in kept), heads[text]], (), room, (), (), ROWS)[
            1
        ]
    for column in last:
        if left() >= -GAP:  # the columns fit with no free text beside them
            break
        kept.remove(column)
    form, table = _laid(
        list(zip(*(columns[i] for i in kept), strict=True)), [heads[i] for i in kept], (), room, (), (), ROWS
    )
    if form != ROWS:  # blocks: the free text goes in each block, cut to its line
        return plain(rows, headers, shrink=(text,), width=room)
    lines = table.split("\n")
    out = lines[:2]
    for line, cell in zip(lines[2:], columns[text], strict=True):
        out += [line, "  " + cut_at_word(cell.strip(), max(room - 2, READABLE))] if cell.strip() else [line]
    return "\n".join(out)


def natural_width(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> int:
    """How wide ``plain`` lays out a table when nothing is cut: to choose between two forms."""
    columns = [_texts(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in headers]
    return sum(_natural(columns, _texts(headers))) + GAP * (len(headers) - 1)


def _natural(columns: Sequence[Sequence[str]], headers: Sequence[str]) -> list[int]:
    return [max(len(h) + HEADER_PADDING, max(map(len, c), default=0)) for h, c in zip(headers, columns, strict=True)]


def _as_footnotes(
    columns: Sequence[Sequence[str]], notes: Collection[int], width: int
) -> tuple[list[list[str]], list[str]]:
    """The columns with each note in ``notes`` replaced by its mark, [1], [2], ... (a note
    repeated on several rows keeps one mark), and the lines that say the notes in full,
    wrapped to ``width`` under their marks."""
    import textwrap

    marks: dict[str, str] = {}
    replaced = []
    for i, column in enumerate(columns):
        if i not in notes:
            replaced.append(list(column))
            continue
        cells = []
        for cell in column:
            text = cell.strip()
            if text and text not in marks:
                marks[text] = f"[{len(marks) + 1}]"
            cells.append(marks[text] if text else "")
        replaced.append(cells)
    lines = [""] if marks else []
    for text, mark in marks.items():
        lines += textwrap.wrap(
            f"{mark} {text}", max(width, NARROWEST), subsequent_indent=" " * (len(mark) + 1), break_on_hyphens=False
        )
    return replaced, lines


def _stacked(columns: Sequence[Sequence[str]], headers: Sequence[str], shrink: Collection[int], width: int) -> str:
    """A table too wide for ``width`` as blocks, one row each: a line per column, its header
    then its cell, the cells aligned; a cell too long for its line goes on over the next ones
    (a verdict or a note is wrapped, never cut; a single word longer than a line, such as a
    long id, stays whole and overflows), except free text (``shrink``), cut to one line as the
    table would have cut it. An empty cell says nothing and takes no line."""
    import textwrap

    label = max(map(len, headers), default=0) + GAP
    room = max(width - label, NARROWEST)
    blocks = []
    for row in zip(*columns, strict=True):
        lines = []
        for i, (head, cell) in enumerate(zip(headers, row, strict=True)):
            cell = cell.strip()
            if not cell:
                continue
            if i in shrink:
                parts = [cell if len(cell) <= room else cell[: room - 1] + "…"]
            else:
                # a name longer than the line stays whole on its own: never broken inside
                parts = textwrap.wrap(cell, room, break_on_hyphens=False, break_long_words=False) or [cell]
            lines.append(f"{head:<{label}}{parts[0]}")
            lines += [" " * label + part for part in parts[1:]]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _wide_characters_counted() -> bool:
    return importlib.util.find_spec("wcwidth") is not None


def simple(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """tabulate's "simple" format (strings, no number parsing), for cells without line breaks
    or escape codes: each cell stripped and left-aligned, columns two spaces apart, each at least
    its header plus two, lines without trailing spaces. tabulate guesses each cell's type
    first, which cost 4 s of a 100,000-row `ptreg list`; tests/views/test_tables.py holds the
    two to the same output."""
    return _simple([list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in headers], headers)


def _simple(columns: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """``simple`` of a table given column by column."""
    cells = [list(map(str.strip, column)) for column in columns]
    widths = [max(len(h) + HEADER_PADDING, max(map(len, c), default=0)) for h, c in zip(headers, cells, strict=True)]
    row = (" " * GAP).join(f"%-{w}s" for w in widths)  # a format per line: one call in C per row
    lines = [
        row % tuple(headers),
        row % tuple("-" * w for w in widths),
        *(row % line for line in zip(*cells, strict=True)),
    ]
    return "\n".join(line.rstrip() for line in lines)


def markdown(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> list[str]:
    """The lines of a GitHub-flavoured table, then an empty line."""
    from tabulate import tabulate  # 34 ms to import: only for commands that print a table

    return [*str(tabulate(rows, list(headers), tablefmt="github", disable_numparse=True)).splitlines(), ""]
