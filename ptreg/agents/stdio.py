"""The two ends of `ptreg mcp`'s stdio transport that the server must control to stop on a
signal while its client keeps stdin open: the input, which it can end, and the output, which
says when each call has its answer on the wire.

The SDK's own stdin reader blocks in a worker thread that no cancellation reaches, and the
process waits for that thread, so a server stopped by SIGTERM would live on until the client
closed its end. ``Input`` reads in a daemon thread of its own instead and can be ended as if
the client had closed it; it takes fd 0 as the SDK does (children of the server read the null
device, never the client's messages). ``Answers`` passes every outgoing message on to the
SDK's writer and notes which requests have been answered.
"""

from __future__ import annotations

import fcntl
import math
import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCError, JSONRPCResponse


class Input:
    """The client's messages, line by line, until the client closes its end or ``end`` is called."""

    def __init__(self) -> None:
        self._wire: int | None = None
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)
        self._reader: threading.Thread | None = None

    def claim(self) -> None:
        """Take fd 0: the wire moves to a descriptor of ours, and fd 0 reads the null device."""
        try:
            self._wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
            empty = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            return  # no stdin to serve: the input is empty
        os.dup2(empty, 0)
        os.close(empty)

    def release(self) -> None:
        """Give fd 0 its wire back (the descriptor stays open: the reader may still block on it)."""
        if self._wire is not None:
            os.dup2(self._wire, 0)

    def end(self) -> None:
        """End the input now; lines the reader still brings are dropped."""
        self._send.close()

    def __aiter__(self) -> Self:
        if self._reader is None:
            self._reader = threading.Thread(
                target=self._read, args=(anyio.lowlevel.current_token(),), name="ptreg mcp stdin", daemon=True
            )
            self._reader.start()
        return self

    async def __anext__(self) -> str:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def _read(self, token: anyio.lowlevel.EventLoopToken) -> None:
        try:
            if self._wire is not None:
                # closefd=False: this descriptor is never closed under a blocked read
                with os.fdopen(self._wire, "rb", closefd=False) as wire:
                    for raw in iter(wire.readline, b""):
                        anyio.from_thread.run_sync(self._send.send_nowait, raw.decode("utf-8", "replace"), token=token)
            anyio.from_thread.run_sync(self._send.close, token=token)
        except (anyio.ClosedResourceError, anyio.RunFinishedError, OSError):
            return  # ended, or the server is gone: nobody to hand a line to


class Sink(Protocol):
    """What the SDK's transport hands the server to write to."""

    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class Answers:
    """The write side of the transport: every message goes on to the SDK's writer, and the id of
    each request answered (a result or an error) is handed to ``answered`` once that writer has
    taken it (its stream holds nothing, so a message taken is written before the next one, or
    before the writer ends)."""

    def __init__(self, inner: Sink, answered: Callable[[str], None]) -> None:
        self._inner = inner
        self._answered = answered

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._answered(str(message.id))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None
