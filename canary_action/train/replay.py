"""`canary replay RUN_DIR`: a captured step's batches through the model and the loss alone, under variants.

For each variant (the run as it was, or its config with KEY=VALUE changed: attention implementation, dtype,
torch.compile, gradient checkpointing, LoRA...) the replay builds the run's trainer from the captured config, as
the run built it, but never iterates its data or steps its optimizer: it loads the captured step's starting
weights into the model, restores the RNG state each micro-batch saw, and calls the trainer's own compute_loss
on the captured batch, then backward. Why the trainer: the loss of DPO, GRPO or a team's trainer is its own code
(a reference model, advantages, a team's term), and the recorded loss is what that code returned; a forward of
the bare model would reproduce none of it. Why the captured weights, not a replay from step 1: a step's weights
are the product of every batch and optimizer state before it, and the batches before it are not kept; the
trainable weights are (LoRA's adapters: megabytes), the frozen rest is rebuilt from the config.

Each row: the forward (compute_loss) and backward medians over repeats (CUDA events on a GPU: the GPU's
timeline; the wall clock on the CPU), peak memory on CUDA, the loss and its difference from the recording,
NaN/Inf; a variant that fails is a row with its error's first line, never the end of the replay.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import torch
from pydantic import BaseModel, ConfigDict

from canary_action.config.load import parse_config
from canary_action.config.schema import CanaryConfig, factory_of
from canary_action.errors import CanaryError, CaptureError, UsageError
from canary_action.train import capture as cap
from canary_action.train import custom
from canary_action.train.instrument import compute_dtype, planted_loss
from canary_action.train.placement import resolve_placement
from canary_action.train.run import family_module
from canary_action.train.setup import TrainingSetup

SCHEMA_VERSION: Final = 1
AS_RUN: Final = "as run"
#: The matrix: each variant alone against the run's own settings (the first row).
MATRIX_CPU: Final = (
    "attn_implementation=eager", "attn_implementation=sdpa", "torch_compile=true", "dtype=fp32", "dtype=bf16",
    "gradient_checkpointing=true",
)  # fmt: skip
MATRIX_CUDA: Final = (*MATRIX_CPU, "attn_implementation=flash_attention_2", "dtype=fp16")
#: Keys that change what reaches the model (the batch): a replay of captured batches cannot vary them.
DATA_KEYS: Final = frozenset({
    "packing", "padding_free", "max_length", "max_prompt_length", "batch_size", "gradient_accumulation_steps",
    "dataset_name", "dataset_subset", "dataset_revision", "dataset_split", "dataset_size", "seed", "num_generations",
    "max_new_tokens", "tokenizer_name", "completion_only_loss",
})  # fmt: skip


class ReplayRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    variant: str
    step: int
    rank: int
    status: Literal["ok", "fails"]
    error: str | None = None
    forward_ms: float | None = None
    backward_ms: float | None = None
    peak_memory_mib: float | None = None
    loss: float | str | None = None
    """The replayed loss of the step's first micro-batch (NaN/Inf as strings); all micro-batches are compared."""
    recorded_loss: float | str | None = None
    largest_difference: float | str | None = None
    """The largest |replayed - recorded| over the step's micro-batches; "nan" where one side is NaN."""
    bitwise_equal: bool | None = None
    non_finite: bool | None = None
    comparable: bool = True
    """False where the loss cannot match by construction (weights left out of the capture, LoRA switched): timed
    only."""
    note: str | None = None


class ReplayResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    run_dir: str
    device: str
    repeats: int
    rows: list[ReplayRow]


@dataclass(frozen=True)
class Variant:
    label: str
    overrides: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str) -> Variant:
        parts = tuple(p.strip() for p in spec.split(",") if p.strip())
        for part in parts:
            if "=" not in part:
                raise UsageError(f"--variant {spec!r}: each change is KEY=VALUE (dtype=fp32, attn_implementation=sdpa)")
            key = part.partition("=")[0].strip()
            if key.split(".")[0] in DATA_KEYS:
                raise UsageError(
                    f"--variant {part}: {key} changes the batches, which the capture fixed: a replay changes the "
                    "model and its arithmetic, not the data",
                    fix="compare it with a lockstep pair (canary pair) instead",
                )
        return cls(", ".join(parts) or AS_RUN, parts)


def matrix(device: str) -> list[Variant]:
    return [Variant(AS_RUN, ()), *(Variant.parse(v) for v in (MATRIX_CUDA if device == "cuda" else MATRIX_CPU))]


def replay(
    run_dir: Path,
    variants: Sequence[Variant],
    *,
    steps: Sequence[int] = (),
    repeats: int = 3,
    say: Callable[[str], None] = lambda _: None,
) -> ReplayResult:
    """Every captured step (or those in `steps`) under every variant, from the config the run captured."""
    captured_config, captured = cap.find_captures(run_dir)
    chosen = [c for c in captured if not steps or c.step in steps]
    if not chosen:
        found = ", ".join(str(c.step) for c in captured)
        raise CaptureError(f"--step {', '.join(map(str, steps))}: not captured in {run_dir} (captured: {found})")
    for step in chosen:
        cap.check_files(step, run_dir)
    # Each step's files read once, whatever the number of variants.
    loaded = {step.folder: _Loaded.read(step, run_dir) for step in chosen}
    rows: list[ReplayRow] = []
    device = "cpu"
    for variant in variants:
        say(f"replay: {variant.label}")
        try:
            with _built(captured_config, variant) as (trainer, config):
                device = trainer.args.device.type
                for step in chosen:
                    rows.append(_replay_step(trainer, config, loaded[step.folder], variant=variant, repeats=repeats))
        except CaptureError:
            raise  # the capture itself: refused whole (exit 2), not one variant's failure
        except Exception as error:  # a variant that cannot be built or run is a row, not the end of the replay
            for step in chosen:
                rows.append(ReplayRow(variant=variant.label, step=step.step, rank=step.rank, status="fails",
                                      error=_first_line(error)))  # fmt: skip
    return ReplayResult(run_dir=str(run_dir), device=device, repeats=repeats, rows=rows)


@contextmanager
def _built(data: dict[str, Any], variant: Variant) -> Iterator[tuple[Any, CanaryConfig]]:
    """The run's trainer as the run built it, with the variant's changes; its model in training mode."""
    config = parse_config(data, source="the captured config", overrides=variant.overrides).config
    family = family_module(config.training_type)
    family.preflight(config)
    builder = custom if factory_of(config) is not None else family
    placement = resolve_placement(config)
    with tempfile.TemporaryDirectory(prefix="canary-replay-") as scratch:
        setup: TrainingSetup[Any] = TrainingSetup(config, placement, Path(scratch), [], [])
        trainer = builder.build_trainer(setup)
        model = trainer.model
        if config.gradient_checkpointing and not _checkpointing(model):
            _enable_checkpointing(model)
            if hasattr(model, "enable_input_require_grads"):
                model.enable_input_require_grads()
        model.train()
        yield trainer, config


def _checkpointing(model: Any) -> bool:
    """Whether activation checkpointing is on: transformers 5 names it is_activation_checkpointing (warning for the
    old is_gradient_checkpointing, which 4.x has alone)."""
    on = getattr(model, "is_activation_checkpointing", None)
    return bool(on if on is not None else getattr(model, "is_gradient_checkpointing", False))


def _enable_checkpointing(model: Any) -> None:
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


@dataclass(frozen=True)
class _Loaded:
    """A captured step's files, read once: its micro-batches and its starting weights (None: not captured)."""

    step: cap.CapturedStep
    batches: list[tuple[dict[str, Any], dict[str, torch.Tensor]]]
    weights: dict[str, torch.Tensor] | None

    @classmethod
    def read(cls, step: cap.CapturedStep, run_dir: Path) -> _Loaded:
        weights = cap.load_tensors(step.folder / cap.WEIGHTS_FILE, run_dir) if step.weights == "step_start" else None
        return cls(step, list(cap.iter_batches(step, run_dir)), weights)


def _replay_step(trainer: Any, config: CanaryConfig, loaded: _Loaded, *, variant: Variant, repeats: int) -> ReplayRow:
    model, step, batches = trainer.model, loaded.step, loaded.batches
    if step.torch_threads and trainer.args.device.type == "cpu":
        torch.set_num_threads(step.torch_threads)  # the run's reductions split as the run's were: bitwise
    comparable, note = _load_weights(model, loaded.weights)
    # As the trainer's train() prepares it: accelerate's autocast around forward for bf16/fp16 mixed precision.
    prepared = trainer.accelerator.prepare_model(model, evaluation_mode=False)
    forward = prepared if not config.torch_compile else torch.compile(prepared)
    device = trainer.args.device
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times: list[tuple[float, float]] = []
    losses: list[torch.Tensor] = []
    for repeat in range(max(1, repeats) + 1):  # the first untimed: a compile, caches and the allocator warm up
        f_total = b_total = 0.0
        for batch, tensors in batches:
            inputs, args, kwargs = cap.rebuild(batch, tensors)
            inputs, args, kwargs = _to(inputs, device), _to(args, device), _to(kwargs, device)
            _restore_rng(tensors, device)
            _restore_trainer(trainer, batch)
            with _timer(cuda) as f_time:
                loss = trainer.compute_loss(forward, inputs, *args, **kwargs)
                if config.fault_injection is not None:
                    loss = planted_loss(compute_dtype(trainer, model), loss, step.step, config.fault_injection)
            value = loss[0] if isinstance(loss, tuple) else loss
            with _timer(cuda) as b_time:
                value.backward()
            model.zero_grad(set_to_none=True)
            f_total += f_time()
            b_total += b_time()
            if repeat == 0:
                losses.append(value.detach().float().cpu().reshape(-1)[:1])
        if repeat > 0:
            times.append((f_total, b_total))
    recorded = [t["loss"].float().reshape(-1)[:1] for _, t in batches if "loss" in t]
    differences = [_difference(a, b) for a, b in zip(losses, recorded, strict=False)]
    largest = math.nan if any(math.isnan(d) for d in differences) else max(differences, default=0.0)
    equal = len(recorded) == len(losses) and all(_same(a, b) for a, b in zip(losses, recorded, strict=True))
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None
    first = float(losses[0]) if losses else None
    return ReplayRow(
        variant=variant.label, step=step.step, rank=step.rank, status="ok",
        forward_ms=1000 * statistics.median(t[0] for t in times),
        backward_ms=1000 * statistics.median(t[1] for t in times),
        peak_memory_mib=peak, loss=_number(first), recorded_loss=_number(float(recorded[0])) if recorded else None,
        largest_difference=_number(largest) if differences else None,
        bitwise_equal=equal if recorded else None,
        non_finite=any(not math.isfinite(float(x)) for x in losses), comparable=comparable, note=note,
    )  # fmt: skip


def _load_weights(model: Any, weights: dict[str, torch.Tensor] | None) -> tuple[bool, str | None]:
    if weights is None:
        return False, "the capture holds no weights (over max_step_bytes, or taken after the update): timed only"
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if set(trainable) != set(weights):
        return False, "the variant's trainable weights are not the run's (LoRA switched?): timed only"
    wrong = next((n for n, p in trainable.items() if weights[n].shape != p.shape), None)
    if wrong is not None:
        shapes = f"{tuple(weights[wrong].shape)} captured, {tuple(trainable[wrong].shape)} in this model"
        return False, f"the variant's weights are not the run's shapes ({wrong}: {shapes}): timed only"
    with torch.no_grad():
        for name, parameter in trainable.items():
            parameter.copy_(weights[name].to(parameter.dtype))
    return True, None


def _restore_rng(tensors: dict[str, torch.Tensor], device: torch.device) -> None:
    if "rng/cpu" in tensors:
        torch.set_rng_state(tensors["rng/cpu"])
    if "rng/cuda" in tensors and device.type == "cuda":
        torch.cuda.set_rng_state(tensors["rng/cuda"], device)


def _restore_trainer(trainer: Any, batch: dict[str, Any]) -> None:
    """What the training loop had set on the trainer at this micro-batch (train/capture.py TRAINER_STATE)."""
    found = batch.get("trainer")
    state: dict[str, Any] = found if isinstance(found, dict) else {}
    for name in cap.TRAINER_STATE:
        value = state.get(name)
        setattr(trainer, name, value if isinstance(value, int) else trainer.args.gradient_accumulation_steps)
    step = state.get("global_step")
    if isinstance(step, int) and step >= 0:
        trainer.state.global_step = step


@contextmanager
def _timer(cuda: bool) -> Iterator[Callable[[], float]]:
    """Seconds of the block: CUDA events on a GPU (its timeline, the sync at the end), the wall clock elsewhere."""
    if cuda:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        begin.record()
        elapsed: list[float] = []
        yield lambda: elapsed[0]
        end.record()
        torch.cuda.synchronize()
        elapsed.append(begin.elapsed_time(end) / 1000)
    else:
        start = time.perf_counter()
        wall: list[float] = []
        try:
            yield lambda: wall[0]
        finally:
            wall.append(time.perf_counter() - start)


def _to(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(a, b)) or bool(torch.isnan(a).all() and torch.isnan(b).all())


def _difference(a: torch.Tensor, b: torch.Tensor) -> float:
    if _same(a, b):
        return 0.0
    return abs(float(a) - float(b)) if math.isfinite(float(a)) and math.isfinite(float(b)) else math.nan


def _number(value: float | None) -> float | str | None:
    if value is None:
        return None
    return value if math.isfinite(value) else repr(value)


def _first_line(error: BaseException) -> str:
    text = error.message if isinstance(error, CanaryError) else str(error)
    line = (text.strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {line}"[:300]
