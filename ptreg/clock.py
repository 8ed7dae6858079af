"""The one way ptreg writes a time: UTC, to the second, ISO 8601 with a ``Z``."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional


def utc_now(now: Optional[datetime] = None) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` of ``now`` (default: this moment)."""
    moment = now if now is not None else datetime.now(timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
