"""Streaks: per objective, how many negative outcomes sit at the tip of its deepest chain.

Two negatives in a row earn a CAUTION, three or more a STOP AND RETHINK: the same axis is
being pushed again by habit. A chain that failed and then worked does not warn, since only
the negatives at the tip count; a not-tried proposal at the tip has no outcome and is passed over.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from ..records.graph import ancestry, depths, forest_places
from ..records.ledger import (
    CAUTION_AT,
    NEGATIVE_STATUSES,
    STOP_AT,
    LedgerKey,
    Outcome,
    Step,
    in_ledger_order,
    trailing_negatives,
)

# A whole record or the index's summary of one: a streak gives back what it was given.
A = TypeVar("A", bound=Outcome)
S = TypeVar("S", bound=Step)

OK, CAUTION, STOP = "ok", "CAUTION", "STOP AND RETHINK"


@dataclass(frozen=True)
class Streak(Generic[A]):
    objective: str
    chain: list[A]  # oldest first; the last one is the tip
    trailing: list[A]  # the negatives at the tip, oldest first

    @property
    def negatives(self) -> int:
        return len(self.trailing)

    @property
    def level(self) -> str:
        if self.negatives >= STOP_AT:
            return STOP
        if self.negatives >= CAUTION_AT:
            return CAUTION
        return OK

    @property
    def tip(self) -> A:
        return self.chain[-1]

    def to_json(self) -> dict:
        return {
            "objective": self.objective,
            "level": self.level,
            "negatives": self.negatives,
            "depth": len(self.chain),
            "chain": [a.id for a in self.chain],
            "trailing": [a.id for a in self.trailing],
            "tip": self.tip.id,
            "tip_status": self.tip.status,
            "tip_lesson": self.tip.lesson,
        }


def streaks(attempts: Iterable[A], objective: str | None = None) -> list[Streak[A]]:
    """One Streak per objective (or for ``objective`` alone), for its deepest chain; sorted as the
    source project's query tool sorts them: most negatives first, then the longest chain, then
    the ledger's order (its lineage trees walked from their roots, so a tie comes out as that
    tool gives it)."""
    given = list(attempts)
    return streaks_of(streak_chains(given, objective), {a.id: a for a in in_ledger_order(given)})


def streaks_of(chains: list[tuple[str, list[str]]], by_id: Mapping[str, A]) -> list[Streak[A]]:
    """The streaks of ``streak_chains``, made of the attempts ``by_id`` (which holds at least
    every attempt of those chains: the index reads whole summaries for them alone)."""
    found = []
    for objective, ids in chains:
        chain = [by_id[i] for i in ids]
        found.append(Streak(objective, chain, trailing_negatives(chain, objective)))
    return found


def _tips(ordered: list[S], by_id: dict[str, S], objective: str | None) -> Iterator[tuple[S, int, int]]:
    """(tip, its depth, its trailing negatives) of each chain of ``objective`` (or of every
    objective), in the ledger's order: the order that breaks a tie between deepest chains."""
    wanted = [a.id for a in ordered if a.objective is not None and objective in (None, a.objective)]
    depth = depths(by_id, wanted)
    # A tip is an attempt of the objective that no attempt of the same objective varies.
    varied_within = {
        a.varied_from
        for a in by_id.values()
        if a.varied_from in by_id and by_id[a.varied_from].objective == a.objective
    }
    for a in (by_id[i] for i in wanted):
        if a.objective is not None and a.id not in varied_within:
            yield a, depth[a.id], trailing_count(a, by_id)


def streak_chains(attempts: Iterable[S], objective: str | None = None) -> list[tuple[str, list[str]]]:
    """(objective, chain ids oldest first) of each streak (or of ``objective``'s alone), in the
    streaks' order."""
    ordered = in_ledger_order(attempts)
    by_id = {a.id: a for a in ordered}
    best: dict[str, tuple[int, int, str]] = {}
    for a, depth, trailing in _tips(ordered, by_id, objective):
        key, of = (depth, trailing, a.id), a.objective or ""
        if of not in best or key[:2] > best[of][:2]:
            best[of] = key
    result = []
    for objective, (_, _, tip_id) in best.items():
        chain = ancestry(tip_id, by_id)
        result.append((objective, chain, len(trailing_negatives(chain, objective))))
    place = forest_places([chain[-1].id for _, chain, _ in result], ordered)
    result.sort(key=lambda s: (-s[2], -len(s[1]), place[s[1][-1].id]))
    return [(objective, [a.id for a in chain]) for objective, chain, _ in result]


class Tip(NamedTuple):
    """A chain's tip as the streak of its objective ranks it."""

    id: str
    depth: int
    trailing: int
    ledger: LedgerKey  # the first of its id in the ledger's order

    def rank(self) -> tuple[int, int, LedgerKey]:
        """Sorts the objective's streak first: the deepest chain, then the most negatives at its
        tip, then the first in the ledger's order (as ``streak_chains`` keeps the first of a tie)."""
        return (-self.depth, -self.trailing, self.ledger)


def ranked_tips(attempts: Iterable[S], objective: str, keep: int = 2) -> list[Tip]:
    """The ``keep`` best tips of ``objective``'s chains, best first: the first is the tip of its
    streak, the second the one that takes its place when the first is left out."""
    ordered = in_ledger_order(attempts)
    first: dict[str, LedgerKey] = {}
    for a in ordered:
        first.setdefault(a.id, a.ledger)
    by_id = {a.id: a for a in ordered}
    # an id given by two files is one tip, as it is one key of by_id
    tips = {a.id: Tip(a.id, depth, trailing, first[a.id]) for a, depth, trailing in _tips(ordered, by_id, objective)}
    return sorted(tips.values(), key=Tip.rank)[:keep]


def trailing_count(tip: S, by_id: Mapping[str, S]) -> int:
    """``len(trailing_negatives(ancestry(tip.id, by_id), tip.objective))``, walking up from the
    tip only as far as its negatives go (a deep chain is not walked whole for each tip)."""
    objective = tip.objective or ""
    count, at_tip, seen = 0, True, set()
    node: str | None = tip.id
    while node is not None and node in by_id and node not in seen:
        seen.add(node)
        a = by_id[node]
        node = a.varied_from
        if at_tip and a.status == "not-tried" and a.objective == objective:
            continue  # proposals at the tip have no outcome yet
        at_tip = False
        if a.objective != objective or a.status not in NEGATIVE_STATUSES:
            break
        count += 1
    return count
