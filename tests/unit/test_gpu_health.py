"""GPU fitness checks against a stand-in for NVML (no GPU here): a throttled, faulty or shared GPU is said,
a healthy one is not, an unsupported query is skipped; the warning reaches the comparison's report."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from canary_action.compare.runs import from_metrics
from canary_action.compare.verdict import compare
from canary_action.config.thresholds import resolve
from canary_action.train.gpu_health import gpu_health
from tests.factories import make_metrics


class NVMLError(Exception):
    pass


@dataclass
class FakeNvml:
    """The pynvml calls gpu_health makes, answering from fields; None raises NVMLError (not supported)."""

    reasons: int | None = 0x1  # idle
    ecc: int | None = 0
    processes: list[object] | None = field(default_factory=list)
    utilization: int | None = 0
    NVMLError: type[Exception] = NVMLError
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: int = 1
    NVML_VOLATILE_ECC: int = 0

    def _answer(self, value: object) -> object:
        if value is None:
            raise NVMLError("Not Supported")
        return value

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> object:  # noqa: N802 (NVML's names)
        return self._answer(self.reasons)

    def nvmlDeviceGetTotalEccErrors(self, handle: object, kind: int, counter: int) -> object:  # noqa: N802
        assert (kind, counter) == (1, 0)
        return self._answer(self.ecc)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> object:  # noqa: N802
        return self._answer(self.processes)

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> object:  # noqa: N802
        return SimpleNamespace(gpu=self._answer(self.utilization))


def test_a_healthy_idle_gpu_says_nothing() -> None:
    assert gpu_health(FakeNvml(), "h", own_contexts=0) == []
    assert gpu_health(FakeNvml(processes=["us"], utilization=97), "h", own_contexts=1) == []  # our own load


def test_thermal_throttling_is_named_and_power_capping_is_not() -> None:
    [warning] = gpu_health(FakeNvml(reasons=0x4 | 0x40), "h", own_contexts=1)
    assert "hardware thermal slowdown" in warning
    assert gpu_health(FakeNvml(reasons=0x4), "h", own_contexts=1) == []  # SW power cap: normal under load


def test_ecc_errors_other_processes_and_a_busy_gpu_are_said() -> None:
    warnings = gpu_health(FakeNvml(ecc=3, processes=["a", "b"], utilization=55), "h", own_contexts=0)
    assert any("3 uncorrected ECC" in w for w in warnings)
    assert any("2 other process(es)" in w for w in warnings)
    assert any("55 % busy before" in w for w in warnings)


def test_what_the_gpu_does_not_support_is_skipped() -> None:
    nvml = FakeNvml(reasons=None, ecc=None, processes=None, utilization=None)
    assert gpu_health(nvml, "h", own_contexts=0) == []
    assert gpu_health(FakeNvml(ecc=None, processes=["x"]), "h", own_contexts=0) == [
        "1 other process(es) use the GPU: the canary shares it, and its timings with it"
    ]


def test_older_drivers_answer_under_the_throttle_name() -> None:
    class OldNvml(FakeNvml):
        nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]  # noqa: N815

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: object) -> object:  # noqa: N802
            return 0x20

    assert "software thermal slowdown" in gpu_health(OldNvml(), "h", own_contexts=1)[0]


def test_measurement_warnings_reach_the_report_notes() -> None:
    warned = make_metrics(seed=1, measurement_warnings=["after training: the GPU is throttled: software thermal"])
    current = from_metrics(warned, "current.json")
    baseline = from_metrics(make_metrics(seed=2), "baseline.json")
    result = compare(current, [baseline], resolve("smoke", None, None))
    assert result.notes[0] == "measurement quality: after training: the GPU is throttled: software thermal"
