"""Freezing an evaluator: the spec of how an attempt will be measured, fixed before any number
is seen, under the identity this engine's version gives it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..engine.plan import EVALUATOR_VERSION
from ..engine.workloads.registry import require_measurable
from ..records.evaluator import ArmsSpec, FrozenEvaluator, frozen_from_spec, parse_spec
from ..store.directory import load_meta
from ..store.evaluators import store_frozen
from ..store.inputs import digest_inputs, project_root
from ..store.jsonio import read_json
from ..store.trust import trust


@dataclass
class Frozen:
    evaluator: FrozenEvaluator
    path: Path
    created: bool  # False when the identical evaluator was frozen already


def freeze(root: Path, spec_path: Path) -> Frozen:
    """Store the spec under its identity, with the digests of the inputs it reads; freezing an
    identical spec over identical inputs again changes nothing. Freezing an evaluator whose
    workload runs code is this user's consent to run it (``store/trust.py``)."""
    load_meta(root)  # only into a real registry
    spec = parse_spec(read_json(spec_path), str(spec_path))
    workload = require_measurable(spec, str(spec_path))
    inputs = digest_inputs(project_root(root), spec.inputs) if isinstance(spec, ArmsSpec) and spec.inputs else None
    frozen = frozen_from_spec(spec, EVALUATOR_VERSION, inputs)
    path, created = store_frozen(root, frozen)
    if workload.runs_code:
        trust(frozen.sha256)
    return Frozen(frozen, path, created)
