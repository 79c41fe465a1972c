"""The exit codes of every command (DESIGN.md): 0 pass or neutral, 1 regression, 2 bad input (config, baseline,
usage), 3 infrastructure failure (training crashed, GitHub unreachable), 130 interrupted."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_REGRESSION: Final = 1
EXIT_BAD_INPUT: Final = 2
EXIT_INFRA: Final = 3
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C


def verdict_exit_code(verdict: str) -> int:
    """A comparison's exit code: 1 for a regression, 3 for a crashed run, 0 otherwise (pass, neutral)."""
    return {"regression": EXIT_REGRESSION, "crashed": EXIT_INFRA}.get(verdict, EXIT_OK)
