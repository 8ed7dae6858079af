"""`ptreg next`: what to try next, ranked, each suggestion citing the records and runs it comes from."""

from __future__ import annotations

import textwrap
from contextlib import closing

import typer

from ..errors import EXIT_UNUSABLE, PtregError
from .common import JsonFlag, load_index, print_json, say

LATEST_RUNS = 3  # a suggestion names this many of its runs; --json lists them all


def next_attempts(
    limit: int = typer.Option(10, "--limit", metavar="N", help="Show at most this many (0: all)."),
    as_json: bool = JsonFlag,
) -> None:
    """What to try next: runs to conclude, attempts to run, conditions that hold or stopped holding, streaks to leave by a new axis, measured headroom, next actions nobody has taken up.

    In that order of kinds; within a kind as docs/agents.md says. Each suggestion cites the attempts and runs it comes from; nothing is suggested that no record says.
    """
    from ..views.suggestions import suggestions_of

    if limit < 0:
        raise PtregError(f"--limit must be 0 or more, not {limit}", EXIT_UNUSABLE)
    with closing(load_index()) as index:
        answer = suggestions_of(index).limited(limit)
    for why in answer.unreadable:
        say(f"ptreg: warning: {why} (nothing suggested from it; run `ptreg validate`)", err=True, one_line=True)
    if as_json:
        print_json(answer.model_dump(mode="json"))
        return
    shown, total = answer.suggestions, answer.total
    if not shown:
        say("nothing to suggest: no run waits for a verdict, no condition is decided, no streak, no headroom recorded")
        return
    for s in shown:
        say(f"{s.rank}. {s.kind}: {', '.join(s.attempts)}")
        for label, text in (("why", s.reason), ("do", s.action)):
            say(_fill(text, f"   {label}: "))
        if s.runs:
            say(_fill(_runs_text(s.runs), "   runs: "))
    more = total - len(shown)
    say(f"\n{len(shown)} of {total} suggestion(s)" + (f"; --limit 0 shows all {total}" if more else ""))


def _runs_text(runs: list[str]) -> str:
    """The runs a suggestion cites, latest last as the records list them: all of a few, or the
    count and the latest few of many."""
    if len(runs) <= LATEST_RUNS:
        return ", ".join(runs)
    latest = ", ".join(reversed(runs[-LATEST_RUNS:]))
    return f"{len(runs)}; the latest {latest} (--json lists all)"


def _fill(text: str, head: str) -> str:
    from ..views.tables import terminal_width

    # ids and run folders hold hyphens: a line breaks between words only, never inside an id
    return textwrap.fill(
        text,
        terminal_width(),
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_on_hyphens=False,
        break_long_words=False,
    )
