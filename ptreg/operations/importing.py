"""`ptreg import`: the all-or-nothing import of an attempts.json or of a bundle, then what the
registry's rules say of what came in.

Rule problems the records bring with them (e.g. fields a version 1 file does not have) do not
block the import; they are reported, and `ptreg validate` keeps reporting them until fixed.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UnusableInput
from ..store.bundle import is_bundle
from ..store.directory import Progress, load_directory
from ..store.interchange import ImportReport, import_bundle, import_file
from .validate import check_registry


def import_into(
    root: Path,
    path: Path,
    *,
    replace: bool = False,
    progress: Progress | None = None,
    origin_name: str | None = None,
) -> ImportReport:
    """Import ``path``; ``origin_name`` is what an attempts.json's records name as their file
    (a bundle's records keep the origins they have)."""
    if is_bundle(path):
        if origin_name is not None:
            raise UnusableInput("--origin names an attempts.json; a bundle's records keep the origins they have")
        report = import_bundle(root, path, replace=replace, progress=progress)
    else:
        report = import_file(root, path, replace=replace, progress=progress, origin_name=origin_name)
    imported = set(report.imported)
    after = check_registry(load_directory(root, progress))
    report.problems_after = [p for p in after if p.attempt_id in imported]
    return report
