"""The change watcher (ptreg/store/watcher.py, watch.py): with one running, a command looks only at
the files the watcher saw change, and the index still answers exactly as a full read does; when
the watcher cannot vouch (another watcher, lost events, none at all), every file is checked."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from test_index import chain_records, edits_answer_as_a_full_read, propose_fresh, scenarios

from helpers import assert_index_agrees as assert_agrees
from helpers import patient, write_registry
from ptreg.store import watcher as watcher_module
from ptreg.store.index import freshness, open_index
from ptreg.store.names import SOCKET_FILE
from ptreg.store.watch import Answer, ask
from ptreg.store.watcher import IN_IGNORED, IN_MODIFY, IN_Q_OVERFLOW, ChangeLog, apply, mount_type, serve

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watcher needs inotify")


@contextlib.contextmanager
def watching(root: Path) -> Iterator[str]:
    """A watcher of ``root`` in a thread of this process; its id."""
    stop, started = threading.Event(), threading.Event()
    ids: list[str] = []

    def ready(watcher: str) -> None:
        ids.append(watcher)
        started.set()

    thread = threading.Thread(target=serve, args=(root, ready, stop), daemon=True)
    thread.start()
    assert started.wait(patient(60)), "the watcher did not start"
    try:
        yield ids[0]
    finally:
        stop.set()
        thread.join(patient(60))
        assert not thread.is_alive()


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return write_registry(tmp_path / "reg", chain_records())


def _refreshed(root: Path) -> Any:
    index = open_index(root)
    try:
        return index.refresh
    finally:
        index.close()


def _no_full_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: Any) -> Any:
        raise AssertionError("every file was checked")

    monkeypatch.setattr(freshness, "_check_every_file", refused)


# --------------------------------------------------------------------------- what the watcher remembers


def test_the_change_log_names_what_changed_after_a_number_it_gave() -> None:
    log = ChangeLog("w")
    for name in ("a.json", "b.json", "a.json", "c.json"):
        log.note(name)
    assert log.answer("w", 0) == Answer("w", 4, ["a.json", "b.json", "c.json"])
    assert log.answer("w", 2) == Answer("w", 4, ["a.json", "c.json"])  # a.json changed again at 3
    assert log.answer("w", 4) == Answer("w", 4, [])


@pytest.mark.parametrize("watcher, since", [("other", 0), ("w", 5), ("w", -1), ("w", None), ("w", True), ("w", "1")])
def test_the_change_log_cannot_say_for_a_number_it_did_not_give(watcher: Any, since: Any) -> None:
    log = ChangeLog("w")
    log.note("a.json")
    assert log.answer(watcher, since).changed is None


def test_lost_events_make_everything_before_them_unknown() -> None:
    log = ChangeLog("w")
    log.note("a.json")
    assert not apply(log, [(IN_Q_OVERFLOW, ""), (IN_MODIFY, "b.json"), (IN_MODIFY, "notes.txt")])
    assert log.answer("w", 0).changed is None and log.answer("w", 1).changed is None
    assert log.answer("w", 2).changed == ["b.json"]  # a number given after the loss
    assert apply(log, [(IN_IGNORED, "")])  # the watch ended: the watcher stops
    assert log.answer("w", 3).changed is None


MOUNTS = """\
22 1 0:21 / / rw,relatime - overlay overlay rw
40 22 0:35 / /work rw,relatime - ext4 /dev/vdb rw
41 40 0:36 / /work/shared\\040data rw,relatime - nfs4 server:/export rw
"""


@pytest.mark.parametrize(
    "target, kind",
    [("/", "overlay"), ("/tmp/x", "overlay"), ("/work", "ext4"), ("/work/reg", "ext4"),
     ("/work/shared data/reg", "nfs4"), ("/workshop", "overlay")],
)  # fmt: skip
def test_the_mount_holding_a_directory_is_the_longest_above_it(target: str, kind: str) -> None:
    assert mount_type(target, MOUNTS) == kind


def test_a_network_file_system_is_refused_in_one_line(cli, registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watcher_module, "file_system_type", lambda _: "nfs4")
    result = cli("-r", registry, "index", "watch")
    assert result.code == 2 and result.err.count("\n") == 1 and "nfs4" in result.err, result.err
    assert not (registry / SOCKET_FILE).exists()


# --------------------------------------------------------------------------- the index with a watcher


def test_with_a_watcher_only_the_changed_files_are_looked_at(registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_agrees(registry)
    with watching(registry):
        assert not _refreshed(registry).watched  # a new watcher: every file checked once
        assert _refreshed(registry).watched
        _no_full_check(monkeypatch)
        path = registry / "c2.json"
        record = json.loads(path.read_text())
        path.write_text(json.dumps(record | {"lesson": "edited in place"}, indent=2))  # same inode
        refresh = _refreshed(registry)
        assert refresh.watched and refresh.reread == ["c2.json"] and not refresh.removed
        (registry / "c3.json").unlink()
        staged = registry / ".c5.json.tmp"  # written aside and renamed into place, as git does
        staged.write_text(json.dumps(dict(record, id="c5"), indent=2))
        staged.replace(registry / "c5.json")
        refresh = _refreshed(registry)
        assert (refresh.reread, refresh.removed) == (["c5.json"], ["c3.json"])
        assert _refreshed(registry).reread == []
        monkeypatch.undo()
        assert_agrees(registry)


def test_a_new_watcher_or_none_means_every_file_is_checked(registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with watching(registry):
        _refreshed(registry)
        assert _refreshed(registry).watched
    assert ask(registry, None, None) is None and not (registry / SOCKET_FILE).exists()
    path = registry / "c1.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"lesson": "unwatched edit"}, indent=2))
    refresh = _refreshed(registry)
    assert not refresh.watched and refresh.reread == ["c1.json"]
    with watching(registry):  # another watcher: its numbers say nothing of the first one's
        assert not _refreshed(registry).watched
        monkeypatch.setenv("PTREG_WATCHER", "off")
        assert not _refreshed(registry).watched
        monkeypatch.delenv("PTREG_WATCHER")
        assert _refreshed(registry).watched
    assert_agrees(registry)


def test_a_watcher_that_cannot_say_means_every_file_is_checked(registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _refreshed(registry)
    monkeypatch.setattr(freshness, "ask", lambda *_: Answer("w", 7, None))
    path = registry / "c1.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"lesson": "lost"}, indent=2))
    refresh = _refreshed(registry)
    assert not refresh.watched and refresh.reread == ["c1.json"]


def test_a_socket_left_by_a_killed_watcher_is_not_waited_for(registry: Path) -> None:
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(registry / SOCKET_FILE))
    left.close()  # bound, never listening: what a watcher killed by SIGKILL leaves
    assert ask(registry, None, None) is None
    assert not _refreshed(registry).watched
    with watching(registry):  # and the next watcher replaces it
        _refreshed(registry)
        assert _refreshed(registry).watched


@pytest.mark.parametrize(
    "reply",
    [
        b"not json\n",
        b'{"watcher": "w", "seq": -1, "changed": []}\n',
        b'{"watcher": "w", "seq": 3, "changed": [1]}\n',
        b'{"watcher": "w", "seq": 3, "changed": ["../outside.json"]}\n',
        b'{"watcher": "w", "seq": 3, "changed": ["notes.txt"]}\n',
        b"",
    ],
)
def test_an_answer_that_is_not_a_watchers_is_not_trusted(registry: Path, reply: bytes) -> None:
    """Whatever answers on the socket, only a well-formed answer naming files of the directory
    itself is used; anything else means every file is checked."""
    _refreshed(registry)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(registry / SOCKET_FILE))
    listener.listen(1)

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        assert ask(registry, None, None) is None
    finally:
        thread.join(patient(60))
        listener.close()


def test_a_socket_name_that_is_a_symlink_to_another_watcher_is_not_asked(tmp_path: Path, registry: Path) -> None:
    """The socket is a working file: a symlink under its name (here to the watcher of another
    registry, which would vouch for that one's files) is never connected to; every file is
    checked instead, and the link is left as it is."""
    other = write_registry(tmp_path / "other", chain_records())
    _refreshed(registry)
    with watching(other):
        assert ask(other, None, None) is not None  # that watcher answers for its own registry
        (registry / SOCKET_FILE).symlink_to(other / SOCKET_FILE)
        assert ask(registry, None, None) is None
        assert (registry / SOCKET_FILE).is_symlink()


@pytest.mark.parametrize("kind", ["symlink", "file", "directory"])
def test_a_watcher_refuses_a_socket_name_holding_anything_but_its_socket(
    cli, tmp_path: Path, registry: Path, kind: str
) -> None:
    """`ptreg index watch` replaces a socket a killed watcher left, and nothing else: a
    symlink, a file or a folder under the socket's name is refused in one line and kept."""
    target = tmp_path / "victim.txt"
    target.write_text("keep me", encoding="utf-8")
    name = registry / SOCKET_FILE
    if kind == "symlink":
        name.symlink_to(target)
    elif kind == "file":
        name.write_text("keep me", encoding="utf-8")
    else:
        name.mkdir()
    result = cli("-r", registry, "index", "watch")
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert result.err.count("\n") == 1 and f"{name}: " in result.err and "left alone" in result.err
    assert target.read_text(encoding="utf-8") == "keep me"
    assert name.is_symlink() if kind == "symlink" else (name.is_file() if kind == "file" else name.is_dir())


def test_a_symlinked_record_is_read_again_by_every_watched_command(tmp_path: Path, registry: Path) -> None:
    target = tmp_path / "elsewhere.json"
    shutil.move(registry / "c4.json", target)
    (registry / "c4.json").symlink_to(target)
    with watching(registry):
        _refreshed(registry)
        record = json.loads(target.read_text())
        target.write_text(json.dumps(record | {"lesson": "changed behind the link"}, indent=2))
        refresh = _refreshed(registry)  # no event in the registry: the link is re-read anyway
        assert refresh.watched and "c4.json" in refresh.reread
        assert_agrees(registry)


def test_ptregs_own_writes_are_seen_through_the_watcher(cli, registry: Path) -> None:
    from helpers import freeze_evaluator

    ref = freeze_evaluator(registry)
    with watching(registry):
        _refreshed(registry)
        propose_fresh(cli, registry, ref)
        refresh = _refreshed(registry)
        assert refresh.watched and refresh.reread == []  # the write brought the index up to date
        assert_agrees(registry)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=scenarios())
def test_random_registries_and_edits_with_a_watcher_answer_as_a_full_read(
    tmp_path: Path, empty_registry: Path, scenario
) -> None:
    edits_answer_as_a_full_read(tmp_path, scenario, empty_registry, watched_throughout)


@contextlib.contextmanager
def watched_throughout(root: Path) -> Iterator[None]:
    """A watcher of ``root``, and every later command answered through it."""
    with watching(root), pytest.MonkeyPatch.context() as patch:
        _refreshed(root)  # the first command after a watcher starts checks every file
        _no_full_check(patch)
        yield


# --------------------------------------------------------------------------- the command


def test_one_watcher_per_registry_and_bad_combinations_are_one_line(cli, registry: Path) -> None:
    with watching(registry):
        result = cli("-r", registry, "index", "watch")
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert "another watcher already watches it" in result.err
    result = cli("-r", registry, "index", "watch", "--check")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    result = cli("-r", registry / "nothing", "index", "watch")
    assert result.code == 2 and "not a registry directory" in result.err


def test_the_watch_command_stops_cleanly_on_sigterm(registry: Path) -> None:
    ptreg = Path(sys.executable).with_name("ptreg")
    watcher = subprocess.Popen(
        [str(ptreg), "-r", str(registry), "index", "watch", "--json"], stdout=subprocess.PIPE, text=True
    )
    try:
        started = json.loads(_first_object(watcher))
        assert started["watching"] == str(registry)
        _refreshed(registry)
        assert _refreshed(registry).watched
        watcher.send_signal(signal.SIGTERM)
        out, _ = watcher.communicate(timeout=patient(60))
        assert watcher.returncode == 0 and json.loads(out) == {"stopped": "stopped by SIGTERM"}
        assert not (registry / SOCKET_FILE).exists()
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


def _first_object(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    lines = []
    while not lines or lines[-1] != "}\n":
        line = process.stdout.readline()
        assert line, "the watcher ended before it started"
        lines.append(line)
    return "".join(lines)
