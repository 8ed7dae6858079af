"""One answer of a proposal, checked the moment it is given.

``ptreg new`` at a terminal asks for what the flags left out. Each answer is checked here with
the rules the whole proposal meets later (the record's field types, the vocabularies, the
frozen evaluators, the budget and tracking-issue forms), so a prompt can say why and ask again
instead of failing after the last question. The gate's own checks (a fresh question, an unused
tracking issue, the disposition) still run on the whole proposal.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import TypeAdapter, ValidationError

from ..errors import PtregError
from ..records import tracking
from ..records.analysis_plan import margin_problems, rule_problems
from ..records.attempt import INFRASTRUCTURE_KIND, Attempt, Budget
from ..records.condition import answer_needed
from ..records.condition_grammar import parse as parse_condition
from ..records.graph import lineage_roots
from ..records.problems import plain_message
from ..records.refs import check_id, slug_problem
from ..records.registry import Registry
from ..records.vocabulary import terms, unknown_terms
from ..store.directory import record_path
from ..store.evaluator_files import check_file, evaluator_files, resolve
from ..views.dispositions import Disposition, decide_disposition
from .checks import alike_question, closest, question_tokens
from .proposal import name_frozen_twice, parse_margin
from .proposal_input import FieldsRefused, ProposalInput
from .verification import verify_evaluator

# The vocabulary each field's terms come from.
VOCABULARY_OF = {"kind": "kind", "objective": "objective", "methods": "method"}


@dataclass(frozen=True)
class Question:
    """One field of a proposal as a prompt asks for it."""

    name: str  # the ProposalInput field
    label: str
    optional: bool = False


@functools.cache
def _adapter(name: str) -> TypeAdapter[Any]:
    """The type, with its limits, of the record field or budget limit a ProposalInput field fills."""
    meta = next(f.metadata for f in fields(ProposalInput) if f.name == name)
    info = Budget.model_fields[meta["budget"]] if meta["budget"] else Attempt.model_fields[meta["record"]]
    return TypeAdapter(cast(Any, Annotated[info.annotation, info]))


def _field_problem(name: str, value: Any) -> str | None:
    """What the record's own type says of the value, in plain words."""
    try:
        _adapter(name).validate_python(value)
    except ValidationError as exc:
        return plain_message(exc.errors(include_url=False)[0])
    return None


def problem(name: str, value: Any, registry: Registry, given: ProposalInput | None = None) -> str | None:
    """Why ``value`` cannot be the proposal's ``name`` field in ``registry``, or None. With
    ``given``, the proposal so far, a question is also checked for freshness in its lineage and
    family, as the gate will check it."""
    root = registry.root
    if isinstance(value, str) and not value.strip():
        return "must not be empty"
    if name == "id":
        try:
            check_id(value)
        except PtregError as exc:
            return str(exc)
        if value in {r.raw_id for r in registry.records} or (root is not None and record_path(root, value).exists()):
            return f"attempt {value!r} already exists; choose another id"
        return None
    if name == "family":
        return slug_problem(value)
    if name in VOCABULARY_OF:
        used = [
            (VOCABULARY_OF[name], VOCABULARY_OF[name], term) for term in (value if isinstance(value, list) else [value])
        ]
        return unknown_terms(registry.meta, used)
    if name == "varied_from":
        known = {a.id: a for a in registry.attempts}
        if value not in known:
            return f"{value!r} names no attempt in the registry{closest(value, known)}"
        decided = disposition(value, registry)
        if decided is not None and decided.truth is False:
            return (
                f"{value}'s condition {decided.summary()}: the numbers of its latest complete run say stop; "
                f"read its disposition (`ptreg show {value}`) and vary another attempt"
            )
        return None
    if name == "question" and given is not None:
        return _stale_question(value, given, registry)
    if name == "evaluator":
        if root is None:
            return "the registry has no directory to hold frozen evaluators"
        try:
            path = resolve(root, value.strip())
        except PtregError as exc:
            return str(exc)
        return evaluator_problem(root, path)
    if name == "tracking_issue":
        return tracking.problem(value)
    if name in ("worked_if", "regressed_if", "margins", "decide_on_runs"):
        return _plan_problem(name, value, registry, given)
    return _field_problem(name, value)


def evaluator_problem(root: Path, path: Path) -> str | None:
    """Why the frozen evaluator at ``path`` cannot measure a new attempt, as the gate would say
    it after every other answer: it no longer verifies, or its name is frozen twice."""
    ref = path.name.removesuffix(".json")
    found = verify_evaluator(root, path)
    if not found.verifies:
        return f"{ref} {found.said}; restore what changed, or freeze the spec under a name of its own"
    return name_frozen_twice(root, ref)


def _plan_problem(name: str, value: Any, registry: Registry, given: ProposalInput | None) -> str | None:
    """Why a part of the analysis plan cannot be used: a rule that does not parse, a margin
    that is not METRIC=VALUE, or (once the evaluator is known) a metric, arm or cell it lacks."""
    if name == "decide_on_runs":
        return None if isinstance(value, int) and 1 <= value <= 20 else "give a whole number from 1 to 20"
    margins: dict[str, float] = {}
    try:
        if name == "margins":
            margins = dict(parse_margin(item) for item in value)
        else:
            tree = parse_condition(value, what=name.replace("_", "-"))
        for item in given.margins if given is not None and name != "margins" else ():
            margins.update([parse_margin(item)])
    except FieldsRefused as exc:
        return exc.worded(lambda _: "margin")
    except PtregError as exc:
        return exc.message
    spec = _spec(given, registry)
    if spec is None:
        return None
    found = margin_problems(margins, spec) if name == "margins" else rule_problems(tree, spec, margins)
    return found[0] if found else None


def _spec(given: ProposalInput | None, registry: Registry) -> Any:
    """The spec of the proposal's frozen evaluator, when one is named and verifies."""
    if given is None or not given.evaluator or registry.root is None:
        return None
    try:
        frozen, _ = check_file(resolve(registry.root, given.evaluator.strip()))
    except PtregError:
        return None
    return frozen.spec if frozen is not None else None


def disposition(attempt_id: str, registry: Registry) -> Disposition | None:
    """The condition of the attempt ``attempt_id`` decided on its latest complete run; None
    when it has none (or is not in the registry)."""
    parent = registry.by_id().get(attempt_id)
    if parent is None or registry.root is None:
        return None
    return decide_disposition(registry.root, parent)


def _stale_question(question: str, given: ProposalInput, registry: Registry) -> str | None:
    """Why ``question`` is not fresh, as the gate's fresh-question check would find it (the same
    or a near-duplicate question in the proposal's lineage or family), with what to do."""
    if not question_tokens(question):
        return "asks nothing: say what this run answers"
    others = {a.id: a for a in registry.attempts if a.id != given.id}
    me = _Proposed(given.id or "\0proposal", given.varied_from)
    roots = lineage_roots({**others, me.id: me})
    for other in others.values():
        same_lineage = roots.get(other.id) == roots[me.id]
        same_family = given.family is not None and other.family == given.family
        if not (same_lineage or same_family):
            continue
        alike = alike_question(question, other)
        if alike is not None:
            score, said = alike
            how = "the same question" if score == 1.0 else f"a near-duplicate (similarity {score:.2f})"
            vary = "" if given.varied_from == other.id else f", or vary it (answer {other.id} to 'varied from')"
            return f"{how} as {other.id} (status {other.status}) {said}; ask what its result leaves open{vary}"
    return None


@dataclass(frozen=True)
class _Proposed:
    """The proposal's place in the varied_from forest, before it is a record."""

    id: str
    varied_from: str | None


def questions(given: ProposalInput, registry: Registry) -> list[Question]:
    """What to ask, in order, for the fields ``given`` still lacks; the kind decides whether the
    shape fields (methods, bases, objective) are asked at all."""
    asked = [Question("id", "id (a lowercase slug; the file name)"), Question("name", "name")]
    if registry.attempts and not given.varied_from:
        # asked early: the attempt varied gives the defaults of family, kind and objective
        asked.append(Question("varied_from", "varied from (the id of the attempt it varies)", optional=True))
    asked += [Question("family", "family"), Question("kind", "kind")]
    if given.kind != INFRASTRUCTURE_KIND:
        asked += [
            Question("objective", "objective"),
            Question("methods", "methods (comma-separated)", optional=True),
            Question("bases", "bases it builds on (comma-separated)", optional=True),
        ]
    asked += [
        Question("question", "question (what this run answers)"),
        Question("hypothesis", "hypothesis (the expected answer)", optional=True),
    ]
    if given.varied_from:
        asked.append(Question("varied", f"what is varied from {given.varied_from}"))
        parent = registry.by_id().get(given.varied_from)
        decided = disposition(given.varied_from, registry)
        # a condition that holds answers the disposition itself: the gate asks nothing more
        if parent is not None and answer_needed(parent.next_action, decided.truth if decided else None):
            asked.append(Question("answers_disposition", "how this answers that disposition"))
    asked += [
        Question("evaluator", "evaluator"),
        # the analysis plan, before any number: checked against the evaluator just named
        Question("margins", "margins (METRIC=VALUE, comma-separated: the smallest effects that matter)", optional=True),
        Question("worked_if", "worked if (a condition on the run's numbers, e.g. better(score, arm=B, over=A))"),
        Question("regressed_if", "regressed if (a condition, checked first)", optional=True),
        Question("budget_seconds", "budget: wall-clock seconds at most"),
        Question("tracking_issue", f"tracking issue ({tracking.FORMS})"),
    ]
    return [q for q in asked if getattr(given, q.name) in (None, "", [])]


def choices(name: str, registry: Registry) -> dict[str, str]:
    """The terms a field may take, with their descriptions; empty when it is free text."""
    if name in VOCABULARY_OF:
        return {
            term: text if text is not None else "(imported without a definition)"
            for term, text in terms(registry.meta, VOCABULARY_OF[name]).items()
        }
    if name == "evaluator" and registry.root is not None:
        root = registry.root
        return {
            p.name[: -len(".json")]: "" if (found := verify_evaluator(root, p)).verifies else found.said
            for p in evaluator_files(root)
        }
    return {}


def default(name: str, given: ProposalInput, registry: Registry) -> Any:
    """The value Enter accepts, when one follows from the registry: the attempt being varied
    keeps its family, kind and objective, and the evaluator is the one it used or the only
    one frozen. None when nothing follows."""
    parent = registry.by_id().get(given.varied_from or "")
    if name in ("family", "kind", "objective", "evaluator") and parent is not None:
        inherited = getattr(parent, name)
        if inherited is not None and problem(name, inherited, registry) is None:
            return inherited
    if name == "evaluator":
        frozen = list(choices("evaluator", registry))
        if len(frozen) == 1 and problem(name, frozen[0], registry) is None:  # a stale one is never offered
            return frozen[0]
    return None


def parse(name: str, text: str) -> tuple[Any, str | None]:
    """The typed answer from what was typed, or why it is none: lists are comma-separated, a
    budget is a number of seconds, data rows a whole number."""
    if name in ("methods", "bases", "margins"):
        items = [item.strip() for item in text.split(",")]
        if any(not item for item in items):
            return None, "an empty item between commas"
        return items, None
    if name == "budget_seconds":
        try:
            return float(text), None
        except ValueError:
            return None, f"{text!r} is not a number of seconds"
    if name == "data_rows":
        try:
            return int(text), None
        except ValueError:
            return None, f"{text!r} is not a whole number"
    return text, None
