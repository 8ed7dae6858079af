"""The MCP tool `list_items`: the same items `ptreg items --json` lists, under the names every
tool uses (attempt_id, run_id, metric, arm, over, verdict), and one-line errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from item_runs import RUN, registry

from helpers import snapshot

mcp_client = pytest.importorskip("mcp.client.stdio", reason="the mcp extra is not installed")
from mcp.client.session import ClientSession  # noqa: E402 - only once the SDK is known to be there


def test_list_items_answers_what_the_command_does_and_refuses_in_one_line(tmp_path: Path, cli) -> None:
    root = registry(tmp_path)
    expected = cli("-r", root, "items", "graded", "--arm", "challenger", "--lost", "--json").json()
    before = snapshot(root)
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "PTREG_CRASH_AT")}
    server = mcp_client.StdioServerParameters(
        command=sys.executable, args=["-m", "ptreg", "mcp", "--registry", str(root)], env=env
    )

    async def walk() -> None:
        async with (
            mcp_client.stdio_client(server) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            asked = {"attempt_id": "graded", "run_id": RUN, "arm": "challenger", "over": "champion", "verdict": "lost"}
            answer = await session.call_tool("list_items", asked)
            assert not answer.is_error, answer.content
            assert answer.structured_content == expected
            assert [i["item"] for i in expected["metrics"][0]["items"]] == ["q1", "q2"]
            latest = await session.call_tool("list_items", {"attempt_id": "graded", "metric": "score", "limit": 1})
            assert [m["not_shown"] for m in (latest.structured_content or {})["metrics"]] == [4, 4]
            for arguments, fragment in [
                ({"attempt_id": "graded", "arm": "nobody"}, "has no arm 'nobody'"),
                ({"attempt_id": "graded", "run_id": "../../etc"}, "invalid run id"),
                ({"attempt_id": "../graded"}, "invalid attempt id"),
                ({"attempt_id": "graded", "metric": "latency_ms"}, "compared as a ratio"),
                ({"attempt_id": "graded", "verdict": "drawn"}, "verdict"),
                ({"attempt_id": "nothing"}, "no run 'nothing'"),
            ]:
                refused = await session.call_tool("list_items", arguments)
                text = refused.content[0].text
                assert refused.is_error and "\n" not in text and fragment in text and "Traceback" not in text, text

    anyio.run(walk)
    assert {k: v for k, v in snapshot(root).items() if "index" not in k} == {
        k: v for k, v in before.items() if "index" not in k
    }
