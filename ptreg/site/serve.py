"""Serving a built site on 127.0.0.1 for a quick look, with the standard library's server.

Only what the build wrote is served: the pages its manifest lists and the static files, each
opened without following a symlink (``workfiles.inside`` for the folders on the way,
``O_NOFOLLOW`` for the page), so nothing else in the folder and nothing a symlink leads to
reaches the browser. Only a request addressed to a loopback name is answered (by its one Host
header, or by its target when that names a host, as a proxy's request does): a page of any
other site that points a name of its own at 127.0.0.1 (DNS rebinding) gets 421, not the pages.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import PtregError, UnusableInput
from ..store.workfiles import inside
from .build import STATIC, read_manifest

HOST = "127.0.0.1"
# The names a browser on this machine reaches 127.0.0.1 by; any other Host is someone else's.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8", ".js": "text/javascript"}
# A page of a site ptreg builds is at most a few megabytes (a run's charts); never more is sent.
PAGE_MAX_BYTES = 64 * 1024 * 1024


def served_files(out: Path) -> frozenset[str]:
    """The paths the site in ``out`` may serve: the pages its manifest lists, and the static
    files every build writes. Nothing when ``out`` holds no manifest ptreg wrote."""
    manifest, _ = read_manifest(out)
    if manifest is None:
        return frozenset()
    return frozenset(manifest["pages"]) | {f"static/{name}" for name in STATIC}


def loopback_host(header: str | None, port: int) -> bool:
    """Whether a request's ``Host`` header names this server by a loopback name: ``localhost``,
    ``127.0.0.1`` or ``[::1]``, with the server's port or none."""
    host = (header or "").strip().lower()
    if host.startswith("["):  # an IPv6 address, [::1] or [::1]:8000
        name, bracket, rest = host.partition("]")
        name += bracket
    else:
        name, _, rest = host.partition(":")
        rest = f":{rest}" if rest else ""
    return name in LOOPBACK_NAMES and rest in ("", f":{port}")


class SiteServer(ThreadingHTTPServer):
    """The server of one built site: ``pages`` is set from its manifest once the build is done."""

    daemon_threads = True

    def __init__(self, directory: Path, port: int) -> None:
        super().__init__((HOST, port), _SiteHandler)
        self.directory = directory
        self.pages: frozenset[str] = frozenset()


class _SiteHandler(BaseHTTPRequestHandler):
    server: SiteServer

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        port = self.server.server_address[1]
        target, hosts = urlsplit(self.path), self.headers.get_all("Host") or []
        # the host a request is for: an absolute-form target's own (it overrides Host), else its
        # one Host header; two of them name no one host
        asked = target.netloc if target.scheme else (hosts[0] if len(hosts) == 1 else None)
        if len(hosts) > 1 or not loopback_host(asked, int(port)):
            self._refuse(HTTPStatus.MISDIRECTED_REQUEST, "this server answers only http://127.0.0.1 or localhost")
            return
        data = self._page(unquote(target.path).lstrip("/") or "index.html")
        if data is None:
            self._refuse(HTTPStatus.NOT_FOUND, "not a page of this site")
            return
        relative, content = data
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", _TYPES.get(Path(relative).suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(content)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(content)

    def _page(self, relative: str) -> tuple[str, bytes] | None:
        """The bytes of ``relative`` when the build wrote it and it is still a regular file
        reached through real folders; None otherwise."""
        if relative not in self.server.pages:
            return None
        try:
            path = inside(self.server.directory, relative, "the site's manifest")
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except (PtregError, OSError):  # a symlink on the way, or nothing there any more
            return None
        try:
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > PAGE_MAX_BYTES:
                    return None
                return relative, handle.read(PAGE_MAX_BYTES)
        except OSError:
            return None

    def _refuse(self, status: HTTPStatus, why: str) -> None:
        content = f"{status.value} {status.phrase}: {why}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(content)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a request log would bury the one line that says where the site is


def open_server(directory: Path, port: int) -> SiteServer:
    """A server of ``directory`` bound to ``port`` (0: any free one); a port in use is one line."""
    try:
        return SiteServer(directory, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UnusableInput(
                f"--port {port}: already in use on {HOST}; give another, or 0 for any free one"
            ) from None
        raise UnusableInput(f"--port {port}: cannot serve on {HOST}: {exc.strerror or exc}") from None


def serve(server: SiteServer, ready: Callable[[str], None]) -> None:
    """Serve the pages the site's manifest lists until interrupted; ``ready`` is told the
    site's address first."""
    server.pages = served_files(server.directory)
    host, port = server.server_address[:2]
    ready(f"http://{host!s}:{port}/index.html")
    try:
        server.serve_forever()
    finally:
        server.server_close()
