"""Errors that reach the user as one line and an exit code, never as a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_CHECK_FAILED = 1  # the input was usable and a check on it failed
EXIT_UNUSABLE = 2  # the input could not be used at all (missing, unreadable, malformed)


class PtregError(Exception):
    """A failure to report as ``ptreg: error: <message>`` with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_UNUSABLE):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UnusableInput(PtregError):
    """The input could not be used at all: missing, unreadable, malformed. New code raises this
    (or ``CheckFailed``) rather than passing an exit code, so that only the CLI decides codes."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_UNUSABLE)


class CheckFailed(PtregError):
    """The input was usable and a check on it failed."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_CHECK_FAILED)


class LockBusy(CheckFailed):
    """A lock another process or thread holds was not freed within the wait; the message names
    the holder. Its own type so that a caller with work in hand can keep it (a measured run)."""

    def __init__(self, message: str, lock: str, holder: str, waited: float):
        super().__init__(message)
        self.lock = lock  # the lock file
        self.holder = holder  # who holds it, in words
        self.waited = waited  # seconds


class UnknownAttempt(UnusableInput):
    """An id that names no attempt: unusable input (exit 2) for every command that takes one,
    with the closest ids."""

    def __init__(self, attempt_id: str, where: str, known: Iterable[str]):
        close = difflib.get_close_matches(attempt_id, list(known), n=3, cutoff=0.5)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        super().__init__(f"no attempt {attempt_id!r} in {where}{hint}")
        self.attempt_id = attempt_id
        self.suggestions = close
