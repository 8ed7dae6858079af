"""The forms of what a record names: attempt ids, tracking issues, frozen evaluators and runs.

Kept apart from the models (``attempt.py`` builds its fields from these patterns) so that a
command which only checks an id, or renders a record the query index vouches for, loads no
pydantic.
"""

from __future__ import annotations

import re

from ..errors import UnusableInput
from ..text import shorten

# A slug: lowercase letters, digits and '-', in segments joined by single dots. Ids become
# file names, so no '/', no '..', no leading '.' or '-', no spaces.
ID_PATTERN = r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)*$"
ID_MAX_LENGTH = 128
# registry.json sits beside the attempt files, so an attempt may not be called "registry".
RESERVED_IDS = frozenset({"registry"})
ID_RE = re.compile(ID_PATTERN)

# A tracking issue: an http(s) URL, `#123`, `owner/repo#123` or a tracker key such as `PROJ-123`.
TRACKING_ISSUE_PATTERN = (
    r"^(https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[^\s]*)?"
    r"|#[1-9][0-9]*"
    r"|[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}#[1-9][0-9]*"
    r"|[A-Z][A-Z0-9_]{0,31}-[1-9][0-9]*)$"
)
# A frozen evaluator's reference: its name, '@', the first 12 hex digits of its sha256.
EVALUATOR_REF_PATTERN = r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)*@[0-9a-f]{12}$"
# A run's folder name: the UTC second it started, and a number when two started in one second.
RUN_ID_PATTERN = r"^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$"
# The largest integer any field of a record or a run may hold: SQLite's INTEGER is signed 64
# bits, and the query index stores the records' integers, so a larger one would be a file that
# validates and then cannot be indexed. The schemas state it as each integer's maximum.
INT_MAX = 2**63 - 1


def check_id(attempt_id: str) -> str:
    """Refuse an id that is not a slug, so it can never name a file outside the registry."""
    if not isinstance(attempt_id, str) or len(attempt_id) > ID_MAX_LENGTH or not ID_RE.fullmatch(attempt_id):
        raise UnusableInput(
            f"invalid attempt id {shorten(attempt_id)}: use lowercase letters, digits, '-' and single '.' "
            f"(at most {ID_MAX_LENGTH} characters; no '/', '..' or spaces)"
        )
    if attempt_id in RESERVED_IDS:
        raise UnusableInput(f"invalid attempt id {attempt_id!r}: reserved for the registry's own file")
    return attempt_id


def slug_of(text: str) -> str:
    """The slug a text was probably meant as: 'Runtime perf' -> 'runtime-perf'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:ID_MAX_LENGTH].strip("-") or "a-slug"


def slug_problem(text: str) -> str | None:
    """Why ``text`` is not a slug, the form of ids, vocabulary terms and families (lowercase
    letters, digits, '-' and single '.'), with the slug it was probably meant as; None when it is."""
    if len(text) <= ID_MAX_LENGTH and ID_RE.fullmatch(text):
        return None
    return f"{shorten(text)} is not a slug (lowercase letters, digits and '-'), e.g. {slug_of(text)!r}"


def check_run_id(run_id: str) -> str:
    """Refuse a run id that is not one ptreg makes, so it can never name a folder outside the attempt's runs."""
    if not isinstance(run_id, str) or len(run_id) > 40 or not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise UnusableInput(f"invalid run id {shorten(run_id)}: YYYYMMDDTHHMMSSZ, with -N when that second is taken")
    return run_id
