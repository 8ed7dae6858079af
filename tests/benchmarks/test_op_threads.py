"""benchmarks/op_threads.py: it sets and records the threads, names the machine, gives every
kernel of the ops asked for a row per size with its ratio, and refuses a setting it cannot measure
in one line (exit 2). Run briefly in a process of its own (it sets numba's threads); no timing is
asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, patient

pytest.importorskip("numba", reason="numba is not installed (pip install 'ptreg[numba]')")
SCRIPT = REPO / "benchmarks" / "op_threads.py"


def run(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTREG_CACHE_DIR": str(cache), "NUMBA_NUM_THREADS": "2"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=patient(600), env=env
    )


def test_a_brief_run_prints_and_writes_the_table_with_its_setting(tmp_path: Path) -> None:
    saved = tmp_path / "op_threads.json"
    done = run("--threads", "2", "--rounds", "2", "--op", "residual", "--json", str(saved), cache=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(saved.read_text())
    assert document["threads"] == 2 and document["key"]["threads"] == 2 and document["rounds"] == 2
    assert document["machine"] and document["machine"] in done.stdout.splitlines()[0]
    assert [(r["kernel"], r["elements"]) for r in document["rows"]] == [("residual_add", 1 << p) for p in range(14, 23)]
    assert all(r["rounds"] == 2 and r["serial_us"] > 0 and r["parallel_us"] > 0 for r in document["rows"])
    assert set(document["thresholds"]) == {"residual_add"}
    assert "| residual_add | 2^14 |" in done.stdout
    assert not (tmp_path / "numba-threads.json").exists()  # nothing remembered unless asked


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--threads", "1"), "--threads: from 2 to numba's pool of 2"),
        (("--threads", "3"), "--threads: from 2 to numba's pool of 2"),
        (("--rounds", "1"), "--rounds: at least 2"),
        (("--remember", "--op", "gelu"), "--remember: every op must be measured"),
    ],
)
def test_a_setting_it_cannot_measure_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    done = run(*args, cache=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("op_threads: error: ") and done.stderr.count("\n") == 1 and said in done.stderr
    assert not (tmp_path / "numba-threads.json").exists()


def test_a_rows_ratio_is_the_center_of_its_interval_even_when_the_rounds_are_bimodal() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from op_threads import rows_of

    from ptreg_backends.numba_op_timing import PARALLEL, SERIAL

    parallel = [0.5, 1.0] * 10 + [1.0]  # a median of 1.0, a typical ratio near 0.72
    (row,) = rows_of({"residual_add": {1 << 18: {SERIAL: [1.0] * len(parallel), PARALLEL: parallel}}})
    assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"] < 1.0
