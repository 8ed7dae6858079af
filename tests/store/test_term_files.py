"""The term folder read with a stray file in it, and with several bad term files: `validate`
reports every problem in one pass; the reading commands keep working beside a README, saying
so once; a write and a bundle leave the README alone."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from helpers import complete_record, snapshot, write_registry

README = "Notes on these terms, for people: not a term.\n"
WARNING = "not a term file (<term>.json); ignored"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = write_registry(
        tmp_path / "reg", [complete_record("a"), complete_record("b", varied_from="a", varied="The tile size.")]
    )
    (root / "vocabulary" / "method" / "README").write_text(README, encoding="utf-8")
    return root


def test_validate_reports_every_bad_term_file_and_every_record_in_one_pass(cli, root: Path) -> None:
    folder = root / "vocabulary"
    (folder / "method" / "cache-blocking.json").write_text('{"term": "cache-blocking",', encoding="utf-8")
    (folder / "kind" / "new-kind.json").write_text(
        json.dumps({"term": "other-kind", "description": "Misfiled.", "order": 9}), encoding="utf-8"
    )
    (folder / "objective" / "speed.json").write_text(
        json.dumps({"term": "speed", "description": "", "order": -1}), encoding="utf-8"
    )
    (folder / "colour").mkdir()
    (root / "broken.json").write_text(json.dumps(complete_record("broken", status="sideways")), encoding="utf-8")
    result = cli("-r", root, "validate", "--json")
    assert result.code == 1, result.err
    report = json.loads(result.out)
    found = {(Path(p["file"]).relative_to(root).as_posix(), p["pointer"], p["severity"]) for p in report["problems"]}
    assert {
        ("vocabulary/method/cache-blocking.json", "", "error"),
        ("vocabulary/kind/new-kind.json", "/term", "error"),
        ("vocabulary/objective/speed.json", "/description", "error"),
        ("vocabulary/objective/speed.json", "/order", "error"),
        ("vocabulary/colour", "", "error"),
        ("vocabulary/method/README", "", "warning"),
        ("broken.json", "/status", "error"),
    } <= found
    # the records were checked against the terms that could be read: the one unreadable term is
    # the only one a record misses
    missing = [p for p in report["problems"] if p["rule"] == "vocabulary"]
    assert {p["message"] for p in missing} == {"method 'cache-blocking' is not in the method_vocabulary"}
    assert report["attempts"] == 3


def test_the_text_report_names_each_file_on_a_line_of_its_own(cli, root: Path) -> None:
    (root / "vocabulary" / "method" / "one.json").write_text("[]", encoding="utf-8")
    (root / "vocabulary" / "kind" / "two.json").write_text("{", encoding="utf-8")
    result = cli("-r", root, "validate")
    assert result.code == 1 and result.err == "", result.err
    lines = result.out.splitlines()
    assert any(
        line.endswith("vocabulary/method/one.json: error [schema] expected a JSON object, got array") for line in lines
    )
    assert any("vocabulary/kind/two.json: error [json] invalid JSON" in line for line in lines)
    assert any(line.endswith(f"vocabulary/method/README: warning [stray-file] {WARNING}") for line in lines)
    assert lines[-1].endswith("2 attempts, 2 errors, 1 warning: invalid")


@pytest.mark.parametrize("index", ["on", "off"])
@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["coverage"],
        ["streaks"],
        ["lineage", "a"],
        ["show", "b"],
        ["precedents", "--method", "cache-blocking"],
    ],
)
def test_reading_commands_work_beside_a_stray_file_and_say_so_once(
    cli, root: Path, command: list[str], index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if index == "off":
        monkeypatch.setenv("PTREG_INDEX", "off")
    for _ in range(2):  # the first builds the query index, the second answers from it
        result = cli("-r", root, *command)
        assert result.code == 0, result.err
        assert result.err.splitlines() == [f"ptreg: warning: {root}/vocabulary/method/README: {WARNING}"]


def test_a_stray_file_added_after_the_index_was_built(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("a")])
    assert cli("-r", root, "list").err == ""
    (root / "vocabulary" / "README.md").write_text(README, encoding="utf-8")
    result = cli("-r", root, "list", "--json")
    assert result.code == 0 and [row["id"] for row in json.loads(result.out)] == ["a"]
    assert result.err.splitlines() == [f"ptreg: warning: {root}/vocabulary/README.md: {WARNING}"]


def test_a_write_and_a_bundle_leave_a_stray_file_alone(cli, root: Path, tmp_path: Path) -> None:
    added = cli("-r", root, "vocab", "add", "method", "loop-tiling", "--description", "Tile the loops by hand.")
    assert added.code == 0, added.err
    assert (root / "vocabulary" / "method" / "README").read_text(encoding="utf-8") == README
    assert cli("-r", root, "export", "--bundle", tmp_path / "b.tar.gz").code == 0
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        names = tar.getnames()
    assert "vocabulary/method/loop-tiling.json" in names and not [n for n in names if "README" in n]
    before = snapshot(root)
    assert cli("-r", tmp_path / "copy", "import", tmp_path / "b.tar.gz").code == 0
    assert cli("-r", tmp_path / "copy", "validate").code == 0
    assert snapshot(root) == before
