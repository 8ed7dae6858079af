"""Generators for the second round of attacks on issue 43 (tests/data/bad/cases-second-round-43.json):
output paths that lead into the registry directory, by name, through a symlink or through
'..'. Each takes (registry, a folder outside it, a work folder) and returns the path that
``{case_file}`` names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def output_over_a_record(root: Path, outside: Path, work: Path) -> Path:
    return root / "measured.json"


def output_new_file_in_registry(root: Path, outside: Path, work: Path) -> Path:
    return root / "ledger.json"


def output_over_registry_json(root: Path, outside: Path, work: Path) -> Path:
    return root / "registry.json"


def output_over_the_lock_file(root: Path, outside: Path, work: Path) -> Path:
    (root / ".ptreg.lock").touch()
    return root / ".ptreg.lock"


def output_symlink_to_a_record(root: Path, outside: Path, work: Path) -> Path:
    (work / "ledger.json").symlink_to(root / "measured.json")
    return work / "ledger.json"


def output_through_a_symlinked_folder(root: Path, outside: Path, work: Path) -> Path:
    (work / "shelf").symlink_to(root, target_is_directory=True)
    return work / "shelf" / "ledger.json"


def output_dotdot_into_registry(root: Path, outside: Path, work: Path) -> Path:
    return work / ".." / root.name / "runs" / "ledger.json"


def bundle_into_registry(root: Path, outside: Path, work: Path) -> Path:
    return root / "copy.tar.gz"


def bundle_folder_into_registry(root: Path, outside: Path, work: Path) -> Path:
    return root / "runs" / "copy"


def schemas_into_registry(root: Path, outside: Path, work: Path) -> Path:
    return root / "schemas"


SECOND_ROUND_GENERATORS: dict[str, Callable[[Path, Path, Path], Path | None]] = {
    f.__name__: f
    for f in (
        output_over_a_record,
        output_new_file_in_registry,
        output_over_registry_json,
        output_over_the_lock_file,
        output_symlink_to_a_record,
        output_through_a_symlinked_folder,
        output_dotdot_into_registry,
        bundle_into_registry,
        bundle_folder_into_registry,
        schemas_into_registry,
    )
}


def run_folder_symlink(root: Path, outside: Path, work: Path) -> None:
    """A run folder of the measured attempt, moved out and symlinked back under another run id."""
    import shutil

    shutil.copytree(root / "runs" / "measured" / "20240101T000000Z", outside / "20240102T000000Z")
    (root / "runs" / "measured" / "20240102T000000Z").symlink_to(outside / "20240102T000000Z")


def attempt_runs_symlink(root: Path, outside: Path, work: Path) -> None:
    """The run folders of an attempt that has none, a symlink to a folder outside."""
    (outside / "runs-of-plain").mkdir()
    (root / "runs" / "naive-baseline").symlink_to(outside / "runs-of-plain", target_is_directory=True)


SECOND_ROUND_GENERATORS.update({f.__name__: f for f in (run_folder_symlink, attempt_runs_symlink)})
