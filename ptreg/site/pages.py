"""What each page of the site shows, assembled from the views: the index (every attempt, the
streaks, the conditions false now, the broken records), a dossier per attempt, a page per run,
a page per lineage and a page per frozen evaluator. Each function returns the template's
context; nothing here writes a file."""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.stats import center_interval
from ..engine.workloads import workload_named
from ..engine.workloads.arms import declared, intervals_over
from ..engine.workloads.base import BackendsWorkload
from ..errors import PtregError
from ..records.attempt import Attempt, RunRef
from ..records.evaluator import AnySpec, ArmsSpec
from ..records.ledger import STATUSES
from ..records.refs import EVALUATOR_REF_PATTERN, ID_PATTERN, RUN_ID_PATTERN
from ..records.run_results import INTERVALS_FROM_VERSION, RunResults
from ..store.evaluator_files import check_file
from ..store.runs import read_environment, run_folder
from ..text import Table
from ..views.arms_comparison import is_arms_run
from ..views.comparison import arms_history, cell_values, compare, evaluator_history, machine
from ..views.dispositions import decide_disposition
from ..views.dossier import Section, sections
from ..views.dossier_runs import run_lines
from ..views.items import listed_items
from ..views.plans import decide_plan
from ..views.run_report import evidence_line
from ..views.streaks import OK, streak_chains, streaks_of
from .charts import Bar, Chart, Point, Stack, bar_chart, history_chart, share_chart
from .lineage_layout import STATUS_COLOURS, draw
from .sources import Inputs

INDEX = "index.html"


def _bare(pattern: str) -> str:
    return pattern.removeprefix("^").removesuffix("$")


# Every page path the functions below can give, and no other: what a manifest may name.
_PAGE_PATH = re.compile(
    rf"index\.html|(?:attempts|lineage)/{_bare(ID_PATTERN)}\.html"
    rf"|runs/{_bare(ID_PATTERN)}/{_bare(RUN_ID_PATTERN)}\.html|evaluators/{_bare(EVALUATOR_REF_PATTERN)}\.html"
)


def is_page_path(path: object) -> bool:
    """Whether ``path`` is one the site's pages are written at (a manifest naming any other
    was not written by ptreg)."""
    return isinstance(path, str) and _PAGE_PATH.fullmatch(path) is not None


def dossier_path(attempt_id: str) -> str:
    return f"attempts/{attempt_id}.html"


def run_path(attempt_id: str, run_id: str) -> str:
    return f"runs/{attempt_id}/{run_id}.html"


def lineage_path(root_id: str) -> str:
    return f"lineage/{root_id}.html"


def evaluator_path(ref: str) -> str:
    return f"evaluators/{ref}.html"


@dataclass(frozen=True)
class Block:
    """A piece of a section: a paragraph, a list of items, or a table."""

    kind: str  # "p", "ul" or "table"
    text: str = ""
    items: Sequence[str] = ()
    table: Table | None = None


def blocks(lines: Sequence[str | Table]) -> list[Block]:
    found: list[Block] = []
    items: list[str] = []
    for line in lines:
        if isinstance(line, str) and line.startswith("- "):
            items.append(line[2:])
            continue
        if items:
            found.append(Block("ul", items=items))
            items = []
        if isinstance(line, Table):
            # the table's caption says its title: the line before it that says it too goes
            if found and found[-1].kind == "p" and found[-1].text.rstrip(":") == line.title:
                found.pop()
            found.append(Block("table", table=line))
        elif line and not (line.endswith(":") and len(line) < 80):
            found.append(Block("p", text=line))
        elif line:
            found.append(Block("p", text=line.rstrip(":")))
    if items:
        found.append(Block("ul", items=items))
    return found


# ---------------------------------------------------------------------------- index


def index_context(inputs: Inputs, broken_runs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    rows = []
    for s in inputs.summaries:
        runs = inputs.runs(s.id)
        latest = runs[-1] if runs else None
        rows.append(
            {
                "summary": s,
                "href": dossier_path(s.id),
                "latest": latest,
                "latest_href": run_path(s.id, latest[0])
                if latest and (s.id, latest[0]) not in broken_set(broken_runs)
                else None,
            }
        )
    counts = Counter(s.status for s in inputs.summaries)
    chains = streak_chains(inputs.index.links())
    members = sorted({i for _, ids in chains for i in ids})
    found = streaks_of(chains, {a.id: a for a in inputs.index.summaries_of(members)})
    warnings = [s for s in found if s.level != OK]
    false_now = []
    for s in inputs.index.with_condition():
        attempt = inputs.attempt(s.id)
        decided = decide_disposition(inputs.root, attempt) if attempt is not None else None
        if decided is not None and decided.truth is False:
            false_now.append(decided)
    lineages = sorted(
        ((root, len(ids)) for root, ids in inputs.trees.items() if len(ids) > 1), key=lambda t: (-t[1], t[0])
    )
    return {
        "rows": rows,
        "counts": [(status, counts.get(status, 0)) for status in STATUSES],
        "total": len(inputs.summaries),
        "statuses": STATUSES,
        "colours": STATUS_COLOURS,
        "streaks": warnings,
        "false_now": false_now,
        "problems": inputs.problems,
        "broken_runs": broken_runs,
        "lineages": lineages,
        "singletons": sum(1 for ids in inputs.trees.values() if len(ids) == 1),
        "evaluators": sorted(inputs.evaluators),
    }


def _margins(inputs: Inputs, attempt_id: str) -> dict[str, float] | None:
    """The margins of the attempt's analysis plan, which its runs' tables judge against."""
    attempt = inputs.attempt(attempt_id)
    return attempt.plan.margins if attempt is not None and attempt.plan is not None else None


def broken_set(broken_runs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(label.split("/")[0], label.split("/")[-1]) for label, _ in broken_runs}


# ---------------------------------------------------------------------------- the verdict, at the top


def verdict_context(
    inputs: Inputs, attempt: Attempt | None, run: tuple[str, RunResults] | None, dossier: bool, href: str | None = None
) -> dict[str, Any]:
    """What a reader comes for, said before anything else: the attempt's status, what its plan
    decided, and what ``run`` (the latest complete one, on a dossier, whose page is ``href``)
    found: its evidence line, each arm or backend against the baseline or reference. Before a
    conclusion a ``dossier`` decides the plan on the runs so far; a run's page, which is drawn
    from that run alone (docs/site.md), sends the reader there."""
    plan = "no analysis plan"
    if attempt is not None and attempt.plan_decision is not None:
        plan = f"its plan decided {attempt.plan_decision.status}: {attempt.plan_decision.because}"
    elif attempt is not None and attempt.plan is not None and not dossier:
        plan = "not concluded; its dossier decides its plan on the runs so far"
    elif attempt is not None and attempt.plan is not None:
        try:
            outcome = decide_plan(inputs.root, attempt)
        except PtregError as exc:
            plan = f"its plan cannot be decided now: {exc.message}"
        else:
            if outcome is not None:
                plan = f"not concluded; on its runs its plan decides {outcome.status}: {outcome.because}"
    return {
        "status": attempt.status if attempt is not None else "unknown",
        "plan": plan,
        "run": run[0] if run is not None else None,
        "found": evidence_line(run[1]) if run is not None else None,
        "href": href,
    }


def _latest_complete(inputs: Inputs, attempt: Attempt) -> tuple[str, RunResults] | None:
    """The attempt's latest complete run and its results; None when it has none, or when they
    cannot be read (the dossier's run section says why)."""
    for ref in reversed(attempt.runs or ()):
        if ref.status == "complete":
            found = inputs.results(attempt.id, ref.run_id)
            return (ref.run_id, found) if isinstance(found, RunResults) else None
    return None


# ---------------------------------------------------------------------------- dossier


def dossier_context(inputs: Inputs, attempt: Attempt, readable_runs: set[str]) -> dict[str, Any]:
    tree = inputs.trees[inputs.tree_of.get(attempt.id, attempt.id)]
    by_id = {i: a for i in tree if (a := inputs.attempt(i)) is not None}
    by_id[attempt.id] = attempt
    parts: list[Section] = sections(attempt, by_id, inputs.meta, inputs.record_name(attempt.id), inputs.root, attempt)
    lineage = [
        {"id": i, "status": inputs.by_id[i].status, "href": dossier_path(i)}
        for i in sorted(tree, key=lambda i: inputs.by_id[i].ledger)
        if i != attempt.id
    ]
    runs = [
        {
            "id": r.run_id,
            "status": r.status,
            "href": run_path(attempt.id, r.run_id) if r.run_id in readable_runs else None,
        }
        for r in attempt.runs or ()
    ]
    evaluator = attempt.evaluator if attempt.evaluator in inputs.evaluators else None
    latest = _latest_complete(inputs, attempt)
    return {
        "attempt": attempt,
        "sections": [(s.title, blocks(s.lines)) for s in parts],
        "lineage_href": lineage_path(inputs.tree_of.get(attempt.id, attempt.id)),
        "lineage": lineage,
        "runs": runs,
        "evaluator": attempt.evaluator,
        "evaluator_href": evaluator_path(evaluator) if evaluator else None,
        "verdict": verdict_context(inputs, attempt, latest, True, run_path(attempt.id, latest[0]) if latest else None),
    }


# ---------------------------------------------------------------------------- run


ARM_LABELS = ("metric", "arm")


def arm_order(spec: AnySpec) -> list[str]:
    """The order of an evaluator's arms or backends, the baseline first, that gives each its
    colour (`charts.palette`) on every chart of every page drawn from runs under it."""
    return list(dict.fromkeys([spec.baseline, *(spec.arms if isinstance(spec, ArmsSpec) else spec.backends)]))


def arms_run_charts(results: RunResults) -> list[Chart]:
    """A run of arms: per metric, each arm's mean with its 95% interval, titled with the
    metric's direction; then each arm against the baseline, as the metric is compared (a
    difference around 0, a ratio around 1)."""
    spec = results.spec
    assert isinstance(spec, ArmsSpec)
    charts: list[Chart] = []
    order = arm_order(spec)
    for n, (metric, declaration) in enumerate(declared(spec, workload_named(spec.workload), results.cells).items()):
        bars, against = [], []
        over: dict[str, None] = {}  # what the intervals are over (version 8), each said once
        for cell in results.cells:
            summary = (cell.metrics or {}).get(metric)
            versus = (cell.versus or {}).get(spec.baseline, {}).get(metric)
            said = intervals_over(summary, versus if cell.backend != spec.baseline else None)
            if said:
                over[said] = None
            ci = summary.ci if summary is not None else None
            bars.append(
                Bar(
                    metric,
                    cell.backend,
                    summary.mean if summary else None,
                    ci.low if ci else None,
                    ci.high if ci else None,
                )
            )
            if versus is not None and cell.backend != spec.baseline:
                vci = versus.ci
                against.append(
                    Bar(metric, cell.backend, versus.estimate, vci.low if vci else None, vci.high if vci else None)
                )
        if not any(b.value is not None for b in bars):
            continue
        direction = f"{declaration.better} is better"
        said = f"; intervals over {' / '.join(over)}" if over else ""
        title = f"{metric}: each arm's mean, 95% interval ({direction}{said})"
        charts.append(bar_chart(f"metric-{n}", title, declaration.unit, bars, labels=ARM_LABELS, order=order))
        if against:
            if declaration.compare == "ratio":
                title = f"{metric}: each arm over {spec.baseline} ({direction}; 1 is no change)"
                charts.append(
                    bar_chart(
                        f"versus-{n}",
                        title,
                        "ratio (x)",
                        against,
                        reference_line=1.0,
                        labels=ARM_LABELS,
                        order=order,
                    )
                )
            else:
                title = f"{metric}: each arm minus {spec.baseline}, paired ({direction}; 0 is no change)"
                charts.append(
                    bar_chart(
                        f"versus-{n}",
                        title,
                        declaration.unit,
                        against,
                        reference_line=0.0,
                        signed=True,
                        labels=ARM_LABELS,
                        order=order,
                    )
                )
    return charts


def run_charts(results: RunResults) -> list[Chart]:
    """Time per step's worth of work per config and backend with its interval; the speedups over
    the reference and over the baseline with theirs; each kernel's share of the step. A run of
    arms has a chart per metric instead."""
    if is_arms_run(results):
        return arms_run_charts(results)
    charts: list[Chart] = []
    values = cell_values(results)
    # a counted run's values are instructions, drawn as they are; seconds are drawn in ms
    counted = results.counted is not None
    scale = 1 if counted else 1000
    time_bars = []
    for cell in results.cells:
        found = values.get((cell.config, cell.backend))
        if not found:
            time_bars.append(Bar(cell.config, cell.backend, None))
            continue
        # Intervals are part of the record from results_version 3 on (computed from these same
        # repeats); an older run has none, and the page draws none it does not have. An interval
        # needs finite times, too: a time that is not one is a row without a mark.
        has_intervals = results.results_version >= INTERVALS_FROM_VERSION
        adaptive = getattr(results.spec, "target_ci", None) is not None
        ci = center_interval(found, adaptive) if has_intervals and all(map(math.isfinite, found)) else None
        time_bars.append(
            Bar(
                cell.config,
                cell.backend,
                scale * statistics.median(found),
                scale * ci.low if ci else None,
                scale * ci.high if ci else None,
            )
        )
    measured = workload_named(results.spec.workload)
    of = measured.seconds_of if isinstance(measured, BackendsWorkload) else "repeat"
    unit = f"{'instructions' if counted else 'ms'} per {of}"
    what = "Instructions (under valgrind)" if counted else "Time"
    title = f"{what} per step, per config and backend (bar: median; whisker: 95% interval of the typical value)"
    order = arm_order(results.spec)
    charts.append(bar_chart("time", title, unit, time_bars, order=order))
    roles = results.ratio_roles
    for name, title, attr in (
        ("vs-reference", f"Speedup over {roles.reference or 'the reference'} (same run, paired rounds)", "vs_naive"),
        ("vs-baseline", f"Speedup over the baseline, {results.spec.baseline}", "vs_baseline"),
    ):
        bars = []
        for cell in results.cells:
            ratio = getattr(cell, f"{attr}_ratio")
            value = getattr(cell, attr)
            if value is None and ratio is None:
                continue
            median = ratio.median if ratio is not None else value
            low = ratio.ci.low if ratio is not None and ratio.ci is not None else None
            high = ratio.ci.high if ratio is not None and ratio.ci is not None else None
            bars.append(Bar(cell.config, cell.backend, median, low, high))
        if bars:
            charts.append(bar_chart(name, title, "speedup (x)", bars, reference_line=1.0, order=order))
    stacks = []
    for cell in results.cells:
        a = cell.attribution
        if a is None:
            continue
        parts = {"forward": a.forward, "backward_da": a.backward_da, "backward_db": a.backward_db}
        parts.update({str(op): share for op, share in (a.ops or {}).items()})
        parts["other"] = a.other
        stacks.append(
            Stack(
                f"{cell.config} / {cell.backend}",
                a.step_ms,
                {k: v.share for k, v in parts.items()},
                {k: v.amdahl_bound for k, v in parts.items()},
            )
        )
    if stacks:
        charts.append(
            share_chart(
                "shares", "Each kernel's and op's share of the step, and its Amdahl bound (if it took no time)", stacks
            )
        )
    return charts


def run_context(inputs: Inputs, attempt_id: str, run_id: str, results: RunResults) -> dict[str, Any]:
    folder = run_folder(inputs.root, attempt_id, run_id)
    try:
        environment: dict[str, Any] | None = read_environment(inputs.root, folder)
    except PtregError:
        environment = None
    evaluator = results.evaluator if results.evaluator in inputs.evaluators else None
    return {
        "attempt_id": attempt_id,
        "attempt_href": dossier_path(attempt_id),
        "run_id": run_id,
        "results": results,
        "charts": run_charts(results),
        "item_lists": listed_items(results),  # items.html: the items lost and won, per arm and metric
        "details": blocks(run_lines(inputs.root, attempt_id, _ref(results, run_id), _margins(inputs, attempt_id))),
        "machine": machine(environment),
        "evaluator_href": evaluator_path(evaluator) if evaluator else None,
        "verdict": verdict_context(inputs, inputs.attempt(attempt_id), (run_id, results), False),
    }


def _ref(results: RunResults, run_id: str) -> RunRef:
    return RunRef(run_id=run_id, status=results.status, evaluator=results.evaluator)


# ---------------------------------------------------------------------------- lineage


def lineage_context(inputs: Inputs, root_id: str) -> dict[str, Any]:
    members = inputs.trees[root_id]
    drawing = draw(members, inputs.by_id)
    rows = [inputs.by_id[i] for i in sorted(members, key=lambda i: inputs.by_id[i].ledger)]
    return {
        "root": root_id,
        "drawing": drawing,
        "rows": rows,
        "colours": STATUS_COLOURS,
        "dossier": {i: dossier_path(i) for i in members},
    }


# ---------------------------------------------------------------------------- evaluator


def evaluator_context(inputs: Inputs, ref: str, users: dict[str, list[str]]) -> dict[str, Any]:
    """A frozen evaluator: its spec and hash, the attempts and runs under it, each cell's history
    across its complete runs, and the comparison of each run with the one before it."""
    frozen, problem = check_file(inputs.evaluators[ref])
    try:
        rows = evaluator_history(inputs.root, evaluator=ref)
        metric_rows = arms_history(inputs.root, evaluator=ref)
    except PtregError:
        rows, metric_rows = [], []
    runs = list(dict.fromkeys([r.run.label for r in rows] + [m.run for m in metric_rows]))
    points = [Point(f"{r.config} / {r.backend}", r.run.label, 1000 * r.seconds, _ms(r.low), _ms(r.high)) for r in rows]
    charts = []
    order = arm_order(frozen.spec) if frozen else []
    if points:
        title = "Each cell across the complete runs, oldest first"
        charts.append(history_chart("history", title, "ms per step", runs, points, order=order))
    for n, metric in enumerate(dict.fromkeys(m.metric for m in metric_rows)):
        mine = [m for m in metric_rows if m.metric == metric]
        title = f"{metric} of each arm across the complete runs, oldest first ({mine[0].better} is better)"
        # a run of arms has no configs (the engine gives each arm one, "all"): the arm alone is the cell
        arm_points = [Point(m.arm, m.run, m.mean, m.low, m.high) for m in mine]
        charts.append(
            history_chart(f"history-{n}", title, mine[0].unit, runs, arm_points, order=order, series_header="arm")
        )
    comparisons: list[dict[str, Any]] = []
    for a, b in itertools.pairwise(runs):
        try:
            found = compare(inputs.root, a, b)
        except PtregError as exc:
            comparisons.append({"a": a, "b": b, "error": exc.message, "cells": []})
            continue
        comparisons.append(
            {
                "a": a,
                "b": b,
                "error": None,
                "same_machine": found.same_machine,
                "machine_differences": found.machine_differences,
                "method": found.method,
                "cells": found.cells,
                "metrics": found.metrics,
                "slower": found.moved("slower") + found.moved("worse"),
                "faster": found.moved("faster") + found.moved("better"),
            }
        )
    run_links = {label: run_path(*label.split("/")) for label in users.get("runs", [])}
    return {
        "ref": ref,
        "frozen": frozen,
        "problem": problem,
        "spec": {k: _shown(v) for k, v in frozen.spec.model_dump(mode="json", exclude_none=True).items()}
        if frozen
        else None,
        "attempts": [(i, dossier_path(i)) for i in users.get("attempts", []) if i in inputs.by_id],
        "runs": run_links,
        "history": charts,
        "comparisons": comparisons,
    }


def _shown(value: Any) -> str:
    """A spec's value as a person reads it: lists joined, mappings as key value pairs."""
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items())
    return str(value)


def _ms(value: float | None) -> float | None:
    return None if value is None else 1000 * value
