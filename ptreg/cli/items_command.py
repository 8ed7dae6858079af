"""`ptreg items`: the items of a run of arms that an arm won, lost or tied against another."""

from __future__ import annotations

import typer

from ..errors import UnusableInput
from .common import JsonFlag, print_json, registry_dir, say, say_wrapped


def items(
    run: str = typer.Argument(
        ..., metavar="RUN", help="The run: ATTEMPT/RUN_ID, or ATTEMPT for its latest complete run (as `compare`)."
    ),
    lost: bool = typer.Option(False, "--lost", help="List the items the arm lost (worse than --over)."),
    won: bool = typer.Option(False, "--won", help="List the items the arm won (better than --over)."),
    tied: bool = typer.Option(False, "--tied", help="List the items tied (the same value on average)."),
    arm: str | None = typer.Option(
        None, "--arm", metavar="ARM", help="The arm to read (default: every arm but the one it is compared with)."
    ),
    over: str | None = typer.Option(
        None, "--over", metavar="ARM", help="The arm it is compared with (default: the evaluator's baseline)."
    ),
    metric: str | None = typer.Option(
        None, "--metric", metavar="METRIC", help="One metric (default: every metric with per-item results)."
    ),
    limit: int = typer.Option(
        0, "--limit", metavar="N", help="At most N items per metric, the worst losses first (0: all)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """The items behind `show`'s won/lost/tied: each item's value in both arms, their difference and its verdict, the worst losses first.

    An item counts as the run's comparison counts it: its difference between the arms, seed by seed, averaged over the seeds both arms scored it in; won when that is better in the metric's direction, lost when worse, tied when zero. Only items every seed of both arms scored are listed (the others are counted as left out, never filled in). --lost, --won and --tied keep those verdicts (any of them; all by default); the summary line counts every item. A run without per-item results (a command that wrote no PTREG_ITEMS lines), an unknown run, arm or metric, is unusable input.
    """
    from ..views.items import run_items
    from ..views.tables import plain

    if limit < 0:
        raise UnusableInput(f"--limit {limit}: a count of items, 0 for all")
    most = limit or None

    verdicts = [v for v, asked in (("won", won), ("lost", lost), ("tied", tied)) if asked]
    found = run_items(registry_dir(), run, metric=metric, arm=arm, over=over)
    for listed in found.metrics:
        problem = listed.disagreement()
        if problem is not None:
            say(f"ptreg: warning: {found.label}: {problem}", err=True, one_line=True)
    if as_json:
        print_json(found.to_json(verdicts, most))
        return
    for n, listed in enumerate(found.metrics):
        if n:
            say()
        say_wrapped(
            f"{found.label}: {listed.metric} ({listed.unit}, {listed.better} is better), {listed.arm} over {listed.over}"
        )
        shown = listed.shown(verdicts, most)
        if shown:
            # the item's id is free text a harness wrote: cut to fit, where the numbers and verdict never are
            say(plain([r.cells() for r in shown], listed.headers, shrink=(0,)))
        else:
            say(f"no {' or '.join(verdicts)} items")
        chosen = len(listed.shown(verdicts))
        if chosen > len(shown):
            say(f"... and {chosen - len(shown)} more (--limit {limit})")
        say_wrapped(listed.summary())
