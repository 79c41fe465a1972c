"""Optional parts of the install, checked before they are needed: training needs the `[train]` extra.

Shared by `canary run`/`canary pair` and `api.run`, so that a missing extra is the same error whichever way a
run was started: the extra to install, not a traceback ending in `No module named 'torch'`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Final

from canary_action.errors import MissingExtraError

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


def missing_training_stack(command: str, missing: Sequence[str]) -> MissingExtraError:
    return MissingExtraError(
        f"{command} trains, and the training stack (the [train] extra) is not installed: no {', '.join(missing)}",
        fix="pip install 'rlhf-canary[train]'; in a checkout, with the CI constraint file (it pins the training "
        "stack, a CPU torch where one is available): pip install -c requirements/ci-constraints.txt -e '.[train]' "
        "(compare and report need no extra)",
    )
