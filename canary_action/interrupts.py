"""Interrupts that are not lost: Ctrl-C, and a cancelled CI job's SIGTERM, as KeyboardInterrupt.

Python raises the interrupt wherever the main thread is when the signal lands. Landing in a finaliser or a
garbage-collection callback, it is printed as "Exception ignored" and lost, and the run trains on (seen once
in CI: a run interrupted after step 1 trained 1,200 more steps). So the handler also remembers the signal, and
the training loop raises it again at its next step end (`raise_if_pending`, train/callback.py).
"""

from __future__ import annotations

import signal
from types import FrameType

_pending: list[int] = []


def install() -> None:
    """The handler for SIGINT and SIGTERM (the `canary` command's; a library caller keeps its own)."""
    signal.signal(signal.SIGINT, _handle)
    signal.signal(signal.SIGTERM, _handle)


def raise_if_pending() -> None:
    """Raise again an interrupt that was received but swallowed on its way up."""
    if _pending:
        raise _interrupt(_pending[-1])


def _handle(signum: int, frame: FrameType | None) -> None:
    _pending.append(signum)
    raise _interrupt(signum)


def _interrupt(signum: int) -> KeyboardInterrupt:
    # Ctrl-C as Python's own (no text: "interrupted (Ctrl-C)"); another signal named (cli._interrupted_message).
    return KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"signal {signum}")
