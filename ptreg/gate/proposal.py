"""Proposing an attempt: build the not-tried record, show its precedents, pass it through the
gate, and write it (with its admission) only when every check holds.

What a proposer gives is a ``ProposalInput`` (``proposal_input.py``).

Exit codes follow the rest of ptreg: a value that cannot be used at all (a malformed id, an
unknown evaluator or vocabulary term) is exit 2; a gate check that refuses is exit 1; in
both cases nothing is written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import CheckFailed, UnusableInput
from ..records import tracking
from ..records.analysis_plan import MAX_POOLED_RUNS, Plan, PlanRule
from ..records.arguments import named, named_field
from ..records.attempt import INFRASTRUCTURE_KIND, SHAPE_FIELDS, Attempt, Budget, RegistryMeta
from ..records.condition import render
from ..records.condition_grammar import parse
from ..records.graph import ancestry
from ..records.ledger import Summary
from ..records.problems import flag_message
from ..records.refs import check_id, slug_problem
from ..records.vocabulary import unknown_terms
from ..store.directory import Progress, load_meta, record_path
from ..store.evaluator_files import free_name, resolve, same_name
from ..store.index import open_index
from ..store.jsonio import create_text_exclusive, dumps_pretty
from ..store.locks import registry_lock
from ..store.names import VOCABULARY_DIR
from ..store.vocabulary_files import refuse_old_layout
from ..views.precedents import Precedent, Shape, precedents
from .admission import admission
from .checks import GateReport, check_gate
from .gate_inputs import read_gate_inputs
from .proposal_input import FieldsRefused, ProposalInput


@dataclass
class Proposal:
    attempt: Attempt  # as it would be (or was) written
    report: GateReport
    precedents: list[Precedent[Summary]]
    path: Path | None = None  # set once written
    skipped: int = 0  # record files that could not be read or parsed, so were not compared

    @property
    def written(self) -> bool:
        return self.path is not None


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


# each budget limit in the words its value is read in
BUDGET_UNITS = {
    "wall_clock_seconds": "wall-clock seconds",
    "max_timed_steps": "timed steps per repeat",
    "max_repeats": "repeats",
    "max_threads": "threads",
    "max_memory_mb": "MB of peak memory",
}


def _budget(proposal: ProposalInput) -> tuple[Budget | None, str | None]:
    """The budget, or why the given values are not one (missing, zero, negative, absurd)."""
    limits = {f.metadata["budget"]: f for f in fields(ProposalInput) if f.metadata["budget"]}
    values = {limit: getattr(proposal, f.name) for limit, f in limits.items()}
    if values["wall_clock_seconds"] is None:
        if any(v is not None for v in values.values()):
            return None, "the budget gives limits but no wall-clock seconds, which every budget needs"
        return None, None
    try:
        return Budget.model_validate({k: v for k, v in values.items() if v is not None}), None
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        unit = BUDGET_UNITS[str(error["loc"][0])]
        return None, f"a budget of {error['input']!r} {unit} is refused: {error['msg'].lower()}"


def _check_vocabulary(proposal: ProposalInput, meta: RegistryMeta, source: str) -> None:
    given = [("method", "method", m) for m in proposal.methods]
    given += [
        (vocabulary, vocabulary, value)
        for vocabulary, value in (("kind", proposal.kind), ("objective", proposal.objective))
        if value is not None
    ]
    unknown = unknown_terms(meta, given)
    if unknown is not None:
        raise UnusableInput(f"{source}/{VOCABULARY_DIR}: {unknown}")
    if proposal.kind == INFRASTRUCTURE_KIND:
        by_record = {f.metadata["record"]: f for f in fields(ProposalInput)}
        shaped = [by_record[name].name for name in SHAPE_FIELDS if getattr(proposal, by_record[name].name)]
        if shaped:
            raise FieldsRefused(
                shaped, "an infrastructure attempt carries no shape fields; drop {} or choose another kind"
            )


def check_required(proposal: ProposalInput) -> None:
    """FieldsRefused when the proposal lacks a field every proposal needs: an id, a name, a
    family and a kind, and an objective unless it is infrastructure; or gives a family that is
    not a slug."""
    for name in ("id", "name", "family", "kind"):
        if not getattr(proposal, name):
            raise FieldsRefused([name], "missing {}: a proposal needs an id, a name, a family and a kind")
    if proposal.kind != INFRASTRUCTURE_KIND and not proposal.objective:
        raise FieldsRefused(
            ["objective"], "missing {}: a proposal of this kind needs one (only infrastructure has none)"
        )
    family = slug_problem(proposal.family or "")
    if family is not None:  # the ledger's families are slugs, as its terms are
        raise FieldsRefused(["family"], "{} " + family)


METRIC_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


def parse_margin(text: str) -> tuple[str, float]:
    """``METRIC=VALUE`` as (metric, value); FieldsRefused naming the margins when it is not one."""
    metric, sep, value = text.partition("=")
    metric, value = metric.strip(), value.strip()
    if not sep or not METRIC_NAME.fullmatch(metric):
        raise FieldsRefused(["margins"], f"{{}} {text!r} is not METRIC=VALUE (a metric name, '=', a number)")
    try:
        number = float(value)
    except ValueError:
        raise FieldsRefused(["margins"], f"{{}} {text!r}: {value!r} is not a number") from None
    if not math.isfinite(number) or number <= 0:
        raise FieldsRefused(["margins"], f"{{}} {text!r}: a margin is a positive, finite number")
    return metric, number


def build_plan(proposal: ProposalInput) -> Plan | None:
    """The analysis plan the proposal registers; None when it gives no part of one (the gate
    refuses it then). A rule that does not parse is unusable input, named by its flag."""
    given = [proposal.worked_if, proposal.regressed_if, proposal.decide_on_runs, *proposal.margins]
    if all(_blank_to_none(v) is None for v in given):
        return None
    if _blank_to_none(proposal.worked_if) is None:
        raise FieldsRefused(["worked_if"], "an analysis plan needs {}: the condition under which the attempt worked")
    rules: dict[str, PlanRule] = {}
    for name in ("worked_if", "regressed_if"):
        text = _blank_to_none(getattr(proposal, name))
        if text is not None:
            tree = parse(text, what=name.replace("_", "-"))
            rules[name] = PlanRule(text=render(tree), tree=tree)
    margins: dict[str, float] = {}
    for item in proposal.margins:
        metric, value = parse_margin(item)
        if metric in margins:
            raise FieldsRefused(["margins"], f"{{}} gives {metric} twice")
        margins[metric] = value
    runs = 1 if proposal.decide_on_runs is None else proposal.decide_on_runs
    if not 1 <= runs <= MAX_POOLED_RUNS:
        raise FieldsRefused(["decide_on_runs"], f"{{}} {runs}: from 1 (the first complete run) to {MAX_POOLED_RUNS}")
    return Plan(
        worked_if=rules["worked_if"], regressed_if=rules.get("regressed_if"), margins=margins or None, runs=runs
    )


def build_attempt(proposal: ProposalInput, root: Path) -> tuple[Attempt, str | None, str | None]:
    """The not-tried record; with why the budget and the tracking issue, if given, are refused."""
    budget, budget_error = _budget(proposal)
    raw: dict[str, Any] = {
        f.metadata["record"]: _blank_to_none(getattr(proposal, f.name))
        for f in fields(ProposalInput)
        if f.metadata["record"]
    }
    raw.update(
        status="not-tried",
        failure_reason_confidence="not-applicable",  # a proposal has no failure reason to be sure of
        methods=list(proposal.methods) or None,
        bases=list(proposal.bases) or None,
        budget=budget.model_dump(exclude_none=True) if budget is not None else None,
    )
    plan = build_plan(proposal)
    if plan is not None:
        raw["plan"] = plan.model_dump(mode="json", exclude_none=True)
    tracking_error = tracking.problem(raw["tracking_issue"]) if raw["tracking_issue"] is not None else None
    if tracking_error is not None:
        raw["tracking_issue"] = None
    if raw["evaluator"] is not None:
        raw["evaluator"] = resolve(root, raw["evaluator"].strip()).name[: -len(".json")]  # unknown name: exit 2
    try:
        attempt = Attempt.model_validate({k: v for k, v in raw.items() if v is not None})
    except ValidationError as exc:
        # each record field named as the caller gives it
        given_as = {f.metadata["record"]: named_field(f.name) for f in fields(ProposalInput) if f.metadata["record"]}
        raise UnusableInput(flag_message(exc, proposal.id, given_as)) from None
    return attempt, budget_error, tracking_error


def name_frozen_twice(root: Path, ref: str) -> str | None:
    """Why a new attempt may not be measured by ``ref``: its name is frozen under another identity
    too (a registry merged from two clones), so the name no longer says which measure it is."""
    others = same_name(root, ref)
    if not others:
        return None
    name = ref.split("@", 1)[0]
    return (
        f"evaluator {name} is frozen twice with different specs ({', '.join([ref, *others])}), so its name no "
        f'longer names one measure: freeze the spec under a name of its own ("name": "{free_name(root, name)}") '
        "and propose with that"
    )


def propose(
    root: Path,
    proposal: ProposalInput,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> Proposal:
    """Check the proposal against the registry at ``root`` and, when admitted, write it.

    The gate and the write happen under the registry lock, so that what the gate checked
    (a fresh id, an unused tracking issue) still holds when the record lands.
    """
    check_required(proposal)
    check_id(proposal.id)
    if dry_run:
        return _propose(root, proposal, dry_run=True, now=now, progress=progress)
    load_meta(root)  # a missing registry is refused before any lock file is made
    refuse_old_layout(root)
    with registry_lock(root):
        return _propose(root, proposal, dry_run=False, now=now, progress=progress)


def _propose(
    root: Path, proposal: ProposalInput, *, dry_run: bool, now: datetime | None, progress: Progress | None
) -> Proposal:
    meta = load_meta(root)  # finishes a cut-short import before the index looks at the files
    index = open_index(root)  # the freshness, streak and precedents checks read the index
    try:
        if proposal.id in index.raw_ids() or record_path(root, proposal.id).exists():
            raise CheckFailed(f"attempt {proposal.id!r} already exists in {root}; choose another {named('attempt_id')}")
        _check_vocabulary(proposal, meta, str(root))
        attempt, budget_error, tracking_error = build_attempt(proposal, root)
        twice = None if attempt.evaluator is None else name_frozen_twice(root, attempt.evaluator)
        if twice is not None:
            raise CheckFailed(twice)
        inputs = read_gate_inputs(index, attempt, root, budget_error=budget_error, tracking_error=tracking_error)
        report = check_gate(attempt, inputs)
        others = index.summaries()  # every attempt: the precedents are ranked among them all
        by_id = {a.id: a for a in others}
        lineage = [a.id for a in ancestry(attempt.varied_from, by_id)] if attempt.varied_from else []
        found = precedents(Shape.of(attempt, lineage), others)
        records, hashes = index.records(), index.hashes()
        result = Proposal(attempt, report, found, skipped=records - len(others))
    finally:
        index.close()
    if not report.admitted or dry_run:
        return result
    admitted = admission(report, [p.attempt.id for p in found], root, records, now, hashes, attempt.plan)
    result.attempt = attempt.model_copy(update={"admission": admitted})
    path = record_path(root, attempt.id)
    try:
        create_text_exclusive(path, dumps_pretty(result.attempt.to_json_dict()))
    except FileExistsError:
        raise CheckFailed(f"attempt {attempt.id!r} was created by another process meanwhile; nothing written") from None
    result.path = path
    return result
