"""The numba backend's register tiles: every candidate keeps naive's bits, the choice is timed
per machine and remembered in a cache that nothing foreign or broken can steer, and the choice
is shown by `ptreg backends` and recorded with the run."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import patient
from ptreg.engine.backends import describe, entries
from ptreg.engine.environment import WORKER_VARIABLES, backend_configuration, collect, worker_variables
from ptreg_backends import numba_tiles
from ptreg_backends.naive import NaiveBackend
from ptreg_backends.numba_tiles import CANDIDATES, TILES

HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed (pip install 'ptreg[numba]')")

# Shapes with a remainder against every candidate's mr, nr, kc and mc in every position (for dA
# the reduction is n, for dB m), kept small: each candidate is compiled once per session.
# (300, 40, 290): dB's reduction in several chunks, forward's and dA's in one, many strips;
# (5, 3, 0) and (0, 3, 5): outputs without columns or rows for some kernels
SHAPES = [(1, 1, 1), (37, 29, 45), (129, 3, 65), (45, 300, 17), (150, 130, 97), (300, 40, 290), (5, 3, 0), (0, 3, 5)]


def naive(kernel: str, x: np.ndarray, y: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    out = np.full(out_shape, np.nan, np.float32)
    getattr(
        NaiveBackend(), {"forward": "matmul_forward", "dA": "matmul_backward_da", "dB": "matmul_backward_db"}[kernel]
    )(x, y, out)
    return out


@needs_numba
@pytest.mark.parametrize("tile", CANDIDATES, ids=[t.name for t in CANDIDATES])
def test_every_candidate_keeps_naives_bits(tile: numba_tiles.Tile) -> None:
    """Each candidate, not only the chosen one, on one and two threads, for all three kernels
    called as the backend calls them (transposed views included)."""
    from ptreg_backends import numba_gemm

    gemm = numba_gemm.compile_gemm(tile)
    rng = np.random.default_rng(7)
    for m, k, n in SHAPES:
        a, b, dc = (rng.standard_normal(s, np.float32) for s in ((m, k), (k, n), (m, n)))
        cases = [
            ("forward", (a, b), (a, b), (m, n)),
            ("dA", (dc, b.T), (dc, b), (m, k)),
            ("dB", (a.T, dc), (a, dc), (k, n)),
        ]
        for kernel, operands, naive_operands, out_shape in cases:
            expected = naive(kernel, *naive_operands, out_shape)
            for threads in (1, 2):
                got = np.full(out_shape, np.nan, np.float32)
                gemm(*operands, got, threads)
                assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), (tile.name, kernel, (m, k, n))


def test_candidates_are_shaped_for_both_register_files() -> None:
    shapes = {(t.vector_bits, t.needs) for t in CANDIDATES}
    assert (256, None) in shapes and (512, "avx512f") in shapes
    for tile in CANDIDATES:
        lanes = tile.vector_bits // 32
        registers = 16 if tile.vector_bits == 256 else 32
        sums = tile.mr * tile.nr // lanes
        # sums, one register per R vector of a step and one broadcast must fit the register file
        assert sums + tile.nr // lanes + 1 <= registers, tile
        assert tile.nr % lanes == 0, tile


def test_avx512_candidates_are_skipped_where_the_cpu_has_no_avx512() -> None:
    avx2_only = {"avx", "avx2", "fma"}
    assert [t.name for t in CANDIDATES if numba_tiles.runnable(t, avx2_only)] == ["avx2-6x16", "avx2-4x24"]
    assert all(numba_tiles.runnable(t, avx2_only | {"avx512f"}) for t in CANDIDATES)


# --------------------------------------------------------------------------- the cache


def entry_for(tile: str = "avx512-8x32", **changes: Any) -> dict[str, Any]:
    from dataclasses import asdict

    entry = {"key": numba_tiles.machine_key(), "tile": tile, "params": asdict(TILES[tile]), "tuned_at": "then"}
    entry.update(changes)
    return entry


def test_the_cache_lives_in_the_user_cache_directory_unless_told(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PTREG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert numba_tiles.cache_path() == tmp_path / "xdg" / "ptreg" / "numba-tiles.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert numba_tiles.cache_path() == tmp_path / "home" / ".cache" / "ptreg" / "numba-tiles.json"
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path / "mine"))
    assert numba_tiles.cache_path() == tmp_path / "mine" / "numba-tiles.json"


def test_an_entry_is_remembered_atomically_beside_other_machines(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "numba-tiles.json"
    other = entry_for(key={**numba_tiles.machine_key(), "cpu_model": "another CPU"})
    numba_tiles.remember(other, path)
    numba_tiles.remember(entry_for(), path)
    assert numba_tiles.remembered(path) == entry_for()
    document = json.loads(path.read_text())
    assert len(document["entries"]) == 2  # the other machine's entry stays
    assert [p.name for p in path.parent.iterdir()] == ["numba-tiles.json"]  # no temporary left


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        '{"format": 99, "entries": {}}',
        '{"format": 1, "entries": []}',
    ],
)
def test_a_broken_file_is_ignored_and_replaced(tmp_path: Path, content: str) -> None:
    path = tmp_path / "numba-tiles.json"
    path.write_text(content)
    assert numba_tiles.remembered(path) is None
    numba_tiles.remember(entry_for(), path)
    assert numba_tiles.remembered(path) == entry_for()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_a_cache_name_holding_a_symlink_pipe_or_folder_is_neither_read_nor_replaced(tmp_path: Path, kind: str) -> None:
    """The cache is a working file: a symlink is never followed (its target, a valid cache
    here, is not believed), a pipe never waited on, and remembering leaves the name alone."""
    path = tmp_path / "numba-tiles.json"
    target = tmp_path / "elsewhere.json"
    target.write_text(
        json.dumps({"format": 1, "entries": {numba_tiles.key_id(numba_tiles.machine_key()): entry_for()}})
    )
    kept = target.read_bytes()
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    assert numba_tiles.remembered(path) is None
    with pytest.raises(OSError, match="not ptreg's cache file; left alone"):
        numba_tiles.remember(entry_for(), path)
    assert target.read_bytes() == kept
    assert path.is_symlink() if kind == "symlink" else (path.is_dir() if kind == "directory" else path.is_fifo())


def test_a_foreign_or_stale_entry_is_never_trusted(tmp_path: Path) -> None:
    path = tmp_path / "numba-tiles.json"
    own_id = numba_tiles.key_id(numba_tiles.machine_key())
    bad = [
        entry_for(key={**numba_tiles.machine_key(), "numba": "0.1"}),  # another numba, under this id
        {**entry_for(), "tile": "avx512-99x99"},  # no such candidate
        entry_for(params={**entry_for()["params"], "mr": 9}),  # the candidate was re-shaped since
        "avx512-8x32",  # not an entry at all
    ]
    for entry in bad:
        path.write_text(json.dumps({"format": 1, "entries": {own_id: entry}}))
        assert numba_tiles.remembered(path) is None, entry


def test_ptreg_numba_tile_forces_a_candidate_and_names_them_when_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTREG_NUMBA_TILE", "avx2-4x24")
    assert numba_tiles.forced() == TILES["avx2-4x24"]
    assert numba_tiles.describe_choice() == "tile avx2-4x24 (forced by PTREG_NUMBA_TILE)"
    monkeypatch.setenv("PTREG_NUMBA_TILE", "7x7")
    with pytest.raises(ValueError, match=r"PTREG_NUMBA_TILE='7x7' is not a candidate \(candidates: avx2-6x16, "):
        numba_tiles.forced()
    if HAS_NUMBA:
        info = describe(entries()["numba"])
        assert info.available is False and "PTREG_NUMBA_TILE='7x7' is not a candidate" in str(info.reason)


@needs_numba
def test_choose_times_once_then_remembers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """First use times the candidates this CPU can run and picks the fastest; later uses read it."""
    from ptreg_backends import numba_gemm

    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path))
    timed: list[tuple[str, ...]] = []

    def fake_timing(tiles: tuple[numba_tiles.Tile, ...], **_: Any) -> dict[str, list[float]]:
        timed.append(tuple(t.name for t in tiles))
        # rates that only a median picks right: one wild round for a slower tile
        return {t.name: [10.0 + i, 99.0 if i == 0 else 1.0, 10.0 + i] for i, t in enumerate(tiles)}

    monkeypatch.setattr(numba_gemm, "time_candidates", fake_timing)
    first = numba_gemm.choose()
    runnable = tuple(t.name for t in CANDIDATES if numba_tiles.runnable(t))
    assert timed == [runnable] and first.source == "tuned" and first.tile.name == runnable[-1]
    second = numba_gemm.choose()
    assert timed == [runnable] and second.source == "cache" and second.tile == first.tile
    assert numba_tiles.describe_choice().startswith(f"tile {first.tile.name} (timed here ")


@needs_numba
def test_an_unwritable_cache_costs_a_new_timing_not_the_backend(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ptreg_backends import numba_gemm

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path / "a-file"))
    monkeypatch.setattr(numba_gemm, "time_candidates", lambda tiles, **_: {t.name: [1.0] for t in tiles})
    said: list[str] = []
    choice = numba_gemm.choose(said.append)
    assert choice.source == "tuned" and choice.cache_file is None
    assert len(said) == 1 and said[0].startswith("not remembered: ")


@needs_numba
def test_tune_command_times_every_candidate_and_the_backend_then_uses_it(tmp_path: Path) -> None:
    """`python -m ptreg_backends.numba_gemm --tune` for real (compiled code comes from numba's cache
    after the parity test above), then a backend started after it reads the choice."""
    env = {**os.environ, "PTREG_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "ptreg_backends.numba_gemm", "--tune"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    chosen = re.search(r"^\s*(\S+)\s+[\d.]+ GFLOP/s  <- chosen$", done.stdout, re.MULTILINE)
    assert chosen is not None, done.stdout
    entry = json.loads((tmp_path / "numba-tiles.json").read_text())["entries"]
    (only,) = entry.values()
    assert only["tile"] == chosen.group(1) and set(only["gflops_median"]) | set(only["untimed"]) == set(TILES)
    assert only["gflops_median"][only["tile"]] == max(only["gflops_median"].values())
    code = (
        "from ptreg_backends.numba_kernels import NumbaBackend; print(NumbaBackend().runtime_details()['numba_tile'])"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"'tile': '{only['tile']}', 'source': 'cache'" in shown.stdout


# --------------------------------------------------------------------------- shown and recorded


def test_backends_lists_the_tile_and_the_environment_records_it(monkeypatch: pytest.MonkeyPatch, cli: Any) -> None:
    monkeypatch.setenv("PTREG_NUMBA_TILE", "avx512-12x32")
    listing = cli("backends")
    assert listing.code == 0
    if HAS_NUMBA:
        assert "numba runs with: tile avx512-12x32 (forced by PTREG_NUMBA_TILE)" in listing.out
    numba = next(b for b in cli("backends", "--json").json() if b["name"] == "numba")
    assert numba["configuration"] == "tile avx512-12x32 (forced by PTREG_NUMBA_TILE)"
    assert backend_configuration(["numba", "naive", "nothing"]) == {
        "numba": "tile avx512-12x32 (forced by PTREG_NUMBA_TILE)",
        "naive": None,
        "nothing": None,
    }


def test_every_worker_gets_the_same_thread_rule_and_the_environment_records_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert worker_variables() == {
        "OPENBLAS_THREAD_TIMEOUT": "20",
        "GOMP_SPINCOUNT": "20000",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    assert collect(tmp_path)["worker_variables"] == worker_variables()
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's choice stands, and is recorded
    assert worker_variables()["OMP_WAIT_POLICY"] == "ACTIVE"
    assert collect(tmp_path)["worker_variables"]["OMP_WAIT_POLICY"] == "ACTIVE"


# After one parallel region, the pool is left idle while the main thread naps: the script prints
# the CPU seconds the process burnt and the wall seconds it waited, which end once the pool has
# burnt `burn` seconds or `window` seconds have passed. A pool that spins burns its `burn` however
# busy the machine is (only later), so the wait is on that condition, not on a fixed sleep.
_IDLE_POOL = """
import sys, time
import numba
import numpy as np
burn, window = float(sys.argv[1]), float(sys.argv[2])
numba.set_num_threads(2)
@numba.njit(parallel=True)
def touch(a):
    for i in numba.prange(a.shape[0]):
        a[i] += 1.0
touch(np.zeros(64))
if numba.threading_layer() != "omp":
    print("not omp")
else:
    before, start = time.process_time(), time.monotonic()
    while time.process_time() - before < burn and time.monotonic() - start < window:
        time.sleep(0.02)
    print(time.process_time() - before, time.monotonic() - start)
"""


@needs_numba
def test_the_rule_reaches_gnu_openmp_under_passive(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule sets GNU OpenMP's spin with GOMP_SPINCOUNT while OMP_WAIT_POLICY is PASSIVE:
    libgomp must read the count despite the policy (a huge count keeps the pool spinning
    while the main thread naps), and the rule's count must end the spin (the pool then sleeps).
    The rule's pool is watched for as long as a spinning pool took to burn its CPU seconds on this
    machine, under its present load, so a busy machine makes neither check pass by itself."""
    for name in WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def burnt(burn: float, window: float, **settings: str) -> tuple[float, float] | None:
        env = {**os.environ, **worker_variables(), **settings}
        printed = subprocess.run(
            [sys.executable, "-c", _IDLE_POOL, str(burn), str(window)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=patient(600),
        ).stdout.strip()
        if printed == "not omp":
            return None
        cpu, wall = printed.split()
        return float(cpu), float(wall)

    spinning = burnt(0.3, patient(120), GOMP_SPINCOUNT=str(10**11))
    if spinning is None:
        pytest.skip("numba's threading layer here is not GNU OpenMP")
    assert spinning[0] >= 0.3, spinning  # the count was read: the pool spun while nothing ran
    by_rule = burnt(0.2, max(0.5, spinning[1]))
    assert by_rule is not None and by_rule[0] < 0.2, (by_rule, spinning)


# A target of each register file, compiled for (not run on) whatever this machine is.
TARGETS = [("avx2-6x16", "haswell", "ymm"), ("avx512-14x32", "skylake-avx512", "zmm")]


@needs_numba
@pytest.mark.parametrize(("tile", "cpu", "register"), TARGETS, ids=[t[0] for t in TARGETS])
def test_the_micro_kernel_keeps_its_sums_in_registers(tile: str, cpu: str, register: str, tmp_path: Path) -> None:
    """The innermost loop of the code numba makes for that CPU: one vector multiply and one add per
    vector of sums, in registers of the candidate's width, no fused multiply-add and no load or
    store of a sum on the stack (a spill)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_CPU_NAME": cpu}
    command = [sys.executable, "-m", "ptreg_backends.numba_gemm", "--inspect", tile]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    t = TILES[tile]
    vectors = t.mr * t.nr // (t.vector_bits // 32)
    counts = {f"vmulps {w}": 0 for w in ("xmm", "ymm", "zmm")} | {f"vaddps {w}": 0 for w in ("xmm", "ymm", "zmm")}
    counts |= {f"vmulps {register}": vectors, f"vaddps {register}": vectors}
    expected = ", ".join(f"{k} {v}" for k, v in (counts | {"stack accesses": 0, "fused multiply-adds": 0}).items())
    assert done.stdout.strip() == f"{tile} compiled for {cpu}: {expected}", done.stdout
