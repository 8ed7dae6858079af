"""`ptreg site --serve` against the second round of attacks on issue 43: the host a request is
for is its absolute-form target's when it gives one (which overrides Host), and a request with
two Host headers names no one host; either way only a loopback name is answered."""

from __future__ import annotations

import socket
from http.server import ThreadingHTTPServer

import pytest
from test_serve import built, served, site  # noqa: F401 - the fixtures of a served site

from ptreg.site.serve import HOST


def status_of(server: ThreadingHTTPServer, request: str) -> int:
    with socket.create_connection((HOST, server.server_address[1]), timeout=30) as connection:
        connection.sendall(request.encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize(
    ("target", "hosts", "status"),
    [
        ("http://evil.example/index.html", ["127.0.0.1:{port}"], 421),  # the target's host is asked for
        ("http://localhost:{port}/index.html", ["evil.example"], 200),
        ("/index.html", ["127.0.0.1:{port}", "evil.example"], 421),
        ("/index.html", ["evil.example", "127.0.0.1:{port}"], 421),
        ("/index.html", ["127.0.0.1:{port}"], 200),
    ],
)
def test_the_host_a_request_is_for_is_its_targets_or_its_one_host_header(
    served: ThreadingHTTPServer,  # noqa: F811
    target: str,
    hosts: list[str],
    status: int,
) -> None:
    port = served.server_address[1]
    lines = [f"GET {target.format(port=port)} HTTP/1.1", *(f"Host: {h.format(port=port)}" for h in hosts)]
    assert status_of(served, "\r\n".join([*lines, "Connection: close", "", ""])) == status
