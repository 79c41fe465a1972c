"""Optional parts of the install, checked before they are needed: training needs the `[train]` extra.

Shared by `canary run`/`canary pair` and `api.run`, so that a missing extra is the same error whichever way a
run was started: the extra to install, not a traceback ending in `No module named 'torch'`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Sequence
from typing import Final

from canary_action.errors import MissingExtraError, UnsupportedStackError

#: What training imports from the `[train]` extra (pyproject.toml), by import name. Its nvidia-ml-py is left
#: out: it is imported only on CUDA machines, and a run goes on without GPU utilisation when it is missing.
TRAINING_STACK: Final = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "psutil")


def require_training_stack(command: str) -> None:
    """Raise MissingExtraError naming the extra when the training stack is not installed (found by name only:
    nothing is imported). `command`: what trains, as the message names it, e.g. "`canary run`"."""
    missing = []
    for name in TRAINING_STACK:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder that refuses it; a module object without a spec
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise missing_training_stack(command, missing)
    unsupported = unsupported_versions()
    if unsupported:
        raise UnsupportedStackError(
            f"{command} trains, and this environment's {'; '.join(unsupported)}",
            fix="upgrade it in your environment (the canary never replaces your training stack), or train in the "
            "Docker action, whose image holds a supported stack (docs/adopt.md#which-action)",
        )


def unsupported_versions() -> list[str]:
    """`trl 0.19.1 is outside the supported range trl<2,>=1.0`, for each package of the `[train]` extra that is
    installed at a version outside the extra's range, as the installed rlhf-canary declares it (pyproject.toml).
    Empty when rlhf-canary runs uninstalled (a source tree: no declared ranges) or `packaging` is missing."""
    try:
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:  # transformers depends on packaging: without it, nothing here could train anyway
        return []
    try:
        declared = importlib.metadata.requires("rlhf-canary") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found = []
    for line in declared:
        requirement = Requirement(line)
        if requirement.marker is None or not requirement.marker.evaluate({"extra": "train"}):
            continue
        if requirement.marker.evaluate({"extra": ""}):
            continue  # a core requirement: pip itself holds those
        try:
            installed = importlib.metadata.version(requirement.name)
            in_range = requirement.specifier.contains(Version(installed), prereleases=True)
        except importlib.metadata.PackageNotFoundError:
            continue  # optional at run time (nvidia-ml-py), or found missing above by import name
        except InvalidVersion:
            in_range = False
        if not in_range:
            found.append(f"{requirement.name} {installed} is outside the supported range {requirement.specifier}")
    return found


def missing_training_stack(command: str, missing: Sequence[str]) -> MissingExtraError:
    return MissingExtraError(
        f"{command} trains, and the training stack (the [train] extra) is not installed: no {', '.join(missing)}",
        fix="pip install 'rlhf-canary[train]'; in a checkout, with the CI constraint file (it pins the training "
        "stack, a CPU torch where one is available): pip install -c requirements/ci-constraints.txt -e '.[train]' "
        "(compare and report need no extra)",
    )
