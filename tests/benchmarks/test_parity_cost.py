"""benchmarks/parity_cost.py: the numba product's exact build keeps naive's bits and its fused twin
does not (on a CPU with FMA) while staying within the tolerance; a brief run names the machine,
the setting and both builds' rates; a setting it cannot measure is one line, exit 2. No timing
is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO, patient

pytest.importorskip("numba", reason="numba is not installed (pip install 'ptreg[numba]')")
SCRIPT = REPO / "benchmarks" / "parity_cost.py"
TILE = "avx2-6x16"  # runs on any x86-64 CPU; forced, so no test tunes the tiles


def run(*args: str, cache: Path, tile: str = TILE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTREG_CACHE_DIR": str(cache), "PTREG_NUMBA_TILE": tile, "NUMBA_NUM_THREADS": "2"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=patient(600), env=env
    )


def test_a_brief_run_prints_and_writes_both_builds_rates_with_the_machine(tmp_path: Path) -> None:
    saved = tmp_path / "cost.json"
    done = run("--rounds", "2", "--json", str(saved), cache=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(saved.read_text())
    assert document["threads"] == 1 and document["rounds"] == 2 and document["chosen_tile"] == TILE
    assert document["machine"] and document["machine"] in done.stdout.splitlines()[0]
    (row,) = document["rows"]
    assert row["tile"] == TILE and row["rounds"] == 2
    assert row["exact_gflops"] > 0 and row["fused_gflops"] > 0
    low, high = row["interval"]
    assert 0 < low <= row["fused_speedup"] <= high
    # no ceilings in this cache: the share of the peak is unknown, and said to be
    assert document["peak_gflops"] is None and row["exact_share_of_peak"] is None
    assert "no ceilings cached" in done.stdout and f"| {TILE} |" in done.stdout


@pytest.mark.parametrize(
    ("args", "tile", "said"),
    [
        (("--threads", "0"), TILE, "--threads: from 1 to numba's pool of 2"),
        (("--threads", "3"), TILE, "--threads: from 1 to numba's pool of 2"),
        (("--rounds", "1"), TILE, "--rounds: at least 2"),
        ((), "no-such-tile", "no-such-tile"),
    ],
)
def test_a_setting_it_cannot_measure_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], tile: str, said: str
) -> None:
    saved = tmp_path / "cost.json"
    done = run(*args, "--json", str(saved), cache=tmp_path, tile=tile)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("parity_cost: error: ") and done.stderr.count("\n") == 1 and said in done.stderr
    assert not saved.exists()


def test_the_exact_build_keeps_naives_bits_and_the_fused_twin_only_the_tolerance() -> None:
    from ptreg.engine.environment import cpu_flags
    from ptreg.engine.parity import check_parity
    from ptreg_backends import numba_gemm
    from ptreg_backends.naive import NaiveBackend
    from ptreg_backends.numba_tiles import TILES

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import parity_cost
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    tile = TILES[TILE]
    shapes = parity_cost.CHECK_SHAPES
    exact = parity_cost.Product(numba_gemm.compile_gemm(tile), 1, order_preserving=True)
    fused = parity_cost.Product(numba_gemm.compile_gemm(tile, fused=True), 1, order_preserving=False)
    kept = check_parity(exact, NaiveBackend(), shapes, parity_cost.RTOL, parity_cost.ATOL)
    assert kept.passed and {c.mode for c in kept.checks} == {"bit-identical"}
    within = check_parity(fused, NaiveBackend(), shapes, parity_cost.RTOL, parity_cost.ATOL)
    assert within.passed and {c.mode for c in within.checks} == {"tolerance"}
    if "fma" not in (cpu_flags() or set()):
        pytest.skip("no FMA on this CPU: the twin cannot fuse")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 256), np.float32), rng.standard_normal((256, 96), np.float32)
    by_naive, by_twin = np.empty((64, 96), np.float32), np.empty((64, 96), np.float32)
    NaiveBackend().matmul_forward(a, b, by_naive)
    fused.matmul_forward(a, b, by_twin)
    assert not np.array_equal(by_naive, by_twin)  # one rounding a step, not two: other bits
