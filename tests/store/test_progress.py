"""progress.json, written by a run and read as hostile: its writer's pace, the process it names
believed only with its create time, every field checked, and nothing followed through a symlink."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptreg.errors import PtregError
from ptreg.store.progress import (
    PROGRESS_FILE,
    ProgressWriter,
    claim_run_id,
    clean_line,
    finish_in_progress,
    in_progress_folder,
    make_in_progress_folder,
    process_create_time,
    read_in_progress,
    runs_in_progress,
)
from ptreg.store.runs import new_run_id

RUN = "20260101T000000Z"


def _write(folder: Path, **fields: object) -> None:
    raw = {"pid": os.getpid(), "created": process_create_time(os.getpid()), "attempt": "a", "run_id": RUN, **fields}
    (folder / PROGRESS_FILE).write_text(json.dumps(raw))


def test_the_writer_keeps_the_run_and_writes_at_most_twice_a_second_unless_the_round_changes(tmp_path: Path) -> None:
    now = [100.0]
    folder = make_in_progress_folder(tmp_path, "a", RUN)
    assert os.stat(folder).st_mode & 0o777 == 0o700
    writer = ProgressWriter(folder, "a", RUN, started="2026-01-01T00:00:00Z", clock=lambda: now[0])
    writer.write()
    now[0] += 0.1
    writer.update(phase="x", line="first \x1b[31mline\x07\n")  # too soon: kept, not written
    assert json.loads((folder / PROGRESS_FILE).read_text())["last_line"] is None
    writer.update(round_=1, total=3, budget_left=42.0)  # a new round: written at once
    kept = json.loads((folder / PROGRESS_FILE).read_text())
    assert (kept["round"], kept["total"], kept["budget_left"]) == (1, 3, 42.0)
    assert kept["last_line"] == "first [31mline" and kept["phase"] == "x"
    assert kept["pid"] == os.getpid() and kept["elapsed"] == 0.1
    run = read_in_progress(folder, "a", RUN)
    assert run.state == "running" and run.round == 1 and run.last_line == "first [31mline"


def test_a_pid_is_believed_only_with_its_create_time(tmp_path: Path) -> None:
    folder = make_in_progress_folder(tmp_path, "a", RUN)
    _write(folder)
    assert read_in_progress(folder, "a", RUN).state == "running"
    _write(folder, created=process_create_time(os.getpid()) - 5)  # this pid, another process's start
    assert read_in_progress(folder, "a", RUN).state == "process gone"
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _write(folder, pid=int(ended.stdout))  # a process that is gone
    assert read_in_progress(folder, "a", RUN).state == "process gone"
    _write(folder, created=None)  # no create time: nothing to believe
    assert read_in_progress(folder, "a", RUN).state == "process gone"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"pid": True}, "#/pid: not a process id"),
        ({"pid": -4}, "#/pid: not a process id"),
        ({"round": 10**400}, "#/round: not a whole number"),
        ({"round": 1.5}, "#/round: not a whole number"),
        ({"budget_left": -1}, "#/budget_left: not a number of at least 0"),
        ({"last_line": "x" * 201}, "#/last_line: not a text of at most 200"),
        ({"run_id": "20260202T000000Z"}, "names run 20260202T000000Z of a, not its folder's"),
    ],
)
def test_a_field_that_is_not_what_ptreg_writes_makes_the_file_unreadable(
    tmp_path: Path, fields: dict[str, object], problem: str
) -> None:
    folder = make_in_progress_folder(tmp_path, "a", RUN)
    _write(folder, **fields)
    run = read_in_progress(folder, "a", RUN)
    assert run.state == "unreadable" and run.problem is not None and problem in run.problem, run.problem


def test_nothing_is_read_through_a_symlink_or_past_its_bound(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _write(elsewhere)
    root = tmp_path / "reg"
    folder = make_in_progress_folder(root, "a", RUN)
    (folder / PROGRESS_FILE).symlink_to(elsewhere / PROGRESS_FILE)
    run = read_in_progress(folder, "a", RUN)
    assert run.state == "unreadable" and "symlink" in (run.problem or "")
    (folder / PROGRESS_FILE).unlink()
    (folder / PROGRESS_FILE).write_text(" " * (64 * 1024 + 1))
    assert "larger than" in (read_in_progress(folder, "a", RUN).problem or "")
    # a symlinked in-progress folder is no run in progress, and is not entered
    linked = in_progress_folder(root, "a", "20260102T000000Z")
    linked.symlink_to(elsewhere)
    assert [r.run_id for r in runs_in_progress(root)] == [RUN]
    with pytest.raises(PtregError, match="symlink"):
        make_in_progress_folder(root, "a", "20260102T000000Z")


def test_a_claimed_run_id_is_fresh_and_a_taken_one_is_not_chosen_again(tmp_path: Path) -> None:
    folder = make_in_progress_folder(tmp_path, "a", RUN)
    assert new_run_id(tmp_path, "a", "2026-01-01T00:00:00Z") == RUN + "-2"  # its in-progress folder holds it
    _write(folder)  # what the detaching process wrote: this process
    assert claim_run_id(tmp_path, "a", RUN) == folder
    (folder / "samples.jsonl").write_text("")
    with pytest.raises(PtregError, match=r"samples\.jsonl"):
        claim_run_id(tmp_path, "a", RUN)
    (tmp_path / "runs" / "a" / "20260103T000000Z").mkdir()
    with pytest.raises(PtregError, match="already written"):
        claim_run_id(tmp_path, "a", "20260103T000000Z")


def test_the_log_goes_with_the_written_run_and_the_folder_goes(tmp_path: Path) -> None:
    folder = make_in_progress_folder(tmp_path, "a", RUN)
    (folder / "log.txt").write_text("said\n")
    written = tmp_path / "runs" / "a" / RUN
    written.mkdir()
    finish_in_progress(tmp_path, "a", RUN, written)
    assert (written / "log.txt").read_text() == "said\n" and not folder.exists()


def test_a_line_is_one_line_without_control_characters() -> None:
    assert clean_line("a\tb\r\nc\x00") == "a b c"
    assert len(clean_line("y" * 500)) == 200
