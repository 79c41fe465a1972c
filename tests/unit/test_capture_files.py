"""A capture comes back from an artifact: untrusted data. Every file is checked before a byte is loaded, and what is
wrong is refused with CaptureError (exit 2) naming the file: truncated files, headers that claim more than the
file holds, dtypes this replay does not load, a pickle named .safetensors, links, malformed metadata."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from canary_action.errors import CaptureError
from canary_action.train import capture as cap


def a_capture(root: Path) -> Path:
    """A run folder holding one well-formed captured step (what StepCapture writes)."""
    step = root / "captures" / "step-000002-rank0"
    step.mkdir(parents=True)
    (root / "captures" / "config.json").write_text(json.dumps({"name": "x"}), encoding="utf-8")
    save_file({"inputs/input_ids": torch.arange(12).reshape(2, 6), "loss": torch.tensor(1.5),
               "rng/cpu": torch.get_rng_state()}, str(step / "batch-0.safetensors"))  # fmt: skip
    save_file({"w": torch.ones(3)}, str(step / "weights.safetensors"))
    meta = {"schema": 1, "step": 2, "rank": 0, "reason": "planned", "weights": "step_start", "torch_threads": 1,
            "batches": [{"file": "batch-0.safetensors", "values": {"inputs/labels": {"kind": "none"}},
                         "unsupported": [], "loss": 1.5}], "seen": {}}  # fmt: skip
    (step / "capture.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def test_a_well_formed_capture_reads_back(tmp_path: Path) -> None:
    config, (step,) = cap.find_captures(a_capture(tmp_path))
    assert config == {"name": "x"}
    ((batch, tensors),) = list(cap.iter_batches(step, tmp_path))
    inputs, args, kwargs = cap.rebuild(batch, tensors)
    assert torch.equal(inputs["input_ids"], torch.arange(12).reshape(2, 6))
    assert inputs["labels"] is None
    assert args == []
    assert kwargs == {}


def header_file(path: Path, header: object, data: bytes = b"") -> None:
    raw_header(path, json.dumps(header).encode(), data)


def raw_header(path: Path, header: bytes, data: bytes = b"") -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:40]), "truncated"),
        (lambda p: p.write_bytes(b"\x01\x02"), "truncated"),
        (
            lambda p: header_file(
                p, {"x": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 8]}}, b"\0" * 8
            ),
            "claims 1,000,000,000,000 elements",
        ),
        (
            lambda p: header_file(p, {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
            "outside the file",
        ),
        (
            lambda p: header_file(p, {"x": {"dtype": "OBJECT", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
            "a dtype this replay does not load",
        ),
        (lambda p: header_file(p, ["not", "a", "mapping"]), "not a JSON object"),
        (lambda p: torch.save({"a": torch.ones(2)}, p), "not a safetensors file"),
        (
            lambda p: raw_header(p, b'{"x": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 8]}}', b"\0" * 8),
            "malformed entry",
        ),
        (lambda p: p.write_bytes(struct.pack("<Q", 20_000) + b"[" * 20_000 + b"\0" * 8), "not JSON"),
        (
            lambda p: (
                header_file(p, {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)
                or p.write_bytes(p.read_bytes().replace(b"[2]", b"[NaN]"))
            ),
            "not JSON",
        ),
    ],
    ids=[
        "truncated",
        "two-bytes",
        "1e12-elements",
        "beyond-the-data",
        "unknown-dtype",
        "list-header",
        "pickle",
        "infinite-shape",
        "nested-header",
        "nan-constant",
    ],
)
def test_a_hostile_tensor_file_is_refused_by_name(tmp_path: Path, plant: object, said: str) -> None:
    run = a_capture(tmp_path)
    target = run / "captures" / "step-000002-rank0" / "batch-0.safetensors"
    plant(target)  # type: ignore[operator]
    _, (step,) = cap.find_captures(run)
    with pytest.raises(CaptureError, match=said) as refused:
        list(cap.iter_batches(step, run))
    assert str(target) in refused.value.message


def test_links_are_refused(tmp_path: Path) -> None:
    run = a_capture(tmp_path / "run")
    outside = tmp_path / "secret.safetensors"
    save_file({"x": torch.ones(1)}, str(outside))
    target = run / "captures" / "step-000002-rank0" / "batch-0.safetensors"
    target.unlink()
    target.symlink_to(outside)
    _, (step,) = cap.find_captures(run)
    with pytest.raises(CaptureError, match="a link"):
        list(cap.iter_batches(step, run))
    folder = run / "captures" / "step-000002-rank0"
    folder.rename(tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CaptureError, match="a link"):
        cap.find_captures(run)


@pytest.mark.parametrize(
    ("meta", "said"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"schema": 9}), "not a capture this version writes"),
        (json.dumps({"schema": 1, "step": -3, "rank": 0, "torch_threads": 1}), "out of range"),
        (
            json.dumps(
                {
                    "schema": 1,
                    "step": 2,
                    "rank": 0,
                    "torch_threads": 1,
                    "weights": "step_start",
                    "reason": "x",
                    "batches": [{"file": "../../etc/passwd", "values": {}, "unsupported": []}],
                }
            ),
            "batch-N.safetensors",
        ),
        ("x" * (cap.MAX_META_BYTES + 1), "over"),
        (json.dumps({"schema": 1, "step": 1e999, "rank": 0, "torch_threads": 1}), "not JSON|not a capture"),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ],
    ids=["not-json", "schema", "step-range", "file-escape", "huge", "infinite-step", "deep-nesting"],
)
def test_malformed_metadata_is_refused(tmp_path: Path, meta: str, said: str) -> None:
    run = a_capture(tmp_path)
    (run / "captures" / "step-000002-rank0" / "capture.json").write_text(meta, encoding="utf-8")
    with pytest.raises(CaptureError, match=said):
        cap.find_captures(run)


def test_a_run_without_captures_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="capture:"):
        cap.find_captures(tmp_path)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_loaded_or_refused_never_a_crash(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "batch-0.safetensors"
    path.write_bytes(data)
    with contextlib.suppress(CaptureError):
        cap.load_tensors(path, path.parent)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "I64", "BF16", "BOOL", "Q4", ""]),
    "shape": st.lists(st.integers(-2, 10**7), max_size=4),
    "data_offsets": st.lists(st.integers(-5, 100), min_size=2, max_size=2),
}), max_size=3), st.binary(max_size=64))  # fmt: skip
def test_any_header_is_loaded_or_refused_never_a_crash(
    tmp_path_factory: pytest.TempPathFactory, header: dict[str, object], data: bytes
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "batch-0.safetensors"
    header_file(path, header, data)
    with contextlib.suppress(CaptureError):
        cap.load_tensors(path, path.parent)


def test_a_batch_whose_values_do_not_rebuild_is_refused(tmp_path: Path) -> None:
    run = a_capture(tmp_path)
    meta_path = run / "captures" / "step-000002-rank0" / "capture.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["batches"][0]["values"] = {"inputs/pairs": {"kind": "list", "length": 3}}  # items 0-2 missing
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    _, (step,) = cap.find_captures(run)
    ((batch, tensors),) = list(cap.iter_batches(step, run))
    with pytest.raises(CaptureError, match="do not rebuild a batch"):
        cap.rebuild(batch, tensors)
    tensors["rng/cpu"] = torch.ones(3)
    with pytest.raises(CaptureError, match="not an RNG state"):
        cap.rebuild(batch, tensors)


def test_a_variant_of_the_data_is_refused() -> None:
    from canary_action.errors import UsageError
    from canary_action.train.replay import Variant

    with pytest.raises(UsageError, match="changes the batches"):
        Variant.parse("packing=true")
    assert Variant.parse("dtype=fp32, attn_implementation=eager").overrides == (
        "dtype=fp32",
        "attn_implementation=eager",
    )
