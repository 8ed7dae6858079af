"""Arms that name a git revision of the project: each checked out in a worktree of its own,
where its command runs.

An arm of a command evaluator may name ``"revision": "HEAD~1"``. When a run starts, each such
revision is resolved to a commit (``git rev-parse --verify``, the revision after
``--end-of-options`` so that it is never read as an option), and checked out, detached, into a
folder of a fresh temporary directory that ptreg makes for the run (``git worktree add``: a real
checkout, so a command that asks git where it is gets the commit). The arm's command then runs
there, with the checkout's project root as its working directory: the script, its modules and
the evaluator's inputs are the revision's. The checkouts are removed when the run ends, however
it ends; a run killed outright leaves its temporary folder, and git forgets a worktree whose
folder is gone at the next ``git worktree prune``, which every run of revisions starts with.

A backends evaluator may take a backend at a revision (``numba@before``, the spec's
``revisions`` naming ``before``): its module must be imported from a folder inside the
repository (the in-repository ``backends/`` package installed editable, a plugin developed in
the repository). The worker of that backend's cells then puts the same folder of the revision's
checkout first on its import path, so that the module, and whatever else is imported from that
folder, is the revision's. A backend imported from elsewhere (site-packages, another repository)
is refused: two of its versions cannot be told apart that way.

Git runs as every process ptreg runs (``processes.start``), with a minimal environment (no
``GIT_DIR`` or the like of the caller's) and hooks off, so that checking out runs no code of the
repository's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib.machinery import PathFinder
from pathlib import Path

from ..errors import PtregError, UnusableInput
from ..records.evaluator import AnySpec, ArmsSpec, EvaluatorSpec, backend_at, revision_problem
from ..store.code_digests import changed_code, code_digests
from ..store.input_digests import changed_inputs
from ..text import shorten
from .backends import entries as backend_entries
from .interruption import deferred
from .processes import start
from .workloads.named_code import named_code
from .workloads.stages import not_frozen

GIT_SECONDS = 300.0  # one git command: a checkout of a large repository takes a while
POLL_SECONDS = 0.01
KEPT_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")
# No hook of the repository's runs when ptreg checks a revision out: that would be code no consent covers.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
COMMIT = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
OUTPUT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Checkout:
    """One arm's revision as the run checked it out (for a backends evaluator, one of its
    ``revisions``, by label)."""

    arm: str
    revision: str
    commit: str
    root: Path  # the project root inside the checkout: where the arm's command runs
    code: dict[str, str]  # the files of the checkout the arm's command runs, with their sha256
    top: Path | None = None  # backends: the checkout's repository top, which the paths of ``code`` are relative to
    # backends: each backend taken at this revision, with the folder of the checkout its worker imports it from
    imports: dict[str, Path] = field(default_factory=dict)


def git(repository: Path, *args: str) -> tuple[int, str, str]:
    """Run git in ``repository``: its exit status, what it printed, and the last line of its
    errors. UnusableInput when git cannot be started or outlasts ``GIT_SECONDS``."""
    env = {k: os.environ[k] for k in KEPT_VARIABLES if k in os.environ}
    env["GIT_TERMINAL_PROMPT"] = "0"
    argv = ["git", "-C", str(repository), *NO_HOOKS, *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            tree = start(
                argv, cwd=repository, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, die_with_parent=True
            )
        except OSError as exc:
            raise UnusableInput(f"cannot run git: {exc.strerror or exc}") from None
        deadline = time.monotonic() + GIT_SECONDS
        try:
            while not tree.reap():
                if time.monotonic() >= deadline:
                    raise UnusableInput(f"git {args[0]} in {repository} took over {GIT_SECONDS:g} s; stopped")
                time.sleep(POLL_SECONDS)
        finally:
            tree.end()
        status = os.waitstatus_to_exitcode(tree.status) if tree.status is not None else -1
        out.seek(0)
        err.seek(0)
        printed = out.read(OUTPUT_BYTES).decode("utf-8", errors="replace")
        said = [line for line in err.read(OUTPUT_BYTES).decode("utf-8", errors="replace").splitlines() if line.strip()]
    return status, printed, shorten(said[-1].strip(), 200) if said else ""


def repository_of(project: Path, evaluator: str) -> tuple[Path, str]:
    """The top of the git repository that holds the project root, and the project root's path
    inside it ('' at the top, else ending in '/'); UnusableInput when it is in none."""
    status, printed, _ = git(project, "rev-parse", "--show-toplevel", "--show-prefix")
    lines = printed.splitlines()
    if status != 0 or not lines or not lines[0]:
        raise UnusableInput(
            f"evaluator {evaluator}: its arms name git revisions, but the project root {project} is in no git "
            "repository; nothing run"
        )
    return Path(lines[0]), lines[1] if len(lines) > 1 else ""


def resolve(repository: Path, evaluator: str, arm: str, revision: str, what: str = "arm") -> str:
    """The commit ``revision`` names in ``repository``; UnusableInput when it names none.
    ``what`` says what ``arm`` is: an arm, or for a backends evaluator one of its ``revisions``."""
    problem = revision_problem(revision)
    if problem is not None:  # the spec's own check; kept here for a spec that reached the engine otherwise
        raise UnusableInput(f"evaluator {evaluator}: {what} {arm}: revision {shorten(revision)} {problem}; nothing run")
    status, printed, said = git(
        repository, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    commit = printed.strip()
    if status != 0 or not COMMIT.fullmatch(commit):
        why = f" ({said})" if said else ""
        raise UnusableInput(
            f"evaluator {evaluator}: {what} {arm}: revision {shorten(revision)} names no commit of the repository at "
            f"{repository}{why}; nothing run"
        )
    return commit


def _project_in(folder: Path, prefix: str, arm: str, revision: str, what: str = "the project root") -> Path:
    """The project root (or ``what`` else) inside a checkout, every folder on the way a real one
    (never a symlink)."""
    here = folder
    for part in [p for p in prefix.split("/") if p]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            raise UnusableInput(
                f"{arm}: revision {shorten(revision)} has no folder {prefix.rstrip('/')}, {what}; nothing run"
            ) from None
        if not stat.S_ISDIR(mode):
            raise UnusableInput(
                f"{arm}: in revision {shorten(revision)}, {prefix.rstrip('/')} is not a folder (a symlink is not "
                "followed); nothing run"
            )
    return here


def arm_code(spec: ArmsSpec, arm: str, root: Path, registry: str) -> dict[str, str]:
    """The files under ``root`` that ``arm``'s command runs, by content: what freezing the
    evaluator takes of the working tree, taken of the arm's checkout."""
    one = spec.model_copy(update={"arms": {arm: spec.arms[arm]}})
    try:
        named = named_code(one)
        unfrozen = not_frozen(one)
    except ValueError as exc:
        raise UnusableInput(f"evaluator {spec.name}: {exc}") from None
    return code_digests(
        root,
        named.arguments,
        named.scripts,
        named.import_folders,
        unfrozen,
        registry=registry,
        maybe_scripts=named.maybe_scripts,
    )


def import_home(evaluator: str, name: str, target: str, top: Path) -> str:
    """The folder, relative to the repository top ``top`` ('' for the top itself), that the
    module of the entry point ``target`` is imported from, found as a worker finds it (the
    working directory is on no worker's path) without importing it. UnusableInput when it is
    imported from outside the repository, or from no folder at all."""
    module = target.split(":", 1)[0]
    first = module.split(".", 1)[0]
    here = os.path.realpath(os.getcwd())
    path = [p for p in sys.path if p and os.path.isabs(p) and os.path.realpath(p) != here]
    try:
        found = PathFinder.find_spec(first, path)
    except (ImportError, ValueError):
        found = None
    if found is None or found.origin is None or not found.has_location:
        raise UnusableInput(
            f"evaluator {evaluator}: backend {name}: its module {first} is not a file or package of any folder on the "
            "import path; nothing run"
        )
    origin = Path(found.origin)
    folder = os.path.realpath(origin.parent.parent if found.submodule_search_locations is not None else origin.parent)
    real_top = os.path.realpath(top)
    if folder != real_top and not folder.startswith(real_top.rstrip("/") + "/"):
        raise UnusableInput(
            f"evaluator {evaluator}: backend {name}: its module {first} is imported from {folder}, outside the "
            f"repository at {top}, so its versions cannot be told apart by checking revisions out; nothing run"
        )
    return os.path.relpath(folder, real_top).replace(os.sep, "/") if folder != real_top else ""


def backend_homes(spec: EvaluatorSpec, top: Path) -> dict[str, str]:
    """Each backend ``spec`` takes at a revision, with the folder (relative to ``top``) its
    module is imported from; UnusableInput when a backend is not registered here or
    its module is not in the repository."""
    known = backend_entries()
    homes: dict[str, str] = {}
    for name in spec.backends:
        backend, label = backend_at(name)
        if label is None:
            continue
        entry = known.get(backend)
        if entry is None:
            raise UnusableInput(
                f"evaluator {spec.name}: backend {name}: no backend {backend!r} is registered (registered: "
                f"{', '.join(known) or 'none'}); nothing run"
            )
        homes[name] = import_home(spec.name, name, entry.target, top)
    return homes


def _imports_in(folder: Path, homes: Mapping[str, str], label: str, revision: str) -> dict[str, Path]:
    """The folders of the checkout ``folder`` the backends taken at ``label`` are imported from;
    refused when one is missing, or would put the revision's ptreg before the worker's own."""
    found: dict[str, Path] = {}
    for name, home in homes.items():
        if backend_at(name)[1] != label:
            continue
        place = _project_in(folder, home + "/" if home else "", f"backend {name}", revision, "its module's folder")
        if (place / "ptreg").exists() or (place / "ptreg.py").exists():
            raise UnusableInput(
                f"backend {name}: the folder its module is imported from ({home or 'the repository top'}) holds ptreg "
                "too, and the worker must run this ptreg, not the revision's; nothing run"
            )
        found[name] = place
    return found


def backend_code(top: Path, imports: Mapping[str, Path], registry: str) -> dict[str, str]:
    """The files a revision's backends can import from their folders of the checkout ``top``,
    by their path in the repository, with their sha256 (found as freezing finds what Python
    imports beside a command's script)."""
    folders = sorted({place.relative_to(top).as_posix() if place != top else "" for place in imports.values()})
    return code_digests(top, [], [], folders, registry=registry)


@contextlib.contextmanager
def checked_out(
    project: Path, spec: AnySpec, registry: str, inputs: Mapping[str, str] | None
) -> Iterator[dict[str, Checkout]]:
    """Each revision ``spec`` names (an arm's, or a backends evaluator's by label), checked out
    for the length of the block, by arm or label; none when it names none. Refused
    (UnusableInput, nothing run) when the project is in no git repository, a revision names no
    commit, a backend taken at a revision is not imported from the repository, or a checkout
    lacks an input the evaluator froze or holds another version of it: the arms are compared on
    the same frozen inputs."""
    named = dict(spec.revisions or {})
    if not named:
        yield {}
        return
    what = "arm" if isinstance(spec, ArmsSpec) else "revisions"
    top, prefix = repository_of(project, spec.name)
    homes = backend_homes(spec, top) if isinstance(spec, EvaluatorSpec) else {}
    commits = {arm: resolve(top, spec.name, arm, revision, what) for arm, revision in named.items()}
    git(top, "worktree", "prune")  # what a run killed outright left registered
    area = Path(tempfile.mkdtemp(prefix="ptreg-revisions-"))  # this run's own, made afresh: mode 0700
    added: list[Path] = []
    try:
        found: dict[str, Checkout] = {}
        for arm, commit in commits.items():
            folder = area / arm  # an arm's name (a revision's label) is a slug: one plain name
            added.append(folder)
            # the commit is 40 hex digits and the folder an absolute path: neither can be an option
            status, _, said = git(top, "worktree", "add", "--detach", "--quiet", str(folder), commit)
            if status != 0:
                raise UnusableInput(
                    f"{what} {arm}: revision {shorten(named[arm])} ({commit[:12]}) could not be checked out: "
                    f"{said or f'git exited with {status}'}; nothing run"
                )
            root = _project_in(folder, prefix, f"{what} {arm}", named[arm])
            if inputs:
                changed = changed_inputs(root, dict(inputs))
                if changed is not None:
                    raise UnusableInput(
                        f"{what} {arm}: revision {shorten(named[arm])} ({commit[:12]}) does not hold the evaluator's "
                        f"frozen inputs: {changed}; nothing run"
                    )
            if isinstance(spec, EvaluatorSpec):
                imports = _imports_in(folder, homes, arm, named[arm])
                code = backend_code(folder, imports, registry)
                found[arm] = Checkout(arm, named[arm], commit, root, code, folder, imports)
            else:
                found[arm] = Checkout(arm, named[arm], commit, root, arm_code(spec, arm, root, registry))
        yield found
    finally:
        with deferred():  # a second Ctrl-C must not leave a checkout behind
            for folder in added:
                with contextlib.suppress(PtregError):
                    git(top, "worktree", "remove", "--force", "--force", str(folder))
            shutil.rmtree(area, ignore_errors=True)
            with contextlib.suppress(PtregError):
                git(top, "worktree", "prune")


def changed_under(
    spec: AnySpec, checkouts: Mapping[str, Checkout], registry: str, inputs: Mapping[str, str] | None
) -> str | None:
    """The first input or code file of a checkout that no longer has the digest it had when the
    run started, naming the arm; None when none changed. Taken before the checkouts go."""
    what = "arm" if isinstance(spec, ArmsSpec) else "revisions"
    for arm, checkout in checkouts.items():
        changed = changed_inputs(checkout.root, dict(inputs)) if inputs else None
        if changed is None:
            try:
                if isinstance(spec, ArmsSpec):
                    now = arm_code(spec, arm, checkout.root, registry)
                else:
                    now = backend_code(checkout.top or checkout.root, checkout.imports, registry)
                changed = changed_code(checkout.code, now)
            except PtregError as exc:
                changed = exc.message
        if changed is not None:
            return f"{what} {arm} (revision {shorten(checkout.revision)} at {checkout.commit[:12]}): {changed}"
    return None
