"""The site at real sizes, read in chromium at 1,280 and at 390 pixels wide: an attempt of arms
with 20 runs and one with 1, a backends attempt with 20 runs and one with 1 (16 cells), and their
evaluators' pages. On every page: no text, HTML or a chart's SVG, reads under 9 px (a chart's
text measured as drawn: its font size times the scale the page shows the drawing at); each arm
or backend has one colour in every chart of a page and of the pages of one evaluator; no table
says its caption twice; an arms run's pages speak of arms, not of configs and backends; the
attempt's verdict comes before its details; and at 390 wide nothing but a table's or a chart's
own box scrolls sideways.

The registry is built here (`_registry`): the lead may replace it with tests/helpers.py's
`registry_with_runs` once that exists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, add_run, complete_record, freeze_evaluator, step_cell, step_results
from ptreg.site.pages import arms_run_charts
from ptreg.store.runs import read_results

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

ARMS = "warmup-doubles-the-rate"  # its run, cloned to 20
ARMS_ONE = "warmup-heldout-loss"
STEPS_ONE = "tinygpt-step-attribution"  # 16 cells: the widest bar charts
STEPS = "twenty-steps"  # 20 runs of synthetic backends results
RUNS = 20
WIDTHS = (1280, 390)
SMALLEST_PX = 9.0
KEPT = ("heldout_loss",)


def _run_id(k: int) -> str:
    return f"20261207T00{k:02d}00Z"


def _registry(work: Path) -> Path:
    """A registry of three attempts from this repository's own and a synthetic one: ``ARMS``'s
    run cloned into 20 runs (the clones' results as the real run of arms wrote them, but for the
    metrics other than ``KEPT``), and ``STEPS`` with 20 runs of two configs and three backends
    under an evaluator frozen here."""
    root = work / "attempts"
    root.mkdir()
    shutil.copy(REPO / "attempts" / "registry.json", root)
    shutil.copytree(REPO / "attempts" / "vocabulary", root / "vocabulary")
    (root / "evaluators").mkdir()
    for attempt in (ARMS, ARMS_ONE, STEPS_ONE):
        record = json.loads((REPO / "attempts" / f"{attempt}.json").read_text(encoding="utf-8"))
        shutil.copy(REPO / "attempts" / f"{attempt}.json", root)
        shutil.copy(REPO / "attempts" / "evaluators" / f"{record['evaluator']}.json", root / "evaluators")
        shutil.copytree(REPO / "attempts" / "runs" / attempt, root / "runs" / attempt)
    source = next((root / "runs" / ARMS).iterdir())
    record = json.loads((root / f"{ARMS}.json").read_text(encoding="utf-8"))
    results = json.loads((source / "results.json").read_text(encoding="utf-8"))
    for cell in results["cells"]:  # the clones keep one metric: a fifth of the charts to draw
        for mine in (cell["metrics"], *cell["versus"].values()):
            for metric in [m for m in mine if m not in KEPT]:
                del mine[metric]
    for k in range(1, RUNS):  # as the run wrote its folder, environment and all, under another id
        shutil.copytree(source, root / "runs" / ARMS / _run_id(k))
        (root / "runs" / ARMS / _run_id(k) / "results.json").write_text(
            json.dumps({**results, "run_id": _run_id(k)}), encoding="utf-8"
        )
        record["runs"].append({"run_id": _run_id(k), "status": "complete", "evaluator": results["evaluator"]})
    (root / f"{ARMS}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")

    ref = freeze_evaluator(
        root,
        name="steps",
        workload="tinygpt-train",
        configs=["small", "xl"],
        backends=["naive", "blocked-numpy", "numpy-blas"],
        metric="ms-per-step",
        timed_steps=1,
        repeats=4,  # few samples: the evaluator's page reads every run once per pair of runs
    )
    frozen = json.loads((root / "evaluators" / f"{ref}.json").read_text(encoding="utf-8"))
    (root / f"{STEPS}.json").write_text(
        json.dumps(complete_record(STEPS, evaluator=ref, runs=[]), indent=2), encoding="utf-8"
    )
    for k in range(RUNS):
        cells = [
            _sampled(step_cell(backend, config, ms=ms * (1 + k / 50), shares=(0.3, 0.3, 0.3)), frozen["spec"])
            for config, scale in (("small", 1.0), ("xl", 8.0))
            for backend, ms in (("naive", 500 * scale), ("blocked-numpy", 300 * scale), ("numpy-blas", 40 * scale))
        ]
        results = step_results(STEPS, _run_id(k), cells)
        results.update(evaluator=ref, evaluator_sha256=frozen["sha256"], spec=frozen["spec"])
        add_run(root, results)
    return root


def _sampled(cell: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """``cell`` with the timed steps its median was taken over, one value per repeat a little
    apart, as the history and the comparisons read a cell."""
    ms = cell["ms_per_step"]["median"]
    cell["step_samples"] = [
        {
            "repeat": r,
            "step": s,
            "seconds": ms / 1000 * (1 + (r - 2) / 100),
            "kernel_seconds": dict.fromkeys(("forward", "backward_da", "backward_db"), ms / 1000 * 0.3),
            "loss": 3.0,
        }
        for r in range(spec["repeats"])
        for s in range(spec["timed_steps"])
    ]
    return cell


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("real-sizes")
    root = _registry(work)
    out = work / "site"
    ptreg = str(Path(sys.executable).parent / "ptreg")
    done = subprocess.run([ptreg, "--registry", str(root), "site", "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


def _evaluator_page(site: Path, prefix: str) -> str:
    (found,) = sorted(p.name for p in (site / "evaluators").glob(f"{prefix}@*.html"))
    return f"evaluators/{found}"


# Text of every rendered element that holds some: its font size as shown, in CSS pixels. An SVG
# text's size is in the drawing's units: times the scale its screen matrix applies (the
# viewBox's scaling to the width shown, and any rotation, whose scale is 1).
SIZES = """() => {
    const found = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    while (walker.nextNode()) {
        const el = walker.currentNode.parentElement;
        if (!walker.currentNode.textContent.trim() || seen.has(el)) continue;
        seen.add(el);
        if (el.closest('title, script, style') || el.getClientRects().length === 0) continue;
        let px = parseFloat(getComputedStyle(el).fontSize);
        if (el instanceof SVGElement) {
            const m = el.getScreenCTM();
            px *= Math.hypot(m.a, m.b);
        }
        found.push([el.tagName, walker.currentNode.textContent.trim().slice(0, 40), px]);
    }
    return found;
}"""

# Each chart mark's series (arm or backend) and the colour it is painted in.
COLOURS = """() => Array.from(document.querySelectorAll('figure.chart')).flatMap(fig =>
    Array.from(fig.querySelectorAll('svg g[data-series]')).map(g => {
        const shape = Array.from(g.querySelectorAll('path, use')).find(e => !e.closest('defs'));
        const style = getComputedStyle(shape);
        return [fig.dataset.chart, g.dataset.series, style.fill !== 'none' ? style.fill : style.stroke];
    }))"""

# A table's caption said again by the element just before the table.
SAID_TWICE = """() => Array.from(document.querySelectorAll('table > caption')).filter(c => {
    const before = (c.closest('.table-wrap') || c.parentElement).previousElementSibling;
    return before !== null && before.textContent.trim().replace(/:$/, '') === c.textContent.trim();
}).map(c => c.textContent.trim())"""


def _pages(site: Path) -> list[tuple[str, str | None]]:
    """Each page checked, with the evaluator whose colours it shares (None: no arms drawn)."""
    arms = _evaluator_page(site, "warmup-lr")
    steps = _evaluator_page(site, "steps")
    return [
        ("index.html", None),
        *((f"lineage/{p.name}", None) for p in sorted((site / "lineage").glob("*.html"))),
        (f"attempts/{ARMS}.html", None),
        (f"attempts/{ARMS_ONE}.html", None),
        (f"runs/{ARMS}/{next((site / 'runs' / ARMS).glob('20261206*')).stem}.html", arms),
        (f"runs/{ARMS}/{_run_id(RUNS - 1)}.html", arms),
        (arms, arms),
        (f"runs/{ARMS_ONE}/{next((site / 'runs' / ARMS_ONE).iterdir()).stem}.html", "warmup-heldout"),
        (_evaluator_page(site, "warmup-heldout"), "warmup-heldout"),
        (f"attempts/{STEPS}.html", None),
        (f"runs/{STEPS}/{_run_id(RUNS - 1)}.html", steps),
        (f"runs/{STEPS}/{_run_id(0)}.html", steps),
        (steps, steps),
        (f"runs/{STEPS_ONE}/{next((site / 'runs' / STEPS_ONE).iterdir()).stem}.html", "tinygpt-sweep"),
        (_evaluator_page(site, "tinygpt-sweep"), "tinygpt-sweep"),
    ]


def test_every_page_at_1280_and_390(browser: Any, site: Path) -> None:
    colours: dict[str, dict[str, set[str]]] = {}
    found: dict[str, list[Any]] = {"under 9 px": [], "caption said twice": [], "page wider than 390": []}
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        for relative, evaluator in _pages(site):
            page.goto((site / relative).as_uri())
            sizes = page.evaluate(SIZES)
            assert len(sizes) > 10, relative  # the measure reads the page's text
            found["under 9 px"] += [(width, relative, *f) for f in sizes if f[2] < SMALLEST_PX - 0.05]
            for chart, series, colour in page.evaluate(COLOURS):
                assert evaluator is not None, (relative, chart)
                colours.setdefault(evaluator, {}).setdefault(series, set()).add(colour)
            found["caption said twice"] += [(relative, c) for c in page.evaluate(SAID_TWICE)]
            wide = page.evaluate("document.documentElement.scrollWidth")
            if width < 500 and wide > width:  # the page never scrolls sideways; a table's or a chart's box may
                found["page wider than 390"].append((relative, wide))
        context.close()
    found["arms of two colours"] = [(e, s, c) for e, series in colours.items() for s, c in series.items() if len(c) > 1]
    assert found == {k: [] for k in found}
    arms = _evaluator_page(site, "warmup-lr")
    assert set(colours) == {arms, "warmup-heldout", _evaluator_page(site, "steps"), "tinygpt-sweep"}
    assert set(colours[arms]) == {"baseline", "candidate"} and len(colours["tinygpt-sweep"]) == 4
    # the baseline arm is painted alike under both evaluators of arms: the evaluator's order, baseline first
    assert colours["warmup-heldout"]["baseline"] == colours[arms]["baseline"]


def test_arms_pages_speak_of_arms(browser: Any, site: Path) -> None:
    page = browser.new_page()
    for relative in (f"runs/{ARMS}/{_run_id(3)}.html", _evaluator_page(site, "warmup-lr"), f"attempts/{ARMS}.html"):
        page.goto((site / relative).as_uri())
        text = page.inner_text("main")
        assert "config / backend" not in text and "all / baseline" not in text, relative
        headers = page.eval_on_selector_all("th", "ths => ths.map(t => t.textContent.trim())")
        assert "config" not in headers and "backend" not in headers, relative
        assert "unknownx" not in text
    page.close()


def test_the_verdict_comes_first(browser: Any, site: Path) -> None:
    page = browser.new_page()
    for relative, latest in (
        (f"attempts/{ARMS}.html", _run_id(RUNS - 1)),
        (f"runs/{ARMS}/{_run_id(5)}.html", _run_id(5)),
        (f"attempts/{STEPS}.html", _run_id(RUNS - 1)),
    ):
        page.goto((site / relative).as_uri())
        verdict = page.locator("#verdict")
        assert verdict.count() == 1, relative
        text = verdict.inner_text()
        assert latest in text, (relative, text)
        top = verdict.bounding_box()["y"]
        assert all(top < box["y"] for box in (h.bounding_box() for h in page.locator("main h2").all())), relative
    page.goto((site / f"attempts/{ARMS}.html").as_uri())
    assert "its plan decided inconclusive" in page.inner_text("#verdict")
    assert "candidate against baseline: heldout_loss" in page.inner_text("#verdict")
    page.close()


def test_an_arm_has_one_colour_in_every_chart_of_its_run() -> None:
    """The mean chart holds both arms and the chart against the baseline only the candidate: the
    candidate is painted alike in both (it took the baseline's colour in the second)."""
    folder = next((REPO / "attempts" / "runs" / ARMS).iterdir())
    charts = arms_run_charts(read_results(folder, REPO / "attempts"))
    painted: dict[str, set[str]] = {}
    for chart in charts:
        for series, fill in re.findall(
            r'data-series="([^"]+)"><title>[^<]*</title>\s*<path [^>]*?style="fill: (#[0-9a-f]+)', chart.svg
        ):
            painted.setdefault(series, set()).add(fill)
    assert len(charts) >= 4 and set(painted) == {"baseline", "candidate"}
    assert all(len(fills) == 1 for fills in painted.values()), painted
    assert painted["baseline"] != painted["candidate"]
