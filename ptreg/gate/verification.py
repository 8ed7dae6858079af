"""Whether a frozen evaluator verifies: the one answer `evaluator list|show|verify`, `validate`,
`gate`, `run` and `new` all give.

An evaluator verifies when its file still is what was frozen (its spec hashes to its identity,
under its name) and the project still holds what it froze with it: every input it reads, and,
for one that runs a command, every project file the command runs, by content. A change to any
of these is said in the same words wherever it is asked (``EvaluatorFile.problem``).
"""

from __future__ import annotations

from pathlib import Path

from ..store.evaluator_files import check_file
from ..store.input_digests import changed_inputs, project_root
from .checks import EvaluatorFile
from .consent import code_change, consent_note


def verify_evaluator(root: Path, path: Path) -> EvaluatorFile:
    """The frozen evaluator at ``path`` of the registry ``root``, read once and checked against
    its identity, then against the project's files it froze."""
    if not path.exists():
        return EvaluatorFile(path, None)
    frozen, mismatch = check_file(path)
    if frozen is None:
        return EvaluatorFile(path, None, mismatch)
    changed = changed_inputs(project_root(root), frozen.inputs) if frozen.inputs else None
    note = consent_note(frozen)  # None: it runs no command (or its workload is not here: the gate says so)
    if note is None:
        return EvaluatorFile(path, frozen, None, changed)
    return EvaluatorFile(path, frozen, None, changed, code_change(frozen, root), note)
