"""The stages of a command: their form in a spec, the placeholders of their command lines, and
when a ``once`` stage need not run again (docs/workloads.md#stages).

A spec gives ``command`` (one command line, run each repeat) or ``stages``: steps run ``once``
per arm and seed before that seed's repeats (training a model; its ``outputs`` digested as
artifacts), or ``each`` repeat (what is measured). ``command.py`` runs them.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import PtregError
from ...records.evaluator import ArmsSpec, canonical_json
from ...records.refs import ID_MAX_LENGTH, ID_RE
from ...records.run_results import StageRecord
from ...store.input_digests import digest_inputs
from ...text import shorten

MAX_ARGV = 256
MAX_ARG_CHARS = 4096
ARM, SEED = "arm", "seed"  # the placeholders ptreg fills in itself
ONCE, EACH = "once", "each"
STAGE_FIELDS = ("name", "command", "outputs", "repeat")
MAX_STAGES = 16
MAX_OUTPUTS = 64


def placeholders(argv: list[str]) -> list[str]:
    """The ``{name}`` fields of a command line, in order; ValueError for anything else in braces."""
    names = []
    for arg in argv:
        for _, name, spec, conversion in string.Formatter().parse(arg):
            if name is None:
                continue
            if spec or conversion or not name.isidentifier() or not name.isascii():
                raise ValueError(f"{{{name}}} is not a plain {{name}}")
            names.append(name)
    return names


def command_line(argv: list[str], params: dict[str, str], seed: int, arm: str | None = None) -> list[str]:
    """The argv with the arm's parameters, its name (``{arm}``, unless it gives a parameter of
    that name) and the seed put in."""
    values = {**({} if arm is None else {ARM: arm}), **params, SEED: str(seed)}
    return [arg.format_map(values) for arg in argv]


@dataclass(frozen=True)
class Stage:
    """One step of a staged command: ``once`` per arm and seed, before that seed's repeats
    (training a model, building a cache), or ``each`` repeat (what is measured)."""

    name: str
    argv: list[str]
    outputs: list[str]
    repeat: str


def stages_of(settings: dict[str, Any]) -> list[Stage]:
    """The stages a checked spec runs: its ``stages``, or its ``command`` as one ``each`` stage."""
    if "stages" not in settings:
        return [Stage("command", list(settings["command"]), [], EACH)]
    return [Stage(s["name"], list(s["command"]), list(s.get("outputs", [])), s["repeat"]) for s in settings["stages"]]


def stage_problem(settings: dict[str, Any]) -> str | None:
    """Why a spec's ``command`` or ``stages`` is not one ptreg can run, in one line, or None."""
    if ("command" in settings) == ("stages" in settings):
        return "give command (one command line) or stages (a list of them), not both and not neither"
    if "command" in settings:
        return _argv_problem(settings["command"], "command")
    stages = settings["stages"]
    if not isinstance(stages, list) or not 0 < len(stages) <= MAX_STAGES:
        return f"stages must be a list of 1 to {MAX_STAGES} stages"
    names: set[str] = set()
    seen_each = False
    for index, stage in enumerate(stages):
        if not isinstance(stage, dict):
            return f"stages[{index}] must be an object with name, command, repeat and (once) outputs"
        unknown = sorted(set(stage) - set(STAGE_FIELDS))
        if unknown:
            return f"stages[{index}] has the field {shorten(str(unknown[0]), 40)}, not one of {', '.join(STAGE_FIELDS)}"
        name = stage.get("name")
        if not isinstance(name, str) or len(name) > ID_MAX_LENGTH or not ID_RE.fullmatch(name):
            return f"stages[{index}] needs a name: a slug (lower-case letters, digits and '-')"
        if name in names:
            return f"stage {name} is named twice"
        names.add(name)
        if stage.get("repeat") not in (ONCE, EACH):
            return f"stage {name}: repeat must be 'once' (per arm and seed) or 'each' (every repeat)"
        if stage["repeat"] == ONCE and seen_each:
            return f"stage {name} is once after an each stage: once stages come first, as they run"
        seen_each = seen_each or stage["repeat"] == EACH
        problem = _argv_problem(stage.get("command"), f"stage {name}: command")
        if problem is not None:
            return problem
        outputs = stage.get("outputs", [])
        if outputs and stage["repeat"] == EACH:
            return f"stage {name}: outputs are recorded of once stages only"
        if not isinstance(outputs, list) or len(outputs) > MAX_OUTPUTS or not all(isinstance(o, str) for o in outputs):
            return f"stage {name}: outputs must be a list of at most {MAX_OUTPUTS} paths"
        if len(set(outputs)) != len(outputs):
            return f"stage {name}: outputs names a path twice"
        for output in outputs:
            problem = output_problem(output)
            if problem is not None:
                return f"stage {name}: output {shorten(output, 80)} {problem}"
    if not seen_each:
        return "stages has no each stage: nothing would be measured in a repeat"
    return None


def _argv_problem(argv: Any, what: str) -> str | None:
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return f"{what} must be a non-empty list of strings (an argv, run without a shell)"
    if len(argv) > MAX_ARGV or any(len(a) > MAX_ARG_CHARS or "\x00" in a for a in argv):
        return f"{what} has more than {MAX_ARGV} arguments, one over {MAX_ARG_CHARS} characters, or a NUL"
    return None


def output_problem(path: str) -> str | None:
    """Why an output path (as written, or filled in) does not name a place inside the project
    root, or None."""
    if not path or len(path) > MAX_ARG_CHARS or path.startswith("/") or "\\" in path:
        return "must be a relative path inside the project root"
    if any(ord(c) < 0x20 for c in path):
        return "holds a control character"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "must be a relative path without '.', '..' or empty parts"
    return None


# Outputs of once stages filled in over every arm and seed, at most: each is kept out of the
# code a command runs, and that is looked up for every path the command names.
MAX_FILLED_OUTPUTS = 10_000


def filled_outputs(spec: ArmsSpec) -> dict[str, str]:
    """Every output of the spec's once stages, filled in for each arm and seed, with the stage
    that writes it. ValueError when they are more than ptreg keeps track of."""
    found: dict[str, str] = {}
    every_seed = spec.seed_values()
    for stage in stages_of(spec.settings):
        seeds = every_seed if SEED in placeholders(stage.outputs) else every_seed[:1]
        for arm, params in spec.arms.items():
            for seed in seeds:
                found.update(dict.fromkeys(command_line(stage.outputs, params, seed, arm), stage.name))
                if len(found) > MAX_FILLED_OUTPUTS:
                    raise ValueError(
                        f"stage {stage.name}: its outputs filled in for every arm and seed are more than the "
                        f"{MAX_FILLED_OUTPUTS:,} ptreg keeps track of"
                    )
    return found


def not_frozen(spec: ArmsSpec) -> dict[str, str]:
    """The spec's ``not_frozen``, and every output of its once stages: what a stage writes is
    its artifact, digested after it runs, never code the evaluator freezes."""
    written = {path: f"written by stage {stage}" for path, stage in filled_outputs(spec).items()}
    return {**written, **(spec.not_frozen or {})}


def outputs_problem(spec: ArmsSpec, stage: Stage) -> str | None:
    """Why an output, filled in for some arm and seed, would leave the project root; or None."""
    if not stage.outputs:
        return None
    seeds = spec.seed_values() if SEED in placeholders(stage.outputs) else spec.seed_values()[:1]
    for arm, params in spec.arms.items():
        for seed in seeds:
            for output in command_line(stage.outputs, params, seed, arm):
                problem = output_problem(output)
                if problem is not None:
                    return f"stage {stage.name}: output {shorten(output, 80)} (arm {arm}, seed {seed}) {problem}"
    return None


@dataclass
class Written:
    """A repeat's metrics and items as its stages write them, each metric by one stage only."""

    values: dict[str, float] = field(default_factory=dict)
    items: dict[str, dict[str, float]] = field(default_factory=dict)
    by: dict[str, str] = field(default_factory=dict)  # which stage wrote each metric

    def add(self, stage: str, values: dict[str, float], items: dict[str, dict[str, float]] | None) -> str | None:
        """Take a stage's metrics and items; the problem when another stage wrote one of them."""
        for name in [*values, *(items or {})]:
            if self.by.get(name, stage) != stage:
                return f"stage {stage} wrote {name}, which stage {self.by[name]} wrote too"
        for name in [*values, *(items or {})]:
            self.by[name] = stage
        self.values.update(values)
        self.items.update(items or {})
        return None


def stage_key(
    argv: list[str], arm: str, seed: int, outputs: list[str], inputs: dict[str, str], upstream: list[dict[str, str]]
) -> str:
    """What a once stage's result depends on, as one sha256: its command line, the arm and seed
    it runs for (its environment names them), its outputs, the inputs' digests and the artifacts
    of the once stages before it."""
    body = {"argv": argv, "arm": arm, "seed": seed, "outputs": outputs, "inputs": inputs, "upstream": upstream}
    return hashlib.sha256(canonical_json(body)).hexdigest()


class OnceRecords:
    """The once-stage records one arm's worker stands on: those it ran or reused, by stage and
    seed, and the earlier ones handed to it (a resumed run's), each believed only while the
    disk agrees with its artifacts."""

    def __init__(self, root: Path, inputs: list[str], earlier: list[StageRecord]):
        self.root, self.input_paths = root, inputs
        self.standing: dict[tuple[str, int], StageRecord] = {}
        self.earlier = [r for r in earlier if r.repeat == ONCE and r.problem is None]
        self._inputs: dict[str, str] | None = None

    def standing_for(self, name: str, seed: int, key: str, outputs: list[str]) -> tuple[StageRecord, bool] | None:
        """The record that stands in for running the stage, and whether it is new to this
        repeat (reused from an earlier one); None when the stage must run."""
        standing = self.standing.get((name, seed))
        # a failed once stage fails its seed's repeats; a good one stands while its artifacts do
        if (
            standing is not None
            and standing.key == key
            and (standing.problem is not None or self.still(standing, outputs))
        ):
            return standing, False
        for earlier in self.earlier:
            if earlier.name == name and earlier.key == key and self.still(earlier, outputs):
                reused = StageRecord(
                    name=name,
                    repeat=ONCE,
                    key=key,
                    artifacts=earlier.artifacts,
                    values=earlier.values,
                    items=earlier.items,
                    reused=True,
                )
                self.keep(seed, reused)
                return reused, True
        return None

    def keep(self, seed: int, record: StageRecord) -> None:
        self.standing[record.name, seed] = record

    def inputs(self) -> dict[str, str]:
        """The spec's inputs by content, taken once: ``ptreg run`` checks them against the frozen
        digests before and after measuring."""
        if self._inputs is None:
            self._inputs = digest_inputs(self.root, self.input_paths)
        return self._inputs

    def still(self, found: StageRecord, outputs: list[str]) -> bool:
        """Whether a once stage's record names exactly these outputs and every one still has the
        content it recorded (a record handed in is believed no further than the disk agrees)."""
        if found.problem is not None or found.artifacts is None or sorted(found.artifacts) != sorted(outputs):
            return False
        try:
            return digest_inputs(self.root, outputs, what="output") == found.artifacts
        except PtregError:
            return False
