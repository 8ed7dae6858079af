"""Screenshots of the site of this project's registry (attempts/), for docs/site.md and the
README: the index, a dossier, a run page and a lineage page, taken with the headless Debian
chromium that the browser tests use (Playwright drives it; no browser is downloaded).

    python benchmarks/site_screenshots.py             # writes docs/site/*.png
    python benchmarks/site_screenshots.py --out DIR
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from helpers import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 (the browser and flags of the browser tests)

PAGES = {
    "index": "index.html",
    "dossier": "attempts/tinygpt-step-attribution.html",
    "run": "runs/tinygpt-step-attribution/20261201T063034Z.html",
    "lineage": "lineage/tinygpt-step-attribution.html",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "site")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        site = Path(work) / "site"
        ptreg = str(Path(sys.executable).parent / "ptreg")
        subprocess.run([ptreg, "--registry", str(REPO / "attempts"), "site", "-o", str(site)], check=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
            for name, relative in PAGES.items():
                page.goto((site / relative).as_uri())
                target = args.out / f"{name}.png"
                page.screenshot(path=str(target), full_page=False)
                print(f"{target}: {target.stat().st_size // 1024} KiB")
            browser.close()


if __name__ == "__main__":
    main()
