"""`ptreg import`: the all-or-nothing import, then what the registry's rules say of what came in.

Rule problems the records bring with them (e.g. fields a version 1 file does not have) do not
block the import; they are reported, and `ptreg validate` keeps reporting them until fixed.
"""

from __future__ import annotations

from pathlib import Path

from ..store.directory import Progress, load_directory
from ..store.interchange import ImportReport, import_file
from .validate import check_registry


def import_into(root: Path, path: Path, *, replace: bool = False, progress: Progress | None = None) -> ImportReport:
    report = import_file(root, path, replace=replace, progress=progress)
    imported = set(report.imported)
    after = check_registry(load_directory(root, progress))
    report.problems_after = [p for p in after if p.attempt_id in imported]
    return report
