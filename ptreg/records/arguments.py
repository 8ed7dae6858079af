"""The names a caller gives ptreg's inputs: one vocabulary for the command line's flags and the
MCP tools' arguments (docs/agents.md), and whose names a hint is written in.

An MCP argument is named after its concept: ``attempt_id`` wherever an attempt is named, and a
list-valued argument in the plural (``methods``, ``statuses``), a single value in the singular.
The command line names the same concept by a flag; a repeatable flag is singular (``--method``),
given once per value. A refusal that says how to satisfy it names an input through ``named``:
``--varied-from`` on the command line, ``varied_from`` to an MCP client. The front end says which
caller it serves (``speaking``); the command line is the default.

Nothing here imports more than the standard library, so that the command line builds its
options from it without loading the rest of ptreg.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Argument:
    flag: str  # on the command line
    many: bool = False  # a list: a plural argument, a flag given once per value


ARGUMENTS: dict[str, Argument] = {
    # naming an attempt or a run
    "attempt_id": Argument("--id"),
    "run_id": Argument("--run-id"),
    # a proposal (``gate/proposal_input.py``)
    "name": Argument("--name"),
    "family": Argument("--family"),
    "kind": Argument("--kind"),
    "question": Argument("--question"),
    "hypothesis": Argument("--hypothesis"),
    "varied_from": Argument("--varied-from"),
    "varied": Argument("--varied"),
    "methods": Argument("--method", many=True),
    "bases": Argument("--base", many=True),
    "objective": Argument("--objective"),
    "data_rows": Argument("--data-rows"),
    "evaluator": Argument("--evaluator"),
    "budget_seconds": Argument("--budget-seconds"),
    "budget_steps": Argument("--budget-steps"),
    "budget_repeats": Argument("--budget-repeats"),
    "budget_threads": Argument("--budget-threads"),
    "budget_memory_mb": Argument("--budget-memory-mb"),
    "tracking_issue": Argument("--tracking-issue"),
    "answers_disposition": Argument("--answers-disposition"),
    "override_streak": Argument("--override-streak"),
    "source": Argument("--source"),
    "worked_if": Argument("--worked-if"),
    "regressed_if": Argument("--regressed-if"),
    "margins": Argument("--margin", many=True),
    "decide_on_runs": Argument("--decide-on-runs"),
    "dry_run": Argument("--dry-run"),
    # filters of `list` (any of several values)
    "statuses": Argument("--status", many=True),
    "families": Argument("--family", many=True),
    "kinds": Argument("--kind", many=True),
    "objectives": Argument("--objective", many=True),
    "failures_only": Argument("--failures-only"),
    "continuable": Argument("--continuable"),
    "blocked": Argument("--blocked"),
    "limit": Argument("--limit"),
    # a conclusion
    "status": Argument("--status"),
    "lesson": Argument("--lesson"),
    "next_action": Argument("--next-action"),
    "deviation": Argument("--deviation"),
    "continue_if": Argument("--continue-if"),
    "failure_reason": Argument("--failure-reason"),
    "confidence": Argument("--confidence"),
    "evidence": Argument("--evidence"),
    "evidence_sources": Argument("--evidence-source", many=True),
    # the items of a run of arms
    "metric": Argument("--metric"),
    "arm": Argument("--arm"),
    "over": Argument("--over"),
    "verdict": Argument("--won, --lost or --tied"),
}

# A field of a proposal whose argument is named otherwise: the record's ``id`` is the attempt's.
FIELD_ARGUMENTS = {"id": "attempt_id"}


class Caller(enum.Enum):
    COMMAND_LINE = "command line"
    MCP = "MCP"


_caller: ContextVar[Caller] = ContextVar("ptreg_caller", default=Caller.COMMAND_LINE)


@contextmanager
def speaking(caller: Caller) -> Iterator[None]:
    """Name inputs as ``caller`` does for what runs inside (a tool call of the MCP server)."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def argument_of(field: str) -> str:
    """The argument a proposal's field is given as."""
    return FIELD_ARGUMENTS.get(field, field)


def flag_of(argument: str) -> str:
    return ARGUMENTS[argument].flag


def named(argument: str) -> str:
    """The input ``argument`` as the caller names it: its flag on the command line, the argument
    itself through MCP."""
    return flag_of(argument) if _caller.get() is Caller.COMMAND_LINE else argument


def named_field(field: str) -> str:
    """A proposal's field as the caller names it."""
    return named(argument_of(field))


# Each command a hint may send the caller to, and the MCP tool that does the same; the commands
# that take the attempt as their first word rather than as a flag.
TOOLS = {
    "new": "propose",
    "run": "run_attempt",
    "show": "show_attempt",
    "list": "list_attempts",
    "conclude": "conclude_attempt",
    "lineage": "lineage",
    "precedents": "precedents",
}
ATTEMPT_FIRST = ("run", "show", "conclude", "lineage")


def invoked(command: str, **arguments: str) -> str:
    """How the caller does ``command`` with ``arguments``: `ptreg run x` on the command line,
    `run_attempt` with attempt_id x through MCP."""
    if _caller.get() is Caller.MCP:
        given = ", ".join(f"{name} {value}" for name, value in arguments.items())
        return f"`{TOOLS[command]}`" + (f" with {given}" if given else "")
    words = ["ptreg", command]
    for name, value in arguments.items():
        words += [value] if name == "attempt_id" and command in ATTEMPT_FIRST else [flag_of(name), value]
    return f"`{' '.join(words)}`"
