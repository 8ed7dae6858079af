"""`ptreg site --serve`: a real server on 127.0.0.1 and an ephemeral port serves the pages the
build wrote and nothing else (no other file of the folder, nothing a symlink leads to), and
answers only a request addressed to a loopback name (DNS rebinding gets 421)."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import Result, complete_record, patient, write_registry

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from ptreg.site.serve import HOST, open_server, serve

SECRET = "the contents of a file outside the site\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site of two attempts, built once, copied by each test that changes it."""
    from ptreg.cli import main

    base = tmp_path_factory.mktemp("served")
    root = write_registry(base / "registry", [complete_record("a"), complete_record("b")])
    with pytest.raises(SystemExit) as exited:
        main(["-r", str(root), "site", "-o", str(base / "site")])
    assert not exited.value.code
    return base / "site"


@pytest.fixture
def site(built: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(built, tmp_path / "site", symlinks=True))


@pytest.fixture
def served(site: Path) -> Iterator[ThreadingHTTPServer]:
    server = open_server(site, 0)
    urls: list[str] = []
    thread = threading.Thread(target=serve, args=(server, urls.append), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop(server, thread)


def stop(server: ThreadingHTTPServer, thread: threading.Thread) -> None:
    """Shut the server down without waiting out its loop's half-second poll: a connection
    wakes the loop, which then sees the request to stop."""
    stopping = threading.Thread(target=server.shutdown, daemon=True)
    stopping.start()
    port = server.server_address[1]
    deadline = time.monotonic() + patient(30)
    while stopping.is_alive() and time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            pass
        stopping.join(0.02)
    thread.join(patient(30))
    assert not thread.is_alive(), "the server did not stop"


def get(server: ThreadingHTTPServer, path: str, host: str | None = None, method: str = "GET") -> tuple[int, bytes]:
    port = server.server_address[1]
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_it_binds_loopback_only(served: ThreadingHTTPServer) -> None:
    assert served.server_address[0] == "127.0.0.1"


def test_the_pages_the_build_wrote_are_served(served: ThreadingHTTPServer, site: Path) -> None:
    for path in ("/", "/index.html", "/attempts/a.html", "/attempts/b.html", "/static/site.css", "/static/site.js"):
        status, body = get(served, path)
        assert status == 200, path
        assert body == (site / (path.lstrip("/") or "index.html")).read_bytes(), path
    assert get(served, "/attempts/a.html", method="HEAD")[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "/.ptreg-site.json",  # the manifest: the build wrote it, but it is no page
        "/planted.html",  # a file someone put in the folder
        "/attempts/",  # no listing of a folder
        "/attempts/zz.html",
        "/../registry/registry.json",
        "/%2e%2e/registry/registry.json",
        "/attempts/..%2f..%2fregistry%2fregistry.json",
    ],
)
def test_nothing_else_is_served(served: ThreadingHTTPServer, site: Path, path: str) -> None:
    (site / "planted.html").write_text(SECRET, encoding="utf-8")
    status, body = get(served, path)
    assert status == 404 and SECRET.encode() not in body


def test_a_page_replaced_by_a_symlink_is_not_followed(served: ThreadingHTTPServer, site: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET, encoding="utf-8")
    page = site / "attempts" / "a.html"
    page.unlink()
    page.symlink_to(tmp_path / "secret.txt")
    status, body = get(served, "/attempts/a.html")
    assert status == 404 and SECRET.encode() not in body


def test_a_folder_replaced_by_a_symlink_is_not_followed(
    served: ThreadingHTTPServer, site: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.html").write_text(SECRET, encoding="utf-8")
    os.rename(site / "attempts", tmp_path / "moved")
    (site / "attempts").symlink_to(outside, target_is_directory=True)
    status, body = get(served, "/attempts/a.html")
    assert status == 404 and SECRET.encode() not in body


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "localhost.evil.example:{port}", "127.0.0.1.nip.io:{port}", ""],
)
def test_a_request_for_another_host_is_refused(served: ThreadingHTTPServer, host: str) -> None:
    """A page of evil.example whose name now resolves to 127.0.0.1 sends its own Host."""
    status, body = get(served, "/index.html", host=host.format(port=served.server_address[1]))
    assert status == 421 and b"<html" not in body.lower()


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "[::1]:{port}", "localhost"]
)
def test_a_loopback_host_is_answered(served: ThreadingHTTPServer, host: str) -> None:
    assert get(served, "/index.html", host=host.format(port=served.server_address[1]))[0] == 200


def test_loopback_names_with_the_port() -> None:
    from ptreg.site.serve import loopback_host

    assert loopback_host("127.0.0.1:8000", 8000) and loopback_host("[::1]", 8000)
    assert not loopback_host("127.0.0.1:8001", 8000)  # another port: another server's name
    assert not loopback_host("[::1]x", 8000) and not loopback_host("localhost:8000:1", 8000)
    assert not loopback_host(None, 8000) and not loopback_host("0.0.0.0:8000", 8000)


def test_a_folder_without_a_manifest_serves_nothing(cli: Callable[..., Result], tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "index.html").write_text(SECRET, encoding="utf-8")
    server = open_server(folder, 0)
    thread = threading.Thread(target=serve, args=(server, lambda url: None), daemon=True)
    thread.start()
    try:
        assert get(server, "/index.html")[0] == 404
    finally:
        stop(server, thread)
