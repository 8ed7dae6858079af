"""Freezing an evaluator: the spec of how an attempt will be measured, fixed before any number
is seen, under the identity this engine's version gives it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..engine.plan import EVALUATOR_VERSION
from ..records.evaluator import FrozenEvaluator, frozen_from_spec, parse_spec
from ..store.directory import load_meta
from ..store.evaluators import store_frozen
from ..store.jsonio import read_json


@dataclass
class Frozen:
    evaluator: FrozenEvaluator
    path: Path
    created: bool  # False when the identical evaluator was frozen already


def freeze(root: Path, spec_path: Path) -> Frozen:
    """Store the spec under its identity; freezing an identical spec again changes nothing."""
    load_meta(root)  # only into a real registry
    spec = parse_spec(read_json(spec_path), str(spec_path))
    frozen = frozen_from_spec(spec, EVALUATOR_VERSION)
    path, created = store_frozen(root, frozen)
    return Frozen(frozen, path, created)
