"""The runner on every platform: macOS's paths (no cgroup, no subreaper, no /proc, no
parent-death signal, ru_maxrss in bytes) run here with ``sys.platform`` set to darwin, and
Windows is refused in one line before anything runs."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from command_projects import ATTEMPT, command_attempt

from helpers import patient
from ptreg.engine import cgroups, platforms, processes
from ptreg.engine.cgroups import MB
from ptreg.errors import UnusableInput

# A root that leaves an orphan holding 100 MB in a session of its own (a double fork), then exits.
LEAVES_AN_ORPHAN = """\
import os, subprocess, sys, time
hold = "import time; b = bytearray(100 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(60)"
subprocess.Popen([sys.executable, "-c", hold, sys.argv[1]], start_new_session=True)
time.sleep(0.5)
"""


@pytest.fixture
def on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as ptreg on macOS: the platform's name, no subreaper, no method chosen yet;
    /proc, cgroups and prctl out of reach (each fails the test if touched)."""

    def touched(*_: object) -> None:
        raise AssertionError("a Linux-only path was taken on macOS")

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(processes, "_subreaper", {"on": False})
    monkeypatch.setattr(processes, "_chosen", {})
    monkeypatch.setattr(processes, "_prctl", touched)
    monkeypatch.setattr(cgroups, "hierarchy", touched)
    monkeypatch.delenv(processes.METHOD_VARIABLE, raising=False)
    real_read_text = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if str(self).startswith("/proc/"):
            touched()
        return real_read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)


def test_macos_holds_trees_by_psutil_alone(on_macos: None) -> None:
    assert processes.supervision_method() == "process-tree"
    processes.become_subreaper()
    assert processes._subreaper["on"] is False


def test_macos_states_come_from_psutil(on_macos: None) -> None:
    assert platforms.state(os.getpid()) in ("R", "S")
    gone = psutil.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert platforms.state(gone.pid) is None


def test_macos_counts_ru_maxrss_in_bytes(on_macos: None, tmp_path: Path) -> None:
    tree = processes.Tree(process=SimpleNamespace(pid=0), method="process-tree", token="t")  # type: ignore[arg-type]
    tree.usage = SimpleNamespace(ru_maxrss=200 * MB)
    assert tree.peak_mb() == 200


def test_macos_finds_an_orphan_by_its_mark_measures_it_and_kills_it(on_macos: None, tmp_path: Path) -> None:
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    tree = processes.start([sys.executable, "-c", LEAVES_AN_ORPHAN, mark], cwd=tmp_path, env={}, die_with_parent=True)
    try:
        while not tree.reap():
            time.sleep(0.02)
        # the root is gone: its orphan is no one's descendant here, found by the tree's mark alone
        deadline = time.monotonic() + patient(30)  # the orphan holds its 100 MB for 60 s
        while (tree.sample() or 0) < 100 and time.monotonic() < deadline:
            time.sleep(processes.SAMPLE_SECONDS)
        assert (tree.peak_mb() or 0) >= 100
        orphans = [p for p in tree.members() if p != tree.pid]
        assert orphans
        assert tree.end() == []
        for pid in orphans:
            assert platforms.state(pid) in (None, "Z")  # a zombie is dead: its new parent reaps it
    finally:
        for process in psutil.process_iter():
            try:
                if mark in process.cmdline():
                    process.kill()
            except psutil.Error:
                continue


def test_windows_is_refused_in_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(processes, "_chosen", {})
    with pytest.raises(UnusableInput, match="cannot run processes on win32"):
        processes.supervision_method()
    with pytest.raises(UnusableInput, match="cannot run processes on win32"):
        processes.start([sys.executable, "-c", "pass"], cwd=tmp_path, env={}, method="process-tree")


def test_ptreg_run_on_windows_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from ptreg.cli import main

    marker = tmp_path / "ran"
    script = f"open({str(marker)!r}, 'w').write('ran')\n"
    root = command_attempt(tmp_path / "project", script, {"only": {}})
    capsys.readouterr()
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(processes, "_chosen", {})
    with pytest.raises(SystemExit) as exited:
        main(["-r", str(root), "run", ATTEMPT])
    out, err = capsys.readouterr()
    assert out == ""
    assert exited.value.code == 2
    assert err == (
        "ptreg: error: ptreg cannot run processes on win32: it holds a command's process tree on Linux and macOS only\n"
    )
    assert not marker.exists()
    assert not list((root / "runs").glob(f"{ATTEMPT}/*"))


def test_the_program_refuses_windows_in_one_line_before_importing_what_windows_lacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ptreg.__main__ import program

    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SystemExit) as stopped:
        program()
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "win32" in err and "Linux and macOS" in err
