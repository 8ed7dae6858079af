"""The inputs a command evaluator freezes, read as hostile: bounded in entries, folders included."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptreg.errors import EXIT_CHECK_FAILED, PtregError
from ptreg.store import input_digests


def test_a_folder_of_empty_folders_is_bounded_like_one_of_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(input_digests, "MAX_FILES", 5)
    (tmp_path / "split").mkdir()
    for n in range(5):
        (tmp_path / "split" / str(n)).mkdir()
    assert set(input_digests.digest_inputs(tmp_path, ["split"])) == {"split"}
    (tmp_path / "split" / "5").mkdir()  # no file at all, and still too many entries to walk
    with pytest.raises(PtregError) as caught:
        input_digests.digest_inputs(tmp_path, ["split"])
    assert caught.value.message == "input 'split': over 5 files and folders"
    assert caught.value.exit_code == EXIT_CHECK_FAILED
