"""Interrupts that are not lost (interrupts.py): a Ctrl-C swallowed on its way up (in a finaliser, where Python
prints "Exception ignored") is raised again at the next step end, so the run still stops and keeps what it measured."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import pytest
import torch
from transformers import TrainerControl, TrainerState, TrainingArguments

from canary_action import interrupts
from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters
from canary_action.train.probes import DeviceProbe


@pytest.fixture(autouse=True)
def no_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interrupts, "_pending", [])


def swallow(signum: int) -> None:
    """The handler runs where the signal lands; here its exception dies, as in a finaliser it would."""
    with contextlib.suppress(KeyboardInterrupt):
        interrupts._handle(signum, None)


def test_nothing_pending_raises_nothing() -> None:
    interrupts.raise_if_pending()


def test_a_swallowed_ctrl_c_is_raised_again_as_ctrl_c() -> None:
    swallow(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt) as raised:
        interrupts.raise_if_pending()
    assert raised.value.args == ()  # the CLI says "interrupted (Ctrl-C)"


def test_a_swallowed_sigterm_is_raised_again_naming_it() -> None:
    swallow(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match=f"signal {int(signal.SIGTERM)}"):
        interrupts.raise_if_pending()


def test_the_step_end_raises_a_swallowed_interrupt(tmp_path: Path) -> None:
    metrics = MetricsCallback(
        RunRecord(), StepCounters(), DeviceProbe(torch.device("cpu")), stop_on_non_finite=True, timeout_s=3600.0
    )
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=5, report_to=[])
    state, control = TrainerState(max_steps=5), TrainerControl()
    metrics.on_train_begin(args, state, control)
    metrics.on_step_begin(args, state, control)
    state.global_step = 1
    swallow(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        metrics.on_step_end(args, state, control)
