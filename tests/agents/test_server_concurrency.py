"""`ptreg mcp` under concurrent calls: each tool call is locked exactly as the command beside
it, whatever thread of the server answers it and however many servers share the registry.
Afterwards the registry validates with no warning (no orphaned run), the query index agrees
with the files, and every call got an answer: a result, or a refusal of one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_server import _proposal, _registry, _session

pytest.importorskip("mcp.client.stdio", reason="the mcp extra is not installed")

VERDICT = {"status": "worked", "lesson": "Measured end to end.", "next_action": "Vary the backend next."}
# What a call may say when another holds what it needs; anything else fails the test.
REFUSALS = re.compile(
    r"is already being run by (pid \d+|an unknown process)"  # a second run of one attempt (its holder file may have come and gone)
    r"|cannot be concluded while its run measures"  # a conclusion of an attempt being run
    r"|is concluded \(status worked\); a new run needs a new attempt"  # a run after the conclusion
    r"|has no run to conclude from"  # a conclusion before any run
)


def _refused_or_done(answer: Any, call: str) -> str:
    """``done``, or the refusal's text; fails on anything else (an error that is no refusal)."""
    if not answer.is_error:
        return "done"
    text = answer.content[0].text
    assert "\n" not in text and REFUSALS.search(text), (call, text)
    return text


def test_a_second_run_and_a_conclusion_during_a_run_are_refused_on_another_thread_of_one_server(
    tmp_path: Path, cli
) -> None:
    """One client, three calls at once on one attempt: the server answers each on a thread of
    its own, and the second run and the conclusion are refused as `ptreg run` and `ptreg
    conclude` refuse them beside a running `ptreg run`."""
    root, ref = _registry(tmp_path / "registry", timed_steps=4, repeats=30)
    measuring = anyio.Event()
    answers: dict[str, Any] = {}

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if message and "round" in message:
            measuring.set()

    async def walk() -> None:
        async with _session(root) as session:
            asked = "How long does the tiny step take when nothing is varied?"
            admitted = await session.call_tool("propose", _proposal(ref, question=asked))
            assert not admitted.is_error, admitted.content

            async def first() -> None:
                answers["first"] = await session.call_tool(
                    "run_attempt", {"attempt_id": "faster-step"}, progress_callback=on_progress
                )

            async with anyio.create_task_group() as group:
                group.start_soon(first)
                with anyio.fail_after(120):
                    await measuring.wait()
                answers["second"] = await session.call_tool("run_attempt", {"attempt_id": "faster-step"})
                answers["conclude"] = await session.call_tool(
                    "conclude_attempt", {"attempt_id": "faster-step", **VERDICT}
                )

    anyio.run(walk)
    assert not answers["first"].is_error, answers["first"].content
    assert "faster-step is already being run by pid" in _refused_or_done(answers["second"], "second run")
    assert "cannot be concluded while its run measures" in _refused_or_done(answers["conclude"], "conclude")
    record = json.loads((root / "faster-step.json").read_text(encoding="utf-8"))
    assert record["status"] == "not-tried" and len(record["runs"]) == 1
    _registry_whole(cli, root)


HOLDER = """
import sys, time
from pathlib import Path
from ptreg.store.locks import registry_lock

with registry_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_call_waiting_for_the_registry_lock_holds_up_no_other_call(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the registry lock: a proposal waits for it on its thread, and a
    list asked meanwhile is answered at once; the proposal lands when the lock is let go."""
    from helpers import env_without_hooks

    root, ref = _registry(tmp_path / "registry")
    monkeypatch.setenv("PTREG_LOCK_TIMEOUT", "60")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True, env=env_without_hooks()
    )
    order: list[str] = []

    async def walk() -> None:
        async with _session(root) as session:
            asked = "How long does the tiny step take when nothing is varied?"

            async def propose() -> None:
                answer = await session.call_tool("propose", _proposal(ref, question=asked))
                assert not answer.is_error, answer.content
                order.append("propose")

            async with anyio.create_task_group() as group:
                group.start_soon(propose)
                await anyio.sleep(1)  # let the proposal reach the lock (its answer waits for it either way)
                listed = await session.call_tool("list_attempts", {})
                assert not listed.is_error and [a["id"] for a in listed.structured_content["attempts"]] == ["seed-step"]
                order.append("list")
                holder.kill()

    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        anyio.run(walk)
    finally:
        holder.kill()
        holder.wait()
    assert order == ["list", "propose"]
    assert json.loads((root / "faster-step.json").read_text(encoding="utf-8"))["status"] == "not-tried"
    _registry_whole(cli, root)


def _registry_whole(cli, root: Path) -> None:
    """Valid with no warning (so no orphaned run and nothing staged), and an index that agrees."""
    checked = cli("-r", root, "validate", "--json")
    assert checked.code == 0 and checked.json()["problems"] == [], checked.out
    index = cli("-r", root, "index", "check")
    assert index.code == 0 and "the index agrees with the files" in index.out, index.out
    assert not list(root.glob("*.holder")), "a lock is still held"


def _mixed_calls(root: Path, ref: str, clients: int, rounds: int) -> dict[str, list[str]]:
    """``clients`` servers, one per client, each client making the calls of a step at once (so
    that its server answers them on threads side by side): propose an attempt of its own, list,
    run a shared attempt twice and conclude it (two are shared among all); then run its own,
    conclude the shared one and list; then conclude its own. What each call answered."""
    answered: dict[str, list[str]] = {}

    async def client(n: int) -> None:
        async with _session(root) as session:

            async def call(label: str, tool: str, arguments: dict[str, Any]) -> None:
                answer = await session.call_tool(tool, arguments)
                answered.setdefault(label, []).append(_refused_or_done(answer, label))

            for r in range(rounds):
                own, shared = f"client-{n}-round-{r}", f"shared-{(n + r) % 2}"
                question = f"Does plan {n}x{r} of client {n} pay off?"
                proposal = _proposal(
                    ref, attempt_id=own, question=question, tracking_issue=f"owner/repo#{1000 + 100 * r + n}"
                )
                async with anyio.create_task_group() as group:
                    group.start_soon(call, "propose", "propose", proposal)
                    group.start_soon(call, "list", "list_attempts", {})
                    group.start_soon(call, "run shared", "run_attempt", {"attempt_id": shared})
                    group.start_soon(call, "run shared", "run_attempt", {"attempt_id": shared})
                    group.start_soon(call, "conclude shared", "conclude_attempt", {"attempt_id": shared, **VERDICT})
                async with anyio.create_task_group() as group:
                    group.start_soon(call, "run own", "run_attempt", {"attempt_id": own})
                    group.start_soon(call, "conclude shared", "conclude_attempt", {"attempt_id": shared, **VERDICT})
                    group.start_soon(call, "list", "list_attempts", {"statuses": ["not-tried"]})
                await call("conclude own", "conclude_attempt", {"attempt_id": own, **VERDICT})

    async def everyone() -> None:
        with anyio.fail_after(600):
            async with anyio.create_task_group() as group:
                for n in range(clients):
                    group.start_soon(client, n)

    anyio.run(everyone)
    return answered


def _shared_attempts(root: Path, ref: str) -> None:
    """Two admitted attempts every client runs and concludes."""
    from helpers import propose_for_run

    for n in range(2):
        propose_for_run(root, ref, f"shared-{n}", f"#{700 + n}")


def _check_mixed(cli, root: Path, answered: dict[str, list[str]], clients: int, rounds: int) -> None:
    calls = clients * rounds
    assert {k: len(v) for k, v in answered.items()} == {
        "propose": calls,
        "list": 2 * calls,
        "run shared": 2 * calls,
        "run own": calls,
        "conclude shared": 2 * calls,
        "conclude own": calls,
    }  # every call answered
    for label in ("propose", "list", "run own", "conclude own"):  # nothing else holds what these need
        assert set(answered[label]) == {"done"}, (label, answered[label])
    assert "done" in answered["run shared"]  # the first of each shared attempt's runs
    _registry_whole(cli, root)
    for n in range(clients):
        for r in range(rounds):
            record = json.loads((root / f"client-{n}-round-{r}.json").read_text(encoding="utf-8"))
            assert record["status"] == "worked" and [run["status"] for run in record["runs"]] == ["complete"]
    for n in range(2):  # concluded, or not when each conclusion met a run in progress; run either way
        record = json.loads((root / f"shared-{n}.json").read_text(encoding="utf-8"))
        assert record["status"] in ("worked", "not-tried") and record["runs"], record


def test_eight_clients_making_mixed_calls_at_once_leave_a_whole_registry(tmp_path: Path, cli) -> None:
    root, ref = _registry(tmp_path / "registry")
    _shared_attempts(root, ref)
    answered = _mixed_calls(root, ref, clients=8, rounds=1)
    _check_mixed(cli, root, answered, clients=8, rounds=1)


@pytest.mark.slow
def test_eight_clients_making_mixed_calls_for_four_rounds_leave_a_whole_registry(tmp_path: Path, cli) -> None:
    root, ref = _registry(tmp_path / "registry")
    _shared_attempts(root, ref)
    answered = _mixed_calls(root, ref, clients=8, rounds=4)
    _check_mixed(cli, root, answered, clients=8, rounds=4)
