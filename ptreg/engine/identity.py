"""The identity of the code a run measures, recorded in its results (``code``).

A comparison across runs judges run B against the spread of earlier runs of the code A
measured (``views/comparison.py``), so it must know which earlier runs measured that code: a
run of changed code in the history widens the spread and hides the next regression.

The code behind an entry point is its module's source files: the ``.py`` files of the package
directory that holds the module (not its subpackages), or the module's one file when it stands
alone at the top of ``sys.path`` (a whole ``site-packages`` is no one's code); for a backend
taken at a git revision, the files of the revision's checkout it could import. A backend's
helpers usually live beside it, and ptreg's own workloads share ``engine/workloads/``. A
command's code is the project's repository, known only at a clean commit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path

from .. import __version__
from ..records.evaluator import AnySpec, EvaluatorSpec, backend_at
from ..records.run_results import CodeIdentity, PluginCode
from .backends import entries as backend_entries
from .environment import git_state
from .plugins import PluginEntry
from .workloads.discovery import entries as workload_entries
from .workloads.discovery import workload_named

MAX_SOURCE_BYTES = 64 * 1024 * 1024  # past this a directory is not a plugin's source: unknown


def source_files(module: str) -> list[Path] | None:
    """The files whose bytes stand for ``module``'s code; unknown (None) when it has no source
    file on disk. Finding a submodule imports its parent packages, as running it does anyway."""
    try:
        spec = find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.has_location:
        return None
    origin = Path(spec.origin)
    if "." not in module and origin.name != "__init__.py":
        return [origin]
    folder = origin.parent
    return sorted(p for p in folder.glob("*.py") if p.is_file() and not p.is_symlink())


def digest(files: list[Path]) -> str | None:
    """sha256 over each file's name and bytes, in name order; unknown when one cannot be read."""
    found = hashlib.sha256()
    total = 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        total += len(data)
        if total > MAX_SOURCE_BYTES:
            return None
        found.update(f"{path.name}\0{len(data)}\0".encode())
        found.update(data)
    return found.hexdigest()


def plugin_code(entry: PluginEntry) -> PluginCode:
    module = entry.target.split(":", 1)[0]
    files = source_files(module)
    return PluginCode(
        target=entry.target,
        distribution=entry.distribution,
        version=entry.distribution_version,
        digest=None if files is None else digest(files),
    )


def code_identity(spec: AnySpec, project: Path) -> CodeIdentity:
    """What ``spec`` measures, as code: the workload's, each backend's, and the project's commit."""
    workloads = workload_entries()
    workload = workloads.get(spec.workload)
    arms: dict[str, PluginCode] = {}
    if isinstance(spec, EvaluatorSpec):
        known = backend_entries()
        arms = {name: plugin_code(known[name]) for name in spec.backends if name in known}
    git = git_state(project)
    return CodeIdentity(
        ptreg_version=__version__,
        commit=git["commit"],
        dirty=git["dirty"],
        workload=None if workload is None else plugin_code(workload),
        arms=arms,
        # a workload that runs code its spec names measures the project's code, not its own
        repository_code=workload_named(spec.workload).runs_code if workload is not None else False,
    )


def revision_code(spec: AnySpec, code: Mapping[str, Mapping[str, str]]) -> dict[str, PluginCode]:
    """Each backend ``spec`` takes at a revision, as code: its registered entry point, and a
    digest of the files of the revision's checkout it could import (``code``: their sha256, by
    revision label), so that a comparison across runs knows runs of the same code."""
    if not isinstance(spec, EvaluatorSpec):
        return {}
    known = backend_entries()
    found: dict[str, PluginCode] = {}
    for name in spec.backends:
        backend, label = backend_at(name)
        if label is None or backend not in known or label not in code:
            continue
        entry = known[backend]
        files = json.dumps(sorted(code[label].items())).encode()
        found[name] = PluginCode(
            target=entry.target,
            distribution=entry.distribution,
            version=entry.distribution_version,
            digest=hashlib.sha256(files).hexdigest(),
        )
    return found
