"""What the gate's checks of one attempt read from the query index, and no more: the attempts of
its lineage and tracking issue and those of its family that ask a question
(``Index.gate_candidates``), how many of its family ask none, and the chain of its objective's
streak, found from the streaks' tips that the index keeps for the whole registry.

The streak check compares the proposal with every other attempt: the registry without the
proposal. The index keeps, per objective, the two best tips of the registry as it is
(``views.streaks.ranked_tips``); leaving the proposal out changes them only where it was one of
them, or where its parent becomes a tip in its place, and both are decided from the proposal's
own chain. Where that reasoning does not hold (the proposal is varied by another attempt, an id
is given by two files, a chain runs in a cycle), the streak is found again from the attempts of
the objective and their ancestors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..records.attempt import Attempt
from ..records.graph import ancestry
from ..records.ledger import Link, Shaped, Summary
from ..views.streaks import Tip, ranked_tips, streak_chains, trailing_count
from .checks import GateReport, check_gate

if TYPE_CHECKING:
    from ..store.reader import RegistryReader


@dataclass(frozen=True)
class GateReading:
    others: list[Summary]  # every attempt the checks compare with, or at least those they read
    known_ids: list[str] | None  # every id, when the attempt varies one not among ``others``
    objective_chain: list[Summary]  # the chain of its objective's streak, without the attempt
    unasked: int  # attempts of its family left out of ``others``: they ask no question

    def check(self, attempt: Attempt, root: Path) -> GateReport:
        """Every gate check of ``attempt`` (the one this was read for), over what was read."""
        return check_gate(
            attempt,
            self.others,
            root,
            known_ids=self.known_ids,
            objective_chain=self.objective_chain,
            unasked=self.unasked,
        )


def gate_reading(index: RegistryReader, attempt: Shaped) -> GateReading:
    others = index.gate_candidates(attempt)
    varied = attempt.varied_from
    missing = varied is not None and (varied == attempt.id or all(a.id != varied for a in others))
    return GateReading(
        others, index.ids() if missing else None, objective_chain(index, attempt), _unasked(index, attempt, others)
    )


def _unasked(index: RegistryReader, attempt: Shaped, others: list[Summary]) -> int:
    """How many attempts of ``attempt``'s family that ask no question ``others`` leave out (as
    the freshness check would count them: each id as its last file in the ledger gives it)."""
    if attempt.family is None:
        return 0
    return index.unasked(attempt.family, {a.id for a in others} | {attempt.id})


def objective_chain(index: RegistryReader, attempt: Shaped) -> list[Summary]:
    """The chain of the streak of ``attempt``'s objective among every attempt but ``attempt``,
    oldest first, as ``views.streaks.streaks`` finds it (empty: no objective, or no chain)."""
    objective = attempt.objective
    if objective is None:
        return []
    kept = index.remembered(
        f"streak-tips {objective}", lambda: ranked_tips(index.links_of_objective(objective), objective)
    )
    tips = [Tip(i, depth, trailing, tuple(ledger)) for i, depth, trailing, ledger in kept]
    tip = _tip_without(index, attempt.id, objective, tips)
    if tip is _UNSURE:
        chains = streak_chains([a for a in index.links_of_objective(objective) if a.id != attempt.id], objective)
        ids = chains[0][1] if chains else []
    elif tip is None:
        ids = []
    else:
        ids = [a.id for a in ancestry(tip, _last_of_each(index.links_up(tip)))]
    found = {a.id: a for a in index.summaries_of(ids)}  # the last of an id in the ledger, as by_id
    return [found[i] for i in ids]


_UNSURE = "?"  # not a valid id: the tips cannot say, the objective's attempts are read


def _tip_without(index: RegistryReader, left_out: str, objective: str, tips: list[Tip]) -> str | None:
    """The tip of ``objective``'s streak once ``left_out`` is left out (None: no chain), or
    _UNSURE."""
    above = index.links_up(left_out)
    own = [a for a in above if a.id == left_out]
    if not own:
        return tips[0].id if tips else None  # not in the registry: nothing to leave out
    if len(own) > 1 or len({a.id for a in above}) < len(above) or index.varying(left_out) or _cycle(left_out, above):
        return _UNSURE
    by_id = _last_of_each(above)
    # A leaf leaves every other chain's depth and negatives as they were; only its parent may
    # become a tip, when the leaf was the one attempt of the objective varying it.
    rest = [t for t in tips if t.id != left_out][:1]
    parent = by_id.get(own[0].varied_from or "")
    if parent is not None and own[0].objective == objective and parent.objective == objective:
        siblings = sorted({a.id for a in index.varying(parent.id)} - {left_out})
        rows = index.links_of(siblings)
        if len(rows) != len(siblings):
            return _UNSURE  # a sibling also given by another file: its edge is the last file's
        if not any(a.objective == objective for a in rows):
            rest.append(Tip(parent.id, len(ancestry(parent.id, by_id)), trailing_count(parent, by_id), parent.ledger))
    return min(rest, key=Tip.rank).id if rest else None


def _last_of_each(links: list[Link]) -> dict[str, Link]:
    return {a.id: a for a in links}


def _cycle(start: str, links: list[Link]) -> bool:
    by_id = _last_of_each(links)
    seen: set[str] = set()
    node: str | None = start
    while node is not None and node in by_id:
        if node in seen:
            return True
        seen.add(node)
        node = by_id[node].varied_from
    return False
