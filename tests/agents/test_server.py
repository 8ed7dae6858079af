"""`ptreg mcp` driven by the MCP SDK's own stdio client: the tools it lists, a proposal walked
from a refusal to a conclusion that `next_attempts` finds, arguments that cannot be used, and a
client that leaves mid-run. The registry validates after every step."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

from helpers import complete_record, freeze_evaluator, plan_flags, snapshot, tiny_spec, write_registry

mcp_client = pytest.importorskip("mcp.client.stdio", reason="the mcp extra is not installed")
from anyio.abc import Process  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402 - only once the SDK is known to be there
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp_types import jsonrpc_message_adapter  # noqa: E402

TOOLS = {
    "list_attempts",
    "show_attempt",
    "precedents",
    "lineage",
    "streaks",
    "propose",
    "next_attempts",
    "run_attempt",
    "list_runs",
    "list_items",
    "conclude_attempt",
}
QUESTION = "Does the tiny step of the naive backend take under a second?"


def _registry(root: Path, **spec: Any) -> tuple[Path, str]:
    """A registry with one concluded attempt asking QUESTION and a frozen tiny evaluator."""
    write_registry(root, [complete_record("seed-step", question=QUESTION)])
    return root, freeze_evaluator(root, **{**tiny_spec("tiny-naive"), **spec})


@asynccontextmanager
async def _session(root: Path, errlog: TextIO = sys.stderr) -> AsyncIterator[ClientSession]:
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "PTREG_CRASH_AT")}
    server = mcp_client.StdioServerParameters(
        command=sys.executable, args=["-m", "ptreg", "mcp", "--registry", str(root)], env=env
    )
    async with (
        mcp_client.stdio_client(server, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def _session_and_server(root: Path) -> AsyncIterator[tuple[ClientSession, Process]]:
    """A session with `ptreg mcp` over pipes of our own, which the SDK's stdio client keeps to
    itself: the test signals the server process, and its stdin stays open until the end."""
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "PTREG_CRASH_AT")}
    process = await anyio.open_process(
        [sys.executable, "-m", "ptreg", "mcp", "--registry", str(root)], env=env, stderr=None
    )
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        assert process.stdout is not None
        buffer = b""
        async with to_session:
            async for chunk in process.stdout:
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    await to_session.send(SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False)))

    async def write() -> None:
        assert process.stdin is not None
        async for message in from_session:
            await process.stdin.send(
                (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
            )

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            group.start_soon(write)
            async with ClientSession(from_server, to_server) as session:
                await session.initialize()
                yield session, process
            group.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()


def _proposal(ref: str, **changes: Any) -> dict[str, Any]:
    return {
        "attempt_id": "faster-step",
        "name": "A faster tiny step",
        "family": "runtime-perf",
        "kind": "runtime-benchmark",
        "objective": "training-step-time",
        "methods": ["vectorization"],
        "question": QUESTION,
        "varied_from": "seed-step",
        "varied": "nothing yet",
        "answers_disposition": "It keeps what seed-step kept.",
        "evaluator": ref,
        "budget_seconds": 600,
        "tracking_issue": "owner/repo#34",
        "worked_if": "ms_per_step(backend=naive, config=tiny) > 0",
        **changes,
    }


def _valid(cli: Callable[..., Any], root: Path) -> None:
    result = cli("-r", root, "validate")
    assert result.code == 0, result.out + result.err


def test_the_tools_and_the_attempt_resource_are_listed(tmp_path: Path) -> None:
    root, _ = _registry(tmp_path / "registry")

    async def walk() -> None:
        async with _session(root) as session:
            tools = (await session.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            assert all(t.output_schema for t in tools)
            propose = next(t for t in tools if t.name == "propose")
            assert "dry_run" in propose.input_schema["properties"]
            templates = (await session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["ptreg://attempt/{attempt_id}"]
            read = await session.read_resource("ptreg://attempt/seed-step")
            assert json.loads(read.contents[0].text)["attempt"]["id"] == "seed-step"

    anyio.run(walk)


def test_a_proposal_from_refusal_to_a_conclusion_next_attempts_finds(tmp_path: Path, cli) -> None:
    root, ref = _registry(tmp_path / "registry")
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def walk() -> None:
        async with _session(root) as session:
            refused = await session.call_tool("propose", _proposal(ref))
            assert refused.is_error
            text = refused.content[0].text
            assert "\n" not in text and "fresh-question" in text and "how to satisfy" in text
            _valid(cli, root)
            assert not (root / "faster-step.json").exists()

            asked = "How long does the tiny step take when nothing is varied?"
            dry = await session.call_tool("propose", _proposal(ref, question=asked, dry_run=True))
            assert not dry.is_error and dry.structured_content["written"] is False
            admitted = await session.call_tool("propose", _proposal(ref, question=asked))
            assert not admitted.is_error, admitted.content
            assert admitted.structured_content["written"] and admitted.structured_content["gate"]["admitted"]
            _valid(cli, root)

            ran = await session.call_tool("run_attempt", {"attempt_id": "faster-step"}, progress_callback=on_progress)
            assert not ran.is_error, ran.content
            assert ran.structured_content["status"] == "complete"
            run_id = ran.structured_content["run_id"]
            assert progress and any("naive/tiny" in m for m in progress)
            _valid(cli, root)

            concluded = await session.call_tool(
                "conclude_attempt",
                {
                    "attempt_id": "faster-step",
                    "status": "worked",
                    "lesson": "The tiny step is measured end to end.",
                    "next_action": "Vary the backend next.",
                    "continue_if": "ms_per_step(naive, config=tiny) > 0",
                },
            )
            assert not concluded.is_error, concluded.content
            assert concluded.structured_content["attempt"]["status"] == "worked"
            assert concluded.structured_content["condition"].startswith("holds")
            assert concluded.structured_content["linked"] == []  # its one run was linked by the run itself
            _valid(cli, root)

            found = await session.call_tool("next_attempts", {"limit": 0})
            assert not found.is_error
            mine = [s for s in found.structured_content["suggestions"] if "faster-step" in s["attempts"]]
            assert [s["kind"] for s in mine] == ["continue", "headroom"]  # naive alone is no reference to leave out
            assert mine[0]["runs"] == [f"faster-step/{run_id}"]

            shown = await session.call_tool("show_attempt", {"attempt_id": "faster-step"})
            assert shown.structured_content["attempt"]["runs"][0]["run_id"] == run_id
            listed = await session.call_tool("list_attempts", {"continuable": True})
            assert [a["id"] for a in listed.structured_content["attempts"]] == ["faster-step"]

    anyio.run(walk)


BAD_ARGUMENTS = [
    ("show_attempt", {"attempt_id": "no-such-attempt"}, "no-such-attempt"),
    ("show_attempt", {"attempt_id": "../escape"}, "invalid attempt id"),
    ("lineage", {}, "attempt_id"),
    ("precedents", {"limit": "many"}, "limit"),
    ("precedents", {}, "say what the proposal is: give objective, methods, bases or family"),
    ("list_attempts", {"statuses": ["done"]}, "unknown status"),
    ("run_attempt", {"attempt_id": "seed-step"}, "concluded"),
    ("conclude_attempt", {"attempt_id": "seed-step", "status": "great", "lesson": "x", "next_action": "y"}, "great"),
    ("propose", {"attempt_id": "x"}, "name"),
    ("no_such_tool", {}, "no_such_tool"),
]


def test_an_argument_that_cannot_be_used_is_one_line_and_the_server_goes_on(tmp_path: Path, cli) -> None:
    root, _ = _registry(tmp_path / "registry")
    before = snapshot(root)

    async def walk() -> None:
        async with _session(root) as session:
            for tool, arguments, fragment in BAD_ARGUMENTS:
                result = await session.call_tool(tool, arguments)
                assert result.is_error, tool
                text = result.content[0].text
                assert "\n" not in text and fragment in text and "Traceback" not in text, text
                assert not (await session.call_tool("streaks", {})).is_error  # still serving

    anyio.run(walk)
    _valid(cli, root)
    assert {k: v for k, v in snapshot(root).items() if "index" not in k} == {
        k: v for k, v in before.items() if "index" not in k
    }


def test_a_resource_that_cannot_be_read_says_why_in_one_line_and_logs_no_traceback(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    root, _ = _registry(tmp_path / "registry")
    errlog = tmp_path / "server.err"

    async def walk() -> None:
        with errlog.open("w") as err:
            async with _session(root, errlog=err) as session:
                for uri, fragment in (
                    ("ptreg://attempt/nope", "no attempt 'nope' in"),
                    ("ptreg://attempt/seed-stp", "(did you mean: seed-step?)"),
                    ("ptreg://attempt/Not_An_Id", "invalid attempt id"),
                ):
                    with pytest.raises(MCPError) as refused:
                        await session.read_resource(uri)
                    message = refused.value.error.message
                    assert fragment in message and "\n" not in message, message
                    assert "Error creating resource" not in message
                read = await session.read_resource("ptreg://attempt/seed-step")  # still serving
                assert json.loads(read.contents[0].text)["attempt"]["id"] == "seed-step"

    anyio.run(walk)
    assert "Traceback" not in errlog.read_text(), errlog.read_text()


def test_a_client_that_leaves_mid_run_leaves_an_interrupted_run(tmp_path: Path, cli) -> None:
    # enough rounds that the client leaves while the cell measures
    root, ref = _registry(tmp_path / "registry", timed_steps=20, repeats=200)
    measuring = anyio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if message and "round" in message:
            measuring.set()

    async def walk() -> None:
        async with _session(root) as session:
            asked = "How long does the tiny step take when nothing is varied?"
            admitted = await session.call_tool("propose", _proposal(ref, question=asked))
            assert not admitted.is_error, admitted.content
            async with anyio.create_task_group() as group:
                arguments = {"attempt_id": "faster-step"}
                group.start_soon(lambda: session.call_tool("run_attempt", arguments, progress_callback=on_progress))
                with anyio.fail_after(120):
                    await measuring.wait()
                group.cancel_scope.cancel()  # and the session and the server's stdin close after it

    anyio.run(walk)
    record = json.loads((root / "faster-step.json").read_text(encoding="utf-8"))
    [run] = record["runs"]
    assert run["status"] == "interrupted"
    results = json.loads((root / "runs" / "faster-step" / run["run_id"] / "results.json").read_text())
    assert results["status"] == "interrupted" and "SIGHUP" in (results["reason"] or "")
    _valid(cli, root)
    assert cli("-r", root, "gate", "faster-step").code == 0  # the lock is free: nothing is left holding it


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_mid_run_answers_the_call_and_ends_the_server_while_stdin_stays_open(
    tmp_path: Path, cli, signum: int
) -> None:
    root, ref = _registry(tmp_path / "registry", timed_steps=20, repeats=200)
    measuring = anyio.Event()
    answers: list[Any] = []
    name = signal.Signals(signum).name

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if message and "round" in message:
            measuring.set()

    async def walk() -> None:
        async with _session_and_server(root) as (session, server):
            asked = "How long does the tiny step take when nothing is varied?"
            admitted = await session.call_tool("propose", _proposal(ref, question=asked))
            assert not admitted.is_error, admitted.content

            async def run() -> None:
                answers.append(
                    await session.call_tool("run_attempt", {"attempt_id": "faster-step"}, progress_callback=on_progress)
                )

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                with anyio.fail_after(120):
                    await measuring.wait()
                server.send_signal(signum)
                with anyio.fail_after(60):
                    await server.wait()  # ends by itself: its stdin is ours, and still open
            assert server.returncode == 128 + signum

    anyio.run(walk)
    [run] = json.loads((root / "faster-step.json").read_text(encoding="utf-8"))["runs"]
    assert run["status"] == "interrupted"
    [answer] = answers
    text = answer.content[0].text
    assert answer.is_error and "\n" not in text, text
    assert f"run {run['run_id']} of faster-step was interrupted by {name}: ptreg mcp is stopping" in text, text
    results = json.loads((root / "runs" / "faster-step" / run["run_id"] / "results.json").read_text())
    assert results["status"] == "interrupted" and name in (results["reason"] or "")
    _valid(cli, root)
    assert cli("-r", root, "gate", "faster-step").code == 0  # no lock left held


def test_propose_takes_every_field_of_ptreg_new_and_dry_run(tmp_path: Path) -> None:
    from dataclasses import fields

    from ptreg.agents.server import build
    from ptreg.gate.proposal_input import ProposalInput
    from ptreg.records.arguments import argument_of

    root, _ = _registry(tmp_path / "registry")
    tools = {t.name: t for t in anyio.run(build(root).list_tools)}
    arguments = {argument_of(f.name) for f in fields(ProposalInput)} | {"dry_run"}
    assert set(tools["propose"].input_schema["properties"]) == arguments


def test_without_the_sdk_mcp_is_refused_in_one_line(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = _registry(tmp_path / "registry")
    for name in ["mcp", *(m for m in sys.modules if m.startswith("mcp."))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "ptreg.agents.server", raising=False)
    result = cli("-r", root, "mcp")
    assert result.code == 2 and "ptreg[mcp]" in result.err and len(result.err.strip().splitlines()) == 1


def test_run_and_conclude_refuse_an_attempt_whose_admission_conflicts_after_a_merge(tmp_path: Path, cli) -> None:
    """A clone merged in admitted the same question first: the server's tools refuse the later
    attempt in one line with the remedy, as `ptreg run` and `ptreg conclude` do."""
    root, ref = _registry(tmp_path / "registry")
    clone = tmp_path / "clone"
    (root / "seed-step.json").unlink()  # neither clone holds the seed: both ask afresh
    shutil.copytree(root, clone)
    question = "Does tiling the loops speed up the tiny step?"
    for where, attempt_id in ((root, "tile-a"), (clone, "tile-b")):
        made = cli(
            "-r", where, "new", "--no-input", "--id", attempt_id, "--name", attempt_id, "--family", "runtime-perf",
            "--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "vectorization",
            "--question", question, "--evaluator", ref, "--budget-seconds", "600", "--tracking-issue", "#5",
            *plan_flags(where, ref),
        )  # fmt: skip
        assert made.code == 0, made.err
    record = json.loads((clone / "tile-b.json").read_text())
    record["admission"]["admitted_at"] = "2999-01-01T00:00:00Z"  # admitted after tile-a, whatever the clock
    (root / "tile-b.json").write_text(json.dumps(record, indent=2))
    before = snapshot(root)

    async def walk() -> None:
        async with _session(root) as session:
            for tool, arguments in (
                ("run_attempt", {"attempt_id": "tile-b"}),
                ("conclude_attempt", {"attempt_id": "tile-b", "status": "worked", "lesson": "x", "next_action": "y"}),
            ):
                result = await session.call_tool(tool, arguments)
                text = result.content[0].text
                assert result.is_error and "\n" not in text, text
                assert "tile-b: unresolved conflict [readmission-question]" in text and "remedy:" in text, text

    anyio.run(walk)
    assert {k: v for k, v in snapshot(root).items() if "index" not in k} == {
        k: v for k, v in before.items() if "index" not in k
    }
