"""Devices: which ones a command may use (:func:`resolve_device`), and the facts recorded with each
measurement: name, driver, SM clock, power and temperature.

Sources, in order: NVML through ``pynvml`` when importable; ``nvidia-smi --query-gpu`` when on PATH; torch's
own helpers (``torch.cuda.clock_rate``/``power_draw``/``temperature``, which use NVML too). Anything that
cannot be read is None and a note says why; reading never raises.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

from fibserve.bench.report import DeviceSnapshot

if TYPE_CHECKING:
    import torch


class DeviceProblem(ValueError):
    """The requested device is malformed or not visible on this machine (a usage error, exit code 2)."""


def resolve_device(device: str | None, flag: str = "--device") -> str:
    """``device`` checked against this machine: ``cpu`` or ``cuda[:N]``; None picks ``cuda:0`` when a GPU is
    visible, else ``cpu``. ``flag`` is the command-line option the messages tell the user to change.

    Raises:
        DeviceProblem: not ``cpu``/``cuda[:N]``, or a CUDA device that torch cannot see (the message says what
            ``cpu`` still does).
    """
    import torch  # here, not at the top: a command that stops at a usage error before this loads no torch

    if device is None:
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise DeviceProblem(f"unknown device {device!r}: use cpu or cuda:N") from None
    if parsed.type == "cpu":
        return device
    if parsed.type != "cuda":
        raise DeviceProblem(f"unknown device {device!r}: use cpu or cuda:N")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible == 0:
        raise DeviceProblem(
            f"no CUDA device is visible here; use {flag} cpu (Triton float32 runs under the interpreter, "
            "CUDA candidates get static analysis only)"
        )
    if parsed.index is not None and parsed.index >= visible:
        raise DeviceProblem(
            f"{device} is not visible here: {visible} CUDA device(s), cuda:0 to cuda:{visible - 1}"
        )
    return device


_QUERY = "name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,memory.used"


def _float(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _nvidia_smi(ident: str) -> DeviceSnapshot | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits", "-i", ident],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    parts = [p.strip() for p in out.splitlines()[0].split(",")] if out else []
    if len(parts) != 7:
        return None
    return DeviceSnapshot(
        name=parts[0],
        driver=parts[1],
        sm_clock_mhz=_float(parts[2]),
        max_sm_clock_mhz=_float(parts[3]),
        power_w=_float(parts[4]),
        temperature_c=_float(parts[5]),
        memory_used_mib=_float(parts[6]),
        source="nvidia-smi",
    )


def device_uuid(index: int) -> str | None:
    """The UUID (``GPU-...``) of CUDA device ``index`` as this process numbers it, from torch's device
    properties; None when torch does not say.

    CUDA numbers devices after ``CUDA_VISIBLE_DEVICES`` (a Ray lane on the host's GPU 3 sees it as cuda:0);
    NVML and ``nvidia-smi -i`` number all of the host's GPUs, so every lookup there goes by this UUID.
    """
    import torch

    try:
        raw = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:
        return None
    if raw is None:
        return None
    return str(raw) if str(raw).startswith("GPU-") else f"GPU-{raw}"


def nvml_handle(pynvml: Any, index: int) -> Any:
    """The NVML handle of CUDA device ``index`` (by :func:`device_uuid`; by index only when torch gives no
    UUID). ``pynvml`` is the imported module, already initialised.

    Raises:
        pynvml.NVMLError: NVML does not know the device.
    """
    uuid = device_uuid(index)
    return pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else pynvml.nvmlDeviceGetHandleByIndex(index)


def _pynvml(index: int) -> DeviceSnapshot | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = nvml_handle(pynvml, index)
        name = pynvml.nvmlDeviceGetName(handle)
        driver = pynvml.nvmlSystemGetDriverVersion()
        return DeviceSnapshot(
            name=name.decode() if isinstance(name, bytes) else name,
            driver=driver.decode() if isinstance(driver, bytes) else driver,
            sm_clock_mhz=float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            max_sm_clock_mhz=float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            power_w=pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            temperature_c=float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
            memory_used_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
            source="pynvml",
        )
    except Exception:
        return None


def _torch(device: torch.device) -> DeviceSnapshot:
    import torch

    snap = DeviceSnapshot(name=torch.cuda.get_device_name(device), source="torch")
    for field, helper in (
        ("sm_clock_mhz", "clock_rate"),
        ("power_w", "power_draw"),
        ("temperature_c", "temperature"),
    ):
        fn = getattr(torch.cuda, helper, None)
        try:
            value = fn(device) if fn else None
        except Exception:
            value = None
        if value is not None:
            setattr(snap, field, float(value) / (1000.0 if helper == "power_draw" else 1.0))
    return snap


def snapshot(device: str | torch.device) -> DeviceSnapshot:
    """Read the device state now (CPU: ``name="cpu"`` plus the processor name)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return DeviceSnapshot(name="cpu", driver=platform.processor() or platform.machine(), source="none")
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = device_uuid(index)
    return _pynvml(index) or (_nvidia_smi(uuid) if uuid else _nvidia_smi(str(index))) or _torch(device)


def library_versions() -> dict[str, str]:
    """Versions of torch, CUDA (as torch sees it), triton and tvm-ffi where importable."""
    import torch

    libs: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version()}
    if torch.version.cuda:
        libs["cuda"] = torch.version.cuda
    for module in ("triton", "tvm_ffi"):
        try:
            libs[module] = __import__(module).__version__
        except Exception:
            continue
    return {k: str(v) for k, v in libs.items()}
