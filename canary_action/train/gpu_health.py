"""Is this GPU fit to be measured? Throttling, ECC errors and other processes, read from NVML.

A throttled or shared GPU measures slow for reasons that are not the pull request's; the canary does not
refuse to run on one (a self-hosted runner may have no better), but says so in metrics.json's
measurement_warnings, and the comparison puts the warning in the report. Each check reads NVML through the
module object passed in (pynvml, or a test's stand-in) and skips what the GPU does not support.
"""

from __future__ import annotations

from typing import Any, Final

from canary_action.metrics.io import counted

#: Clock event (throttle) reasons that slow a GPU for reasons outside the workload. Power capping under load
#: and an idle GPU's low clocks are normal and not listed. Values: nvml.h, nvmlClocksEventReason*.
SLOWDOWNS: Final = {
    0x08: "hardware slowdown (temperature or power brake)",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
}
BUSY_UTILIZATION_PCT: Final = 10


def gpu_health(nvml: Any, handle: Any, *, own_contexts: int) -> list[str]:
    """Warnings about the GPU behind `handle`; `own_contexts` is how many compute processes are ours (0 or 1)."""
    warnings: list[str] = []
    for check in (_throttled, _ecc_errors, _other_processes, _busy):
        try:
            warnings.extend(check(nvml, handle, own_contexts))
        except nvml.NVMLError:  # not supported on this GPU or driver: nothing to say
            continue
    return warnings


def _throttled(nvml: Any, handle: Any, _: int) -> list[str]:
    read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    reasons = int((read or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)(handle))  # renamed in NVML 12.2
    named = [name for bit, name in SLOWDOWNS.items() if reasons & bit]
    return [f"the GPU is throttled: {', '.join(named)}; step times are slower than the code"] if named else []


def _ecc_errors(nvml: Any, handle: Any, _: int) -> list[str]:
    kind, counter = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
    count = int(nvml.nvmlDeviceGetTotalEccErrors(handle, kind, counter))
    if not count:
        return []
    return [f"the GPU reports {counted(count, 'uncorrected ECC error')} since the driver loaded: check or drain it"]


def _other_processes(nvml: Any, handle: Any, own_contexts: int) -> list[str]:
    others = len(nvml.nvmlDeviceGetComputeRunningProcesses(handle)) - own_contexts
    if others <= 0:
        return []
    return [f"{others} other process(es) use the GPU: the canary shares it, and its timings with it"]


def _busy(nvml: Any, handle: Any, own_contexts: int) -> list[str]:
    """Before our own work starts, the GPU should be idle (a process NVML cannot list, e.g. in another container)."""
    busy = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    if own_contexts or busy < BUSY_UTILIZATION_PCT:
        return []
    return [f"the GPU was {busy} % busy before the canary started"]
