"""A lineage drawn as a graph: one box per attempt, coloured by status, one row per attempt in
the order the forest is walked (the ledger's, depth first), each generation indented under the
one it varies, and an edge from each attempt to what varies it, labelled beside its end with
what was varied. Indenting rather than one column per generation keeps a chain of twenty
narrow enough to read.

The drawing is laid out here and written by the page's template as inline SVG, so that each box
is a link to its dossier and every text goes through the template's escaping. A chart library
draws data; this is a diagram of links, and a few rectangles are all it needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..records.graph import depths, forest_order
from ..records.ledger import Summary, in_ledger_order

BOX_W, BOX_H = 250, 44
INDENT, ROW = 28, 56
MARGIN = 12
EDGE_TEXT = 64  # characters of the varied text drawn by an edge; the whole text is its tooltip
CHARACTER = 5.8  # about the width of a character of the edge text, in pixels

STATUS_COLOURS = {
    "worked": "#cfe8cf",
    "worked-with-caveat": "#e6f0c2",
    "failed": "#f4c7c3",
    "regressed": "#f6d3b0",
    "inconclusive": "#e3e3e3",
    "not-tried": "#ffffff",
}


@dataclass(frozen=True)
class Node:
    id: str
    status: str | None  # None: an ancestor this registry does not hold
    x: int
    y: int
    fill: str
    lesson: str | None


@dataclass(frozen=True)
class Edge:
    path: str
    text: str  # shortened for the drawing
    full: str
    x: int
    y: int
    child: str


@dataclass(frozen=True)
class Drawing:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    box_width: int = BOX_W
    box_height: int = BOX_H


def draw(members: Sequence[str], by_id: Mapping[str, Summary]) -> Drawing:
    """The drawing of one lineage (``members`` are the ids of the attempts in it)."""
    mine = {i: by_id[i] for i in members}
    ordered = in_ledger_order(mine.values())
    place = forest_order(ordered)
    depth = depths(mine)
    missing = sorted({a.varied_from for a in ordered if a.varied_from is not None and a.varied_from not in mine})
    shift = 1 if missing else 0
    nodes: list[Node] = []
    at: dict[str, tuple[int, int]] = {}
    for n, name in enumerate(missing):
        at[name] = (MARGIN, MARGIN + n * ROW)
        nodes.append(Node(name, None, MARGIN, MARGIN + n * ROW, "#f8f8f8", None))
    rows = sorted(mine, key=lambda i: place[i])
    for row, attempt_id in enumerate(rows, start=len(missing)):
        a = mine[attempt_id]
        x, y = MARGIN + (depth.get(attempt_id, 1) - 1 + shift) * INDENT, MARGIN + row * ROW
        at[attempt_id] = (x, y)
        nodes.append(Node(attempt_id, a.status, x, y, STATUS_COLOURS.get(a.status, "#ffffff"), a.lesson))
    edges = []
    for a in ordered:
        if a.varied_from is None or a.varied_from not in at:
            continue
        (px, py), (cx, cy) = at[a.varied_from], at[a.id]
        down, end_y = px + INDENT // 2, cy + BOX_H // 2
        path = f"M{down},{py + BOX_H} V{end_y} H{cx}"
        full = a.varied or "unknown"
        edges.append(Edge(path, clip(full, EDGE_TEXT), full, cx + BOX_W + 8, end_y + 4, a.id))
    text = max((len(e.text) for e in edges), default=0) * CHARACTER
    width = int(max((x for x, _ in at.values()), default=0) + BOX_W + 8 + text + MARGIN)
    height = max((y for _, y in at.values()), default=0) + BOX_H + MARGIN
    return Drawing(nodes, edges, width, height)


def clip(text: str, limit: int) -> str:
    """The first ``limit`` characters of one line of text, with an ellipsis when cut."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "\u2026"
