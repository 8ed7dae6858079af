"""What the gate's checks of one attempt read, and no more (``checks.GateInputs``): from the
registry reader, the attempts of its lineage and tracking issue and those of its family that ask a
question (``gate_candidates``), how many of its family ask none, and the chain of its objective's
streak, found from the streaks' tips that the index keeps for the whole registry; from the files,
its frozen evaluator and the condition of the attempt it varies, decided on that one's runs.
`new`, `gate` and `run` all read them here.

The streak check compares the proposal with every other attempt: the registry without the
proposal. The index keeps, per objective, the two best tips of the registry as it is
(``views.streaks.ranked_tips``); leaving the proposal out changes them only where it was one of
them, or where its parent becomes a tip in its place, and both are decided from the proposal's
own chain. Where that reasoning does not hold (the proposal is varied by another attempt, an id
is given by two files, a chain runs in a cycle), the streak is found again from the attempts of
the objective and their ancestors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..records.attempt import Attempt
from ..records.graph import ancestry
from ..records.ledger import Link, Shaped, Summary
from ..store.evaluator_files import evaluators_dir
from ..store.full_read import read_summarized
from ..views.dispositions import Disposition, decide_disposition
from ..views.streaks import Tip, ranked_tips, streak_chains, trailing_count
from .checks import EvaluatorFile, GateInputs
from .verification import verify_evaluator

if TYPE_CHECKING:
    from ..store.reader import RegistryReader


def read_gate_inputs(
    index: RegistryReader,
    proposal: Attempt,
    root: Path,
    *,
    budget_error: str | None = None,
    tracking_error: str | None = None,
) -> GateInputs:
    """What the checks of ``proposal`` read, from ``index`` and the files of ``root``.
    ``budget_error`` and ``tracking_error``: why a value given for a proposal being made could
    not be stored (``proposal.build_attempt``)."""
    others = index.gate_candidates(proposal)
    varied = proposal.varied_from
    missing = varied is not None and (varied == proposal.id or all(a.id != varied for a in others))
    return GateInputs(
        others=others,
        objective_chain=objective_chain(index, proposal),
        evaluator=evaluator_file(proposal, root),
        disposition=decided_disposition(proposal, others, root),
        known_ids=index.ids() if missing else None,
        budget_error=budget_error,
        tracking_error=tracking_error,
    )


def evaluator_file(proposal: Attempt, root: Path) -> EvaluatorFile | None:
    """The proposal's frozen evaluator file, verified as every command verifies one
    (``verification.py``)."""
    if proposal.evaluator is None:
        return None
    return verify_evaluator(root, evaluators_dir(root) / f"{proposal.evaluator}.json")


def decided_disposition(proposal: Attempt, others: Sequence[Summary], root: Path) -> Disposition | None:
    """The condition of the attempt ``proposal`` varies, decided on its latest complete run; None
    when it varies none, or that one has no condition. The summary holds no condition or runs:
    that attempt's own file is read for them."""
    if proposal.varied_from is None:
        return None
    parent = {a.id: a for a in others if a.id != proposal.id}.get(proposal.varied_from)
    if parent is None or parent.next_action is None or not parent.has_condition:
        return None
    return decide_disposition(root, read_summarized(root, parent))


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
