"""Plain helpers for the tests: synthetic records, registries on disk, snapshots, CLI results."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptreg.records.ledger import Filter, Summary, in_ledger_order, listed
from ptreg.records.vocabulary import default_meta
from ptreg.store.directory import init_registry, load_directory, load_meta
from ptreg.store.index import open_index
from ptreg.store.names import INDEX_FILE
from ptreg.views.lineage import lineage_json
from ptreg.views.precedents import Shape, precedents
from ptreg.views.queries import coverage, list_row, select
from ptreg.views.streaks import streak_chains, streaks, streaks_of

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_FILE = SHARED / "data" / "posttrainllm-attempts.json"
SEED_FILE = SHARED / "seeds" / "000_dbdb73fcca9c7afe.txt"
# Every published version of the shared ledger, oldest first (../shared/data/history/README.md).
HISTORY_FILES = (
    SHARED / "data" / "history" / "attempts-b52a3ae.json",
    SHARED / "data" / "history" / "attempts-b3ba81c.json",
    SHARED_FILE,
)
SCHEMAS = REPO / "schemas"
# The browser of the site's tests (and of benchmarks/site_screenshots.py): the Debian package,
# headless, with nothing that reaches the network on its own.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def patient(seconds: float) -> float:
    """How long a test waits for a condition before it calls it a failure: a wait ends as soon
    as its condition holds, so a bound costs time only when the test fails anyway. A slow
    machine (a busy CI runner, a loaded laptop) gets more with PTREG_TEST_TIMEOUT_SCALE=N."""
    scale = float(os.environ.get("PTREG_TEST_TIMEOUT_SCALE") or 1)
    return seconds * max(scale, 1.0)


def wait_for_timed_steps(root: Path, attempt_id: str, process: subprocess.Popen) -> None:
    """Until `ptreg run` of ``attempt_id`` (``process``) has timed a step: the progress.json it
    writes (not an earlier run's) says a worker's phase is ``timed``, which the worker sends
    after that step's sample, so the sample has reached the run. A signal sent then lands
    mid-measurement however slow the machine; a failure when the run ends first or times
    nothing in ``patient(120)`` seconds."""
    from ptreg.store.progress import runs_in_progress

    deadline = time.monotonic() + patient(120)
    while not any(
        run.attempt == attempt_id and run.pid == process.pid and (run.phase or "").endswith(" timed")
        for run in runs_in_progress(root)
    ):
        assert process.poll() is None, f"the run of {attempt_id} ended before it timed a step"
        assert time.monotonic() < deadline, f"the run of {attempt_id} timed no step in {patient(120):.0f} s"
        time.sleep(0.05)


def as_a_shell_starts_it() -> None:
    """A child's signals as a person's shell leaves them for a command it runs: Ctrl-C (SIGINT)
    interrupts and SIGQUIT quits. Pytest started in the background (``&`` in a script, some CI
    runners) runs with both ignored, which every child inherits across exec; a preexec_fn."""
    for signum in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


NEGATIVE = ("failed", "regressed", "inconclusive")
# Fields a schema_version 1 attempts.json carries; on import everything else stays unknown.
V1_FIELDS = ("id", "name", "status", "evidence", "source")


# --------------------------------------------------------------------------- synthetic records


def complete_record(attempt_id: str, **changes: Any) -> dict[str, Any]:
    """A record that breaks no rule under the default vocabularies; a change to ``None``
    removes the field."""
    record: dict[str, Any] = {
        "id": attempt_id,
        "name": f"Attempt {attempt_id}",
        "family": "runtime-perf",
        "status": "worked",
        "evidence": "1.20x faster per step",
        "failure_reason_confidence": "not-applicable",
        "lesson": "Blocking pays off at these shapes.",
        "next_action": "Keep it.",
        "evidence_sources": ["docs/bench.md"],
        "source": "docs/bench.md",
        "kind": "runtime-benchmark",
        "methods": ["cache-blocking"],
        "bases": ["matmul-f32"],
        "objective": "training-step-time",
        "data_rows": 64,
    }
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    return record


def failed_record(attempt_id: str, **changes: Any) -> dict[str, Any]:
    """A complete record with a negative outcome (status failed unless changed)."""
    base: dict[str, Any] = {
        "status": "failed",
        "failure_reason": "The change moved the microbenchmark, not the training step.",
        "failure_reason_confidence": "exact",
        "lesson": "Measure end to end.",
        "next_action": "Stop here.",
    }
    base.update(changes)
    return complete_record(attempt_id, **base)


def meta_json() -> dict[str, Any]:
    return default_meta().model_dump(mode="json")


def to_old_layout(root: Path, meta: dict[str, Any] | None = None) -> Path:
    """Turn the registry at ``root`` into one of the layout before term files: every vocabulary
    inside registry.json (schema_version 2), ``meta`` or the registry's own."""
    from ptreg.store.directory import load_meta

    body = meta if meta is not None else load_meta(root).model_dump(mode="json")
    shutil.rmtree(root / "vocabulary", ignore_errors=True)
    (root / "registry.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return root


def vocabulary_of(root: Path, vocabulary: str) -> dict[str, str | None]:
    """The terms of one vocabulary of the registry at ``root``, as ptreg reads them."""
    from ptreg.store.directory import load_meta

    found: dict[str, str | None] = load_meta(root).model_dump(mode="json")[f"{vocabulary}_vocabulary"]
    return found


def attempts_document(records: list[Any], version: int = 2) -> dict[str, Any]:
    """A single-file attempts.json body with the default vocabularies (none for version 1)."""
    if version == 1:
        return {"schema_version": 1, "attempts": records}
    body = meta_json()
    return {
        "schema_version": version,
        "confidence_vocabulary": body["confidence_vocabulary"],
        "attempts": records,
        "method_vocabulary": body["method_vocabulary"],
        "objective_vocabulary": body["objective_vocabulary"],
        "kind_vocabulary": body["kind_vocabulary"],
    }


def write_attempts_file(path: Path, records: list[Any], version: int = 2) -> Path:
    document = attempts_document(copy.deepcopy(records), version)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def write_registry(root: Path, records: list[Any], files: dict[str, Any] | None = None) -> Path:
    """A registry directory with the default vocabularies and each record written raw as
    ``<id>.json`` (so broken records can be written too). ``files`` maps further file names to
    content: bytes as they are, str as UTF-8 text, anything else as JSON."""
    init_registry(root)
    for record in records:
        (root / f"{record['id']}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    for name, content in (files or {}).items():
        target = root / name
        if isinstance(content, bytes):
            target.write_bytes(content)
        elif isinstance(content, str):
            target.write_text(content, encoding="utf-8")
        else:
            target.write_text(json.dumps(content, indent=2), encoding="utf-8")
    return root


def sample_records() -> list[dict[str, Any]]:
    """A small valid registry: a chain of three on one objective (failed, failed, worked), an
    infrastructure record and a not-tried proposal."""
    return [
        failed_record("naive-baseline", methods=["vectorization"]),
        failed_record(
            "cache-blocked", methods=["cache-blocking"], varied_from="naive-baseline", varied="tile loops 64x64"
        ),
        complete_record(
            "register-blocked",
            methods=["cache-blocking", "register-blocking"],
            bases=["matmul-f64"],
            varied_from="cache-blocked",
            varied="4x4 register tile",
        ),
        complete_record(
            "harness-fix",
            kind="infrastructure",
            family="tooling",
            methods=None,
            bases=None,
            objective=None,
            data_rows=None,
        ),
        complete_record(
            "fused-adam",
            status="not-tried",
            methods=["operator-fusion"],
            objective="peak-memory",
            evidence=None,
            lesson=None,
            next_action=None,
        ),
    ]


# --------------------------------------------------------------------------- evaluators


def evaluator_spec(**changes: Any) -> dict[str, Any]:
    """A valid evaluator spec; a change to ``None`` removes the field."""
    spec: dict[str, Any] = {
        "name": "kernels-xl",
        "workload": "kernels",
        "configs": ["xl"],
        "backends": ["naive", "numpy-blas"],
        "baseline": "numpy-blas",
        "warmup_steps": 2,
        "timed_steps": 10,
        "repeats": 5,
        "seed": 0,
        "threads": 1,
        "tolerance": {"rtol": 1e-5, "atol": 1e-6},
        "max_relative_spread": 0.2,
        "metric": "gflops",
    }
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def freeze_evaluator(root: Path, **changes: Any) -> str:
    """Freeze a spec into the registry at ``root``; return its name@hash12 reference."""
    from ptreg.gate.freezing import freeze

    spec_path = root.parent / f"spec-{len(list(root.parent.glob('spec-*.json')))}.json"
    spec_path.write_text(json.dumps(evaluator_spec(**changes)), encoding="utf-8")
    return freeze(root, spec_path).evaluator.ref


def worked_if_for(spec: dict[str, Any]) -> str:
    """A worked-if rule that names only what ``spec`` measures, so the gate's analysis-plan
    check admits it: every proposal registers a plan."""
    if "arms" in spec:
        arms = list(spec["arms"])
        metric = next(iter(spec.get("metrics") or {"wall_seconds": {}}))
        other = next((a for a in arms if a != spec["baseline"]), None)
        if other is None:
            return f"metric({metric}, arm={arms[0]}) > -1e9"
        return f"diff({metric}, arm={other}, over={spec['baseline']}) > 0"
    backend, config = spec["backends"][0], spec["configs"][0]
    if spec["workload"] == "kernels":
        return f"gflops(step, backend={backend}, config={config}) > 0"
    return f"ms_per_step(backend={backend}, config={config}) > 0"


def plan_flags(root: Path | str, ref: str) -> list[str]:
    """``--worked-if`` for a proposal under the frozen evaluator ``ref`` of the registry ``root``."""
    name, _, short = ref.partition("@")
    found = sorted(Path(root, "evaluators").glob(f"{name}@{short}*.json"))
    if not found:  # no such evaluator: the gate refuses it anyway, on its own check
        return ["--worked-if", "ms_per_step(backend=naive, config=tiny) > 0"]
    return ["--worked-if", worked_if_for(json.loads(found[-1].read_text(encoding="utf-8"))["spec"])]


# --------------------------------------------------------------------------- checking results


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (empty when ``root`` does not exist).

    Lock files are left out: a lock file is created empty on first use and stays, and it is
    not part of the record (the holder file beside it is, while it exists). So is the query
    index, a cache that every read may bring up to date (tests/store/test_index.py checks it)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and not (p.name.startswith(".ptreg") and p.name.endswith(".lock"))
        and not p.name.startswith(INDEX_FILE)
    }


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def assert_one_line_error(result: Result, code: int, *fragments: str) -> None:
    """A failed command: its exit code, one line ``ptreg: error: ...`` on stderr, no traceback."""
    assert result.code == code, (result.code, result.err)
    assert "Traceback" not in result.err + result.out
    lines = result.err.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {result.err!r}"
    assert lines[0].startswith("ptreg: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def problems_by(problems, rule: str) -> list:
    return [p for p in problems if p.rule == rule]


def raw_chain(raw_attempts: list[dict[str, Any]], attempt_id: str) -> list[str]:
    """The varied_from chain, oldest first, computed from plain JSON."""
    by_id = {a["id"]: a for a in raw_attempts}
    chain, node = [], attempt_id
    while node is not None and node in by_id and node not in chain:
        chain.append(node)
        node = by_id[node].get("varied_from")
    return list(reversed(chain))


def raw_descendants(raw_attempts: list[dict[str, Any]], attempt_id: str) -> set[str]:
    """Every attempt that varies ``attempt_id``, directly or through others, from plain JSON."""
    found: set[str] = set()
    frontier = {attempt_id}
    while frontier:
        frontier = {a["id"] for a in raw_attempts if a.get("varied_from") in frontier} - found
        found |= frontier
    return found


# --------------------------------------------------------------------------- processes


def tiny_spec(name: str, timed_steps: int = 1, repeats: int = 1) -> dict[str, Any]:
    """An evaluator spec of the smallest real run: naive on the tiny config, one thread."""
    return {
        "name": name,
        "workload": "tinygpt-train",
        "metric": "ms-per-step",
        "configs": ["tiny"],
        "backends": ["naive"],
        "baseline": "naive",
        "warmup_steps": 0,
        "timed_steps": timed_steps,
        "repeats": repeats,
        "threads": 1,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "max_relative_spread": 5.0,
    }


# A writer process: proposes attempts through the CLI's own entry point, in a loop, so that
# two of them contend for the registry for the whole of their work.
PROPOSER = textwrap.dedent("""
    import json, sys
    from ptreg.cli import main

    root, ref, plan, worked_if = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    codes = []
    for attempt_id, issue in plan:
        try:
            main(["-r", root, "new", "--id", attempt_id, "--name", attempt_id, "--family", "runtime-perf",
                  "--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "vendor-blas",
                  "--question", f"What does {attempt_id} change?", "--evaluator", ref, "--budget-seconds", "600",
                  "--tracking-issue", issue, "--worked-if", worked_if, "--no-input", "--json"])
            codes.append(0)
        except SystemExit as exc:
            codes.append(exc.code or 0)
    print(json.dumps(codes))
""")


def env_without_hooks() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PTREG_CRASH_AT", "PTREG_LOCK_TIMEOUT")}


def proposer(root: Path, ref: str, plan: list[tuple[str, str]]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PROPOSER, str(root), ref, json.dumps(plan), plan_flags(root, ref)[1]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_without_hooks(),
    )


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def propose_for_run(root: Path, ref: str, attempt_id: str, issue: str) -> None:
    code, out, err = finish(proposer(root, ref, [(attempt_id, issue)]))
    assert code == 0 and json.loads(out.strip().splitlines()[-1]) == [0], err


HAND_RUN = "runs/measured/20240101T000000Z"


def registry_with_a_run(root: Path) -> Path:
    """A registry with a frozen evaluator and an attempt linked to one run folder, written by
    hand as a run would write it (no worker is started)."""
    from ptreg import __version__

    write_registry(root, [complete_record("plain")])
    ref = freeze_evaluator(root)
    frozen = json.loads((root / "evaluators" / f"{ref}.json").read_text())
    run_id = HAND_RUN.rsplit("/", 1)[1]
    record = complete_record(
        "measured",
        status="not-tried",
        evidence=None,
        lesson=None,
        next_action=None,
        evaluator=ref,
        runs=[{"run_id": run_id, "status": "complete", "evaluator": ref}],
    )
    (root / "measured.json").write_text(json.dumps(record, indent=2))
    results = {
        "results_version": 1,
        "run_id": run_id,
        "attempt": "measured",
        "evaluator": ref,
        "evaluator_sha256": frozen["sha256"],
        "evaluator_version": frozen["evaluator_version"],
        "spec": frozen["spec"],
        "budget": None,
        "command": ["ptreg", "run", "measured"],
        "started_at": "2024-01-01T00:00:00Z",
        "finished_at": "2024-01-01T00:01:00Z",
        "status": "complete",
        "reason": None,
        "ptreg_version": __version__,
        "parity": [],
        "cells": [],
    }
    (root / HAND_RUN).mkdir(parents=True)
    (root / HAND_RUN / "results.json").write_text(json.dumps(results, indent=2))
    (root / HAND_RUN / "environment.json").write_text("{}\n")
    return root


def blocked_chain() -> list[dict[str, Any]]:
    """Forward blocking that worked, varied into dA blocking that failed with a disposition:
    the lineage the proposal tests vary."""
    return [
        complete_record("blocked-fwd", methods=["cache-blocking"]),
        failed_record(
            "blocked-da",
            methods=["cache-blocking"],
            varied_from="blocked-fwd",
            varied="block dA",
            next_action="Only continue if dB shows headroom.",
        ),
    ]


# --------------------------------------------------------------------------- runs with known numbers


def _interval(low: float, high: float) -> dict[str, Any]:
    return {"low": low, "high": high, "level": 0.95, "method": "student-t"}


def step_cell(
    backend: str,
    config: str,
    *,
    ms: float,
    shares: tuple[float, float, float],
    ms_ci: tuple[float, float] | None = None,
    vs_naive: float | None = None,
    vs_naive_ci: tuple[float, float] | None = None,
    vs_baseline: float | None = None,
    vs_baseline_ci: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """A measured tinygpt-train cell with the given ms per step, kernel shares (forward,
    backward_da, backward_db; the rest is `other`) and speedups, as results.json holds it."""

    def part(share: float, bounded: bool = True) -> dict[str, Any]:
        return {"ms": share * ms, "share": share, "amdahl_bound": 1 / (1 - share) if bounded else None}

    other = 1 - sum(shares)
    forward, backward_da, backward_db = shares
    bounding = ("forward", "backward_da", "backward_db")[shares.index(max(shares))]

    def ratio(value: float | None, ci: tuple[float, float] | None) -> dict[str, Any] | None:
        if value is None or ci is None:
            return None
        return {"median": value, "n": 4, "ci": _interval(*ci)}

    return {
        "backend": backend,
        "config": config,
        "status": "measured",
        "ms_per_step": {
            "n": 4,
            "median": ms,
            "min": ms * 0.98,
            "max": ms * 1.02,
            "q1": ms * 0.99,
            "q3": ms * 1.01,
            "relative_spread": 0.04,
            "ci": _interval(*ms_ci) if ms_ci else None,
        },
        "vs_naive": vs_naive,
        "vs_baseline": vs_baseline,
        "vs_naive_ratio": ratio(vs_naive, vs_naive_ci),
        "vs_baseline_ratio": ratio(vs_baseline, vs_baseline_ci),
        "attribution": {
            "step_ms": ms,
            "forward": part(forward),
            "backward_da": part(backward_da),
            "backward_db": part(backward_db),
            "other": part(other, bounded=False),
            "bounding_kernel": bounding,
            "headroom": 1 / (1 - max(shares)),
            "all_matmuls_bound": 1 / other,
        },
    }


def step_results(
    attempt: str, run_id: str, cells: list[dict[str, Any]], *, version: int = 3, status: str = "complete"
) -> dict[str, Any]:
    """results.json of a tinygpt-train run of ``cells`` (results_version 3 with its roles, or 1)."""
    from ptreg import __version__

    backends = list(dict.fromkeys(c["backend"] for c in cells))
    configs = list(dict.fromkeys(c["config"] for c in cells))
    spec = {
        "name": "steps",
        "workload": "tinygpt-train",
        "metric": "ms-per-step",
        "configs": configs,
        "backends": backends,
        "baseline": "numpy-blas" if "numpy-blas" in backends else backends[0],
        "warmup_steps": 1,
        "timed_steps": 2,
        "repeats": 4,
        "seed": 0,
        "threads": 1,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "max_relative_spread": 0.2,
    }
    stamp = f"{run_id[0:4]}-{run_id[4:6]}-{run_id[6:8]}T{run_id[9:11]}:{run_id[11:13]}:{run_id[13:15]}Z"
    return {
        "results_version": version,
        "run_id": run_id,
        "attempt": attempt,
        "evaluator": "steps@" + "0" * 12,
        "evaluator_sha256": "0" * 64,
        "evaluator_version": 2,
        "spec": spec,
        "roles": {"reference": "naive", "peer": "numpy-blas"} if version > 1 else None,
        "budget": None,
        "command": ["ptreg", "run", attempt],
        "started_at": stamp,
        "finished_at": stamp,
        "status": status,
        "reason": None,
        "ptreg_version": __version__,
        "parity": [],
        "cells": cells,
    }


def add_run(root: Path, results: dict[str, Any]) -> None:
    """Write a run folder as `ptreg run` leaves it, and link it from its attempt's record."""
    folder = root / "runs" / results["attempt"] / results["run_id"]
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    (folder / "environment.json").write_text("{}\n", encoding="utf-8")
    path = root / f"{results['attempt']}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    ref = {"run_id": results["run_id"], "status": results["status"], "evaluator": results["evaluator"]}
    record["runs"] = [*record.get("runs", []), ref]
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")


# --------------------------------------------------------------------------- the query index against a full read


def answers(attempts: list[Any], meta: Any, problems: list[tuple[str, str]], records: int) -> dict[str, Any]:
    """Everything the query commands print, computed from ``attempts`` (records or summaries)."""
    by_id = {a.id: a for a in attempts}
    ordered = sorted(attempts, key=lambda a: a.ledger)
    shape = Shape(objective="training-step-time", methods=("vectorization",), family="runtime-perf")
    return {
        "list": [a.id for a in select(ordered, Filter())],
        "list-failures": [a.id for a in select(ordered, Filter(failures_only=True))],
        "list-method": [a.id for a in select(ordered, Filter(methods=("vectorization", "multithreading")))],
        "list-rows": [(a.id, a.status, a.family, a.kind, a.objective, a.methods, a.lesson) for a in ordered],
        "streaks": [s.to_json() for s in streaks(attempts)],
        "lineage": {i: lineage_json(i, by_id) for i in sorted(by_id)},
        "coverage": coverage(attempts, meta).to_json(),
        "precedents": [p.to_json() for p in precedents(shape, attempts, None)],
        "problems": problems,
        "records": records,
    }


LIST_FILTERS: list[dict[str, Any]] = [
    {},
    {"failures_only": True},
    {"statuses": ("worked", "failed")},
    {"methods": ("vectorization", "multithreading")},
    {"methods": ("cache-blocking",), "bases": ("matmul-f32",)},
    {"objectives": ("peak-memory",), "failures_only": True},
    {"families": ("runtime-perf",), "kinds": ("runtime-benchmark",)},
    {"bases": ("no-such-base",)},
]


def by_full_read(root: Path) -> dict[str, Any]:
    """The answers as ptreg gave them before the index: every file read and parsed."""
    registry = load_directory(root)
    problems = [(p.location(), p.message) for p in registry.problems]
    # every reader gives attempts in the ledger's order, which precedents' ties keep
    return answers(in_ledger_order(registry.attempts), registry.meta, problems, len(registry.records))


def gate_inputs_of_every_attempt(proposal: Any, every: list[Summary], root: Path) -> Any:
    """The gate's inputs as read without the index's narrowing: every attempt, and the streak of
    the proposal's objective found among all the others."""
    from ptreg.gate.checks import GateInputs
    from ptreg.gate.gate_inputs import decided_disposition, evaluator_file

    others = {a.id: a for a in every if a.id != proposal.id}
    found = streaks(others.values(), proposal.objective) if proposal.objective else []
    return GateInputs(
        others=every,
        objective_chain=found[0].chain if found else [],
        evaluator=evaluator_file(proposal, root),
        disposition=decided_disposition(proposal, every, root),
    )


def by_index(root: Path) -> dict[str, Any]:
    from ptreg.gate.checks import check_gate
    from ptreg.gate.gate_inputs import read_gate_inputs

    load_meta(root)  # as every command does first: finishes an import cut short after its commit
    index = open_index(root)
    try:
        found = answers(index.summaries(), index.vocabularies(), index.problems(), index.records())
        # `list` narrows in SQL first: the same attempts as the filter over every summary
        every = index.summaries()
        for criteria in LIST_FILTERS:
            wanted = [listed(a) for a in select(every, Filter(**criteria))]
            assert select(index.candidates(Filter(**criteria)), Filter(**criteria)) == wanted
            # and the table `list` prints straight from SQL, where SQL decides every row
            rows = index.list_rows(Filter(**criteria))
            assert rows is None or rows == [list_row(a) for a in wanted]
        # `streaks` finds the chains from the light rows, then reads their summaries
        # `streaks` keeps the chains in the index: any edit between two commands drops them
        chains = index.remembered("streak-chains", lambda: streak_chains(index.links()))
        assert index.remembered("streak-chains", list) == chains
        chained = index.summaries_of(sorted({i for _, ids in chains for i in ids}))
        assert [s.to_json() for s in streaks_of(chains, {a.id: a for a in chained})] == found["streaks"]
        # the gate's check of one objective's streak is that objective's streak among them all
        for objective in sorted({a.objective for a in every if a.objective is not None}):
            alone = [s.to_json() for s in streaks(every, objective)]
            assert alone == [s for s in found["streaks"] if s["objective"] == objective]
        # the lineage each id's `show` and `lineage` read holds the whole of what a full read finds
        full = {a.id: a for a in load_directory(root).attempts}
        # the gate reads only the attempts its checks need, and decides as on every attempt
        for attempt in full.values():
            for proposal in (attempt, attempt.model_copy(update={"varied_from": f"{attempt.id}-x"})):
                narrowed = check_gate(proposal, read_gate_inputs(index, proposal, root)).to_json()
                full_report = check_gate(proposal, gate_inputs_of_every_attempt(proposal, every, root)).to_json()
                assert narrowed == full_report, (proposal.id, proposal.varied_from, narrowed, full_report)
        for attempt_id in full:
            wanted = set(index.lineage_ids(attempt_id))
            chain = lineage_json(attempt_id, {a.id: a for a in index.summaries_of(sorted(wanted))})
            assert chain == found["lineage"][attempt_id], attempt_id
            assert_dossier_as_through_models(index, attempt_id)
        return found
    finally:
        index.close()


def assert_dossier_as_through_models(index: Any, attempt_id: str) -> None:
    """`show`'s dossier of ``attempt_id``, read off the files the index vouches for
    (records/dumped.py), is word for word the one read through the models."""
    from ptreg.store.lineage_files import load_ids
    from ptreg.store.lineage_read import read_lineage
    from ptreg.views.dossier import render_json, render_markdown, render_text, sections

    def pages(attempt: Any, by_id: Any, record_file: str | None) -> tuple[str, str, str]:
        parts = sections(attempt, by_id, index.vocabularies(), record_file, index.root)
        as_json = json.dumps(render_json(attempt, parts))  # as printed: key order and 60 against 60.0 count
        return render_text(attempt, parts, 60), render_markdown(attempt, parts), as_json

    def through_models() -> Any:
        registry = load_ids(index.root, index.lineage_ids(attempt_id))
        record = registry.record_of(attempt_id)
        return pages(record.attempt, registry.by_id(), record.file)

    lineage = outcome(lambda: read_lineage(index, attempt_id))
    if isinstance(lineage, tuple) or lineage.through_models:
        return  # read as through_models() reads it, by the same code
    assert pages(lineage.attempt, lineage.by_id, lineage.record_file) == through_models(), attempt_id


def outcome(compute: Any) -> Any:
    """What ``compute()`` gives, or the error it stops with."""
    from ptreg.errors import PtregError

    try:
        return compute()
    except PtregError as exc:
        return ("error", str(exc), exc.exit_code)


def assert_index_agrees(root: Path) -> None:
    """The query index of ``root`` (brought up to date) answers every query as a full read does."""
    assert by_index(root) == by_full_read(root)


def block_after(page: Path, text: str, label: str, language: str) -> str:
    """The fenced block of ``language`` that follows ``label`` in a docs page's text: what a
    walkthrough test takes from the page it follows."""
    found = re.search(rf"{re.escape(label)}\n\n```{language}\n(.*?)```", text, re.S)
    assert found, f"{page.relative_to(REPO)} has no {language} block after {label!r}"
    return found.group(1)


# --------------------------------------------------------------------------- an attempt with many runs

ARMS_HARNESS = "import sys\n"  # never run: the runs below are written, not measured
ARMS_SPEC: dict[str, Any] = {
    "name": "graded-answers",
    "workload": "command",
    "command": ["python3", "harness.py"],
    "arms": {"baseline": {}, "candidate": {}},
    "baseline": "baseline",
    "inputs": ["items.jsonl"],
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 60,
}
MANY_RUNS_ATTEMPT = "graded-candidate"


def _plan(worked_if: str) -> dict[str, Any]:
    """An analysis plan as `ptreg new --worked-if` registers it."""
    from ptreg.records.analysis_plan import Plan, PlanRule
    from ptreg.records.condition import render
    from ptreg.records.condition_grammar import parse

    tree = parse(worked_if)
    return Plan(worked_if=PlanRule(text=render(tree), tree=tree), runs=1).model_dump(mode="json")


def registry_with_runs(root: Path, n: int, items: int = 60) -> str:
    """A registry at ``root`` (its project folder is ``root.parent``) with a frozen command
    evaluator of two arms scored item by item, and one attempt under it with ``n`` complete runs,
    an hour apart, written as `ptreg run` leaves them (nothing is measured): the size of a real
    project's history for `history`, `show`, `compare` and `next`. Returns the attempt's id."""
    import random

    from ptreg import __version__
    from ptreg.engine.workloads.command import CommandWorkload
    from ptreg.gate.freezing import freeze
    from ptreg.records.run_results import (
        Cell,
        CodeIdentity,
        Measurement,
        MetricSample,
        PluginCode,
        Provenance,
        Roles,
        new_results,
    )

    project = root.parent
    project.mkdir(parents=True, exist_ok=True)
    (project / "harness.py").write_text(ARMS_HARNESS, encoding="utf-8")
    (project / "items.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(items)), encoding="utf-8")
    spec_path = project / "graded-answers.json"
    spec_path.write_text(json.dumps(ARMS_SPEC), encoding="utf-8")
    write_registry(root, [complete_record("plain")])
    frozen = freeze(root, spec_path).evaluator
    record = complete_record(
        MANY_RUNS_ATTEMPT,
        name="Graded candidate answers",
        family="eval",
        kind="model-evaluation",
        objective="command-latency",
        status="not-tried",
        evidence=None,
        lesson=None,
        next_action=None,
        evaluator=frozen.ref,
        plan=_plan(worked_if_for(ARMS_SPEC)),
    )
    (root / f"{MANY_RUNS_ATTEMPT}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    workload = CommandWorkload()
    draw = random.Random(47)  # seeded: the same registry every time
    for index in range(n):
        day, hour = divmod(index, 24)
        started = f"2026-11-{1 + day:02d}T{hour:02d}:00:00Z"
        run_id = started.replace("-", "").replace(":", "")
        cells = []
        for arm, rate in (("baseline", 0.6), ("candidate", 0.65)):
            samples = []
            # a harness scores an item alike in each round, mostly: a few answers flip
            answered = {f"q{i}": float(draw.random() < rate) for i in range(items)}
            for repeat in range(ARMS_SPEC["repeats"]):
                scored = {item: 1.0 - score if draw.random() < 0.05 else score for item, score in answered.items()}
                samples.append(
                    MetricSample(
                        repeat=repeat,
                        seed=repeat,
                        values={"score": sum(scored.values()) / items},
                        items={"score": scored},
                        wall_seconds=1.0 + 0.1 * draw.random(),
                        peak_memory_mb=30.0 + draw.random(),
                    )
                )
            cell = Cell(backend=arm, config="all", status="measured")
            workload.summarize(frozen.spec, cell, samples)
            cells.append(cell)
        workload.compare(frozen.spec, cells, Roles(reference=None, peer=None))
        results = new_results(
            frozen.spec,
            Measurement([], cells, Roles(reference=None, peer=None), [], "complete", None),
            Provenance(
                ["ptreg", "run", MANY_RUNS_ATTEMPT],
                started,
                started.replace(":00:00Z", ":01:00Z"),
                frozen.evaluator_version,
                frozen=frozen,
                attempt=MANY_RUNS_ATTEMPT,
                run_id=run_id,
                # one commit of the project throughout: every earlier run is of A's code
                code=CodeIdentity(
                    ptreg_version=__version__,
                    commit="c" * 40,
                    dirty=False,
                    workload=PluginCode(
                        target="ptreg.engine.workloads.command:CommandWorkload",
                        distribution="ptreg",
                        version=__version__,
                        digest="0" * 64,
                    ),
                    arms={},
                    repository_code=True,
                ),
            ),
        )
        add_run(root, results.model_dump(mode="json"))
    return MANY_RUNS_ATTEMPT


def project_lineage(root: Path, *attempt_ids: str) -> Path:
    """A registry at ``root`` holding some attempts of this project's own (``attempts/``) and
    their ancestors, with their evaluators and runs: for a test about a few pages, which a build
    of the whole project registry would spend most of its time drawing others around."""
    source = REPO / "attempts"
    root.mkdir(parents=True)
    shutil.copy(source / "registry.json", root)
    shutil.copytree(source / "vocabulary", root / "vocabulary")
    (root / "evaluators").mkdir()
    for attempt_id in attempt_ids:
        chain: str | None = attempt_id
        while chain is not None and not (root / f"{chain}.json").exists():
            record = json.loads((source / f"{chain}.json").read_text(encoding="utf-8"))
            shutil.copy(source / f"{chain}.json", root)
            for ref in {record.get("evaluator")} | {r.get("evaluator") for r in record.get("runs", [])}:
                if ref and (source / "evaluators" / f"{ref}.json").is_file():
                    shutil.copy(source / "evaluators" / f"{ref}.json", root / "evaluators")
            if (source / "runs" / chain).is_dir():
                shutil.copytree(source / "runs" / chain, root / "runs" / chain)
            chain = record.get("varied_from")
    return root


def ptreg_in_process(cwd: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ptreg ARGS`` run in ``cwd`` with the environment ``env`` (this one's when None), through
    the CLI's own entry point but in this process, with what it says captured: for tests whose
    subject is what a command does, not the process boundary, this skips the start of Python and
    of ptreg's imports on every call. Working directory, environment and the temporary folder
    (tempfile caches TMPDIR) are put back as they were."""
    import contextlib
    import io
    import tempfile

    from ptreg.cli import main

    saved_env, saved_cwd, saved_tempdir = dict(os.environ), os.getcwd(), tempfile.tempdir
    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        tempfile.tempdir = None  # read TMPDIR afresh, as a new process would
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
    if code is None:
        code = 0
    assert isinstance(code, int), f"exit code {code!r} is not an int (stderr: {err.getvalue()!r})"
    return subprocess.CompletedProcess(["ptreg", *map(str, args)], code, out.getvalue(), err.getvalue())


def propose_in_process(root: Path, ref: str, attempt_id: str, issue: str) -> None:
    """What ``propose_for_run`` proposes, through the CLI in this process: for tests whose
    subject is the run that follows, not writers contending for the registry."""
    done = ptreg_in_process(
        Path.cwd(),
        [
            *("-r", str(root), "new", "--id", attempt_id, "--name", attempt_id, "--family", "runtime-perf"),
            *("--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "vendor-blas"),
            *("--question", f"What does {attempt_id} change?", "--evaluator", ref, "--budget-seconds", "600"),
            *("--tracking-issue", issue, "--worked-if", plan_flags(root, ref)[1], "--no-input", "--json"),
        ],
        env_without_hooks(),
    )
    assert done.returncode == 0, done.stderr
