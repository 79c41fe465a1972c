"""Captured steps: the batches a step's model received, exactly, for `canary replay` (docs/replay.md).

The run side (StepCapture, a trainer callback fed by the compute_loss wrapper in train/instrument.py) keeps the
current step's micro-batches by reference and writes a step when the config asks (`capture.steps`) or when it
goes wrong: its loss NaN/Inf (on by default: a NaN run captures its first NaN step without any config), its
gradient norm a spike, or its time k times the median. One folder per step and process:

    RUN_DIR/captures/config.json                  the run's resolved config (replay rebuilds the model from it)
    RUN_DIR/captures/step-000012-rank0/capture.json   what was captured and why, each value's kind, what the run saw
    RUN_DIR/captures/step-000012-rank0/batch-0.safetensors   micro-batch 0: its inputs, its loss, the RNG state
    RUN_DIR/captures/step-000012-rank0/weights.safetensors   the trainable weights at the step's start

Tensors in safetensors and metadata in JSON, never pickle: a capture comes back from an artifact and is read as
untrusted data (`read_capture` checks every header against its file before a byte is loaded).
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.config.blocks import CaptureConfig
from canary_action.errors import CaptureError

SCHEMA: Final = 1
FOLDER: Final = "captures"
CONFIG_FILE: Final = "config.json"
META_FILE: Final = "capture.json"
WEIGHTS_FILE: Final = "weights.safetensors"
MAX_META_BYTES: Final = 4 * 2**20
MAX_FILE_BYTES: Final = 2**32  # the config's largest max_step_bytes
MAX_STEP_FILES_BYTES: Final = 2**32 + 2**24  # a step's files together: its max_step_bytes and their headers
MAX_HEADER_BYTES: Final = 16 * 2**20
#: safetensors' dtype names and the torch dtypes a capture may hold: nothing else is loaded.
DTYPES: Final[dict[str, torch.dtype]] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}  # fmt: skip
SCALARS: Final = (bool, int, float, str)
MAX_STRING: Final = 10_000
TRAINER_STATE: Final = ("current_gradient_accumulation_steps",)
WARMUP_STEPS: Final = 4  # spikes and slow steps are judged against the steps after these


# --- writing: the run side -------------------------------------------------------------------------------------


@dataclass
class MicroBatch:
    inputs: dict[str, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    loss: torch.Tensor | None
    rng: dict[str, torch.Tensor]
    trainer: dict[str, int | None]


@dataclass
class StepCapture(TrainerCallback):
    """Keeps the step in progress and writes it when asked or when it went wrong (module docstring)."""

    config: CaptureConfig
    run_dir: Path
    rank: int
    run_config: Mapping[str, Any]
    notices: list[str]
    written: list[tuple[int, str, int]] = field(default_factory=list)
    """(step, reason, bytes) of each capture written."""
    seconds: float = 0.0
    _step: int = 0
    _batches: list[MicroBatch] = field(default_factory=list)
    _pending: str | None = None
    _non_finite_done: bool = False
    _grad_norms: list[float] = field(default_factory=list)
    _step_times: list[float] = field(default_factory=list)
    _step_start: float = 0.0
    _full: bool = False
    _pre_clip: Any = None

    def pre_clip_norm(self, norm: Any) -> None:
        """The gradient norm the trainer measured before clipping (fed by train/instrument.py)."""
        self._pre_clip = norm.detach() if isinstance(norm, torch.Tensor) else norm

    @property
    def enabled(self) -> bool:
        c = self.config
        return bool(c.steps or c.on_non_finite or c.on_grad_spike or c.on_slow_step)

    # fed by the compute_loss wrapper
    def rng_state(self, device: torch.device) -> dict[str, torch.Tensor]:
        state = {"cpu": torch.get_rng_state()}
        if device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(device)
        return state

    def micro_batch(self, trainer: Any, received: tuple[Mapping[str, Any], tuple[Any, ...], Mapping[str, Any]],
                    loss: Any, rng: dict[str, torch.Tensor]) -> None:  # fmt: skip
        inputs, args, kwargs = received
        value = loss[0] if isinstance(loss, tuple) else loss
        kept = value.detach() if isinstance(value, torch.Tensor) else None
        # What the training loop had set on the trainer that compute_loss reads (TRL's online trainers do).
        state = {name: getattr(trainer, name, None) for name in TRAINER_STATE}
        state["global_step"] = trainer.state.global_step
        self._batches.append(MicroBatch(dict(inputs), tuple(args), dict(kwargs), kept, rng, state))

    # trainer events
    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        self._step = state.global_step + 1
        self._batches = []
        self._pending = None
        self._step_start = time.perf_counter()

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None, **_: Any
    ) -> None:
        reason = self._reason_before_update(model)
        if reason is not None:
            self._write(model, reason, weights=True)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None, **_: Any
    ) -> None:
        elapsed = time.perf_counter() - self._step_start
        slow = self.config.on_slow_step
        if (
            slow is not None
            and len(self._step_times) >= WARMUP_STEPS
            and elapsed > slow * statistics.median(self._step_times[WARMUP_STEPS - 1 :] or self._step_times)
            and not any(step == self._step for step, _, _ in self.written)
        ):
            self._write(model, f"slow_step: {elapsed:.3g} s", weights=False)
        self._step_times.append(elapsed)
        if self.written and self.written[-1][0] == self._step:
            self._seen(elapsed)
        self._batches = []

    def _reason_before_update(self, model: Any) -> str | None:
        c = self.config
        if self._step in c.steps:
            return "planned"
        if c.on_non_finite and not self._non_finite_done:
            losses = [b.loss for b in self._batches if b.loss is not None]
            if losses and not bool(torch.isfinite(torch.stack([x.float().reshape(()) for x in losses])).all()):
                self._non_finite_done = True
                return "non_finite"
        if c.on_grad_spike is not None and model is not None:
            # The trainer clips before this event: the norm it measured before clipping (pre_clip_norm), else ours.
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            measured, self._pre_clip = self._pre_clip, None
            if measured is not None or grads:
                norm = float(measured) if measured is not None else _total_norm(grads)
                before = list(self._grad_norms)
                self._grad_norms.append(norm)
                if len(before) >= WARMUP_STEPS and norm > c.on_grad_spike * statistics.median(before):
                    return f"grad_spike: norm {norm:.4g}"
        return None

    def _write(self, model: Any, reason: str, *, weights: bool) -> None:
        if self._full or not self._batches:
            return
        if len(self.written) >= self.config.max_captures:
            self._full = True
            self.notices.append(
                f"capture: max_captures ({self.config.max_captures}) reached at step {self._step}; later steps "
                "were not captured"
            )
            return
        start = time.perf_counter()
        root = self.run_dir / FOLDER
        root.mkdir(parents=True, exist_ok=True)
        config_file = root / CONFIG_FILE
        if not config_file.exists():
            config_file.write_text(json.dumps(self.run_config, indent=1, default=str), encoding="utf-8")
        name = f"step-{self._step:06d}-rank{self.rank}"
        partial = root / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        budget = self.config.max_step_bytes
        batches = []
        used = 0
        for index, batch in enumerate(self._batches):
            tensors, values, unsupported = _flatten(batch)
            size = sum(t.numel() * t.element_size() for t in tensors.values())
            used += size
            if used > budget:
                shutil.rmtree(partial, ignore_errors=True)
                self.notices.append(
                    f"capture: step {self._step} ({reason}) not captured: its batches exceed max_step_bytes "
                    f"({budget:,})"
                )
                return
            _save(tensors, partial / f"batch-{index}.safetensors")
            loss = batch.loss
            batches.append({
                "file": f"batch-{index}.safetensors", "values": values, "unsupported": unsupported,
                "loss": _number(float(loss.float().reshape(()))) if loss is not None and loss.numel() == 1 else None,
                "trainer": {k: v for k, v in batch.trainer.items() if isinstance(v, int)},
            })  # fmt: skip
        weights_state = "omitted"
        if weights and model is not None:
            trainable = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
            size = sum(t.numel() * t.element_size() for t in trainable.values())
            if used + size <= budget:
                _save(trainable, partial / WEIGHTS_FILE)
                used += size
                weights_state = "step_start"
            else:
                self.notices.append(
                    f"capture: step {self._step}'s weights ({size:,} bytes) left out: over max_step_bytes "
                    f"({budget:,}); its replay starts from the run's initial weights (timed, its loss not comparable)"
                )
        meta = {
            "schema": SCHEMA, "step": self._step, "rank": self.rank, "reason": reason, "weights": weights_state,
            "torch_threads": torch.get_num_threads(), "batches": batches, "seen": {},
        }  # fmt: skip
        (partial / META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        final = root / name
        shutil.rmtree(final, ignore_errors=True)
        partial.replace(final)
        self.written.append((self._step, reason, used))
        self.seconds += time.perf_counter() - start

    def _seen(self, step_time_s: float) -> None:
        path = self.run_dir / FOLDER / f"step-{self._step:06d}-rank{self.rank}" / META_FILE
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["seen"] = {"step_time_s": step_time_s}
        path.write_text(json.dumps(meta, indent=1), encoding="utf-8")

    def missed(self, reached: int) -> str | None:
        """The notice for planned steps the run reached but never captured (PPO's own loop has no compute_loss)."""
        done = {step for step, _, _ in self.written}
        missed = [s for s in self.config.steps if s <= reached and s not in done]
        if not missed or self._full:
            return None
        return (
            f"capture: steps {', '.join(map(str, missed))} were reached but not captured: this trainer's steps do "
            "not go through compute_loss (PPO), or their batches were over max_step_bytes"
        )

    def summary(self) -> str | None:
        """The run summary's line: what was captured, its bytes and what it cost."""
        if not self.written:
            return None
        steps = ", ".join(f"step {step} ({reason.split(':')[0]})" for step, reason, _ in self.written)
        total = sum(size for _, _, size in self.written)
        return (
            f"capture: {steps} in {1000 * self.seconds:.1f} ms, {total / 2**20:.1f} MiB under {FOLDER}/ "
            f"(`canary replay {self.run_dir}`)"
        )


def _total_norm(grads: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)).float()))


def _flatten(batch: MicroBatch) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[str]]:
    """The micro-batch's tensors by path (inputs/input_ids, kwargs/num_items_in_batch, loss, rng/cpu), its other
    values by path with their kind, and the paths of values that cannot be captured."""
    tensors: dict[str, torch.Tensor] = {}
    values: dict[str, Any] = {}
    unsupported: list[str] = []

    def visit(path: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            tensors[path] = value
        elif value is None:
            values[path] = {"kind": "none"}
        elif isinstance(value, SCALARS):
            if isinstance(value, str) and len(value) > MAX_STRING:
                unsupported.append(path)
            else:
                values[path] = {
                    "kind": type(value).__name__,
                    "value": _number(value) if isinstance(value, float) else value,
                }
        elif isinstance(value, (list, tuple)) and len(value) <= 1000:
            values[path] = {"kind": "list" if isinstance(value, list) else "tuple", "length": len(value)}
            for index, item in enumerate(value):
                visit(f"{path}/{index}", item)
        else:
            unsupported.append(path)

    for key, value in batch.inputs.items():
        visit(f"inputs/{key}", value)
    for index, value in enumerate(batch.args):
        visit(f"args/{index}", value)
    for key, value in batch.kwargs.items():
        visit(f"kwargs/{key}", value)
    if batch.loss is not None:
        tensors["loss"] = batch.loss
    for key, state in batch.rng.items():
        tensors[f"rng/{key}"] = state
    return tensors, values, unsupported


def _save(tensors: Mapping[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}, str(path))


def _number(value: float) -> float | str:
    """A float as JSON can hold it: NaN and infinities as strings."""
    return value if math.isfinite(value) else repr(value)


# --- reading: untrusted -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapturedStep:
    folder: Path
    step: int
    rank: int
    reason: str
    weights: str
    torch_threads: int
    batches: list[dict[str, Any]]
    seen: dict[str, Any]


def find_captures(run_dir: Path) -> tuple[dict[str, Any], list[CapturedStep]]:
    """The run's config and its captured steps, every file checked: a CaptureError names the first that is wrong."""
    root = _inside(run_dir, FOLDER, run_dir)
    if not root.is_dir():
        raise CaptureError(
            f"{run_dir} holds no {FOLDER}/ folder: nothing was captured in this run. Fix: add a `capture:` block "
            "to the config (`capture: {steps: [12]}`) and run it again (docs/replay.md)"
        )
    config = _json(_inside(root, CONFIG_FILE, run_dir), MAX_META_BYTES)
    if not isinstance(config, dict):
        raise CaptureError(f"{root / CONFIG_FILE}: not a JSON object")
    steps = [read_capture(folder, run_dir) for folder in sorted(root.iterdir()) if folder.name.startswith("step-")]
    if not steps:
        raise CaptureError(f"{root} holds no captured step")
    return config, steps


def read_capture(folder: Path, run_dir: Path) -> CapturedStep:
    folder = _inside(folder.parent, folder.name, run_dir)
    if folder.is_symlink() or not folder.is_dir():
        raise CaptureError(f"{folder}: not a folder (a link or a file): refused")
    meta = _json(_inside(folder, META_FILE, run_dir), MAX_META_BYTES)
    try:
        if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
            raise TypeError(f"schema {meta.get('schema') if isinstance(meta, dict) else None!r}, not {SCHEMA}")
        step, rank, threads = (int(meta[k]) for k in ("step", "rank", "torch_threads"))
        if not (1 <= step <= 10**6 and 0 <= rank < 10**5 and 1 <= threads <= 1024):
            raise ValueError("step, rank or torch_threads out of range")
        batches = meta["batches"]
        if not isinstance(batches, list) or not 1 <= len(batches) <= 10_000:
            raise ValueError("batches: not a list of 1 to 10,000")
        for index, batch in enumerate(batches):
            if not isinstance(batch, dict) or batch.get("file") != f"batch-{index}.safetensors":
                raise ValueError("a batch entry is not {file: batch-N.safetensors, ...}")
            if not isinstance(batch.get("values"), dict) or not isinstance(batch.get("unsupported"), list):
                raise ValueError("a batch's values or unsupported list is malformed")
        weights = str(meta["weights"])
        if weights not in ("step_start", "omitted"):
            raise ValueError(f"weights {weights!r}")
        seen: dict[str, Any] = meta["seen"] if isinstance(meta.get("seen"), dict) else {}
        reason = str(meta["reason"])[:200]
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise CaptureError(f"{folder / META_FILE}: not a capture this version writes ({str(error)[:120]})") from None
    return CapturedStep(folder, step, rank, reason, weights, threads, batches, seen)


def load_tensors(path: Path, run_dir: Path) -> dict[str, torch.Tensor]:
    """A safetensors file of a capture, its header checked against the file before safetensors loads it."""
    path = _inside(path.parent, path.name, run_dir)
    check_safetensors(path)
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as error:  # safetensors' own errors: a file it cannot read is refused, not a crash
        raise CaptureError(f"{path}: not a readable safetensors file ({str(error)[:200]})") from None


def check_safetensors(path: Path) -> None:
    """8 bytes of header length, a JSON header of {name: {dtype, shape, data_offsets}}, the data: every tensor's
    bytes inside the file, its dtype one of DTYPES, its size what its shape says."""
    if path.is_symlink() or not path.is_file():
        raise CaptureError(f"{path}: missing, or a link: refused")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise CaptureError(f"{path}: {size:,} bytes, over the {MAX_FILE_BYTES:,} a capture's file may hold")
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise CaptureError(f"{path}: truncated ({size} bytes): not a safetensors file")
        (length,) = struct.unpack("<Q", head)
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise CaptureError(
                f"{path}: its header claims {length:,} bytes in a file of {size:,}: truncated, or not a safetensors "
                "file (a pickle?): refused"
            )
        try:
            header = json.loads(handle.read(length), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise CaptureError(f"{path}: its header is not JSON: not a safetensors file: refused") from None
    if not isinstance(header, dict):
        raise CaptureError(f"{path}: its header is not a JSON object: refused")
    data = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = DTYPES[entry["dtype"]]
            shape = [int(d) for d in entry["shape"]]
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise CaptureError(
                f"{path}: tensor {name!r}: a dtype this replay does not load, or a malformed entry"
            ) from None
        count = math.prod(shape) if shape else 1
        if any(d < 0 for d in shape) or not 0 <= begin <= end <= data:
            raise CaptureError(f"{path}: tensor {name!r} lies outside the file's {data:,} bytes of data: refused")
        if count * torch.empty((), dtype=dtype).element_size() != end - begin:
            raise CaptureError(
                f"{path}: tensor {name!r} claims {count:,} elements of {entry['dtype']} in {end - begin:,} bytes: "
                "refused"
            )


def rebuild(
    batch: dict[str, Any], tensors: Mapping[str, torch.Tensor]
) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """The inputs, positional and keyword arguments compute_loss received, from a batch's tensors and values."""
    for key, state in tensors.items():
        if key.startswith("rng/") and (state.dtype != torch.uint8 or state.dim() != 1):
            raise CaptureError(f"{batch['file']}: {key} is not an RNG state (a 1-D uint8 tensor): refused")
    try:
        return _rebuild(batch, tensors)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as error:
        raise CaptureError(
            f"{batch['file']}: its values do not rebuild a batch ({str(error)[:120]}): refused"
        ) from None


def _rebuild(
    batch: dict[str, Any], tensors: Mapping[str, torch.Tensor]
) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    if batch["unsupported"]:
        raise CaptureError(
            f"{batch['file']}: the run could not capture {', '.join(map(str, batch['unsupported'][:5]))}"
        )
    items: dict[str, Any] = {k: v for k, v in tensors.items() if not k.startswith("rng/") and k != "loss"}
    for path, value in batch["values"].items():
        kind = value.get("kind") if isinstance(value, dict) else None
        if kind == "none":
            items[path] = None
        elif kind in ("bool", "int", "float", "str"):
            raw = value.get("value")
            items[path] = float(raw) if kind == "float" else raw
        elif kind in ("list", "tuple"):
            items[path] = (kind, int(value.get("length", 0)))
        else:
            raise CaptureError(f"{batch['file']}: value {path!r} of an unknown kind {kind!r}")

    def build(path: str) -> Any:
        value = items[path]
        if isinstance(value, tuple) and len(value) == 2 and value[0] in ("list", "tuple"):
            built = [build(f"{path}/{i}") for i in range(value[1])]
            return built if value[0] == "list" else tuple(built)
        return value

    tops = {p.split("/", 2)[0] + "/" + p.split("/", 2)[1] for p in items if p.count("/") >= 1}
    inputs = {p.split("/", 1)[1]: build(p) for p in sorted(tops) if p.startswith("inputs/")}
    args = [build(p) for p in sorted((p for p in tops if p.startswith("args/")), key=lambda p: int(p.split("/")[1]))]
    kwargs = {p.split("/", 1)[1]: build(p) for p in sorted(tops) if p.startswith("kwargs/")}
    return inputs, args, kwargs


def _inside(parent: Path, name: str, run_dir: Path) -> Path:
    """parent/name, refused when it is a link or resolves outside the run folder."""
    path = parent / name
    if path.is_symlink():
        raise CaptureError(f"{path}: a link: a capture's files are plain files and folders: refused")
    base = run_dir.resolve()
    if path.exists() and not path.resolve().is_relative_to(base):
        raise CaptureError(f"{path}: outside {run_dir}: refused")
    return path


def _json(path: Path, limit: int) -> Any:
    if not path.is_file():
        raise CaptureError(f"{path}: missing: the capture is incomplete (an artifact cut short?)")
    if path.stat().st_size > limit:
        raise CaptureError(f"{path}: over {limit:,} bytes: refused")
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CaptureError(f"{path}: not JSON this replay reads ({str(error)[:120]}): refused") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a capture holds")


def check_files(step: CapturedStep, run_dir: Path) -> None:
    """Every tensor file of a captured step checked before anything is built: a hostile capture is refused whole."""
    names = [batch["file"] for batch in step.batches] + ([WEIGHTS_FILE] if step.weights == "step_start" else [])
    total = 0
    for name in names:
        path = _inside(step.folder, name, run_dir)
        check_safetensors(path)
        total += path.stat().st_size
        if total > MAX_STEP_FILES_BYTES:
            raise CaptureError(
                f"{step.folder}: its files hold over {MAX_STEP_FILES_BYTES:,} bytes, more than a step's capture may: "
                "refused"
            )


def iter_batches(step: CapturedStep, run_dir: Path) -> Iterator[tuple[dict[str, Any], dict[str, torch.Tensor]]]:
    for batch in step.batches:
        yield batch, load_tensors(step.folder / batch["file"], run_dir)
