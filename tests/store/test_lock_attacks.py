"""The registry lock against what the second round of attacks on issue 43 tried: its lock file
deleted while a writer holds it (by hand, taken for a stale one), in a thread of this process
or in another process. The next writer still waits for the first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_concurrency import _held_in_a_thread

from helpers import complete_record, env_without_hooks, write_registry
from ptreg.errors import LockBusy
from ptreg.store.locks import LOCK_FILE, registry_lock, run_lock

HOLDER = """
import sys, time
from pathlib import Path
from ptreg.store.locks import registry_lock

with registry_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_lock_file_deleted_while_a_thread_holds_it_still_keeps_the_next_writer_out(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    thread, release = _held_in_a_thread(registry_lock(root))
    try:
        (root / LOCK_FILE).unlink()
        with pytest.raises(LockBusy) as busy, registry_lock(root, timeout=0.3):
            pass
        assert f"is being written by pid {os.getpid()}" in busy.value.message
    finally:
        release.set()
        thread.join()
    with registry_lock(root, timeout=0):  # and once it is let go, the next one takes it
        pass


def test_a_lock_file_deleted_while_another_process_holds_it_still_keeps_the_next_writer_out(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True, env=env_without_hooks()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (root / LOCK_FILE).unlink()
        with pytest.raises(LockBusy) as busy, registry_lock(root, timeout=0.3):
            pass
        assert f"is being written by pid {holder.pid}" in busy.value.message
    finally:
        holder.kill()
        holder.wait()
    with registry_lock(root, timeout=0):
        pass


RUN_HOLDER = """
import sys, time
from pathlib import Path
from ptreg.store.locks import run_lock

with run_lock(Path(sys.argv[1]), "seed-record"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_run_lock_deleted_while_a_run_holds_it_still_refuses_a_second_run(tmp_path: Path) -> None:
    """The holder file beside the lock names the file its holder locked: a live holder of
    another file than the one now under that name holds the lock still (a thread of this
    process, or another process)."""
    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    lock = root / ".ptreg-run-seed-record.lock"
    thread, release = _held_in_a_thread(run_lock(root, "seed-record"))
    try:
        lock.unlink()
        with pytest.raises(LockBusy) as busy, run_lock(root, "seed-record"):
            pass
        assert f"seed-record is already being run by pid {os.getpid()}" in busy.value.message
    finally:
        release.set()
        thread.join()
    holder = subprocess.Popen(
        [sys.executable, "-c", RUN_HOLDER, str(root)], stdout=subprocess.PIPE, text=True, env=env_without_hooks()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock.unlink()
        with pytest.raises(LockBusy) as busy, run_lock(root, "seed-record", "conclude"):
            pass
        assert f"is being run by pid {holder.pid}" in busy.value.message
    finally:
        holder.kill()
        holder.wait()
    with run_lock(root, "seed-record"):  # its holder gone: the holder file it left is stale, said so
        pass
