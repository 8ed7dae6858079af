"""Reading a run's results: the tables people look at, and the evidence line for the record.

Parity is the same for every workload; the rest of the tables and sentences come from the
workload the run measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.workloads import workload_named
from ..engine.workloads.arms import ArmsWorkload
from ..records.configs import CONFIGS
from ..records.evaluator import EvaluatorSpec
from ..records.run_results import RunResults
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
