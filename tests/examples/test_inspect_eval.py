"""The worked Inspect evaluation (examples/inspect-eval/): its dates are make_dates.py's output,
its two offline models answer as their docstring says, and its evaluator is one the inspect
workload can run."""

from __future__ import annotations

import datetime
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from ptreg.engine.workloads.discovery import spec_problem
from ptreg.records.evaluator import parse_spec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "inspect-eval"


def models() -> ModuleType:
    spec = importlib.util.spec_from_file_location("offline_models_under_test", EXAMPLE / "offline_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_dates_reproduces_the_committed_dates(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "make_dates.py", tmp_path)
    subprocess.run([sys.executable, str(tmp_path / "make_dates.py")], check=True, cwd=tmp_path, timeout=60)
    assert (tmp_path / "dates.jsonl").read_bytes() == (EXAMPLE / "dates.jsonl").read_bytes()
    rows = [json.loads(line) for line in (EXAMPLE / "dates.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 300 and len({r["id"] for r in rows}) == 300


def test_the_rule_holds_while_julian_leap_years_do_and_the_almanac_inside_its_table() -> None:
    found = models()
    for day in (datetime.date(1900, 3, 1), datetime.date(2000, 2, 29), datetime.date(2100, 2, 28)):
        assert found.rule(day.year, day.month, day.day).endswith(day.strftime("%A"))
    for day in (datetime.date(1900, 2, 28), datetime.date(2100, 3, 1), datetime.date(1750, 6, 1)):
        assert not found.rule(day.year, day.month, day.day).endswith(day.strftime("%A"))
    assert found.lookup(1850, 1, 1) == "Tuesday" and found.lookup(2049, 12, 31) == "Friday"
    assert found.lookup(1849, 12, 31) == found.lookup(2050, 1, 1) == "unknown"


def test_the_evaluator_names_what_exists_and_the_workload_can_run_it() -> None:
    raw = json.loads((REPO / "benchmarks" / "evaluators" / "inspect-weekday.json").read_text(encoding="utf-8"))
    for path in raw["inputs"]:
        assert (REPO / path).is_file(), path
    assert (REPO / raw["task"].partition("@")[0]).is_file()
    assert spec_problem(parse_spec(raw, "inspect-weekday.json")) is None
