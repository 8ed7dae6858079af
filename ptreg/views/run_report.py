"""Reading a run's results: the tables people look at, and the evidence line for the record.

Parity is the same for every workload; the rest of the tables and sentences come from the
workload the run measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from ..engine.workloads import workload_named
from ..engine.workloads.arms import ArmsWorkload
from ..records.configs import CONFIGS
from ..records.evaluator import EvaluatorSpec
from ..records.run_results import RunResults, StageRecord
from ..text import Table


def parity_table(results: RunResults) -> Table:
    rows = [[p.backend, "passed" if p.passed else "FAILED", p.summary] for p in results.parity]
    return Table("Parity (before timing)", rows, ["backend", "parity", "finding"], notes=("finding",))


def model_line(results: RunResults) -> str | None:
    """The size of each model config a run of backends measured, e.g. 'small 0.37M parameters,
    1,024 tokens per step'; None for a run of arms."""
    names = getattr(results.spec, "configs", None)
    if workload_named(results.spec.workload).kind != "backends" or not names:
        return None
    sizes = [
        f"{c.name} {c.parameters / 1e6:.2f}M parameters, {c.tokens_per_step:,} tokens per step"
        for c in (CONFIGS[n] for n in names if n in CONFIGS)
    ]
    return "Model: " + "; ".join(sizes) if sizes else None


def tables(results: RunResults, margins: Mapping[str, float] | None = None) -> list[Table]:
    """Every table that applies to this run, parity first; the machines last, when the cells
    ran on the nodes of a cluster. ``margins``: the attempt's analysis plan's, which a run of arms
    judges each metric against."""
    workload = workload_named(results.spec.workload)
    checked = [parity_table(results)] if workload.kind == "backends" else []  # arms have no parity to check
    own = workload.tables(results, margins) if isinstance(workload, ArmsWorkload) else workload.tables(results)
    found = [*checked, *own]
    if results.revisions:
        found.append(revisions_table(results))
    stages = stages_table(results)
    if stages.rows:
        found.append(stages)
    machines = machines_table(results)
    return [*found, machines] if machines.rows else found


def revisions_table(results: RunResults) -> Table:
    """The commit each arm that names a git revision ran at, and how many of the checkout's
    files its command ran (their digests are in the results); for backends taken at revisions,
    the commit of each revision and how many files its backends could import there."""
    rows = [
        [arm, found.revision, found.commit[:12], str(len(found.code))]
        for arm, found in sorted((results.revisions or {}).items())
    ]
    if isinstance(results.spec, EvaluatorSpec):
        title = "Revisions: each backend taken at a revision was imported from a checkout of its commit"
        return Table(title, rows, ["label", "revision", "commit", "code files"], text=("revision",))
    title = "Revisions: each arm ran in a checkout of its commit"
    return Table(title, rows, ["arm", "revision", "commit", "code files"], text=("revision",))


SEEDS_SHOWN = 6
DIGEST_SHOWN = 12
ARTIFACTS_SHOWN = 3


def stages_table(results: RunResults) -> Table:
    """For a staged command: each stage of each arm, the seeds it ran for, how often it ran and
    was reused, its median time, its peak memory and its artifacts. No rows for any other run."""
    rows = []
    for cell in results.cells:
        by_stage: dict[str, list[tuple[int, StageRecord]]] = {}
        for sample in cell.metric_samples or []:
            for record in sample.stages or []:
                by_stage.setdefault(record.name, []).append((sample.seed, record))
        for name, found in by_stage.items():
            records = [r for _, r in found]
            ran = [r for r in records if not r.reused]
            walls = [r.wall_seconds for r in ran if r.wall_seconds is not None]
            peaks = [r.peak_memory_mb for r in ran if r.peak_memory_mb is not None]
            failed = sum(r.problem is not None for r in records)
            reused = len(records) - len(ran)
            rows.append(
                [
                    name,
                    cell.backend,
                    records[0].repeat,
                    _seeds_text(sorted({seed for seed, _ in found})),
                    str(len(ran)) + (f" ({failed} failed)" if failed else ""),
                    str(reused) if reused else "",
                    f"{statistics.median(walls):.3g}" if walls else "unknown",
                    f"{max(peaks):.1f}" if peaks else "unknown",
                    _artifacts_text(records),
                ]
            )
    title = (
        "Stages: once stages run before their seed's repeats, each stages in every repeat (a repeat's own time is "
        "its each stages' sum, its memory their peak)"
    )
    headers = ["stage", "arm", "repeat", "seeds", "ran", "reused", "median wall s", "peak MB", "artifacts"]
    return Table(title, rows, headers, text=("artifacts",))


def _seeds_text(seeds: list[int]) -> str:
    shown = ", ".join(str(s) for s in seeds[:SEEDS_SHOWN])
    return shown + (f", ... ({len(seeds)})" if len(seeds) > SEEDS_SHOWN else "")


def _artifacts_text(records: list[StageRecord]) -> str:
    """The outputs the stage's records name and their digests, short: the one path and digest
    when every record saw the same, else how many paths and the first few digests."""
    digests = {(path, digest) for r in records for path, digest in (r.artifacts or {}).items()}
    if not digests:
        return ""
    if len(digests) == 1:
        path, digest = next(iter(digests))
        return f"{path} {digest[:DIGEST_SHOWN]}"
    paths = {path for path, _ in digests}
    shown = sorted({digest[:DIGEST_SHOWN] for _, digest in digests})
    more = f", ... ({len(shown)})" if len(shown) > ARTIFACTS_SHOWN else ""
    return f"{len(paths)} path(s): {', '.join(shown[:ARTIFACTS_SHOWN])}{more}"


def machines_table(results: RunResults) -> Table:
    """Which node, and which machine (its fingerprint), each config ran on. A config's cells
    always share one node, so its ratios are within one machine; configs on unlike machines
    are said to be so, since their absolute times are not comparable."""
    seen: dict[str, dict[str, object]] = {}
    for cell in results.cells:
        node = (cell.worker or {}).get("node")
        if isinstance(node, dict):
            seen.setdefault(cell.config, node)
    rows = [
        [config, *(str(node.get(key) or "unknown") for key in ("id", "address", "fingerprint"))]
        for config, node in seen.items()
    ]
    prints = {row[3] for row in rows}
    if len(prints) > 1 or "unknown" in prints:
        title = (
            f"Machines: the configs ran on {len(prints)} unlike (or unknown) machines; each ratio is within one "
            "machine, and absolute times are comparable only between configs of the same machine"
        )
    else:
        title = "Machines: every config ran on like machines (one fingerprint)"
    return Table(title, rows, ["config", "node", "address", "machine"], text=())


def verdict(results: RunResults) -> list[str]:
    return workload_named(results.spec.workload).verdict(results)


def evidence_line(results: RunResults) -> str:
    """One sentence per backend (or arm) in the seed's style, as its workload words it; a run
    that measured nothing says so, and why."""
    parts = workload_named(results.spec.workload).evidence(results)
    run = f"Run {results.run_id}" if results.run_id else "Bench"
    head = f"{run} ({results.evaluator or 'ad hoc'}, {results.status}): "
    if results.inputs_changed is not None:  # measured, maybe, but not under the evaluator as frozen
        measured = "; ".join(parts) + ". " if parts else ""
        return head + f"{measured}It decides nothing: inputs changed during the run ({results.inputs_changed})."
    if not parts:
        return head + "nothing was measured" + (f" ({results.reason})" if results.reason else "") + "."
    return head + "; ".join(parts) + "."
