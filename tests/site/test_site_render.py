"""The site's renderers escape for their own medium: matplotlib text (``$...$`` is maths to it),
SVG and HTML (the templates' autoescaping, the one chart drawing embedded as it is), and
layout (a name of 120 characters, a value no chart can draw)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import REPO, Result, complete_record, failed_record, project_lineage, snapshot, write_registry

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from ptreg.site.build import environment
from ptreg.site.charts import LABEL_MAX, Bar, Point, Stack, bar_chart, history_chart, label, share_chart

MATHS = "x$\\foo$"  # mathtext would read \foo as a command, and raise
MATHS_TOO = "a$^{2}$b$_x$"  # would be drawn as a superscript and a subscript
LONG = "backend-" + "b" * 112  # 120 characters
LONG_TWIN = "backend-" + "b" * 111 + "c"  # the same start: still apart once cut
ESCAPE = "e\x1b]0;t\x07"  # what an XML parser refuses and a terminal acts on
RUN = "runs/numba-packing-step-xl/20261202T015053Z"


def marks(svg: str, name: str) -> list[str]:
    return re.findall(rf'<g id="({re.escape(name)}-mark-\d+)"[ >]', svg)


def test_a_label_is_one_line_visible_and_cut_with_its_end_kept() -> None:
    assert label(MATHS) == MATHS
    assert label("one\ntwo") == "one\\ntwo"
    assert label(ESCAPE) == "e\\x1b]0;t\\x07"
    cut, twin = label(LONG), label(LONG_TWIN)
    assert len(cut) == LABEL_MAX and "…" in cut and cut != twin
    assert cut.startswith("backend-bbb") and twin.endswith("bc")


def test_a_bar_chart_draws_hostile_names_as_text_and_skips_what_cannot_be_drawn() -> None:
    bars = [
        Bar("xl", MATHS, 5.0, 4.0, 6.0),
        Bar("xl", MATHS_TOO, 4.0),
        Bar("xl", LONG, 3.0, 2.0, math.inf),
        Bar("xl", LONG_TWIN, 2.0),
        Bar("xl", ESCAPE, math.inf),
        Bar("xl", "nan", math.nan),
        Bar(MATHS, "plain", None),
    ]
    chart = bar_chart("time", "t", "ms", bars)
    assert len(marks(chart.svg, "time")) == chart.marks == 4
    assert [r.marks for r in chart.rows] == [1, 1, 1, 1, 0, 0, 0]
    assert [r.cells[1] for r in chart.rows][:5] == [MATHS, MATHS_TOO, LONG, LONG_TWIN, ESCAPE]  # whole in the table
    assert chart.rows[4].cells[2] == "inf" and chart.rows[6].cells[2] == "unknown"  # infinite is not unknown
    assert "2 values cannot be drawn (not above zero, not a finite number, or beyond 1e+15 either way)" in chart.note
    # drawn as text, not maths: the dollars and the backslash stay in the SVG's text
    assert f">{MATHS}</text>" in chart.svg and f">{MATHS_TOO}</text>" in chart.svg
    # cut in the legend, whole in the mark's tooltip, escaped for XML
    assert f">{label(LONG)}</text>" in chart.svg and f">{label(LONG_TWIN)}</text>" in chart.svg
    assert f"<title>xl / {LONG}: 3</title>" in chart.svg
    assert "\x1b" not in chart.svg and "\x07" not in chart.svg


def test_a_mean_above_its_log_scale_interval_is_drawn() -> None:
    """A time's interval is of its geometric mean, which one slow round can leave below the
    arithmetic mean the bar shows: the chart is drawn all the same."""
    chart = bar_chart("time", "t", "s", [Bar("wall", "slow", 0.30, 0.05, 0.25), Bar("wall", "fast", 0.1, 0.08, 0.12)])
    assert chart.marks == 2 and chart.rows[0].cells[2:] == ["0.3", "0.05", "0.25"]  # the table says it as it is


def test_a_log_axis_reads_as_plain_numbers() -> None:
    """A log axis's ticks are the numbers the chart's table writes (1,000), not maths (10^3)
    and never maths' source."""
    chart = bar_chart("time", "t", "ms", [Bar("xl", MATHS, 5.0), Bar("xl", "b", 5000.0)])
    assert chart.note.startswith("Logarithmic scale")
    texts = re.findall(r">([^<]*)</text>", chart.svg)
    assert "1,000" in texts and "mathdefault" not in chart.svg
    assert not [t for t in texts if "10^{" in t or "×" in t], texts
    assert MATHS in texts


def test_a_unit_is_drawn_as_text_on_the_value_axis() -> None:
    """A command evaluator declares its metrics' units, printable ASCII that may hold ``$`` and
    a backslash: the y label of the bar and history charts is text, like every name."""
    chart = bar_chart("score", "s", MATHS, [Bar("xl", "a", 5.0, 4.0, 6.0)])
    history = history_chart("history", "h", MATHS_TOO, ["a/0"], [Point("xl / a", "a/0", 1.0, 0.5, 1.5)])
    assert f">{MATHS}</text>" in chart.svg and f">{MATHS_TOO}</text>" in history.svg
    assert chart.headers[-3] == MATHS


@pytest.mark.parametrize("huge", [1e290, 1.7e308, 1e-300, 0.0, -5.0])
def test_values_beyond_the_drawn_range_are_rows_not_marks(huge: float) -> None:
    """matplotlib's locators overflow on 1e290 beside 1 (log) or 1.7e308 beside 1.6e308 (linear)."""
    for values in ([huge, 1.0], [huge, huge * 0.9]):
        chart = bar_chart("time", "t", "ms", [Bar("xl", str(i), v, v / 2, v * 1.5) for i, v in enumerate(values)])
        assert [r.marks for r in chart.rows] == [int(v == 1.0) for v in values]
        assert f"{sum(v != 1.0 for v in values)} value" in chart.note
        points = [Point("xl / a", f"a/{i}", v, v / 2, v * 1.5) for i, v in enumerate(values)]
        history = history_chart("history", "h", "ms", ["a/0", "a/1"], points)
        assert history.marks == sum(v == 1.0 for v in values)


def test_share_and_history_charts_take_the_same_names_and_values() -> None:
    stacks = [
        Stack(f"xl / {MATHS}", 10.0, {"forward": 0.3, "backward_da": math.nan, "backward_db": math.inf}, {}),
        Stack(f"xl / {LONG}", 10.0, {"forward": 0.2, "backward_da": 0.3, "backward_db": 0.3, "other": 0.2}, {}),
    ]
    shares = share_chart("shares", "s", stacks)
    assert [r.marks for r in shares.rows] == [1, 4] and len(marks(shares.svg, "shares")) == 5
    assert f">xl / {MATHS}</text>" in shares.svg and f">{label(f'xl / {LONG}')}</text>" in shares.svg
    assert "attention" not in shares.headers  # no stack timed ops apart: no column for them
    with_ops = share_chart("ops", "s", [Stack("xl / a", 10.0, {"forward": 0.5, "attention": 0.3, "other": 0.2}, {})])
    assert with_ops.headers[2::2] == ["forward", "attention", "other"]
    assert [r.marks for r in with_ops.rows] == [3] and "<title>xl / a: attention 30.0%</title>" in with_ops.svg
    points = [
        Point(f"xl / {MATHS}", "a/20240101T000000Z", 5.0, 4.0, 6.0),
        Point(f"xl / {MATHS}", "a/20240102T000000Z", math.inf, None, None),
        Point(f"xl / {LONG}", "a/20240101T000000Z", 3.0, 2.0, math.inf),
        Point(f"xl / {LONG}", "a/20240102T000000Z", 4.0, None, None),
    ]
    runs = ["a/20240101T000000Z", "a/20240102T000000Z"]
    history = history_chart("history", "h", "ms", runs, points)
    assert [r.marks for r in history.rows] == [1, 0, 1, 1] and len(marks(history.svg, "history")) == 3
    assert "1 value cannot be drawn" in history.note
    assert f"<title>a/20240101T000000Z: xl / {LONG} 3</title>" in history.svg


def test_a_run_with_hostile_backend_names_and_an_infinite_median_builds(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    """Issue 31, item 8, through `ptreg site`: the names drawn as text, a median of 1e300 a
    row without a mark and a note; the run's page written; nothing in the registry touched."""
    root = project_lineage(tmp_path / "attempts", RUN.split("/")[1])
    path = root / RUN / "results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    renamed = {"blocked-numpy": MATHS, "numba": LONG}
    for cell in results["cells"]:
        cell["backend"] = renamed.get(cell["backend"], cell["backend"])
    ratio = next(c["vs_naive_ratio"] for c in results["cells"] if c["backend"] == LONG)
    ratio["median"] = 1e300  # finite, so valid, and beyond drawing (an Infinity is refused by validate)
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    before = snapshot(root)
    out = tmp_path / "out"
    result = cli("--registry", root, "site", "-o", out, "--json")
    assert result.code == 0 and "Traceback" not in result.err, result.err
    assert result.json()["broken_runs"] == 0
    page = (out / f"{RUN}.html").read_text(encoding="utf-8")
    assert MATHS in page and label(LONG) in page and f"<td>{LONG}</td>" in page
    assert "1 value cannot be drawn (not above zero" in page
    assert snapshot(root) == before


# --------------------------------------------------------------------------- HTML


TEMPLATES = REPO / "ptreg" / "site" / "templates"


def test_every_template_is_autoescaped_and_only_the_chart_drawing_is_marked_safe() -> None:
    env = environment()
    names = env.list_templates()
    assert sorted(names) == sorted(p.name for p in TEMPLATES.glob("*.html"))
    assert env.autoescape is True  # not a function that could leave some template out
    for name in names:
        text = (TEMPLATES / name).read_text(encoding="utf-8")
        assert "autoescape" not in text, name  # no block turns it off
        safe = re.findall(r"\|\s*safe\b|Markup\(", text)
        assert safe == ([] if name != "macros.html" else ["| safe"]), (name, safe)  # c.svg: matplotlib's SVG
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), name  # no inline script to break out of
        # every attribute's value is quoted: an unquoted {{ }} would let a space start a new attribute
        assert not re.search(r"=\s*\{\{", text), name


def test_hostile_text_stays_text_in_every_context(cli: Callable[..., Result], tmp_path: Path) -> None:
    breakout = "</script><script>alert(1)</script><!-- ]]> {{ 7*7 }} ' onmouseover='alert(2)"
    root = write_registry(
        tmp_path / "registry",
        [
            complete_record("root-attempt"),
            failed_record(
                "hostile",
                name=breakout,
                lesson=breakout,
                evidence=f"{MATHS} {ESCAPE}",
                varied_from="root-attempt",
                varied=breakout,
            ),
        ],
    )
    out = tmp_path / "out"
    assert cli("--registry", root, "site", "-o", out).code == 0
    for page in (out / "index.html", out / "attempts" / "hostile.html", out / "lineage" / "root-attempt.html"):
        html = page.read_text(encoding="utf-8")
        assert "<script>alert" not in html and "</script><script>" not in html, page
        assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html, page
        assert "{{ 7*7 }}" in html and ">49<" not in html, page  # a record is never a template
        assert "' onmouseover='" not in html, page
        assert re.findall(r"<script\b[^>]*>", html) in ([], ['<script src="static/site.js">']), page


def test_a_one_config_run_chart_keeps_its_label_plain_ticks_and_every_bar_clear(monkeypatch) -> None:
    """The run page's time chart of one config and four backends spanning 30x: its y-axis
    label inside the figure, its ticks as plain numbers (not 6×10⁰), and no legend over a bar."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from ptreg.site import charts

    drawn = []
    real_svg = charts._svg

    def keep(figure, titles=None, series=None):
        drawn.append(figure)
        return real_svg(figure, titles, series)

    monkeypatch.setattr(charts, "_svg", keep)
    bars = [
        Bar("small", "naive", 6.2, 5.9, 6.6),
        Bar("small", "blocked-numpy", 3.3),
        Bar("small", "numba", 0.7),
        Bar("small", "numpy-blas", 0.2, 0.19, 0.22),
    ]
    chart = bar_chart("time", "Time per step", "ms/step", bars)
    assert "×" not in chart.svg and "10^" not in chart.svg  # the tick labels are numbers as the table writes them
    (figure,) = drawn
    renderer = FigureCanvasAgg(figure).get_renderer()
    axes = figure.axes[0]
    ticks = [t.get_text() for t in [*axes.get_yticklabels(), *axes.get_yticklabels(minor=True)] if t.get_text()]
    assert ticks and all(re.fullmatch(r"[0-9.,]+", t) for t in ticks), ticks
    width, _ = figure.get_size_inches() * figure.dpi
    label_box = axes.yaxis.label.get_window_extent(renderer)
    assert label_box.x0 >= 0, "the y-axis label is cut at the figure's edge"
    assert all(t.get_window_extent(renderer).x0 >= 0 for t in axes.get_yticklabels() if t.get_text())
    legend = axes.get_legend().get_window_extent(renderer)
    assert legend.x1 <= width, "the legend leaves the figure"
    for patch in axes.patches:
        box = patch.get_window_extent(renderer)
        assert not legend.overlaps(box), "the legend covers a bar"


@pytest.mark.parametrize("version, drawn", [(1, False), (3, True)])
def test_the_run_page_draws_no_interval_the_record_does_not_have(version: int, drawn: bool) -> None:
    """A results_version 1 run carries no interval (the CLI says unknown): its time chart has
    no whisker and its table says unknown; from version 3 on the interval is the record's."""
    from helpers import step_cell, step_results
    from ptreg.records.run_results import RunResults
    from ptreg.site.pages import run_charts

    cell = step_cell("naive", "tiny", ms=500.0, shares=(0.3, 0.3, 0.3))
    cell["step_samples"] = [
        {"repeat": r, "step": s, "seconds": 0.5 + 0.01 * r, "kernel_seconds": {}, "loss": 1.0}
        for r in range(4)
        for s in range(2)
    ]
    results = RunResults.model_validate(step_results("a", "20260101T000000Z", [cell], version=version))
    [time_chart] = [c for c in run_charts(results) if c.name == "time"]
    [row] = time_chart.rows
    assert ("unknown" not in row.cells) == drawn
    assert "interval of the typical value" in time_chart.title
