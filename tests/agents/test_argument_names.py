"""One vocabulary of argument names (``records/arguments.py``): every MCP tool names its
arguments from it (a list plural, a single value singular), and a refusal tells an MCP client
what to give in the tool's arguments, never in the command line's flags."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers import snapshot

pytest.importorskip("mcp.server.mcpserver", reason="the mcp extra is not installed")
from mcp.server.mcpserver.exceptions import ToolError
from test_server import _proposal, _registry

from ptreg.agents.server import build
from ptreg.records.arguments import ARGUMENTS

# A command-line flag anywhere in a text: two dashes opening a word.
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _is_list(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "array" or any(s.get("type") == "array" for s in schema.get("anyOf", ()))


def test_every_tool_names_its_arguments_from_the_vocabulary(tmp_path: Path) -> None:
    root, _ = _registry(tmp_path / "registry")
    tools = anyio.run(build(root).list_tools)
    assert tools
    for tool in tools:
        for name, schema in tool.input_schema.get("properties", {}).items():
            assert name in ARGUMENTS, f"{tool.name}: {name} is not in the vocabulary"
            assert _is_list(schema) == ARGUMENTS[name].many, f"{tool.name}: {name} (a list is plural)"
    named = {t.name: set(t.input_schema.get("properties", {})) for t in tools}
    # an attempt is attempt_id wherever it is named; list-valued filters are plural everywhere
    for tool in ("propose", "show_attempt", "lineage", "run_attempt", "conclude_attempt"):
        assert "attempt_id" in named[tool] and "id" not in named[tool], tool
    assert {"methods", "bases"} <= named["list_attempts"] & named["precedents"] & named["propose"]
    assert not {"method", "base", "status"} & named["list_attempts"]


def _refusal(root: Path, tool: str, arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as refused:
        anyio.run(build(root).call_tool, tool, arguments)
    text = str(refused.value)
    assert "\n" not in text
    return text


def test_a_refusal_through_mcp_names_the_tools_arguments_and_no_flag(tmp_path: Path, cli) -> None:
    root, ref = _registry(tmp_path / "registry")
    before = snapshot(root)
    # the gate: a question asked before, no plan and no budget; each remedy names what to give
    stale = _proposal(ref, budget_seconds=None, worked_if=None)
    gate = _refusal(root, "propose", stale)
    assert not FLAG.search(gate), gate
    for said in ("vary it with varied_from seed-step", "worked_if COND", "budget_seconds S", "margins METRIC"):
        assert said in gate, said
    assert "`show_attempt` with attempt_id seed-step" in gate
    # a field the proposal lacks is named as the argument, never as the record's field
    missing = _refusal(root, "propose", {**stale, "attempt_id": ""})
    assert "missing attempt_id" in missing and not FLAG.search(missing), missing
    shaped = _refusal(root, "propose", _proposal(ref, kind="infrastructure", objective=None, varied_from=None))
    assert "drop methods" in shaped and not FLAG.search(shaped), shaped
    empty = _refusal(root, "precedents", {})
    assert "give objective, methods, bases or family" in empty and not FLAG.search(empty), empty
    # a run and a conclusion refused
    ran = _refusal(root, "conclude_attempt", {"attempt_id": "seed-step", "lesson": "x", "next_action": "y"})
    assert "seed-step" in ran and not FLAG.search(ran), ran
    assert snapshot(root) == before

    # the same refusal on the command line names the flags, from the same vocabulary
    args = ["-r", root, "new"]
    for name, value in stale.items():
        if value is not None:
            for item in value if isinstance(value, list) else [value]:
                args += [ARGUMENTS["attempt_id" if name == "id" else name].flag, str(item)]
    on_the_command_line = cli(*args)
    assert on_the_command_line.code == 1
    assert "--varied-from seed-step" in on_the_command_line.out and "--budget-seconds S" in on_the_command_line.out
    assert "`ptreg show seed-step`" in on_the_command_line.out


def test_a_conclusion_refused_through_mcp_names_arguments(tmp_path: Path) -> None:
    root, ref = _registry(tmp_path / "registry")
    server = build(root)
    asked = "How long does the tiny step take when nothing is varied?"
    anyio.run(server.call_tool, "propose", _proposal(ref, question=asked))
    verdict = {"attempt_id": "faster-step", "lesson": "x", "next_action": "y"}
    no_run = _refusal(root, "conclude_attempt", verdict)
    assert "`run_attempt` with attempt_id faster-step" in no_run and not FLAG.search(no_run), no_run
    unsure = _refusal(root, "conclude_attempt", {**verdict, "status": "not-tried"})
    assert unsure.endswith("status not-tried is not a verdict; conclude with what the run showed"), unsure
    reason = _refusal(root, "conclude_attempt", {**verdict, "failure_reason": "slow"})
    assert not FLAG.search(reason), reason
    record = json.loads((root / "faster-step.json").read_text(encoding="utf-8"))
    assert record["status"] == "not-tried"


def test_an_argument_the_tool_does_not_take_is_refused_not_dropped(tmp_path: Path) -> None:
    """A name of another tool (the singular filter, the record's ``id``) would otherwise be
    dropped, and the answer widened unseen."""
    root, ref = _registry(tmp_path / "registry")
    listed = _refusal(root, "list_attempts", {"method": ["cache-blocking"]})
    assert "list_attempts: no argument 'method' (did you mean methods?)" in listed, listed
    proposed = _refusal(root, "propose", {**_proposal(ref), "id": "faster-step"})
    assert "no argument 'id'" in proposed and not (root / "faster-step.json").exists(), proposed
    assert _refusal(root, "streaks", {"limit": 3}).endswith("streaks: no argument 'limit'; it takes: none")


def test_list_items_refuses_in_the_tools_arguments(tmp_path: Path) -> None:
    from item_runs import registry

    root = registry(tmp_path)
    same = _refusal(root, "list_items", {"attempt_id": "graded", "arm": "champion"})
    assert "arm and over both name champion" in same and not FLAG.search(same), same
