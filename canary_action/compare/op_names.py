"""Readable names for profiled ops: CUDA kernels carry their whole C++ signature.

`void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)
::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)` (300 characters in an H200 op table) reads as
`vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda, Array<…>>`: no return type, no parameter lists, no
namespaces, no lambdas, template arguments one level deep. The full name stays in metrics.json and result.json
(the op diff matches on it); only what people read is shortened.
"""

from __future__ import annotations

import re
from typing import Final

LIMIT: Final = 80
MAX_READ: Final = 2000  # the longest real kernel name seen was 850 characters
_ANONYMOUS: Final = "(anonymous namespace)::"
_NAMESPACE: Final = re.compile(r"[A-Za-z_]\w*::")
#: `::{lambda(float)#1}` and `::operator()() const`: where in a function a kernel's functor was defined.
_LOCAL: Final = re.compile(r"::(?:\{lambda\([^(){}]*\)#\d+\}|operator\(\)\(\) const)")


def short_op_name(name: str, limit: int = LIMIT) -> str:
    """An op's name as people read it; plain op names (`aten::mm`) are kept as they are."""
    name = name[:MAX_READ]  # a name from an untrusted metrics.json: the passes below stay linear in a short one
    if "<" not in name and "(" not in name and not name.startswith("void "):
        return name if len(name) <= limit else name[: limit - 1] + "…"
    short = name.removeprefix("void ").strip().replace(_ANONYMOUS, "")
    short = _NAMESPACE.sub("", _strip_parentheses(_LOCAL.sub("", short))).replace(" >", ">")
    short = re.sub(r",\s*,", ",", _shallow_templates(short))
    short = re.sub(r"\s*,\s*", ", ", short).replace(", >", ">").replace("<, ", "<").strip(" ,")
    return short if len(short) <= limit else short[: limit - 1] + "…"


def _strip_parentheses(text: str) -> str:
    """Every parenthesised group (parameter lists, casts) removed, nested ones too."""
    out, depth = [], 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    return "".join(out)


def _shallow_templates(text: str) -> str:
    """Template arguments kept one level deep: `A<B<C>, D>` becomes `A<B<…>, D>`."""
    out, depth = [], 0
    for char in text:
        if char == "<":
            depth += 1
            if depth == 2:
                out.append("<…")
            elif depth == 1:
                out.append(char)
        elif char == ">":
            if depth == 2:
                out.append(">")
            elif depth == 1:
                out.append(char)
            depth = max(depth - 1, 0)
        elif depth <= 1:
            out.append(char)
    return "".join(out)
