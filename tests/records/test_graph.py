"""The lineage forest: the place of a few tips, computed from their own paths, is the place the
whole forest's depth-first walk gives them (streaks sort ties by it)."""

from __future__ import annotations

from typing import NamedTuple

from hypothesis import given
from hypothesis import strategies as st

from ptreg.records.graph import ancestry, depths, forest_order, forest_places, lineage_root, lineage_roots


class Node(NamedTuple):
    id: str
    varied_from: str | None


@given(st.lists(st.integers(-1, 30), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_forest_places_sort_as_the_whole_walk_places(parents: list[int], rng) -> None:
    """Random forests, with parents later in the order, gaps (a missing ancestor) and cycles."""
    nodes = [Node(f"n{i}", None if p < 0 else f"n{p}") for i, p in enumerate(parents)]
    rng.shuffle(nodes)
    order = forest_order(nodes)
    places = forest_places([n.id for n in nodes], nodes)
    assert sorted(order, key=lambda i: places[i]) == sorted(order, key=lambda i: order[i])


@given(st.lists(st.integers(-1, 30), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_lineage_roots_are_each_attempts_lineage_root(parents: list[int], rng) -> None:
    """Chains, gaps (a missing ancestor) and cycles: the one walk agrees with one walk per attempt."""
    nodes = [Node(f"n{i}", None if p < 0 else f"n{p}") for i, p in enumerate(parents)]
    rng.shuffle(nodes)
    by_id = {n.id: n for n in nodes}
    assert lineage_roots(by_id) == {i: lineage_root(i, by_id) for i in by_id}


@given(st.lists(st.integers(-1, 30), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_depths_do_not_depend_on_where_the_walks_start(parents: list[int], rng) -> None:
    """Each attempt's depth is its chain's length, in a cycle too, from any set of starts taken in
    any order (the streaks of one objective and of all of them must see the same depths)."""
    nodes = [Node(f"n{i}", None if p < 0 else f"n{p}") for i, p in enumerate(parents)]
    by_id = {n.id: n for n in nodes}
    starts = rng.sample(sorted(by_id), rng.randint(1, len(by_id)))
    found = depths(by_id, starts)
    assert found == {i: len(ancestry(i, by_id)) for i in found}
    assert set(starts) <= set(found)
