"""`ptreg disposition check`: every disposition condition of the registry, decided again."""

from __future__ import annotations

from contextlib import closing

import typer

from ..errors import EXIT_CHECK_FAILED
from ..text import counted
from .common import JsonFlag, RegistryCommand, help_when_alone, load_index, print_json, registry_dir, say

app = typer.Typer(
    name="disposition",
    help="Dispositions decided by numbers: the continue-if conditions of concluded attempts (docs/conditions.md).",
    invoke_without_command=True,
    callback=help_when_alone,
)


@app.command("check", cls=RegistryCommand)
def check(
    attempt_ids: list[str] = typer.Argument(
        None, metavar="ID...", help="The attempts to check (default: every attempt with a condition)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Decide every continue-if condition again on its attempt's latest complete run, with the values it reads.

    For CI: exit 1 when a condition that held when its attempt was concluded does not hold now (a run's results edited or removed, or a ptreg that reads them differently). A condition that cannot be decided, or an attempt without one, is reported and fails nothing.
    """
    from ..records.refs import check_id
    from ..store.full_read import indexed_attempt, read_summarized
    from ..views.dispositions import decide_all

    with closing(load_index()) as index:  # which attempts carry a condition; their records are read whole
        if attempt_ids:
            chosen = [indexed_attempt(index, check_id(i)) for i in attempt_ids]
        else:
            chosen = [read_summarized(index.root, a) for a in index.with_condition()]
    found = decide_all(registry_dir(), chosen)
    changed = [d for d in found if d.turned_false]
    if as_json:
        print_json(
            {
                "conditions": [d.to_json() for d in found],
                "without_condition": [a.id for a in chosen if a.continue_if is None],
                "turned_false": [d.attempt.id for d in changed],
            }
        )
    else:
        then = {True: "held", False: "did not hold", None: "could not be decided"}
        for a in chosen:
            if a.continue_if is None:
                say(f"{a.id}: no condition (its disposition is prose only)")
        for d in found:
            say(f"{d.attempt.id}: {d.condition.text}")
            say(f"  now it {d.summary()}")
            say(f"  at conclusion it {then[d.condition.held_at_conclusion]} (run {d.condition.run})")
            if d.turned_false:
                say("  CHANGED: it held at conclusion and does not hold now")
        counts = {
            word: sum(1 for d in found if d.truth is truth)
            for truth, word in ((True, "hold"), (False, "do not"), (None, "undecided"))
        }
        say(
            f"{counted(len(found), 'condition')}: {counts['hold']} hold, {counts['do not']} do not, "
            f"{counts['undecided']} cannot be decided; "
            + (
                f"{len(changed)} held at conclusion and no longer do"
                if changed
                else "none has turned false since its conclusion"
            )
        )
    if changed:
        raise typer.Exit(EXIT_CHECK_FAILED)
