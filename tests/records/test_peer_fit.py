"""The peer ledger sorted by how ptreg would run each attempt (tests/data/peer_fit.json): a
built-in workload, the command workload (what it needs, whether that fits now, what stands in
the way), or prose. docs/long-experiments.md quotes its counts and rows, checked here; with
../shared, the file must hold every attempt of the ledger once, in its order, and carry over
none of its sentences."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from helpers import REPO

FIT = json.loads((REPO / "tests" / "data" / "peer_fit.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = FIT["entries"]
PAGE = REPO / "docs" / "long-experiments.md"
ROUTES = ("built-in", "command", "prose")
LEDGER_TEXT = ("name", "evidence", "failure_reason", "lesson", "next_action")
COPIED_WORDS = 6  # as tests/records/test_peer_plans.py: this many words in a row is a copied sentence


def commands() -> list[dict[str, Any]]:
    return [e for e in ENTRIES if e["route"] == "command"]


def test_every_entry_has_a_route_and_a_command_entry_its_needs_fit_and_obstacle() -> None:
    assert ENTRIES and len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    for entry in ENTRIES:
        assert entry["route"] in ROUTES, entry["id"]
        if entry["route"] == "command":
            assert entry["needs"] and set(entry["needs"]) <= set(FIT["needs"]), entry["id"]
            assert entry["fits"] in FIT["fits"], entry["id"]
            assert len(entry["in_the_way"]) > 20, entry["id"]
        else:
            assert len(entry["why"]) > 10, entry["id"]


def test_the_page_gives_the_counts_and_rows_this_file_holds() -> None:
    page = PAGE.read_text(encoding="utf-8")
    routes = Counter(e["route"] for e in ENTRIES)
    fits = Counter(e["fits"] for e in commands())
    summary = (
        f"**{routes['built-in']} attempts run under a built-in workload, {routes['prose']} are prose only, and "
        f"{routes['command']} need the command workload. Of those {routes['command']}, {fits['now']} now fit whole, "
        f"{fits['in-part']} fit in part, and {fits['not-yet']} does not fit yet.**"
    )
    assert summary in page
    needs = Counter(n for e in commands() for n in e["needs"])
    shown = re.findall(r"^\| [^|]+ \| (\d+) \| [^|]+\|$", page, re.M)
    assert sorted(int(n) for n in shown) == sorted(needs.values()), shown
    for entry in commands():
        row = f"| `{entry['id']}` | {', '.join(entry['needs'])} | {entry['fits']} | {entry['in_the_way']} |"
        assert row in page, entry["id"]
    for entry in ENTRIES:
        if entry["route"] != "command":
            assert f"| `{entry['id']}` | {entry['route']} | {entry['why']} |" in page, entry["id"]


def _words(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i : i + COPIED_WORDS]) for i in range(len(words) - COPIED_WORDS + 1)}


def test_the_entries_are_the_ledgers_attempts_in_its_order(shared_raw: dict[str, Any]) -> None:
    assert [e["id"] for e in ENTRIES] == [a["id"] for a in shared_raw["attempts"]]


def test_no_sentence_of_the_ledger_is_carried_over(shared_raw: dict[str, Any]) -> None:
    ledger = set().union(*(_words(" ".join(str(a.get(f, "")) for f in LEDGER_TEXT)) for a in shared_raw["attempts"]))
    for entry in ENTRIES:
        text = entry.get("in_the_way") or entry["why"]
        assert not _words(text) & ledger, entry["id"]
