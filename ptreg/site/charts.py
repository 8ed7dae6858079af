"""Charts drawn at build time with matplotlib, as static SVG with the text kept as text.

Each chart is a `Chart`: its SVG and the table of the numbers it draws, row by row, each row
saying how many marks (bars, bar segments, points) it put on the chart, so that a reader, and
the browser tests, can hold the two side by side. Each mark is a group whose id starts with
``<chart>-mark-``. A value nobody measured is a row of the table and no mark.

The output is deterministic: no date in the metadata, a fixed hash salt for the SVG ids, and
no font file embedded or fetched (``svg.fonttype = none`` leaves the font to the browser).

Every label is a name from a record or a run, so hostile: its dollar signs are escaped for
matplotlib (a backend named ``x$\\foo$`` would otherwise be parsed as maths, and raise; the axes'
own tick labels are mathtext, so it stays on), a long name is cut in the drawing (its table and
each mark's tooltip hold it whole), and a value that cannot be drawn (not above zero, not finite,
or beyond ``DRAWN``) is a row of the table and no mark.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any, TypeGuard

from ..text import printable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# A scale is logarithmic when the largest value is more than this many times the smallest.
LOG_RANGE = 10.0
STYLE: Any = {  # rc_context types its keys as literals; these are checked by matplotlib at run time
    "svg.fonttype": "none",
    "svg.hashsalt": "ptreg-site",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
LINE_STYLES = ("-", "--", ":", "-.")
# The range a chart draws, either way from 1: beyond it matplotlib's tick locators overflow (a
# value of 1e290 beside 1 raises in its log formatter), and no time or speedup comes near it.
DRAWN = 1e15
LABEL_MAX = 32  # characters of a name drawn as a label; the table and the tooltip hold it whole
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
# Every text a chart draws is at least this many points; the page never shows a chart at less
# than one CSS pixel per point (`_svg`), so no chart text reads under 9 px at any width.
TEXT_PT = 9
# A step's parts need more: the three kernels, the ten ops and the rest (tab20's first twelve and
# its two pinks for the fused ops, placed so that every other part keeps its colour).
PART_COLOURS = (
    "#1f77b4",
    "#aec7e8",
    "#ff7f0e",
    "#ffbb78",
    "#2ca02c",
    "#98df8a",
    "#d62728",
    "#ff9896",
    "#e377c2",
    "#9467bd",
    "#c5b0d5",
    "#f7b6d2",
    "#8c564b",
    "#7f7f7f",
)


def palette(order: Sequence[str], names: Sequence[str] = ()) -> dict[str, str]:
    """The one colour of each arm or backend: by its place in ``order`` (the evaluator's own, the
    baseline first), so that every chart of a page, and every page of the same evaluator, draws
    it alike whichever of them a chart holds; a name ``order`` lacks comes after, in the order of
    ``names``."""
    every = list(dict.fromkeys([*order, *names]))
    return {name: COLOURS[n % len(COLOURS)] for n, name in enumerate(every)}


@dataclass
class Row:
    cells: list[str]
    marks: int


@dataclass
class Chart:
    name: str  # unique on its page: the prefix of its marks' ids
    title: str
    svg: str
    headers: list[str]
    rows: list[Row] = field(default_factory=list)
    note: str = ""

    @property
    def marks(self) -> int:
        return sum(r.marks for r in self.rows)


@dataclass(frozen=True)
class Bar:
    """One bar of a grouped chart: its group (a config), its series (a backend), the value and
    its 95% interval (unknown: None)."""

    group: str
    series: str
    value: float | None
    low: float | None = None
    high: float | None = None


@contextmanager
def _drawing() -> Iterator[Callable[[float, float], Figure]]:
    """A maker of figures in the site's style. matplotlib takes about half a second to import:
    only a build that draws a chart pays it, not a --changed that draws none."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(STYLE):
        yield lambda width, height: Figure(figsize=(width, height))


def drawable(value: float | None) -> TypeGuard[float]:
    """Whether a value can be a mark: known, above zero (the axes start at zero or are
    logarithmic) and within ``DRAWN`` (NaN and infinities are not)."""
    return value is not None and 1 / DRAWN <= value <= DRAWN


def _whiskers(low: float, high: float) -> bool:
    """Whether an interval's ends can be drawn (an end may be zero or less on a linear axis)."""
    return abs(low) <= DRAWN and abs(high) <= DRAWN


def _reach(value: float, low: float, high: float) -> list[list[float]]:
    """How far an interval reaches below and above a value, as matplotlib's ``yerr`` takes it.
    A log-scale interval is of the geometric mean, which a skewed arm's arithmetic mean may lie
    above: the side it passes is drawn as none, never refused."""
    return [[max(value - low, 0.0)], [max(high - value, 0.0)]]


def label(name: str) -> str:
    """A name as a chart shows it: on one line, with what a terminal or an XML parser would
    not show written visibly (ptreg/text.py), and cut to ``LABEL_MAX`` characters around "…",
    its start and its end kept so that two long names sharing a start stay apart."""
    shown = printable(name)
    if len(shown) <= LABEL_MAX:
        return shown
    tail = LABEL_MAX // 3
    return shown[: LABEL_MAX - tail - 1] + "…" + shown[-tail:]


def _text(name: str) -> str:
    """``label(name)`` as matplotlib is given it: every ``$`` escaped, so that no pair of them
    starts mathtext (matplotlib then draws ``\\$`` as ``$``, and a backslash as itself)."""
    return label(name).replace("$", "\\$")


def _undrawn(values: Sequence[float | None]) -> str:
    """One line saying how many known values have no mark because they cannot be drawn."""
    count = sum(1 for v in values if v is not None and not drawable(v))
    if not count:
        return ""
    return (
        f"{count} value{'s' if count > 1 else ''} cannot be drawn (not above zero, not a finite number, "
        f"or beyond {DRAWN:.0e} either way): in the table, without a mark."
    )


def needs_log(values: Sequence[float]) -> bool:
    positive = [v for v in values if v > 0]
    return len(positive) >= 2 and max(positive) / min(positive) > LOG_RANGE


def _svg(figure: Figure, titles: dict[str, str] | None = None, series: dict[str, str] | None = None) -> str:
    """The figure as SVG to embed in a page, each mark whose id ``titles`` names given a
    ``<title>`` (the browser's tooltip) holding its names whole, and the arm or backend it is of
    (``series``) as ``data-series``. The drawing may shrink to its column, but never below one
    CSS pixel per point (its own width as a minimum): its box scrolls instead, and its text of
    ``TEXT_PT`` points never reads under 9 px."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    # the page embeds the drawing: the XML prolog and DOCTYPE belong to a file of its own
    text = re.sub(r"\A(<\?xml[^>]*>\s*)?(<!DOCTYPE[^>]*>\s*)?", "", text)
    text = re.sub(r'\A<svg ([^>]*?)viewBox="0 0 ([0-9.]+) ', r'<svg \1style="min-width: \2px" viewBox="0 0 \2 ', text)
    if titles:
        of = series or {}

        def titled(found: re.Match[str]) -> str:
            gid = found.group(2)
            title = titles.get(gid)
            if title is None:
                return found.group(0)
            data = f' data-series="{escape(printable(of[gid]))}"' if gid in of else ""
            return f'<g id="{gid}"{data}><title>{escape(printable(title))}</title>'

        text = re.sub(r'(<g id="([^"]+)">)', titled, text)
    return text


def number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "unknown"
    if not math.isfinite(value):
        return str(value)  # inf, -inf, nan: known, and not a number a chart can draw
    if abs(value) >= DRAWN:  # fixed-point, hundreds of digits
        return f"{value:.{digits}g}"
    return f"{value:,.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def bar_chart(
    name: str,
    title: str,
    unit: str,
    bars: Sequence[Bar],
    *,
    reference_line: float | None = None,
    signed: bool = False,
    labels: tuple[str, str] = ("config", "backend"),
    order: Sequence[str] = (),
) -> Chart:
    """Grouped bars: one group per config, one colour per backend (`palette` of ``order``),
    whiskers for the intervals; logarithmic when the values span more than ``LOG_RANGE``.
    ``signed``: the values are differences, drawn on a linear axis through zero whatever their
    sign. ``labels`` name the group and the series in the chart's table."""
    groups = list(dict.fromkeys(b.group for b in bars))
    series = list(dict.fromkeys(b.series for b in bars))
    colour_of = palette(order, series)

    def can_draw(value: float | None) -> bool:
        return value is not None and abs(value) <= DRAWN if signed else drawable(value)

    known = [b for b in bars if can_draw(b.value)]
    values = [v for b in known for v in (b.value, b.low, b.high) if v is not None and can_draw(v)]
    log = False if signed else needs_log(values)
    width = 0.8 / max(len(series), 1)
    rows = [
        Row([b.group, b.series, number(b.value), number(b.low), number(b.high)], 1 if can_draw(b.value) else 0)
        for b in bars
    ]
    titles: dict[str, str] = {}
    of: dict[str, str] = {}
    # the legend sits beside the plot: the figure widens by its room (a character, and the
    # colour patch and padding)
    legend_chars = max((len(label(s)) for s in series), default=0) if known else 0
    legend_room = legend_chars * LEGEND_CHAR_PX + LEGEND_PAD_PX if known else 0
    with _drawing() as new:
        figure = new(max(4.0, 1.1 * len(groups) * max(len(series), 1) * 0.5 + 2) + legend_room / 100, 3.2)
        axes = figure.add_subplot()
        for n, b in enumerate(known):
            x = groups.index(b.group) + (series.index(b.series) - (len(series) - 1) / 2) * width
            assert b.value is not None
            legend = _text(b.series) if all(k.series != b.series for k in known[:n]) else None
            (patch,) = axes.bar([x], [b.value], width=width * 0.9, color=colour_of[b.series], label=legend)
            patch.set_gid(f"{name}-mark-{n}")
            titles[f"{name}-mark-{n}"] = f"{b.group} / {b.series}: {number(b.value)}"
            of[f"{name}-mark-{n}"] = b.series
            if b.low is not None and b.high is not None and _whiskers(b.low, b.high):
                axes.errorbar([x], [b.value], yerr=_reach(b.value, b.low, b.high), fmt="none", ecolor="#222", capsize=3)
        if reference_line is not None:
            axes.axhline(reference_line, color="#888", linewidth=0.8, linestyle="--")
        axes.set_xticks(range(len(groups)), [_text(g) for g in groups])
        axes.set_ylabel(_text(unit) + (" (log scale)" if log else ""))
        if log:
            axes.set_yscale("log")
            _plain_log_ticks(axes)
        if known:
            # beside the plot, never over a bar ("best" still covers one when every spot holds one)
            axes.legend(fontsize=TEXT_PT, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
        else:
            axes.text(0.5, 0.5, "nothing measured", ha="center", va="center", transform=axes.transAxes)
        _fit(figure, [number(t) for t in axes.get_yticks()], legend_px=legend_room)
        svg = _svg(figure, titles, of)
    headers = [*labels, unit, "95% CI low", "95% CI high"]
    notes = [
        "Logarithmic scale: the values span more than 10x." if log else "",
        "" if signed else _undrawn([b.value for b in bars]),
    ]
    return Chart(name, title, svg, headers, rows, " ".join(n for n in notes if n))


# The kernels, the step's other ops (records/run_results.py STEP_OPS; a test holds them equal),
# and what none of them took.
PARTS = (
    "forward",
    "backward_da",
    "backward_db",
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
    "other",
)
PART_LABELS = {"forward": "forward", "backward_da": "backward dA", "backward_db": "backward dB"}


@dataclass(frozen=True)
class Stack:
    """One stacked bar: a cell's step split into its parts (shares of 1), with each part's
    Amdahl bound (unknown: None)."""

    label: str
    step_ms: float
    shares: dict[str, float]
    bounds: dict[str, float | None]


def share_chart(name: str, title: str, stacks: Sequence[Stack]) -> Chart:
    """Each kernel's share of the step as stacked horizontal bars, one segment per part."""
    rows: list[Row] = []
    titles: dict[str, str] = {}
    with _drawing() as new:
        figure = new(6.4, 0.45 * max(len(stacks), 1) + 1.4)
        axes = figure.add_subplot()
        n = 0
        # Only the parts some stack has: a run before version 6 timed no op apart.
        parts = [p for p in PARTS if any(p in s.shares for s in stacks)]
        labelled: set[str] = set()
        for y, stack in enumerate(stacks):
            left = 0.0
            drawn = 0
            for colour, part in zip(PART_COLOURS, PARTS, strict=True):
                share = stack.shares.get(part)
                if not drawable(share):
                    continue
                shown = PART_LABELS.get(part, part)
                (patch,) = axes.barh(
                    [y], [share], left=left, color=colour, label=shown if part not in labelled else None, height=0.6
                )
                labelled.add(part)
                patch.set_gid(f"{name}-mark-{n}")
                titles[f"{name}-mark-{n}"] = f"{stack.label}: {shown} {100 * share:.1f}%"
                n += 1
                drawn += 1
                left += share
            cells = [stack.label, number(stack.step_ms)]
            for part in parts:
                share = stack.shares.get(part)
                bound = stack.bounds.get(part)
                cells.append("unknown" if share is None else f"{100 * share:.1f}%")
                cells.append("unknown" if bound is None else f"{bound:.2f}x")
            rows.append(Row(cells, drawn))
        axes.set_yticks(range(len(stacks)), [_text(s.label) for s in stacks])
        axes.invert_yaxis()
        axes.set_xlim(0, 1)
        axes.set_xlabel("share of the step")
        if stacks:
            axes.legend(fontsize=TEXT_PT, frameon=False, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
        _fit(figure, [label(s.label) for s in stacks])
        svg = _svg(figure, titles)
    headers = ["config / backend", "step ms"]
    for part in parts:
        headers += [PART_LABELS.get(part, part), "Amdahl bound"]
    return Chart(name, title, svg, headers, rows)


@dataclass(frozen=True)
class Point:
    """One run's value of one cell, in a history."""

    series: str  # config / backend
    run: str  # the run's label
    value: float
    low: float | None
    high: float | None


HISTORY_MAX_INCHES = 11.0  # a history as wide as the page's column at 1,280: more runs crowd it, not widen it


def history_chart(
    name: str,
    title: str,
    unit: str,
    runs: Sequence[str],
    points: Sequence[Point],
    *,
    order: Sequence[str] = (),
    series_header: str = "config / backend",
) -> Chart:
    """Each cell across the runs, oldest first: one line per cell, one marked point per run. A
    cell is ``config / backend`` (a colour per backend, `palette` of ``order``, and a line style per
    config) or an arm's name alone (``series_header`` then names it so in the table)."""
    series = list(dict.fromkeys(p.series for p in points))
    values = [v for p in points for v in (p.value, p.low, p.high) if drawable(v)]
    log = needs_log(values)
    rows: list[Row] = []
    titles: dict[str, str] = {}
    of: dict[str, str] = {}
    # a colour per backend and a line style per config, so that 16 cells stay apart
    backends = list(dict.fromkeys(s.rpartition(" / ")[2] for s in series))
    configs = list(dict.fromkeys(s.rpartition(" / ")[0] for s in series))
    colour_of = palette(order, backends)
    legend_chars = max((len(label(s)) for s in series), default=0)
    legend_room = legend_chars * LEGEND_CHAR_PX + LEGEND_PAD_PX if series else 0
    with _drawing() as new:
        figure = new(min(max(6.0, 0.45 * len(runs) + 3.5), HISTORY_MAX_INCHES) + legend_room / 100, 3.8)
        axes = figure.add_subplot()
        n = 0
        for cell in series:
            config, _, backend = cell.rpartition(" / ")
            colour = colour_of[backend]
            style = LINE_STYLES[configs.index(config) % len(LINE_STYLES)]
            mine = [p for p in points if p.series == cell]
            drawn = [(runs.index(p.run), p) for p in mine if drawable(p.value)]
            axes.plot(
                [x for x, _ in drawn],
                [p.value for _, p in drawn],
                color=colour,
                linestyle=style,
                linewidth=1,
                label=_text(cell),
            )
            for x, p in drawn:
                yerr: Any = None
                if p.low is not None and p.high is not None and _whiskers(p.low, p.high):
                    yerr = _reach(p.value, p.low, p.high)
                container = axes.errorbar([x], [p.value], yerr=yerr, fmt="o", color=colour, markersize=4, capsize=2)
                container.lines[0].set_gid(f"{name}-mark-{n}")
                titles[f"{name}-mark-{n}"] = f"{p.run}: {cell} {number(p.value)}"
                of[f"{name}-mark-{n}"] = backend
                n += 1
            for p in mine:
                rows.append(Row([p.run, cell, number(p.value), number(p.low), number(p.high)], int(drawable(p.value))))
        # upright labels stop fitting side by side at about eight runs: then they stand on end
        lean = 20 if len(runs) <= 8 else 90
        axes.set_xticks(
            range(len(runs)),
            [_text(r.split("/")[-1]) for r in runs],
            rotation=lean,
            ha="right" if lean < 90 else "center",
        )
        axes.set_xlim(-0.3, len(runs) - 0.7)
        axes.set_ylabel(_text(unit) + (" (log scale)" if log else ""))
        if log:
            axes.set_yscale("log")
            _plain_log_ticks(axes)
        if series:
            axes.legend(fontsize=TEXT_PT, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
        _fit(figure, legend_px=legend_room)
        svg = _svg(figure, titles, of)
    notes = [
        "Logarithmic scale: the values span more than 10x." if log else "",
        _undrawn([p.value for p in points]),
    ]
    headers = ["run", series_header, unit, "95% CI low", "95% CI high"]
    return Chart(name, title, svg, headers, rows, " ".join(n for n in notes if n))


def _plain_log_ticks(axes: Any) -> None:
    """A log axis's ticks as plain numbers (0.2, 6, 1,000), not matplotlib's 2×10⁻¹: the
    numbers the chart's table gives. Minor ticks are labelled where matplotlib would label
    them (an axis spanning few decades), and only there."""
    from matplotlib.ticker import FuncFormatter, LogFormatter

    class Plain(LogFormatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return number(x) if super().__call__(x, pos) else ""

    axes.yaxis.set_major_formatter(FuncFormatter(lambda x, _: number(x)))
    axes.yaxis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


LEGEND_CHAR_PX = 8.0  # a character of a legend at TEXT_PT (measured at 8 points: 13 take 91 px)
LEGEND_PAD_PX = 50  # its colour patch, the gaps and the figure's edge


def _fit(figure: Figure, labels: Sequence[str] = (), legend_px: float = 0) -> None:
    """Margins that hold the labels. ``tight_layout`` measured every text twice and cost about
    half of each chart's time, so the margins are set from the y labels' lengths instead
    (``labels``: those of a categorical y axis; numbers otherwise), and from the longest entry
    of a legend on the right (``legend_px`` wide)."""
    axes = figure.axes[0]
    width, height = figure.get_size_inches() * figure.dpi
    widest = max((len(t) for t in labels), default=6)
    left = (widest * 6.0 + 36) / width  # about 6 px a character at 9 pt, and the axis label
    lean = max((t.get_rotation() for t in axes.get_xticklabels()), default=0)
    rotated = bool(lean)
    longest = max((len(t.get_text()) for t in axes.get_xticklabels()), default=0)
    # a label standing on end needs its length below the axis (about 7.5 px a character at 9 pt)
    bottom = (max(80, longest * 7.5 * math.sin(math.radians(lean)) + 30) if rotated else 42) / height
    if rotated:
        left = max(left, 110 / width)  # the first label leans left, under the axis
    right = 0.97
    if legend_px:  # a legend of its own measure (``legend_px`` wide) beside the plot
        right = 1 - legend_px / width
    figure.subplots_adjust(left=min(left, 0.45), right=right, bottom=bottom, top=1 - 30 / height)
