"""Resolving what a config names by string into Python objects: reward functions and user factories.

`builtin:<name>` is one of ours; `package.module:function` is imported. A name that does not resolve is a
ConfigError raised in preflight, before any model is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog
from canary_action.train.builtin import rewards as builtin_rewards


def find_module(path: str, *, key: str) -> None:
    """Refuse `pkg.module:function` when its module is not there, without running the module (its package's
    `__init__` runs): precheck.py calls this before the heavy imports, import_object imports it later."""
    module_name = path.partition(":")[0]
    try:
        found = importlib.util.find_spec(module_name) is not None
    except ImportError as error:  # a missing or broken parent package
        raise _unimportable(key, module_name, error) from error
    if not found:
        raise _unimportable(key, module_name, ModuleNotFoundError(f"No module named {module_name!r}"))


def import_object(path: str, *, key: str) -> Callable[..., Any]:
    """`pkg.module:function` -> the function. `key` names the config key in the error message."""
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise _unimportable(key, module_name, error) from error
    found = getattr(module, attribute, None)
    if not callable(found):
        raise ConfigError(f"{key}: module {module_name!r} has no callable {attribute!r}", fix="check the name")
    return found  # type: ignore[no-any-return]


def _unimportable(key: str, module_name: str, error: ImportError) -> ConfigError:
    return ConfigError(
        f"{key}: cannot import module {module_name!r} ({error})",
        fix="install the package that provides it, or put its directory on PYTHONPATH",
    )


def reward_function(name: str, *, max_new_tokens: int) -> Callable[..., Any]:
    builtin = catalog.split(name)
    if builtin is not None:
        return builtin_rewards.get(builtin, max_new_tokens=max_new_tokens)
    return import_object(name, key="reward_funcs")


def reward_functions(names: list[str], *, max_new_tokens: int) -> list[Callable[..., Any]]:
    return [reward_function(name, max_new_tokens=max_new_tokens) for name in names]
