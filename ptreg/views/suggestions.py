"""What to try next, read off the registry (`ptreg next` and the MCP tool `next_attempts`).

Each suggestion is one of a fixed list of kinds, and cites the records and runs it comes from;
nothing is suggested that a record or a run does not say. The order is fixed, kind by kind
(``KINDS``), then within a kind as ``suggest`` says; docs/agents.md describes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from ..errors import PtregError
from ..records.attempt import Attempt
from ..records.condition import answer_needed
from ..records.continuation import counted_once
from ..records.graph import children_of
from ..records.ledger import Summary, Vocabularies, in_ledger_order
from ..records.run_results import KERNELS, Attribution, Cell, RunResults, Share
from ..store.full_read import read_summarized
from ..store.runs import read_results, run_folder
from ..text import counted as plural
from .dispositions import decide_all
from .plans import decide_plan, deciding_refs
from .streaks import OK, Streak, streak_chains, streaks_of

if TYPE_CHECKING:
    from ..store.reader import RegistryReader

Kind = Literal["conclude", "run", "continue", "stopped", "deviation", "change-axis", "headroom", "open-next-action"]
# The order the kinds are listed in: evidence already paid for and waiting for a verdict first,
# then budget already granted, then what the numbers decide, then the verdicts a person gave
# against their plan, then where the registry says the habit is failing, then measured headroom,
# then the next actions nobody has taken up.
KINDS: tuple[Kind, ...] = (
    "conclude",
    "run",
    "continue",
    "stopped",
    "deviation",
    "change-axis",
    "headroom",
    "open-next-action",
)
KERNEL_WORDS = {
    "forward": ("forward",),
    "backward_da": ("backward_da", "backward da", "backward_dA", "backward dA"),
    "backward_db": ("backward_db", "backward db", "backward_dB", "backward dB"),
}


class Suggestion(BaseModel):
    """One thing to try next, why, and the records and runs that say so."""

    kind: Kind
    rank: int = Field(description="1 for the first suggestion, in the documented order.")
    action: str = Field(description="What to do, as a ptreg command where one does it.")
    reason: str = Field(description="Why, with the numbers it rests on.")
    attempts: list[str] = Field(description="The ids of the attempts it comes from.")
    runs: list[str] = Field(default_factory=list, description="The runs it reads, as ATTEMPT/RUN_ID under runs/.")
    numbers: dict[str, float] = Field(
        default_factory=dict, description="The values it rests on, by name; a value nobody measured is absent."
    )
    terms: list[str] = Field(
        default_factory=list, description="change-axis: the methods and bases never tried on the objective."
    )


class Suggestions(BaseModel):
    """Every suggestion, ranked, how many there were before a limit, and the runs that could
    not be read (nothing is suggested from them)."""

    suggestions: list[Suggestion]
    total: int = Field(description="How many suggestions there are in all.")
    unreadable: list[str] = Field(
        default_factory=list, description="Runs that could not be read, each naming its file and why."
    )

    def limited(self, limit: int) -> Suggestions:
        """The first ``limit`` suggestions (all of them for 0)."""
        return self.model_copy(update={"suggestions": self.suggestions[:limit] if limit else self.suggestions})


def suggestions_of(index: RegistryReader) -> Suggestions:
    """``suggest`` over the registry the query index (checked against the files) describes."""
    summaries = in_ledger_order(index.summaries())
    records = {a.id: read_summarized(index.root, a) for a in summaries}
    found = streaks_of(streak_chains(index.links()), {a.id: a for a in summaries})
    return suggest(index.root, summaries, records, found, index.vocabularies())


def suggest(
    root: Path,
    summaries: Sequence[Summary],
    records: Mapping[str, Attempt],
    streaks: Iterable[Streak[Summary]],
    vocabularies: Vocabularies,
) -> Suggestions:
    """Every suggestion the registry supports, ranked. ``summaries`` are every valid attempt in
    the ledger's order, ``records`` their whole records (runs, admissions and conditions
    are read off them), and ``streaks`` the streaks of ``views/streaks.py``."""
    children = children_of(summaries)
    unreadable: list[str] = []
    found: list[Suggestion] = []
    found += _unfinished(root, [records[a.id] for a in summaries if a.status == "not-tried" and a.id in records])
    with_condition = [records[a.id] for a in summaries if a.has_condition and a.id in records]
    found += _dispositions(root, with_condition, children, unreadable)
    found += _deviations([records[a.id] for a in summaries if a.deviates and a.id in records])
    found += _change_axis(streaks, summaries, vocabularies)
    found += _headroom(root, summaries, records, children, unreadable)
    found += _open_next_actions(summaries, children)
    ordered = sorted(found, key=lambda s: KINDS.index(s.kind))  # stable: each kind keeps its own order
    ranked = [s.model_copy(update={"rank": rank}) for rank, s in enumerate(ordered, start=1)]
    return Suggestions(suggestions=ranked, total=len(ranked), unreadable=list(dict.fromkeys(unreadable)))


def _unfinished(root: Path, attempts: list[Attempt]) -> list[Suggestion]:
    """Runs waiting for a verdict (with what the plan decides on them), then admitted attempts
    never run; each in the ledger's order."""
    conclude, run = [], []
    for a in attempts:
        counted = counted_once(a.runs or [])  # a run continued by another counts in that one
        runs = [f"{a.id}/{r.run_id}" for r in counted]
        if runs:
            # the runs by status, counted: their ids are in `runs`, once (a long history named
            # twice was most of a terminal)
            by_status = Counter(r.status for r in counted)
            statuses = ", ".join(f"{n} {status}" for status, n in by_status.items())
            outcome = decide_plan(root, a)
            if outcome is None:
                action = f"ptreg conclude {a.id} --status ... --lesson ... --next-action ..."
                said = "; it has no analysis plan, so its status is given by hand"
            else:
                action = f"ptreg conclude {a.id} --lesson ... --next-action ..."
                said = f"; its plan decides {outcome.status}: {outcome.because} ({outcome.runs_text()})"
            conclude.append(
                Suggestion(
                    kind="conclude",
                    rank=0,
                    action=action,
                    reason=f"{a.id} has {plural(len(runs), 'run')} ({statuses}) and no verdict yet{said}",
                    attempts=[a.id],
                    runs=runs,
                )
            )
        elif a.admission is not None:
            run.append(
                Suggestion(
                    kind="run",
                    rank=0,
                    action=f"ptreg run {a.id}",
                    reason=f"{a.id} was admitted at {a.admission.admitted_at} and has never been run"
                    + (f" (budget: {a.budget.describe()})" if a.budget is not None else ""),
                    attempts=[a.id],
                )
            )
        else:
            run.append(
                Suggestion(
                    kind="run",
                    rank=0,
                    action=f"ptreg gate {a.id}",
                    reason=f"{a.id} is not tried and has no recorded admission: check it against the gate first",
                    attempts=[a.id],
                )
            )
    return conclude + run


def _deviations(attempts: list[Attempt]) -> list[Suggestion]:
    """Verdicts a person gave against what their plan decided: read why before building on them."""
    found = []
    for a in attempts:
        decided = a.plan_decision
        if decided is None or a.deviation is None:
            continue
        found.append(
            Suggestion(
                kind="deviation",
                rank=0,
                action=f"ptreg show {a.id}",
                reason=f"{a.id} is recorded as {a.status}, but its plan decided {decided.status} ({decided.because}): "
                f"{a.deviation}",
                attempts=[a.id],
                runs=[f"{a.id}/{r}" for r in decided.runs],
            )
        )
    return found


def _dispositions(
    root: Path, attempts: list[Attempt], children: Mapping[str, list[str]], unreadable: list[str]
) -> list[Suggestion]:
    """Conditions that hold now (continue along the next action), then those that do not
    (stopped); each in the ledger's order. A condition that cannot be decided suggests nothing."""
    go, stop = [], []
    for d in decide_all(root, attempts):
        if d.unreadable and d.why is not None:
            unreadable.append(d.why)
        if d.decision is None or d.truth is None:
            continue
        a = d.attempt
        numbers = {r.quantity: r.value for r in d.decision.readings if r.value is not None}
        runs = [f"{a.id}/{d.decision.run_id}"] if d.decision.run_id else []
        varied_by = children.get(a.id, [])
        later = f"; varied since by {', '.join(varied_by)}" if varied_by else "; nothing varies it yet"
        if d.truth:
            answer = " --answers-disposition ..." if answer_needed(a.next_action, d.truth) else ""
            go.append(
                Suggestion(
                    kind="continue",
                    rank=0,
                    action=f"ptreg new --varied-from {a.id}{answer} (its next action: {a.next_action})",
                    reason=f"{a.id}'s condition {d.summary()}{later}",
                    attempts=[a.id, *varied_by],
                    runs=runs,
                    numbers=numbers,
                )
            )
        else:
            then = " (it held at conclusion)" if d.turned_false else ""
            stop.append(
                Suggestion(
                    kind="stopped",
                    rank=0,
                    action=f"do not vary {a.id} along its next action; the gate refuses it while the condition is false",
                    reason=f"{a.id}'s condition {d.summary()}{then}{later}",
                    attempts=[a.id, *varied_by],
                    runs=runs,
                    numbers=numbers,
                )
            )
    return go + stop


def _change_axis(
    streaks: Iterable[Streak[Summary]], summaries: Sequence[Summary], vocabularies: Vocabularies
) -> list[Suggestion]:
    """For each objective at CAUTION or STOP AND RETHINK (in the streaks' order), the methods of
    the vocabulary and the bases of the registry never used on it."""
    found = []
    for s in streaks:
        if s.level == OK:
            continue
        on_objective = [a for a in summaries if a.objective == s.objective]
        methods = {m for a in on_objective for m in a.methods or ()}
        bases = {b for a in on_objective for b in a.bases or ()}
        untried_methods = [m for m in vocabularies.method_vocabulary if m not in methods]
        every_base = sorted({b for a in summaries for b in a.bases or ()})
        untried_bases = [b for b in every_base if b not in bases]
        trailing = [a.id for a in s.trailing]
        offered = ", ".join(f"--method {m}" for m in untried_methods[:3]) or "a method new to the vocabulary"
        found.append(
            Suggestion(
                kind="change-axis",
                rank=0,
                action=f"ptreg precedents --objective {s.objective}, then ptreg new ... with {offered}",
                reason=(
                    f"{s.level}: objective {s.objective} ends in {s.negatives} negatives ({', '.join(trailing)}); "
                    f"never tried on it: methods {', '.join(untried_methods) or 'none'}; "
                    f"bases {', '.join(untried_bases) or 'none'}"
                ),
                attempts=trailing,
                numbers={"negatives": s.negatives, "depth": len(s.chain)},
                terms=[*untried_methods, *untried_bases],
            )
        )
    return found


def _headroom(
    root: Path,
    summaries: Sequence[Summary],
    records: Mapping[str, Attempt],
    children: Mapping[str, list[str]],
    unreadable: list[str],
) -> list[Suggestion]:
    """For each attempt's latest complete run that attributes a training step, the kernel with
    the largest recorded Amdahl bound in any cell (``largest_bound``); largest bound first, then by id."""
    by_id = {a.id: a for a in summaries}
    found: list[tuple[float, str, Suggestion]] = []
    for summary in summaries:
        attempt = records.get(summary.id)
        # the run its plan decides on (without a plan, the latest complete run): later runs are not read
        refs = deciding_refs(attempt)[0] if attempt is not None else []
        ref = refs[-1] if refs else None
        if attempt is None or ref is None:
            continue
        try:
            results = read_results(run_folder(root, attempt.id, ref.run_id), root)
        except PtregError as exc:
            unreadable.append(f"run {ref.run_id} of {attempt.id} cannot be read: {exc.message}")
            continue
        largest = largest_bound(results)
        if largest is None:
            continue
        cell, kernel, bound = largest
        assert cell.attribution is not None
        part = _share_of(cell.attribution, kernel)
        other = cell.attribution.other.share
        targeting = _targeting(attempt.id, kernel, by_id, children)
        where = f"{cell.backend}/{cell.config}"
        rest = (
            f"; the rest of the step takes {other:.0%} there, more than any kernel or op (no bound is recorded for it)"
            if other > max(_share_of(cell.attribution, k).share for k in _parts(cell.attribution))
            else ""
        )
        already = (
            f"; attempts that vary it and name that kernel: {', '.join(targeting)}"
            if targeting
            else "; no attempt that varies it names that kernel"
        )
        found.append(
            (
                bound,
                attempt.id,
                Suggestion(
                    kind="headroom",
                    rank=0,
                    action=f"speed up {kernel} on {where}: ptreg new --varied-from {attempt.id} ...",
                    reason=(
                        f"in {attempt.id}'s run {ref.run_id}, {kernel} takes {part.share:.0%} of {where}'s "
                        f"{cell.attribution.step_ms:.4g} ms step: removing it would give at most {bound:.3g}x"
                        f"{rest}{already}"
                    ),
                    attempts=[attempt.id, *targeting],
                    runs=[f"{attempt.id}/{ref.run_id}"],
                    numbers={"amdahl_bound": bound, "share": part.share, "other_share": other},
                ),
            )
        )
    found.sort(key=lambda t: (-t[0], t[1]))
    return [s for _, _, s in found]


def largest_bound(results: RunResults) -> tuple[Cell, str, float] | None:
    """The (cell, kernel, bound) with the largest recorded Amdahl bound of the run, the
    reference backend left out when it has peers (every ratio is taken against it, as `show`
    leaves it out of its verdict); a tie goes to the earlier config, backend and kernel in the
    run's own order."""
    reference = results.ratio_roles.reference
    several = len(results.spec.arm_names) > 1
    best: tuple[Cell, str, float] | None = None
    for cell in results.cells:
        if cell.attribution is None or (several and cell.backend == reference):
            continue
        for kernel in _parts(cell.attribution):
            bound = _share_of(cell.attribution, kernel).amdahl_bound
            if bound is not None and (best is None or bound > best[2]):
                best = (cell, kernel, bound)
    return best


def _parts(attribution: Attribution) -> list[str]:
    """The kernels, and the ops when the run timed them apart (results version 6)."""
    return [*KERNELS, *(attribution.ops or {})]


def _share_of(attribution: Attribution, part: str) -> Share:
    if part in KERNELS:
        found: Share = getattr(attribution, part)
        return found
    return next(share for op, share in (attribution.ops or {}).items() if op == part)


def _targeting(
    attempt_id: str, kernel: str, by_id: Mapping[str, Summary], children: Mapping[str, list[str]]
) -> list[str]:
    """The attempts descending from ``attempt_id`` whose question or varied text names ``kernel``."""
    found, stack = [], list(children.get(attempt_id, []))
    seen = {attempt_id}
    while stack:
        node = stack.pop(0)
        if node in seen or node not in by_id:
            continue
        seen.add(node)
        a = by_id[node]
        text = f"{a.question or ''} {a.varied or ''}".lower()
        if any(word.lower() in text for word in KERNEL_WORDS.get(kernel, (kernel,))):
            found.append(node)
        stack.extend(children.get(node, []))
    return found


def _open_next_actions(summaries: Sequence[Summary], children: Mapping[str, list[str]]) -> list[Suggestion]:
    """Concluded attempts whose next action has no condition and that nothing varies: the
    hypotheses still waiting to be tested, newest first."""
    found = []
    for a in reversed(summaries):
        if a.status == "not-tried" or not a.next_action or a.has_condition or children.get(a.id):
            continue
        found.append(
            Suggestion(
                kind="open-next-action",
                rank=0,
                action=f"take up its next action: ptreg new --varied-from {a.id} ...",
                reason=f"{a.id} ({a.status}) left a next action that no attempt varies it to take up: {a.next_action}",
                attempts=[a.id],
            )
        )
    return found
