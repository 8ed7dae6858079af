"""Accelerators through NVML, with a fake ``pynvml`` in place of NVIDIA's: a GPU present gives
each repeat its tree's peak accelerator memory and mean utilisation, and environment.json the
devices and drivers; no pynvml, or an nvmlInit that fails, changes nothing; a device that cannot
list its processes is measured by its used memory, and the record says so."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from command_projects import ATTEMPT, command_attempt

from ptreg.engine import accelerators
from ptreg.engine.accelerators import MB, AcceleratorUse, machine_facts
from ptreg.records.analysis_plan import rule_problems
from ptreg.records.attempt import RunRef
from ptreg.records.condition_grammar import parse
from ptreg.records.decision import decide, problems
from ptreg.views.dossier_runs import run_lines

# A stand-in for pynvml: two devices; each lists the processes this module's ``listed`` names
# (by default every descendant of the process that imported it: a worker's command tree), and
# reports the utilisation ``busy`` gives, one value a sample.
FAKE_NVML = textwrap.dedent(
    """
    import os, psutil
    from types import SimpleNamespace

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    init_fails = False
    not_supported = False
    listed = None  # a list of lists of (pid, bytes) per sample; None: this process's descendants
    busy = [40.0, 60.0]
    calls = {"processes": 0, "busy": 0}

    def nvmlInit():
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount():
        return 2

    def nvmlDeviceGetHandleByIndex(i):
        return i

    def nvmlDeviceGetName(handle):
        return b"Fake GPU " + str(handle).encode()

    def nvmlDeviceGetMemoryInfo(handle):
        return SimpleNamespace(total=(16 << 30), used=(3 << 30) if handle == 0 else 0)

    def nvmlSystemGetDriverVersion():
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion():
        return 12040

    def nvmlDeviceGetComputeRunningProcesses(handle):
        if not_supported:
            raise NVMLError_NotSupported("Not Supported")
        if handle != 0:
            return []
        if listed is None:
            tree = psutil.Process(os.getpid()).children(recursive=True)
            return [SimpleNamespace(pid=p.pid, usedGpuMemory=256 << 20) for p in tree]
        found = listed[min(calls["processes"], len(listed) - 1)]
        calls["processes"] += 1
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in found]

    def nvmlDeviceGetUtilizationRates(handle):
        value = busy[min(calls["busy"], len(busy) - 1)]
        calls["busy"] += 1
        return SimpleNamespace(gpu=value, memory=0)
    """
)


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    exec(compile(FAKE_NVML, "pynvml.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(accelerators, "_nvml", {})
    monkeypatch.setattr(accelerators, "SAMPLE_SECONDS", 0.0)
    return module


def test_a_gpu_gives_the_trees_peak_memory_over_samples_and_its_mean_utilisation(fake_nvml: Any) -> None:
    fake_nvml.listed = [[(10, 300 * MB)], [(10, 500 * MB), (11, 200 * MB), (99, 1000 * MB)]]
    use = AcceleratorUse.here()
    assert use is not None
    use.sample({10, 11})
    use.sample({10, 11})
    # the peak over the two samples, the tree's own (pid 99 is someone else's); utilisation
    # of the one device the tree was seen on
    assert use.measured() == {
        "accelerator_memory_mb": 700,
        "accelerator_memory_by": "processes",
        "accelerator_utilisation": 50,
    }


def test_the_devices_and_drivers_are_the_machines_facts(fake_nvml: Any) -> None:
    assert machine_facts() == {
        "library": "NVML",
        "devices": [{"name": "Fake GPU 0", "memory_mb": 16384}, {"name": "Fake GPU 1", "memory_mb": 16384}],
        "driver_version": "550.54.15",
        "cuda_driver_version": "12.4",
    }


def test_a_tree_nvml_never_lists_has_no_accelerator_memory_only_utilisation(fake_nvml: Any) -> None:
    fake_nvml.listed = [[(99, 1000 * MB)]]
    use = AcceleratorUse.here()
    assert use is not None
    use.sample({10})
    # never 0 MB: unknown stays unknown; utilisation over both devices, the tree seen on neither
    assert use.measured() == {"accelerator_utilisation": 50}


def test_a_device_that_cannot_list_its_processes_is_measured_by_its_used_memory(fake_nvml: Any) -> None:
    fake_nvml.not_supported = True
    use = AcceleratorUse.here()
    assert use is not None
    use.sample({10})
    assert use.measured()["accelerator_memory_mb"] == 3 * 1024
    assert use.measured()["accelerator_memory_by"] == "device"


def test_nvml_failing_to_start_changes_nothing(fake_nvml: Any) -> None:
    fake_nvml.init_fails = True
    assert AcceleratorUse.here() is None
    assert machine_facts() is None


def test_no_pynvml_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from ptreg.engine.environment import machine_environment

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    monkeypatch.setattr(accelerators, "_nvml", {})
    assert AcceleratorUse.here() is None
    assert machine_facts() is None
    assert "accelerators" not in machine_environment()


SCORES = """\
import json, os
open(os.environ["PTREG_METRICS"], "w").write(json.dumps({"score": 1}) + "\\n")
"""


def test_a_run_on_a_machine_with_a_gpu_records_it(
    fake_nvml: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Through ``ptreg run``: the worker imports the fake too (it is on the caller's import
    path), and the repeat's tree's memory on it is recorded, summarised and shown."""
    from ptreg.engine.workloads.arms import declared
    from ptreg.engine.workloads.discovery import workload_named
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_environment, read_results

    folder = tmp_path_factory.mktemp("fake-nvml")  # not in the working directory, which no worker imports from
    (folder / "pynvml.py").write_text(FAKE_NVML)
    monkeypatch.syspath_prepend(str(folder))
    script = "import time\n" + SCORES + "time.sleep(0.5)\n"
    root = command_attempt(tmp_path / "project", script, {"only": {}}, repeats=2)
    done = run_attempt(root, ATTEMPT, ["test"])
    results = read_results(done.folder)
    (cell,) = results.cells
    assert results.status == "complete", cell.reason
    samples = cell.metric_samples or []
    assert [s.accelerator_memory_by for s in samples] == ["processes", "processes"]
    assert all(s.accelerator_memory_mb is not None and s.accelerator_memory_mb >= 256 for s in samples)
    assert cell.metrics is not None and "accelerator_memory_mb" in cell.metrics
    assert "accelerator_utilisation" in declared(results.spec, workload_named("command"), results.cells)
    assert read_environment(root, done.folder)["accelerators"]["devices"][0]["name"] == "Fake GPU 0"
    shown = "\n".join(
        str(line) for line in run_lines(root, ATTEMPT, RunRef(run_id=results.run_id or "", status=results.status))
    )
    assert "- Accelerators: Fake GPU 0, Fake GPU 1; driver 550.54.15, CUDA driver 12.4." in shown
    # a plan may decide on it
    assert decide(parse("metric(accelerator_memory_mb, arm=only) > 200", against=results), results).truth is True


def test_a_run_without_a_gpu_declares_no_accelerator_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ptreg.engine.workloads.arms import declared
    from ptreg.engine.workloads.discovery import workload_named
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    monkeypatch.setattr(accelerators, "_nvml", {"module": None})
    root = command_attempt(tmp_path / "project", SCORES, {"only": {}})
    results = read_results(run_attempt(root, ATTEMPT, ["test"]).folder)
    (cell,) = results.cells
    assert cell.metrics is not None and "accelerator_memory_mb" not in cell.metrics
    found = declared(results.spec, workload_named("command"), results.cells)
    assert not {"accelerator_memory_mb", "accelerator_utilisation"} & set(found)
    # a plan on it is admitted, and stays undecided where nothing measured it: unknown, never 0
    rule = parse("metric(accelerator_memory_mb, arm=only) < 1000")
    assert rule_problems(rule, results.spec, {}) == []
    assert problems(rule, results) == []
    assert decide(rule, results).truth is None


@pytest.mark.parametrize(
    "forged",
    [
        {"devices": 5, "driver_version": ["x"]},
        {"devices": ["not an object", {"name": "G" * 10_000}], "cuda_driver_version": None},
    ],
)
def test_a_forged_accelerators_entry_is_shown_bounded_never_a_crash(tmp_path: Path, forged: dict[str, Any]) -> None:
    from ptreg.views.dossier_runs import _command_side

    (line,) = _command_side({"accelerators": forged})
    assert line.startswith("- Accelerators: ") and len(line) < 300


def test_a_staged_repeat_takes_the_largest_memory_and_time_weighted_use_of_its_each_stages() -> None:
    from ptreg.engine.workloads.command import _accelerator_peak

    a = {"accelerator_memory_mb": 100.0, "accelerator_memory_by": "processes", "accelerator_utilisation": 20.0}
    b = {"accelerator_memory_mb": 300.0, "accelerator_memory_by": "device", "accelerator_utilisation": 80.0}
    found = _accelerator_peak([a, b], [1.0, 3.0])
    assert found == {"accelerator_memory_mb": 300.0, "accelerator_memory_by": "device", "accelerator_utilisation": 65.0}
    # one stage unmeasured: it could have held more, so nothing is claimed
    assert _accelerator_peak([a, None], [1.0, 3.0]) == {}
    assert _accelerator_peak([], []) == {}
