"""Measurements the callback API cannot see, taken by wrapping three methods of one trainer instance.

- `get_batch_samples`: time spent waiting for batches (the data pipeline's share of a step);
- `compute_loss`: the batch actually fed to the model, to count its non-padding tokens (measured, never
  derived from the config), and the place where planted faults (fault_injection) act: on the loss, and as
  a sleep after the forward pass (a slowdown, or a straggler on one rank of a multi-process run);
- `_generate_and_score_completions` (TRL's online trainers): generation and scoring time.

Wrapping the instance, not subclassing the trainer class, keeps this working for a user's own Trainer
(`training_type: custom`) as well as for every TRL trainer.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import torch

from canary_action.config.blocks import FaultInjection
from canary_action.train.callback import StepCounters
from canary_action.train.capture import StepCapture
from canary_action.train.probes import DeviceProbe

#: (tokens, samples) of one batch as the family's trainer sees it in compute_loss.
BatchCounter = Callable[[dict[str, Any]], tuple[int, int]]


class PlantedCrashError(RuntimeError):
    """Raised by fault_injection.crash_at_step: a crash in the middle of training, on purpose."""


def instrument(
    trainer: Any,
    counters: StepCounters,
    probe: DeviceProbe,
    count_batch: BatchCounter,
    faults: FaultInjection | None,
    *,
    capture: StepCapture | None = None,
) -> None:
    data_delay_s = faults.slow_data_s_per_step if faults is not None else 0.0
    _wrap_data_wait(trainer, counters, data_delay_s)
    _wrap_compute_loss(trainer, counters, count_batch, faults, capture)
    if capture is not None and capture.config.on_grad_spike is not None and hasattr(trainer, "_clip_grad_norm"):
        _wrap_clip(trainer, capture)
    if hasattr(trainer, "dataloader"):  # TRL's PPO iterates its own dataloader in its own loop
        trainer.dataloader = _CountedLoader(trainer.dataloader, counters, count_batch, data_delay_s)
    if hasattr(trainer, "_generate_and_score_completions"):
        _wrap_generation(trainer, counters, probe)


class _CountedLoader:
    """A dataloader seen through the canary: time waiting for each batch, and its tokens."""

    def __init__(self, loader: Any, counters: StepCounters, count_batch: BatchCounter, delay_s: float) -> None:
        self.loader, self.counters, self.count_batch, self.delay_s = loader, counters, count_batch, delay_s

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Any:
        iterator = iter(self.loader)
        while True:
            start = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            time.sleep(self.delay_s)  # fault_injection.slow_data_s_per_step (PPO fetches one batch a step)
            self.counters.data_wait_s += time.perf_counter() - start
            tokens, samples = self.count_batch(batch)
            self.counters.num_tokens += tokens
            self.counters.num_samples += samples
            yield batch


def _wrap_data_wait(trainer: Any, counters: StepCounters, delay_s: float) -> None:
    original = trainer.get_batch_samples

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            time.sleep(delay_s)  # fault_injection.slow_data_s_per_step: a planted slow data pipeline
            return original(*args, **kwargs)
        finally:
            counters.data_wait_s += time.perf_counter() - start

    trainer.get_batch_samples = timed


def _wrap_clip(trainer: Any, capture: StepCapture) -> None:
    """The gradient norm before clipping, for capture.on_grad_spike: the callbacks see the gradients clipped."""
    original = trainer._clip_grad_norm

    @functools.wraps(original)
    def measured(*args: Any, **kwargs: Any) -> Any:
        norm = original(*args, **kwargs)
        capture.pre_clip_norm(norm)
        return norm

    trainer._clip_grad_norm = measured


def _wrap_compute_loss(
    trainer: Any,
    counters: StepCounters,
    count_batch: BatchCounter,
    faults: FaultInjection | None,
    capture: StepCapture | None,
) -> None:
    original = trainer.compute_loss
    slept_in_step = 0
    sleep_s = 0.0
    busy = PlantedWork(faults.extra_matmuls_per_step) if faults is not None else None
    gpu_only = PlantedWork.gpu_only(faults.gpu_matmuls_per_step) if faults is not None else None
    if faults is not None:
        # A planted straggler sleeps on its own rank only: the others then wait for it in the all-reduce.
        straggler = faults.slow_rank is not None and faults.slow_rank == trainer.args.process_index
        sleep_s = faults.sleep_s_per_step + (faults.slow_rank_sleep_s if straggler else 0.0)

    @functools.wraps(original)
    def counted(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal slept_in_step
        # Training only: evaluation and TRL's reference passes do not count as processed training tokens.
        if model.training:
            tokens, samples = count_batch(inputs)
            counters.num_tokens += tokens
            counters.num_samples += samples
        # What the model received, kept before the trainer can change it (train/capture.py): the step may be
        # written after its update, or at its end.
        keep = capture if capture is not None and model.training else None
        received = dict(inputs) if keep is not None else None
        rng = keep.rng_state(trainer.args.device) if keep is not None else None
        result = original(model, inputs, *args, **kwargs)
        if faults is not None:
            result = _planted(model, result, faults)
        if keep is not None and received is not None and rng is not None:
            keep.micro_batch(trainer, (received, args, kwargs), result, rng)
        return result

    def _planted(model: Any, result: Any, faults: FaultInjection) -> Any:
        nonlocal slept_in_step
        step = trainer.state.global_step + 1  # the optimizer step in progress
        if slept_in_step != step:  # once per step, not per micro-batch
            slept_in_step = step
            if sleep_s:
                # On a GPU the wait starts when the device is idle: sleeping while it still runs the forward pass
                # would hide the sleep in a GPU-bound step, and the planted +5 % would plant nothing.
                _synchronize(_device_of(result))
                time.sleep(sleep_s)
            if busy is not None:
                busy.run(_device_of(result))
            if gpu_only is not None:
                gpu_only.run(_device_of(result))
        return planted_loss(compute_dtype(trainer, model), result, step, faults)

    trainer.compute_loss = counted


def _wrap_generation(trainer: Any, counters: StepCounters, probe: DeviceProbe) -> None:
    original = trainer._generate_and_score_completions

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            probe.synchronize()
            counters.generation_s = (counters.generation_s or 0.0) + time.perf_counter() - start

    trainer._generate_and_score_completions = timed


class PlantedWork:
    """fault_injection.extra_matmuls_per_step: a fixed amount of tensor work, so it slows a step as real compute
    does (on a loaded machine it takes longer, like the rest of the step), where a sleep would not. On a GPU each
    256x256 product costs the host a launch and the GPU next to nothing: a host slowdown there.

    fault_injection.gpu_matmuls_per_step (`gpu_only`): 4096x4096 bf16 products, a fraction of a millisecond of
    GPU time each for one launch: work only the GPU does. They are enqueued and not waited for (the step's end
    synchronises), so a host-bound step hides them from step time while the GPU's busy time shows them."""

    SIZE = 256
    GPU_SIZE = 4096

    def __init__(self, count: int, size: int = SIZE, dtype: torch.dtype = torch.float32) -> None:
        self.count = count
        self.size, self.dtype = size, dtype
        self._operands: tuple[torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def gpu_only(cls, count: int) -> PlantedWork:
        return cls(count, cls.GPU_SIZE, torch.bfloat16)

    def run(self, device: torch.device) -> None:
        if not self.count:
            return
        if self._operands is None or self._operands[0].device != device:
            generator = torch.Generator().manual_seed(0)
            a, b = (torch.randn(self.size, self.size, generator=generator).to(device, self.dtype) for _ in range(2))
            self._operands = (a, b)
        a, b = self._operands
        with torch.no_grad():
            for _ in range(self.count):
                torch.mm(a, b)  # the same operands each time: constant cost, no overflow or denormals

    def device_timings_s(self, device: torch.device, rounds: int = 5, warm_s: float = 0.5) -> list[float]:
        """GPU seconds per product on `device`, one figure per round of `count` products, by CUDA events around
        each round. The GPU first works for `warm_s` of wall time: an idle GPU runs at a fraction of its clock (an
        H200 at 345 of 1,980 MHz), so products timed cold measured several times their steady cost and sized a
        planted +20 % at one product (the H200 check, 2026-11-28, docs/benchmarks.md#gpu-check)."""
        self.run(device)
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        while time.perf_counter() - start < warm_s:
            self.run(device)
            torch.cuda.synchronize(device)
        times = []
        for _ in range(rounds):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            begin.record()
            self.run(device)
            end.record()
            torch.cuda.synchronize(device)
            times.append(begin.elapsed_time(end) / 1000 / self.count)
        return times

    @classmethod
    def timings_s(cls, rounds: int = 5, per_round: int = 200) -> list[float]:
        """Seconds per planted product on the CPU on one thread (as the canary trains), one figure per round of
        `per_round` products after a warm-up: to size extra_matmuls_per_step as a share of a measured step."""
        torch.set_num_threads(1)
        work = cls(per_round)
        device = torch.device("cpu")
        work.run(device)  # warm-up: operands made, caches and the allocator settled
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            work.run(device)
            times.append((time.perf_counter() - start) / per_round)
        return times


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_of(result: Any) -> torch.device:
    loss = result[0] if isinstance(result, tuple) else result
    return loss.device if isinstance(loss, torch.Tensor) else torch.device("cpu")


def compute_dtype(trainer: Any, model: Any) -> torch.dtype:
    """The dtype the model computes in: the trainer's mixed precision (autocast) when on, else its weights'."""
    if getattr(trainer.args, "bf16", False):
        return torch.bfloat16
    if getattr(trainer.args, "fp16", False):
        return torch.float16
    dtype: torch.dtype = next(model.parameters()).dtype
    return dtype


def planted_loss(dtype: torch.dtype, result: Any, step: int, faults: FaultInjection) -> Any:
    """Apply the planted crash, NaN, precision fault or gradient spike of `step` (the optimizer step in progress)
    to the loss. `canary replay` applies it as the run did: a planted fault is the run's own code."""
    if faults.crash_at_step == step:
        raise PlantedCrashError(f"fault_injection.crash_at_step: planted crash at step {step}")
    if faults.nan_loss_at_step == step:
        # NaN through the graph, so the backward pass produces NaN gradients as a real numerics bug would.
        return _scaled(result, float("nan"))
    if faults.precision_loss_at_step == step:
        # 1 - 1e-4 in the model's dtype: 0.9999 in fp32, exactly 1 in bf16 and fp16 (their spacing below 1 is
        # 2^-8 and 2^-11). The factor 1 + (log(1 - x) - log(1 - x)) is then exactly 1 in fp32 and NaN (-inf + inf)
        # in the half types: a NaN that only the model's precision makes, the same on every CPU.
        x = torch.tensor(1 - 1e-4, dtype=dtype)
        term = torch.log(1 - x)
        factor = (1 + (term - term.clone())).float()
        return _scaled(result, float(factor))
    if step in faults.grad_spike_at_steps:
        # The loss scaled, so every gradient is: the pre-clip norm jumps by the factor on any machine, whatever
        # its numerics (a learning rate pushed up spiked on one CPU and not on another).
        return _scaled(result, faults.grad_spike_factor)
    return result


def _scaled(result: Any, factor: float) -> Any:
    if isinstance(result, tuple):
        return (result[0] * torch.tensor(factor, device=result[0].device), *result[1:])
    return result * torch.tensor(factor, device=result.device)
