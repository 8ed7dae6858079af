"""The lineage graph: each attempt varies at most one other (varied_from), so it is a forest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from .ledger import Linked

# Each function hands back the kind of attempt it was given: a whole record or an index summary.
A = TypeVar("A", bound=Linked)


def find_cycles(parent: Mapping[str, str | None]) -> list[list[str]]:
    """Every varied_from cycle once, each starting at its smallest id."""
    state: dict[str, int] = {}  # 1 = on the current walk, 2 = finished
    cycles: list[list[str]] = []
    for start in parent:
        walk: list[str] = []
        node: str | None = start
        while node is not None and node in parent and state.get(node) is None:
            state[node] = 1
            walk.append(node)
            node = parent[node]
        if node is not None and state.get(node) == 1:
            cycle = walk[walk.index(node) :]
            turn = cycle.index(min(cycle))
            cycles.append(cycle[turn:] + cycle[:turn])
        for seen in walk:
            state[seen] = 2
    return sorted(cycles)


def ancestry(attempt_id: str, by_id: Mapping[str, A]) -> list[A]:
    """The chain from the oldest known ancestor down to ``attempt_id`` (stops at a cycle or a gap)."""
    chain: list[A] = []
    seen: set[str] = set()
    node: str | None = attempt_id
    while node is not None and node in by_id and node not in seen:
        seen.add(node)
        chain.append(by_id[node])
        node = by_id[node].varied_from
    chain.reverse()
    return chain


def children_of(attempts: Iterable[Linked]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for a in attempts:
        if a.varied_from is not None:
            children.setdefault(a.varied_from, []).append(a.id)
    return children


@dataclass(frozen=True)
class Successor(Generic[A]):
    attempt: A
    depth: int  # 1 = varies the attempt directly


def successors(attempt_id: str, by_id: Mapping[str, A]) -> list[Successor[A]]:
    """Everything that superseded ``attempt_id``: its variations, theirs, and so on (depth first)."""
    children = children_of(by_id.values())
    found: list[Successor[A]] = []
    seen = {attempt_id}
    stack = [(c, 1) for c in reversed(children.get(attempt_id, []))]
    while stack:
        node, depth = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        found.append(Successor(by_id[node], depth))
        stack.extend((c, depth + 1) for c in reversed(children.get(node, [])))
    return found


def depths(by_id: Mapping[str, Linked], starts: Iterable[str] | None = None) -> dict[str, int]:
    """Chain length from each attempt (or from each of ``starts`` and what lies above them) up to
    its root (1 for a root), without recursion: ``len(ancestry(id, by_id))``, so in a cycle each
    attempt counts the whole cycle above it, whichever attempt the walk entered it by."""
    depth: dict[str, int] = {}
    for start in by_id if starts is None else starts:
        walk: list[str] = []
        on_walk: set[str] = set()
        node: str | None = start
        while node is not None and node in by_id and node not in depth and node not in on_walk:
            walk.append(node)
            on_walk.add(node)
            node = by_id[node].varied_from
        if node is not None and node in on_walk:
            cycle = walk[walk.index(node) :]
            depth.update((item, len(cycle)) for item in cycle)
            walk, base = walk[: -len(cycle)], len(cycle)
        else:
            base = depth.get(node, 0) if node is not None else 0
        for offset, item in enumerate(reversed(walk), start=1):
            depth[item] = base + offset
    return depth


def lineage_root(attempt_id: str, by_id: Mapping[str, Linked]) -> str:
    """The id a lineage is known by: its oldest attempt, or the missing ancestor it names."""
    chain = ancestry(attempt_id, by_id)
    if not chain:
        return attempt_id
    return chain[0].varied_from or chain[0].id


def lineage_roots(by_id: Mapping[str, Linked]) -> dict[str, str]:
    """``lineage_root`` of every attempt, each chain walked once (the gate compares a proposal
    with every attempt of its lineage: one walk per attempt cost O(n x depth))."""
    root: dict[str, str] = {}
    for start in by_id:
        walk: list[str] = []
        seen: set[str] = set()
        node: str | None = start
        while node is not None and node in by_id and node not in seen and node not in root:
            seen.add(node)
            walk.append(node)
            node = by_id[node].varied_from
        if not walk:
            continue
        if node is not None and node in seen:  # a cycle: where a chain stops depends on its start
            root.update((n, lineage_root(n, by_id)) for n in walk)
            continue
        if node is None:
            base = walk[-1]  # the oldest attempt varies nothing
        elif node in root:
            base = root[node]  # a chain already walked
        else:
            base = node  # the missing ancestor it names
        root.update((n, base) for n in walk)
    return root


def forest_order(attempts: Iterable[Linked]) -> dict[str, int]:
    """Each attempt's place when the varied_from forest is walked as the source project's query
    tool walks it: roots in the order given (the ledger's), each tree depth first, children in
    the order given. Attempts in a cycle, which no root reaches, come last in the order given."""
    ordered = list(attempts)
    ids = {a.id for a in ordered}
    children = children_of(ordered)
    place: dict[str, int] = {}
    for root in (a.id for a in ordered if a.varied_from not in ids):
        stack = [root]
        while stack:
            node = stack.pop()
            if node in place:
                continue
            place[node] = len(place)
            stack.extend(reversed(children.get(node, [])))
    for a in ordered:
        place.setdefault(a.id, len(place))
    return place


def forest_places(ids: Iterable[str], ordered: Sequence[Linked]) -> dict[str, tuple[int, ...]]:
    """For each of ``ids``, a key that sorts as ``forest_order`` places it, computed from its own
    path to its root rather than by walking the whole forest (100,000 attempts, a handful of
    tips). A depth-first walk with children in the order given visits a node at the
    lexicographic place of its path's positions in that order, root first; a node no root
    reaches (in or below a cycle) comes after every reached one, in the order given."""
    position = {a.id: i for i, a in enumerate(ordered)}
    by_id = {a.id: a for a in ordered}
    places: dict[str, tuple[int, ...]] = {}
    for start in ids:
        path = [position[start]]
        seen = {start}
        node = by_id[start].varied_from
        while node is not None and node in by_id and node not in seen:
            seen.add(node)
            path.append(position[node])
            node = by_id[node].varied_from
        reached = node is None or node not in by_id  # else the walk met a cycle
        places[start] = (0, *reversed(path)) if reached else (1, position[start])
    return places
