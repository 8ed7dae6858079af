"""Reading a run's results: the tables people look at, and the evidence line for the record.

Parity is the same for every workload; the rest of the tables and sentences come from the
workload the run measured.
"""

from __future__ import annotations

from ..engine.workloads import workload_named
from ..records.run import RunResults
from ..text import Table


def parity_table(results: RunResults) -> Table:
    rows = [[p.backend, "passed" if p.passed else "FAILED", p.summary] for p in results.parity]
    return Table("Parity (before timing)", rows, ["backend", "parity", "finding"], text=("finding",))


def tables(results: RunResults) -> list[Table]:
    """Every table that applies to this run, parity first."""
    return [parity_table(results), *workload_named(results.spec.workload).tables(results)]


def verdict(results: RunResults) -> list[str]:
    return workload_named(results.spec.workload).verdict(results)


def evidence_line(results: RunResults) -> str:
    """One sentence per backend in the seed's style; a run that measured nothing says so, and why."""
    workload = workload_named(results.spec.workload)
    reference = results.ratio_roles.reference
    parts = []
    for backend in results.spec.backends:
        mine = [c for c in results.cells if c.backend == backend and c.status == "measured"]
        values = [(c.config, value) for c in mine if (value := workload.headline(c)) is not None]
        if not values:
            continue
        reached = ", ".join(f"{config} {value:,.1f}" for config, value in values)
        sentence = f"{backend} reached {reached} {workload.unit}"
        speedups = [c.vs_naive for c in mine if c.vs_naive is not None]
        if backend != reference and speedups:
            low, high = min(speedups), max(speedups)
            span = f"{low:.2f}x" if abs(high - low) < 0.005 else f"{low:.2f}-{high:.2f}x"
            sentence += f", or about {span} over {reference}"
        parts.append(sentence)
    run = f"Run {results.run_id}" if results.run_id else "Bench"
    head = f"{run} ({results.evaluator or 'ad hoc'}, {results.status}): "
    if not parts:
        return head + "nothing was measured" + (f" ({results.reason})" if results.reason else "") + "."
    return head + "; ".join(parts) + "."
