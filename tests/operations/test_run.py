"""`ptreg run`, `bench`, `conclude` and `backends`: the benchmark engine end to end, on the tiny
config, with real worker processes. No assertion here is about speed."""

from __future__ import annotations

import json
import os
import signal
import statistics
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from helpers import (
    SCHEMAS,
    assert_one_line_error,
    complete_record,
    freeze_evaluator,
    plan_flags,
    snapshot,
    write_registry,
)
from ptreg.engine.environment import worker_variables
from ptreg.engine.plan import round_order

TINY = {
    "name": "tiny-train",
    "workload": "tinygpt-train",
    "metric": "ms-per-step",
    "configs": ["tiny"],
    "backends": ["naive", "numpy-blas"],
    "baseline": "numpy-blas",
    "warmup_steps": 1,
    "timed_steps": 2,
    "repeats": 2,
    "threads": 1,
    "tolerance": {"rtol": 1e-4, "atol": 1e-6},
    "max_relative_spread": 5.0,
}


def propose(
    root: Path, ref: str, attempt_id: str = "tiny-e2e", seconds: str = "600", issue: str = "#4", *extra: str
) -> None:
    from ptreg.cli import main

    try:
        main(
            [
                "-r",
                str(root),
                "new",
                "--id",
                attempt_id,
                "--name",
                "Tiny end to end",
                "--family",
                "runtime-perf",
                "--kind",
                "runtime-benchmark",
                "--objective",
                "training-step-time",
                "--method",
                "vendor-blas",
                "--question",
                f"Where does the tiny step's time go ({attempt_id})?",
                "--evaluator",
                ref,
                "--budget-seconds",
                seconds,
                "--tracking-issue",
                issue,
                *plan_flags(root, ref),
                "--no-input",
                *extra,
            ]
        )
    except SystemExit as exc:
        assert not exc.code


@pytest.fixture
def reg(tmp_path: Path) -> Path:
    return write_registry(tmp_path / "reg", [complete_record("blocked-fwd", methods=["cache-blocking"])])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> dict[str, Any]:
    """One real run, shared by the tests that only read it (a run costs a few seconds)."""
    from ptreg.cli import main

    root = write_registry(tmp_path_factory.mktemp("run") / "reg", [complete_record("blocked-fwd")])
    ref = freeze_evaluator(root, **TINY)
    propose(root, ref)
    try:
        main(["-r", str(root), "run", "tiny-e2e", "--json"])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    folders = list((root / "runs" / "tiny-e2e").iterdir())
    return {"root": root, "ref": ref, "code": code, "folders": folders}


def test_run_writes_a_whole_run_folder_that_validates(tiny_run, cli) -> None:
    assert tiny_run["code"] == 0
    [folder] = tiny_run["folders"]
    results = json.loads((folder / "results.json").read_text())
    Draft202012Validator(json.loads((SCHEMAS / "run-results.schema.json").read_text())).validate(results)
    assert results["status"] == "complete" and results["evaluator"] == tiny_run["ref"]
    assert results["run_id"] == folder.name and results["attempt"] == "tiny-e2e"
    assert results["command"][:3] == ["ptreg", "-r", str(tiny_run["root"])]
    assert [p["passed"] for p in results["parity"]] == [True, True]
    for cell in results["cells"]:
        assert cell["status"] == "measured"
        assert len(cell["step_samples"]) == TINY["timed_steps"] * TINY["repeats"]
        assert cell["ms_per_step"]["n"] == TINY["repeats"]
        assert cell["ms_per_step"]["min"] <= cell["ms_per_step"]["median"] <= cell["ms_per_step"]["max"]
        attribution = cell["attribution"]
        shares = sum(attribution[k]["share"] for k in ("forward", "backward_da", "backward_db", "other"))
        assert shares + sum(op["share"] for op in attribution["ops"].values()) == pytest.approx(1.0)
        assert attribution["bounding_kernel"] in ("forward", "backward_da", "backward_db")
        assert cell["worker"]["threads"]["requested"] == 1
    naive = next(c for c in results["cells"] if c["backend"] == "naive")
    blas = next(c for c in results["cells"] if c["backend"] == "numpy-blas")
    assert naive["vs_naive"] == pytest.approx(1.0)
    # a ratio is the median of the per-round ratios, each pairing the two repeats of one round
    by_round = {
        r: sum(s["seconds"] for s in naive["step_samples"] if s["repeat"] == r)
        / sum(s["seconds"] for s in blas["step_samples"] if s["repeat"] == r)
        for r in range(TINY["repeats"])
    }
    assert blas["vs_naive"] == pytest.approx(statistics.median(by_round.values()))
    assert blas["vs_naive_ratio"]["n"] == TINY["repeats"] and "t" in blas["vs_naive_ratio"]["ci"]["method"]
    [config] = results["rounds"]
    assert [sorted(order) for order in config["orders"]] == [["naive", "numpy-blas"]] * TINY["repeats"]
    # the run's own order seed, recorded, draws its orders again
    seed = config["order_seed"]
    assert config["orders"] == [round_order(seed, "tiny", r, ["naive", "numpy-blas"]) for r in range(TINY["repeats"])]
    environment = json.loads((folder / "environment.json").read_text())
    for key in ("ptreg_version", "git", "python", "numpy_version", "numba_version", "blas", "cpu", "os", "hostname"):
        assert key in environment
    assert "OPENBLAS_CORETYPE" in environment["variables"] and "OPENBLAS_L2_SIZE" in environment["variables"]
    assert environment["variables"]["OPENBLAS_CORETYPE"] == os.environ.get("OPENBLAS_CORETYPE")
    # the thread rule every worker ran under, and what each backend ran with (these two say nothing)
    assert environment["worker_variables"] == worker_variables()
    assert environment["backend_configuration"] == {"naive": None, "numpy-blas": None}
    result = cli("-r", tiny_run["root"], "validate")
    assert result.code == 0, result.out + result.err


def test_run_links_the_record_and_show_renders_it(tiny_run, cli) -> None:
    root = tiny_run["root"]
    [folder] = tiny_run["folders"]
    record = json.loads((root / "tiny-e2e.json").read_text())
    assert record["status"] == "not-tried"
    assert record["runs"] == [
        {
            "run_id": folder.name,
            "status": "complete",
            "evaluator": tiny_run["ref"],
            "started_at": record["runs"][0]["started_at"],
            "finished_at": record["runs"][0]["finished_at"],
        }
    ]
    assert record["evidence"].startswith(f"Run {folder.name} ({tiny_run['ref']}, complete): naive reached tiny ")
    assert "numpy-blas reached tiny" in record["evidence"] and "over naive" in record["evidence"]
    assert record["evidence_sources"] == [f"runs/tiny-e2e/{folder.name}/results.json"]
    shown = cli("-r", root, "show", "tiny-e2e")
    assert shown.code == 0
    assert f"Run {folder.name}" in shown.out
    assert "Per-kernel attribution" in shown.out and "bounds the step" in shown.out
    markdown = cli("-r", root, "show", "tiny-e2e", "--format", "markdown")
    assert "| config" in markdown.out


def test_conclude_then_no_second_run(tiny_run, cli) -> None:
    root = tiny_run["root"]
    before = snapshot(root)
    refused = cli("-r", root, "conclude", "tiny-e2e", "--status", "failed", "--lesson", "x", "--next-action", "y")
    assert_one_line_error(refused, 1, "is not what its plan decides worked", "--deviation")
    deviating = ["--status", "failed", "--deviation", "Tiny shapes say nothing.", "--lesson", "x", "--next-action", "y"]
    refused = cli("-r", root, "conclude", "tiny-e2e", *deviating)
    assert_one_line_error(refused, 1, "failure_reason")
    assert snapshot(root) == before
    done = cli(
        "-r",
        root,
        "conclude",
        "tiny-e2e",
        "--lesson",
        "BLAS wins at tiny shapes.",
        "--next-action",
        "Measure the larger configs.",
    )
    assert done.code == 0, done.err
    record = json.loads((root / "tiny-e2e.json").read_text())
    assert record["status"] == "worked" and record["failure_reason_confidence"] == "not-applicable"
    assert record["plan_decision"]["status"] == "worked" and "deviation" not in record
    assert record["source"].startswith("runs/tiny-e2e/")
    checked = cli("-r", root, "validate", "--check-sources", root / "tiny-e2e.json")
    assert checked.code == 0, checked.out
    again = cli("-r", root, "run", "tiny-e2e")
    assert_one_line_error(again, 1, "concluded")


def test_run_refuses_when_the_gate_no_longer_admits(reg: Path, cli) -> None:
    ref = freeze_evaluator(reg, **TINY)
    propose(reg, ref)
    evaluator_file = reg / "evaluators" / f"{ref}.json"
    evaluator_file.write_text(evaluator_file.read_text().replace('"repeats": 2', '"repeats": 3'))
    before = snapshot(reg)
    result = cli("-r", reg, "run", "tiny-e2e")
    assert_one_line_error(result, 1, "gate")
    assert snapshot(reg) == before


def test_conclude_needs_a_run_and_exact_needs_a_complete_one(reg: Path, cli) -> None:
    ref = freeze_evaluator(reg, **TINY)
    propose(reg, ref)
    before = snapshot(reg)
    result = cli("-r", reg, "conclude", "tiny-e2e", "--status", "worked", "--lesson", "x", "--next-action", "y")
    assert_one_line_error(result, 1, "no run")
    assert (
        cli("-r", reg, "conclude", "tiny-e2e", "--status", "sideways", "--lesson", "x", "--next-action", "y").code == 2
    )
    assert snapshot(reg) == before


def test_budget_too_small_stops_with_budget_exhausted_and_keeps_what_finished(reg: Path) -> None:
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    ref = freeze_evaluator(reg, **{**TINY, "configs": ["tiny", "small"]})
    propose(reg, ref, "tiny-budget", seconds="60", issue="#9")
    # A clock that jumps past the budget once numpy-blas starts its second round: deterministic,
    # whatever the speed of the machine.
    offset = [0.0]

    def clock() -> float:
        import time

        return time.monotonic() + offset[0]

    def progress(event) -> None:
        if event.task == "numpy-blas/tiny" and event.phase.startswith("round 2/"):
            offset[0] = 3600.0

    done = run_attempt(reg, "tiny-budget", ["test"], progress=progress, clock=clock)
    results = read_results(done.folder)
    assert results.status == "budget-exhausted"
    statuses = {(c.backend, c.config): c.status for c in results.cells}
    # the budget stops the config's rounds: both its cells keep their whole repeats
    assert statuses[("naive", "tiny")] == "budget-exhausted" and statuses[("numpy-blas", "tiny")] == "budget-exhausted"
    assert statuses[("naive", "small")] == "not-started" and statuses[("numpy-blas", "small")] == "not-started"
    for cell in results.cells[:2]:
        assert cell.ms_per_step is not None and cell.ms_per_step.n >= 1, "round 1 was whole for both"
    blas = next(c for c in results.cells if c.backend == "numpy-blas")
    assert blas.vs_naive_ratio is not None and blas.vs_naive_ratio.n >= 1
    assert results.rounds is not None and results.rounds[0].stopped.startswith("stopped by the budget")
    assert done.attempt.runs[-1].status == "budget-exhausted"


def test_a_worker_killed_mid_cell_fails_only_that_cell(reg: Path) -> None:
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    ref = freeze_evaluator(reg, **{**TINY, "timed_steps": 300, "repeats": 3})  # long enough to be caught mid-cell
    propose(reg, ref, "tiny-kill", issue="#8")
    killed: list[int] = []

    def progress(event) -> None:
        # Kill the naive worker once it is into its timed steps.
        if event.task == "naive/tiny" and event.phase.endswith("timed") and event.pid and not killed:
            killed.append(event.pid)
            os.kill(event.pid, signal.SIGKILL)

    done = run_attempt(reg, "tiny-kill", ["test"], progress=progress)
    results = read_results(done.folder)
    assert killed
    naive, blas = results.cells
    assert naive.status == "failed" and "SIGKILL" in naive.reason
    assert naive.step_samples, "the samples that reached the runner before the kill are kept"
    assert blas.status == "measured" and blas.ms_per_step is not None
    assert results.status == "failed" and "naive/tiny" in results.reason


def test_bench_prints_tables_and_writes_nothing(reg: Path, cli, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    result = cli(
        "bench",
        "--backend",
        "numpy-blas",
        "--backend",
        "naive",
        "--workload",
        "kernels",
        "--config",
        "tiny",
        "--warmup-steps",
        "1",
        "--timed-steps",
        "2",
        "--repeats",
        "2",
    )
    assert result.code == 0, result.err
    assert "Kernels at each layer shape" in result.out and "vs numpy-blas" in result.out
    assert snapshot(tmp_path) == before


def test_bench_refuses_unknown_backends_and_bad_options(cli) -> None:
    assert_one_line_error(cli("bench", "--backend", "quantum"), 2, "quantum")
    assert_one_line_error(cli("bench", "--backend", "naive", "--config", "huge"), 2, "--config")
    assert_one_line_error(cli("bench", "--backend", "naive", "--workload", "inference"), 2, "workload")
    assert_one_line_error(cli("bench", "--backend", "naive", "--seconds", "nan"), 2, "--seconds")


def test_a_backend_that_cannot_run_is_one_line_in_bench_never_a_traceback(cli) -> None:
    """example-broken (tests/plugin_backend) is registered but unavailable: bench measures the
    others, says why that one was not measured, and exits 1."""
    result = cli(
        "bench", "-b", "example-broken", "-b", "naive", "-w", "kernels", "-c", "tiny", "--warmup-steps", "0",
        "--timed-steps", "1", "--repeats", "1",
    )  # fmt: skip
    assert result.code == 1
    assert "Traceback" not in result.out + result.err
    said = [line for line in result.err.splitlines() if "example-broken" in line and "error" in line]
    assert len(said) == 1 and "needs the imaginary package 'quantum-blas'" in said[0]
    assert "status: failed (1 cell(s) not measured: example-broken/tiny" in result.out


def test_backends_lists_every_registered_backend(cli) -> None:
    result = cli("backends", "--json")
    assert result.code == 0
    by_name = {b["name"]: b for b in json.loads(result.out)}
    assert {"naive", "blocked-numpy", "numba", "numpy-blas"} <= set(by_name)
    assert by_name["naive"]["order_preserving"] is True and by_name["naive"]["available"] is True
    assert by_name["numpy-blas"]["order_preserving"] is False
    text = cli("backends")
    assert text.code == 0 and "naive" in text.out and "bits of naive" in text.out


def test_a_worker_running_at_the_deadline_is_killed_and_its_samples_kept(reg: Path) -> None:
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    # Far more steps than 6 seconds allow: the naive worker is still running at the deadline.
    ref = freeze_evaluator(reg, **{**TINY, "timed_steps": 100_000, "repeats": 1})
    propose(reg, ref, "tiny-deadline", seconds="6", issue="#7")
    done = run_attempt(reg, "tiny-deadline", ["test"])
    results = read_results(done.folder)
    assert results.status == "budget-exhausted"
    # the run draws its own order: the backend that went first in round 0 met the deadline
    [config] = results.rounds
    cells = {c.backend: c for c in results.cells}
    running, waiting = cells[config.orders[0][0]], next(c for c in results.cells if c.backend != config.orders[0][0])
    assert running.status == "budget-exhausted" and "wall-clock" in running.reason
    assert running.step_samples, "steps finished before the kill are kept"
    assert running.ms_per_step is None, "no repeat finished, so there is no summary to claim"
    # the other was warm, waiting for its turn in the round: stopped with it, nothing to claim
    assert waiting.status == "budget-exhausted" and waiting.ms_per_step is None


def test_results_source_is_relative_to_the_registry_whatever_git_says(tmp_path: Path) -> None:
    import subprocess

    from ptreg.operations.running import results_source

    assert results_source(tmp_path / "reg", "a", "20261201T000000Z") == "runs/a/20261201T000000Z/results.json"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "reg").mkdir()
    assert results_source(tmp_path / "reg", "a", "20261201T000000Z") == "runs/a/20261201T000000Z/results.json"


def test_a_worker_over_the_memory_budget_is_killed(reg: Path) -> None:
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    ref = freeze_evaluator(reg, **TINY)
    # Any Python process is over 1 MB resident at once.
    propose(reg, ref, "tiny-memory", "600", "#6", "--budget-memory-mb", "1")
    results = read_results(run_attempt(reg, "tiny-memory", ["test"]).folder)
    assert results.status == "budget-exhausted"
    assert all(not p.passed and "the budget's 1 MB of memory" in p.summary for p in results.parity)
    assert all(c.status == "parity-failed" for c in results.cells)


def test_a_third_party_backend_is_measured_like_a_built_in(cli) -> None:
    result = cli(
        "bench",
        "--backend",
        "example-transpose",
        "--backend",
        "naive",
        "--config",
        "tiny",
        "--warmup-steps",
        "1",
        "--timed-steps",
        "2",
        "--repeats",
        "2",
        "--json",
    )
    assert result.code == 0, result.err
    results = json.loads(result.out)
    assert [p["passed"] for p in results["parity"]] == [True, True]
    plugin = next(c for c in results["cells"] if c["backend"] == "example-transpose")
    assert plugin["status"] == "measured" and plugin["vs_naive"] is not None


def test_a_run_that_measured_nothing_is_evidence_and_can_be_concluded(reg: Path, cli) -> None:
    from ptreg.operations.running import run_attempt

    ref = freeze_evaluator(reg, **TINY)
    propose(reg, ref, "tiny-nothing", "600", "#16", "--budget-memory-mb", "1")
    done = run_attempt(reg, "tiny-nothing", ["test"])
    assert done.results.status == "budget-exhausted"
    assert done.attempt.evidence is not None and "nothing was measured" in done.attempt.evidence
    (reg / "notes.md").write_text("the memory limit was set below any process\n")
    concluded = cli(
        "-r",
        reg,
        "conclude",
        "tiny-nothing",
        "--status",
        "inconclusive",
        "--lesson",
        "A 1 MB budget stops every worker before it measures.",
        "--next-action",
        "Propose again with a memory budget above a worker's size.",
        "--failure-reason",
        "The budget killed every worker at start.",
        "--confidence",
        "inferred",
        "--evidence",
        "Every worker passed 1 MB resident at once.",
        "--evidence-source",
        "notes.md",
    )
    assert concluded.code == 0, concluded.err
    record = json.loads((reg / "tiny-nothing.json").read_text())
    assert record["status"] == "inconclusive"
    assert record["evidence"].endswith("Every worker passed 1 MB resident at once.")
    assert "nothing was measured" in record["evidence"] and record["evidence_sources"][-1] == "notes.md"
    assert cli("-r", reg, "validate").code == 0


def test_an_adaptive_plan_stops_adding_rounds_once_every_ratio_is_narrow_enough(reg: Path) -> None:
    from ptreg.engine.stats import ADAPTIVE_MIN_ROUNDS, ADAPTIVE_PAIRED_METHOD
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    plan = {"repeats": None, "min_repeats": 3, "max_repeats": 40, "target_ci": 0.9}  # wide: met in a few rounds
    ref = freeze_evaluator(reg, **{**TINY, **plan})
    propose(reg, ref, "tiny-adaptive", issue="#11")
    results = read_results(run_attempt(reg, "tiny-adaptive", ["test"]).folder)
    assert results.status == "complete"
    [config] = results.rounds
    assert config.stopped.startswith("every ratio known within ±90%")
    # met in a few rounds, but an adaptive rule never stops before its floor of rounds
    assert ADAPTIVE_MIN_ROUNDS <= len(config.orders) < 40 and plan["min_repeats"] < ADAPTIVE_MIN_ROUNDS
    blas = next(c for c in results.cells if c.backend == "numpy-blas")
    assert blas.vs_naive_ratio is not None and blas.vs_naive_ratio.ci is not None
    assert blas.vs_naive_ratio.ci.method == ADAPTIVE_PAIRED_METHOD
    half = (blas.vs_naive_ratio.ci.high - blas.vs_naive_ratio.ci.low) / 2
    assert half <= 0.9 * blas.vs_naive_ratio.median


def test_a_budget_caps_the_rounds_of_an_adaptive_plan(reg: Path) -> None:
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    plan = {"repeats": None, "min_repeats": 2, "max_repeats": 40, "target_ci": 0.0001}  # never met
    ref = freeze_evaluator(reg, **{**TINY, **plan})
    propose(reg, ref, "tiny-capped", "600", "#12", "--budget-repeats", "3")
    results = read_results(run_attempt(reg, "tiny-capped", ["test"]).folder)
    [config] = results.rounds
    assert len(config.orders) == 3 and config.stopped == "3 rounds, the most the budget allows"


def test_a_run_in_a_pipe_says_each_round_and_why_its_config_stopped(reg: Path, cli) -> None:
    ref = freeze_evaluator(reg, **{**TINY, "repeats": 2})
    propose(reg, ref, "tiny-said", issue="#13")
    result = cli("-r", reg, "run", "tiny-said")
    assert result.code == 0, result.err
    said = [line for line in result.err.splitlines() if "tiny rounds" in line]
    assert [line.split(" (")[0] for line in said] == [
        "ptreg: tiny rounds: round 1 of at most 2",
        "ptreg: tiny rounds: round 2 of at most 2",
        "ptreg: tiny rounds: 2 rounds, as planned",
    ]


def test_run_records_the_code_it_measured(tiny_run) -> None:
    """Each backend's and the workload's module files, digested, so that compare's history is
    of unchanged code; the digest is of the files as they are on disk."""
    import hashlib

    from ptreg.engine.identity import source_files
    from ptreg.records.run_results import RunResults

    [folder] = tiny_run["folders"]
    results = RunResults.model_validate_json((folder / "results.json").read_text())
    assert results.code is not None and results.code.workload is not None
    assert results.code.workload.target.startswith("ptreg.engine.workloads.")
    assert set(results.code.arms) == set(results.spec.arm_names)
    for name, plugin in results.code.arms.items():
        files = source_files(plugin.target.split(":")[0])
        assert files and plugin.digest is not None
        again = hashlib.sha256()
        for path in files:
            data = path.read_bytes()
            again.update(f"{path.name}\0{len(data)}\0".encode())
            again.update(data)
        assert plugin.digest == again.hexdigest()
        assert results.cell_code(name) is not None
