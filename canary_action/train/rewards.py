"""Resolving what a config names by string into Python objects: reward functions and user factories.

`builtin:<name>` is one of ours; `package.module:function` is imported. A name that does not resolve is a
ConfigError raised in preflight, before any model is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog
from canary_action.train.builtin import rewards as builtin_rewards


def import_object(path: str, *, key: str) -> Callable[..., Any]:
    """`pkg.module:function` -> the function. `key` names the config key in the error message."""
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"{key}: cannot import module {module_name!r} ({error})",
            fix="install the package that provides it, or put its directory on PYTHONPATH",
        ) from error
    found = getattr(module, attribute, None)
    if not callable(found):
        raise ConfigError(f"{key}: module {module_name!r} has no callable {attribute!r}", fix="check the name")
    return found  # type: ignore[no-any-return]


def reward_function(name: str, *, max_new_tokens: int) -> Callable[..., Any]:
    builtin = catalog.split(name)
    if builtin is not None:
        return builtin_rewards.get(builtin, max_new_tokens=max_new_tokens)
    return import_object(name, key="reward_funcs")


def reward_functions(names: list[str], *, max_new_tokens: int) -> list[Callable[..., Any]]:
    return [reward_function(name, max_new_tokens=max_new_tokens) for name in names]
