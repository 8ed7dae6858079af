"""Storage: a registry directory, its atomic, stable, per-attempt files, and where it is found."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import complete_record, failed_record, meta_json, snapshot, to_old_layout, write_registry
from ptreg.errors import PtregError, UnknownAttempt
from ptreg.records.attempt import Attempt
from ptreg.records.refs import check_id
from ptreg.records.vocabulary import default_meta
from ptreg.store import jsonio
from ptreg.store.directory import (
    init_registry,
    load_directory,
    load_meta,
    read_attempt,
    write_attempt,
)


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- init


def test_init_creates_registry_json_with_default_vocabularies(tmp_path: Path) -> None:
    root = tmp_path / "new" / "registry"
    path = init_registry(root)
    assert path == root / "registry.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {"schema_version": 3, "vocabularies": "vocabulary"}
    data = load_meta(root).model_dump(mode="json")
    assert set(data["confidence_vocabulary"]) == {"exact", "inferred", "missing-evidence", "not-applicable"}
    for key in ("method_vocabulary", "objective_vocabulary", "kind_vocabulary"):
        assert data[key], key
    assert "infrastructure" in data["kind_vocabulary"]
    assert sorted(p.name for p in root.iterdir()) == [".gitignore", "registry.json", "vocabulary"]
    assert sorted(p.name for p in (root / "vocabulary").iterdir()) == ["confidence", "kind", "method", "objective"]
    assert (root / "vocabulary" / "kind" / "infrastructure.json").is_file()
    ignored = (root / ".gitignore").read_text()
    for pattern in (".ptreg*.lock", ".ptreg*.lock.holder", ".ptreg-journal.json", ".*.tmp", ".tmp-*/"):
        assert pattern in ignored.splitlines()
    registry = load_directory(root)
    assert registry.records == [] and registry.problems == []


def test_second_init_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    write_attempt(root, Attempt.model_validate(complete_record("kept")))
    before = snapshot(root)
    with pytest.raises(PtregError) as caught:
        init_registry(root)
    assert caught.value.exit_code == 1
    assert "already" in caught.value.message
    assert snapshot(root) == before


def test_init_over_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("not a directory")
    with pytest.raises(PtregError):
        init_registry(target)
    assert target.read_text() == "not a directory"


# --------------------------------------------------------------------------- writing


def test_write_attempt_is_pretty_stable_and_leaves_no_temp_files(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    record = failed_record("stable", varied_from="other", varied="rank 8 -> 16")
    path = write_attempt(root, Attempt.model_validate(record))
    assert path == root / "stable.json"
    first = path.read_bytes()
    text = first.decode("utf-8")
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.startswith('{\n  "id": "stable",\n')
    assert json.loads(text) == record
    # the same record, its keys given in another order, yields the same bytes
    shuffled = dict(reversed(list(record.items())))
    write_attempt(root, Attempt.model_validate(shuffled))
    assert path.read_bytes() == first
    write_attempt(root, Attempt.model_validate(record))
    assert path.read_bytes() == first
    assert sorted(p.name for p in root.iterdir()) == [".gitignore", "registry.json", "stable.json", "vocabulary"]


def test_written_keys_follow_the_model_order(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    record = complete_record("ordered", varied_from="a", varied="b")
    path = write_attempt(root, Attempt.model_validate(dict(sorted(record.items()))))
    keys = list(json.loads(path.read_text()))
    model_order = [k for k in Attempt.model_fields if k in record]
    assert keys == model_order


def test_non_ascii_text_is_written_as_utf8(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    path = write_attempt(root, Attempt.model_validate(complete_record("utf", lesson="1.10\u20131.13\u00d7 faster")))
    assert "1.10\u20131.13\u00d7".encode("utf-8") in path.read_bytes()


def test_failed_write_keeps_the_old_content_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    path = write_attempt(root, Attempt.model_validate(complete_record("kept", lesson="old lesson")))
    before = snapshot(root)

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonio.os, "replace", crash)
    with pytest.raises(OSError):
        write_attempt(root, Attempt.model_validate(complete_record("kept", lesson="new lesson")))
    assert snapshot(root) == before
    assert json.loads(path.read_text())["lesson"] == "old lesson"


def test_crash_before_fsync_leaves_no_partial_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    before = snapshot(root)

    def crash(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(jsonio.os, "fsync", crash)
    with pytest.raises(OSError):
        write_attempt(root, Attempt.model_validate(complete_record("never")))
    assert snapshot(root) == before


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    """A record (or export) written atomically should be as readable as one written with
    open(): mode 0666 minus the umask, not the 0600 of a private temporary file."""
    root = tmp_path / "reg"
    init_registry(root)
    path = write_attempt(root, Attempt.model_validate(complete_record("shared-with-the-team")))
    expected = 0o666 & ~current_umask()
    assert oct(path.stat().st_mode & 0o777) == oct(expected)
    assert oct((root / "registry.json").stat().st_mode & 0o777) == oct(expected)


# --------------------------------------------------------------------------- ids and paths


@pytest.mark.parametrize("bad", ["../x", "a/b", "a..b", "a b", "Upper", "", ".hidden", "registry", "x" * 129, "abc\n"])
def test_check_id_refuses_what_cannot_be_a_file_name(bad: str) -> None:
    with pytest.raises(PtregError) as caught:
        check_id(bad)
    assert caught.value.exit_code == 2


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet="ab.-/ \nZ9", max_size=8))
@example("abc\n")
@example("a..b")
def test_check_id_agrees_with_the_model(candidate: str) -> None:
    """An id the command line accepts is exactly an id a record may carry (bar 'registry')."""
    try:
        Attempt.model_validate({"id": candidate, "name": "n", "status": "worked"})
        model_ok = True
    except ValidationError:
        model_ok = False
    try:
        check_id(candidate)
        cli_ok = True
    except PtregError:
        cli_ok = False
    assert cli_ok == (model_ok and candidate != "registry"), repr(candidate)


def test_read_attempt_by_id(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("one"), complete_record("two")])
    assert read_attempt(root, "two").name == "Attempt two"
    with pytest.raises(UnknownAttempt) as caught:
        read_attempt(root, "tw")
    assert caught.value.exit_code == 2  # an unknown id is unusable input, for every command
    assert "two" in caught.value.suggestions
    with pytest.raises(PtregError) as escaped:
        read_attempt(root, "../reg/one")
    assert escaped.value.exit_code == 2


# --------------------------------------------------------------------------- registry.json


def test_newer_schema_version_is_refused_naming_both(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    meta = json.loads((root / "registry.json").read_text())
    meta["schema_version"] = 4
    (root / "registry.json").write_text(json.dumps(meta))
    with pytest.raises(PtregError) as caught:
        load_directory(root)
    message = caught.value.message
    assert "schema_version 4" in message
    assert re.search(r"\b3\b", message), message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda m: m.pop("kind_vocabulary"), "kind_vocabulary"),
        (lambda m: m.update(schema_version="2"), "schema_version"),
        (lambda m: m["confidence_vocabulary"].update(certain="?"), "confidence_vocabulary"),
        (lambda m: m.update(extra=1), "extra"),
    ],
)
def test_broken_registry_json_is_named(tmp_path: Path, change, fragment: str) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    meta = meta_json()  # the older layout, read still: every vocabulary inside registry.json
    change(meta)
    to_old_layout(root, meta)
    with pytest.raises(PtregError) as caught:
        load_meta(root)
    assert "registry.json" in caught.value.message and fragment in caught.value.message


def test_missing_registry_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PtregError) as caught:
        load_directory(tmp_path / "nowhere")
    assert "ptreg init" in caught.value.message
    (tmp_path / "plain").mkdir()
    with pytest.raises(PtregError) as caught:
        load_directory(tmp_path / "plain")
    assert "registry.json" in caught.value.message


def test_default_meta_round_trips(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    init_registry(root)
    assert load_meta(root) == default_meta()


# --------------------------------------------------------------------------- paths a journal or manifest names


def test_a_journal_through_a_symlinked_folder_is_refused_before_its_commit_point(tmp_path: Path) -> None:
    """Checked before the journal is written: a refusal leaves no journal for every later
    command to trip on, and nothing lands outside the registry."""
    from ptreg.store.journal import commit
    from ptreg.store.names import JOURNAL_FILE

    root = write_registry(tmp_path / "reg", [complete_record("kept")])
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "shelf").symlink_to(outside, target_is_directory=True)
    staged = jsonio.stage_text(root, json.dumps(complete_record("planted")), prefix=".planted.json.")
    before = snapshot(root)
    with pytest.raises(PtregError, match=r"shelf: a symlink inside .*, named by .*\.ptreg-journal\.json"):
        commit(root, [(Path(staged).name, "shelf/planted.json")], "import")
    assert not os.path.lexists(root / JOURNAL_FILE) and list(outside.iterdir()) == []
    assert snapshot(root) == before


def test_a_journal_replaces_a_symlinked_record_never_what_it_points_to(tmp_path: Path) -> None:
    from ptreg.store.journal import commit

    root = write_registry(tmp_path / "reg", [])
    (root / "shelf").mkdir()
    (root / "shelf" / "kept.json").write_text("shelved", encoding="utf-8")
    (root / "kept.json").symlink_to(Path("shelf") / "kept.json")
    staged = jsonio.stage_text(root, "new", prefix=".kept.json.")
    commit(root, [(Path(staged).name, "kept.json")], "import")
    assert not (root / "kept.json").is_symlink() and (root / "kept.json").read_text(encoding="utf-8") == "new"
    assert (root / "shelf" / "kept.json").read_text(encoding="utf-8") == "shelved"


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../x.json", "a/../../x.json", "a//b.json", "./a.json", "a\\b.json", "", "a\0b", 7]
)
def test_inside_refuses_any_name_that_is_not_a_plain_path_below(tmp_path: Path, name: object) -> None:
    from ptreg.store.workfiles import inside

    with pytest.raises(PtregError, match=r"the test's manifest: names .*nothing written or deleted"):
        inside(tmp_path, name, "the test's manifest")
