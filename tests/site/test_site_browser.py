"""The site in a real browser: the Debian chromium, headless, driven by Playwright (no browser is
downloaded; the `browser` fixture of tests/site/conftest.py). Pages are opened from disk and
through `ptreg site --serve`; each is checked for console errors, its links, its charts' marks
against their tables, the index's filter, and a hostile lesson shown as text. One browser
serves the whole module."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlparse
from urllib.request import url2pathname

import pytest

from helpers import REPO, complete_record, failed_record

HOSTILE = '<script>alert(1)</script> then "><img src=x onerror=alert(2)>'
PAGES = {
    "index": "index.html",
    "dossier": "attempts/tinygpt-step-attribution.html",
    "run": "runs/tinygpt-step-attribution/20261201T063034Z.html",
    "lineage": "lineage/tinygpt-step-attribution.html",
    "hostile": "attempts/hostile-lesson.html",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of this project's registry, with a hostile lesson added to it."""
    work = tmp_path_factory.mktemp("site")
    root = work / "attempts"
    shutil.copytree(REPO / "attempts", root, ignore=shutil.ignore_patterns(".ptreg*"))
    record = failed_record(
        "hostile-lesson", lesson=HOSTILE, name=HOSTILE, varied=HOSTILE, varied_from="cli-lazy-imports"
    )
    (root / "hostile-lesson.json").write_text(json.dumps(record, indent=2))
    (root / "plain-neighbour.json").write_text(json.dumps(complete_record("plain-neighbour"), indent=2))
    out = work / "site"
    ptreg = str(Path(sys.executable).parent / "ptreg")
    subprocess.run([ptreg, "--registry", str(root), "site", "-o", str(out)], check=True, capture_output=True)
    return out


def _open(browser: Any, url: str) -> tuple[Any, list[str]]:
    """A new page at ``url``, and the list its console errors, page errors and dialogs go to."""
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))

    def dialog(d: Any) -> None:
        problems.append(f"dialog: {d.message}")
        d.dismiss()

    page.on("dialog", dialog)
    page.goto(url)
    page.wait_for_load_state("load")
    return page, problems


def _links(page: Any) -> list[str]:
    """Every link of the page, HTML and SVG alike, as absolute URLs."""
    return page.eval_on_selector_all(
        "a[href]", "els => els.map(e => new URL(e.getAttribute('href'), document.baseURI).href)"
    )


def _check_charts(page: Any) -> int:
    """Each chart's marks against the marks its table's rows say they drew; how many charts."""
    charts = page.eval_on_selector_all(
        "figure.chart",
        """figs => figs.map(f => {
            const name = f.getAttribute('data-chart');
            const marks = f.querySelectorAll('svg [id^="' + name + '-mark-"]').length;
            const rows = Array.from(f.querySelectorAll('table.chart-data tr[data-marks]'));
            return [name, marks, rows.reduce((n, r) => n + Number(r.getAttribute('data-marks')), 0), rows.length];
        })""",
    )
    for name, marks, expected, rows in charts:
        assert rows > 0 and marks == expected, (name, marks, expected)
    return len(charts)


def _crawl(browser: Any, start: str, exists: Any, *, visit: bool = True) -> set[str]:
    """Every page reachable from ``start`` by internal links, read by one browser tab: each link
    resolves, and (with ``visit``, else the page's HTML is fetched) no page logs an error.
    Returns the pages seen."""
    seen: set[str] = set()
    todo = [start]
    page, problems = _open(browser, "about:blank")
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        if visit:
            page.goto(url)
        else:
            page.set_content(page.context.request.get(url).text())
        for link in _links(page) if visit else _links_from(page, url):
            target, _ = urldefrag(link)
            if urlparse(target).scheme not in ("file", "http"):
                continue
            assert exists(target), f"{url} links to {target}, which does not resolve"
            if target not in seen and target.endswith(".html"):
                todo.append(target)
        assert problems == [], (url, problems)
    page.close()
    return seen


def _links_from(page: Any, url: str) -> list[str]:
    """The links of HTML set into ``page`` as content, resolved against ``url``."""
    return page.eval_on_selector_all(
        "a[href]", "(els, base) => els.map(e => new URL(e.getAttribute('href'), base).href)", url
    )


def test_pages_from_disk(browser: Any, site: Path) -> None:
    charts = {}
    for name, relative in PAGES.items():
        page, problems = _open(browser, (site / relative).as_uri())
        charts[name] = _check_charts(page)
        assert "ptreg registry" in page.inner_text("header")
        page.close()
        assert problems == [], (name, problems)
    assert charts["run"] >= 3 and charts["lineage"] == 1


def test_every_internal_link_resolves_from_disk(browser: Any, site: Path) -> None:
    def exists(url: str) -> bool:
        return Path(url2pathname(urlparse(url).path)).is_file()

    seen = _crawl(browser, (site / "index.html").as_uri(), exists)
    assert len(seen) == len(list(site.rglob("*.html")))  # and every page is reachable


def test_filtering_and_sorting_the_index(browser: Any, site: Path) -> None:
    page, problems = _open(browser, (site / "index.html").as_uri())
    rows = page.locator("#attempt-table tbody tr")
    total = rows.count()
    assert total == len(list((site / "attempts").glob("*.html")))
    page.select_option("#filter-status", "failed")
    visible = page.locator("#attempt-table tbody tr:visible")
    failed = int(page.inner_text('.count[data-status="failed"]'))
    assert visible.count() == failed > 0
    assert set(
        page.eval_on_selector_all("#attempt-table tbody tr:not([hidden])", "rs => rs.map(r => r.dataset.status)")
    ) == {"failed"}
    page.select_option("#filter-status", "")
    page.fill("#filter-text", "tinygpt")
    assert 0 < visible.count() < total
    assert all("tinygpt" in t.lower() for t in visible.all_inner_texts())
    assert page.inner_text("#shown-count") == f"{visible.count()} of {total} shown"
    page.fill("#filter-text", "")
    page.click("#attempt-table th:first-child")
    ids = page.eval_on_selector_all("#attempt-table tbody tr td:first-child", "cs => cs.map(c => c.textContent.trim())")
    assert ids == sorted(ids) and len(ids) == total
    page.click("#attempt-table th:first-child")
    ids = page.eval_on_selector_all("#attempt-table tbody tr td:first-child", "cs => cs.map(c => c.textContent.trim())")
    assert ids == sorted(ids, reverse=True)
    page.close()
    assert problems == []


def test_the_index_reads_without_javascript(browser: Any, site: Path) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto((site / "index.html").as_uri())
    assert page.locator("#attempt-table tbody tr").count() == len(list((site / "attempts").glob("*.html")))
    assert not page.is_visible("#filters")  # the controls show only where they work
    context.close()


def test_a_hostile_lesson_shows_as_text(browser: Any, site: Path) -> None:
    for relative in ("index.html", PAGES["hostile"], "lineage/cli-lazy-imports.html"):
        page, problems = _open(browser, (site / relative).as_uri())
        assert page.locator("img").count() == 0
        assert page.locator("script:not([src])").count() == 0
        assert "<script>alert(1)</script>" in page.inner_text("body") or relative.startswith("lineage")
        if relative.startswith("lineage"):
            assert HOSTILE in page.inner_text("table.chart-data")
        page.close()
        assert problems == [], (relative, problems)


def test_the_served_site(browser: Any, site: Path, tmp_path: Path) -> None:
    out = tmp_path / "served"
    shutil.copytree(site, out)
    root = site.parent / "attempts"
    ptreg = str(Path(sys.executable).parent / "ptreg")
    server = subprocess.Popen(
        [ptreg, "--registry", str(root), "site", "-o", str(out), "--changed", "--serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = ""
        for line in server.stdout:
            if line.startswith("serving "):
                url = line.split(" at ")[1].split()[0]
                break
        assert url.startswith("http://127.0.0.1:"), (url, server.poll())
        base = url.removesuffix("index.html")
        for name, relative in PAGES.items():
            page, problems = _open(browser, base + relative)
            charts = _check_charts(page)
            page.close()
            assert problems == [] and (charts > 0 or name in ("index", "dossier", "hostile")), (name, problems)

        context = browser.new_context()
        answered: dict[str, bool] = {}  # a page is linked from many: each URL asked for once

        def served(target: str) -> bool:
            if target not in answered:
                answered[target] = bool(context.request.get(target).ok)
            return answered[target]

        seen = _crawl(browser, url, served, visit=False)
        assert len(seen) == len(list(out.rglob("*.html")))
        context.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
