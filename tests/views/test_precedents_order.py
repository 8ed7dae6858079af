"""`precedents` ranks the shared ledger as the source project's own query tool does: a shared
objective outweighs sharing a method and sharing a base (each counted once, however many terms
are shared), failures come first among equals, and then the ledger's order. The expected order
is computed here from that rule over the shared file itself, for the shape of every shaped
attempt in it and for each method and base alone."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

from ptreg.store.index import open_index
from ptreg.views.precedents import Shape, precedents

NEGATIVE = {"failed", "regressed", "inconclusive"}


def _expected(raw: list[dict[str, Any]], objective: str | None, methods: list[str], bases: list[str]) -> list[str]:
    weighed = []
    for position, a in enumerate(raw):  # the file's order is the ledger's
        shares_objective = objective is not None and a.get("objective") == objective
        kinds_shared = bool(set(methods) & set(a.get("methods") or ())) + bool(set(bases) & set(a.get("bases") or ()))
        if shares_objective or kinds_shared:
            weighed.append(((-int(shares_objective), -kinds_shared, -int(a["status"] in NEGATIVE), position), a["id"]))
    return [attempt_id for _, attempt_id in sorted(weighed)]


def _shapes(raw: list[dict[str, Any]]) -> list[tuple[str | None, list[str], list[str]]]:
    shapes = [(a.get("objective"), a.get("methods") or [], a.get("bases") or []) for a in raw if a.get("objective")]
    shapes += [(None, [m], []) for m in sorted({m for a in raw for m in a.get("methods") or ()})]
    shapes += [(None, [], [b]) for b in sorted({b for a in raw for b in a.get("bases") or ()})]
    return shapes


def test_precedents_of_the_shared_ledger_in_its_own_tools_order(shared_registry: Path, shared_raw) -> None:
    raw = shared_raw["attempts"]
    shapes = _shapes(raw)
    assert len(shapes) >= 60
    with closing(open_index(shared_registry)) as index:
        summaries = index.summaries()
    for objective, methods, bases in shapes:
        found = precedents(Shape(objective, tuple(methods), tuple(bases)), summaries, None)
        assert [p.attempt.id for p in found] == _expected(raw, objective, methods, bases), (objective, methods, bases)


def test_precedents_through_the_command_line(cli, shared_registry: Path, shared_raw) -> None:
    raw = shared_raw["attempts"]
    # three shared methods and no base rank below one method and the base: kinds of shape count,
    # not terms; and ties come in the ledger's order, not by id
    args = ["--objective", "sql-execution", "--method", "sft", "--method", "lora", "--method", "dora"]
    args += ["--base", "qwen3-0.6b", "--limit", "100", "--json"]
    shown = cli("-r", shared_registry, "precedents", *args).json()
    assert [p["id"] for p in shown] == _expected(raw, "sql-execution", ["sft", "lora", "dora"], ["qwen3-0.6b"])
