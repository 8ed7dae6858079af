"""MCP's ``list_runs``: the same runs in progress, field for field, as `ptreg runs --json`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from helpers import complete_record, write_registry

pytest.importorskip("mcp", reason="the mcp extra is not installed")


def test_list_runs_answers_what_ptreg_runs_json_prints(tmp_path: Path, cli) -> None:
    from ptreg.agents.server import build
    from ptreg.store.progress import ProgressWriter, make_in_progress_folder

    root = write_registry(tmp_path / "registry", [complete_record("seed-step")])
    running = make_in_progress_folder(root, "seed-step", "20260101T000000Z")
    writer = ProgressWriter(running, "seed-step", "20260101T000000Z")
    writer.update(phase="all rounds", round_=2, total=5, budget_left=30.0, line="epoch 3", force=True)
    make_in_progress_folder(root, "seed-step", "20260102T000000Z")  # made, and its process gone

    answered = anyio.run(build(root).call_tool, "list_runs", {})
    assert not answered.is_error
    printed = cli("-r", root, "runs", "--json")
    assert printed.code == 0, printed.err
    listed = json.loads(printed.out)
    found = answered.structured_content["runs"]
    for run in (*found, *listed):  # counted from the start up to the moment each was asked
        run.pop("elapsed")
    assert found == listed
    assert [(r["state"], r["round"], r["last_line"], r["pid"]) for r in found] == [
        ("running", 2, "epoch 3", os.getpid()),
        ("process gone", None, None, None),
    ]


def test_list_runs_of_no_registry_is_one_line(tmp_path: Path) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from ptreg.agents.server import build

    with pytest.raises(ToolError, match="not a registry directory") as refused:
        anyio.run(build(tmp_path / "none").call_tool, "list_runs", {})
    assert "\n" not in str(refused.value)
