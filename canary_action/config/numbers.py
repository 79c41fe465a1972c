"""Numbers in a config: YAML's `true` is neither a count nor a rate.

pydantic's lax mode reads `max_steps: true` as 1 and `learning_rate: true` as 1.0. Counts are strict: a whole
number as written (no `true`, no `2.0`, no `"2"`). Other numbers refuse a boolean but stay lax otherwise:
PyYAML reads `5e-5` (no dot: YAML 1.1) as a string, and configs written that way exist.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Strict


def _not_a_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {'true' if value else 'false'}")
    return value


#: Refuses true/false where a number (or a Literal of numbers) is expected.
NOT_A_BOOL = BeforeValidator(_not_a_bool)
#: A whole number as written.
Count = Annotated[int, Strict()]
#: A real number (an integer is one too), never true/false.
Number = Annotated[float, NOT_A_BOOL]
