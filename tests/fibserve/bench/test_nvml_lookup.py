"""NVML lookups go by the device's UUID, not its CUDA index: under ``CUDA_VISIBLE_DEVICES=3`` (a Ray lane on
the host's fourth GPU) the process's cuda:0 is NVML's index 3, and asking NVML for index 0 names another GPU.

No GPU here: torch's device properties report the UUID that CUDA would, and a stand-in ``pynvml`` module
numbers the host's four GPUs as NVML does (by host index, ignoring CUDA_VISIBLE_DEVICES); the guard's and the
snapshot's own code does the lookup.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch
from fibserve.bench import device as device_module
from fibserve.bench.timing.guard import gpu_processes

HOST_GPUS = {f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd": i for i in range(4)}
"""UUID -> NVML (host) index of the stand-in host's GPUs."""
VISIBLE = "GPU-00000003-aaaa-bbbb-cccc-dddddddddddd"
"""The one GPU this process sees (as cuda:0)."""


def stand_in_nvml() -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_TEMPERATURE_GPU = 1, 0
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetHandleByUUID = lambda uuid: HOST_GPUS[uuid]
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda handle: [types.SimpleNamespace(pid=1000 + handle)]
    nvml.nvmlDeviceGetName = lambda handle: f"host GPU {handle}"
    nvml.nvmlSystemGetDriverVersion = lambda: "580.0"
    nvml.nvmlDeviceGetClockInfo = lambda handle, kind: 1980
    nvml.nvmlDeviceGetMaxClockInfo = lambda handle, kind: 1980
    nvml.nvmlDeviceGetPowerUsage = lambda handle: 100_000
    nvml.nvmlDeviceGetTemperature = lambda handle, kind: 40
    nvml.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(used=0)
    return nvml


@pytest.fixture
def remapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process sees one GPU, the host's index 3, as cuda:0."""
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_nvml())
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(uuid=VISIBLE[4:])
    )
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def test_the_guard_asks_nvml_for_the_visible_gpu_by_uuid(remapped: None) -> None:
    assert device_module.device_uuid(0) == VISIBLE
    assert gpu_processes(torch.device("cuda", 0)) == [1003]  # host GPU 3's processes, not GPU 0's (1000)


def test_the_device_snapshot_names_the_visible_gpu(remapped: None) -> None:
    assert device_module._pynvml(0).name == "host GPU 3"
