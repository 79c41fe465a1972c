"""Per-step readings of the device and host: CUDA peak memory, NVML utilisation, host RSS and its peak in the step.

One `DeviceProbe` per run. On CPU it reads only the host; nothing here pretends to measure what this
machine does not have (no zeros for a GPU that is not there: the columns are simply absent).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

import psutil
import torch

from canary_action.metrics import schema as m
from canary_action.train.gpu_health import gpu_health

_MIB = 1024 * 1024
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


class DeviceProbe:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._process = psutil.Process(os.getpid())
        self._nvml_handle = _nvml_handle(device) if self.cuda else None
        self.warnings: list[str] = []
        self._host_peak_reset = False
        if self.cuda and self._nvml_handle is None:
            self.warnings.append(
                "GPU utilisation not measured: NVML (nvidia-ml-py or the driver library) is unavailable"
            )

    def health(self) -> list[str]:
        """Throttling, ECC errors, other processes on this GPU (gpu_health.py); [] off CUDA or without NVML."""
        if self._nvml_handle is None:
            return []
        import pynvml

        return gpu_health(pynvml, self._nvml_handle, own_contexts=1 if torch.cuda.is_initialized() else 0)  # type: ignore[no-untyped-call]

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def reset_peaks(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        self._host_peak_reset = _reset_host_peak()

    def step_readings(self) -> dict[str, float | None]:
        """Peaks since the previous call (then reset), host RSS now, GPU utilisation over NVML's last sample."""
        readings: dict[str, float | None] = {m.HOST_RSS_MIB: self._process.memory_info().rss / _MIB}
        if self._host_peak_reset:  # else VmHWM would be the peak since the process started, not the step's
            readings[m.HOST_PEAK_RSS_MIB] = _host_peak_mib()
        self._host_peak_reset = _reset_host_peak()  # the next step's mark starts here, like the CUDA peaks
        if self.cuda:
            readings[m.PEAK_ALLOCATED_MIB] = torch.cuda.max_memory_allocated(self.device) / _MIB
            readings[m.PEAK_RESERVED_MIB] = torch.cuda.max_memory_reserved(self.device) / _MIB
            torch.cuda.reset_peak_memory_stats(self.device)
        if self._nvml_handle is not None:
            import pynvml

            readings[m.GPU_UTILIZATION_PCT] = float(pynvml.nvmlDeviceGetUtilizationRates(self._nvml_handle).gpu)
        return readings


def _reset_host_peak() -> bool:
    """Reset the kernel's record of this process's peak RSS (VmHWM; Linux >= 4.0); False where it cannot."""
    try:
        _CLEAR_REFS.write_text("5", encoding="ascii")  # 5: the peak RSS only (1-4 clear page bits)
    except OSError:
        return False
    return True


def _host_peak_mib() -> float | None:
    """VmHWM of /proc/self/status in MiB: the peak RSS since the last reset."""
    try:
        found = re.search(r"^VmHWM:\s+(\d+) kB$", _STATUS.read_text(encoding="ascii"), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None


def _nvml_handle(device: torch.device) -> Any:
    """The NVML handle of the GPU this process uses, found by UUID.

    NVML numbers GPUs physically and ignores CUDA_VISIBLE_DEVICES, so "cuda:0" may be NVML's GPU 3. The
    UUID is the same on both sides. Returns None when NVML is unavailable (then no utilisation column).
    """
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no pynvml, no driver library: utilisation simply is not measured
        return None
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        with contextlib.suppress(pynvml.NVMLError):
            nvml_uuid = pynvml.nvmlDeviceGetUUID(handle)
            if str(nvml_uuid).removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return handle
    return None
