"""The browser the site's tests share: the Debian chromium, headless, driven by Playwright (no
browser is downloaded). Skipped with a reason when /usr/bin/chromium is missing; a failure
instead when CI or PTREG_REQUIRE_SHARED=1 is set (`.ci/run` installs it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import CHROMIUM, CHROMIUM_ARGS


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") or os.environ.get("PTREG_REQUIRE_SHARED") == "1":
        pytest.fail(f"the browser tests are required here (CI or PTREG_REQUIRE_SHARED=1), but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for a whole test module."""
    if not CHROMIUM.is_file():
        _unavailable(f"{CHROMIUM} not found (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install '.[test]')")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()
