"""Bundles: a registry travels whole (records, frozen evaluators, runs) as a .tar.gz or a folder,
and a bundle that is not one is refused in one line with nothing written."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from helpers import HAND_RUN as RUN
from helpers import assert_one_line_error, meta_json, registry_with_a_run, snapshot


@pytest.fixture
def source(tmp_path: Path) -> Path:
    return registry_with_a_run(tmp_path / "source")


def carried(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".")}


@pytest.mark.parametrize("name", ["bundle.tar.gz", "bundle-folder"])
def test_a_bundle_carries_the_registry_whole(cli, source: Path, tmp_path: Path, name: str) -> None:
    assert cli("-r", source, "validate").code == 0
    exported = cli("-r", source, "export", "--bundle", tmp_path / name)
    assert exported.code == 0, exported.err
    target = tmp_path / "restored"
    imported = cli("-r", target, "import", tmp_path / name, "--json")
    assert imported.code == 0, imported.err
    report = json.loads(imported.out)
    assert (report["imported"], report["evaluators_added"], report["runs_added"]) == (2, 1, 1)
    assert cli("-r", target, "validate").code == 0
    original, restored = carried(source), carried(target)
    assert set(restored) - {".gitignore"} == set(original)
    for relative, data in original.items():
        if "/" in relative:  # frozen evaluators and run files: the same bytes
            assert restored[relative] == data, relative
        else:  # records and registry.json: the same values, written in ptreg's own layout
            assert json.loads(restored[relative]) == json.loads(data), relative
    again = cli("-r", target, "import", tmp_path / name, "--replace")  # the same evaluator and run: left as they are
    assert again.code == 0, again.err


def test_plain_export_says_what_it_leaves_out(cli, source: Path) -> None:
    result = cli("-r", source, "export")
    assert result.code == 0 and json.loads(result.out)["attempts"]
    assert "leaves out 1 frozen evaluator and 1 run" in result.err and "--bundle" in result.err


def tar_with(path: Path, members: dict[str, bytes], link: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return path


@pytest.mark.parametrize(
    "members, link, fragment",
    [
        ({"../escape.json": b"{}"}, None, "not a file a registry holds"),
        ({"/etc/x.json": b"{}"}, None, "not a file a registry holds"),
        ({"notes.txt": b"hi"}, None, "not a file a registry holds"),
        ({"a.json": b"{}"}, "b.json", "not a regular file"),
        ({"a.json": b"{}"}, None, "has no registry.json"),
        (
            {"registry.json": json.dumps(meta_json()).encode(), "evaluators/x@0123456789ab.json": b"[1]"},
            None,
            "evaluators/x@0123456789ab.json",
        ),
    ],
)
def test_a_bundle_that_is_not_one_is_refused_and_nothing_written(
    cli, source: Path, tmp_path: Path, members: dict[str, bytes], link: str | None, fragment: str
) -> None:
    bad = tar_with(tmp_path / "bad.tar.gz", members, link)
    before = snapshot(source)
    result = cli("-r", source, "import", bad)
    assert result.code in (1, 2) and fragment in result.err, result.err
    assert_one_line_error(result, result.code)
    assert snapshot(source) == before


def test_not_a_tar_at_all(cli, source: Path, tmp_path: Path) -> None:
    (tmp_path / "junk.tar.gz").write_bytes(b"not gzip")
    assert_one_line_error(cli("-r", source, "import", tmp_path / "junk.tar.gz"), 2, "not a readable .tar.gz")


def test_a_frozen_evaluator_or_run_that_differs_is_never_rewritten(cli, source: Path, tmp_path: Path) -> None:
    assert cli("-r", source, "export", "--bundle", tmp_path / "b").code == 0
    target = tmp_path / "other"
    assert cli("-r", target, "import", tmp_path / "b").code == 0
    environment = target / RUN / "environment.json"
    environment.write_text('{"edited": true}\n')
    before = snapshot(target)
    refused = cli("-r", target, "import", tmp_path / "b", "--replace")
    assert_one_line_error(refused, 1, "environment.json differs")
    assert snapshot(target) == before


def test_an_edited_evaluator_in_a_bundle_is_refused(cli, source: Path, tmp_path: Path) -> None:
    assert cli("-r", source, "export", "--bundle", tmp_path / "b").code == 0
    [frozen] = (tmp_path / "b" / "evaluators").iterdir()
    data = json.loads(frozen.read_text())
    data["spec"]["repeats"] += 1
    frozen.write_text(json.dumps(data))
    result = cli("-r", tmp_path / "fresh", "import", tmp_path / "b")
    assert_one_line_error(result, 1, "hashes to")
    assert not (tmp_path / "fresh" / "registry.json").exists()


def test_a_registry_directory_imports_as_a_bundle_without_its_working_files(cli, source: Path, tmp_path: Path) -> None:
    (source / ".ptreg.lock").write_text("")
    (source / ".staged.import.tmp").write_text("{}")
    (source / ".gitignore").write_text(".ptreg*.lock\n")
    target = tmp_path / "copy"
    result = cli("-r", target, "import", source, "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["runs_added"] == 1
    assert not (target / ".staged.import.tmp").exists()
    assert cli("-r", target, "validate").code == 0
