"""Kernel names as people read them (compare/op_names.py), on the names an H200 op table really held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from canary_action.compare.op_names import LIMIT, short_op_name

PROFILED = Path(__file__).parents[1] / "fixtures" / "cuda" / "h200-2026-11-26"
OPS = json.loads(next(PROFILED.glob("prof__*.metrics.json")).read_text(encoding="utf-8"))["profiler"]["top_ops"]


@pytest.mark.parametrize(
    ("start", "short"),
    [
        ("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy",
         "vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda, array<…>>"),
        ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::BinaryFunctor",
         "elementwise_kernel<128, 4, gpu_kernel_impl<…>>"),
        ("void at::native::(anonymous namespace)::CatArrayBatchedCopy",
         "CatArrayBatchedCopy<OpaqueType<…>, unsigned int, 4, 64, 64>"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel",
         "vectorized_layer_norm_kernel<float, float, false>"),
    ],
)  # fmt: skip
def test_recorded_kernel_names_read_short(start: str, short: str) -> None:
    [name] = [o["name"] for o in OPS if o["name"].startswith(start)]
    assert len(name) > 150
    assert short_op_name(name) == short


def test_every_recorded_name_fits_and_plain_ops_stay_as_they_are() -> None:
    for op in OPS:
        short = short_op_name(op["name"])
        assert len(short) <= LIMIT
        assert "(" not in short
        if op["name"].startswith("aten::"):
            assert short == op["name"]


def test_the_op_table_shows_short_names() -> None:
    """A profiled H200 run against itself with the long copy kernel 50 % slower: the report names it short, the
    result keeps the full name."""
    from canary_action.compare.diff import op_changes
    from canary_action.metrics.schema import ProfilerSummary
    from canary_action.report.escape import plain
    from canary_action.report.view import _op_row

    window = ProfilerSummary.model_validate(
        json.loads(next(PROFILED.glob("prof__*.metrics.json")).read_text())["profiler"]
    )
    kernel = next(o for o in window.top_ops if o.name.startswith("void at::native::vectorized_elementwise_kernel"))
    slower = window.model_copy(update={"top_ops": [
        o.model_copy(update={"device_self_time_ms": 1.5 * o.device_self_time_ms}) if o is kernel else o
        for o in window.top_ops
    ]})  # fmt: skip
    [change] = [c for c in op_changes(window, 5, slower, 5) if c.name == kernel.name]
    assert change.name == kernel.name  # the data keeps the whole signature
    assert plain(_op_row(change)[0]) == "vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda, array<…>>"


def test_a_hostile_name_is_cut_before_it_is_read() -> None:
    """A name from an untrusted metrics.json may be megabytes: read as its first characters, in linear time."""
    name = "void " + "a::" * 300_000 + "k<" + " , " * 100_000 + ">"
    assert len(short_op_name(name)) <= LIMIT
