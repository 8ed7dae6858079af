"""The rerun gate: a proposal runs only with a fresh question, a frozen evaluator, an explicit
budget and a scoped tracking issue, having answered the disposition it varies and heeded
its objective's streak. Checked by `ptreg new`, by `ptreg gate ID` and again before a run.

Each check returns what it found and, when it fails, how to satisfy it. Unknown stays
unknown: an attempt without a recorded question is not compared on questions at all.

The checks read no file: ``check_gate`` is the one way in, over ``GateInputs`` that
``reading.read_gate_inputs`` reads beforehand, the same way for `new`, `gate` and `run`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ..engine.plan import EVALUATOR_VERSION
from ..engine.workloads.discovery import spec_problem, workload_named
from ..records import tracking
from ..records.analysis_plan import margin_problems, margins_text, plan_digest, rule_problems
from ..records.arguments import invoked, named
from ..records.attempt import INFRASTRUCTURE_KIND, Attempt
from ..records.condition import answer_needed
from ..records.evaluator import FrozenEvaluator
from ..records.graph import ancestry, lineage_root, lineage_roots
from ..records.ledger import CAUTION_AT, STOP_AT, Shaped, trailing_negatives
from ..records.ledger import question_tokens as question_tokens
from ..text import counted

SIMILAR_QUESTION = 0.8  # token Jaccard at or above which two questions are the same question
Outcome = Literal["passed", "caution", "overridden", "failed"]
PASSED: Outcome = "passed"
CAUTION: Outcome = "caution"
OVERRIDDEN: Outcome = "overridden"
FAILED: Outcome = "failed"


@dataclass(frozen=True)
class CheckResult:
    check: str
    outcome: Outcome
    detail: str  # what the check found
    remedy: str | None = None  # how to satisfy it, when it failed
    # the other attempts the finding rests on (the alike question, the lineage the issue
    # scopes, the trailing negatives), so that readmission can name them without parsing text
    others: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "outcome": self.outcome, "detail": self.detail, "remedy": self.remedy}


@dataclass(frozen=True)
class GateReport:
    attempt_id: str
    checks: list[CheckResult]
    evaluator: FrozenEvaluator | None = None  # as read and verified by the frozen-evaluator check

    @property
    def admitted(self) -> bool:
        return not any(c.failed for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.failed]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.attempt_id, "admitted": self.admitted, "checks": [c.to_json() for c in self.checks]}


class DecidedCondition(Protocol):
    """The varied attempt's continue-if condition, decided on its latest complete run as the
    registry holds it now (``views.dispositions.Disposition``)."""

    @property
    def truth(self) -> bool | None: ...

    def summary(self) -> str: ...


@dataclass(frozen=True)
class EvaluatorFile:
    """The proposal's frozen evaluator file, as the registry holds it now."""

    path: Path
    frozen: FrozenEvaluator | None  # None: the file is missing, or does not verify
    mismatch: str | None = None  # why it does not verify (None: it does, or it is missing)
    changed_inputs: str | None = None  # an input it reads that no longer matches its digest
    changed_code: str | None = None  # a project file its command runs that no longer matches its digest
    consent: str | None = None  # what consent to it covers; None: it runs no command

    @property
    def problem(self) -> str | None:
        """Why it does not verify, in the words every command uses; None: it verifies."""
        if self.frozen is None:
            return self.mismatch or f"{self.path.name} is missing: not frozen in this registry"
        if self.changed_inputs is not None:
            return self.changed_inputs
        if self.changed_code is not None:
            return f"a file its command runs changed since it was frozen: {self.changed_code}"
        return None

    @property
    def verifies(self) -> bool:
        return self.problem is None

    @property
    def said(self) -> str:
        """'verifies', or 'no longer verifies: WHY'."""
        problem = self.problem
        return "verifies" if problem is None else f"no longer verifies: {problem}"


@dataclass(frozen=True)
class GateInputs:
    """All that the checks of one proposal read, read beforehand (``reading.read_gate_inputs``)."""

    # the other attempts of the registry, or at least those the checks read (``gate_candidates``)
    others: Sequence[Shaped]
    objective_chain: Sequence[Shaped]  # the chain of the streak of its objective, without it
    evaluator: EvaluatorFile | None  # None: the proposal names no evaluator
    disposition: DecidedCondition | None  # the varied attempt's condition, decided; None: none
    known_ids: Collection[str] | None = None  # every id, when ``others`` may lack the one varied
    # why a value given for the proposal could not even be stored (e.g. a zero budget), so that
    # the check names the real reason; only a proposal being made has one
    budget_error: str | None = None
    tracking_error: str | None = None


def check_gate(proposal: Attempt, inputs: GateInputs) -> GateReport:
    """Every gate check of ``proposal`` over what was read of the registry for it."""
    by_id: dict[str, Shaped] = {a.id: a for a in inputs.others if a.id != proposal.id}
    everyone: dict[str, Shaped] = {**by_id, proposal.id: proposal}
    evaluator_check, frozen = frozen_evaluator(proposal, inputs.evaluator)
    checks = [
        fresh_question(proposal, by_id, everyone, inputs.known_ids),
        evaluator_check,
        analysis_plan(proposal, frozen),
        explicit_budget(proposal, frozen, inputs.budget_error),
        scoped_tracking_issue(proposal, by_id, everyone, inputs.tracking_error),
        disposition_respected(proposal, by_id, inputs.disposition),
        streak(proposal, by_id, inputs.objective_chain),
    ]
    return GateReport(proposal.id, checks, frozen)


# --------------------------------------------------------------------------- fresh question


def similarity(a: str, b: str) -> float:
    """1.0 for the same question after normalising; else the Jaccard index of the token sets."""
    (ta, sa), (tb, sb) = _tokens(a), _tokens(b)
    if ta == tb:
        return 1.0
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


@functools.lru_cache(maxsize=8192)
def _tokens(question: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """A question's tokens, kept: re-deciding every admission compares each question with every
    earlier one, and normalising the same text again was most of its time."""
    tokens = tuple(question_tokens(question))
    return tokens, frozenset(tokens)


def closest(attempt_id: str, ids: Iterable[str]) -> str:
    """' (did you mean: a, b?)' for the ids nearest a mistyped one; empty when none is near."""
    close = difflib.get_close_matches(attempt_id, sorted(set(ids)), n=3, cutoff=0.5)
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def fresh_question(
    proposal: Attempt,
    by_id: Mapping[str, Shaped],
    everyone: Mapping[str, Shaped],
    known_ids: Collection[str] | None = None,
) -> CheckResult:
    name = "fresh-question"
    if proposal.varied_from is not None and proposal.varied_from not in by_id:
        return CheckResult(
            name,
            FAILED,
            f"varied_from {proposal.varied_from!r} names no attempt in the registry"
            f"{closest(proposal.varied_from, by_id if known_ids is None else (i for i in known_ids if i != proposal.id))}",
            f"vary an attempt that exists ({invoked('list')}), or drop {named('varied_from')}",
        )
    if proposal.varied_from is not None and not (proposal.varied or "").strip():
        return CheckResult(
            name,
            FAILED,
            f"the proposal varies {proposal.varied_from} but does not say what is varied",
            f'say what changes with {named("varied")} "..."',
        )
    if proposal.question is None or not question_tokens(proposal.question):
        return CheckResult(
            name,
            FAILED,
            "the proposal asks no question",
            f'state the question this run answers with {named("question")} "..."',
        )
    roots = lineage_roots(everyone)
    root = roots[proposal.id]
    compared, implied = 0, 0
    for other in by_id.values():
        same_lineage = roots[other.id] == root
        same_family = proposal.family is not None and other.family == proposal.family
        if not (same_lineage or same_family):
            continue
        compared += 1
        implied += other.question is None
        alike = alike_question(proposal.question, other)
        if alike is not None:
            score, said = alike
            scope = "lineage" if same_lineage else f"family {proposal.family}"
            how = "the same question" if score == 1.0 else f"a near-duplicate (similarity {score:.2f})"
            return CheckResult(
                name,
                FAILED,
                f"{how} as {other.id} ({scope}, status {other.status}) {said}",
                f"read {other.id} ({invoked('show', attempt_id=other.id)}); ask what its result leaves open, or vary it with "
                f"{named('varied_from')} {other.id}",
                (other.id,),
            )
    detail = f"no alike question among {compared} in its lineage and family"
    if implied:
        verb = "records" if implied == 1 else "record"
        detail += f" ({counted(implied, 'attempt')} there {verb} no question: compared by name, hypothesis and lesson)"
    return CheckResult(name, PASSED, detail)


def asked_by(other: Shaped) -> list[tuple[str, str]]:
    """What an attempt asked, as (field, text): its question; where it records none (an imported
    record, or one written before the gate), its name, hypothesis and lesson, each of which says
    what was asked in other words."""
    if other.question is not None:
        return [("question", other.question)]
    found = [(field, getattr(other, field, None)) for field in ("name", "hypothesis", "lesson")]
    return [(field, text) for field, text in found if isinstance(text, str) and question_tokens(text)]


def alike_question(question: str, other: Shaped) -> tuple[float, str] | None:
    """The similarity of ``question`` to what ``other`` asked, and what it asked in words, when
    they are the same question or a near-duplicate; None otherwise."""
    best: tuple[float, str] | None = None
    for field, text in asked_by(other):
        score = similarity(question, text)
        if score >= SIMILAR_QUESTION and (best is None or score > best[0]):
            said = f"asked: {text!r}" if field == "question" else f"asks no question, and its {field} says: {text!r}"
            best = (score, said)
    return best


# --------------------------------------------------------------------------- frozen evaluator


def frozen_evaluator(proposal: Attempt, file: EvaluatorFile | None) -> tuple[CheckResult, FrozenEvaluator | None]:
    """The check, and the evaluator when it passes (the budget is weighed against its spec,
    and a run measures what was read here)."""
    name = "frozen-evaluator"
    freeze_hint = (
        f"freeze the spec with `ptreg evaluator freeze SPEC.json` and name it with {named('evaluator')} NAME@HASH"
    )
    if proposal.evaluator is None or file is None:
        return CheckResult(name, FAILED, "no evaluator is named", freeze_hint), None
    path, frozen, mismatch = file.path, file.frozen, file.mismatch
    if frozen is None and mismatch is None:
        return CheckResult(
            name,
            FAILED,
            f"evaluator {proposal.evaluator} is not frozen in this registry ({path} is missing)",
            freeze_hint,
        ), None
    if frozen is None:
        return CheckResult(
            name,
            FAILED,
            f"{path} {file.said}",
            "a frozen evaluator is never edited: restore the file from version control, or freeze the changed spec "
            "as a new evaluator and propose again with it",
        ), None
    if frozen.evaluator_version != EVALUATOR_VERSION:
        return CheckResult(
            name,
            FAILED,
            f"{proposal.evaluator} was frozen for evaluator code version {frozen.evaluator_version}; this ptreg interprets version {EVALUATOR_VERSION}",
            "freeze the spec again under this version, under a name of its own (`ptreg evaluator freeze SPEC.json`), "
            "and propose with the new reference",
        ), None
    spec = frozen.spec
    problem = spec_problem(spec)
    if problem is not None:
        return CheckResult(
            name, FAILED, f"{proposal.evaluator} cannot be measured here: {problem}", "see `ptreg workloads`"
        ), None
    if file.changed_inputs is not None:
        return CheckResult(
            name,
            FAILED,
            f"{proposal.evaluator} {file.said}",
            "restore the input from version control, or freeze the evaluator over the new inputs under a name of "
            "its own and propose with it",
        ), None
    if file.changed_code is not None:  # not what was frozen, nor what was consented to
        return CheckResult(
            name,
            FAILED,
            f"{proposal.evaluator} {file.said}",
            "restore the file (or remove the one added), or freeze the evaluator over it under a name of its own "
            "(consent anew) and propose with it",
        ), None
    note = f"; {file.consent}" if file.consent else ""
    return CheckResult(
        name,
        PASSED,
        f"{proposal.evaluator} verifies ({spec.measures()}){note}",
    ), frozen


# --------------------------------------------------------------------------- analysis plan


def plan_arguments() -> str:
    """How a plan is given, in the caller's names."""
    return (
        f"{named('worked_if')} COND (and {named('regressed_if')} COND, {named('margins')} METRIC=VALUE, "
        f"{named('decide_on_runs')} N as needed)"
    )


def analysis_plan(proposal: Attempt, frozen: FrozenEvaluator | None) -> CheckResult:
    """The plan says which numbers decide the status, and names only what the frozen evaluator
    measures; once admitted, it is the plan that was admitted."""
    name = "analysis-plan"
    plan, admission = proposal.plan, proposal.admission
    if plan is None:
        if admission is not None and admission.plan_sha256 is None:
            return CheckResult(
                name, PASSED, "admitted before analysis plans: no plan; its status is chosen at conclusion"
            )
        return CheckResult(
            name,
            FAILED,
            "the proposal registers no analysis plan: nothing says which numbers make it worked, failed or regressed",
            f"state the decision before the numbers: {plan_arguments()}",
        )
    if admission is not None and admission.plan_sha256 != plan_digest(plan):
        return CheckResult(
            name,
            FAILED,
            "the analysis plan is not the one admitted (edited after admission)",
            "restore the plan from version control; a new plan is a new proposal",
        )
    if frozen is None:  # the frozen-evaluator check refuses the proposal already: one cause, one failure
        return CheckResult(name, CAUTION, "not checked: the plan is checked against a frozen evaluator that verifies")
    spec = frozen.spec
    workload_metrics = workload_named(spec.workload).metrics if spec_problem(spec) is None else {}
    margins = plan.margins or {}
    problems = margin_problems(margins, spec, workload_metrics)
    for _, rule in plan.rules():
        problems += rule_problems(rule.tree, spec, margins, workload_metrics)
    if problems:
        more = f" (and {counted(len(problems) - 1, 'more problem')})" if len(problems) > 1 else ""
        return CheckResult(
            name,
            FAILED,
            f"{problems[0]}{more}",
            f"name only what {proposal.evaluator} measures (`ptreg evaluator show {proposal.evaluator}`)",
        )
    rules = "; ".join(f"{flag} {rule.text}" for flag, rule in plan.rules())
    return CheckResult(name, PASSED, f"{rules}; margins: {margins_text(plan, spec)}; decided on {plan.deciding()}")


# --------------------------------------------------------------------------- explicit budget


def budget_arguments() -> str:
    """How a budget is given, in the caller's names."""
    limits = ", ".join(named(f"budget_{limit}") for limit in ("steps", "repeats", "threads", "memory_mb"))
    return f"{named('budget_seconds')} S (optionally {limits})"


def explicit_budget(proposal: Attempt, frozen: FrozenEvaluator | None, budget_error: str | None = None) -> CheckResult:
    name = "explicit-budget"
    if budget_error is not None:
        return CheckResult(name, FAILED, budget_error, f"give a positive, finite budget: {budget_arguments()}")
    budget = proposal.budget
    if budget is None:
        return CheckResult(name, FAILED, "no budget is given", f"state what the run may spend: {budget_arguments()}")
    # A budget the evaluator cannot fit in is not a plan: say so now, not mid-run.
    if frozen is not None:
        spec = frozen.spec
        for limit, needed, what in (
            (budget.max_threads, spec.threads, "threads"),
            (budget.max_repeats, spec.least_repeats, "repeats"),
            (budget.max_timed_steps, spec.needs_steps, "timed steps per repeat"),
        ):
            if limit is not None and needed is not None and needed > limit:
                return CheckResult(
                    name,
                    FAILED,
                    f"the evaluator needs {needed} {what} but the budget allows at most {limit}",
                    f"raise the budget's {what} limit to at least {needed}, or freeze an evaluator that needs fewer",
                )
    return CheckResult(name, PASSED, budget.describe())


# --------------------------------------------------------------------------- tracking issue


def scoped_tracking_issue(
    proposal: Attempt, by_id: Mapping[str, Shaped], everyone: Mapping[str, Shaped], tracking_error: str | None = None
) -> CheckResult:
    name = "scoped-tracking-issue"
    why = tracking_error or tracking.problem(proposal.tracking_issue)
    if why is not None:
        return CheckResult(
            name, FAILED, why, f"name the issue that scopes this work with {named('tracking_issue')}: {tracking.FORMS}"
        )
    reference = proposal.tracking_issue
    assert reference is not None
    root = lineage_root(proposal.id, everyone)
    sharing = sorted(a.id for a in by_id.values() if a.tracking_issue == reference)
    outside = [i for i in sharing if lineage_root(i, everyone) != root]
    if outside:
        return CheckResult(
            name,
            FAILED,
            f"{reference} already scopes {', '.join(outside)}, of another lineage; one tracking issue scopes one lineage",
            f"open a new tracking issue for this question, or vary an attempt of that lineage "
            f"({named('varied_from')} {outside[0]})",
            tuple(outside),
        )
    detail = reference + (f" (also scopes {', '.join(sharing)} of this lineage)" if sharing else "")
    return CheckResult(name, PASSED, detail)


# --------------------------------------------------------------------------- disposition


def disposition_respected(
    proposal: Attempt, by_id: Mapping[str, Shaped], decided: DecidedCondition | None
) -> CheckResult:
    """A prose disposition must be answered; one with a condition is decided by the numbers of
    the varied attempt's latest complete run (``decided``)."""
    name = "disposition-respected"
    if proposal.varied_from is None:
        return CheckResult(name, PASSED, "varies no attempt, so there is no retained disposition to answer")
    parent = by_id.get(proposal.varied_from)
    if parent is None:
        return CheckResult(
            name,
            FAILED,
            f"{proposal.varied_from} is not in the registry, so its disposition cannot be read",
            f"vary an attempt that exists ({invoked('list')})",
        )
    if parent.next_action is None:
        return CheckResult(name, PASSED, f"{parent.id} retains no disposition (its next_action is unknown)")
    answer = proposal.answers_disposition
    answered = answer is not None and bool(answer.strip())
    if decided is not None:
        found = f"{parent.id}'s condition {decided.summary()}"
        if not answer_needed(parent.next_action, decided.truth):
            return CheckResult(name, PASSED, found)
        if decided.truth is False:
            return CheckResult(
                name,
                FAILED,
                found,
                f"the numbers of {parent.id}'s latest complete run say stop; read its disposition "
                f"({invoked('show', attempt_id=parent.id)}) and vary another attempt",
            )
        if answered:
            return CheckResult(name, OVERRIDDEN, f"{found}; the proposal answers: {answer!r}")
        return CheckResult(
            name,
            FAILED,
            found,
            f'say why this proposal should go on undecided with {named("answers_disposition")} "..." (it is stored)',
        )
    if not answered:
        return CheckResult(
            name,
            FAILED,
            f"{parent.id} retains the disposition {parent.next_action!r}, and the proposal does not answer it",
            f'say how this proposal meets that disposition with {named("answers_disposition")} "..."',
        )
    return CheckResult(name, PASSED, f"answers {parent.id}'s disposition {parent.next_action!r}: {answer!r}")


# --------------------------------------------------------------------------- streak


def streak(proposal: Attempt, by_id: Mapping[str, Shaped], objective_chain: Sequence[Shaped]) -> CheckResult:
    """CAUTION at 2 trailing negatives; at 3 or more, refused unless the axis changes or an
    override reason is given. The chain is the objective's deepest one (as `ptreg streaks`
    shows it) or the one the proposal varies, whichever ends in more negatives."""
    name = "streak"
    objective = proposal.objective
    if objective is None:
        why = "an infrastructure attempt" if proposal.kind == INFRASTRUCTURE_KIND else "no objective is named"
        return CheckResult(name, PASSED, f"{why}: no objective chain to check")
    chains = [list(objective_chain)] if objective_chain else []
    if proposal.varied_from is not None and proposal.varied_from in by_id:
        chains.append(ancestry(proposal.varied_from, by_id))
    trailing = max((trailing_negatives(c, objective) for c in chains), key=len, default=[])
    ids = ", ".join(a.id for a in trailing)
    if len(trailing) < CAUTION_AT:
        return CheckResult(name, PASSED, f"objective {objective}: its chain ends in {len(trailing)} negative(s)")
    if len(trailing) < STOP_AT:
        return CheckResult(
            name,
            CAUTION,
            f"CAUTION: objective {objective}'s chain ends in {len(trailing)} negatives ({ids}); "
            f"last lesson: {trailing[-1].lesson or 'unknown'}",
        )
    used = {x for a in trailing for x in [*(a.methods or ()), *(a.bases or ())]}
    new_axis = [x for x in (proposal.methods or []) + (proposal.bases or []) if x not in used]
    head = f"STOP AND RETHINK: objective {objective}'s chain ends in {len(trailing)} negatives ({ids})"
    if new_axis:
        return CheckResult(name, PASSED, f"{head}, but the proposal changes axis: {', '.join(new_axis)} is new to them")
    if proposal.streak_override is not None and proposal.streak_override.strip():
        return CheckResult(name, OVERRIDDEN, f"{head}; overridden: {proposal.streak_override}")
    return CheckResult(
        name,
        FAILED,
        f"{head}, and the proposal uses no method or base they did not",
        "change axis (a method or base none of them used), or give a reason with "
        f'{named("override_streak")} "..." (it is stored)',
        tuple(a.id for a in trailing),
    )
