"""The MCP server as ptreg speaks the protocol, whatever its tools: every tool error in one
line (an argument the SDK refuses too), an argument a tool does not take refused rather than
dropped, and each call taken noted until its answer is written, so that a signal can stop the
server with every call answered (``server.serve``)."""

from __future__ import annotations

import difflib
import signal
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from ..text import printable
from .stdio import Answers, Input
from .tool_runs import Runs


def one_line(message: str) -> str:
    return printable(" ".join(message.split()), lines=False)


class Server(MCPServer):
    """MCPServer whose argument errors, like every other tool error, are one line, and which can
    stop on a signal with every tool call it took answered (``serve``)."""

    def __init__(self, runs: Runs, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs = runs
        self._unanswered: set[str] = set()  # the ids of the tool calls taken and not answered yet

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        request = _request_id(context)
        if request is not None:
            self._unanswered.add(request)
        try:
            if self.runs.stopping is not None:
                raise ToolError(
                    f"ptreg mcp is stopping ({signal.Signals(self.runs.stopping).name}); no call is taken now"
                )
            self._refuse_unknown(name, arguments)
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in cause.errors()
                )
                raise ToolError(one_line(f"{name}: bad arguments: {problems}")) from None
            raise
        except anyio.get_cancelled_exc_class():
            self.answered(request)  # cancelled by its client or by the end of the session: no answer awaited
            raise

    def _refuse_unknown(self, name: str, arguments: dict[str, Any] | None) -> None:
        """An argument the tool does not take is refused, not dropped as the SDK would drop it: a
        filter given under a name of another tool (``method`` for ``methods``) must not widen an
        answer unseen."""
        tool = self._tool_manager.get_tool(name)
        if tool is None or not arguments:
            return
        taken = list(tool.parameters.get("properties", {}))
        unknown = [a for a in arguments if a not in taken]
        if unknown:
            close = difflib.get_close_matches(unknown[0], taken, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ToolError(
                one_line(f"{name}: no argument {unknown[0]!r}{hint}; it takes: {', '.join(taken) or 'none'}")
            )

    def answered(self, request: str | None) -> None:
        self._unanswered.discard(request or "")

    async def all_answered(self) -> None:
        """Return once every tool call taken has its answer with the transport's writer."""
        while self._unanswered:
            await anyio.sleep(0.02)

    async def serve_stdio(self, stdin: Input) -> None:
        """``run_stdio_async`` with ptreg's own input, which ``serve`` can end, and an output
        that notes each answer (``stdio.py``)."""
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", stdin)) as (read_stream, write_stream):
            lowlevel = self._lowlevel_server  # as run_stdio_async itself drives it
            await lowlevel.run(
                read_stream, Answers(write_stream, self.answered), lowlevel.create_initialization_options()
            )


def _request_id(context: Any) -> str | None:
    """The id of the request a tool call answers, as its response will carry it (None outside one)."""
    try:
        return str(context.request_id) if context is not None else None
    except ValueError:  # a Context made outside a request
        return None
