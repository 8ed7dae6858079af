"""The work of one tinygpt-train step, part by part: its one home is ``ptreg.records.step_work``
(the engine records each part's floor from it); the benchmarks import it from here by name."""

from ptreg.records.step_work import (
    FLOAT,
    KERNEL_METHODS,
    PARTS,
    TOKEN,
    Term,
    Work,
    causal_scores,
    kernel_terms,
    op_terms,
    step_work,
    terms,
)

__all__ = [
    "FLOAT",
    "KERNEL_METHODS",
    "PARTS",
    "TOKEN",
    "Term",
    "Work",
    "causal_scores",
    "kernel_terms",
    "op_terms",
    "step_work",
    "terms",
]
