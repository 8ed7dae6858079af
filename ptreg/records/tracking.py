"""Tracking issue references: the forms a reference may take, and the link to show for one."""

from __future__ import annotations

import re

from .refs import TRACKING_ISSUE_PATTERN

_REFERENCE = re.compile(TRACKING_ISSUE_PATTERN)
FORMS = "a URL (https://...), #123, owner/repo#123 or PROJ-123"


def problem(reference: str | None) -> str | None:
    """Why ``reference`` is not a tracking issue, or None when it is one."""
    if reference is None or not reference.strip():
        return "no tracking issue is named"
    if len(reference) > 500:
        return "the tracking issue reference is longer than 500 characters"
    if not _REFERENCE.fullmatch(reference):
        return f"{reference!r} is not a tracking issue reference: use {FORMS}"
    return None


def link(reference: str) -> str | None:
    """A URL for the reference when one follows from it alone; '#123' and 'PROJ-123' need a
    tracker this registry does not name, so they get none rather than a guessed one."""
    if reference.startswith(("http://", "https://")):
        return reference
    found = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+)#([0-9]+)", reference)
    if found:
        return f"https://github.com/{found.group(1)}/issues/{found.group(2)}"
    return None
