"""The host peak of a step (probes.py): the kernel's high-water mark, reset at the step's start, so that memory a
step takes and frees before its end still counts; absent where the mark cannot be reset."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from canary_action.metrics import schema as m
from canary_action.train import probes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
MIB = 1024 * 1024


def test_a_peak_freed_inside_the_step_is_seen() -> None:
    probe = probes.DeviceProbe(torch.device("cpu"))
    probe.reset_peaks()
    held = bytearray(200 * MIB)  # zero-filled: every page touched
    del held
    readings = probe.step_readings()
    peak, now = readings[m.HOST_PEAK_RSS_MIB], readings[m.HOST_RSS_MIB]
    assert peak is not None
    assert now is not None
    assert peak >= now + 150


def test_the_next_step_starts_from_a_fresh_mark() -> None:
    probe = probes.DeviceProbe(torch.device("cpu"))
    probe.reset_peaks()
    held = bytearray(200 * MIB)
    del held
    first = probe.step_readings()[m.HOST_PEAK_RSS_MIB]
    second = probe.step_readings()[m.HOST_PEAK_RSS_MIB]  # reset by the first reading, as the CUDA peaks are
    assert first is not None
    assert second is not None
    assert second <= first - 150


def test_no_peak_where_the_mark_cannot_be_reset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(probes, "_CLEAR_REFS", tmp_path / "absent" / "clear_refs")
    probe = probes.DeviceProbe(torch.device("cpu"))
    probe.reset_peaks()
    readings = probe.step_readings()
    assert m.HOST_PEAK_RSS_MIB not in readings  # a peak since the process started is not the step's
    assert readings[m.HOST_RSS_MIB] is not None
