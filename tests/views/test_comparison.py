"""`ptreg compare` and `ptreg history` where the truth is known: synthetic runs with a known
shift, noise and code (written as a run would write them), the history of unchanged code, runs
as the unit, the false discovery control, the refusals, and a real regression through the
engine."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import ttest_ind

from helpers import assert_one_line_error, complete_record, freeze_evaluator, propose_for_run, write_registry
from ptreg.engine.stats import holm, shift_from_history
from ptreg.engine.workloads.training import TrainingWorkload
from ptreg.records.counting import BlasPool, CountedCell, CountedUnder, CountedWorker
from ptreg.records.evaluator import EvaluatorSpec
from ptreg.records.run_results import (
    Cell,
    CodeIdentity,
    Measurement,
    PluginCode,
    Provenance,
    Roles,
    StepSample,
    new_results,
)
from ptreg.store.runs import write_run

BACKENDS = ["naive", "blocked-numpy", "numba", "numpy-blas"]
CONFIGS = ["tiny", "small", "medium"]
SPEC: dict[str, Any] = {
    "name": "synthetic",
    "workload": "tinygpt-train",
    "metric": "ms-per-step",
    "configs": CONFIGS,
    "backends": BACKENDS,
    "baseline": "numpy-blas",
    "warmup_steps": 0,
    "timed_steps": 1,
    "repeats": 8,
    "seed": 0,
    "threads": 1,
    "tolerance": {"rtol": 1e-4, "atol": 1e-6},
    "max_relative_spread": 5.0,
}
MACHINE = {
    "cpu": {"model": "Synthetic CPU", "features": ["avx2", "fma"], "machine": "x86_64", "usable_cores": 2},
    "blas": [{"internal_api": "openblas", "version": "0.3", "architecture": "Haswell", "num_threads": 2}],
    "numpy_version": "2.0",
    "numba_version": "0.60",
    "python": {"version": "3.11.7"},
    "variables": {"OPENBLAS_CORETYPE": None},
}
SHA = "ab" * 32
UNCHANGED = "0" * 64


def code(changed: set[str] | None = None) -> CodeIdentity:
    """The code a synthetic run measured: every backend's as it was, but ``changed``'s."""

    def plugin(name: str, digest: str) -> PluginCode:
        return PluginCode(target=f"synthetic.{name}:Backend", distribution="synthetic", version="1", digest=digest)

    return CodeIdentity(
        ptreg_version="0.1.0",
        commit=None,
        dirty=None,
        workload=plugin("workload", UNCHANGED),
        arms={b: plugin(b, "1" * 64 if b in (changed or set()) else UNCHANGED) for b in BACKENDS},
        repository_code=False,
    )


def synthetic_run(
    root: Path,
    attempt: str,
    started: str,
    rng: random.Random,
    *,
    noise: float = 0.02,
    drift: float = 0.0,
    slower: dict[tuple[str, str], float] | None = None,
    machine: dict[str, Any] | None = None,
    sha: str = SHA,
    spec_changes: dict[str, Any] | None = None,
    cell_drift: float = 0.0,
    changed: set[str] | None = None,
    known_code: bool = True,
    counted: CountedUnder | None = None,
) -> str:
    """A complete run whose every cell's repeats are 10 ms × its factor × one shared drift of
    the run × a drift of the cell's own × independent noise, written as ``ptreg run`` writes
    one; it measured the unchanged code but ``changed``'s (none known without ``known_code``)."""
    spec = EvaluatorSpec.model_validate({**SPEC, **(spec_changes or {})})
    moment = math.exp(rng.gauss(0, drift))
    cells = []
    for config in spec.configs:
        for backend in spec.backends:
            factor = (slower or {}).get((config, backend), 1.0) * math.exp(rng.gauss(0, cell_drift))
            samples: list[Any] = [
                StepSample(
                    repeat=r,
                    step=0,
                    seconds=0.010 * factor * moment * math.exp(rng.gauss(0, noise)),
                    kernel_seconds={},
                    loss=1.0,
                    # a count moves with the code only (and by a few instructions between repeats)
                    instructions=round(2e6 * factor) + rng.randrange(50) if counted else None,
                )
                for r in range(spec.most_repeats)
            ]
            cell = Cell(backend=backend, config=config, status="measured")
            TrainingWorkload().summarize(spec, cell, samples)
            cells.append(cell)
    run_id = started.replace("-", "").replace(":", "")
    results = new_results(
        spec,
        Measurement([], cells, Roles(reference="naive", peer="numpy-blas"), [], "complete", None, counted=counted),
        Provenance(
            ["synthetic"],
            started,
            started,
            2,
            attempt=attempt,
            run_id=run_id,
            code=code(changed) if known_code else None,
        ),
    )
    results = results.model_copy(update={"evaluator": f"synthetic@{sha[:12]}", "evaluator_sha256": sha})
    write_run(root, results, machine or MACHINE)
    return f"{attempt}/{run_id}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_registry(tmp_path / "reg", [complete_record("base")])


def hour(n: int) -> str:
    return f"2026-12-01T{n:02d}:00:00Z"


def test_a_10_percent_slowdown_is_found_and_nothing_else_moves(root: Path, cli) -> None:
    """Ten runs of unchanged code an hour apart (ten batches) on a quiet machine: a 10% slowdown
    of one cell stands out beyond what run effects as heavy-tailed as t(2) could do."""
    rng = random.Random(1)
    quiet: dict[str, Any] = {"noise": 0.004, "drift": 0.001, "spec_changes": {"repeats": 12}}
    for n in range(10):  # history: unchanged code, same evaluator and machine
        synthetic_run(root, "history", hour(n), rng, **quiet)
    a = synthetic_run(root, "before", hour(11), rng, **quiet)
    b = synthetic_run(root, "after", hour(12), rng, slower={("small", "numba"): 1.10}, changed={"numba"}, **quiet)
    result = cli("-r", root, "compare", a, b, "--json")
    assert result.code == 0, result.err
    found = json.loads(result.out)
    verdicts = {(c["config"], c["backend"]): c["verdict"] for c in found["cells"]}
    assert verdicts.pop(("small", "numba")) == "slower"
    assert set(verdicts.values()) == {"no difference resolved"}
    assert found["same_machine"] and found["method"].startswith("batches of runs as the unit")
    assert {len(c["history"]) for c in found["cells"]} == {11} and found["cells"][0]["history"][0] == a
    assert {c["batches"] for c in found["cells"]} == {11} and found["adjustment"] == "Holm"
    assert {c["same_code"] for c in found["cells"] if c["backend"] == "numba"} == {False}
    assert (found["slower"], found["faster"]) == (1, 0)
    assert cli("-r", root, "compare", a, b, "--fail-on-regression").code == 1
    shown = cli("-r", root, "compare", a, b)
    assert "1 slower, 0 faster" in shown.out and "Holm across the cells" in shown.out


def test_runs_of_unchanged_code_raise_an_alarm_in_at_most_5_percent_of_comparisons() -> None:
    """12 cells per comparison, each with a drift of its own (2% to 30%) and a history of 4
    runs: B drawn like them. A comparison that flags any cell is a false alarm; at least 95%
    of 400 seeds raise none, and against 10 runs a change 8 times a cell's drift is found in
    most seeds."""
    quiet = found_it = 0
    for seed in range(400):
        rng = random.Random(seed)
        ps = []
        for cell in range(12):
            sd = 0.02 + 0.28 * cell / 11
            history = [rng.gauss(0, sd) for _ in range(4)]
            moved = shift_from_history(history, rng.gauss(0, sd), threshold=0.01)
            assert moved is not None
            ps.append(moved.p)
        quiet += all(q >= 0.05 for q in holm(ps))
        history = [rng.gauss(0, 0.02) for _ in range(10)]
        moved = shift_from_history(history, 8 * 0.02 + rng.gauss(0, 0.02), threshold=0.01)
        found_it += moved is not None and moved.p < 0.05
    assert quiet / 400 >= 0.95
    assert found_it / 400 >= 0.8


def test_too_short_a_history_gives_no_verdict_and_says_how_many_runs_would(root: Path, cli) -> None:
    rng = random.Random(2)
    a = synthetic_run(root, "before", hour(1), rng, noise=0.001)
    b = synthetic_run(root, "after", hour(2), rng, noise=0.001, slower={("tiny", "naive"): 3.0}, changed={"naive"})
    found = json.loads(cli("-r", root, "compare", a, b, "--json", "--fail-on-regression").out)
    assert found["slower"] == 0 and found["without_verdict"] == len(found["cells"])
    assert {c["runs_needed"] for c in found["cells"]} == {3}
    assert {c["verdict"] for c in found["cells"]} == {"no verdict: 1 run of A's code, 4 needed (3 more)"}
    shown = cli("-r", root, "compare", a, b)
    said = " ".join(shown.out.split())
    assert shown.code == 0 and "12 cells without a verdict" in said and "3 more runs of A's code" in said
    # Runs of unknown code are no one's history; named with --history they are.
    older = [synthetic_run(root, "old", hour(n), rng, noise=0.001, known_code=False) for n in (3, 4, 5)]
    assert json.loads(cli("-r", root, "compare", a, b, "--json").out)["without_verdict"] == 12
    named = json.loads(cli("-r", root, "compare", a, b, "--json", *[f"--history={r}" for r in older]).out)
    assert named["named_history"] and {len(c["history"]) for c in named["cells"]} == {4}
    assert named["slower"] == 1
    assert_one_line_error(cli("-r", root, "compare", a, b, "--history", b), 2, "that is run B")
    assert_one_line_error(cli("-r", root, "compare", a, b, "--history", "nope"), 2, "no run 'nope'")


def test_a_run_of_changed_code_does_not_enter_the_history(root: Path, cli) -> None:
    """One 1.5x run of changed numba among four unchanged ones: the history of numba's cells
    leaves it out (so the next regression is not hidden behind the spread it would add), and
    the cells of the backends it did not change keep it."""
    rng = random.Random(12)
    steady: dict[str, Any] = {"noise": 0.01, "cell_drift": 0.01}
    refs = [synthetic_run(root, "unchanged", hour(n), rng, **steady) for n in range(3)]
    odd = synthetic_run(
        root, "tried", hour(3), rng, slower={(c, "numba"): 1.5 for c in CONFIGS}, changed={"numba"}, **steady
    )
    a = synthetic_run(root, "unchanged", hour(4), rng, **steady)
    b = synthetic_run(root, "next", hour(5), rng, slower={("medium", "numba"): 1.10}, changed={"numba"}, **steady)
    found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    numba = next(c for c in found["cells"] if (c["config"], c["backend"]) == ("medium", "numba"))
    naive = next(c for c in found["cells"] if (c["config"], c["backend"]) == ("medium", "naive"))
    assert odd not in numba["history"] and len(numba["history"]) == 4 and odd in naive["history"]
    assert numba["verdict"] == "slower" and found["slower"] == 1
    assert set(refs) < set(numba["history"])


def test_ten_unchanged_runs_and_a_slower_third_party_backend(root: Path, cli) -> None:
    """Ten runs of unchanged code an hour apart, an eleventh whose backend is 1.5x slower, each
    cell with a drift of its own. Only the slowed backend's cells are flagged, and pairs of
    unchanged runs pass --fail-on-regression."""
    rng = random.Random(21)
    steady: dict[str, Any] = {"noise": 0.02, "cell_drift": 0.01, "drift": 0.01}
    unchanged = [synthetic_run(root, "unchanged", hour(n), rng, **steady) for n in range(10)]
    slowed = {(c, "numba"): 1.5 for c in CONFIGS}
    fifth = synthetic_run(root, "slowed", hour(11), rng, slower=slowed, changed={"numba"}, **steady)
    result = cli("-r", root, "compare", unchanged[-1], fifth, "--fail-on-regression")
    assert result.code == 1
    assert "3 slower, 0 faster" in result.out
    flagged = [line for line in result.out.splitlines() if line.rstrip().endswith("slower")]
    assert len(flagged) == 3 and all("numba" in line for line in flagged)
    for a, b in itertools.permutations(unchanged[-4:], 2):
        assert cli("-r", root, "compare", a, b, "--fail-on-regression").code == 0


def test_drift_between_runs_larger_than_their_spread_raises_no_alarm_once_the_history_is_there(root: Path, cli) -> None:
    """Each run's moment moves every cell by 6% (a standard deviation) while repeats scatter by
    1%: a test fed only the spread over repeats calls that drift a change; judged against the
    history's runs the same pairs raise no alarm."""
    rng = random.Random(3)
    refs = [synthetic_run(root, "unchanged", hour(n), rng, noise=0.01, drift=0.06) for n in range(8)]
    alarms = 0
    for a, b in itertools.pairwise(refs):
        found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
        assert {len(c["history"]) for c in found["cells"]} == {7}
        alarms += found["slower"] + found["faster"]
    assert alarms == 0
    # The same pairs, judged by the spread over repeats alone (Welch's t on the two runs' log
    # repeats, as compare once did), would be full of alarms.
    naive_alarms = 0
    for a, b in itertools.pairwise(refs):
        folder = lambda ref: root / "runs" / ref  # noqa: E731
        va = json.loads((folder(a) / "results.json").read_text())["cells"]
        vb = json.loads((folder(b) / "results.json").read_text())["cells"]
        ps = []
        for ca, cb in zip(va, vb, strict=True):
            sa = [math.log(s["seconds"]) for s in ca["step_samples"]]
            sb = [math.log(s["seconds"]) for s in cb["step_samples"]]
            ps.append(float(ttest_ind(sa, sb, equal_var=False).pvalue))
        naive_alarms += sum(q < 0.05 for q in holm(ps))
    assert naive_alarms > 0


def test_runs_on_different_machines_list_the_differences_and_give_no_verdict(root: Path, cli) -> None:
    rng = random.Random(4)
    a = synthetic_run(root, "here", hour(1), rng)
    elsewhere = {**MACHINE, "cpu": {**MACHINE["cpu"], "model": "Other CPU", "features": ["avx512f"]}}
    b = synthetic_run(root, "there", hour(2), rng, machine=elsewhere, slower={("tiny", "naive"): 2.0})
    found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    assert not found["same_machine"]
    assert any(line.startswith("CPU model: Synthetic CPU -> Other CPU") for line in found["machine_differences"])
    assert {c["verdict"] for c in found["cells"]} == {"not comparable: different machines"}
    shown = cli("-r", root, "compare", a, b).out
    assert shown.index("the machines differ") < shown.index("config")


def test_runs_under_different_evaluators_are_refused_unless_asked(root: Path, cli) -> None:
    rng = random.Random(5)
    a = synthetic_run(root, "one", hour(1), rng)
    b = synthetic_run(root, "two", hour(2), rng, sha="cd" * 32, spec_changes={"repeats": 5, "configs": ["tiny"]})
    assert_one_line_error(cli("-r", root, "compare", a, b), 1, "different evaluators", "configs, repeats")
    across = json.loads(cli("-r", root, "compare", a, b, "--across-evaluators", "--json").out)
    assert across["across_evaluators"] and {c["config"] for c in across["cells"]} == {"tiny"}
    assert "ACROSS EVALUATORS" in cli("-r", root, "compare", a, b, "--across-evaluators").out
    c = synthetic_run(root, "three", hour(3), rng, sha="ef" * 32, spec_changes={"threads": 2})
    assert json.loads(cli("-r", root, "compare", a, c, "--across-evaluators", "--json").out)["cells"] == []


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["before/20261201T010000", "before"], 2, "did you mean: before/20261201T010000Z"),
        (["befor", "before"], 2, "did you mean: before"),
        (["before", "before"], 2, "the same run"),
        (["before", "after", "--threshold", "1.5"], 2, "--threshold must be between 0 and 1"),
        (["before", "after", "--threshold", "0"], 2, "--threshold must be between 0 and 1"),
        (["before"], 2, "Missing argument"),
    ],
)
def test_bad_input_is_one_line(root: Path, cli, args: list[str], code: int, fragment: str) -> None:
    rng = random.Random(6)
    synthetic_run(root, "before", hour(1), rng)
    synthetic_run(root, "after", hour(2), rng)
    assert_one_line_error(cli("-r", root, "compare", *args), code, fragment)


def test_a_run_folder_that_does_not_validate_is_named(root: Path, cli) -> None:
    rng = random.Random(7)
    a = synthetic_run(root, "before", hour(1), rng)
    b = synthetic_run(root, "after", hour(2), rng)
    broken = root / "runs" / b / "results.json"
    broken.write_text('{"results_version": 3}')
    assert_one_line_error(cli("-r", root, "compare", a, b), 2, str(broken))


def test_history_lists_every_run_of_the_evaluator_oldest_first(root: Path, cli) -> None:
    rng = random.Random(8)
    for n in range(3):
        synthetic_run(root, "history", hour(n), rng, slower={("tiny", "naive"): 1.0 + 0.5 * n})
    rows = json.loads(cli("-r", root, "history", "--evaluator", "synthetic", "--json").out)
    naive = [r for r in rows if (r["config"], r["backend"]) == ("tiny", "naive")]
    assert [r["started_at"] for r in naive] == [hour(0), hour(1), hour(2)]
    assert naive[0]["versus_first"] is None and naive[2]["versus_first"] == pytest.approx(2.0, rel=0.05)
    assert naive[0]["ci_of"] == "typical value (true and median)"
    assert json.loads(cli("-r", root, "history", "history", "--json").out) == rows
    shown = cli("-r", root, "history", "history")
    assert shown.code == 0 and "3 complete runs" in shown.out
    assert_one_line_error(cli("-r", root, "history", "--evaluator", "synthetc"), 2, "did you mean: synthetic@")
    assert_one_line_error(cli("-r", root, "history"), 2, "give an ATTEMPT or --evaluator")


def test_history_names_a_run_it_cannot_read_and_reads_the_others(root: Path, cli) -> None:
    """A run whose medians are 0 (a forged file) is unreadable: left out of the history, with a
    warning naming its file and field, and the other runs listed."""
    rng = random.Random(9)
    for n in range(3):
        synthetic_run(root, "history", hour(n), rng)
    broken = root / "runs" / "history" / "20261201T010000Z" / "results.json"
    results = json.loads(broken.read_text(encoding="utf-8"))
    results["cells"][0]["ms_per_step"]["median"] = 0.0
    broken.write_text(json.dumps(results), encoding="utf-8")
    shown = cli("-r", root, "history", "--evaluator", "synthetic")
    assert shown.code == 0 and "2 complete runs" in shown.out, shown.out
    assert (
        shown.err
        == f"ptreg: warning: {broken}#/cells/0/ms_per_step/median: Input should be greater than 0 (got 0.0) (skipped)\n"
    )


# A timing assertion (two real runs on a shared machine): it failed under other load, so it runs
# with the stress and benchmark tests (`-m slow`); the tests above decide the same verdicts on
# samples made for them.
@pytest.mark.slow
def test_a_backend_made_slower_by_a_known_factor_is_found_through_the_engine(tmp_path: Path) -> None:
    """Two real runs under one evaluator; in the second, example-slowed (tests/plugin_backend)
    does each matmul three times."""
    root = write_registry(tmp_path / "reg", [complete_record("base")])
    spec = {
        "name": "slowed",
        "workload": "kernels",
        "metric": "gflops",
        "configs": ["tiny"],
        "backends": ["example-slowed", "numpy-blas"],
        "baseline": "numpy-blas",
        "warmup_steps": 2,
        "timed_steps": 20,
        "repeats": 5,
        "threads": 1,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "max_relative_spread": 5.0,
    }
    ref = freeze_evaluator(root, **spec)
    for attempt, issue, factor in (("as-it-was", "#1", "1"), ("three-times", "#2", "3")):
        propose_for_run(root, ref, attempt, issue)
        env = {**os.environ, "PTREG_EXAMPLE_SLOWDOWN": factor}
        done = subprocess.run(
            [sys.executable, "-m", "ptreg", "-r", str(root), "run", attempt],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "ptreg", "-r", str(root), "compare", "as-it-was", "three-times", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = json.loads(done.stdout)
    slowed = next(c for c in found["cells"] if c["backend"] == "example-slowed")
    assert slowed["verdict"] == "slower" and slowed["ratio"] > 2.0
    assert found["same_machine"]


def test_relative_to_a_backend_cancels_what_moves_a_whole_run(root: Path, cli) -> None:
    """Runs whose whole moment moves by 15% hide a 10% slowdown of one backend in absolute
    times; as a ratio to numpy-blas in the same round, it stands out and nothing else moves."""
    rng = random.Random(9)
    busy: dict[str, Any] = {"noise": 0.004, "drift": 0.15}
    for n in range(10):
        synthetic_run(root, "history", hour(n), rng, **busy)
    a = synthetic_run(root, "before", hour(11), rng, **busy)
    b = synthetic_run(root, "after", hour(12), rng, slower={("small", "numba"): 1.10}, changed={"numba"}, **busy)
    absolute = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    assert absolute["slower"] == 0 and absolute["relative_to"] is None
    relative = json.loads(cli("-r", root, "compare", a, b, "--relative-to", "numpy-blas", "--json").out)
    verdicts = {(c["config"], c["backend"]): c["verdict"] for c in relative["cells"]}
    assert verdicts.pop(("small", "numba")) == "slower"
    assert set(verdicts.values()) == {"no difference resolved"}
    assert not [k for k in verdicts if k[1] == "numpy-blas"]  # its own cells are the unit
    assert relative["relative_to"] == "numpy-blas"
    shown = cli("-r", root, "compare", a, b, "--relative-to", "numpy-blas").out
    assert "as a ratio to numpy-blas's time in the same round" in shown
    assert_one_line_error(cli("-r", root, "compare", a, b, "--relative-to", "mkl"), 2, "no such backend")


def counted_under(architecture: str = "Haswell") -> CountedUnder:
    worker = CountedWorker(
        cpu_features=["AVX2", "FMA3"],
        blas=[
            BlasPool(user_api="blas", internal_api="openblas", version="0.3", architecture=architecture, num_threads=1)
        ],
        marker_instructions=7000,
    )
    return CountedUnder(
        tool="callgrind",
        valgrind="valgrind-3.19.0",
        options=["--tool=callgrind"],
        hash_seed="0",
        environment={"OPENBLAS_NUM_THREADS": "1"},
        cells=[CountedCell(backend=b, config=c, worker=worker) for b in BACKENDS for c in CONFIGS],
    )


def test_two_counted_runs_compare_by_their_repeats(root: Path, cli) -> None:
    """Instruction counts do not drift between runs: two counted runs of unchanged code are no
    difference, with no history needed; 10% more work in one backend is slower, 1% is resolved
    (its interval leaves 1), and a count taken another way gives no verdict."""
    rng = random.Random(31)
    counting: dict[str, Any] = {"spec_changes": {"timer": "instructions", "threads": 1}, "counted": counted_under()}
    a = synthetic_run(root, "counted", hour(1), rng, noise=0.3, drift=0.3, **counting)
    same = synthetic_run(root, "again", hour(2), rng, noise=0.3, drift=0.3, **counting)
    found = json.loads(cli("-r", root, "compare", a, same, "--json", "--fail-on-regression").out)
    assert found["unit"] == "instructions" and found["method"].startswith("instruction counts")
    assert {c["verdict"] for c in found["cells"]} == {"no difference resolved"}
    slower = synthetic_run(root, "more", hour(3), rng, slower={("small", "numba"): 1.10}, **counting)
    result = cli("-r", root, "compare", a, slower, "--fail-on-regression")
    assert result.code == 1 and "instr" in result.out
    verdicts = {
        (c["config"], c["backend"]): c for c in json.loads(cli("-r", root, "compare", a, slower, "--json").out)["cells"]
    }
    assert verdicts.pop(("small", "numba"))["verdict"] == "slower"
    assert {c["verdict"] for c in verdicts.values()} == {"no difference resolved"}
    little = synthetic_run(root, "little", hour(4), rng, slower={("tiny", "naive"): 1.01}, **counting)
    cell = next(
        c
        for c in json.loads(cli("-r", root, "compare", a, little, "--json").out)["cells"]
        if (c["config"], c["backend"]) == ("tiny", "naive")
    )
    assert cell["low"] > 1.0 and cell["verdict"] == "no difference resolved"  # resolved, below the 5% threshold
    other = synthetic_run(root, "other", hour(5), rng, **{**counting, "counted": counted_under("SkylakeX")})
    found = json.loads(cli("-r", root, "compare", a, other, "--json").out)
    assert not found["same_machine"] and any("SkylakeX" in d for d in found["machine_differences"])
    assert {c["verdict"] for c in found["cells"]} == {"not comparable: different machines"}
    assert_one_line_error(cli("-r", root, "compare", a, same, "--history", other), 2, "run against run")


def minute(n: int) -> str:
    return f"2026-12-01T10:{n:02d}:00Z"


def test_a_history_taken_back_to_back_is_one_batch_and_gives_no_verdict(root: Path, cli) -> None:
    """Four runs a minute apart, then A: one session, whose shared state none of them can show
    apart from the code. No verdict, and the output says why; the same runs named with
    --history are grouped too. Runs of the same code on four other days give verdicts."""
    rng = random.Random(41)
    session = [synthetic_run(root, "base", minute(n), rng, noise=0.001) for n in range(4)]
    a = synthetic_run(root, "before", minute(4), rng, noise=0.001)
    b = synthetic_run(root, "after", hour(20), rng, noise=0.001, slower={("tiny", "naive"): 3.0}, changed={"naive"})
    found = json.loads(cli("-r", root, "compare", a, b, "--json", "--fail-on-regression").out)
    reason = "no verdict: history is 1 batch of 5 runs taken back to back; 4 batches needed (3 more runs, each apart)"
    assert {c["verdict"] for c in found["cells"]} == {reason}
    assert {(c["batches"], len(c["history"]), c["runs_needed"]) for c in found["cells"]} == {(1, 5, 3)}
    assert found["slower"] == 0 and found["without_verdict"] == 12
    assert cli("-r", root, "compare", a, b, "--fail-on-regression").code == 1  # a gate fails on no verdict
    assert cli("-r", root, "compare", a, b, "--fail-on-regression", "--no-verdict=pass").code == 0
    named = json.loads(cli("-r", root, "compare", a, b, "--json", *[f"--history={r}" for r in session]).out)
    assert {c["verdict"] for c in named["cells"]} == {reason}
    for day in (12, 13, 14):  # three more sessions, an hour or more apart: four batches with A's
        synthetic_run(root, "base", hour(day), rng, noise=0.001)
    found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    assert {c["batches"] for c in found["cells"]} == {4} and found["slower"] == 1


def test_a_heavy_tailed_run_effect_does_not_raise_an_alarm() -> None:
    """Run effects drawn from t(2) (5% scale), 12 cells, ten runs of history a day apart, B
    drawn like them, through judge_cell and decide: at most 5% of 600 comparisons flag any
    cell. Student's t on the mean and spread of the runs flagged 19% here: a run as wild as
    t(2) draws, one in a few dozen, looks like a change to it."""
    from ptreg.views.cell_verdicts import HistoryRun, decide, judge_cell

    alarms = 0
    for seed in range(600):
        rng = random.Random(seed)

        def centre(rng: random.Random = rng) -> float:
            return 0.05 * rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1, 2) / 2)

        cells = []
        for cell in range(12):
            history = [HistoryRun(f"r{n}", [0.01 * math.exp(centre())] * 3, hour(n), hour(n)) for n in range(10)]
            cells.append(judge_cell("c", str(cell), history, [0.01 * math.exp(centre())] * 3, 0.05))
        decide(cells, same_machine=True)
        alarms += any(c.verdict in ("slower", "faster") for c in cells)
    assert alarms / 600 <= 0.05


def test_holm_not_benjamini_hochberg_decides_which_cells_moved() -> None:
    """Four cells with p 0.01, 0.02, 0.03 and 0.04: Benjamini-Hochberg would call all four
    (every q is 0.04), which lets unchanged cells through whenever others changed. Holm calls
    the first only (its adjusted p's: 0.04, 0.06, 0.06, 0.06)."""
    from ptreg.views.cell_verdicts import CellShift, decide

    cells = [
        CellShift("c", str(i), 1.0, 1.2, 5, 5, history=list("abcd"), batches=4, ratio=1.2, p=p)
        for i, p in enumerate((0.01, 0.02, 0.03, 0.04))
    ]
    decide(cells, same_machine=True)
    assert [c.verdict for c in cells] == ["slower"] + ["no difference resolved"] * 3
    assert [c.q for c in cells] == pytest.approx([0.04, 0.06, 0.06, 0.06])


def test_counted_runs_default_to_a_1_percent_threshold(root: Path, cli) -> None:
    """Counts resolve 1%: a 2% change in the work one cell counts is slower by default, and no
    difference at an explicit 5% threshold, which still wins."""
    rng = random.Random(32)
    counting: dict[str, Any] = {"spec_changes": {"timer": "instructions", "threads": 1}, "counted": counted_under()}
    a = synthetic_run(root, "counted", hour(1), rng, **counting)
    b = synthetic_run(root, "more", hour(2), rng, slower={("small", "numba"): 1.02}, **counting)
    found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    verdicts = {(c["config"], c["backend"]): c["verdict"] for c in found["cells"]}
    assert found["threshold"] == 0.01 and verdicts.pop(("small", "numba")) == "slower"
    assert set(verdicts.values()) == {"no difference resolved"}
    assert "at a 1% threshold" in cli("-r", root, "compare", a, b).out
    explicit = json.loads(cli("-r", root, "compare", a, b, "--json", "--threshold", "0.05").out)
    assert explicit["threshold"] == 0.05 and explicit["slower"] == 0
    # times keep 5%
    c = synthetic_run(root, "timed", hour(3), rng)
    d = synthetic_run(root, "timed", hour(4), rng)
    assert json.loads(cli("-r", root, "compare", c, d, "--json").out)["threshold"] == 0.05


def test_runs_are_grouped_into_batches_by_their_times_and_a_forged_time_shows_no_gap() -> None:
    """Runs less than 30 minutes apart (from the end of one to the start of the next) are one
    batch. A time that cannot be read, or a run that ends before it starts, cannot show a gap:
    the run after it joins its batch (a forged time never splits a session into more)."""
    from ptreg.engine.stats import batches

    at = "2026-12-01T{}Z".format
    assert batches([(at("10:00:00"), at("10:10:00")), (at("10:20:00"), at("10:30:00"))]) == [[0, 1]]
    assert batches([(at("10:00:00"), at("10:10:00")), (at("10:40:00"), at("10:50:00"))]) == [[0], [1]]
    assert batches([(at("10:00:00"), "yesterday"), (at("12:00:00"), at("12:05:00"))]) == [[0, 1]]
    assert batches([(at("10:00:00"), at("09:00:00")), (at("12:00:00"), at("12:05:00"))]) == [[0, 1]]
    assert batches([("soon", "later"), (at("12:00:00"), at("12:05:00")), (at("14:00:00"), at("14:01:00"))]) == [
        [0, 1],
        [2],
    ]
    assert batches([(at("10:00:00"), "2026-12-01T10:05:00"), (at("12:00:00"), at("12:05:00"))]) == [[0, 1]]  # no zone


# a venv of the README's plain `pip install .` (no numba), on a kernel that reports no CPU flags
VENV = {**MACHINE, "numba_version": None, "cpu": {**MACHINE["cpu"], "features": None}}


def test_what_is_unknown_of_both_machines_is_no_difference(root: Path, cli) -> None:
    """Runs of one venv without numba, on a machine whose CPU features are unknown, are runs of
    one machine: their history counts and B gets a verdict; the unknowns are shown, as unknown."""
    rng = random.Random(7)
    quiet: dict[str, Any] = {"noise": 0.004, "drift": 0.001, "spec_changes": {"repeats": 12}, "machine": VENV}
    for n in range(6):
        synthetic_run(root, "history", hour(n), rng, **quiet)
    a = synthetic_run(root, "before", hour(7), rng, **quiet)
    b = synthetic_run(root, "after", hour(8), rng, slower={("small", "numba"): 1.10}, changed={"numba"}, **quiet)
    found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    assert found["same_machine"] and found["machine_differences"] == []
    assert "numba: unknown -> unknown" in found["machine_unknowns"]
    assert "CPU features: unknown -> unknown" in found["machine_unknowns"]
    assert {len(c["history"]) for c in found["cells"]} == {7}  # the earlier runs of the venv are its history
    verdicts = {(c["config"], c["backend"]): c["verdict"] for c in found["cells"]}
    assert verdicts.pop(("small", "numba")) == "slower" and set(verdicts.values()) == {"no difference resolved"}
    shown = " ".join(cli("-r", root, "compare", a, b).out.split())
    assert "the machines differ" not in shown and "numba: unknown -> unknown" in shown
    assert "the same in all that is known of both" in shown


def test_a_known_difference_still_blocks_and_a_missing_machine_is_not_the_same(root: Path, cli) -> None:
    rng = random.Random(8)
    a = synthetic_run(root, "here", hour(1), rng, machine=VENV)
    avx512 = {**VENV, "cpu": {**VENV["cpu"], "features": ["avx512f"]}}
    b = synthetic_run(root, "known", hour(2), rng, machine={**avx512, "numba_version": "0.60"})
    found = json.loads(cli("-r", root, "compare", a, b, "--json").out)
    assert found["machine_differences"] == []  # features and numba are unknown in A: no difference
    c = synthetic_run(root, "other", hour(3), rng, machine={**avx512, "cpu": {**avx512["cpu"], "model": "Other CPU"}})
    found = json.loads(cli("-r", root, "compare", b, c, "--json").out)
    assert found["machine_differences"] == ["CPU model: Synthetic CPU -> Other CPU"]
    assert {cell["verdict"] for cell in found["cells"]} == {"not comparable: different machines"}
    (root / "runs" / c.replace("/", "/", 1) / "environment.json").unlink()
    found = json.loads(cli("-r", root, "compare", a, c, "--json").out)
    assert found["machine_differences"] == ["machine of B: not recorded"] and not found["same_machine"]


def test_fail_on_regression_fails_on_no_verdict_unless_asked(root: Path, cli) -> None:
    """A CI gate passes on a verdict, not on nothing: two runs alone give none."""
    rng = random.Random(9)
    a = synthetic_run(root, "before", hour(1), rng, noise=0.001)
    b = synthetic_run(root, "after", hour(2), rng, noise=0.001)
    assert cli("-r", root, "compare", a, b).code == 0  # no gate asked for: the comparison is not a failure
    gated = cli("-r", root, "compare", a, b, "--fail-on-regression")
    assert gated.code == 1 and "12 cells of B given no verdict" in gated.err
    assert "--no-verdict=pass" in gated.err and len(gated.err.strip().splitlines()) == 1
    as_json = cli("-r", root, "compare", a, b, "--fail-on-regression", "--json")
    assert as_json.code == 1 and json.loads(as_json.out)["decided"] is False
    assert json.loads(as_json.out)["undecided"] == 12
    assert cli("-r", root, "compare", a, b, "--fail-on-regression", "--no-verdict=pass").code == 0
    assert cli("-r", root, "compare", a, b, "--fail-on-regression", "--no-verdict", "fail").code == 1
    assert_one_line_error(cli("-r", root, "compare", a, b, "--no-verdict=pass"), 2, "--no-verdict")
    assert cli("-r", root, "compare", a, b, "--fail-on-regression", "--no-verdict=maybe").code == 2
    assert "--no-verdict" in cli("compare", "--help").out
