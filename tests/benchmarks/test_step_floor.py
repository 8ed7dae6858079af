"""benchmarks/step_floor.py and step_counts.py: the counts of a step's work against a real step's
calls and arrays and against hand counts, the roofline arithmetic, and the reading of a run's
results (a bad file: one line, exit 2). Nothing here measures the machine: ceilings are given."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from helpers import REPO, step_cell, step_results

pytest.importorskip("numba", reason="numba is not installed (pip install 'ptreg[numba]')")
sys.path.insert(0, str(REPO / "benchmarks"))
import step_counts  # scripts, importable once their folder is on the path
import step_floor
from step_ceilings import AtThreads, Ceilings

from ptreg.engine.backends import OP_METHODS, OP_OF_METHOD
from ptreg.engine.workloads import layers, tinygpt
from ptreg.records.configs import CONFIGS, GPTConfig, step_flops
from ptreg.records.measured import FUSED_OPS
from ptreg.records.run_results import KERNELS, STEP_OPS

# B=1, T=2, L=1, C=4, NH=2 (head size 2), V=3: small enough to count on paper.
HAND = GPTConfig("hand", context=2, layers=1, d_model=4, batch=1, heads=2, vocab=3)


# --------------------------------------------------------------------------- counts


class Recorder:
    """Wraps each method of a step: its calls, and the bytes of the arrays it read and wrote."""

    # arguments a method writes in place, besides reading them: their bytes count twice
    WRITTEN: ClassVar = {"bias_forward": ("out",), "adamw_update": ("param", "m", "v")}
    NAMES: ClassVar = {"bias_forward": ("out", "b"), "adamw_update": ("param", "grad", "m", "v")}

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.flops: Counter[str] = Counter()
        self.fused: tuple[str, ...] = ()  # the fused ops the recorded step called

    def wrap(self, method: str, function: Any) -> Any:
        def recorded(*args: Any) -> Any:
            result = function(*args)
            self.calls[method] += 1
            arrays = [a for a in args if isinstance(a, np.ndarray)]
            self.bytes[method] += sum(a.nbytes for a in arrays)
            named = dict(zip(self.NAMES.get(method, ()), args, strict=False))
            self.bytes[method] += sum(named[name].nbytes for name in self.WRITTEN.get(method, ()))
            for out in result if isinstance(result, tuple) else (result,):
                if isinstance(out, np.ndarray):
                    self.bytes[method] += out.nbytes
                elif isinstance(out, float):  # the loss, as a float32 would be written
                    self.bytes[method] += 4
            if method.startswith("matmul_"):  # (M×K)·(K×N) from the two inputs' shapes
                a, b, out = args
                m, k, n = {
                    "matmul_forward": (a.shape[0], a.shape[1], b.shape[1]),
                    "matmul_backward_da": (a.shape[0], b.shape[0], b.shape[1]),
                    "matmul_backward_db": (a.shape[0], a.shape[1], b.shape[1]),
                }[method]
                self.flops[method] += 2 * m * k * n
            return result

        return recorded


class Fusing(tinygpt.ReferenceKernels):
    """The kernels and the fused ops, each the reference's: the step a fusing backend runs."""

    op_tolerances: ClassVar = dict.fromkeys(FUSED_OPS, 0.0)


for _op in FUSED_OPS:
    for _method in OP_METHODS[_op]:
        setattr(Fusing, _method, staticmethod(getattr(layers, _method)))


def recorded_step(config: GPTConfig, fused: tuple[str, ...] = ()) -> tuple[Recorder, tinygpt.Trainer]:
    """One step's calls: with the separate ops (``fused`` empty) or with the fused ops."""
    recorder = Recorder()
    recorder.fused = fused
    trainer = tinygpt.Trainer(config, Fusing() if fused else tinygpt.ReferenceKernels())
    if config.vocab < 256:  # bytes the hand config's 3-token vocabulary can embed
        trainer.data = trainer.data % np.uint8(config.vocab)
    ops = trainer.model.ops
    for method in [*step_counts.KERNEL_METHODS.values(), *(m for methods in OP_METHODS.values() for m in methods)]:
        setattr(ops, method, recorder.wrap(method, getattr(ops, method)))
    trainer.optimizer.update_one = ops.adamw_update
    trainer.step()
    return recorder, trainer


@pytest.fixture(
    scope="module", params=[("hand", ()), ("tiny", ()), ("small", ()), ("hand", FUSED_OPS), ("small", FUSED_OPS)]
)
def step(request: pytest.FixtureRequest) -> tuple[GPTConfig, Recorder, tinygpt.Trainer]:
    name, fused = request.param
    config = HAND if name == "hand" else CONFIGS[name]
    return config, *recorded_step(config, fused)


def test_the_parameters_are_the_models(step: tuple[GPTConfig, Recorder, Any]) -> None:
    config, _, trainer = step
    built = sum(p.size for p in trainer.model.params.values())
    assert config.parameters == built == tinygpt.parameter_count(config)
    assert len(trainer.model.params) == step_counts.op_terms(config, "adamw", built)[0].calls


def test_every_term_is_called_as_often_as_the_step_calls_it(step: tuple[GPTConfig, Recorder, Any]) -> None:
    config, recorder, _ = step
    counted: Counter[str] = Counter()
    for part in step_counts.PARTS:
        for term in step_counts.terms(config, part, recorder.fused):
            counted[term.method.split()[0]] += term.calls
    assert counted == recorder.calls
    assert (recorder.calls["residual_layernorm_forward"] > 0) == ("residual_layernorm" in recorder.fused)


def test_the_kernels_work_is_the_arrays_a_step_passes_them(step: tuple[GPTConfig, Recorder, Any]) -> None:
    config, recorder, _ = step
    work = step_counts.step_work(config, recorder.fused)
    for kernel, method in step_counts.KERNEL_METHODS.items():
        assert work[kernel].flops == recorder.flops[method] == step_flops(config)
        assert work[kernel].bytes == recorder.bytes[method]


@pytest.mark.parametrize(
    "method", ["gelu_forward", "gelu_backward", "residual_add", "bias_forward", "bias_backward", "adamw_update"]
)
def test_an_elementwise_ops_bytes_are_its_arrays(step: tuple[GPTConfig, Recorder, Any], method: str) -> None:
    """Where the reference's arrays are the minimum (no cache of another form), the count is them."""
    config, recorder, _ = step
    op = OP_OF_METHOD[method]
    (term,) = [t for t in step_counts.op_terms(config, op, config.parameters, recorder.fused) if t.method == method]
    assert term.bytes == recorder.bytes[method]


def test_crossentropys_bytes_are_its_arrays_with_int64_targets(step: tuple[GPTConfig, Recorder, Any]) -> None:
    config, recorder, _ = step
    for term in step_counts.op_terms(config, "crossentropy", config.parameters, recorder.fused):
        assert term.bytes == recorder.bytes[term.method]


def test_the_hand_config_counted_on_paper() -> None:
    work = step_counts.step_work(HAND)
    # qkv 2·2·4·12 + proj 2·2·4·4 + fc 2·2·4·16 + mlp 2·2·16·4 + head 2·2·4·3
    assert work["forward"].flops == 192 + 64 + 256 + 256 + 48
    # wte 4·3, wpe 2·4, one block 12·16 + 13·4, final layernorm 2·4
    assert HAND.parameters == 12 + 8 + 244 + 8
    assert work["adamw"] == step_counts.Work(14 * 272, 7 * 4 * 272)
    # two heads, 1 + 2 causal scores each: 6 scores of 4 flops (head size 2), the scale, a
    # softmax of 5, and att·v again 4 per score
    assert step_counts.causal_scores(HAND) == 6
    assert step_counts.op_terms(HAND, "attention", 0)[0].flops == 6 * 4 + 6 + 6 * 5 + 6 * 4
    # forward reads qkv (2×12) and writes y (2×4) and a log-sum-exp per row of each head (2·2);
    # backward reads dy, qkv, y and the log-sum-exps, writes dqkv
    assert [t.bytes for t in step_counts.op_terms(HAND, "attention", 0)] == [
        4 * (24 + 8 + 4),
        4 * (8 + 24 + 8 + 4 + 24),
    ]
    # three layernorms of 2 rows of 4: 7 flops an element and 5 a row, forward
    assert step_counts.op_terms(HAND, "layernorm", 0, fused=())[0].flops == 3 * (7 * 8 + 5 * 2)
    # fused, the one block's ln2 takes its add along (1 flop an element more), leaving ln1 and the
    # final one apart; it reads x and branch and writes the sum and the output (4 rows of 4
    # each), reads w and b, writes a mean and 1/std per row
    fused, apart = step_counts.op_terms(HAND, "residual_layernorm", 0), step_counts.op_terms(HAND, "layernorm", 0)
    assert (fused[0].calls, fused[0].flops, fused[0].bytes) == (1, 8 * 8 + 5 * 2, 4 * (4 * 8 + 2 * 4 + 2 * 2))
    assert apart[0].calls == 2 and step_counts.op_terms(HAND, "residual", 0)[0].calls == 2
    assert step_counts.op_terms(HAND, "residual_layernorm", 0, fused=())[0].calls == 0


def test_every_part_is_counted_and_an_unknown_op_is_refused() -> None:
    work = step_counts.step_work(CONFIGS["xl"], fused=())
    assert tuple(work) == (*KERNELS, *STEP_OPS)
    assert all(w.flops > 0 and w.bytes > 0 for part, w in work.items() if part not in FUSED_OPS)
    assert work["residual_layernorm"] == work["bias_gelu"] == step_counts.Work(0, 0)  # ops apart: no fused work
    fused = step_counts.step_work(CONFIGS["xl"])
    # with every fusion, only GELU is left with no work: the fc layer's bias_gelu takes each call
    assert [part for part, w in fused.items() if not w.bytes] == ["gelu"]
    with pytest.raises(ValueError, match="no op 'softmax'"):
        step_counts.op_terms(CONFIGS["xl"], "softmax", 1)


# --------------------------------------------------------------------------- the roofline


def at(peak: float, bandwidth: float, cache: float | None = None) -> AtThreads:
    return AtThreads(
        compute_gflops={"FMA": [peak]},
        bandwidth_gbs={"triad": [bandwidth]},
        cache_gbs=None if cache is None else [cache],
    )


def test_the_roofline_is_the_larger_of_the_two_times() -> None:
    compute_bound = step_floor.roofline(step_counts.Work(200 * 10**9, 10**9), 100.0, 10.0)
    assert compute_bound == step_floor.Floor(2.0, "compute")
    memory_bound = step_floor.roofline(step_counts.Work(10**9, 50 * 10**9), 100.0, 10.0)
    assert memory_bound == step_floor.Floor(5.0, "memory")


def test_the_ceilings_are_the_best_median() -> None:
    found = AtThreads(compute_gflops={"a": [1, 2, 3], "b": [10, 1, 1]}, bandwidth_gbs={"triad": [4, 5, 9], "copy": [6]})
    assert (found.peak_gflops, found.bandwidth, found.cache_bandwidth) == (2, 6, None)


def test_a_step_floor_is_the_sum_of_its_parts_floors() -> None:
    config = CONFIGS["xl"]
    floors = step_floor.floors(config, at(100.0, 10.0))
    for part, work in step_counts.step_work(config).items():
        assert floors[part].seconds == max(work.flops / 100e9, work.bytes / 10e9)
    assert floors["forward"].bound == "compute" and floors["residual"].bound == "memory"


# --------------------------------------------------------------------------- a run against the floor


def ceilings(threads: tuple[int, ...] = (1,)) -> Ceilings:
    return Ceilings(
        ceilings_version=1,
        machine={"cpu_model": "Test CPU", "OPENBLAS_CORETYPE": None},
        load_average={"before": [0.5, 0.5, 0.5], "after": [0.6, 0.5, 0.5]},
        settings={"rounds": 1},
        threads={n: at(100.0 * n, 10.0, 40.0) for n in threads},
    )


def saved(tmp_path: Path, found: Ceilings | None = None) -> Path:
    path = tmp_path / "floor.json"
    path.write_text(json.dumps({"ceilings": (found or ceilings()).model_dump(mode="json"), "blocks": []}))
    return path


APART = [op for op in STEP_OPS if op not in FUSED_OPS]
# Each sample's seconds per part: forward ... adamw (no fused op), then the whole step (the rest
# is `other`).
SAMPLES = [
    [0.010, 0.011, 0.012, 0.001, 0.002, 0.003, 0.004, 0.001, 0.001, 0.001, 0.002, 0.050],
    [0.020, 0.021, 0.022, 0.001, 0.002, 0.003, 0.004, 0.001, 0.001, 0.001, 0.002, 0.080],
    [0.030, 0.031, 0.032, 0.001, 0.002, 0.003, 0.004, 0.001, 0.001, 0.001, 0.002, 0.110],
]


def a_run(tmp_path: Path, *, ops: bool = True, threads: int = 1, backends: tuple[str, ...] = ("numba",)) -> Path:
    cells = []
    for backend in backends:
        cell = step_cell(backend, "tiny", ms=80.0, shares=(0.25, 0.26, 0.27))
        cell["step_samples"] = [
            {
                "repeat": n,
                "step": 0,
                "seconds": row[-1],
                "kernel_seconds": dict(zip(KERNELS, row[:3], strict=True)),
                # a run before the fused ops: none of them in its op times
                "op_seconds": dict(zip(APART, row[3:11], strict=True)) if ops else None,
                "loss": 5.0,
            }
            for n, row in enumerate(SAMPLES)
        ]
        cells.append(cell)
    results = step_results("tiny-steps", "20261204T000000Z", cells, version=6 if ops else 5)
    results["spec"]["threads"] = threads
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results))
    return folder / "results.json"


def floor_of(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, dict[str, Any]]:
    out = tmp_path / "out.json"
    code = step_floor.main(["--no-measure", str(saved(tmp_path)), "--json", str(out), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out, json.loads(out.read_text())


def test_a_run_is_measured_part_by_part_against_its_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, document = floor_of(tmp_path, capsys, "--results", str(a_run(tmp_path)))
    (block,) = document["blocks"]
    assert (block["config"], block["threads"], block["source"]) == ("tiny", 1, "run 20261204T000000Z")
    measured = block["measured_ms"]["numba"]
    assert measured["forward"] == pytest.approx(20.0) and measured["adamw"] == pytest.approx(2.0)
    assert measured["step"] == pytest.approx(80.0)
    assert measured["other"] == pytest.approx(80.0 - (20.0 + 21.0 + 22.0) - 15.0)  # the median sample, less its parts
    floors = step_floor.floors(CONFIGS["tiny"], at(100.0, 10.0))
    for part, floor in floors.items():
        assert block["parts"][part]["floor_ms"] == pytest.approx(1e3 * floor.seconds)
        if part in FUSED_OPS:  # not called: no time, so no distance, and `other` is still known
            assert measured[part] is None and block["x_floor"]["numba"][part] is None
            continue
        if not floor.seconds:  # every call fused into another op: no floor to be measured against
            assert part == "gelu" and block["x_floor"]["numba"][part] is None
            continue
        assert block["x_floor"]["numba"][part] == pytest.approx(measured[part] / (1e3 * floor.seconds))
    step_floor_ms = 1e3 * sum(f.seconds for f in floors.values())
    assert block["step_floor_ms"] == pytest.approx(step_floor_ms)
    assert block["x_floor"]["numba"]["step"] == pytest.approx(80.0 / step_floor_ms)
    lines = text.splitlines()
    assert max(map(len, lines)) <= step_floor.WIDTH
    (row,) = [line for line in lines if line.startswith("forward ")]
    assert row.split()[-2:] == ["20.00", f"{20.0 / (1e3 * floors['forward'].seconds):.1f}x"]
    assert "CPU: Test CPU" in text and "OPENBLAS_CORETYPE=unknown" in text


def test_a_run_folder_reads_as_its_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = a_run(tmp_path)
    _, by_file = floor_of(tmp_path, capsys, "--results", str(path))
    _, by_folder = floor_of(tmp_path, capsys, "--results", str(path.parent))
    assert by_folder["blocks"] == by_file["blocks"]


def test_backends_that_do_not_fit_side_by_side_go_below(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = ("numba", "numpy-blas", "a-backend-with-a-long-name")
    text, document = floor_of(tmp_path, capsys, "--results", str(a_run(tmp_path, backends=names)))
    assert max(map(len, text.splitlines())) <= step_floor.WIDTH
    assert all(f"{name} ms" in text for name in names)
    assert list(document["blocks"][0]["measured_ms"]) == list(names)


def test_a_cell_that_was_not_measured_is_named_below(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = a_run(tmp_path, backends=("numba", "numpy-blas"))
    results = json.loads(path.read_text())
    results["cells"][1].update(status="failed", step_samples=None)
    path.write_text(json.dumps(results))
    text, document = floor_of(tmp_path, capsys, "--results", str(path))
    assert list(document["blocks"][0]["measured_ms"]) == ["numba"]
    assert text.splitlines()[-1] == "numpy-blas: failed, no step samples"


def test_ops_a_run_did_not_time_are_unknown_not_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, document = floor_of(tmp_path, capsys, "--results", str(a_run(tmp_path, ops=False)))
    measured = document["blocks"][0]["measured_ms"]["numba"]
    assert measured["layernorm"] is None and measured["other"] is None and measured["forward"] == pytest.approx(20.0)
    (row,) = [line for line in text.splitlines() if line.startswith("layernorm ")]
    assert row.split()[-2:] == ["?", "?"]


def test_floors_alone_need_no_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, document = floor_of(tmp_path, capsys, "-c", "xl")
    (block,) = document["blocks"]
    assert block["source"] == "no run" and block["measured_ms"] == {}
    assert block["step_floor_in_cache_ms"] < block["step_floor_ms"]
    assert "xl at 1 thread(s)" in text
    assert text.splitlines()[-1].endswith(f"the step's floor would be {block['step_floor_in_cache_ms']:.3f} ms")


def assert_one_line(capsys: pytest.CaptureFixture[str], code: int, *fragments: str) -> None:
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("step_floor: error: "), captured.err
    assert all(fragment in lines[0] for fragment in fragments), lines[0]


def bad_run(tmp_path: Path, change: Any) -> Path:
    path = a_run(tmp_path)
    results = json.loads(path.read_text())
    change(results)
    path.write_text(json.dumps(results))
    return path


BAD_RUNS = {
    "not JSON": lambda p: p.write_text("{"),
    "not an object": lambda p: p.write_text("[]"),
    "a negative step time": lambda p: bad_run(
        p.parent.parent, lambda r: r["cells"][0]["step_samples"][0].update(seconds=-1)
    ),
    "an unknown op": lambda p: bad_run(
        p.parent.parent, lambda r: r["cells"][0]["step_samples"][0]["op_seconds"].update(softmax=0.1)
    ),
    "a backend's second cell": lambda p: bad_run(p.parent.parent, lambda r: r["cells"].append(r["cells"][0])),
    "a kernels run": lambda p: bad_run(
        p.parent.parent, lambda r: r["spec"].update(workload="kernels", metric="gflops")
    ),
}


@pytest.mark.parametrize("case", BAD_RUNS)
@pytest.mark.parametrize("named", [True, False], ids=["results.json", "another name"])
def test_a_bad_results_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, named: bool
) -> None:
    path = a_run(tmp_path)
    BAD_RUNS[case](path)
    if not named:
        path = path.rename(path.with_name("bench.json"))
    before = path.read_bytes()
    code = step_floor.main(["--no-measure", str(saved(tmp_path)), "--results", str(path)])
    assert_one_line(capsys, code, str(path))
    assert path.read_bytes() == before


def test_a_symlinked_results_file_is_not_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = a_run(tmp_path).rename(tmp_path / "elsewhere.json")
    for name in ("results.json", "bench.json"):
        link = tmp_path / "run" / name
        link.symlink_to(elsewhere)
        code = step_floor.main(["--no-measure", str(saved(tmp_path)), "--results", str(link)])
        assert_one_line(capsys, code, str(link))


def test_a_run_at_a_thread_count_without_ceilings_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = a_run(tmp_path, threads=2)
    code = step_floor.main(["--no-measure", str(saved(tmp_path)), "--results", str(path)])
    assert_one_line(capsys, code, str(path), "2 thread(s)", "ceilings are at 1")


BAD_CEILINGS = {
    "a negative rate": lambda c: c["threads"]["1"]["bandwidth_gbs"].update(triad=[-1.0]),
    "no samples": lambda c: c["threads"]["1"]["compute_gflops"].update(FMA=[]),
    "zero threads": lambda c: c["threads"].update({"0": c["threads"]["1"]}),
    "another version": lambda c: c.update(ceilings_version=2),
    "a load of two numbers": lambda c: c["load_average"].update(before=[1.0, 1.0]),
}


@pytest.mark.parametrize("case", BAD_CEILINGS)
def test_bad_saved_ceilings_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    path = saved(tmp_path)
    document = json.loads(path.read_text())
    BAD_CEILINGS[case](document["ceilings"])
    path.write_text(json.dumps(document))
    code = step_floor.main(["--no-measure", str(path), "-c", "tiny"])
    assert_one_line(capsys, code, str(path), "#/ceilings/")


def test_a_ceilings_file_that_is_no_json_object_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = saved(tmp_path)
    cases = {
        "text.json": lambda p: p.write_text("ceilings"),
        "nan.json": lambda p: p.write_text(good.read_text().replace("0.6", "NaN", 1)),
        "list.json": lambda p: p.write_text("[]"),
        "folder.json": lambda p: p.mkdir(),
        "link.json": lambda p: p.symlink_to(good),
    }
    for name, make in cases.items():
        path = tmp_path / name
        make(path)
        code = step_floor.main(["--no-measure", str(path), "-c", "tiny"])
        assert_one_line(capsys, code, str(path))


def test_the_script_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "step_floor.py"), "--no-measure", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"step_floor: error: {missing}: no such file"]


# --------------------------------------------------------------------------- the per-machine cache


def test_saved_ceilings_of_this_machine_are_cached_for_ptreg(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptreg.engine import ceilings as machine_ceilings

    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path / "cache"))
    here = machine_ceilings.machine_key()
    found = ceilings((1, 2))
    found.machine.update(cpu_model=here["cpu_model"], cpu_count=here["cpu_count"])
    assert step_floor.main(["--no-measure", str(saved(tmp_path, found)), "--remember"]) == 0
    assert "cached the ceilings" in capsys.readouterr().err
    entry = machine_ceilings.remembered()
    assert entry is not None
    assert {n: (a.peak_gflops, a.bandwidth_gbs, a.cache_gbs) for n, a in entry.threads.items()} == {
        1: (100.0, 10.0, 40.0),
        2: (200.0, 10.0, 40.0),
    }


def test_another_machines_ceilings_are_not_cached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path / "cache"))
    code = step_floor.main(["--no-measure", str(saved(tmp_path)), "--remember"])  # "Test CPU"
    assert_one_line(capsys, code, "cpu_model", "Test CPU", "not cached")
    assert not (tmp_path / "cache").exists()
