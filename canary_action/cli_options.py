"""Options several `canary` commands share, defined once: compare, pair and gh-report judge with the same
thresholds, so they take the same two flags (rlhf-canary 0.1's names); compare and pair accept a change of the
training numerics the same way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, get_args

import click

from canary_action.config.thresholds import Tier

F = TypeVar("F", bound=Callable[..., object])

#: `--accept-numerics-change` of `canary compare` and `canary pair` (the action's input accept-numerics-change).
ACCEPT_NUMERICS_HELP = (
    "Accept a lockstep pair's change of the training numerics: with fail_on_numerics_change set, it passes, said "
    "in the check (you read the change and mean it)."
)


def threshold_options(command: F) -> F:
    """`--threshold-tier` (passed as `tier`) and `--threshold-file`, in that order in --help."""
    command = click.option(
        "--threshold-file", type=click.Path(path_type=Path), help="Thresholds YAML (base_tier + overrides)."
    )(command)
    return click.option(
        "--threshold-tier",
        "tier",
        type=click.Choice(get_args(Tier)),
        default="default",
        show_default=True,
        help="The tier whose thresholds start the merge.",
    )(command)
