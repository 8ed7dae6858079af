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
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import PtregError, UnusableInput
from ..records.evaluator import AnySpec, ArmsSpec, revision_problem
from ..store.code_digests import changed_code, code_digests
from ..store.input_digests import changed_inputs
from ..text import shorten
from .interruption import deferred
from .processes import start
from .workloads.command import named_code

GIT_SECONDS = 300.0  # one git command: a checkout of a large repository takes a while
POLL_SECONDS = 0.01
KEPT_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")
# No hook of the repository's runs when ptreg checks a revision out: that would be code no consent covers.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
COMMIT = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
OUTPUT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Checkout:
    """One arm's revision as the run checked it out."""

    arm: str
    revision: str
    commit: str
    root: Path  # the project root inside the checkout: where the arm's command runs
    code: dict[str, str]  # the files of the checkout the arm's command runs, with their sha256


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


def resolve(repository: Path, evaluator: str, arm: str, revision: str) -> str:
    """The commit ``revision`` names in ``repository``; UnusableInput when it names none."""
    problem = revision_problem(revision)
    if problem is not None:  # the spec's own check; kept here for a spec that reached the engine otherwise
        raise UnusableInput(f"evaluator {evaluator}: arm {arm}: revision {shorten(revision)} {problem}; nothing run")
    status, printed, said = git(
        repository, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    commit = printed.strip()
    if status != 0 or not COMMIT.fullmatch(commit):
        why = f" ({said})" if said else ""
        raise UnusableInput(
            f"evaluator {evaluator}: arm {arm}: revision {shorten(revision)} names no commit of the repository at "
            f"{repository}{why}; nothing run"
        )
    return commit


def _project_in(folder: Path, prefix: str, arm: str, revision: str) -> Path:
    """The project root inside a checkout, every folder on the way a real one (never a symlink)."""
    here = folder
    for part in [p for p in prefix.split("/") if p]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            raise UnusableInput(
                f"arm {arm}: revision {shorten(revision)} has no folder {prefix.rstrip('/')}, the project root; "
                "nothing run"
            ) from None
        if not stat.S_ISDIR(mode):
            raise UnusableInput(
                f"arm {arm}: in revision {shorten(revision)}, {prefix.rstrip('/')} is not a folder (a symlink is not "
                "followed); nothing run"
            )
    return here


def arm_code(spec: ArmsSpec, arm: str, root: Path, registry: str) -> dict[str, str]:
    """The files under ``root`` that ``arm``'s command runs, by content: what freezing the
    evaluator takes of the working tree, taken of the arm's checkout."""
    one = spec.model_copy(update={"arms": {arm: spec.arms[arm]}})
    try:
        named = named_code(one)
    except ValueError as exc:
        raise UnusableInput(f"evaluator {spec.name}: {exc}") from None
    return code_digests(
        root,
        named.arguments,
        named.scripts,
        named.import_folders,
        spec.not_frozen,
        registry=registry,
        maybe_scripts=named.maybe_scripts,
    )


@contextlib.contextmanager
def checked_out(
    project: Path, spec: AnySpec, registry: str, inputs: Mapping[str, str] | None
) -> Iterator[dict[str, Checkout]]:
    """Each arm of ``spec`` that names a revision, checked out for the length of the block, by
    arm; none when no arm names one. Refused (UnusableInput, nothing run) when the project is in
    no git repository, a revision names no commit, or a checkout lacks an input the evaluator
    froze or holds another version of it: the arms are compared on the same frozen inputs."""
    if not isinstance(spec, ArmsSpec) or not spec.revisions:
        yield {}
        return
    named = spec.revisions
    top, prefix = repository_of(project, spec.name)
    commits = {arm: resolve(top, spec.name, arm, revision) for arm, revision in named.items()}
    git(top, "worktree", "prune")  # what a run killed outright left registered
    area = Path(tempfile.mkdtemp(prefix="ptreg-revisions-"))  # this run's own, made afresh: mode 0700
    added: list[Path] = []
    try:
        found: dict[str, Checkout] = {}
        for arm, commit in commits.items():
            folder = area / arm  # an arm's name is a slug: one plain name
            added.append(folder)
            # the commit is 40 hex digits and the folder an absolute path: neither can be an option
            status, _, said = git(top, "worktree", "add", "--detach", "--quiet", str(folder), commit)
            if status != 0:
                raise UnusableInput(
                    f"arm {arm}: revision {shorten(named[arm])} ({commit[:12]}) could not be checked out: "
                    f"{said or f'git exited with {status}'}; nothing run"
                )
            root = _project_in(folder, prefix, arm, named[arm])
            if inputs:
                changed = changed_inputs(root, dict(inputs))
                if changed is not None:
                    raise UnusableInput(
                        f"arm {arm}: revision {shorten(named[arm])} ({commit[:12]}) does not hold the evaluator's "
                        f"frozen inputs: {changed}; nothing run"
                    )
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
    if not isinstance(spec, ArmsSpec):
        return None
    for arm, checkout in checkouts.items():
        changed = changed_inputs(checkout.root, dict(inputs)) if inputs else None
        if changed is None:
            try:
                changed = changed_code(checkout.code, arm_code(spec, arm, checkout.root, registry))
            except PtregError as exc:
                changed = exc.message
        if changed is not None:
            return f"arm {arm} (revision {shorten(checkout.revision)} at {checkout.commit[:12]}): {changed}"
    return None
