"""Consent to run an evaluator's command, and what it covers.

An evaluator whose workload runs code runs only with this user's consent, given by freezing it
here or by ``ptreg evaluator trust NAME@HASH`` (``store/trust.py``), which names its sha256. That
sha256 covers its spec, the digests of its inputs and, from this version on, the digests of the
project's files its command runs (``store/code_digests.py``): so a command whose project files
differ from those frozen (another clone's ``bench.py``, a ``json.py`` placed beside the script)
is not what was consented to, and is refused like an evaluator nobody consented to, with nothing
executed. An evaluator frozen before ptreg froze a command's code has no such digests: its
consent covers its spec and inputs only, and ``evaluator show``, ``evaluator trust`` and the gate
say so.

An arm that names a git revision (``"revision": "HEAD~1"``) runs that revision's code, checked out
for the run, not the working tree's: its files cannot be frozen by content, since the point of
``HEAD`` is that it moves. Consent to such an evaluator covers the revisions by name, in this
repository, whatever code they hold when it runs; what ran is not lost, for each run records the
commit each revision resolved to and the digests of the files its command ran there. The working
tree's files are frozen for the arms that name no revision only. A backends evaluator that takes a
backend at a revision (``numba@before``) runs that revision's code the same way, and needs the
same consent, by name.
"""

from __future__ import annotations

from pathlib import Path

from ..engine.workloads.discovery import workload_named
from ..errors import PtregError, UnusableInput
from ..records.evaluator import ArmsSpec, EvaluatorSpec, FrozenEvaluator
from ..store.code_digests import changed_code
from ..store.input_digests import changed_inputs, project_root
from ..store.trust import is_trusted
from ..text import shorten

BEFORE_THE_RULE = (
    "frozen before ptreg froze the code a command runs: consent to it covers its spec and inputs, not the "
    "project's files its command runs (freeze its spec again to cover them)"
)


def runs_code(frozen: FrozenEvaluator) -> bool:
    """Whether running the evaluator executes code it names (and so needs consent): a command,
    or the code git revisions of the project hold."""
    return workload_named(frozen.spec.workload).runs_code or bool(frozen.spec.revisions)


def code_change(frozen: FrozenEvaluator, registry: Path) -> str | None:
    """The first project file the evaluator's command runs that differs from its frozen digest,
    with both digests; None when they agree, or none were frozen."""
    if frozen.code is None:
        return None
    try:
        now = workload_named(frozen.spec.workload).code(frozen.spec, registry)
    except PtregError as exc:
        return exc.message
    return changed_code(frozen.code, now or {})


def frozen_files_change(frozen: FrozenEvaluator, registry: Path) -> str | None:
    """The first input or project file of the command whose content is no longer the one
    frozen with the evaluator; None when every one still is."""
    if frozen.inputs:
        changed = changed_inputs(project_root(registry), frozen.inputs)
        if changed is not None:
            return changed
    return code_change(frozen, registry)


def consent_note(frozen: FrozenEvaluator) -> str | None:
    """What consent to the evaluator covers, in words; None for one that runs no command (or
    whose workload is not installed here, which the gate says)."""
    try:
        return covers(frozen) if runs_code(frozen) else None
    except PtregError:
        return None


def covers(frozen: FrozenEvaluator) -> str:
    """What consent to the evaluator covers, in words."""
    if frozen.code is None:
        return BEFORE_THE_RULE
    inputs = len(frozen.inputs or {})
    spec = frozen.spec
    revisions = spec.revisions or {}
    if isinstance(spec, EvaluatorSpec) and revisions:
        named = ", ".join(f"{revision} ({label})" for label, revision in revisions.items())
        return (
            f"consent to it covers its spec and whatever code the revisions {named} of this repository hold when it "
            "runs, by name: each run records the commit each resolved to and the digests of the code its backends "
            "were imported from there"
        )
    if isinstance(spec, ArmsSpec) and revisions:
        named = ", ".join(f"{revision} (arm {arm})" for arm, revision in revisions.items())
        working = (
            f", {len(frozen.code)} file(s) of the working tree its other arms run, by content,"
            if len(revisions) < len(spec.arms)
            else ""
        )
        return (
            f"consent to it covers its spec, {inputs} input(s){working} and whatever code the revisions {named} of "
            "this repository hold when it runs, by name: each run records the commit each resolved to and the "
            "digests of the code it ran there"
        )
    return (
        f"consent to it covers its spec, {inputs} input(s) and {len(frozen.code)} file(s) of the project its "
        "command runs, by content"
    )


def command_text(frozen: FrozenEvaluator) -> str:
    return shorten(" ".join(str(a) for a in frozen.spec.model_dump(mode="json").get("command", [])), 200)


def refuse_unconsented(frozen: FrozenEvaluator, code_changed: str | None) -> None:
    """Refused (unusable input, nothing executed) unless this user consented to the evaluator
    and the project's files its command runs are the ones consented to."""
    if not runs_code(frozen):
        return
    if not is_trusted(frozen.sha256):
        raise UnusableInput(
            f"evaluator {frozen.ref} runs {command_text(frozen)} and was not frozen by you: read it "
            f"(`ptreg evaluator show {frozen.ref}`), then consent with `ptreg evaluator trust {frozen.ref}`",
        )
    if code_changed is not None:
        raise UnusableInput(
            f"evaluator {frozen.ref} runs {command_text(frozen)}, but not the code consented to: {code_changed}; "
            "nothing run: restore the file, or freeze the evaluator again over it (consent anew)"
        )
