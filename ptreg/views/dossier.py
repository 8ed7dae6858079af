"""The dossier: one attempt rendered for reading, with the seed page's sections in the seed page's
order, then the sections ptreg adds (lineage, pre-registration, admission, runs).

Within a section the record's own text comes first; what ptreg says of it (the status, a
condition, its own provenance lines) comes after. The page's fixed texts are ptreg's own.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..records import tracking
from ..records.attempt_view import AttemptView, RunRefView
from ..records.budgets import describe_budget
from ..records.continuation import continued
from ..records.graph import ancestry
from ..records.ledger import INFRASTRUCTURE_KIND, Vocabularies
from ..text import Table, counted
from .lineage import superseded_by
from .tables import markdown, plain_tables

if TYPE_CHECKING:  # or the same fields read off a vouched file (records/dumped.py), without pydantic
    from ..records.attempt import Attempt

UNKNOWN = "unknown"
# The seed page's sections, in its order.
SEED_SECTIONS = (
    "Evidence readout",
    "What the attempt taught",
    "Why it stopped or stayed bounded",
    "Method and scope",
    "Disposition",
    "How to read this dossier",
    "Source provenance",
)
# ptreg's own sections, after the seed's (pre-registration, admission and runs follow when present).
LINEAGE = "Lineage"
SECTION_TITLES = (*SEED_SECTIONS, LINEAGE)
UNDEFINED = "imported without a definition"
RETAINED_NOTE = (
    "What is kept here records a decision already taken; it does not license running the experiment again. "
    "Before any new run, the gate asks for a question not answered yet, an evaluator frozen beforehand, "
    "a resource budget stated up front, and a tracking issue that scopes the work."
)
READING_NOTE = [
    "This page keeps the decision apart from the material behind it. Its sources differ in kind: a claim "
    "made elsewhere, a number measured in the past, something seen locally, a procedure that was only "
    "planned. One kind cannot stand in for another, so check a source before you reuse its number or method.",
    "The status and the disposition are what the ledger kept when the record was written. They promise "
    "nothing about the product today, they are not a fresh benchmark, and they do not permit resuming the "
    "work. A value nobody measured is shown as unknown, never as zero.",
    "Before reusing the record, say exactly which claim you need and follow it to its source. Compare the "
    "hardware, the evaluator, the budget, the data split, the model revision and the rest of the environment "
    "with yours; where they differ, "
    "read the record as a hypothesis or a design hint, and run the smallest new comparison that could prove "
    "it wrong.",
    "Keep negative outcomes and regressions beside any improvement; a local win is not a general claim.",
]


@dataclass
class Section:
    title: str
    lines: Sequence[str | Table]  # a line starting with "- " is a list item; a Table is a table


def _text(value: str | None) -> str:
    return value if value is not None else UNKNOWN


def family_label(family: str) -> str:
    """A family as people read it: its slug's words (``runtime-perf`` is "runtime perf"). The
    registry keeps no vocabulary of families to hold a label of its own; the slug stays the id
    (`--family`, `list`, the record's JSON)."""
    return " ".join(family.replace("-", " ").split())


def _term(value: str | None, vocabulary: Mapping[str, str | None]) -> str:
    """A vocabulary term, marked when the registry holds it without a definition."""
    if value is None:
        return UNKNOWN
    return f"{value} ({UNDEFINED})" if value in vocabulary and vocabulary[value] is None else value


def _terms(values: Sequence[str] | None, vocabulary: Mapping[str, str | None]) -> str:
    return ", ".join(_term(v, vocabulary) for v in values) if values else UNKNOWN


def _listed(values: Sequence[str] | None) -> str:
    return ", ".join(values) if values else UNKNOWN


def sections(
    attempt: AttemptView,
    by_id: Mapping[str, AttemptView],
    meta: Vocabularies,
    record_file: str | None,
    root: Path | None = None,
    model: Attempt | None = None,
    latest: int | None = None,
) -> list[Section]:
    """The dossier of ``attempt``: the seed page's sections in its order, then ptreg's own
    (``root`` is the registry directory the runs are read from; ``model``, the attempt through
    the models, which the sections of its runs need). With ``latest``, its runs latest first,
    at most that many, and a line saying how many earlier ones are not shown; without it,
    every run in the record's order."""
    a = attempt
    status = f"- Status: {a.status}."
    if a.deviation is not None and a.plan_decision is not None:
        status = (
            f"- Status: {a.status}, which deviates from its plan (the plan decided {a.plan_decision.status}): "
            f"{_sentence(a.deviation)}"
        )
    disposition: list[str | Table] = [_text(a.next_action), RETAINED_NOTE, status]
    if a.continue_if is not None:
        disposition.append(f"- Continue if: {a.continue_if.text}")
    contents: list[Sequence[str | Table]] = [
        [_text(a.evidence)],
        [_text(a.lesson)],
        [_text(a.failure_reason)],
        _scope(a, meta),
        disposition,
        READING_NOTE,
        _provenance(a, meta, record_file),
        _lineage(a, by_id),
    ]
    result = [Section(title, lines) for title, lines in zip(SECTION_TITLES, contents, strict=True)]
    runs = list(a.runs or ())
    if latest is not None:
        runs = runs[::-1][:latest]
    left_out = len(a.runs or ()) - len(runs)
    earlier = (
        [f"{counted(left_out, 'earlier run')} not shown: `ptreg show {a.id} --runs all` shows every run."]
        if left_out
        else []
    )
    prereg = _preregistration(a, by_id, runs) + [f"- {line}" for line in earlier]
    if prereg:
        result.append(Section("Pre-registration", prereg))
    admission = _admission(a)
    if admission:
        result.append(Section("Admission", admission))
    decision = _decision(a)
    if model is not None and model.runs and root is not None:
        # the run models and the workloads cost about 30 ms to import: only for a dossier with runs
        from .dossier_runs import condition_lines, plan_lines, run_lines

        if model.plan is not None:  # the plan decided on its runs, as the registry holds them now
            decision += plan_lines(root, model)
        if decision:
            result.append(Section("Decision", decision))
        if model.continue_if is not None:  # decided on the runs, as the registry holds them now
            disposition[3:4] = condition_lines(root, model)
        # the models' runs, in the order shown (the view's are the same runs, from the same record)
        by_run = {r.run_id: r for r in model.runs}
        for run in (by_run[r.run_id] for r in runs if r.run_id in by_run):
            margins = model.plan.margins if model.plan is not None else None
            result.append(Section(f"Run {run.run_id}", run_lines(root, model.id, run, margins)))
        if earlier:
            result.append(Section("Earlier runs", earlier))
    elif decision:
        result.append(Section("Decision", decision))
    return result


def _scope(a: AttemptView, meta: Vocabularies) -> list[str]:
    family = family_label(a.family) if a.family is not None else UNKNOWN
    scope = [f"- Experiment family: {family}.", f"- Record kind: {_term(a.kind, meta.kind_vocabulary)}."]
    if a.kind == INFRASTRUCTURE_KIND:
        return [*scope, "- Methods, bases, objective, data rows: not applicable to infrastructure."]
    return [
        *scope,
        f"- Methods: {_terms(a.methods, meta.method_vocabulary)}.",
        f"- Bases: {_listed(a.bases)}.",
        f"- Objective: {_term(a.objective, meta.objective_vocabulary)}.",
        f"- Data rows: {a.data_rows if a.data_rows is not None else UNKNOWN}.",
    ]


def _lineage(a: AttemptView, by_id: Mapping[str, AttemptView]) -> list[str]:
    """The chain oldest first; then what supersedes the attempt: its direct successors first,
    then, indented, the rest of what descends from it."""
    lines = []
    if a.varied_from is None:
        lines.append("- Varies: nothing (a root attempt).")
    else:
        chain = ancestry(a.id, by_id)
        steps = " -> ".join(x.id for x in chain)
        if chain[0].varied_from is not None:
            steps = f"{chain[0].varied_from} (not in this registry) -> {steps}"
        lines.append(f"- Chain, oldest first: {steps}.")
        lines += [
            f"- {step.id} varied from {step.varied_from}: {_sentence(step.varied)}"
            for step in chain
            if step.varied_from is not None
        ]
    direct, rest = superseded_by(a.id, by_id)
    lines += [f"- Superseded by {s.attempt.id} ({s.attempt.status}): {_sentence(s.attempt.varied)}" for s in direct]
    lines += [
        f"- {'  ' * (s.depth - 1)}then {s.attempt.id} ({s.attempt.status}), varying {s.attempt.varied_from}: "
        f"{_sentence(s.attempt.varied)}"
        for s in rest
    ]
    if not direct:
        lines.append("- Superseded by: nothing yet.")
    return lines


def _provenance(a: AttemptView, meta: Vocabularies, record_file: str | None) -> list[str]:
    confidence = a.failure_reason_confidence
    meaning = meta.confidence_vocabulary.get(confidence) if confidence else None
    undefined = confidence is not None and confidence in meta.confidence_vocabulary and meaning is None
    origin = a.origin
    if origin is not None:
        opening = (
            f"This record was imported from {origin.file}, schema_version {origin.schema_version}, where it is "
            f"attempt {origin.position + 1} (#/attempts/{origin.position})."
        )
    else:
        opening = f"This record was written in the registry, as {record_file or UNKNOWN}."
    lines = [
        opening + " Listed next are the sources it keeps for its evidence and for its explanation.",
        f"- Source: {_text(a.source)}.",
        f"- Evidence sources: {_listed(a.evidence_sources)}.",
        f"- Failure-reason confidence: {_text(confidence)}"
        + (f" ({meaning})" if meaning else f" ({UNDEFINED})" if undefined else "")
        + ".",
    ]
    if origin is not None:
        when = f" on {origin.imported_at}" if origin.imported_at else ""
        lines.append(f"- Kept in this registry as {record_file or UNKNOWN}, imported{when}.")
        if origin.lacks:
            lines.append(
                f"- Its format had no {', '.join(origin.lacks)}: what the record does not say of these stays unknown."
            )
    return lines


def _sentence(value: str | None) -> str:
    """The value as a list item's sentence: one final full stop, not two."""
    text = _text(value)
    return text if text.endswith((".", "?", "!")) else text + "."


def _preregistration(a: AttemptView, by_id: Mapping[str, AttemptView], runs: Sequence[RunRefView]) -> list[str]:
    if not any((a.question, a.hypothesis, a.evaluator, a.budget, a.tracking_issue, a.runs, a.admission)):
        return []
    issue = _text(a.tracking_issue)
    if a.tracking_issue is not None:
        url = tracking.link(a.tracking_issue)
        if url and url != a.tracking_issue:
            issue += f" ({url})"
        also = sorted(x.id for x in by_id.values() if x.id != a.id and x.tracking_issue == a.tracking_issue)
        if also:
            issue += f"; it also scopes {', '.join(also)}"
    lines = [
        f"- Question: {_sentence(a.question)}",
        f"- Hypothesis: {_sentence(a.hypothesis)}",
        f"- Evaluator: {_text(a.evaluator)}.",
        f"- Budget: {describe_budget(a.budget) if a.budget else UNKNOWN}.",
        f"- Tracking issue: {issue}.",
    ]
    if a.answers_disposition is not None:
        parent = by_id.get(a.varied_from) if a.varied_from else None
        asked = f" ({parent.id}: {parent.next_action})" if parent is not None and parent.next_action else ""
        lines.append(f"- Answer to the disposition it varies{asked}: {_sentence(a.answers_disposition)}")
    if a.streak_override is not None:
        lines.append(f"- Streak override (went on despite STOP AND RETHINK): {_sentence(a.streak_override)}")
    lines += _plan(a)
    gone = continued(a.runs or ())  # counted once: in the run that continues it
    for run in runs:
        said = f"- Run {run.run_id}: {run.status}" + (f", evaluator {run.evaluator}" if run.evaluator else "")
        if run.continues is not None:
            said += f", continues run {run.continues} with its rounds measured whole"
        if run.run_id in gone:
            said += ", continued by a later run, which counts in its place"
        lines.append(said + ".")
    return lines


def _plan(a: AttemptView) -> list[str]:
    """The analysis plan as registered, or that the attempt was admitted before plans existed."""
    plan = a.plan
    if plan is None:
        if a.admission is not None:
            return [
                "- Analysis plan: none; it was admitted before plans existed, so its status is the one given at conclusion."
            ]
        return []
    lines = [f"- Worked if: {plan.worked_if.text}"]
    if plan.regressed_if is not None:
        lines.append(f"- Regressed if: {plan.regressed_if.text}")
    margins = plan.margins or {}
    if margins:
        lines.append(
            "- Margins (the smallest effect that matters): " + ", ".join(f"{m} {v:g}" for m, v in margins.items()) + "."
        )
    decides = "the first complete run" if plan.runs == 1 else f"the first {plan.runs} complete runs, pooled"
    lines.append(
        f"- Decided on: {decides}. Order: regressed if regressed-if holds; worked if worked-if holds and "
        "regressed-if does not; failed if worked-if does not hold; otherwise inconclusive."
    )
    return lines


def _decision(a: AttemptView) -> list[str | Table]:
    """What the plan decided at conclusion, and any deviation from it."""
    decided = a.plan_decision
    if decided is None:
        return []
    runs = ", ".join(decided.runs) if decided.runs else "no run"
    lines: list[str | Table] = [f"At conclusion the plan decided {decided.status}: {decided.because} (on {runs})."]
    lines += [f"- {line}" for line in decided.readout]
    if a.deviation is not None:
        lines.append(
            f"- Deviation: the recorded status is {a.status}, not the plan's {decided.status}: {_sentence(a.deviation)}"
        )
    else:
        lines.append(f"- The recorded status, {a.status}, is the plan's.")
    return lines


def _admission(a: AttemptView) -> list[str]:
    admission = a.admission
    if admission is None:
        return []
    state = admission.registry_state
    lines = [
        f"Admitted through the gate at {admission.admitted_at} by ptreg {admission.ptreg_version}, against a registry "
        f"of {counted(state.attempts, 'attempt')} and {counted(state.evaluators, 'frozen evaluator')} (sha256 {state.sha256[:12]}). "
        "`ptreg gate` re-checks it against the registry as it is now.",
    ]
    lines += [f"- {c.check}: {c.outcome}; {_sentence(c.detail)}" for c in admission.checks]
    if admission.precedents:
        lines.append(f"- Precedents shown to the proposer: {', '.join(admission.precedents)}.")
    for r in a.readmissions or ():
        # a conflict found after a merge, and how it was resolved (docs/gate.md)
        why = f"after {', '.join(r.conflicts)} with {', '.join(r.earlier)}, admitted before it"
        if r.resolution == "withdrawn":
            lines.append(f"- Withdrawn at {r.readmitted_at} {why}: {_sentence(r.reason)}")
            continue
        was = ", ".join(
            f"{c.field} (" + (f"was '{c.before}')" if c.before is not None else "none before)") for c in r.changes or ()
        )
        lines.append(f"- Readmitted at {r.readmitted_at} {why}, with a new {was}.")
    for m in a.amendments or ():
        # an evaluator changed before any outcome: every run before it measured nothing
        before = f"after {counted(len(m.runs), 'run')} that measured nothing" if m.runs else "before any run"
        lines.append(
            f"- Amended at {m.amended_at}, {before}: evaluator {m.after} in place of {m.before}; {_sentence(m.reason)}"
        )
    return lines


def render_text(attempt: AttemptView, parts: list[Section], wrap: int | None = None) -> str:
    """The dossier as plain text: tables fitted to the terminal, and prose wrapped at ``wrap``
    columns when given (at a terminal; a pipe gets one line per paragraph, for grep)."""
    title = f"{attempt.name} ({attempt.id})"
    out = [*(textwrap.wrap(title, wrap, break_on_hyphens=False) if wrap else [title]), ""]
    for section in parts:
        out.append(section.title)
        # a run's tables of one kind (its metrics) in one form: plain_tables
        laid = iter(plain_tables([line for line in section.lines if isinstance(line, Table)], width=wrap))
        for line in section.lines:
            if isinstance(line, Table):
                out += [next(laid), ""]
            elif wrap is None or len(line) <= wrap:
                out.append(line)
            else:
                indent = "  " if line.startswith("- ") else ""
                out += textwrap.wrap(line, wrap, subsequent_indent=indent, break_on_hyphens=False)
    return "\n".join(out) + "\n"


def _as_lines(line: str | Table) -> list[str]:
    """A line, or a table as GitHub-flavoured markdown (an empty line after it)."""
    return markdown(line.rows, line.headers) if isinstance(line, Table) else [line]


# What would open a block other than a paragraph at the start of a line (CommonMark): a heading,
# quote, list item, thematic break or setext underline, code fence, HTML, or a table row (GFM).
_BLOCK_START = re.compile(r"[#>*+=|<-]|`{3}|~{3}|[0-9]{1,9}[.)]")


def _escaped(line: str) -> str:
    """A line of free text that cannot open a block of its own."""
    text = line.lstrip(" ")  # leading spaces mean nothing in a paragraph, and four would open code
    if _BLOCK_START.match(text) is None:
        return text
    if text[:1].isdigit():  # an ordered list marker: a backslash escapes its punctuation only
        digits = len(text) - len(text.lstrip("0123456789"))
        return text[:digits] + "\\" + text[digits:]
    return "\\" + text


def _paragraph(text: str) -> str:
    """Free text as the content of one markdown block, each line break kept as a hard break."""
    return "\\\n".join(_escaped(line) for line in text.split("\n"))


def render_markdown(attempt: AttemptView, parts: list[Section]) -> str:
    """CommonMark: each paragraph its own, each run of list items one list, a blank line
    between any two blocks (a paragraph right after a list item would be read as part of it)."""
    out = [f"# {attempt.name}", "", f"`{attempt.id}` · status **{attempt.status}**", ""]
    for section in parts:
        out += [f"## {section.title}", ""]
        previous = ""  # "item", "table" or "paragraph"
        for item in section.lines:
            if isinstance(item, Table):
                if out[-1] != "":
                    out.append("")
                out += _as_lines(item)
                previous = "table"
            elif item.startswith("- "):
                if previous != "item" and out[-1] != "":
                    out.append("")
                out.append("- " + _paragraph(item[2:]).replace("\n", "\n  "))
                previous = "item"
            else:
                if out[-1] != "":
                    out.append("")
                out += [_paragraph(item), ""]
                previous = "paragraph"
        if out[-1] != "":
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def render_json(attempt: AttemptView, parts: list[Section]) -> dict[str, Any]:
    record = attempt.to_json_dict()
    origin = record.pop("origin", None)
    return {
        "attempt": record,  # as its ledger holds it; where it came from is beside it
        "origin": origin,
        "sections": [{"title": s.title, "lines": [t for item in s.lines for t in _as_lines(item)]} for s in parts],
    }
