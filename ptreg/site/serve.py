"""Serving a built site on 127.0.0.1 for a quick look, with the standard library's server."""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..errors import UnusableInput

HOST = "127.0.0.1"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a request log would bury the one line that says where the site is


def open_server(directory: Path, port: int) -> ThreadingHTTPServer:
    """A server of ``directory`` bound to ``port`` (0: any free one); a port in use is one line."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    try:
        return ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UnusableInput(
                f"--port {port}: already in use on {HOST}; give another, or 0 for any free one"
            ) from None
        raise UnusableInput(f"--port {port}: cannot serve on {HOST}: {exc.strerror or exc}") from None


def serve(server: ThreadingHTTPServer, ready: Callable[[str], None]) -> None:
    """Serve until interrupted; ``ready`` is told the site's address first."""
    host, port = server.server_address[:2]
    ready(f"http://{host!s}:{port}/index.html")
    try:
        server.serve_forever()
    finally:
        server.server_close()
