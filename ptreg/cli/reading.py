"""`ptreg show|list|lineage|streaks|coverage`: reading the registry."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import closing
from enum import StrEnum
from typing import TYPE_CHECKING

import typer

from ..errors import EXIT_UNUSABLE, PtregError
from ..text import counted, shorten
from .common import JsonFlag, load_index, print_json, registry_dir, say, say_wrapped

if TYPE_CHECKING:
    from ..records.ledger import Outcome


class Format(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


SHOWN_RUNS = 3  # the runs `show` shows unless told: the latest, with a line counting the rest


def _shown_runs(given: str | None) -> int | None:
    """--runs as a number of runs (every run: a number past any count), or None when not given."""
    if given is None:
        return None
    if given.strip().lower() == "all":
        return sys.maxsize
    try:
        number = int(given)
    except ValueError:
        number = -1
    if number < 0:
        raise PtregError(f"--runs: {shorten(given)} is not a number of runs (0 or more) or all", EXIT_UNUSABLE)
    return number or sys.maxsize


def show(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt's id."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", metavar="FORMAT", help="text, markdown or json."),
    as_json: bool = typer.Option(False, "--json", help="The same as --format json."),
    runs: str | None = typer.Option(
        None,
        "--runs",
        metavar="N|all",
        help=f"Show the latest N runs, latest first, and count the rest (default: {SHOWN_RUNS} as text or "
        "markdown, all as JSON); all or 0 shows every run.",
    ),
) -> None:
    """The dossier of one attempt: evidence, lesson, why it stopped, scope, disposition, lineage, sources.

    Its runs latest first: as text or markdown the latest few (--runs says how many) and a line counting the earlier ones; --runs N or --runs all for more."""
    from ..records.refs import check_id
    from ..store.lineage_read import read_lineage
    from ..views.dossier import render_json, render_markdown, render_text, sections
    from ..views.tables import terminal_width

    check_id(attempt_id)
    wanted = _shown_runs(runs)
    with closing(load_index(warn=False)) as index:
        if index.summary(attempt_id) is None:
            from ..store.directory import read_attempt

            read_attempt(index.root, attempt_id)  # the error a direct read gives: not valid, or the closest ids
        lineage = read_lineage(index, attempt_id)
        vocabularies = index.vocabularies()
    attempt = lineage.attempt
    if wanted is None and not (as_json or fmt is Format.json):
        wanted = SHOWN_RUNS  # a screenful as text; a script gets every run, as the MCP tool does
    root, model = index.root, lineage.model
    parts = sections(attempt, lineage.by_id, vocabularies, lineage.record_file, root, model, latest=wanted)
    if as_json or fmt is Format.json:
        print_json(render_json(attempt, parts))
    elif fmt is Format.markdown:
        say(render_markdown(attempt, parts), nl=False)
    else:
        wrap = terminal_width() if sys.stdout.isatty() else None
        say(render_text(attempt, parts, wrap), nl=False)


def list_attempts(
    status: list[str] = typer.Option([], "--status", metavar="STATUS", help="Only this status (repeatable)."),
    family: list[str] = typer.Option([], "--family", metavar="FAMILY", help="Only this family (repeatable)."),
    kind: list[str] = typer.Option([], "--kind", metavar="KIND", help="Only this kind (repeatable)."),
    method: list[str] = typer.Option(
        [], "--method", metavar="METHOD", help="Uses any of these methods (repeatable; OR)."
    ),
    base: list[str] = typer.Option([], "--base", metavar="BASE", help="Uses any of these bases (repeatable; OR)."),
    objective: list[str] = typer.Option(
        [], "--objective", metavar="OBJECTIVE", help="Only this objective (repeatable)."
    ),
    failures_only: bool = typer.Option(False, "--failures-only", help="Only failed, regressed and inconclusive."),
    continuable: bool = typer.Option(
        False,
        "--continuable",
        help="Only attempts whose disposition has a condition (--continue-if) that holds on their latest complete run.",
    ),
    blocked: bool = typer.Option(
        False, "--blocked", help="Only attempts whose condition does not hold there: the numbers say stop."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """List attempts, filtered by shape: has anything like this been tried?

    In the ledger's order (as imported, then as created). With no filter, every attempt is listed.

    --continuable and --blocked decide each condition on the runs as they are now; an attempt whose condition cannot be decided is in neither.
    """
    from ..records.ledger import STATUSES, Filter
    from ..views.queries import (
        AWAITS_CONCLUSION,
        AWAITS_LEGEND,
        DEVIATES,
        DEVIATES_LEGEND,
        list_row,
        select,
        shown_status,
    )
    from ..views.tables import with_free_text

    unknown = [s for s in status if s not in STATUSES]
    if unknown:
        raise PtregError(f"--status: unknown status {unknown[0]!r} (one of: {', '.join(STATUSES)})")
    if continuable and blocked:
        raise PtregError("--continuable and --blocked exclude each other: a condition is true or false, not both")
    query = Filter(status, family, kind, method, base, objective, failures_only)
    with closing(load_index()) as index:
        total = index.valid()
        # the table alone: rows as SQL gives them, where SQL decides each (Index.list_rows);
        # tests hold them to the path below
        rows = None if continuable or blocked or as_json else index.list_rows(query)
        if rows is None:
            # the index narrows in SQL, then the one filter every read uses decides
            found = select(index.candidates(query), query)
    if rows is None:
        root = registry_dir()
        if continuable or blocked:
            # reads the records and runs of attempts with a condition, and only theirs
            from ..store.full_read import read_summarized
            from ..views.dispositions import with_truth

            whole = {a.stem: read_summarized(root, a) for a in found if a.has_condition}

            def undecided(why: str) -> None:
                say(f"ptreg: warning: {why} (not decided)", err=True, one_line=True)

            kept = {id(a) for a in with_truth(root, whole.values(), continuable, undecided)}
            found = [a for a in found if a.stem in whole and id(whole[a.stem]) in kept]
        if as_json:
            from ..store.full_read import read_summarized

            # as the ledger holds them, in its order: the whole records, read from their files
            print_json([read_summarized(root, a).to_ledger_dict() for a in found])
            return
        rows = [list_row(a) for a in found]
    # a not-tried attempt with a run awaits its conclusion: said in its row (few are not-tried)
    root = registry_dir()
    rows = [(r[0], shown_status(root, r[0], r[1]), *r[2:]) if r[1] == "not-tried" else r for r in rows]
    if rows:
        headers = ["id", "status", "family", "kind", "objective", "methods", "lesson"]
        # every name whole: methods and objective left out while the lesson would be unreadably
        # narrow, then the lesson under its row; kind and family only when they do not fit at all
        say(with_free_text(rows, headers, optional=(5, 4), last=(3, 2)))
    say(f"{len(rows)} of {counted(total, 'attempt')}")
    if any(r[1] == AWAITS_CONCLUSION for r in rows):
        say(AWAITS_LEGEND)
    if any(r[1].endswith(DEVIATES) for r in rows):
        say(DEVIATES_LEGEND)


def lineage(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt's id."),
    as_json: bool = JsonFlag,
) -> None:
    """The varied_from chain of an attempt, oldest first, and what superseded it.

    The attempts that vary it directly come first; then, indented, the rest of what descends from it.
    """
    from ..records.ledger import Summary
    from ..records.refs import check_id
    from ..views.lineage import lineage_json, lineage_lines

    check_id(attempt_id)
    with closing(load_index(warn=False)) as index:
        if index.summary(attempt_id) is None:
            from ..store.directory import read_attempt

            read_attempt(index.root, attempt_id)  # the error a direct read gives: not valid, or the closest ids
        by_id: dict[str, Summary] = {a.id: a for a in index.summaries_of(index.lineage_ids(attempt_id))}
    if as_json:
        print_json(lineage_json(attempt_id, by_id))
        return
    for line in lineage_lines(attempt_id, by_id, index.root):
        say(line)


def streaks(as_json: bool = JsonFlag) -> None:
    """Per objective, the negatives at the tip of its deepest chain: CAUTION at 2, STOP AND RETHINK at 3+.

    Most negatives first, then the longest chain, then the ledger's order. Each chain shows the negatives at its tip first (oldest first), then what came before them.
    """
    from ..views.streaks import OK, streak_chains, streaks_of
    from ..views.tables import plain

    with closing(load_index()) as index:
        # found from every attempt's edge and status; whole summaries only for the chains shown
        chains = index.remembered("streak-chains", lambda: streak_chains(index.links()))
        found = streaks_of(chains, {a.id: a for a in index.summaries_of(sorted({i for _, ids in chains for i in ids}))})
    if as_json:
        print_json([s.to_json() for s in found])
        return
    rows = [[s.level, s.objective, s.negatives, len(s.chain), _tip_first(s.chain, s.trailing)] for s in found]
    headers = ["level", "objective", "negatives", "depth", "chain (negatives at the tip first)"]
    say(plain(rows, headers))  # the chain is never cut: a table too wide is stacked
    for s in found:
        if s.level != OK:
            say()
            say_wrapped(
                f"{s.level}: {s.objective} ends in {s.negatives} negatives at {s.tip.id}: "
                + " -> ".join(a.id for a in s.trailing)
            )
            if len(s.chain) > len(s.trailing):
                say_wrapped(f"  whole chain (oldest first): {' -> '.join(a.id for a in s.chain)}")
            say_wrapped(f"  tip lesson: {s.tip.lesson or 'unknown'}")


def _tip_first(chain: Sequence[Outcome], trailing: Sequence[Outcome]) -> str:
    """The negatives at the tip first, since a table cuts long cells at the right; then, in
    brackets, what came before them. A chain with no negatives at its tip reads oldest first."""
    ids = [a.id for a in chain]
    if not trailing:
        return " -> ".join(ids)
    negatives = " -> ".join(a.id for a in trailing)
    # not-tried proposals at the tip come after the negatives they do not break
    after = ids[ids.index(trailing[-1].id) + 1 :]
    text = negatives + (f" (then not tried: {' -> '.join(after)})" if after else "")
    before = ids[: ids.index(trailing[0].id)]
    return text + (f" (after {' -> '.join(before)})" if before else "")


def coverage(as_json: bool = JsonFlag) -> None:
    """How many non-infrastructure attempts carry each shape field, and the vocabulary in use.

    A term is marked when it is used but not in its vocabulary, and when it is in it without a definition (taken from a ledger that used it without defining it; `ptreg vocab add` defines it).
    """
    from ..views.queries import coverage as compute_coverage
    from ..views.tables import plain

    with closing(load_index()) as index:
        result = compute_coverage(index.summaries(), index.vocabularies())
    if as_json:
        print_json(result.to_json())
        return
    say(f"shape fields of {result.shaped_total} non-infrastructure attempts")
    rows = [[f.field, f.carried, f.total, "n/a" if f.share is None else f"{f.share:.0%}"] for f in result.fields]
    say(plain(rows, ["field", "carried", "of", "share"]))
    say("\nvocabulary in use")
    labels = {True: "", False: "NOT IN VOCABULARY", None: "(no vocabulary)"}
    rows = [
        [t.vocabulary, t.term, t.count, "imported without a definition" if t.without_definition else labels[t.defined]]
        for t in result.terms
    ]
    say(plain(rows, ["vocabulary", "term", "attempts", "note"]))
