"""The step's floor as ptreg records it: the machine's ceilings cached per machine (a hostile
file never believed, never followed, never half written), each config's floors recorded in a
tinygpt-train run's results from them, and the op table and verdict showing each part's
distance to its floor, or saying how to get the ceilings when none are cached."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from helpers import step_cell, step_results
from ptreg.engine import ceilings
from ptreg.engine.workloads.training import TrainingWorkload
from ptreg.errors import UnusableInput
from ptreg.records.configs import CONFIGS
from ptreg.records.run_results import STEP_OPS, RunResults
from ptreg.records.step_work import above_floor, config_floors, step_work


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / ceilings.CACHE_FILE


def at(peak: float, bandwidth: float) -> ceilings.AtThreads:
    return ceilings.AtThreads(peak_gflops=peak, bandwidth_gbs=bandwidth)


def training_spec(threads: int = 1, configs: tuple[str, ...] = ("tiny",)) -> Any:
    results = RunResults.model_validate(
        step_results("a", "20261204T000000Z", [step_cell("numba", "tiny", ms=80.0, shares=(0.2, 0.2, 0.2))])
    )
    return results.spec.model_copy(update={"threads": threads, "configs": list(configs)})


# --------------------------------------------------------------------------- the cache


def test_the_ceilings_come_back_for_this_machine_only(cache: Path) -> None:
    assert ceilings.remembered() is None
    ceilings.remember({1: at(240.0, 30.0), 2: at(470.0, 39.0)})
    entry = ceilings.remembered()
    assert entry is not None and entry.key == ceilings.machine_key()
    assert entry.threads[2].peak_gflops == 470.0
    document = json.loads(cache.read_text())
    (only,) = document["entries"].values()
    only["key"]["cpu_model"] = "Another CPU"  # the id no longer matches the key it files
    cache.write_text(json.dumps(document))
    assert ceilings.remembered() is None


def test_another_machines_entry_stays_beside_this_ones(cache: Path) -> None:
    other = {"cpu_model": "Another CPU", "cpu_flags": None, "machine": "x", "cpu_count": 64}
    entry = {
        "key": other,
        "measured_at": "2026-01-01T00:00:00+00:00",
        "threads": {"1": {"peak_gflops": 9.0, "bandwidth_gbs": 1.0}},
    }
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"format": 1, "entries": {ceilings.key_id(other): entry}}))
    assert ceilings.remembered() is None
    ceilings.remember({1: at(240.0, 30.0)})
    assert len(json.loads(cache.read_text())["entries"]) == 2
    assert ceilings.remembered() is not None


@pytest.mark.parametrize(
    "text",
    ["{", "[]", '{"format": 2, "entries": {}}', '{"format": 1, "entries": {"x": {"key": {}}}}', "\ufeff{}"],
)
def test_a_cache_that_is_not_ptregs_counts_as_none_and_is_replaced(cache: Path, text: str) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_text(text)
    assert ceilings.remembered() is None
    assert ceilings.run_floors(training_spec()) is None  # unknown, not zero
    ceilings.remember({1: at(240.0, 30.0)})
    assert ceilings.remembered() is not None


def test_a_forged_entry_with_a_negative_peak_is_not_believed(cache: Path) -> None:
    ceilings.remember({1: at(240.0, 30.0)})
    document = json.loads(cache.read_text())
    next(iter(document["entries"].values()))["threads"]["1"]["peak_gflops"] = -1.0
    cache.write_text(json.dumps(document))
    assert ceilings.remembered() is None


def test_a_symlinked_cache_is_neither_read_nor_written(cache: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    ceilings.remember({1: at(240.0, 30.0)})
    os.replace(cache, target)
    before = target.read_text()
    cache.symlink_to(target)
    assert ceilings.remembered() is None
    with pytest.raises(UnusableInput, match="is a symlink"):
        ceilings.remember({1: at(1.0, 1.0)})
    assert target.read_text() == before and cache.is_symlink()


def test_a_cache_folder_whose_name_holds_a_file_is_refused_in_one_line(cache: Path) -> None:
    cache.parent.parent.mkdir(parents=True, exist_ok=True)
    cache.parent.write_text("not a folder")
    assert ceilings.remembered() is None  # unknown, and no NotADirectoryError
    with pytest.raises(UnusableInput, match="cannot be examined"):
        ceilings.remember({1: at(240.0, 30.0)})
    assert cache.parent.read_text() == "not a folder"


# --------------------------------------------------------------------------- a run's floors


def test_a_training_run_records_each_configs_floors_at_its_thread_count(cache: Path) -> None:
    ceilings.remember({1: at(100.0, 10.0)})
    found = ceilings.run_floors(training_spec(threads=1, configs=("tiny", "xl")))
    assert found is not None and set(found) == {"tiny", "xl"}
    xl = found["xl"]
    for part, work in step_work(CONFIGS["xl"]).items():
        if not work.bytes:  # gelu: the fused bias_gelu takes every call, so it has no floor
            assert xl.floor_ms(part) is None and part == "gelu"
            continue
        assert xl.floor_ms(part) == pytest.approx(1e3 * max(work.flops / 100e9, work.bytes / 10e9))
    assert xl.floor_ms("step") == pytest.approx(sum(xl.floor_ms(p) or 0 for p in step_work(CONFIGS["xl"])))
    assert xl.floor_ms("other") is None
    assert ceilings.run_floors(training_spec(threads=2)) is None  # no ceilings at 2 threads: unknown


def test_floors_belong_to_a_training_runs_own_configs() -> None:
    results = step_results("a", "20261204T000000Z", [step_cell("numba", "tiny", ms=80.0, shares=(0.2, 0.2, 0.2))])
    floors = config_floors(CONFIGS["tiny"], 1, 100.0, 10.0, "0" * 16, "2026-12-07T00:00:00+00:00")
    results["floors"] = {"tiny": floors.model_dump(mode="json")}
    assert RunResults.model_validate(results).floors is not None
    for change, message in (
        (lambda r: r["floors"].update(xl=r["floors"]["tiny"]), "does not measure"),
        (lambda r: r["floors"]["tiny"].update(threads=2), "thread count"),
        (lambda r: r["floors"]["tiny"]["parts"]["forward"].update(floor_ms=0), "greater than 0"),
    ):
        bad = json.loads(json.dumps(results))
        change(bad)
        with pytest.raises(ValueError, match=message):
            RunResults.model_validate(bad)


def test_a_distance_is_unknown_when_either_side_is() -> None:
    floors = config_floors(CONFIGS["tiny"], 1, 100.0, 10.0, "0" * 16, "now")
    assert above_floor(None, floors, "forward") is None
    assert above_floor(1.0, None, "forward") is None
    assert above_floor(1.0, floors, "other") is None
    assert above_floor(2 * (floors.floor_ms("forward") or 0), floors, "forward") == pytest.approx(2.0)


# --------------------------------------------------------------------------- what bench and run print


def op_results(floors: bool) -> RunResults:
    cell = step_cell("numba", "tiny", ms=80.0, shares=(0.2, 0.2, 0.2))
    per_op = 0.4 / len(STEP_OPS) - 0.01
    cell["attribution"]["ops"] = {
        op: {"ms": per_op * 80.0, "share": per_op, "amdahl_bound": 1 / (1 - per_op)} for op in STEP_OPS
    }
    other = 1 - 0.6 - per_op * len(STEP_OPS)
    cell["attribution"]["other"] = {"ms": other * 80.0, "share": other, "amdahl_bound": 1 / (1 - other)}
    cell["attribution"]["bounding_part"] = "forward"
    results = step_results("a", "20261204T000000Z", [cell], version=6)
    if floors:
        found = config_floors(CONFIGS["tiny"], 1, 100.0, 10.0, "0" * 16, "2026-12-07T00:00:00+00:00")
        results["floors"] = {"tiny": found.model_dump(mode="json")}
    return RunResults.model_validate(results)


def test_the_op_table_shows_each_parts_distance_beside_its_share() -> None:
    results = op_results(floors=True)
    floors = (results.floors or {})["tiny"]
    (table,) = [t for t in TrainingWorkload().tables(results) if t.title.startswith("Per-op")]
    assert table.headers[:3] == ["part", "floor ms", "numba ms"]
    forward = table.rows[0]
    expected = 16.0 / (floors.floor_ms("forward") or 0)
    assert forward[2].endswith(f", {expected:.1f}x floor)")
    assert forward[1] == f"{floors.floor_ms('forward'):.3g}" and forward[1] != "0.0"  # microseconds at tiny
    assert table.rows[-1][1] == "-"  # what no part took has no floor
    assert "GFLOP/s" in table.title
    assert not any("unknown (no ceilings" in line for line in TrainingWorkload().verdict(results))
    assert any("its floor" in line for line in TrainingWorkload().verdict(results))


def test_without_floors_the_table_has_no_distance_and_the_verdict_says_how_to_get_them() -> None:
    results = op_results(floors=False)
    (table,) = [t for t in TrainingWorkload().tables(results) if t.title.startswith("Per-op")]
    assert "floor ms" not in table.headers and not any("x floor" in str(cell) for row in table.rows for cell in row)
    (note,) = [line for line in TrainingWorkload().verdict(results) if "floor" in line]
    assert "unknown" in note and ceilings.HOW_TO_MEASURE in note
