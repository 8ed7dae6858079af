"""NVIDIA accelerators, through NVML (``pynvml`` from nvidia-ml-py, ptreg's optional ``gpu``
extra): the devices a machine has, for environment.json, and what a command's process tree
took of them, for each repeat.

NVML is used only when ``pynvml`` imports and ``nvmlInit`` succeeds; otherwise (no extra, no
driver, no GPU) nothing here records anything, and a run is what it was without it: an
accelerator metric that was not measured is absent (unknown), never 0.

A repeat's accelerator memory is the largest, over samples taken while the tree runs, of the
memory NVML lists for the tree's processes on every device (``nvmlDeviceGetComputeRunningProcesses``,
recorded as measured by ``processes``). Where a device cannot list its processes
(``NVMLError_NotSupported``, some drivers and MIG), it is the device's used memory, whoever
uses it (measured by ``device``). A tree none of whose processes NVML ever lists (it used no
accelerator, or runs in a container whose process ids NVML does not see) has none recorded.
Utilisation is NVML's busy share of each device over its last sample period
(``nvmlDeviceGetUtilizationRates``, a device-wide figure), averaged over the devices the tree
was seen on (all of them when none could list its processes) and over the samples.
NVML sees every device, whatever ``CUDA_VISIBLE_DEVICES`` hides from the command.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

MB = 1024 * 1024
SAMPLE_SECONDS = 0.1

_nvml: dict[str, ModuleType | None] = {}


def nvml() -> ModuleType | None:
    """NVML, initialised once per process; None when pynvml is missing or ``nvmlInit`` fails."""
    if "module" not in _nvml:
        _nvml["module"] = None
        try:
            import pynvml  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except Exception:
            return None
        _nvml["module"] = pynvml
    return _nvml["module"]


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _handles(nv: ModuleType) -> list[Any]:
    try:
        return [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    except nv.NVMLError:
        return []


def machine_facts() -> dict[str, Any] | None:
    """The machine's NVIDIA devices (name, memory), driver and CUDA driver version, each null
    when NVML does not say; None when there is no NVML or no device (then nothing is recorded)."""
    nv = nvml()
    if nv is None:
        return None
    handles = _handles(nv)
    if not handles:
        return None
    devices = []
    for handle in handles:
        name = total = None
        with contextlib.suppress(nv.NVMLError):
            name = _text(nv.nvmlDeviceGetName(handle))
        with contextlib.suppress(nv.NVMLError):
            total = nv.nvmlDeviceGetMemoryInfo(handle).total / MB
        devices.append({"name": name, "memory_mb": total})
    driver = cuda = None
    with contextlib.suppress(nv.NVMLError):
        driver = _text(nv.nvmlSystemGetDriverVersion())
    with contextlib.suppress(nv.NVMLError):
        version = int(nv.nvmlSystemGetCudaDriverVersion())
        cuda = f"{version // 1000}.{version % 1000 // 10}"
    return {"library": "NVML", "devices": devices, "driver_version": driver, "cuda_driver_version": cuda}


@dataclass
class AcceleratorUse:
    """What a process tree takes of the machine's devices, sampled while it runs."""

    nv: ModuleType
    handles: list[Any]
    sampled_at: float = field(default=-1e9)
    peak_mb: float | None = None
    by: Literal["processes", "device"] | None = None
    utilisation: list[float] = field(default_factory=list)

    @classmethod
    def here(cls) -> AcceleratorUse | None:
        """A sampler of this machine's devices; None when there is no NVML or no device."""
        nv = nvml()
        if nv is None:
            return None
        handles = _handles(nv)
        return cls(nv, handles) if handles else None

    def due(self) -> bool:
        """Whether the last sample is ``SAMPLE_SECONDS`` old: a caller may poll faster, and
        listing a tree's processes for a sample is not free."""
        return time.monotonic() - self.sampled_at >= SAMPLE_SECONDS

    def sample(self, pids: set[int]) -> None:
        """Sample the devices for the processes ``pids``."""
        self.sampled_at = time.monotonic()
        nv = self.nv
        memory: float | None = None
        by_device = False
        used_on = []
        for handle in self.handles:
            try:
                listed = nv.nvmlDeviceGetComputeRunningProcesses(handle)
            except nv.NVMLError:  # NotSupported and the like: the device's used memory, whoever uses it
                with contextlib.suppress(nv.NVMLError):
                    memory = (memory or 0.0) + nv.nvmlDeviceGetMemoryInfo(handle).used / MB
                    by_device = True
                    used_on.append(handle)
                continue
            ours = [p for p in listed if p.pid in pids]
            if ours:
                used_on.append(handle)
                taken = [p.usedGpuMemory for p in ours if isinstance(p.usedGpuMemory, int)]
                if taken:  # None where the driver does not say (Windows' WDDM, some MIG setups)
                    memory = (memory or 0.0) + sum(taken) / MB
        if memory is not None and memory > 0:
            self.peak_mb = max(memory, self.peak_mb or 0.0)
            self.by = "device" if by_device or self.by == "device" else "processes"
        busy = []
        for handle in used_on or self.handles:
            with contextlib.suppress(nv.NVMLError):
                busy.append(float(nv.nvmlDeviceGetUtilizationRates(handle).gpu))
        if busy:
            self.utilisation.append(sum(busy) / len(busy))

    def measured(self) -> dict[str, Any]:
        """The repeat's accelerator metrics, as a MetricSample takes them: only those measured."""
        found: dict[str, Any] = {}
        if self.peak_mb is not None:
            found.update(accelerator_memory_mb=self.peak_mb, accelerator_memory_by=self.by)
        if self.utilisation:
            found["accelerator_utilisation"] = sum(self.utilisation) / len(self.utilisation)
        return found
