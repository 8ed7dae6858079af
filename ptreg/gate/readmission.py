"""Admissions decided again, in admission order, after clones of a registry merge.

Each clone's gate admits a proposal against what that clone holds; two clones can each admit
the same question, or scope two lineages with one tracking issue, and neither could see it.
Here every admitted attempt is judged again by the gate's own checks (``checks.py``: one home
for each rule) against the attempts admitted before it: ordered by ``admitted_at``, then by id
for a tie, so that the answer does not depend on the order files were merged or listed in.

What counts as "before" an admission:
- every attempt admitted earlier that is not withdrawn;
- every record with no admission (imported, or written before the gate): it has no place in
  the order, and the gate compares with it as with anything it finds;
- the attempts it varies, up its lineage, whatever their time: it could only vary what its
  clone held.
A withdrawn attempt leaves the comparisons of questions, tracking issues and evaluators, but
its status stays in its objective's streak: its evidence is still evidence.

A conflict is found, never stored: a resolution (``Attempt.readmissions``, written by
`ptreg readmit`) changes the record so that the conflict no longer arises, or withdraws it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..records.attempt import Attempt
from ..records.graph import ancestry
from ..records.ledger import NEGATIVE_STATUSES, STOP_AT, Shaped
from ..records.run_results import RunResults
from ..store.directory import load_directory
from ..store.evaluator_files import evaluator_files
from ..store.full_read import read_summarized
from ..views.streaks import streak_chains
from .checks import CheckResult, GateInputs, fresh_question, scoped_tracking_issue, streak

if TYPE_CHECKING:
    from ..store.reader import RegistryReader

QUESTION = "readmission-question"
TRACKING_ISSUE = "readmission-tracking-issue"
STREAK = "readmission-streak"
EVALUATOR = "readmission-evaluator"
ADMITTED_AT = "readmission-admitted-at"  # integrity: an admission with no usable time has no place


@dataclass(frozen=True)
class Conflict:
    """One admission that no longer holds against the attempts admitted before it."""

    rule: str
    attempt_id: str
    earlier: tuple[str, ...]  # the attempts admitted before it that it conflicts with
    detail: str
    remedy: str
    admitted_at: str | None = None
    earlier_admitted_at: Mapping[str, str | None] = field(default_factory=dict)

    def message(self) -> str:
        """One line: both attempts, which came first, what clashes and the remedy."""
        if not self.earlier:
            return f"{self.detail}; remedy: {self.remedy}"
        first = ", ".join(f"{i} ({_when(self.earlier_admitted_at.get(i))})" for i in self.earlier)
        them = "it" if len(self.earlier) == 1 else "them"
        return f"admitted {self.admitted_at}, after {first}, and conflicts with {them}: {self.detail}; remedy: {self.remedy}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "id": self.attempt_id,
            "admitted_at": self.admitted_at,
            "earlier": [{"id": i, "admitted_at": self.earlier_admitted_at.get(i)} for i in self.earlier],
            "detail": self.detail,
            "remedy": self.remedy,
        }


def _when(admitted_at: str | None) -> str:
    return f"admitted {admitted_at}" if admitted_at is not None else "no admission: known before every admission"


@dataclass(frozen=True)
class Readmissions:
    """Every admission decided again: the admission order and the conflicts, in that order."""

    order: tuple[str, ...]  # admitted attempts, first admitted first (withdrawn ones included)
    conflicts: tuple[Conflict, ...]
    withdrawn: tuple[str, ...]

    def of(self, attempt_id: str) -> list[Conflict]:
        return [c for c in self.conflicts if c.attempt_id == attempt_id]

    def admitted_after(self, attempt_id: str) -> set[str]:
        """The attempts admitted after ``attempt_id`` (none when it has no place in the order):
        its own admission is judged without them."""
        if attempt_id not in self.order:
            return set()
        return set(self.order[self.order.index(attempt_id) + 1 :])

    def to_json(self) -> dict[str, Any]:
        return {
            "order": list(self.order),
            "withdrawn": list(self.withdrawn),
            "conflicts": [c.to_json() for c in self.conflicts],
        }


def admission_time(attempt: Attempt) -> datetime | str | None:
    """When ``attempt`` was admitted (a time with its zone), None when it has no admission, or
    why its recorded time cannot be used."""
    if attempt.admission is None:
        return None
    text = attempt.admission.admitted_at
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return f"admission.admitted_at {text[:40]!r} is not an ISO 8601 time"
    if moment.tzinfo is None:
        return f"admission.admitted_at {text[:40]!r} names no time zone (ptreg writes UTC, with a Z)"
    return moment


def readmit_all(attempts: Iterable[Attempt], only: str | None = None) -> Readmissions:
    """Every admission of ``attempts`` decided again against those admitted before it (or only
    that of ``only``, whose conflicts alone are then given). Where an id is given by two files
    the last one counts, as everywhere (``Registry.by_id``)."""
    by_id = {a.id: a for a in attempts}
    timed: list[tuple[datetime, str]] = []
    conflicts: list[Conflict] = []
    for attempt in by_id.values():
        when = admission_time(attempt)
        if isinstance(when, str):
            if only is None or attempt.id == only:
                conflicts.append(
                    Conflict(
                        ADMITTED_AT,
                        attempt.id,
                        (),
                        f"{when}, so its admission cannot be placed in the admission order",
                        "restore the record's admission from version control (the time ptreg wrote)",
                    )
                )
        elif when is not None:
            timed.append((when, attempt.id))
    order = _lineage_first([i for _, i in sorted(timed)], by_id)
    withdrawn = tuple(i for i in order if by_id[i].withdrawn is not None)
    # context: the records with no admission (and none that could not be placed)
    before: dict[str, Attempt] = {i: a for i, a in by_id.items() if a.admission is None}
    stopping = _stopping(by_id)
    streaking = {a.objective for a in before.values() if a.id in stopping}
    for attempt_id in order:
        attempt = by_id[attempt_id]
        if attempt.withdrawn is None and (only is None or attempt_id == only):
            # its own lineage counts as known whatever its time (``decide``), so its runs too
            lineage = ancestry(attempt.varied_from, by_id) if attempt.varied_from else []
            possible = attempt.objective in streaking or any(a.id in stopping for a in lineage)
            conflicts.extend(decide(attempt, before, by_id, possible))
        if attempt_id == only:
            break
        before[attempt_id] = attempt
        if attempt_id in stopping:
            streaking.add(attempt.objective)
    place = {i: n for n, i in enumerate(order)}
    conflicts.sort(key=lambda c: (place.get(c.attempt_id, -1), c.attempt_id, c.rule))
    return Readmissions(order, tuple(conflicts), withdrawn)


def _lineage_first(by_time: list[str], by_id: Mapping[str, Attempt]) -> tuple[str, ...]:
    """``by_time`` with each attempt moved after the attempts it varies: a gate admits a
    variation only once its parent is known, so two clocks that disagree (or one second shared
    by both) never put a child before its parent."""
    placed: list[str] = []
    seen: set[str] = set()
    timed = set(by_time)
    for attempt_id in by_time:
        for one in (a.id for a in ancestry(attempt_id, by_id)):  # oldest first
            if one in timed and one not in seen:
                seen.add(one)
                placed.append(one)
    return tuple(placed)


def decide(
    attempt: Attempt, before: Mapping[str, Attempt], every: Mapping[str, Attempt], streaking: bool = True
) -> list[Conflict]:
    """The conflicts of ``attempt`` with ``before``, the attempts admitted before it (and the
    records with no admission); ``every`` holds the registry, for the attempts it varies.
    ``streaking``: False when no chain of its objective can end in enough negatives to stop it."""
    lineage = {a.id: a for a in ancestry(attempt.varied_from, every)} if attempt.varied_from else {}
    known = {**before, **{i: a for i, a in lineage.items() if i != attempt.id}}
    standing = {i: a for i, a in known.items() if a.withdrawn is None}
    everyone: dict[str, Shaped] = {**standing, attempt.id: attempt}
    found: list[Conflict] = []

    def conflict(rule: str, result: CheckResult, remedy: str) -> None:
        if result.failed and result.others:
            found.append(_conflict(rule, attempt, result, remedy, every))

    question = fresh_question(attempt, standing, everyone)
    first = question.others[0] if question.others else "the earlier attempt"
    conflict(
        QUESTION,
        question,
        f"vary the earlier one and ask what it leaves open (`ptreg readmit {attempt.id} --varies {first} "
        f'--varied "..." --question "..."`), or withdraw {attempt.id} '
        f'(`ptreg readmit {attempt.id} --withdraw "..."`)',
    )
    issue = scoped_tracking_issue(attempt, standing, everyone)
    first = issue.others[0] if issue.others else "the earlier attempt"
    conflict(
        TRACKING_ISSUE,
        issue,
        f"take a new tracking issue (`ptreg readmit {attempt.id} --tracking-issue NEW`), or vary {first} "
        f'(`ptreg readmit {attempt.id} --varies {first} --varied "..."`), or withdraw {attempt.id}',
    )
    if attempt.objective is not None and streaking:
        chains = streak_chains(list(known.values()), attempt.objective)
        chain = [known[i] for i in chains[0][1]] if chains else []
        conflict(
            STREAK,
            streak(attempt, known, chain),
            f'give the reason to go on (`ptreg readmit {attempt.id} --override-streak "..."`, it is stored), '
            f"or withdraw {attempt.id}",
        )
    found.extend(_evaluator(attempt, standing, every))
    return found


def _evaluator(attempt: Attempt, standing: Mapping[str, Attempt], every: Mapping[str, Attempt]) -> list[Conflict]:
    """One evaluator name, two identities: the later attempt measures by a different spec (or
    code version, or inputs) under the name the earlier one made known for its measure."""
    ref = attempt.evaluator
    if ref is None:
        return []
    name, _, _ = ref.partition("@")
    # ``standing`` holds the records without an admission first, then the admitted in admission order
    clash = [
        a
        for a in standing.values()
        if a.evaluator is not None and a.evaluator != ref and a.evaluator.partition("@")[0] == name
    ]
    if not clash:
        return []
    earlier = clash[0]
    result = CheckResult(
        "frozen-evaluator",
        "failed",
        f"evaluator {name} is frozen twice with different specs: {attempt.id} is measured by {ref}, "
        f"{earlier.id} by {earlier.evaluator}",
        others=tuple(a.id for a in clash),
    )
    remedy = (
        f"freeze {attempt.id}'s spec under a name of its own and name it (`ptreg readmit {attempt.id} "
        f"--evaluator NEW@HASH`), or withdraw {attempt.id}"
    )
    return [_conflict(EVALUATOR, attempt, result, remedy, every)]


def _stopping(by_id: Mapping[str, Attempt]) -> set[str]:
    """The attempts that end a run of at least ``STOP_AT`` negatives of one objective up their
    lineage. A streak ends in such a run, so where none is known before an admission, the
    streak check cannot refuse it and its chains need not be found (each is a sort of every
    attempt known: most of the time of a large registry)."""
    found = set()
    for attempt in by_id.values():
        node: Attempt | None = attempt
        run = 0
        while node is not None and run < STOP_AT:
            if node.objective != attempt.objective or node.status not in NEGATIVE_STATUSES:
                break
            run += 1
            node = by_id.get(node.varied_from) if node.varied_from is not None else None
        if run >= STOP_AT:
            found.add(attempt.id)
    return found


def _conflict(rule: str, attempt: Attempt, result: CheckResult, remedy: str, every: Mapping[str, Attempt]) -> Conflict:
    earlier = tuple(result.others)
    times = {i: _admitted_at(every.get(i)) for i in earlier}
    return Conflict(rule, attempt.id, earlier, result.detail, remedy, _admitted_at(attempt), times)


def _admitted_at(attempt: Attempt | None) -> str | None:
    return attempt.admission.admitted_at if attempt is not None and attempt.admission is not None else None


def measured_something(results: RunResults) -> str | None:
    """What ``results`` measured, in words, or None when it measured nothing: an attempt's
    evaluator may be amended only while every run of it is None here (a harness that failed
    before any outcome). A complete run measured; so did any cell with one good sample (a
    repeat with values and no problem, a timed step or kernel call), whatever the run's status:
    that number was seen, and a new evaluator chosen after it would be chosen knowing it."""
    if results.status == "complete":
        return "it is complete"
    for cell in results.cells:
        good = [s for s in cell.metric_samples or () if s.problem is None and s.values]
        if good or cell.step_samples or cell.kernel_samples:
            return f"its cell {cell.backend}/{cell.config} holds a measured sample"
    return None


def unresolved(readmissions: Readmissions, attempt: Attempt) -> str | None:
    """Why ``attempt`` may take no next step (`run`, `conclude`): withdrawn, or a conflict of
    its admission with one before it (one line naming it and the remedy); None when neither."""
    gone = attempt.withdrawn
    if gone is not None:
        return f"{attempt.id} was withdrawn at {gone.readmitted_at} ({gone.reason}); it is not run or concluded again"
    conflicts: Sequence[Conflict] = readmissions.of(attempt.id)
    if not conflicts:
        return None
    more = f" (and {len(conflicts) - 1} more: `ptreg gate --all`)" if len(conflicts) > 1 else ""
    return f"{attempt.id}: unresolved conflict [{conflicts[0].rule}]: {conflicts[0].message()}{more}"


def read_readmissions(root: Path, only: str | None = None) -> Readmissions:
    """Every admission of the registry at ``root`` decided again, or only that of ``only`` (a
    full read of its records)."""
    return readmit_all(load_directory(root).attempts, only=only)


def readmissions_around(index: RegistryReader, root: Path, attempt: Attempt, inputs: GateInputs) -> Readmissions:
    """``attempt``'s own admission decided again, reading only what the gate's checks of it read
    (``inputs``: its lineage, tracking issue and family's questions, its objective's chain), as
    `ptreg gate ID` does to stay quick on a large registry. Where its evaluator's name has more
    than one frozen spec, every record is read, since any attempt may name the other.
    `validate`, `gate --all`, `run` and `conclude` decide over every record
    (``read_readmissions``); a streak that only a chain outside those read would stop is left
    to them."""
    if attempt.admission is None:
        return Readmissions((), (), ())  # no place in the order: nothing to decide, nothing after it
    name = (attempt.evaluator or "").partition("@")[0]
    if name and len([p for p in evaluator_files(root) if p.name.startswith(f"{name}@")]) > 1:
        return read_readmissions(root, only=attempt.id)
    ids = sorted({a.id for a in inputs.others} | {a.id for a in inputs.objective_chain} - {attempt.id})
    return readmit_all([*(read_summarized(root, s) for s in index.summaries_of(ids)), attempt], only=attempt.id)


def judged_before(inputs: GateInputs, readmissions: Readmissions, attempt_id: str) -> GateInputs:
    """``inputs`` without the attempts admitted after ``attempt_id``: an admission is judged
    against what came before it, so a later clash is the later attempt's to resolve."""
    later = readmissions.admitted_after(attempt_id)
    if not later:
        return inputs
    return replace(inputs, others=[a for a in inputs.others if a.id not in later])
