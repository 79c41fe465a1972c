"""Hypothesis strategies shared by the tests that feed readers untrusted JSON."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Any JSON value (finite numbers: the readers refuse NaN/Infinity before parsing, tested apart).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def mutate_somewhere(doc: Any, data: st.DataObject) -> None:
    """Walk down `doc` to a random place and replace what is there with arbitrary JSON, in place."""
    node: Any = doc
    while isinstance(node, dict | list) and node:
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        if data.draw(st.booleans()) or not isinstance(node[key], dict | list) or not node[key]:
            node[key] = data.draw(JSON_VALUES)
            return
        node = node[key]
