"""Resolving what a config names by string into Python objects: reward functions and user factories.

`builtin:<name>` is one of ours; `package.module:function` is imported. A name that does not resolve is a
ConfigError raised in preflight, before any model is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog
from canary_action.train.builtin import rewards as builtin_rewards

#: Set by the launcher (launch/environment.py, which this side of the run never imports): the run's code tree, and
#: the environment a `setup` command installed into.
CODE_TREE_ENV: Final = "CANARY_CODE_TREE"
SETUP_PREFIX_ENV: Final = "CANARY_SETUP_PREFIX"


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
    _refuse_an_installed_copy(module_name.partition(".")[0], key=key)


def _refuse_an_installed_copy(top: str, *, key: str) -> None:
    """Refuse a team package that the run's code tree holds but that is imported from an installed copy: the tree
    joins the import path after the installed packages (launch/environment.py), so a pull request's changes to a
    package installed in the environment would never be trained, and a pair would compare that copy with itself.
    A copy installed from the tree for this run (the `setup` command's environment) or an editable one is fine."""
    tree = os.environ.get(CODE_TREE_ENV)
    if not tree:
        return
    root = Path(tree).resolve()
    held = [place for place in (root / top, root / f"{top}.py", root / "src" / top) if place.exists()]
    spec = importlib.util.find_spec(top)
    if not held or spec is None:
        return
    origins = [Path(p) for p in (spec.submodule_search_locations or [])] or ([Path(spec.origin)] if spec.origin else [])
    ours = [root, *([Path(os.environ[SETUP_PREFIX_ENV]).resolve()] if os.environ.get(SETUP_PREFIX_ENV) else [])]
    if not origins or any(_under(origin.resolve(), place) for origin in origins for place in ours):
        return
    raise ConfigError(
        f"{key}: {top} is imported from {origins[0]}, an installed copy, not from the checked-out repository, which "
        f"holds {held[0].relative_to(root)}: the pull request's changes to it would not be trained (installed "
        "packages come first on the import path), and a lockstep pair would compare that copy with itself",
        fix="install it from the checkout for each run: the action's `setup` input (`canary pair --setup`) "
        "`pip install --no-deps .`, or an editable install (pip install -e .) in the environment",
    )


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


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
