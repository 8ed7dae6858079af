"""Bundles: a registry travels whole (records, frozen evaluators, runs) as a .tar.gz or a folder,
and a bundle that is not one is refused in one line with nothing written."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from helpers import HAND_RUN as RUN
from helpers import assert_one_line_error, meta_json, registry_with_a_run, snapshot
from ptreg.errors import PtregError
from ptreg.store import bundle
from ptreg.store.bundle import read_bundle, write_bundle
from ptreg.store.directory import load_directory


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


def test_a_bundle_file_already_there_is_replaced_only_when_told(cli, source: Path, tmp_path: Path) -> None:
    target = tmp_path / "bundle.tar.gz"
    target.write_bytes(b"the only copy of another registry")
    assert_one_line_error(cli("-r", source, "export", "--bundle", target), 2, str(target), "exists", "--overwrite")
    assert target.read_bytes() == b"the only copy of another registry"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "nothing staged is left"
    replaced = cli("-r", source, "export", "--bundle", target, "--overwrite")
    assert replaced.code == 0, replaced.err
    assert tarfile.is_tarfile(target)


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


# --------------------------------------------------------------------------- bounds and members
# A bundle is read into memory, so what it may bring is bounded before anything is read whole:
# each member by its kind, all members together, and their number (store/bundle.py).

RESULTS = f"{RUN}/results.json"


def write_bomb(path: Path, members: list[tuple[str, int, bytes]], cut: bool = False) -> Path:
    """A .tar.gz written header by header, each member's data (``size`` bytes of the fill byte
    after its type) streamed into gzip: a few hundred kilobytes on disk, never whole in memory.
    ``cut``: the archive stops after the last member, and the gzip stream before its end, so
    that a reader that goes on past the last member fails."""
    chunk_size = 1024 * 1024
    with gzip.open(path, "wb", compresslevel=1) as gz:
        for name, size, kind in members:
            info = tarfile.TarInfo(name)
            info.size, info.type = size, kind[:1]
            gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
            chunk = kind[1:2] * chunk_size if len(kind) > 1 else b"\0" * chunk_size
            for start in range(0, size, chunk_size):
                gz.write(chunk[: min(chunk_size, size - start)])
            gz.write(b"\0" * (-size % tarfile.BLOCKSIZE))
        if not cut:
            gz.write(b"\0" * 2 * tarfile.BLOCKSIZE)
    if cut:
        os.truncate(path, path.stat().st_size - 8)  # the gzip trailer: its checksum and length
    return path


def peak_while_refused(path: Path, *fragments: str) -> int:
    """The most memory Python held while ``read_bundle`` refused ``path``."""
    tracemalloc.start()
    try:
        with pytest.raises(PtregError) as caught:
            read_bundle(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.exit_code == 2 and "\n" not in caught.value.message
    for fragment in (str(path), *fragments):
        assert fragment in caught.value.message, caught.value.message
    return peak


FILE = tarfile.REGTYPE
FOLDER = tarfile.DIRTYPE
MB = 1024 * 1024


def test_a_member_larger_than_its_kind_may_be_is_refused_from_its_header(cli, source: Path, tmp_path: Path) -> None:
    """The attack of issue 31: members of 190 MB each in a bundle of a few hundred kilobytes."""
    most = bundle.RUN_FILE_MAX_BYTES
    bomb = write_bomb(tmp_path / "bomb.tar.gz", [(RESULTS, most + 1, FILE), (f"{RUN}/environment.json", most, FILE)])
    assert bomb.stat().st_size < 1 * MB
    peak = peak_while_refused(bomb, f"member '{RESULTS}' has {most + 1} bytes, more than the {most} allowed")
    assert peak < 4 * MB, peak  # nothing of it read: the header alone refused it
    before = snapshot(source)
    assert_one_line_error(cli("-r", source, "import", bomb), 2, str(bomb), RESULTS)
    assert snapshot(source) == before


def test_members_past_the_total_are_refused_before_any_is_read(cli, source: Path, tmp_path: Path) -> None:
    size = bundle.RUN_FILE_MAX_BYTES - tarfile.BLOCKSIZE  # each within what a run file may have
    count = bundle.BUNDLE_MAX_BYTES // size + 1
    names = [f"runs/measured/20240101T00000{i}Z/results.json" for i in range(count)]
    bomb = write_bomb(tmp_path / "bomb.tar.gz", [("registry.json", 2, FILE + b"{")] + [(n, size, FILE) for n in names])
    peak = peak_while_refused(bomb, f"member '{names[-1]}' brings the bundle to", f"{bundle.BUNDLE_MAX_BYTES}")
    assert peak < 4 * MB, peak
    before = snapshot(source)
    assert_one_line_error(cli("-r", source, "import", bomb), 2, names[-1])
    assert snapshot(source) == before


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME])
def test_an_extended_header_too_large_to_be_a_name_is_refused_unread(tmp_path: Path, kind: bytes) -> None:
    """tarfile reads a pax header or a long name whole: one of 64 MB is refused before it is read."""
    bomb = write_bomb(tmp_path / "bomb.tar.gz", [("././@LongLink", 64 * MB, kind + b"a"), (RESULTS, 1, FILE)])
    assert peak_while_refused(bomb, "the tar header at byte 512 asks to read 67108864 bytes at once") < 4 * MB


def test_a_sparse_member_whose_data_expands_is_refused(tmp_path: Path) -> None:
    bomb = write_bomb(tmp_path / "sparse.tar.gz", [(RESULTS, 0, tarfile.GNUTYPE_SPARSE)])
    peak_while_refused(bomb, f"member '{RESULTS}' is not a regular file")


def test_the_member_past_the_count_is_refused_without_listing_the_rest(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders a registry may hold, one more than the bound, in a gzip stream cut short: only a
    reader that stops at the bound refuses with the count rather than the broken stream."""
    monkeypatch.setattr(bundle, "BUNDLE_MAX_MEMBERS", 50)
    folders = [(f"runs/attempt-{i}", 0, FOLDER) for i in range(51)]
    bomb = write_bomb(tmp_path / "many.tar.gz", folders, cut=True)
    peak_while_refused(bomb, "member 'runs/attempt-50' is one more than the 50 members a bundle may have")
    whole = write_bomb(tmp_path / "whole.tar.gz", folders[:50], cut=True)
    peak_while_refused(whole, "not a readable .tar.gz bundle")  # the same tail, read when within the bound
    export = tmp_path / "folder"
    write_bundle(source, load_directory(source), export)
    bound = len(list(export.rglob("*"))) + 10  # the term files and their folders count too
    monkeypatch.setattr(bundle, "BUNDLE_MAX_MEMBERS", bound)
    for i in range(40):
        (export / "runs" / f"attempt-{i}").mkdir()
    peak_while_refused(export, f"is one more than the {bound} members a bundle may have")


def test_a_file_that_grows_after_it_is_listed_is_refused(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes are counted as they come: a member cannot bring more than it was listed with."""
    export = tmp_path / "folder"
    write_bundle(source, load_directory(source), export)
    listed = bundle._folder_members

    def then_grown(root: Path, relative: str, tally: bundle._Tally) -> list[tuple[str, int]]:
        found = listed(root, relative, tally)
        if not relative:  # the whole folder is listed: a writer appends before it is read
            with (export / "registry.json").open("a") as handle:
                handle.write(" " * 10)
        return found

    monkeypatch.setattr(bundle, "_folder_members", then_grown)
    peak_while_refused(export, "member 'registry.json' holds more than the", "bytes it was listed with")


@pytest.mark.parametrize(
    "folder, fragment",
    [
        ("plain.json", "member 'plain.json' is a folder where a file belongs"),
        (f"{RUN}/results.json", f"member '{RUN}/results.json' is a folder where a file belongs"),
        ("notes", "member 'notes' is not a folder a registry holds"),
        ("runs/measured/latest", "member 'runs/measured/latest' is not a folder a registry holds"),
    ],
)
def test_a_folder_where_a_registry_has_none_is_refused_in_either_form(
    cli, source: Path, tmp_path: Path, folder: str, fragment: str
) -> None:
    assert cli("-r", source, "export", "--bundle", tmp_path / "b").code == 0
    in_folder = tmp_path / "b" / folder
    in_folder.unlink(missing_ok=True)  # a file where the folder goes
    in_folder.mkdir(parents=True)
    packed = tmp_path / "b.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        for item in sorted((tmp_path / "b").iterdir()):
            tar.add(item, arcname=item.name)  # folders as members of their own, as `tar` writes them
    before = snapshot(source)
    for bad in (tmp_path / "b", packed):
        assert_one_line_error(cli("-r", source, "import", bad, "--replace"), 2, str(bad), fragment)
        assert snapshot(source) == before


def test_a_tar_with_the_folders_a_registry_holds_imports(cli, source: Path, tmp_path: Path) -> None:
    assert cli("-r", source, "export", "--bundle", tmp_path / "b").code == 0
    packed = tmp_path / "b.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        for item in sorted((tmp_path / "b").iterdir()):
            tar.add(item, arcname=item.name)
    with tarfile.open(packed) as tar:
        assert any(m.isdir() for m in tar.getmembers())
    result = cli("-r", tmp_path / "copy", "import", packed, "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["runs_added"] == 1


@pytest.mark.parametrize(
    "linked, target",
    [
        ("runs/measured", None),  # None: moved out of the bundle, linked from where it was
        ("evaluators", None),
        (RESULTS, None),
        ("plain.json", None),
        ("runs/other", "measured"),  # to a folder inside the bundle
        ("zz.json", "plain.json"),
    ],
)
def test_a_symlink_in_a_folder_bundle_is_refused(
    cli, source: Path, tmp_path: Path, linked: str, target: str | None
) -> None:
    """A symlinked folder was skipped silently, and all it held with it; a symlink to a file or
    a folder, leading inside the bundle or out of it, is refused, naming it."""
    folder = tmp_path / "b"
    assert cli("-r", source, "export", "--bundle", folder).code == 0
    link = folder / linked
    if target is None:
        moved = tmp_path / "elsewhere" / link.name
        moved.parent.mkdir()
        shutil.move(link, moved)
        link.symlink_to(moved, target_is_directory=moved.is_dir())
    else:
        link.symlink_to(target, target_is_directory=(link.parent / target).is_dir())
    before = snapshot(source)
    result = cli("-r", source, "import", folder, "--replace")
    assert_one_line_error(result, 2, str(folder), f"member '{linked}' is a symlink")
    assert snapshot(source) == before


def test_a_registry_past_a_bundles_bounds_is_not_exported(
    cli, source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is exported must import whole: the bounds that refuse an import refuse the export."""
    before = sorted(tmp_path.iterdir())
    total = sum(p.stat().st_size for p in bundle.bundle_files(source, load_directory(source)))
    monkeypatch.setattr(bundle, "BUNDLE_MAX_BYTES", total - 1)
    for name in ("b.tar.gz", "b"):
        refused = cli("-r", source, "export", "--bundle", tmp_path / name)
        assert_one_line_error(refused, 2, str(source), f"brings the bundle to {total} bytes, more than the {total - 1}")
        assert "not exported" in refused.err
    assert sorted(tmp_path.iterdir()) == before  # no bundle, nor a staged one


def test_a_fifo_named_like_a_bundle_is_refused_not_waited_on(cli, source: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.tar.gz"
    os.mkfifo(fifo)
    assert_one_line_error(cli("-r", source, "import", fifo), 2, f"{fifo}: not a regular file")
