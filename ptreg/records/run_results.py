"""A run's results: the record of one measurement, as ``results.json`` holds it.

A run is a record like an attempt: every sample, the summaries, parity and attribution, the
evaluator, the command line, times and status. Version 2 also names the backends the ratios
are taken over (``roles``); version 1 files predate that and used ``naive`` and
``numpy-blas`` by name. Version 3 takes repeats in interleaved rounds (``rounds`` records the
order of each) and carries 95% intervals: of each cell's center, and of each ratio, computed
from the repeats paired by round. Version 4 adds runs of arms on declared metrics (a command's
alternatives, or any workload plugin's): each repeat's metric values and per-item results, a
summary per metric, and every pair of arms compared on every metric. Version 5 records the
identity of the code measured (``code``), so that a comparison across runs takes as history
only runs of the same code. Version 7 keeps the per-item results of arms (and, when
results.json would pass the one bound of a run's file, the samples) apart from ``results.json``,
in files each under that bound (``store/runs.py``), named with their digests in ``kept_apart``;
and it records inputs that changed under the run (``inputs_changed``), which leave it deciding
nothing. Version 8 says what each interval of a metric is over (``variance``): a metric with
per-item results carries the variance of its items and of its seeds (each seed trains a model
of its own), and one seed's interval, over its items only, leaves the seed's variance unknown
and gives no verdict; a positive metric's (a time, memory) is taken on the log scale. It also
records, for each arm that names a git revision, the commit it resolved to and the digests of
the code its command ran there (``revisions``). Version 9 records the stages of a staged
command with each repeat (``MetricSample.stages``: their times, memory and artifacts), and may
take several repeats of each seed (the spec's ``seeds``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from .. import __version__
from ..text import shorten
from .attempt import AttemptId, Budget, RunStatus
from .counting import CountedUnder
from .evaluator import (
    MAX_CODE_FILES,
    AnySpec,
    ArmsSpec,
    EvaluatorSpec,
    FrozenEvaluator,
    MetricName,
    ProjectPath,
    SpecField,
)
from .intervals import VARIANCE_FROM_VERSION
from .measured import (
    KERNELS as KERNELS,
)
from .measured import (
    SAMPLE_SECONDS_MAX as SAMPLE_SECONDS_MAX,
)
from .measured import (
    SAMPLE_SECONDS_MIN as SAMPLE_SECONDS_MIN,
)
from .measured import (
    STEP_OPS as STEP_OPS,
)
from .measured import (
    VERSION_1_ROLES as VERSION_1_ROLES,
)
from .measured import (
    Bound as Bound,
)
from .measured import (
    CellStatus as CellStatus,
)
from .measured import (
    Count as Count,
)
from .measured import (
    Finite as Finite,
)
from .measured import (
    Fraction as Fraction,
)
from .measured import (
    Index as Index,
)
from .measured import (
    Interval as Interval,
)
from .measured import (
    Kernel as Kernel,
)
from .measured import (
    KernelSample as KernelSample,
)
from .measured import (
    MetricComparison as MetricComparison,
)
from .measured import (
    MetricSample as MetricSample,
)
from .measured import (
    MetricSummary as MetricSummary,
)
from .measured import (
    NonNegative as NonNegative,
)
from .measured import (
    OpParityCheck as OpParityCheck,
)
from .measured import (
    ParityCheck as ParityCheck,
)
from .measured import (
    ParityOutcome as ParityOutcome,
)
from .measured import (
    Positive as Positive,
)
from .measured import (
    Ratio as Ratio,
)
from .measured import (
    Roles as Roles,
)
from .measured import (
    SampleSeconds as SampleSeconds,
)
from .measured import (
    SignedInterval as SignedInterval,
)
from .measured import (
    StageRecord as StageRecord,
)
from .measured import (
    StepOp as StepOp,
)
from .measured import (
    StepSample as StepSample,
)
from .measured import (
    Summary as Summary,
)
from .measured import (
    _Strict as _Strict,
)
from .refs import INT_MAX, RUN_ID_PATTERN
from .step_work import ConfigFloors

RESULTS_VERSION = 9
# Interleaved rounds came with this version, and with them the 95% intervals: each cell's center
# and each ratio, paired by round. An older run took each cell's repeats back to back and
# recorded neither; its ratios are of medians, with no rounds to pair.
INTERVALS_FROM_VERSION = 3
# Stage records and a spec's seeds apart from its repeats are recorded from this version on.
STAGES_FROM_VERSION = 9


class Share(_Strict):
    ms: NonNegative
    share: Fraction = Field(description="Fraction of the step.")
    amdahl_bound: Bound | None = Field(
        description="End-to-end speedup if this part took no time: 1 / (1 - share); unknown at share 1."
    )


class Attribution(_Strict):
    """Where one training step's time goes (medians over repeats of per-repeat means)."""

    step_ms: Positive
    forward: Share
    backward_da: Share
    backward_db: Share
    other: Share
    bounding_kernel: Kernel = Field(description="The kernel with the largest share: the one that bounds the step.")
    headroom: Bound | None = Field(description="The bounding kernel's Amdahl bound.")
    all_matmuls_bound: Bound | None = Field(description="Speedup if all three kernels took no time.")
    ops: dict[StepOp, Share] | None = Field(
        default=None,
        description="Version 6: each op's share of the step; `other` is then what no kernel or op took "
        "(before version 6, `other` held every op).",
    )
    bounding_part: Kernel | StepOp | None = Field(
        default=None, description="Version 6: the kernel or op with the largest share, and so the largest bound."
    )

    def part_ms(self, part: str) -> float | None:
        """A part's ms per step, or the whole step's ("step"); None for an op not timed apart."""
        if part == "step":
            return float(self.step_ms)
        if part in (*KERNELS, "other"):
            return float(getattr(self, part).ms)
        return next((float(share.ms) for op, share in (self.ops or {}).items() if op == part), None)


class KernelTiming(_Strict):
    layer: str
    kernel: Kernel
    shape: list[Count] = Field(min_length=3, max_length=3, description="M, K, N.")
    per_step: Count = Field(description="Calls of this layer per training step.")
    seconds: Summary
    gflops: Summary
    vs_naive: Positive | None = Field(description="GFLOP/s ratio to the reference backend in the same run.")
    vs_peer: Positive | None = Field(description="GFLOP/s ratio to the peer backend in the same run.")
    vs_baseline: Positive | None
    vs_naive_ratio: Ratio | None = Field(default=None, description="Version 3: vs_naive round by round.")
    vs_peer_ratio: Ratio | None = Field(default=None, description="Version 3: vs_peer round by round.")
    vs_baseline_ratio: Ratio | None = Field(default=None, description="Version 3: vs_baseline round by round.")
    instructions_per_call: Summary | None = Field(
        default=None, description="Under the instructions timer: instructions per call, over repeats."
    )


class Cell(_Strict):
    """One (backend, config) pair, measured in its own worker process."""

    backend: str
    config: str
    status: CellStatus
    reason: str | None = None
    wall_seconds: NonNegative | None = None
    worker: dict[str, Any] | None = Field(default=None, description="What the worker reported: threads, pid.")
    step_samples: list[StepSample] | None = None
    kernel_samples: list[KernelSample] | None = None
    ms_per_step: Summary | None = Field(default=None, description="Over repeats, each a repeat's mean.")
    instructions_per_step: Summary | None = Field(
        default=None,
        description="Under the instructions timer: instructions of one step's worth of work (tinygpt-train: a "
        "step; kernels: a step's linear layers), over repeats, each a repeat's mean.",
    )
    tokens_per_second: Summary | None = None
    step_gflops: Positive | None = Field(
        default=None, description="kernels: GFLOP/s of one training step's linear layers (all three kernels)."
    )
    spread_too_wide: bool | None = None
    vs_naive: Positive | None = Field(default=None, description="Speedup over the reference backend in the same run.")
    vs_baseline: Positive | None = None
    vs_naive_ratio: Ratio | None = Field(default=None, description="Version 3: vs_naive round by round.")
    vs_baseline_ratio: Ratio | None = Field(default=None, description="Version 3: vs_baseline round by round.")
    attribution: Attribution | None = None
    kernels: list[KernelTiming] | None = None
    loss_first: Finite | None = None
    loss_last: Finite | None = None
    metric_samples: list[MetricSample] | None = Field(default=None, description="Version 4: a run of arms' repeats.")
    metrics: dict[MetricName, MetricSummary] | None = Field(default=None, description="Version 4: by metric.")
    versus: dict[str, dict[MetricName, MetricComparison]] | None = Field(
        default=None, description="Version 4: against each other arm, by metric."
    )


class ConfigRounds(_Strict):
    """How one config's repeats were taken: the backends' order in each round, and why no
    further round was taken."""

    config: str
    order_seed: int = Field(ge=0, le=INT_MAX, description="Seeds the order of the backends in each round.")
    orders: list[list[str]] = Field(description="Round by round, the backends in the order they ran.")
    stopped: str


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
# A file of what a run keeps apart from its results.json (version 7): per-item results, or
# samples (store/runs.py).
APART_FILE_NAME = r"(?:items|samples)-[1-9][0-9]{0,5}\.jsonl"
APART_FILE_PATTERN = f"^{APART_FILE_NAME}$"
MAX_APART_FILES = 10_000
# The lists of a cell that may be kept apart, each repeat's samples.
SAMPLE_FIELDS = ("step_samples", "kernel_samples", "metric_samples")


class PluginCode(_Strict):
    """The code behind one entry point as the run found it: the distribution that registers it
    and a digest of its module's source files (``engine/identity.py`` says which files)."""

    target: str = Field(max_length=400, description="module:attribute, as the entry point names it.")
    distribution: str | None = Field(max_length=200)
    version: str | None = Field(max_length=200)
    digest: Sha256 | None = Field(description="sha256 over the module's source files; null when unknown.")


class CodeIdentity(_Strict):
    """Version 5: what code a run measured. Two runs measured the same code in a cell when the
    cell's identity (``RunResults.cell_code``) is known and equal in both."""

    ptreg_version: str = Field(max_length=200)
    commit: str | None = Field(pattern=r"^[0-9a-f]{40,64}$", description="The project's git commit; null outside git.")
    dirty: bool | None = Field(description="Tracked files changed since the commit; null when unknown.")
    workload: PluginCode | None
    arms: dict[str, PluginCode] = Field(description="Each backend's code; empty where the arms are settings.")
    repository_code: bool = Field(
        description="The code measured is the project's own (a command): known only at a clean commit."
    )


class ArmRevision(_Strict):
    """Version 8: the git revision an arm named, as the run checked it out."""

    revision: str = Field(min_length=1, max_length=1000, description="The revision as the evaluator names it.")
    commit: str = Field(pattern=r"^[0-9a-f]{40,64}$", description="The commit it resolved to when the run started.")
    code: dict[ProjectPath, Sha256] = Field(
        max_length=MAX_CODE_FILES, description="Each file of the checkout its command ran, with its sha256."
    )


class RunResults(_Strict):
    """The file ``results.json``."""

    results_version: Literal[1, 2, 3, 4, 5, 6, 7, 8, 9]
    run_id: str | None = Field(pattern=RUN_ID_PATTERN, description="Null for an ad hoc `ptreg bench`.")
    attempt: AttemptId | None
    evaluator: str | None = Field(description="name@hash12 of the frozen evaluator; null for bench.")
    evaluator_sha256: str | None
    evaluator_version: int = Field(ge=1, le=INT_MAX)
    spec: SpecField
    roles: Roles | None = Field(default=None, description="Version 2: the backends the ratios are taken over.")
    budget: Budget | None
    command: list[str]
    started_at: str
    finished_at: str
    status: RunStatus
    reason: str | None
    ptreg_version: str
    parity: list[ParityOutcome]
    cells: list[Cell]
    rounds: list[ConfigRounds] | None = Field(
        default=None, description="Version 3: the order of the backends in each round of each config."
    )
    code: CodeIdentity | None = Field(default=None, description="Version 5: the code measured; null when unknown.")
    counted: CountedUnder | None = Field(
        default=None, description="Under the instructions timer: how the counts were taken (valgrind, its CPU, BLAS)."
    )
    kept_apart: dict[Annotated[str, Field(pattern=APART_FILE_PATTERN)], Sha256] | None = Field(
        default=None,
        max_length=MAX_APART_FILES,
        description="Version 7: the files beside results.json that hold what it keeps apart, each with the sha256 "
        "of its content: every repeat's per-item results (items-N.jsonl) and, where results.json would pass the "
        "bound of a run file, the cells' samples (samples-N.jsonl).",
    )
    inputs_changed: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="Version 7: the input or code file of the evaluator that no longer had its frozen digest when "
        "the run ended, with both digests. Such a run is never complete, and decides nothing.",
    )
    revisions: dict[str, ArmRevision] | None = Field(default=None, description="Version 8: each revision's code.")
    continues: str | None = Field(
        default=None,
        pattern=RUN_ID_PATTERN,
        description="The interrupted or budget-stopped run of the same attempt this run continues (`run --resume`): "
        "it carries that run's rounds measured whole, and is counted in its place.",
    )
    floors: dict[str, ConfigFloors] | None = Field(
        default=None,
        description="A tinygpt-train run's floors per config: each part's roofline from the ceilings cached for the "
        "machine that measured it; null when none were cached (the distance to the floor is then unknown).",
    )
    continues_partial: str | None = Field(
        default=None,
        pattern=RUN_ID_PATTERN,
        description="A run of the same attempt lost before it was written (its ptreg killed) whose journal this run "
        "read: it carries the rounds that journal held.",
    )

    @model_validator(mode="after")
    def _continues_another(self) -> RunResults:
        if self.run_id is not None and self.run_id in (self.continues, self.continues_partial):
            raise ValueError(f"run {self.run_id} continues itself")
        return self

    @model_validator(mode="after")
    def _floors_of_its_own_configs(self) -> RunResults:
        """Floors are a training step's, of the configs the run measured."""
        if self.floors is None:
            return self
        spec = self.spec
        if not isinstance(spec, EvaluatorSpec) or spec.workload != "tinygpt-train":
            raise ValueError("floors are recorded for a tinygpt-train run only")
        stray = sorted(set(self.floors) - set(spec.configs))
        if stray:
            raise ValueError(f"floors of config {shorten(stray[0])}, which the run does not measure")
        if any(f.threads != spec.threads for f in self.floors.values()):
            raise ValueError("floors at another thread count than the run's")
        return self

    @model_validator(mode="after")
    def _roles_by_version(self) -> RunResults:
        if (self.roles is None) != (self.results_version == 1):
            raise ValueError("roles are recorded from results_version 2 on, and only there")
        return self

    @model_validator(mode="after")
    def _changed_inputs_decide_nothing(self) -> RunResults:
        if self.results_version < 7 and (self.kept_apart is not None or self.inputs_changed is not None):
            raise ValueError("kept_apart and inputs_changed are recorded from results_version 7 on")
        if self.inputs_changed is not None and self.status == "complete":
            raise ValueError("a run whose inputs changed under it is not complete")
        return self

    @model_validator(mode="after")
    def _revisions_are_the_specs(self) -> RunResults:
        """The revisions recorded are exactly those the spec's arms name, each as named."""
        if self.revisions is not None and self.results_version < 8:
            raise ValueError("revisions are recorded from results_version 8 on")
        named = (self.spec.revisions or {}) if self.results_version >= 8 else {}
        if {a: r.revision for a, r in (self.revisions or {}).items()} != named:
            raise ValueError("revisions are not the arms' revisions as the run's spec names them")
        return self

    @model_validator(mode="after")
    def _stages_from_version_9(self) -> RunResults:
        """Stages and seeds beside repeats came with version 9: an older run holding them was
        not written by ptreg."""
        if self.results_version >= STAGES_FROM_VERSION:
            return self
        if isinstance(self.spec, ArmsSpec) and self.spec.seeds is not None:
            raise ValueError("seeds beside repeats are recorded from results_version 9 on")
        for n, cell in enumerate(self.cells):
            if any(s.stages is not None for s in cell.metric_samples or []):
                raise ValueError(f"cells/{n}: stages are recorded from results_version 9 on")
        return self

    @model_validator(mode="after")
    def _variance_from_version_8(self) -> RunResults:
        """What an interval is over is recorded from version 8 on, and read only there: an
        older run claiming it was not written by ptreg."""
        if self.results_version >= VARIANCE_FROM_VERSION:
            return self
        for n, cell in enumerate(self.cells):
            said: list[MetricSummary | MetricComparison] = [
                *(cell.metrics or {}).values(),
                *(c for v in (cell.versus or {}).values() for c in v.values()),
            ]
            if any(
                v is not None
                for x in said
                for v in (x.variance, x.df, x.items_left_out, getattr(x, "scale", None), getattr(x, "items", None))
            ):
                raise ValueError(f"cells/{n}: what an interval is over is recorded from results_version 8 on")
        return self

    @model_validator(mode="after")
    def _counted_under_its_timer(self) -> RunResults:
        """How the counts were taken is there exactly when the spec counts instructions: a count
        is compared only with one taken the same way (records/counting.py)."""
        counts = bool(getattr(self.spec, "counts_instructions", False))
        if counts != (self.counted is not None):
            raise ValueError("counted is recorded exactly when the spec's timer is 'instructions'")
        return self

    @model_validator(mode="after")
    def _cells_are_the_arms(self) -> RunResults:
        """A run of arms has a cell for arms of its own spec only, each once, compared only with
        another of them: show, compare and conditions find an arm's numbers by its name."""
        if not isinstance(self.spec, ArmsSpec):
            return self
        seen: set[str] = set()
        for n, cell in enumerate(self.cells):
            if cell.backend not in self.spec.arms:
                raise ValueError(f"cells/{n} is of arm {shorten(cell.backend)}, which the run's spec does not name")
            if cell.backend in seen:
                raise ValueError(f"cells/{n}: arm {cell.backend!r} has a second cell")
            seen.add(cell.backend)
            other = next((o for o in cell.versus or {} if o not in self.spec.arms or o == cell.backend), None)
            if other is not None:
                raise ValueError(f"cells/{n} is compared with {shorten(other)}, not another arm of the run's spec")
        return self

    def cell_code(self, arm: str) -> str | None:
        """The identity of the code one arm's cells measured: the workload's code, the arm's
        own (a backend's), and for a command the clean commit it ran at. Unknown (None) when
        any part is: a run of unknown code is history to no other."""
        code = self.code
        if code is None or code.workload is None or code.workload.digest is None:
            return None
        parts: list[str | None] = [code.workload.target, code.workload.digest]
        if code.repository_code:
            checked_out = (self.revisions or {}).get(arm)  # a clean checkout of its revision's commit
            parts.append(checked_out.commit if checked_out else code.commit if code.dirty is False else None)
        if isinstance(self.spec, EvaluatorSpec):
            mine = code.arms.get(arm)
            parts.extend([None] if mine is None else [mine.target, mine.digest])
        if None in parts:
            return None
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    @property
    def ratio_roles(self) -> Roles:
        """The backends this run's ratios are taken over."""
        return self.roles if self.roles is not None else VERSION_1_ROLES


def run_is_decisive(results: RunResults) -> bool:
    """Whether this run may decide a condition: it measured every planned cell, and the inputs
    and code its evaluator froze were still what was frozen when it ended."""
    return results.status == "complete" and results.inputs_changed is None


def undecisive(results: RunResults) -> str:
    """Why a run that is not decisive (``run_is_decisive``) decides nothing, in words."""
    run = f"run {results.run_id}" + (f" of {results.attempt}" if results.attempt else "")
    if results.inputs_changed is not None:
        return f"{run} decides nothing: inputs changed during the run ({results.inputs_changed})"
    return f"{run} decides nothing: it is {results.status}, not complete"


@dataclass
class Measurement:
    """What measuring an evaluator found (``engine.measurement.measure``): parity, the cells, the
    ratios' roles, the rounds, and the status the run ends with."""

    parity: list[ParityOutcome]
    cells: list[Cell]
    roles: Roles
    rounds: list[ConfigRounds]
    status: RunStatus
    reason: str | None
    interrupted_by: int | None = None  # the signal that stopped it
    counted: CountedUnder | None = None  # under the instructions timer: how the counts were taken
    floors: dict[str, ConfigFloors] | None = None  # a training step's, from this machine's cached ceilings


@dataclass(frozen=True)
class Provenance:
    """Under what a measurement was made: the command line, when, by which version of the
    evaluator code, and, for an attempt's run, its frozen evaluator, budget, attempt and run id
    (an ad hoc bench has none of these four)."""

    command: list[str]
    started_at: str
    finished_at: str
    evaluator_version: int
    frozen: FrozenEvaluator | None = None
    budget: Budget | None = None
    attempt: str | None = None
    run_id: str | None = None
    code: CodeIdentity | None = None  # the code that measured, as far as it is known
    # an input or code file that no longer had its frozen digest when the run ended
    inputs_changed: str | None = None
    revisions: dict[str, ArmRevision] | None = None  # each revision arm's commit and code
    continues: str | None = None  # the written run a resumed run continues
    continues_partial: str | None = None  # the lost run whose journal it read


def new_results(spec: AnySpec, measurement: Measurement, provenance: Provenance) -> RunResults:
    """The results of one measurement of ``spec``: of an attempt's run under its frozen
    evaluator, or of an ad hoc bench."""
    found, made = measurement, provenance
    frozen = made.frozen
    status, reason = found.status, found.reason
    if made.inputs_changed is not None:  # what it measured is not what the evaluator froze
        said = f"inputs changed during the run: {made.inputs_changed}"
        status, reason = ("failed" if status == "complete" else status), (f"{said}; {reason}" if reason else said)
    return RunResults(
        results_version=RESULTS_VERSION,
        run_id=made.run_id,
        attempt=made.attempt,
        evaluator=frozen.ref if frozen else None,
        evaluator_sha256=frozen.sha256 if frozen else None,
        evaluator_version=frozen.evaluator_version if frozen else made.evaluator_version,
        spec=spec,
        roles=found.roles,
        budget=made.budget,
        command=made.command,
        started_at=made.started_at,
        finished_at=made.finished_at,
        status=status,
        reason=reason,
        ptreg_version=__version__,
        parity=found.parity,
        cells=found.cells,
        rounds=found.rounds,
        code=made.code,
        counted=found.counted,
        floors=found.floors,
        inputs_changed=made.inputs_changed,
        revisions=made.revisions,
        continues=made.continues,
        continues_partial=made.continues_partial,
    )
