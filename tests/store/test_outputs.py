"""The one writer of a user-chosen output path (ptreg/store/outputs.py): `export -o`,
`export --bundle` and the files of `schema --out` write a regular file whole, and write what a
user pipes to (a FIFO, a character device, a socket, a terminal, `-`, a descriptor) in place,
as a shell's `>` would: never replaced by a regular file.

No test writes to /dev/null or /dev/stdout themselves: a writer that replaced what it is given
would replace them for the whole machine. Copies stand in for them (a device node made in the
test's folder, a symlink to /dev/stdout), which a broken writer can only replace there."""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import assert_one_line_error, complete_record, registry_with_a_run, write_registry
from ptreg.store.outputs import descriptor_named, output_target

PTREG = str(Path(sys.executable).parent / "ptreg")
TITLE = "\x1b]0;pwned\x07"  # a terminal would set its title


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return write_registry(tmp_path / "registry", [complete_record("fine", lesson=f"Kept {TITLE} as text.")])


def exported(registry: Path) -> dict:
    """The ledger as plain `export` prints it."""
    result = subprocess.run([PTREG, "-r", str(registry), "export"], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def drain(fd: int) -> bytes:
    """Everything readable on ``fd`` until it stays quiet for a moment."""
    data = b""
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # a pty's master once the other end is closed
            break
        if not chunk:
            break
        data += chunk
    return data


# --------------------------------------------------------------------------- what a path is


def test_the_names_of_this_process_descriptors() -> None:
    assert descriptor_named(Path("/dev/stdout")) == 1
    assert descriptor_named(Path("/dev/stderr")) == 2
    assert descriptor_named(Path("/dev/fd/7")) == 7
    assert descriptor_named(Path("/proc/self/fd/5")) == 5
    assert descriptor_named(Path(f"/proc/{os.getpid()}/fd/4")) == 4
    assert descriptor_named(Path("/proc/1/fd/1")) is None  # another process's: opened as what it is
    assert descriptor_named(Path("/dev/null")) is None
    assert output_target(Path("-")).fd == 1


def test_a_symlink_to_dev_stdout_names_the_descriptor(tmp_path: Path) -> None:
    (tmp_path / "out").symlink_to("/dev/stdout")
    (tmp_path / "again").symlink_to(tmp_path / "out")
    assert output_target(tmp_path / "again").fd == 1


# --------------------------------------------------------------------------- written in place


def test_export_into_a_fifo_writes_through_it(cli, registry: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "ledger.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waits, as `cat fifo` would
    try:
        result = cli("-r", registry, "export", "-o", fifo)
        assert result.code == 0, result.err
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
        assert json.loads(drain(reader)) == exported(registry)
    finally:
        os.close(reader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.fifo", "registry"], "nothing staged is left"


def test_export_into_a_character_device_writes_through_it(cli, registry: Path, tmp_path: Path) -> None:
    """A copy of /dev/null (major 1, minor 3) made here: a device node, as /dev/null is."""
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.close(os.open(null, os.O_WRONLY))
    except OSError as exc:  # not root, or a file system mounted nodev
        pytest.skip(f"cannot make and open a device node here: {exc.strerror}")
    result = cli("-r", registry, "export", "-o", null)
    assert result.code == 0, result.err
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_rdev == os.makedev(1, 3)


def test_export_to_a_terminal_is_text_a_terminal_shows(cli, registry: Path) -> None:
    """A terminal (the pty's other end is a character device) gets the JSON with what a
    terminal acts on escaped, as plain `export` prints it; the value is the same."""
    master, replica = os.openpty()
    try:
        tty.setraw(replica)  # no newline translation: the bytes as written
        result = cli("-r", registry, "export", "-o", os.ttyname(replica))
        assert result.code == 0, result.err
        shown = drain(master).decode("utf-8")
    finally:
        os.close(replica)
        os.close(master)
    assert "\x1b" not in shown and "\\u001b]0;pwned\\u0007" in shown
    assert json.loads(shown) == exported(registry)


def test_export_into_a_unix_socket_writes_through_it(cli, registry: Path, tmp_path: Path) -> None:
    path = tmp_path / "ledger.sock"
    received: list[bytes] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(30)

        def take() -> None:
            connection, _ = listener.accept()
            with connection:
                received.append(b"".join(iter(lambda: connection.recv(65536), b"")))

        taker = threading.Thread(target=take)
        taker.start()
        result = cli("-r", registry, "export", "-o", path)
        taker.join(30)
    assert result.code == 0, result.err
    assert stat.S_ISSOCK(os.lstat(path).st_mode), "the socket was replaced by a file"
    assert json.loads(received[0]) == exported(registry)


@pytest.fixture
def out_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "shell-out.json"
    path.write_text("first line\n", encoding="utf-8")
    yield path


def test_dash_and_a_link_to_dev_stdout_write_to_the_descriptor(registry: Path, tmp_path: Path, out_file: Path) -> None:
    """`>>` appends: the descriptor itself is written, where the shell left its offset (cp and
    an atomic replace would both lose the first line). Nothing named `-` is made."""
    (tmp_path / "to-stdout").symlink_to("/dev/stdout")
    for target in ("-", str(tmp_path / "to-stdout")):
        out_file.write_text("first line\n", encoding="utf-8")
        with out_file.open("a") as appended:
            done = subprocess.run(
                [PTREG, "-r", str(registry), "export", "-o", target],
                stdout=appended,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
            )
        assert done.returncode == 0, done.stderr
        first, _, rest = out_file.read_text(encoding="utf-8").partition("\n")
        assert first == "first line" and json.loads(rest) == exported(registry), target
        assert (tmp_path / "to-stdout").is_symlink()
    assert not (tmp_path / "-").exists()


# --------------------------------------------------------------------------- files, and links to them


def test_a_symlink_to_a_file_is_written_through_and_kept(cli, registry: Path, tmp_path: Path) -> None:
    """As cp writes through a link to the file it names, but whole: the file gets the new
    content with its mode, and the link stays a link."""
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "ledger.json").write_text("old", encoding="utf-8")
    (kept / "ledger.json").chmod(0o640)
    link = tmp_path / "ledger.json"
    link.symlink_to(kept / "ledger.json")
    assert cli("-r", registry, "export", "-o", link).code == 0
    assert link.is_symlink() and os.readlink(link) == str(kept / "ledger.json")
    assert json.loads((kept / "ledger.json").read_text(encoding="utf-8")) == exported(registry)
    assert stat.S_IMODE((kept / "ledger.json").stat().st_mode) == 0o640
    assert sorted(p.name for p in kept.iterdir()) == ["ledger.json"], "nothing staged is left"


def test_a_symlink_to_nothing_is_refused(cli, registry: Path, tmp_path: Path) -> None:
    link = tmp_path / "ledger.json"
    link.symlink_to(tmp_path / "elsewhere" / "missing.json")
    assert_one_line_error(cli("-r", registry, "export", "-o", link), 2, str(link), "does not exist", "not written")
    assert link.is_symlink() and not (tmp_path / "elsewhere").exists()


def test_a_directory_is_refused(cli, registry: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    assert_one_line_error(cli("-r", registry, "export", "-o", folder), 2, str(folder), "is a directory")
    assert list(folder.iterdir()) == [] and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_block_device_is_refused(cli, registry: Path, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    try:
        os.mknod(disk, stat.S_IFBLK | 0o600, os.makedev(7, 250))  # a loop device number, never opened
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc.strerror}")
    assert_one_line_error(cli("-r", registry, "export", "-o", disk), 2, str(disk), "a block device")
    assert stat.S_ISBLK(os.lstat(disk).st_mode)


def test_schema_files_are_written_by_the_same_writer(cli, tmp_path: Path) -> None:
    out = tmp_path / "schemas"
    out.mkdir()
    (tmp_path / "elsewhere.json").write_text("old", encoding="utf-8")
    (out / "attempt.schema.json").symlink_to(tmp_path / "elsewhere.json")
    assert cli("schema", "--out", out).code == 0
    assert (out / "attempt.schema.json").is_symlink()
    assert json.loads((tmp_path / "elsewhere.json").read_text(encoding="utf-8"))["title"]


# --------------------------------------------------------------------------- bundles


def test_a_bundle_streams_to_stdout_and_imports(tmp_path: Path) -> None:
    source = registry_with_a_run(tmp_path / "source")
    (tmp_path / "to-stdout").symlink_to("/dev/stdout")
    for target in ("-", str(tmp_path / "to-stdout")):
        stream = tmp_path / "stream.tar.gz"
        with stream.open("wb") as sink:
            done = subprocess.run(
                [PTREG, "-r", str(source), "export", "--bundle", target], stdout=sink, stderr=subprocess.PIPE
            )
        assert done.returncode == 0, done.stderr
        with tarfile.open(stream) as tar:
            assert "registry.json" in tar.getnames()
        restored = tmp_path / f"restored{len(target)}"
        imported = subprocess.run([PTREG, "-r", str(restored), "import", str(stream)], capture_output=True, text=True)
        assert imported.returncode == 0, imported.stderr
    assert not (tmp_path / "-").exists()


def test_a_bundle_into_a_fifo(cli, tmp_path: Path) -> None:
    source = registry_with_a_run(tmp_path / "source")
    fifo = tmp_path / "bundle.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = cli("-r", source, "export", "--bundle", fifo)
        assert result.code == 0, result.err
        data = drain(reader)
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "got.tar.gz").write_bytes(data)
    with tarfile.open(tmp_path / "got.tar.gz") as tar:
        assert "registry.json" in tar.getnames()


def test_a_bundle_is_not_sent_to_a_terminal(cli, tmp_path: Path) -> None:
    source = registry_with_a_run(tmp_path / "source")
    master, replica = os.openpty()
    try:
        name = os.ttyname(replica)
        assert_one_line_error(cli("-r", source, "export", "--bundle", name), 2, name, "a terminal")
        assert drain(master) == b""
    finally:
        os.close(replica)
        os.close(master)
