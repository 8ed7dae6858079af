"""The one way ptreg writes a time: UTC, to the second, ISO 8601 with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now(now: datetime | None = None) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` of ``now`` (default: this moment)."""
    moment = now if now is not None else datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
