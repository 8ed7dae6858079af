"""The dossier: one attempt rendered for reading, in the seed page's section order."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records import tracking
from ..records.attempt import INFRASTRUCTURE_KIND, Attempt, RegistryMeta
from ..records.graph import ancestry, successors
from ..text import Table, counted
from .tables import markdown, plain

UNKNOWN = "unknown"
SECTION_TITLES = (
    "Evidence readout",
    "What the attempt taught",
    "Why it stopped or stayed bounded",
    "Method and scope",
    "Disposition",
    "Lineage",
    "Source provenance",
)
RETAINED_NOTE = (
    "This retained disposition is historical evidence, not authorization to restart the experiment. "
    "A new run needs a fresh question, frozen evaluator, explicit resource budget, and scoped tracking issue."
)
READING_NOTE = [
    "This page separates the retained decision from the material that informed it. A source may describe "
    "an external claim, a historical measurement, a local observation or a planned procedure; those "
    "evidence classes are not interchangeable. Follow the provenance before reusing a number or method.",
    "Status and disposition describe what the registry retained when this record was written. They are "
    "not a live promise, a newly run benchmark, or permission to restart the work. Unknown or unmeasured "
    "fields remain unknown rather than being treated as zero.",
    "To reuse the record, name the exact claim you need and trace it to its source; check whether the "
    "environment, revision, data, evaluator, hardware and budget match your use. If they do not, treat it "
    "as a hypothesis and run the smallest fresh comparison that could falsify it.",
]


@dataclass
class Section:
    title: str
    lines: Sequence[str | Table]  # a line starting with "- " is a list item; a Table is a table


def _text(value: str | None) -> str:
    return value if value is not None else UNKNOWN


def _words(value: str | None) -> str:
    """'runtime-perf' reads as 'runtime perf', as on the seed page."""
    return value.replace("-", " ") if value is not None else UNKNOWN


def _listed(values: list[str] | None) -> str:
    return ", ".join(values) if values else UNKNOWN


def sections(
    attempt: Attempt,
    by_id: Mapping[str, Attempt],
    meta: RegistryMeta,
    record_file: str | None,
    root: Path | None = None,
) -> list[Section]:
    """The dossier of ``attempt``: the seed page's sections in its order, then what the gate and
    the runs add (``root`` is the registry directory the runs are read from)."""
    a = attempt
    disposition = [_text(a.next_action), f"- Status: {a.status}.", RETAINED_NOTE]
    if a.continue_if is not None:
        disposition[1:1] = [f"- Continue if: {a.continue_if.text}"]
    contents = [
        [_text(a.evidence)],
        [_text(a.lesson)],
        [_text(a.failure_reason)],
        _scope(a),
        disposition,
        _lineage(a, by_id),
        _provenance(a, meta, record_file),
    ]
    result = [Section(title, lines) for title, lines in zip(SECTION_TITLES, contents, strict=True)]
    prereg = _preregistration(a, by_id)
    if prereg:
        result.append(Section("Pre-registration", prereg))
    admission = _admission(a)
    if admission:
        result.append(Section("Admission", admission))
    if a.runs and root is not None:
        # the run models and the workloads cost about 30 ms to import: only for a dossier with runs
        from .dossier_runs import condition_lines, run_lines

        if a.continue_if is not None:  # decided on the runs, as the registry holds them now
            disposition[1:2] = condition_lines(root, a)
        for run in a.runs:
            result.append(Section(f"Run {run.run_id}", run_lines(root, a.id, run)))
    result.append(Section("How to read this dossier", READING_NOTE))
    return result


def _scope(a: Attempt) -> list[str]:
    scope = [f"- Experiment family: {_words(a.family)}.", f"- Record kind: {_text(a.kind)}."]
    if a.kind == INFRASTRUCTURE_KIND:
        return [*scope, "- Methods, bases, objective, data rows: not applicable to infrastructure."]
    return [
        *scope,
        f"- Methods: {_listed(a.methods)}.",
        f"- Bases: {_listed(a.bases)}.",
        f"- Objective: {_text(a.objective)}.",
        f"- Data rows: {a.data_rows if a.data_rows is not None else UNKNOWN}.",
    ]


def _lineage(a: Attempt, by_id: Mapping[str, Attempt]) -> list[str]:
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
    later = successors(a.id, by_id)
    lines += [
        f"- Superseded by {'  ' * (s.depth - 1)}{s.attempt.id} ({s.attempt.status}): {_sentence(s.attempt.varied)}"
        for s in later
    ]
    if not later:
        lines.append("- Superseded by: nothing yet.")
    return lines


def _provenance(a: Attempt, meta: RegistryMeta, record_file: str | None) -> list[str]:
    confidence = a.failure_reason_confidence
    meaning = meta.confidence_vocabulary.get(confidence) if confidence else None
    return [
        f"The normalized record comes from {record_file or UNKNOWN}. The sources below are the tracked "
        "evidence and explanatory sources preserved with the record.",
        f"- Source: {_text(a.source)}.",
        f"- Evidence sources: {_listed(a.evidence_sources)}.",
        f"- Failure-reason confidence: {_text(confidence)}" + (f" ({meaning})" if meaning else "") + ".",
    ]


def _sentence(value: str | None) -> str:
    """The value as a list item's sentence: one final full stop, not two."""
    text = _text(value)
    return text if text.endswith((".", "?", "!")) else text + "."


def _preregistration(a: Attempt, by_id: Mapping[str, Attempt]) -> list[str]:
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
        f"- Budget: {a.budget.describe() if a.budget else UNKNOWN}.",
        f"- Tracking issue: {issue}.",
    ]
    if a.answers_disposition is not None:
        parent = by_id.get(a.varied_from) if a.varied_from else None
        asked = f" ({parent.id}: {parent.next_action})" if parent is not None and parent.next_action else ""
        lines.append(f"- Answer to the disposition it varies{asked}: {_sentence(a.answers_disposition)}")
    if a.streak_override is not None:
        lines.append(f"- Streak override (went on despite STOP AND RETHINK): {_sentence(a.streak_override)}")
    for run in a.runs or ():
        lines.append(
            f"- Run {run.run_id}: {run.status}" + (f", evaluator {run.evaluator}" if run.evaluator else "") + "."
        )
    return lines


def _admission(a: Attempt) -> list[str]:
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
    return lines


def render_text(attempt: Attempt, parts: list[Section], wrap: int | None = None) -> str:
    """The dossier as plain text: tables fitted to the terminal, and prose wrapped at ``wrap``
    columns when given (at a terminal; a pipe gets one line per paragraph, for grep)."""
    title = f"{attempt.name} ({attempt.id})"
    out = [*(textwrap.wrap(title, wrap, break_on_hyphens=False) if wrap else [title]), ""]
    for section in parts:
        out.append(section.title)
        for line in section.lines:
            if isinstance(line, Table):
                out += [plain(line.rows, line.headers, shrink=line.text_columns, width=wrap), ""]
            elif wrap is None or len(line) <= wrap:
                out.append(line)
            else:
                indent = "  " if line.startswith("- ") else ""
                out += textwrap.wrap(line, wrap, subsequent_indent=indent, break_on_hyphens=False)
    return "\n".join(out) + "\n"


def _as_lines(line: str | Table) -> list[str]:
    """A line, or a table as GitHub-flavoured markdown (an empty line after it)."""
    return markdown(line.rows, line.headers) if isinstance(line, Table) else [line]


def render_markdown(attempt: Attempt, parts: list[Section]) -> str:
    out = [f"# {attempt.name}", "", f"`{attempt.id}` · status **{attempt.status}**", ""]
    for section in parts:
        out += [f"## {section.title}", ""]
        for line in (text for item in section.lines for text in _as_lines(item)):
            out.append(line)
            if not line.startswith(("- ", "|")):
                out.append("")
        if out[-1] != "":
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def render_json(attempt: Attempt, parts: list[Section]) -> dict[str, Any]:
    return {
        "attempt": attempt.to_json_dict(),
        "sections": [{"title": s.title, "lines": [t for item in s.lines for t in _as_lines(item)]} for s in parts],
    }
