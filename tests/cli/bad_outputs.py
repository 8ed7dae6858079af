"""Generators for the corpus of output paths and stray files (tests/data/bad/cases-outputs.json):
paths a command is told to write to that cannot hold what it writes (a symlink to nothing, a
directory), and files in the term folder that no term file is. Each takes (registry, a folder
outside it, a work folder) and returns the path that ``{case_file}`` names, if any."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def output_dangling_symlink(root: Path, outside: Path, work: Path) -> Path:
    """`-o` names a symlink to a file in a folder that does not exist: nothing is created there."""
    link = work / "ledger.json"
    link.symlink_to(outside / "missing" / "ledger.json")
    return link


def output_is_directory(root: Path, outside: Path, work: Path) -> Path:
    (work / "ledger.json").mkdir()
    return work / "ledger.json"


def bundle_is_directory(root: Path, outside: Path, work: Path) -> Path:
    (work / "copy.tar.gz").mkdir()
    return work / "copy.tar.gz"


def output_in_missing_directory(root: Path, outside: Path, work: Path) -> Path:
    return work / "missing" / "ledger.json"


def stray_symlink_in_term_folder(root: Path, outside: Path, work: Path) -> None:
    """A symlink named like a note: not a stray file (only a regular file is), so refused."""
    (outside / "notes.txt").write_text("planted\n", encoding="utf-8")
    (root / "vocabulary" / "method" / "README").symlink_to(outside / "notes.txt")


OUTPUT_GENERATORS: dict[str, Callable[[Path, Path, Path], Path | None]] = {
    f.__name__: f
    for f in (
        output_dangling_symlink,
        output_is_directory,
        bundle_is_directory,
        output_in_missing_directory,
        stray_symlink_in_term_folder,
    )
}
