"""The workloads a cell can measure, by the name an evaluator gives them.

Each is one module: ``kernels`` (each kernel alone at a training step's layer shapes) and
``training`` (whole training steps of the tiny GPT, with per-kernel attribution).
"""

from __future__ import annotations

from .base import Workload
from .kernels import KernelsWorkload
from .training import TrainingWorkload

WORKLOADS: dict[str, Workload] = {w.name: w for w in (KernelsWorkload(), TrainingWorkload())}


def workload_named(name: str) -> Workload:
    """The workload an evaluator names; every name the spec format allows has one."""
    return WORKLOADS[name]
