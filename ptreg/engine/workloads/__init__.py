"""The workloads a cell can measure, found through the ``ptreg.workloads`` entry points
(``registry.py``). ptreg's own are modules here: ``kernels`` (each kernel alone at a training
step's layer shapes), ``training`` (whole training steps of the tiny GPT, with per-kernel
attribution) and ``command`` (any command line, its arms compared on declared metrics), with
``arms.py`` the base of every workload that compares arms.
"""

from __future__ import annotations

from .discovery import workload_named

__all__ = ["workload_named"]
